"""Speed of the runtimes on a random-weight model with MinerU2.5's shapes.

Cost does not depend on weight values, so a random model built from the real config shape
measures speed honestly (never quality). Variants run alternately in one process and the
report gives medians and ratios to the first variant (absolute times drift on shared machines).

    bench_full_size(work_dir, threads=2)   # builds, saves and exports the 1.16B model: slow,
                                           # ~15 GB of disk and much RAM on the first call
    bench_runtimes({"torch": rt1, "onnx": rt2}, hidden, vocab, ...)   # any Runtime objects

Measured per variant: vision seconds for one image (default 1036x1036 = 5476 patches), prefill
seconds for a prompt of `prefill_tokens` (a 4-token image + text), decode ms per step at each
batch size (one step appends one token to every row).

Imports torch (the reference runtime and model building).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..vlm.processor import rope_index
from ..vlm.tokenizer import VlmInput

# MinerU2.5-2509-1.2B's config.json shape (vocab, layers, heads, mrope ...); ids as in the model
MINERU25_TEXT = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                     rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645,
                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                      "mrope_section": [8, 12, 12]})  # sums to head_dim / 2 = 32
MINERU25_VISION = dict(depth=32, embed_dim=1280, hidden_size=896, num_heads=16, mlp_ratio=4,
                       patch_size=14, temporal_patch_size=2, spatial_merge_size=2, in_channels=3)
MINERU25_IDS = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
                    vision_end_token_id=151653)


def mineru25_config(text: dict | None = None, vision: dict | None = None):
    """A Qwen2VLConfig with MinerU2.5's shapes (override any field with `text` / `vision`)."""
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(text_config={**MINERU25_TEXT, **(text or {})},
                         vision_config={**MINERU25_VISION, **(vision or {})},
                         tie_word_embeddings=True, architectures=["Qwen2VLForConditionalGeneration"],
                         **MINERU25_IDS)


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
    ids = np.concatenate([[int(config.vision_start_token_id)], np.full(n_img, image_id),
                          [int(config.vision_end_token_id)], text]).astype(np.int64)
    grid = np.asarray([[1, h, w]], dtype=np.int64)
    positions, delta = rope_index(ids, grid, image_id, m)
    pixels = rng.standard_normal((h * w, patch_dim)).astype(np.float32)
    return VlmInput(ids, pixels, grid, positions, delta)


def _seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_runtimes(runtimes: dict, config, image_hw=(1036, 1036), prefill_tokens: int = 1400,
                   decode_batches=(1, 8), decode_steps: int = 16, repeats: int = 3,
                   log: Callable[[str], None] | None = None) -> dict:
    """Medians over `repeats` rounds, the variants alternating within each round."""
    import torch

    vision_x = synthetic_input(config, image_hw, 8, seed=1)
    prefill_x = synthetic_input(config, (56, 56), prefill_tokens - 6, seed=2)
    decode_x = [synthetic_input(config, (56, 56), 40 + 3 * i, seed=10 + i) for i in range(max(decode_batches))]
    times: dict[str, dict[str, list[float]]] = {name: {} for name in runtimes}

    def add(name, key, value):
        times[name].setdefault(key, []).append(value)
        if log:
            log(f"{name} {key}: {value:.3f}")

    for _ in range(repeats):
        for name, rt in runtimes.items():
            with torch.inference_mode():
                if image_hw:
                    add(name, "vision_s", _seconds(lambda: rt.image_embeds([vision_x])))
                if prefill_tokens:
                    add(name, "prefill_s", _seconds(lambda: rt.prefill([prefill_x])))
                for b in decode_batches:
                    logits = rt.prefill(decode_x[:b])
                    tokens = np.asarray(logits).argmax(-1).astype(np.int64)
                    t0 = time.perf_counter()
                    for _ in range(decode_steps):
                        tokens = np.asarray(rt.step(tokens)).argmax(-1).astype(np.int64)
                    add(name, f"decode_ms_b{b}", 1000 * (time.perf_counter() - t0) / decode_steps)
    medians = {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}
    first = next(iter(medians))
    ratios = {name: {k: medians[first][k] / v for k, v in m.items() if v > 0}
              for name, m in medians.items()}
    return {"median": medians, "speedup_vs_" + first: ratios, "repeats": repeats,
            "image_hw": list(image_hw) if image_hw else None, "prefill_tokens": prefill_tokens,
            "decode_batches": list(decode_batches), "decode_steps": decode_steps}


def write_model_folder(model, folder: Path) -> Path:
    """save_pretrained plus the files a model folder needs (a placeholder tokenizer.json and
    the real preprocessor config), so export_model takes it."""
    from tokenizers import Tokenizer, models

    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    Tokenizer(models.BPE()).save(str(folder / "tokenizer.json"))
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "min_pixels": 3136, "max_pixels": 1605632, "patch_size": 14, "temporal_patch_size": 2,
        "merge_size": 2}))
    return folder


def bench_full_size(work_dir: str | Path, threads: int = 2, int8: bool = True, repeats: int = 3,
                    config=None, log: Callable[[str], None] | None = print, **bench_kw) -> dict:
    """Build (or reuse) the random full-size model and its exports under work_dir, then
    compare torch fp32, ORT fp32 and (with int8) ORT INT8."""
    import torch

    from ..vlm.runtime_onnx import OnnxRuntime, is_export_dir
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
    report: dict = {"threads": threads, "export_timings": {}}
    for name, out in exports.items():
        if not is_export_dir(out):
            r = export_model(folder, out, int8=name.endswith("int8"), verify=False, threads=threads, log=log)
            report["export_timings"][name] = r["timings"]
    runtimes = {"torch_fp32": TorchRuntime(folder, threads)}
    runtimes.update({name: OnnxRuntime(out, threads=threads) for name, out in exports.items()})
    report.update(bench_runtimes(runtimes, config, repeats=repeats, log=log, **bench_kw))
    return report


# A typical two-step page, for `page_seconds`: the layout step generates LAYOUT_TOKENS tokens at
# batch 1; then CROPS are read (patches at 14 px, tokens generated), decoded in batches of 8 with
# per-sequence stopping, so a batch costs as many steps as its longest crop. Crop vision is
# estimated from the layout image's vision time per patch (small crops: attention is cheap).
LAYOUT_TOKENS = 360
CROPS = [(400, 30)] * 4 + [(2000, 150)] * 6 + [(4800, 400)] * 2 + [(400, 40)] * 2   # (patches, tokens)
LAYOUT_PATCHES = 74 * 74


def page_seconds(m: dict) -> float:
    """Seconds of the modelled two-step page from one variant's medians."""
    layout = m["vision_s"] + m["prefill_s"] + LAYOUT_TOKENS * m["decode_ms_b1"] / 1000
    tokens = sorted((t for _, t in CROPS), reverse=True)
    steps = sum(max(tokens[i:i + 8]) for i in range(0, len(tokens), 8))
    vision = m["vision_s"] * sum(p for p, _ in CROPS) / LAYOUT_PATCHES
    return layout + vision + steps * m["decode_ms_b8"] / 1000
