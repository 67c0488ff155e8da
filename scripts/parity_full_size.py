"""Parity of ONNX exports of the full-size random MinerU2.5-shaped model with PyTorch, on
rendered pages (issue 5's "INT8 vs fp32 ... on rendered pages with the full-size random model").

    python scripts/parity_full_size.py WORK_DIR [--steps 16] [--threads 2] [--exports NAME ...]

WORK_DIR is `mineru bench --work-dir`'s folder (model/ and its onnx-* exports, or those named by
--exports; figures go into WORK_DIR/parity.json beside earlier ones). The inputs are
real pixels: examples/prose.png stretched to the 1036x1036 layout image, and a text-line crop
of examples/two_column.png at its own size, each followed by random text tokens (the bench
model's tokenizer is a placeholder, so prompts are token ids). The torch fp32 model decodes
greedily for --steps tokens; every export is fed the same tokens (teacher forcing) and compared
over every logits vector: max |diff|, cosine, top-1 agreement; plus free-running greedy token
agreement (how many of the first --steps tokens each export picks by itself match torch's).
With random weights the logits are flat, so free-running text diverges under any quantization:
the teacher-forced figures are the meaningful ones (see the issue).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


def page_input(config, image: Image.Image, text_tokens: int, seed: int):
    from mineru_cli.vlm.processor import ImageProcessor, ImageProcessorConfig, rope_index
    from mineru_cli.vlm.tokenizer import VlmInput

    proc = ImageProcessor(
        ImageProcessorConfig(min_pixels=3136, max_pixels=1605632, patch_size=14, temporal_patch_size=2, merge_size=2)
    )
    pixels, grid = proc(image)
    n_img = int(np.prod(grid[0])) // 4
    rng = np.random.default_rng(seed)
    ids = np.concatenate(
        [
            [config.vision_start_token_id],
            np.full(n_img, config.image_token_id),
            [config.vision_end_token_id],
            rng.integers(0, 151643, text_tokens),
        ]
    ).astype(np.int64)
    positions, delta = rope_index(ids, grid, int(config.image_token_id), 2)
    return VlmInput(ids, pixels, grid, positions, delta)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work_dir")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--exports", nargs="*", help="folder names under WORK_DIR (default: every onnx-*)")
    ap.add_argument(
        "--fast",
        action="store_true",
        help="INT8 weights that saturate on this CPU run on the fast kernels all the same",
    )
    args = ap.parse_args()

    import torch

    from mineru_cli.export.bench import mineru25_config
    from mineru_cli.export.onnx_export import compare_logits, teacher_forced
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime
    from mineru_cli.vlm.runtime_torch import TorchRuntime

    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    cfg = mineru25_config()
    layout = Image.open(ROOT / "examples" / "prose.png").convert("RGB").resize((1036, 1036), Image.BICUBIC)
    crop = Image.open(ROOT / "examples" / "two_column.png").convert("RGB")
    crop = crop.crop((0, 0, crop.width // 2, min(crop.height, 140)))
    inputs = [page_input(cfg, layout, 24, 1), page_input(cfg, crop, 24, 2)]

    with torch.inference_mode():
        ref_rt = TorchRuntime(work / "model", args.threads)
        ref, tokens = teacher_forced(ref_rt, inputs, args.steps)
        del ref_rt
    out = work / "parity.json"
    report = json.loads(out.read_text()) if out.is_file() else {}  # other exports' figures stay
    for export in [work / n for n in args.exports] if args.exports else sorted(work.glob("onnx-*")):
        # as `mineru parse` runs it (weights that would saturate here on the exact kernels), or
        # with --fast on the fast kernels whatever the CPU: how wrong that would be is a figure
        rt = OnnxRuntime(export, threads=args.threads, exact_int8=not args.fast)
        cand, _ = teacher_forced(rt, inputs, args.steps, tokens)
        free, own = teacher_forced(rt, inputs, args.steps)
        figures = compare_logits(ref, cand)
        ref_tokens, own_tokens = np.stack(tokens), np.stack(own)
        figures["free_running_token_agreement"] = float((ref_tokens == own_tokens).mean())
        report[export.name] = figures
        print(
            export.name,
            json.dumps({k: round(v, 6) if isinstance(v, float) else v for k, v in figures.items()}),
            flush=True,
        )
        del rt
    out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
