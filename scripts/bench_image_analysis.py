#!/usr/bin/env python3
"""What the Pro profile's image analysis adds to a page's content step: the extra crops (image and
chart blocks read with "\\nImage Analysis:") and their prefill tokens, on the examples' pages.

    python scripts/bench_image_analysis.py [--json] [--dpi 200] [--pages 1] [--model DIR] [FILE ...]

Pure preprocessing, no VLM: the boxes are the embedded engine's layout blocks (rapid-layout) of
each page (default: examples/*.png and examples/*.pdf; the first --pages pages of a PDF),
cropped as the content step crops them (protocol.crops.prepare_crops) under PROFILE_PRO with
image analysis on and off, and sized by the Pro preprocessor (min_pixels 50176, max_pixels
1,605,632). Prefill tokens = the crop's image tokens + the chat template around it (with
--model, a model folder's tokenizer; without one left out). The answer's length depends on the
real weights (a description, a chart's table): not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
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
from mineru_cli.vlm.protocol.pro import select_blocks  # noqa: E402
from mineru_cli.vlm.protocol.profiles import FIGURE_TYPES, PROFILE_PRO, without_image_analysis  # noqa: E402

PRO_MIN_PIXELS = 50176


def pages(files: list[Path], dpi: int, first: int):
    for path in files:
        if path.suffix.lower() != ".pdf":
            yield path.name, Image.open(path).convert("RGB")
            continue
        import pypdfium2

        pdf = pypdfium2.PdfDocument(path)
        try:
            for i in range(min(first, len(pdf))):
                yield f"{path.name} p{i + 1}", pdf[i].render(scale=dpi / 72).to_pil().convert("RGB")
        finally:
            pdf.close()


def prompt_tokens(prompt: str, model_dir: Path | None) -> int | None:
    """The text tokens of one content request besides the image pads (system prompt, roles,
    vision markers, the task prompt: ChatTokenizer.chat_ids), or None without a model folder."""
    if model_dir is None:
        return None
    from mineru_cli.vlm.tokenizer import ChatTokenizer

    return len(ChatTokenizer.from_dir(model_dir).chat_ids(prompt, 0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dpi", type=int, default=200)
    ap.add_argument("--pages", type=int, default=1, help="pages of each PDF, from the first")
    ap.add_argument("--model", type=Path, help="a model folder, to count the request's text tokens")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    files = args.files or sorted((ROOT / "examples").glob("*.png")) + sorted((ROOT / "examples").glob("*.pdf"))
    ocr = OcrEngine(threads=2)
    proc = ImageProcessor(ImageProcessorConfig(min_pixels=PRO_MIN_PIXELS))
    off = without_image_analysis(PROFILE_PRO)
    extra_text = prompt_tokens(PROFILE_PRO.prompt_for("image"), args.model)
    rows = []
    for name, page in pages(files, args.dpi, args.pages):
        w, h = page.size
        found = ocr.parse(page).blocks
        layout = [LayoutBlock(b.type, (b.bbox[0] / w, b.bbox[1] / h, b.bbox[2] / w, b.bbox[3] / h), 0) for b in found]
        blocks = select_blocks(layout, PROFILE_PRO)
        on_crops, off_crops = prepare_crops(page, blocks, PROFILE_PRO), prepare_crops(page, blocks, off)
        figures = [c for c in on_crops if blocks[c.index].type in FIGURE_TYPES]
        assert len(on_crops) - len(off_crops) == len(figures)
        image_tokens = [proc.num_image_tokens(*c.image.size) for c in figures]
        all_tokens = sum(proc.num_image_tokens(*c.image.size) for c in off_crops)
        rows.append(
            {
                "page": name,
                "figure_blocks": sum(1 for b in blocks if b.type in FIGURE_TYPES),
                "crops_off": len(off_crops),
                "extra_crops": len(figures),
                "extra_image_tokens": sum(image_tokens),
                "extra_prefill_tokens": sum(image_tokens) + (extra_text or 0) * len(figures),
                "image_tokens_off": all_tokens,
                "sizes": [list(c.image.size) for c in figures],
            }
        )
    flags = int8_target.cpu_flags()
    have = " ".join(f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags)
    out = {
        "cpu": f"{int8_target.cpu_model()}, {len(os.sched_getaffinity(0))} cores, flags {have}",
        "prompt_tokens_per_crop": extra_text,
        "pages": rows,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(out["cpu"], f"| text tokens per request besides the image: {extra_text}")
    print("| page | image/chart blocks | crops without IA | extra crops | extra image tokens | image tokens without |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if r["figure_blocks"] or len(rows) <= 12:
            print(
                f"| {r['page']} | {r['figure_blocks']} | {r['crops_off']} | {r['extra_crops']} | "
                f"{r['extra_image_tokens']} | {r['image_tokens_off']} |"
            )
    total = {k: sum(r[k] for r in rows) for k in ("crops_off", "extra_crops", "extra_image_tokens", "image_tokens_off")}
    print(
        f"| all ({len(rows)} pages) | | {total['crops_off']} | {total['extra_crops']} | "
        f"{total['extra_image_tokens']} | {total['image_tokens_off']} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
