"""`mineru parse`: inputs -> plan -> resume check -> worker pool -> journal.

The main process discovers and plans the inputs, decides which pages still need work (resume),
and is the only writer of the journal. The pages themselves are parsed by worker processes
(`pipeline/`): each holds one engine and does load/render -> cache lookup -> engine -> cache
store on small batches of pages (`--page-batch`), so a page that hangs or crashes a native
library costs only that page. Every problem becomes a record, so one bad file never stops the
batch. The busy time of each stage (from the pages' timings) is summed here for the summary.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .budget import (
    DEFAULT_BATCH_WAIT_MS,
    DEFAULT_CROP_BATCH,
    DEFAULT_MAX_WORKER_RSS,
    DEFAULT_PAGE_TIMEOUT,
    CpuPlan,
    default_page_batch,
    plan_cpus,
)
from .core.errors import PageError, SetupError
from .core.record import PageRecord, _now, page_id, split_page_id
from .core.record import fingerprint as make_fingerprint
from .engines import make_engine
from .inputs import LoadOptions, OpenDocuments, SourceFile, discover, file_sha256, open_document, parse_page_ranges
from .journal import Journal
from .pipeline.worker import engine_kwargs
from .report import Reporter, StageTimes, Summary
from .units import parse_size

STOP_GRACE = 30.0   # after Ctrl-C / SIGTERM: how long pages in flight may take to finish


@dataclass
class ParseOptions:
    inputs: list[Path]
    out: Path
    engine: str = "auto"
    lang: str = "en"
    cpus: int | None = None
    workers: int | None = None             # None: from the CPU plan
    page_timeout: float = DEFAULT_PAGE_TIMEOUT
    max_worker_rss: int = parse_size(DEFAULT_MAX_WORKER_RSS)   # bytes; 0: never recycle
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    pages: str | None = None
    load: LoadOptions = field(default_factory=LoadOptions)
    force: bool = False
    retry_failed: bool = False
    cache_dir: Path | None = None          # None: no cache
    cache_near: str = "verify"
    cache_url: str | None = None
    cache_ttl: int = 7200
    model: str | None = None               # vlm: model folder or ONNX export (else env / HF cache)
    model_profile: str | None = None       # vlm: "2509" | "pro" (default: from the model folder)
    runtime: str = "auto"                  # vlm runtime: auto | onnx | torch
    formats: set[str] = field(default_factory=set)   # extra per-document outputs (writers.FORMATS)
    out_dir: Path = Path("mineru_output")  # where they go
    mode: str | None = None                # vlm | hybrid | ocr (None: vlm for the vlm engine, else ocr)
    page_batch: int | None = None          # pages a worker holds and parses together (None: per engine)
    batch_wait_ms: int = DEFAULT_BATCH_WAIT_MS   # a batch closes when full or no page came this long
    crop_batch: int = DEFAULT_CROP_BATCH   # vlm: crops decoded together (never changes the output)


@dataclass
class _Planned:
    """A source file after the planning pass: hashed and counted, or failed."""
    src: SourceFile
    sha256: str | None = None
    page_count: int | None = None
    indices: list[int] = field(default_factory=list)
    error: PageError | None = None
    stat: tuple[int, int] | None = None   # (size, mtime_ns) when it was hashed

    def changed_since_planned(self) -> bool:
        """Whether the file is no longer what was hashed (removed, rewritten) mid-run."""
        try:
            st = os.stat(self.src.path)
        except OSError:
            return True
        return (st.st_size, st.st_mtime_ns) != self.stat


@dataclass
class _Item:
    """One page for the worker pool (only src and index cross the process boundary)."""
    planned: _Planned
    index: int

    @property
    def src(self) -> SourceFile:
        return self.planned.src


class _Interrupts:
    """SIGINT/SIGTERM: the first asks the run to stop taking work (pages in flight finish,
    the journal is compacted, exit 130); a second one exits at once (the journal is valid:
    records are fsynced per line and compaction is an atomic rename)."""

    def __init__(self, reporter: Reporter):
        self.reporter = reporter
        self.count = 0
        self.pool = None
        self._previous: dict = {}

    @property
    def requested(self) -> bool:
        return self.count > 0

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handler(self, signum, frame) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1:
            self.reporter.warn(f"{name}: stopping; pages in flight may finish (up to {STOP_GRACE:g} s). "
                               "Press Ctrl-C again to stop at once.")
            return
        if self.pool is not None:
            self.pool.kill_all()
        sys.stderr.write(f"\n{name} again: stopped at once; the journal is valid, re-run to resume\n")
        sys.stderr.flush()
        os._exit(130)


def run_parse(opts: ParseOptions, reporter: Reporter) -> Summary:
    for p in opts.inputs:
        if not p.exists() and not p.is_symlink():
            raise SetupError(f"input not found: {p}")
    select = _page_filter(opts.pages)
    # The engine object here only names itself (identity, options -> fingerprint); the models
    # are loaded and run in the worker processes.
    engine = make_engine(opts.engine, threads=1, lang=opts.lang, say=reporter.info, warn=reporter.warn,
                         model=opts.model, model_profile=opts.model_profile, runtime=opts.runtime,
                         **engine_kwargs(opts.mode, opts.crop_batch))
    engine_info, fp = engine_fingerprint(engine, opts.load)
    mode = resolve_mode(opts.mode, engine)
    # Workers build the same engine the main process resolved (auto -> ocr | vlm, model folder).
    engine_spec = {"engine": engine.name, "mode": mode, "lang": opts.lang, "model_profile": opts.model_profile,
                   "runtime": getattr(engine, "runtime_name", opts.runtime),
                   "model": str(getattr(engine, "model_dir", "") or "") or None,
                   "crop_batch": opts.crop_batch, "batch_wait_ms": opts.batch_wait_ms,
                   "page_batch": opts.page_batch or default_page_batch(engine.name)}

    if opts.formats:
        _check_out_dir(opts.out_dir)
    summary = Summary()
    t0 = time.monotonic()
    with Journal(opts.out) as journal, _Interrupts(reporter) as stop:
        if journal.repaired_bytes:
            reporter.warn(f"{opts.out}: cut off a torn last line ({journal.repaired_bytes} bytes) "
                          "left by an interrupted run")
        if journal.bad_lines:
            reporter.warn(f"{opts.out}: {journal.bad_lines} lines that are not records will be dropped")
        order: list[str] = []
        plan: list[_Planned] = []
        try:
            out_dir = os.path.abspath(opts.out_dir) + os.sep
            for src in discover(opts.inputs, opts.include, opts.exclude):
                if stop.requested:
                    break
                if os.path.abspath(src.path).startswith(out_dir):
                    continue   # our own per-document output (crops are images): never an input
                plan.append(_plan(src, select, opts.load))
            unselected = [p.src.rel for p in plan if p.error is None and p.page_count and not p.indices]
            if unselected:
                reporter.warn(f"--pages selects no page of {len(unselected)} file(s), e.g. {unselected[0]}")
            order = [page_id(p.src.rel, i) for p in plan for i in (p.indices or [0])]
            summary.pages = len(order)
            reporter.start(summary.pages)
            ctx = _Context(opts, engine_info, engine_spec, fp, journal, reporter, summary)
            todo: list[_Item] = []
            for planned in plan:
                ctx.queue_source(planned, todo)
            if todo and not stop.requested:
                cpu = plan_cpus(opts.cpus, opts.workers, pages=len(todo), engine=engine_info["name"])
                todo = ctx.run_pool(todo, cpu, stop)       # -> the pages left undone
            summary.unfinished = len(todo) if stop.requested else 0
            summary.interrupted = stop.requested
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            journal.compact(order, drop=_vanished_pages(journal.index, plan))
        if opts.formats and not summary.interrupted:
            _write_documents(opts, plan, list(journal.records(_document_pages(journal.index, plan))), reporter)
    summary.seconds = time.monotonic() - t0
    return summary


def _check_out_dir(out_dir: Path) -> None:
    """--out-dir must be a folder we can create: found out before parsing, not after."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SetupError(f"--out-dir {out_dir} is a file, not a folder") from None
    except OSError as exc:
        raise SetupError(f"--out-dir {out_dir}: {exc.strerror or exc}") from None


def _document_pages(index, plan: list[_Planned]) -> list[str]:
    """Ids of every page the journal holds of this run's files, in file and page order: the
    per-document files are built from all of them, not only from the pages --pages chose now;
    but only from records of the file's current content (a page parsed before the file changed
    and not chosen now is left out, not mixed in)."""
    current = {p.src.rel: p.sha256 for p in plan}
    pages: dict[str, list[tuple[int, str]]] = {}
    for pid, entry in index.items():
        source, number = split_page_id(pid)
        if number is not None and source in current and entry.source_sha256 == current[source]:
            pages.setdefault(source, []).append((number, pid))
    return [pid for p in plan for _, pid in sorted(pages.get(p.src.rel, []))]


_FIXED_PAGE_COUNT = (".tif", ".tiff")   # images whose frame count no option changes (GIFs': --gif-frames)


def _vanished_pages(index, plan: list[_Planned]) -> list[str]:
    """Ids of pages past the current page count of a PDF or TIFF of this run (one that shrank):
    their old records would otherwise stay in the output for ever. GIFs are left alone (their
    frame count follows --gif-frames), and so is a file that fails to open now (its first page's
    record is the failure; it may be unreadable only for a moment)."""
    pages = {p.src.rel: p.page_count for p in plan if p.error is None
             and (p.src.kind == "pdf" or p.src.rel.lower().endswith(_FIXED_PAGE_COUNT))}
    gone = []
    for pid in index:
        source, number = split_page_id(pid)
        if source in pages and number is not None and number >= pages[source]:
            gone.append(pid)
    return gone


def _write_documents(opts: ParseOptions, plan: list[_Planned], records: list[dict], reporter: Reporter) -> None:
    """--format markdown / content-list: per-document files from `records` (_document_pages)."""
    from .writers import write_documents

    sources = {p.src.rel: p.src for p in plan}
    docs = OpenDocuments(opts.load)
    try:
        written = write_documents(records, opts.out_dir, opts.formats,
                                  lambda source, index: docs.get(sources[source]).page(index).image)
    finally:
        docs.close()
    reporter.info(f"wrote {len(written)} file(s) under {opts.out_dir}/")


def resolve_mode(mode: str | None, engine) -> str:
    """The mode the workers run: the engine's own when it has one, else --mode, else vlm for
    the vlm engine and ocr (the embedded OCR engine) otherwise."""
    resolved = getattr(engine, "mode", None) or mode or ("vlm" if engine.name == "vlm" else "ocr")
    if engine.name == "ocr" and resolved != "ocr":
        raise SetupError(f"--mode {resolved} needs the vlm engine (a MinerU2.5 model); "
                         "the ocr engine runs only --mode ocr")
    return resolved


def engine_fingerprint(engine, load: LoadOptions) -> tuple[dict, str]:
    """The record's `engine` field and the fingerprint that keys resume and the cache."""
    info = {"name": engine.name, "version": engine.version, "package": __version__,
            "model": engine.identity(), "options": engine.options()}
    return info, make_fingerprint(info, dataclasses.asdict(load))


def _page_filter(spec: str | None):
    try:
        return parse_page_ranges(spec)
    except ValueError as exc:
        raise SetupError(f"--pages {spec!r}: {exc}") from None


def _plan(src: SourceFile, select, load: LoadOptions) -> _Planned:
    if src.error is not None:
        return _Planned(src, error=src.error)
    try:
        st = os.stat(src.path)
        sha = file_sha256(src.path)
        with open_document(src, load) as doc:   # counts pages (GIF frames per --gif-frames); renders nothing
            count = doc.page_count
    except PageError as exc:
        return _Planned(src, error=exc)
    except OSError as exc:
        return _Planned(src, error=PageError("unreadable", "open", f"{type(exc).__name__}: {exc}"))
    indices = [i for i in range(count) if select is None or select(i + 1)]
    return _Planned(src, sha256=sha, page_count=count, indices=indices, stat=(st.st_size, st.st_mtime_ns))


def cache_spec(opts: ParseOptions) -> dict | None:
    """ResultCache keyword arguments for each worker (None: no cache)."""
    if opts.cache_dir is None:
        return None
    return {"path": opts.cache_dir, "near": opts.cache_near, "redis_url": opts.cache_url,
            "ttl_s": opts.cache_ttl}


@dataclass
class _Context:
    opts: ParseOptions
    engine_info: dict
    engine_spec: dict
    fp: str
    journal: Journal
    reporter: Reporter
    summary: Summary
    stages: StageTimes = field(default_factory=StageTimes)

    def record(self, planned: _Planned, index: int, **fields) -> dict:
        return PageRecord.from_dict({"source": planned.src.rel, "page_index": index,
                                     "page_count": planned.page_count, "engine": self.engine_info,
                                     "fingerprint": self.fp, "source_sha256": planned.sha256,
                                     "created": _now(), **fields}).as_dict()

    def emit(self, rec: dict, worker: dict | None = None) -> None:
        self.journal.append(rec)
        self._count(rec, resumed=False, worker=worker)

    def _count(self, rec: dict, resumed: bool, worker: dict | None = None) -> None:
        s = self.summary
        if resumed:
            s.resumed += 1
        elif rec["status"] == "ok":
            s.ok += 1
            if rec["cache"] and rec["cache"]["status"] in ("hit", "near-hit"):
                s.cached += 1
        if rec["status"] in ("failed", "timeout"):
            s.failed += 1
            s.failures.append((rec["id"], rec["error"]["message"] if rec["error"] else rec["status"]))
        elif rec["status"] == "skipped":
            s.skipped += 1
        self.reporter.page(rec, resumed=resumed, worker=worker)

    def done_before(self, planned: _Planned, index: int) -> bool:
        if self.opts.force:
            return False
        rec = self.journal.finished(page_id(planned.src.rel, index), planned.sha256, self.fp,
                                    self.opts.retry_failed)
        if rec is not None:
            self._count(rec, resumed=True)
        return rec is not None

    def queue_source(self, planned: _Planned, todo: list[_Item]) -> None:
        """Record a file that failed planning; add its pages that are not done yet to `todo`."""
        if planned.error is not None:
            if not self.done_before(planned, 0):
                status = planned.src.status if planned.error is planned.src.error else "failed"
                self.emit(self.record(planned, 0, status=status, error=planned.error.as_dict()))
            return
        todo.extend(_Item(planned, i) for i in planned.indices if not self.done_before(planned, i))

    def on_result(self, item: _Item, result, worker: dict) -> None:
        from .pipeline import PageFault

        if isinstance(result, PageFault):
            rec = self.record(item.planned, item.index, status=result.status, error=result.error,
                              timings={"total": result.seconds})
        else:
            rec = self.record(item.planned, item.index, **result)
            self.stages.add(result.get("timings") or {})
        if rec["status"] != "ok" and item.planned.changed_since_planned():
            # the page failed on content other than what was hashed (the file changed or went
            # away mid-run): no hash, so the next run tries it again instead of resuming a failure
            rec["source_sha256"] = None
        self.emit(rec, worker)

    def run_pool(self, todo: list[_Item], cpu: CpuPlan, stop: _Interrupts) -> list[_Item]:
        from .pipeline import WorkerPool

        opts = self.opts
        batch = self.engine_spec["page_batch"]
        self.reporter.info(f"pipeline: {cpu.workers} worker(s) x {cpu.threads} thread(s) "
                           f"(--cpus {cpu.budget}; {cpu.why}); page batch {batch}, "
                           f"mode {self.engine_spec['mode']}; {len(todo)} page(s) to do")
        spec = {**self.engine_spec, "threads": cpu.threads, "spinning": cpu.spinning,
                "env": cpu.thread_env(), "fp": self.fp, "load": opts.load, "cache": cache_spec(opts)}
        self.summary.plan = {**cpu.as_dict(), "page_batch": batch, "crop_batch": opts.crop_batch,
                             "batch_wait_ms": opts.batch_wait_ms, "mode": self.engine_spec["mode"]}
        t0 = time.monotonic()
        beat = {"next": t0}
        every = self.reporter.heartbeat_every

        def tick(stats) -> None:
            now = time.monotonic()
            if every is None or now < beat["next"]:
                return
            beat["next"] = now + every
            self.reporter.heartbeat({**stats.as_dict(),
                                     "pages_per_s": round(stats.done / max(1e-9, now - t0), 3),
                                     "stages": self.stages.shares(now - t0, cpu.workers)})

        pool = WorkerPool(cpu.workers, spec, opts.page_timeout, opts.max_worker_rss,
                          warn=self.reporter.warn, info=self.reporter.info, page_batch=batch)
        stop.pool = pool
        try:
            with pool:
                left = pool.run(todo, self.on_result, should_stop=lambda: stop.requested,
                                grace=min(STOP_GRACE, opts.page_timeout), on_tick=tick)
        finally:
            stop.pool = None
            self.summary.stages = self.stages.as_dict(time.monotonic() - t0, cpu.workers)
        self.summary.restarts = pool.stats.restarts
        self.summary.recycled = pool.stats.recycled
        self.summary.retried = pool.stats.retried
        return left
