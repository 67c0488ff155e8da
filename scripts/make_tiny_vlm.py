#!/usr/bin/env python3
"""Build (train) the tiny MinerU2.5-shaped test model into a folder.

    python scripts/make_tiny_vlm.py OUT_DIR [--seed N]

Writes OUT_DIR/model (a Hugging Face model folder: config.json, model.safetensors,
tokenizer.json, preprocessor_config.json, chat template), OUT_DIR/page.png and OUT_DIR/case.json.
Point the tests at it with MINERU_TINY_VLM=OUT_DIR, or parse the page with
`MINERU_MODEL_PATH=OUT_DIR/model mineru parse OUT_DIR/page.png --engine vlm`.
The tests build the same model with this script (tests/vlm/tiny_fixtures.py) and cache it.
Torch, MKL and oneDNN are held to baseline code paths (tiny_vlm.PORTABLE_ENV) so that the model
does not depend on the CPU family it is trained on.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "vlm")]

import tiny_vlm  # noqa: E402

# before torch loads: the baseline code paths that make the model the same on every x86 CPU
# (over inherited values, which would change the model without changing the tests' cache key)
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.update(tiny_vlm.PORTABLE_ENV)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--seed", type=int, default=tiny_vlm.SEED)
    args = ap.parse_args()
    t0 = time.monotonic()
    case = tiny_vlm.build(
        args.out_dir, seed=args.seed, log=lambda msg: print(f"[{time.monotonic() - t0:6.1f}s] {msg}", flush=True)
    )
    print(f"converged after {case['steps']} steps in {case['seconds']} s: {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
