"""Speed of the runtimes on a random-weight model with MinerU2.5's shapes.

Cost does not depend on weight values, so a random model built from the real config shape
measures speed honestly (never quality). Variants run alternately in one process and the
report gives medians and ratios to the first variant (absolute times drift on shared machines).

    bench_full_size(work_dir, threads=2)   # builds, saves and exports the 1.16B model: slow,
                                           # ~15 GB of disk and much RAM on the first call
    bench_runtimes({"torch": rt1, "onnx": rt2}, hidden, vocab, ...)   # any Runtime objects

Measured per variant: vision seconds for one image (default 1036x1036 = 5476 patches) and for
crops of 400, 2000 and 4800 patches, prefill seconds for a prompt of `prefill_tokens` (a 4-token
image + text), decode ms per step at each batch size (one step appends one token to every row);
per export, its bytes on disk and the peak RSS of a fresh process running it (peak_rss).
`page_seconds` turns one variant's medians into the seconds of a modelled two-step page.
bench_full_size also measures the machine's kernel roofline in the same run (roofline.py: fp32
and INT8 MatMul at the vision shapes, read bandwidth) and each phase's fraction of it.

Imports torch (the reference runtime and model building).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable, TypedDict

import numpy as np

from ..vlm import openvino_vision
from ..vlm.int8_target import cpu_summary, detect_target, graphs_needing_exact_kernels, made_for
from ..vlm.processor import rope_index
from ..vlm.tokenizer import VlmInput
from .roofline import BANDWIDTH_BYTES, best_of, decoder_weights, measure_roofline, phase_fractions, phase_seconds


class _TokenIds(TypedDict):
    """Qwen2VLConfig's special token ids (its keyword arguments of those names)."""

    image_token_id: int
    video_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int


# MinerU2.5-2509-1.2B's config.json shape (vocab, layers, heads, mrope ...); ids as in the model
MINERU25_TEXT = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    bos_token_id=151643,
    eos_token_id=151645,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [8, 12, 12]},
)  # sums to head_dim / 2 = 32
MINERU25_VISION = dict(
    depth=32,
    embed_dim=1280,
    hidden_size=896,
    num_heads=16,
    mlp_ratio=4,
    patch_size=14,
    temporal_patch_size=2,
    spatial_merge_size=2,
    in_channels=3,
)
MINERU25_IDS = _TokenIds(
    image_token_id=151655, video_token_id=151656, vision_start_token_id=151652, vision_end_token_id=151653
)

OPENVINO_VARIANT = "onnx_int8_openvino"  # the INT8 export with its vision encoder on OpenVINO (bf16)
DECODE_CONTEXT = 520  # tokens in each decode row's prompt: a 2000-patch crop's prompt
DECODE_STEPS = 16  # steps timed per decode row set

# A typical two-step page, for `page_seconds`: the layout step generates LAYOUT_TOKENS tokens at
# batch 1; then CROPS are read: each crop's vision is measured at its size (CROP_IMAGES), its
# prompt is prefilled (cost scaled from the measured prefill by token count), and the crops decode
# in batches of 8 with per-sequence stopping, so a batch costs as many steps as its longest crop.
# Hybrid mode reads text blocks with the embedded OCR, which runs beside the layout step, so only
# the table and equation crops go through the VLM. Standard mode has no VLM layout step either
# (the embedded layout model finds the blocks, about a second on a CPU; not in this model): its
# VLM work is the table and equation crops alone.
LAYOUT_TOKENS = 360
CROPS = (
    [("text", 400, 30)] * 4 + [("text", 2000, 150)] * 6 + [("table", 4800, 400)] * 2 + [("equation", 400, 40)] * 2
)  # (block type, patches, generated tokens)
CROP_IMAGES = {400: (280, 280), 2000: (560, 700), 4800: (840, 1120)}  # patches -> image (h, w) px
LAYOUT_PATCHES = 74 * 74
PREFILL_TOKENS = 1400
PROMPT_TOKENS = 20  # chat template + prompt around a crop's image tokens


def mineru25_config(text: dict | None = None, vision: dict | None = None):
    """A Qwen2VLConfig with MinerU2.5's shapes (override any field with `text` / `vision`)."""
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(
        text_config={**MINERU25_TEXT, **(text or {})},
        vision_config={**MINERU25_VISION, **(vision or {})},
        tie_word_embeddings=True,
        architectures=["Qwen2VLForConditionalGeneration"],
        **MINERU25_IDS,
    )


def random_model(config, seed: int = 0):
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(seed)
    return Qwen2VLForConditionalGeneration(config).float().eval()


def synthetic_input(config, image_hw: tuple[int, int], text_tokens: int, seed: int = 0) -> VlmInput:
    """A request of one image of image_hw pixels (multiples of 28) followed by `text_tokens`
    random text tokens; random pixels."""
    rng = np.random.default_rng(seed)
    v = config.vision_config
    p, m = int(v.patch_size), int(v.spatial_merge_size)
    h, w = image_hw[0] // p, image_hw[1] // p
    n_img = h * w // (m * m)
    patch_dim = int(v.in_channels * v.temporal_patch_size * p * p)
    image_id = int(config.image_token_id)
    vocab = int(config.text_config.vocab_size)
    text = rng.integers(0, min(vocab, 151643), size=text_tokens)  # below the special tokens
    text[text == image_id] = 0
    ids = np.concatenate(
        [[int(config.vision_start_token_id)], np.full(n_img, image_id), [int(config.vision_end_token_id)], text]
    ).astype(np.int64)
    grid = np.asarray([[1, h, w]], dtype=np.int64)
    positions, delta = rope_index(ids, grid, image_id, m)
    pixels = rng.standard_normal((h * w, patch_dim)).astype(np.float32)
    return VlmInput(ids, pixels, grid, positions, delta)


def _seconds(fn: Callable[..., object], *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def bench_runtimes(
    runtimes: dict,
    config,
    image_hw=(1036, 1036),
    prefill_tokens: int = PREFILL_TOKENS,
    decode_batches=(1, 8),
    decode_steps: int = DECODE_STEPS,
    decode_context: int = DECODE_CONTEXT,
    repeats: int = 3,
    crop_sizes: dict | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Medians over `repeats` rounds, the variants alternating within each round.
    crop_sizes: {patches: image_hw} of crop images whose vision seconds are measured too
    (default: the three sizes of the modelled page's CROPS)."""
    import torch

    crop_sizes = CROP_IMAGES if crop_sizes is None else crop_sizes
    crop_x = {n: synthetic_input(config, hw, 8, seed=3) for n, hw in crop_sizes.items()}
    vision_x = synthetic_input(config, image_hw, 8, seed=1) if image_hw else None
    prefill_x = synthetic_input(config, (56, 56), prefill_tokens - 6, seed=2) if prefill_tokens else None
    # decode rows with a crop-sized prompt (a 2000-patch crop is ~520 tokens): a step reads the
    # whole KV cache, so context length matters as much as the batch
    decode_x = [
        synthetic_input(config, (56, 56), decode_context + 3 * i, seed=10 + i) for i in range(max(decode_batches))
    ]
    times: dict[str, dict[str, list[float]]] = {name: {} for name in runtimes}

    def add(name, key, value):
        times[name].setdefault(key, []).append(value)
        if log:
            log(f"{name} {key}: {value:.3f}")

    for _ in range(repeats):
        for name, rt in runtimes.items():
            with torch.inference_mode():
                if image_hw:
                    add(name, "vision_s", _seconds(rt.image_embeds, [vision_x]))
                for n, x in crop_x.items():
                    add(name, f"vision_s_{n}", _seconds(rt.image_embeds, [x]))
                if prefill_tokens:
                    add(name, "prefill_s", _seconds(rt.prefill, [prefill_x]))
                for b in decode_batches:
                    logits = rt.prefill(decode_x[:b])
                    tokens = np.asarray(logits).argmax(-1).astype(np.int64)
                    t0 = time.perf_counter()
                    for _ in range(decode_steps):
                        tokens = np.asarray(rt.step(tokens)).argmax(-1).astype(np.int64)
                    add(name, f"decode_ms_b{b}", 1000 * (time.perf_counter() - t0) / decode_steps)
    medians = {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}
    first = next(iter(medians))
    ratios = {name: {k: medians[first][k] / v for k, v in m.items() if v > 0} for name, m in medians.items()}
    return {
        "median": medians,
        "speedup_vs_" + first: ratios,
        "repeats": repeats,
        "image_hw": list(image_hw) if image_hw else None,
        "prefill_tokens": prefill_tokens,
        "decode_batches": list(decode_batches),
        "decode_steps": decode_steps,
    }


def write_model_folder(model, folder: Path) -> Path:
    """save_pretrained plus the files a model folder needs (a placeholder tokenizer.json and
    the real preprocessor config), so export_model takes it."""
    from tokenizers import Tokenizer, models

    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    Tokenizer(models.BPE()).save(str(folder / "tokenizer.json"))
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {"min_pixels": 3136, "max_pixels": 1605632, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}
        )
    )
    return folder


def _bytes(manifest: dict, skip: str | None = None) -> int:
    """The export's size without the graph file `skip` and its external data."""
    files = manifest["files"]
    return sum(f["bytes"] for path, f in files.items() if not (skip and path in (skip, skip + ".data")))


def _readable(export_dir: Path) -> bool:
    """Whether export_dir holds an export this mineru-cli reads (not missing, not of an older format)."""
    from ..core.errors import SetupError
    from ..vlm.export_format import read_manifest

    try:
        read_manifest(export_dir)
        return True
    except SetupError:
        return False


def bench_full_size(
    work_dir: str | Path,
    threads: int = 2,
    int8: bool = True,
    repeats: int = 3,
    config=None,
    log: Callable[[str], None] | None = print,
    int4: bool = False,
    rss: bool = True,
    roofline: bool = True,
    bandwidth_bytes: int | None = None,
    **bench_kw,
) -> dict:
    """Build (or reuse) the random full-size model and its exports under work_dir, then
    compare torch fp32, ORT fp32 and (with int8 / int4) the quantized exports; with rss, each
    export's peak RSS is measured first in a fresh process (peak_rss); with roofline, the
    machine's kernel roofline before and after the variants, the faster taken
    (report["roofline"]), each variant's fraction of it per phase (report["roofline_fraction"])
    and its page at it (report["roofline_page_s"]). Where ONNX Runtime's
    OpenVINO plugin runs the vision encoder in bf16 here (openvino_vision.not_here), the INT8
    export also carries its OpenVINO vision graph and is measured a second time with it
    (OPENVINO_VARIANT; measured, not used for parsing); if that variant fails, the report's
    "skipped" says why and the others are measured."""
    import torch

    from ..core.errors import SetupError
    from ..vlm.export_format import is_export_dir, read_manifest
    from ..vlm.runtime_onnx import OnnxRuntime
    from ..vlm.runtime_torch import TorchRuntime
    from .onnx_export import export_model

    work_dir = Path(work_dir)
    torch.set_num_threads(threads)
    config = config or mineru25_config()
    folder = work_dir / "model"
    if not (folder / "config.json").is_file():
        model = random_model(config)
        write_model_folder(model, folder)
        del model  # the export and the torch runtime load it back: one copy in memory at a time
    exports = {"onnx_fp32": work_dir / "onnx-fp32"}
    if int8:
        exports["onnx_int8"] = work_dir / "onnx-int8"
    if int4:
        exports["onnx_int4"] = work_dir / "onnx-int4"
    # where OpenVINO can run the vision encoder in bf16, the INT8 export carries its graph too and
    # is measured twice: vision on onnxruntime (onnx_int8) and on OpenVINO (onnx_int8_openvino)
    openvino = int8 and not openvino_vision.not_here()
    report: dict = {
        "threads": threads,
        "cpu": cpu_summary(),
        "export_timings": {},
        "bytes": {},
        "peak_rss": {},
        "int8_target": {},
    }
    variants = {name: (out, openvino_vision.ONNXRUNTIME) for name, out in exports.items()}
    if openvino:
        variants[OPENVINO_VARIANT] = (exports["onnx_int8"], openvino_vision.OPENVINO)
    for name, out in exports.items():
        with_openvino = openvino and name == "onnx_int8"
        # missing, written by an older mineru-cli, quantized for another CPU family (whose
        # weights would run on the slower exact kernels here) or by an earlier rule for this one,
        # or lacking the OpenVINO graph: replaced
        made = read_manifest(out) if _readable(out) else None
        if (
            made is None
            or graphs_needing_exact_kernels(made)
            or (name != "onnx_fp32" and not made_for(made.get("quantization"), detect_target()))
            or (with_openvino and openvino_vision.GRAPH_ROLE not in made["graphs"])
        ):
            r = export_model(
                folder,
                out,
                int8=name.endswith("int8"),
                int4=name.endswith("int4"),
                verify=False,
                threads=threads,
                log=log,
                force=is_export_dir(out),
                openvino=with_openvino,
            )
            report["export_timings"][name] = r["timings"]
        manifest = read_manifest(out)
        # what each variant loads: the folder less the other variant's vision graph
        ov_graph = manifest["graphs"].get(openvino_vision.GRAPH_ROLE)
        report["bytes"][name] = _bytes(manifest, skip=ov_graph)
        report["int8_target"][name] = (manifest.get("quantization") or {}).get("target")
        if with_openvino:
            report["bytes"][OPENVINO_VARIANT] = _bytes(manifest, skip=manifest["graphs"]["vision"])
            report["int8_target"][OPENVINO_VARIANT] = report["int8_target"][name]

    def skip(name: str, why: str) -> None:
        """The measured-only OpenVINO variant failed here: the others are still measured."""
        report.setdefault("skipped", {})[name] = why
        report["bytes"].pop(name, None)
        del variants[name]
        if log:
            log(f"{name} not measured: {why}")

    for name, (out, vision) in list(variants.items()):
        if rss:
            try:
                report["peak_rss"][name] = peak_rss(
                    out,
                    threads,
                    config,
                    bench_kw.get("image_hw", (1036, 1036)),
                    bench_kw.get("prefill_tokens", PREFILL_TOKENS),
                    bench_kw.get("decode_context", DECODE_CONTEXT),
                    vision_backend=vision,
                )["peak_rss_bytes"]
            except RuntimeError as exc:
                if vision == openvino_vision.ONNXRUNTIME:
                    raise
                skip(name, str(exc))
                continue
            if log:
                log(f"{name} peak RSS: {report['peak_rss'][name] / 2**30:.2f} GiB")
    if roofline:
        report["roofline"] = roofline_for(config, threads, bandwidth_bytes, bench_kw, log)
    runtimes: dict[str, TorchRuntime | OnnxRuntime] = {"torch_fp32": TorchRuntime(folder, threads)}
    for name, (out, vision) in list(variants.items()):
        try:
            runtimes[name] = OnnxRuntime(out, threads=threads, vision_backend=vision)
        except SetupError as exc:
            if vision == openvino_vision.ONNXRUNTIME:
                raise
            report["peak_rss"].pop(name, None)
            skip(name, str(exc))
    report.update(bench_runtimes(runtimes, config, repeats=repeats, log=log, **bench_kw))
    if roofline:
        report["roofline"] = roofline_for(config, threads, bandwidth_bytes, bench_kw, log, report["roofline"])
        report["roofline_fraction"] = {
            name: fractions_for(name, report["median"][name], report["roofline"], config, variants, bench_kw)
            for name in report["median"]
        }
        report["roofline_page_s"] = {
            name: roofline_page(name, report["roofline"], config, variants) for name in report["median"]
        }
    report["page_s"] = {name: page_modes(m) for name, m in report["median"].items() if PAGE_KEYS <= set(m)}
    return report


def _patches(config, image_hw) -> int:
    p = int(config.vision_config.patch_size)
    return (int(image_hw[0]) // p) * (int(image_hw[1]) // p)


def _vision_sizes(config, bench_kw: dict) -> dict[str, int]:
    """{median key: patches} of the vision phases bench_runtimes measures with these arguments."""
    image_hw = bench_kw.get("image_hw", (1036, 1036))
    crops = bench_kw.get("crop_sizes")
    crops = CROP_IMAGES if crops is None else crops
    sizes = {f"vision_s_{n}": _patches(config, hw) for n, hw in crops.items()}
    if image_hw:
        sizes["vision_s"] = _patches(config, image_hw)
    return sizes


def roofline_for(
    config, threads: int, bandwidth_bytes: int | None, bench_kw: dict, log, earlier: dict | None = None
) -> dict:
    """The kernel roofline at the vision MLP's shapes for the largest image the bench runs. With
    earlier (this run's first measurement), measured again and each rate the faster of the two
    (roofline.best_of): a spell of other load during one short probe would otherwise set the
    ceiling below what the variants then reach."""
    v = config.vision_config
    e = int(v.embed_dim)
    m = max(_vision_sizes(config, bench_kw).values(), default=LAYOUT_PATCHES)
    roof = measure_roofline(
        threads, m, e, int(e * float(v.mlp_ratio)), bandwidth_bytes=bandwidth_bytes or BANDWIDTH_BYTES
    )
    if log:
        shape = "x".join(map(str, roof["shapes"][0]))
        log(
            f"roofline{' again' if earlier else ''} ({roof['seconds']:.1f} s): fp32 MatMul "
            f"{roof['fp32_gflops']:.0f} GFLOP/s, INT8 ({roof['int8_weights']['weight_type']}) "
            f"{roof['int8_gops']:.0f} GOP/s at {shape}, read bandwidth {roof['bandwidth_gbs']:.1f} GB/s"
        )
    return best_of(earlier, roof) if earlier else roof


def _roofline_terms(name: str, config, exports: dict) -> tuple[set[str], float, bool]:
    """(int8 graphs, decoder weight bytes, vision at a measured rate) of one variant: torch fp32
    computes in fp32 with fp32 weights; an export's INT8 graphs and decoder weight bytes come
    from its manifest. exports: {name: (folder, vision backend)}. Vision on OpenVINO computes in
    bf16, a rate the roofline does not measure."""
    from ..vlm.export_format import read_manifest

    if name not in exports:
        return set(), 4 * decoder_weights(config), True
    manifest = read_manifest(exports[name][0])
    quantization = manifest.get("quantization") or {}
    int8_graphs = {
        role
        for role in ("vision", "decoder")
        if isinstance(quantization.get(role), dict) and quantization[role].get("bits") != 4
    }
    weight_bytes = sum(f["bytes"] for path, f in manifest["files"].items() if path.startswith("decoder.onnx"))
    return int8_graphs, weight_bytes, exports[name][1] != openvino_vision.OPENVINO


def fractions_for(name: str, medians: dict, roof: dict, config, exports: dict, bench_kw: dict) -> dict:
    """phase_fractions for one variant (_roofline_terms); vision on OpenVINO gets no fraction."""
    int8_graphs, weight_bytes, vision = _roofline_terms(name, config, exports)
    if not vision:
        medians = {k: v for k, v in medians.items() if not k.startswith("vision_s")}
    return phase_fractions(
        medians,
        roof,
        config,
        int8_graphs,
        weight_bytes,
        _vision_sizes(config, bench_kw),
        bench_kw.get("prefill_tokens", PREFILL_TOKENS),
        bench_kw.get("decode_context", DECODE_CONTEXT),
        bench_kw.get("decode_steps", DECODE_STEPS),
    )


def roofline_phases(name: str, roof: dict, config, exports: dict) -> dict[str, float] | None:
    """Every phase the page model reads (the layout image and each crop size's vision, the
    prefill, decode at batch 1 and 8), timed at the roofline (phase_seconds) for the variant's
    weight kinds. None where its vision runs at a rate the roofline does not measure (OpenVINO's
    bf16)."""
    int8_graphs, weight_bytes, vision = _roofline_terms(name, config, exports)
    if not vision:
        return None
    patches = {"vision_s": LAYOUT_PATCHES, **{f"vision_s_{p}": p for p in {p for _, p, _ in CROPS}}}
    return phase_seconds(roof, config, int8_graphs, weight_bytes, patches, PREFILL_TOKENS, DECODE_CONTEXT, DECODE_STEPS)


def roofline_page(name: str, roof: dict, config, exports: dict) -> dict[str, float] | None:
    """The modelled page (page_seconds, each mode) at the roofline: the fastest page this
    machine's kernels allow the variant's weight kinds (None as roofline_phases)."""
    ideal = roofline_phases(name, roof, config, exports)
    return None if ideal is None else page_modes(ideal)


def roofline_table(report: dict) -> tuple[str, list[str], list[list[str]]]:
    """Title, columns and rows of the roofline table: each variant's achieved fraction of the
    roofline per phase (percent)."""
    roof = report["roofline"]
    fractions = report["roofline_fraction"]
    keys = sorted({k for f in fractions.values() for k in f}, key=lambda k: (not k.startswith("vision"), k))
    title = (
        f"roofline (measured in this run, {roof['threads']} threads): fp32 MatMul {roof['fp32_gflops']:.0f} GFLOP/s, "
        f"INT8 {roof['int8_weights']['weight_type']} {roof['int8_gops']:.0f} GOP/s "
        f"(at {'x'.join(map(str, roof['shapes'][0]))}), read bandwidth {roof['bandwidth_gbs']:.1f} GB/s"
    )
    rows = [[name, *(f"{100 * f[k]:.0f}" if k in f else "-" for k in keys)] for name, f in fractions.items()]
    cols = ["variant", *(f"{k} % roof" for k in keys)]
    at_roof = report.get("roofline_page_s")
    if at_roof:  # the page at the roofline, and the measured page's fraction of it where measured
        cols += ["page at roof s", "page % roof"]
        for row, name in zip(rows, fractions):
            ideal, page = at_roof.get(name), report.get("page_s", {}).get(name)
            row.append("-" if ideal is None else f"{ideal['vlm']:.0f}")
            row.append("-" if ideal is None or page is None else f"{100 * ideal['vlm'] / page['vlm']:.0f}")
    return title, cols, rows


PAGE_KEYS = {"vision_s", "prefill_s", "decode_ms_b1", "decode_ms_b8"}  # what page_seconds reads
PAGE_MODES = ("vlm", "hybrid", "standard")


def page_seconds(m: dict, mode: str = "vlm") -> float:
    """Seconds of the modelled page's VLM work from one variant's medians (mode "vlm": the layout
    step and every crop; "hybrid": the layout step and the table and equation crops; "standard":
    those crops alone)."""
    crops = [c for c in CROPS if mode == "vlm" or c[0] not in ("text",)]
    layout = 0.0 if mode == "standard" else m["vision_s"] + m["prefill_s"] + LAYOUT_TOKENS * m["decode_ms_b1"] / 1000
    vision = sum(m.get(f"vision_s_{p}", m["vision_s"] * p / LAYOUT_PATCHES) for _, p, _ in crops)
    prefill = m["prefill_s"] * sum(p / 4 + PROMPT_TOKENS for _, p, _ in crops) / PREFILL_TOKENS
    tokens = sorted((t for _, _, t in crops), reverse=True)
    steps = sum(max(tokens[i : i + 8]) for i in range(0, len(tokens), 8))
    return layout + vision + prefill + steps * m["decode_ms_b8"] / 1000


def page_modes(m: dict) -> dict[str, float]:
    """page_seconds of one variant's medians in each of PAGE_MODES."""
    return {mode: page_seconds(m, mode) for mode in PAGE_MODES}


def peak_rss(
    export_dir: str | Path,
    threads: int,
    config=None,
    image_hw=(1036, 1036),
    prefill_tokens: int = PREFILL_TOKENS,
    decode_context: int = DECODE_CONTEXT,
    vision_backend: str = openvino_vision.ONNXRUNTIME,
) -> dict:
    """Peak RSS (bytes) of a fresh process that loads the ONNX export and runs the layout image,
    a prefill of `prefill_tokens` and 16 decode steps at batch 8 over prompts of
    `decode_context` tokens (bench_runtimes' decode rows): what one worker needs. No image_hw
    or no prefill_tokens: that phase is left out, as in bench_runtimes."""
    import subprocess
    import sys

    config_json = json.dumps((config or mineru25_config()).to_dict())
    phases = ""
    if image_hw:
        phases += f"rt.image_embeds([synthetic_input(cfg, {tuple(image_hw)!r}, 8, seed=1)])\n"
    if prefill_tokens:
        phases += f"rt.prefill([synthetic_input(cfg, (56, 56), {int(prefill_tokens) - 6}, seed=2)])\n"
    code = (
        "import json, sys, numpy as np\n"
        "from transformers import Qwen2VLConfig\n"
        "from mineru_cli.export.bench import synthetic_input\n"
        "from mineru_cli.vlm.runtime_onnx import OnnxRuntime\n"
        "cfg = Qwen2VLConfig.from_dict(json.loads(sys.stdin.read()))\n"
        f"rt = OnnxRuntime({str(export_dir)!r}, threads={int(threads)}, vision_backend={vision_backend!r})\n"
        f"{phases}"
        f"rows = [synthetic_input(cfg, (56, 56), {int(decode_context)} + 3 * i, seed=10 + i) for i in range(8)]\n"
        "t = rt.prefill(rows).argmax(-1)\n"
        "for _ in range(16): t = rt.step(t.astype(np.int64)).argmax(-1)\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child of the
        # (large) bench process would report the parent's size
        "peak = [int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "print(peak)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=config_json, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the peak-RSS run failed: {out.stderr.strip()[-2000:]}")
    return {"peak_rss_bytes": int(out.stdout.strip().splitlines()[-1])}


def report_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """Columns and rows of the `mineru bench` table (ratios against the first variant)."""
    medians, pages = report["median"], report["page_s"]
    ref = pages[next(iter(medians))]["vlm"]
    cols = [
        "variant",
        "vision 1036 s",
        "crops vision s",
        "prefill 1400 s",
        "decode b1 ms",
        "decode b8 ms/step",
        "page s",
        "page x ref",
        "hybrid page s",
        "standard page s",
        "peak RSS GiB",
        "size GiB",
    ]
    rows = []
    for name, m in medians.items():
        crops = sum(m.get(f"vision_s_{p}", 0.0) for _, p, _ in CROPS)
        page, hybrid, standard = pages[name]["vlm"], pages[name]["hybrid"], pages[name]["standard"]
        rss = report.get("peak_rss", {}).get(name)
        size = report.get("bytes", {}).get(name)
        target = report.get("int8_target", {}).get(name)
        rows.append(
            [
                f"{name} ({target})" if target else name,
                f"{m['vision_s']:.1f}",
                f"{crops:.1f}",
                f"{m['prefill_s']:.2f}",
                f"{m['decode_ms_b1']:.0f}",
                f"{m['decode_ms_b8']:.0f}",
                f"{page:.0f}",
                f"{ref / page:.2f}",
                f"{hybrid:.0f}",
                f"{standard:.0f}",
                "-" if rss is None else f"{rss / 2**30:.2f}",
                "-" if size is None else f"{size / 2**30:.2f}",
            ]
        )
    return cols, rows
