"""The overlap gain of the VLM's layout step with the embedded OCR (issue 3's "encoding || OCR").

    python scripts/bench_overlap.py EXPORT_DIR [--threads 2] [--steps 64] [--repeat 3]

EXPORT_DIR is an ONNX export of a MinerU2.5-shaped model (e.g. `mineru bench`'s
models/bench/onnx-int8). Per round, alternately:
  sequential  the layout step (1036x1036 vision, 1400-token prefill, --steps decode steps at
              batch 1), then OCR of examples/two_column.png (one thread), one after the other
  overlapped  the same two, the OCR in a background thread while the layout step runs
which is what VlmEngine(overlap=False/True) does per page. Prints medians and the gain.
A random-weight model has the real cost but no meaningful output, so the layout step is timed
on synthetic tokens (export.bench.synthetic_input), not through the engine's parser.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from mineru_cli.engines.ocr import OcrEngine
    from mineru_cli.export.bench import mineru25_config, synthetic_input
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    cfg = mineru25_config()
    rt = OnnxRuntime(args.export_dir, threads=args.threads)
    ocr = OcrEngine(threads=1)
    ocr.warm_up(layout=False)
    page = Image.open(ROOT / "examples" / "two_column.png").convert("RGB")
    layout_x = synthetic_input(cfg, (1036, 1036), 1400 - 5476 // 4 - 2, seed=1)

    def layout() -> float:
        t0 = time.perf_counter()
        tokens = rt.prefill([layout_x]).argmax(-1)
        for _ in range(args.steps):
            tokens = rt.step(tokens.astype(np.int64)).argmax(-1)
        return time.perf_counter() - t0

    def read() -> float:
        t0 = time.perf_counter()
        ocr.text_lines(page)
        return time.perf_counter() - t0

    read()  # warm both
    rows: dict[str, list[float]] = {"layout": [], "ocr": [], "sequential": [], "overlapped": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        rows["layout"].append(layout())
        rows["ocr"].append(read())
        rows["sequential"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        worker = threading.Thread(target=read)
        worker.start()
        layout()
        worker.join()
        rows["overlapped"].append(time.perf_counter() - t0)
        print({k: round(v[-1], 2) for k, v in rows.items()}, flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"medians of {args.repeat}: layout step {med['layout']:.1f} s, OCR {med['ocr']:.1f} s, "
        f"sequential {med['sequential']:.1f} s, overlapped {med['overlapped']:.1f} s, "
        f"gain {med['sequential'] / med['overlapped']:.2f}x "
        f"(OCR hidden: {(med['sequential'] - med['overlapped']) / med['ocr']:.0%})"
    )


if __name__ == "__main__":
    main()
