#!/usr/bin/env python3
"""Crop sizes and image tokens under MinerU2.5-2509's preprocessor (min_pixels 3136) and
MinerU2.5-Pro's (min_pixels 50176), on the layout boxes of examples/*.png.

    python scripts/bench_pro_crops.py [--json]

Pure preprocessing, no VLM: the boxes are the embedded engine's layout blocks (rapid-layout),
each cropped as the content step crops it (protocol.crops.prepare_crops with the profile's
skip types) and sized by processor.smart_resize with each min_pixels (max_pixels 1,605,632 for
both). The layout image (1036x1036, 1369 tokens) is above both minimums and the same for both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from mineru_cli.engines.ocr import OcrEngine  # noqa: E402
from mineru_cli.vlm import int8_target  # noqa: E402
from mineru_cli.vlm.processor import ImageProcessor, ImageProcessorConfig  # noqa: E402
from mineru_cli.vlm.protocol.crops import prepare_crops  # noqa: E402
from mineru_cli.vlm.protocol.layout import LayoutBlock  # noqa: E402
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO  # noqa: E402

MIN_PIXELS = {"2509": 3136, "pro": 50176}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ocr = OcrEngine(threads=2)
    procs = {k: ImageProcessor(ImageProcessorConfig(min_pixels=v)) for k, v in MIN_PIXELS.items()}
    rows, all_tokens = [], {k: [] for k in MIN_PIXELS}
    for path in sorted((ROOT / "examples").glob("*.png")):
        page = Image.open(path).convert("RGB")
        w, h = page.size
        blocks = ocr.parse(page).blocks
        layout = [LayoutBlock(b.type, (b.bbox[0] / w, b.bbox[1] / h, b.bbox[2] / w, b.bbox[3] / h), 0) for b in blocks]
        crops = {"2509": prepare_crops(page, layout, PROFILE_2509), "pro": prepare_crops(page, layout, PROFILE_PRO)}
        assert [c.image.size for c in crops["2509"]] == [c.image.size for c in crops["pro"]]  # the same crops
        tokens = {k: [procs[k].num_image_tokens(*c.image.size) for c in crops[k]] for k in MIN_PIXELS}
        smallest = min(crops["2509"], key=lambda c: c.image.size[0] * c.image.size[1]).image.size
        for k in MIN_PIXELS:
            all_tokens[k] += tokens[k]
        rows.append(
            {
                "page": path.name,
                "crops": len(crops["2509"]),
                "tokens": {k: sum(v) for k, v in tokens.items()},
                "median": {k: statistics.median(v) for k, v in tokens.items()},
                "more_under_pro": sum(1 for a, b in zip(tokens["2509"], tokens["pro"]) if b > a),
                "smallest_crop": list(smallest),
                "smallest_resized": {k: list(procs[k].target_size(*smallest)) for k in MIN_PIXELS},
            }
        )
    flags = int8_target.cpu_flags()
    have = " ".join(f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags)
    out = {
        "cpu": f"{int8_target.cpu_model()}, {len(os.sched_getaffinity(0))} cores, flags {have}",
        "pages": rows,
        "total": {
            "crops": len(all_tokens["2509"]),
            "tokens": {k: sum(v) for k, v in all_tokens.items()},
            "median": {k: statistics.median(v) for k, v in all_tokens.items()},
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(out["cpu"])
    print(
        "| page | crops | image tokens 2509 | Pro | Pro/2509 | median 2509 | Pro | crops with more tokens "
        "| smallest crop: 2509 -> Pro |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, m, sm = r["tokens"], r["median"], r["smallest_resized"]
        print(
            f"| {r['page']} | {r['crops']} | {t['2509']} | {t['pro']} | {t['pro'] / t['2509']:.2f} | {m['2509']:g} | "
            f"{m['pro']:g} | {r['more_under_pro']} | {'x'.join(map(str, r['smallest_crop']))}: "
            f"{'x'.join(map(str, sm['2509']))} -> {'x'.join(map(str, sm['pro']))} |"
        )
    t, m = out["total"]["tokens"], out["total"]["median"]
    print(
        f"| all | {out['total']['crops']} | {t['2509']} | {t['pro']} | {t['pro'] / t['2509']:.2f} | {m['2509']:g} | "
        f"{m['pro']:g} | | |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
