"""The `mineru` command line. Thin: options in, runner out, exit code back."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import inspect
import os
import re
import shutil
import signal
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer
from rich.markup import escape
from typer.core import TyperGroup

from .config import (
    DEFAULT_CACHE_TTL,
    DEFAULT_MAX_WORKER_RSS,
    DEFAULT_OUT_DIR,
    CacheNear,
    EngineChoice,
    ExecutorChoice,
    GifFrames,
    LoadOptions,
    Mode,
    OutputFormat,
    RunConfig,
    Runtime,
    TextLayerChoice,
)
from .core.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_SETUP,
    OutputError,
    SetupError,
    in_words,
    is_permission,
)
from .streams import StdoutFailed, guard_standard_streams, is_stream
from .version import __version__
from .vlm.model_dir import ENV_VAR, LOCAL_DIRS, MINERU_CONFIG_ENV, not_a_folder

# Where a MinerU2.5 model is looked for without --model: vlm.model_dir.find_model's order
MODEL_SEARCH = (
    f"${ENV_VAR}, {', then '.join(d.as_posix() for d in LOCAL_DIRS)}, ~/mineru.json's (or "
    f"${MINERU_CONFIG_ENV}'s) models-dir, then the Hugging Face cache, then the ModelScope cache"
)

# One line per code: rich keeps the line breaks of a help text's later paragraphs
EXIT_CODES_HELP = (
    "Exit codes of mineru parse (merge, review, doctor and models say theirs in their --help):\n"
    + "\n".join(f"{code}: {meaning}" for code, meaning in EXIT_CODES)
)

LOG_JSON = "--log-json"
_ARGS = "mineru.args"  # ctx.meta: the command line as given, for a usage error with --log-json
# click's UsageError (an unknown option, a bad value, a missing argument), whose subclass typer
# exports: typer 0.12 takes it from click, later typers from the click they vendor
_UsageError: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _asks_json(group_ctx: Any, command: Any, words: List[str], exc: Any) -> bool:
    """Whether a usage error is of a command run with --log-json, as click parses its command
    line `words` (the words after the command's name): a word "--log-json" that is another
    option's value (`-o --log-json`) or a path after `--` asks for nothing. The line is parsed
    again, resiliently and past unknown options (the error itself may be what stopped click
    before it reached --log-json); "--log-json=1", which click refuses as a flag given a value,
    asks too."""
    if command is None or not any(LOG_JSON in getattr(p, "opts", ()) for p in command.params):
        return False
    if getattr(exc, "option_name", None) == LOG_JSON:
        return True
    try:
        parsed = command.make_context(
            command.name, list(words), parent=group_ctx, resilient_parsing=True, ignore_unknown_options=True
        )
    except _UsageError:
        return False
    return parsed.params.get("log_json") is True


class _Commands(TyperGroup):
    """mineru's commands: a usage error (an unknown option, a bad value, a missing argument) of
    a command given --log-json is one JSON `error` event on stderr, as its run's other errors
    are, and exits 2 as click does; without --log-json click prints it as ever."""

    def parse_args(self, ctx: Any, args: List[str]) -> List[str]:
        ctx.meta[_ARGS] = tuple(args)  # shared with the subcommand's context
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            args = list(ctx.meta.get(_ARGS, ()))
            # an option's missing or unwanted value ("-e" last, "--log-json=1") is raised with
            # no context: the command is the first word that names one (mineru's own options,
            # --version and --help, take no value)
            name = next((a for a in args if a in self.list_commands(ctx)), None)
            command = exc.ctx.command if exc.ctx is not None else name and self.get_command(ctx, name)
            words = args[args.index(name) + 1 :] if name is not None else []
            if not _asks_json(ctx, command, words, exc):
                raise
            from .report import JsonReporter

            where = exc.ctx.command_path if exc.ctx is not None else f"{ctx.command_path} {name}"
            JsonReporter().error(f"{exc.format_message().rstrip('.')}; try '{where} --help'")
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=_Commands,
    name="mineru",
    help="Batch document parsing on plain CPUs: folders of page images and PDFs in, "
    "one JSON line per page out (blocks with type, box and text, plus Markdown).\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool):
    if value:
        typer.echo(f"mineru-cli {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    pass


def _default(name: str):
    """A parse option's default, from RunConfig (the one place defaults live)."""
    f = RunConfig.__dataclass_fields__[name]
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


@app.command()
def parse(
    paths: List[Path] = typer.Argument(..., help="Files or folders (walked recursively, sorted).", show_default=False),
    out: Path = typer.Option(
        _default("out"), "--out", "-o", help="JSONL journal: one record per page; re-runs resume from it."
    ),
    engine: EngineChoice = typer.Option(
        _default("engine"), "--engine", "-e", help="auto: vlm when a MinerU2.5 model is found, else ocr."
    ),
    model: Optional[str] = typer.Option(
        _default("model"),
        "--model",
        "-m",
        help=f"vlm: MinerU2.5 model folder (default: the first found of {MODEL_SEARCH}).",
    ),
    model_profile: Optional[str] = typer.Option(
        _default("model_profile"),
        "--model-profile",
        metavar="2509|pro",
        help="vlm: the model's release (default: read from the model folder).",
    ),
    runtime: Runtime = typer.Option(
        _default("runtime"), "--runtime", help="vlm runtime: auto is onnx when an export is found, else torch."
    ),
    lang: str = typer.Option(
        _default("lang"),
        "--lang",
        help="OCR language hint (en, ch): recorded in the engine options; both read with the same OCR models.",
    ),
    cpus: Optional[int] = typer.Option(
        _default("cpus"), "--cpus", min=1, help="CPU budget (default: the affinity/cgroup limit)."
    ),
    include: List[str] = typer.Option([], "--include", help="Only files matching this glob (repeatable)."),
    exclude: List[str] = typer.Option([], "--exclude", help="Skip files matching this glob (repeatable)."),
    root: Optional[Path] = typer.Option(
        _default("root"),
        "--root",
        help="Page ids are paths relative to this folder (default: the inputs' common folder). Set it when "
        "the inputs change between runs, as a shell glob's do (mineru parse dump/* --root dump), so that "
        "ids, resume and --shard stay the same.",
        show_default=False,
    ),
    pages: Optional[str] = typer.Option(_default("pages"), "--pages", help="Pages to parse, 1-based: '1-3,7'."),
    dpi: int = typer.Option(
        LoadOptions.dpi, "--dpi", min=36, max=600, help="PDF render DPI (long side capped at 3500 px)."
    ),
    gif_frames: GifFrames = typer.Option(LoadOptions.gif_frames, "--gif-frames", help="Which GIF frames are pages."),
    text_layer: TextLayerChoice = typer.Option(
        LoadOptions.text_layer,
        "--text-layer",
        help="PDF pages: auto reads a page's own text where it can be trusted (each record's "
        "text_layer says whether it was used, and why not); off always reads the pixels.",
    ),
    force: bool = typer.Option(_default("force"), "--force", help="Re-parse pages that are already done."),
    retry_failed: bool = typer.Option(
        _default("retry_failed"),
        "--retry-failed",
        help="Re-parse pages whose record failed, and pages with a block the VLM could not read.",
    ),
    no_cache: bool = typer.Option(not _default("cache"), "--no-cache", help="Do not read or write the result cache."),
    cache_dir: Optional[Path] = typer.Option(
        _default("cache_dir"),
        "--cache-dir",
        # a folder it may not read is a cache the run goes on without (one warning), not a usage error
        readable=False,
        help="Result cache folder (default: $MINERU_CACHE_DIR or the user cache dir); {node} in it is each "
        "machine's host name (a node-local cache on a Ray cluster).",
    ),
    cache_near: CacheNear = typer.Option(
        _default("cache_near"), "--cache-near", help="verify: reuse verified near-duplicates."
    ),
    cache_url: Optional[str] = typer.Option(
        _default("cache_url"), "--cache-url", help="Shared tier: redis://host:port/db."
    ),
    cache_ttl: str = typer.Option(
        DEFAULT_CACHE_TTL, "--cache-ttl", help="How long a result lives in the shared tier (90s, 2h, 7d)."
    ),
    formats: List[str] = typer.Option(
        [],
        "--format",
        "-f",
        metavar="|".join(OutputFormat.values()),
        help="Also write per-document files: markdown (<stem>.md), "
        "content-list (MinerU's <stem>_content_list.json + <stem>.md + "
        "images/) or layout (<stem>_layout.pdf: boxes drawn, numbered in reading order). Repeatable, "
        "or several at once: -f markdown,layout.",
    ),
    out_dir: Optional[Path] = typer.Option(
        _default("out_dir"),
        "--out-dir",
        help="Folder for --format files, one sub-folder per document.",
        show_default=str(DEFAULT_OUT_DIR),
    ),
    workers: Optional[int] = typer.Option(
        _default("workers"),
        "--workers",
        min=1,
        help="Worker processes (default: from the CPU plan; see --explain-plan).",
    ),
    page_timeout: float = typer.Option(
        _default("page_timeout"),
        "--page-timeout",
        min=0.1,
        help="Seconds a page may take (a batch of n pages: n x this in the engine "
        "stage); then its worker is killed and restarted and the page gets a "
        "'timeout' record.",
    ),
    max_worker_rss: str = typer.Option(
        DEFAULT_MAX_WORKER_RSS,
        "--max-worker-rss",
        help="Restart a worker whose memory (RSS) is above this after a page (e.g. 3GB, 800MB, 2GiB; 0: never).",
    ),
    mode: Optional[Mode] = typer.Option(
        _default("mode"),
        "--mode",
        help="Default: vlm when the engine resolves to vlm; ocr: the embedded "
        "OCR engine. Part of the resume fingerprint.",
    ),
    page_batch: Optional[int] = typer.Option(
        _default("page_batch"),
        "--page-batch",
        min=1,
        max=64,
        help="Pages a worker holds and hands to its engine together "
        "(default: 1 for ocr, 4 for vlm). Never changes a record.",
    ),
    batch_wait_ms: int = typer.Option(
        _default("batch_wait_ms"),
        "--batch-wait-ms",
        min=0,
        max=60000,
        help="A page batch closes when full or when no further page arrived within this many milliseconds.",
    ),
    crop_batch: int = typer.Option(
        _default("crop_batch"),
        "--crop-batch",
        min=1,
        max=256,
        help="vlm: block crops decoded together. Never changes a record.",
    ),
    max_new_tokens: Optional[int] = typer.Option(
        _default("max_new_tokens"),
        "--max-new-tokens",
        min=1,
        help="vlm: the most tokens one answer may take (default: up to the model's context minus the prompt, "
        "as MinerU runs it). Part of the fingerprint.",
    ),
    image_analysis: bool = typer.Option(
        _default("image_analysis"),
        "--image-analysis/--no-image-analysis",
        help="vlm, Pro models: read image and chart blocks with MinerU's Image Analysis prompt (a chart's "
        "table, a picture's kind and description; a picture of a table or formula becomes one), as MinerU 4's "
        "VLM path does; off: they stay pictures without text, one crop fewer each. Part of the fingerprint.",
    ),
    shard: Optional[str] = typer.Option(
        _default("shard"),
        "--shard",
        help="K/N: parse only this machine's share of the files (1 <= K <= N, by a stable hash of each "
        "file's path under PATHS, which every machine must give alike); join the journals with `mineru merge`.",
    ),
    executor: ExecutorChoice = typer.Option(
        _default("executor"),
        "--executor",
        help=escape(
            "local: worker processes on this machine. ray: Ray actors (pip install 'mineru-cli[ray]'); "
            "a private local Ray instance unless --ray-address is given."
        ),
    ),
    ray_address: Optional[str] = typer.Option(
        _default("ray_address"),
        "--ray-address",
        help=escape(
            "With --executor ray: attach to this cluster (auto, HOST:PORT, or ray://HOST:PORT with ray[client]) "
            "instead of starting a private local instance."
        ),
    ),
    explain_plan: bool = typer.Option(
        False,
        "--explain-plan",
        help="Print how --cpus is split into workers x threads (and the batch sizes and mode) for the engine "
        "the run resolves, and exit (2 where the run would refuse the options).",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only failures (each failed page and the count) and errors; no progress, summary or "
        "warnings (for cron).",
    ),
    log_json: bool = typer.Option(
        False, LOG_JSON, help="One JSON object per event on stderr (usage errors too: exit 2)."
    ),
):
    """Parse every page under PATHS into OUT (JSON lines), resuming what is done.

    Pages are parsed by worker processes, in batches of --page-batch pages; a page that hangs
    or crashes its worker costs only that page (a batch that loses its worker is retried page
    by page). Ctrl-C or SIGTERM: pages in flight finish (up to 30 s), the journal is
    compacted, exit 130; a second Ctrl-C stops at once (the journal stays valid)."""
    from .report import make_reporter
    from .runner import run_parse

    reporter = make_reporter(quiet, log_json)
    try:
        config = RunConfig.from_options(
            tuple(paths),
            out=out,
            engine=engine,
            lang=lang,
            cpus=cpus,
            workers=workers,
            page_timeout=page_timeout,
            max_worker_rss=max_worker_rss,
            include=tuple(include),
            exclude=tuple(exclude),
            root=root,
            pages=pages,
            load=LoadOptions(dpi=dpi, gif_frames=gif_frames.value, text_layer=text_layer.value),
            force=force,
            retry_failed=retry_failed,
            cache=not no_cache,
            cache_dir=cache_dir,
            cache_near=cache_near,
            cache_url=cache_url,
            cache_ttl=cache_ttl,
            model=model,
            model_profile=model_profile,
            runtime=runtime,
            formats=frozenset(formats),
            out_dir=out_dir,
            mode=mode,
            page_batch=page_batch,
            batch_wait_ms=batch_wait_ms,
            crop_batch=crop_batch,
            max_new_tokens=max_new_tokens,
            image_analysis=image_analysis,
            shard=shard,
            executor=executor,
            ray_address=ray_address,
        )
        if explain_plan:
            from .runner import explain_plan as plan_of

            typer.echo(plan_of(config, reporter))
            raise typer.Exit(EXIT_OK)
        summary = run_parse(config, reporter)
    except SetupError as exc:
        reporter.error(str(exc))
        raise typer.Exit(EXIT_SETUP) from None
    except OutputError as exc:
        reporter.error(str(exc))
        raise typer.Exit(EXIT_OUTPUT) from None
    reporter.finish(summary, str(out))
    if summary.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_FAILED if summary.failed else EXIT_OK)


@app.command()
def bench(
    work_dir: Path = typer.Option(
        Path("models/bench"),
        "--work-dir",
        help="Where the random full-size model and its exports are built (reused by later runs; ~12 GB).",
    ),
    int8: bool = typer.Option(True, "--int8/--no-int8", help="Also measure the INT8 export."),
    int4: bool = typer.Option(False, "--int4", help="Also measure an INT4 (MatMulNBits) export."),
    rss: bool = typer.Option(True, "--rss/--no-rss", help="Measure each export's peak RSS in a fresh process."),
    roofline: bool = typer.Option(
        True,
        "--roofline/--no-roofline",
        help="Measure the machine's kernel roofline (fp32 and INT8 MatMul at the vision shapes, read "
        "bandwidth; a few seconds), each phase's fraction of it and the modelled page at it.",
    ),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Rounds (variants alternate); medians are reported."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="Threads (default: all CPUs)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON."),
):
    """Speed of the VLM runtimes on a full-size random-weight MinerU2.5 model.

    Compares the torch fp32 reference, ONNX Runtime fp32 and INT8 (and INT4) on a model of
    MinerU2.5's shape with random weights, built and exported on first use (needs the export extra).

    Prints vision seconds for the 1036x1036 layout image and for a typical crop set, prefill of a
    1400-token prompt, decode milliseconds per step at batch 1 and 8, the seconds of a modelled
    page (vlm, hybrid and standard mode), peak RSS and size of each export, and each variant's
    speed-up over torch fp32, measured alternately in one run; then the machine's kernel
    roofline, measured in the same run, each phase's achieved fraction of it, and the modelled
    page with every phase at it (the fastest page this machine's kernels allow each variant's
    weight kinds). The CPU model and its ISA flags head every run."""
    import json

    from rich.console import Console
    from rich.table import Table

    from .budget import available_cpus

    try:
        from .export.bench import bench_full_size, report_table, roofline_table
        from .vlm.int8_target import cpu_summary
    except ImportError as exc:
        typer.echo(
            f"error: mineru bench needs torch, transformers, onnx, onnxscript: "
            f"pip install 'mineru-cli[export]' ({exc})",
            err=True,
        )
        raise typer.Exit(EXIT_SETUP) from None
    cpu = cpu_summary()
    isa = " ".join(cpu["isa"]) or "no listed ISA flags"
    typer.echo(f"CPU: {cpu['model']} ({cpu['machine']}; {isa}); INT8 target {cpu['int8_target']}", err=True)
    report = bench_full_size(
        work_dir,
        threads=threads or available_cpus(),
        int8=int8,
        int4=int4,
        rss=rss,
        roofline=roofline,
        repeats=repeat,
        log=lambda m: typer.echo(m, err=True),
    )
    cols, rows = report_table(report)
    table = Table(
        title=f"mineru bench: medians of {repeat} alternating rounds, {report['threads']} threads",
        caption=f"{cpu['model']} ({cpu['machine']}; {isa}); INT8 target {cpu['int8_target']}",
    )
    for i, col in enumerate(cols):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    console = Console(width=max(160, Console().width))  # never squeezed in a log file
    console.print(table)
    if "roofline_fraction" in report:
        title, cols, rows = roofline_table(report)
        roof_table = Table(title=title, caption=f"{cpu['model']} ({cpu['machine']}; {isa})")
        for i, col in enumerate(cols):
            roof_table.add_column(col, justify="left" if i == 0 else "right", no_wrap=i == 0)
        for row in rows:
            roof_table.add_row(*row)
        console.print(roof_table)
    if json_out:
        json_out.write_text(json.dumps(report, indent=2, default=str))


@app.command("export")
def export_cmd(
    model: Optional[Path] = typer.Option(
        None, "--model", "-m", help=f"MinerU2.5 model folder (default: the first found of {MODEL_SEARCH})."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Export folder (default: MODEL/onnx, which `mineru parse` then finds by itself)."
    ),
    int8: bool = typer.Option(False, "--int8", help="INT8 weights (per-channel, ONNX Runtime's dynamic quantizer)."),
    int4: bool = typer.Option(
        False, "--int4", help="INT4 decoder weights (MatMulNBits, blocks of 32); the vision encoder INT8."
    ),
    float_lm_head: bool = typer.Option(
        False,
        "--float-lm-head",
        help="Keep the output layer in float32 with --int8/--int4 (closer "
        "logits; decoding steps 20-35% slower, 0.4 GB more).",
    ),
    bias_correction: bool = typer.Option(
        False,
        "--bias-correction",
        help="With --int8/--int4: correct the INT8 products' mean output shift, "
        "measured on rendered calibration pages (no speed cost; closer logits on "
        "the full-size random model, not on the trained tiny one). --target avx2 "
        "always corrects its 7-bit vision graph.",
    ),
    target: Optional[str] = typer.Option(
        None,
        "--target",
        show_default=False,
        help="With --int8/--int4: the CPU family the INT8 weights are for: "
        "auto (this CPU, the default), avx2 (right on every CPU), "
        "avx-vnni, avx512-vnni, amx (full 8-bit weights; CPUs "
        "without VNNI or AMX run them on slower exact kernels).",
    ),
    model_profile: Optional[str] = typer.Option(
        None,
        "--model-profile",
        metavar="2509|pro",
        help="The release to record in the manifest when the model's files cannot tell "
        "(default: read from its config.json and preprocessor_config.json).",
    ),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Compare with PyTorch and record the parity."),
    force: bool = typer.Option(False, "--force", help="Replace an existing export in OUT."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="Threads (default: all CPUs)."),
):
    """Export MinerU2.5 to ONNX, optionally quantized, verified against PyTorch.

    Writes the vision encoder and the decoder with KV cache, the embedding table and
    manifest.json (file hashes, versions, quantization with its CPU target and the CPU it was
    made on, parity figures). INT8 weights follow --target: on CPUs without VNNI or AMX (plain
    AVX2) they are signed 7-bit, which that CPU's fast integer kernel multiplies without overflow
    (the vision graph bias-corrected); an export made for VNNI/AMX runs there on ONNX Runtime's
    exact but slower kernels. Needs the export
    extra: torch, transformers, onnx, onnxscript."""
    import json

    from .budget import available_cpus
    from .vlm.model_dir import resolve_model

    try:
        if int8 and int4:
            raise SetupError("choose one of --int8 and --int4")
        model_dir = resolve_model(str(model) if model else None)
        try:
            from .export import export_model
        except ImportError as exc:
            raise SetupError(
                f"mineru export needs torch, transformers, onnx and onnxscript: "
                f"pip install 'mineru-cli[export]' ({exc})"
            ) from None
        out = out or model_dir / "onnx"
        with _sigterm_as_ctrl_c():
            report = export_model(
                model_dir,
                out,
                int8=int8,
                int4=int4,
                verify=verify,
                force=force,
                threads=threads or available_cpus(),
                log=typer.echo,
                quantize_lm_head=not float_lm_head,
                bias_correction=bias_correction,
                target=target,
                profile=model_profile.lower() if model_profile else None,
            )
    except SetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_SETUP) from None
    except OSError as exc:  # the unfinished folder is removed; what failed decides the exit code
        code, message = _export_failed(out or Path("."), exc)
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(code) from None
    typer.echo(
        json.dumps(
            {k: report.get(k) for k in ("out_dir", "quantization", "parity", "timings", "bytes")}, indent=2, default=str
        )
    )


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM stops an export as Ctrl-C does, exit 130: a KeyboardInterrupt, on which the export
    removes its unfinished OUT.partial and its lock and leaves OUT as it was (`__main__` takes
    SIGTERM so too, but not when the CLI is entered another way). A second SIGTERM ends the
    process at once, as Python's default does. A SIGTERM our parent ignores stays ignored."""

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# a disk that takes no more: no space, a quota, a file-size limit (exit 3, with the free space)
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# numpy's file writes (np.save, onnx_ir's external data) raise a failed write without its errno;
# a write to a file open for writing fails that way on a disk that takes no more
_NUMPY_WRITE_FAILED = re.compile(r"problem writing element \d+|\d+ requested and \d+ written")


def _export_failed(out: Path, exc: OSError) -> tuple[int, str]:
    """The exit code and what a user reads when an export failed on a file. A disk that takes no
    more, a read-only one or an I/O error is the output that could not be written (exit 3): a
    full disk is said with the free space where the export goes (the ONNX writers' own words may
    lack the cause); anything else (a source file unreadable or missing, a file where OUT's
    folder goes, no permission) is a set-up error (exit 2), said as the path and why."""
    path = exc.filename or out
    why = f"{exc.filename}: {in_words(exc)}" if exc.filename else in_words(exc)
    kept = "nothing of it was kept and an export already there is unchanged"
    if exc.errno in _DISK_FULL or (exc.errno is None and _NUMPY_WRITE_FAILED.search(str(exc))):
        folder = out.absolute()
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            free = f"{shutil.disk_usage(folder).free / 1e6:.1f} MB free in {folder}"
        except OSError:
            free = f"{folder} unreadable"
        return EXIT_OUTPUT, (
            f"the export to {out} failed ({why}; {free}); {kept}: free space (or choose another --out) and run it again"
        )
    if exc.errno == errno.EROFS:
        return (
            EXIT_OUTPUT,
            f"the export to {out} failed: {path} is on a read-only file system; {kept}: choose another --out",
        )
    if exc.errno == errno.EIO:
        return EXIT_OUTPUT, f"the export to {out} failed: {why}; {kept}"
    if is_permission(exc) and not os.path.isfile(path):  # a folder it may not write in, not a file to read
        # the default --out is in the model folder, which is often shared and read-only
        return (
            EXIT_SETUP,
            f"the export to {out} failed: {why}; {kept}: choose another --out (a folder this user may write in)",
        )
    return EXIT_SETUP, f"the export to {out} failed: {why}; {kept}"


@app.command()
def merge(
    journals: List[Path] = typer.Argument(
        ..., help="Journals to join (e.g. one per --shard machine).", show_default=False
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The joined journal (created, or merged into if it exists)."),
):
    """Join journals into OUT with one record per page: where several hold a page, its ok record
    wins over a failed one, then the later one. OUT resumes like any journal.

    Exit 0 when joined, 2 when a journal is missing or no journal or OUT cannot be opened as one (a
    folder, a named pipe or a device, another run's lock): nothing is written; 3 when OUT could
    not be written (it holds what was written, whole)."""
    from .journal import merge as merge_journals

    try:
        merged = merge_journals(out, journals, warn=lambda m: typer.echo(f"warning: {m}", err=True))
    except SetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_SETUP) from None
    except OutputError as exc:  # a full disk: OUT holds what was written, whole
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_OUTPUT) from None
    itself = f" ({out} itself and {len(journals)} given)" if merged.out_held else ""
    typer.echo(
        f"{out}: {merged.pages} page(s) from {merged.journals} journal(s){itself}; "
        f"{merged.duplicates} found in more than one"
    )
    if merged.renamed:
        longer, shorter = merged.renamed[0]
        typer.echo(
            f"warning: {len(merged.renamed)} page(s) are in {out} twice, under ids from two different roots "
            f"({longer} and {shorter}): the journals were made with different --root or from different "
            "folders; give every shard's run the same --root",
            err=True,
        )


@app.command()
def review(
    records: Path = typer.Argument(..., help="The journal (results.jsonl) of a run.", show_default=False),
    html: Path = typer.Option(Path("report.html"), "--html", help="The page to write."),
    root: Optional[Path] = typer.Option(
        None, "--root", help="The folder the records' source paths are under (default: the current folder)."
    ),
    no_images: bool = typer.Option(False, "--no-images", help="No page thumbnails (boxes on a blank page)."),
):
    """Write one self-contained HTML page to look at a run: the summary, the failures (kind,
    stage, message) and every page's thumbnail with its boxes overlaid (click a box for its
    text, HTML or LaTeX), with filters by status, block type, source and document. It opens from
    file:// with no server or network; thumbnails are rendered again from the sources under
    --root (a file changed since it was parsed gets none).

    Exit 0 when written, 2 when the journal is missing or no journal or --html is a folder or in
    one that does not exist, 3 when the page could not be written (nothing is written, but a
    pipe or device may have taken the page's start)."""
    from .journal import check_journal
    from .review import write_review

    try:
        check_journal(records)
    except SetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_SETUP) from None
    if (problem := _html_problem(html)) is not None:  # before the thumbnails are made
        typer.echo(f"error: --html {html}: {problem}", err=True)
        raise typer.Exit(EXIT_SETUP)
    try:
        stats = write_review(records, html, root, images=not no_images, log=lambda m: typer.echo(m, err=True))
    except OSError as exc:  # a full disk, mostly: the page is written whole or not at all
        why = exc.strerror or exc
        if is_stream(html):  # but a pipe's reader may have taken its start (`| head`)
            said = f"could not be written whole ({why}); the page is cut short there"
        else:
            said = f"could not be written ({why}); nothing was written"
        typer.echo(f"error: --html {html} {said}", err=True)
        raise typer.Exit(EXIT_OUTPUT) from None
    typer.echo(
        f"{html}: {stats.pages} page(s), {stats.images} image(s)"
        + (f" ({stats.missing} left out)" if stats.missing else "")
        + f", {stats.bytes / 1e6:.1f} MB",
        err=is_stream(html),  # on /dev/stdout it would be a line of the page
    )


def _html_problem(html: Path) -> str | None:
    """Why the review page cannot be written at `html`, in what the user can change, or None."""
    if html.is_dir():
        return f"is a folder; give a file name (e.g. {html / 'report.html'})"
    folder = html.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return f"its folder {folder} {what}: create it or choose another --html"
    return None


@app.command()
def doctor(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The model folder parse is given, if any."),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", readable=False, help="The result cache folder parse is given."
    ),
    cache_url: Optional[str] = typer.Option(None, "--cache-url", help="The shared tier parse is given (redis://...)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Parse runs without the result cache."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object: {ok, checks: [{name, status, detail, fix}]}"),
):
    """What this machine and installation can do and what is wrong, one line per check with its
    fix: CPU and usable cores (affinity, cgroup quota), ISA flags and the INT8 kernels exports
    use, onnxruntime and the OCR models, each MinerU2.5 model and export (verified against its
    manifest), the cache folder, the shared cache, the optional extras. Nothing is changed (no
    folder is made). Exit 1 when a check failed: parse would refuse to run (a damaged model or
    export, no onnxruntime or OCR models) or run degraded, with a warning (a cache folder it
    cannot write, a --cache-url that does not answer); else 0."""
    import json

    from .doctor import as_json, failed, run_checks

    checks = run_checks(model=model, cache_dir=cache_dir, cache_url=cache_url, cache=not no_cache)
    if json_out:
        typer.echo(json.dumps(as_json(checks), indent=2))
    else:
        for check in checks:
            typer.echo(check.line())
    raise typer.Exit(EXIT_FAILED if failed(checks) else EXIT_OK)


@app.command()
def schema():
    """Print the JSON Schema of a page record."""
    import json

    from .core.record import load_schema

    typer.echo(json.dumps(load_schema(), indent=2))


# no help= here: `mineru models --help` shows the callback's docstring, exit codes included
models_app = typer.Typer(invoke_without_command=True)


@models_app.callback()
def models(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Also look at this folder (as parse --model)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object: {ok, entries: [...]}."),
):
    """List every model folder and export found (--model, $MINERU_MODEL_PATH, ./models, ~/mineru.json's
    models-dir, the Hugging Face and ModelScope caches, onnx/ inside each): where, which release
    (read from its files), size, export format and quantization, whether its files match their
    manifest. Exit 0 when all are whole and MinerU2.5, 1 when one is damaged or not MinerU2.5 or
    none is found, 2 when --model is no folder."""
    if ctx.invoked_subcommand is not None:
        return
    from .models import all_ok, discover, render

    if model and not (given := Path(model).expanduser()).is_dir():
        # a folder the user names is never skipped without a word (parse refuses it too)
        typer.echo(f"error: --model {model}: {not_a_folder(given)}", err=True)
        raise typer.Exit(EXIT_SETUP)
    entries = discover(model)
    typer.echo(render(entries, json_out))
    raise typer.Exit(EXIT_OK if all_ok(entries) else EXIT_FAILED)


@models_app.command("verify")
def models_verify(
    path: Path = typer.Argument(..., help="A model folder or ONNX export (or a model folder holding onnx/)."),
    json_out: bool = typer.Option(False, "--json", help="The entry as JSON."),
):
    """Check one model folder or export fully: every file of an export hashed again against its
    manifest, a model folder's safetensors against their headers (and their Hugging Face cache
    blobs' sha256), its release from its files. Exit 0 when whole, 1 when not (a folder without a
    model or export in it too), 2 when PATH is no folder."""
    from .models import render, verify

    try:
        entry = verify(path)
    except SetupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_SETUP) from None
    typer.echo(render([entry], json_out))
    raise typer.Exit(EXIT_OK if entry.ok else EXIT_FAILED)


app.add_typer(models_app, name="models")

from .cache.cli import cache_app  # noqa: E402  (a light import: sqlite3, typer)

app.add_typer(cache_app, name="cache", help="Inspect and manage the result cache.")


def _reflowed(doc: str) -> str:
    """A docstring's paragraphs each on one line: rich keeps the line breaks of a help text's
    later paragraphs, which then break mid-sentence at any terminal width."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def _first_sentence(doc: str) -> str:
    """What a command list shows of a command: its help's first sentence (typer shows the
    whole first paragraph)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", _reflowed(doc).split("\n\n")[0])[0]


def _reflow_help(group: typer.Typer) -> None:
    """Every command's and sub-group's help text in `group` (and below) reflowed, with its first
    sentence as the command list's line."""
    for command in group.registered_commands:
        doc = command.callback.__doc__ if command.callback else None
        if command.help is None and doc:
            command.help, command.short_help = _reflowed(doc), _first_sentence(doc)
    for sub in group.registered_groups:
        callback = sub.typer_instance.registered_callback if sub.typer_instance else None
        doc = callback.callback.__doc__ if callback and callback.callback else None
        if callback and doc:
            callback.help, callback.short_help = _reflowed(doc), _first_sentence(doc)
        if sub.typer_instance:
            _reflow_help(sub.typer_instance)


_reflow_help(app)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    guard_standard_streams()  # a full log disk or a closed pipe does not stop the work (streams.py)
    try:
        app()
    except StdoutFailed as exc:
        if exc.errno == errno.EPIPE:  # `mineru schema | head -1`: the reader has what it wanted
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        typer.echo(f"error: standard output: {exc.why}", err=True)
        raise SystemExit(EXIT_OUTPUT) from None


if __name__ == "__main__":
    main()
