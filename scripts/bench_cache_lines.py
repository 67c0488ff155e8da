"""Small print against the near-duplicate cache's line rule: `python scripts/bench_cache_lines.py`.

For a footnote on a prose page and on a slide (type 8-18 px) and a price line under a chart of
large bars (8-14 px): the OCR engine's line box for that line in thumbnail px (what
similarity.lines_tall_enough compares with LINE_MIN), and how far past the pixel check's luma
threshold a changed total measures (raw, JPEG q70, 95 % rescale + JPEG; > 1 rejects). Runs `mineru parse
--engine ocr --no-cache` once over all the pages (a minute or two on 2 cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mineru_cli.cache import similarity as sim

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic test pages
from synthetic import chart_slide, footnote_page, jpeg, rescale, slide, text_page

A, B = "5,605.50", "6,906.50"


def pages():
    for size in (8, 9, 10, 11, 12, 13, 14, 15, 16, 18):
        yield f"prose-footnote-{size}", lambda amount, s=size: footnote_page(text_page(2), amount, s)
        yield f"slide-footnote-{size}", lambda amount, s=size: footnote_page(slide("higher"), amount, s)
    for size in (8, 10, 12, 14):
        yield f"chart-price-{size}", lambda amount, s=size: chart_slide(amount, s)


def diffs(a, b) -> list[float]:
    """How far past the pixel check's luma threshold a changed total measures (> 1 rejects)."""
    ta = sim.make_thumb(a)
    return [
        round(sim.compare(ta, sim.make_thumb(v, (ta.shape[1], ta.shape[0]))).luma_over, 2)
        for v in (b, jpeg(b), jpeg(rescale(b)))
    ]


def main() -> None:
    made = dict(pages())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        for name, make in made.items():
            make(A).save(folder / f"{name}.png")
        out = Path(tmp) / "out.jsonl"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "mineru_cli",
                "parse",
                str(folder),
                "--out",
                str(out),
                "--engine",
                "ocr",
                "--no-cache",
                "--quiet",
            ],
            check=True,
        )
        records = {json.loads(line)["source"]: json.loads(line) for line in out.read_text().splitlines()}
    print(f"LINE_MIN {sim.LINE_MIN} px")
    print("| page | line box, thumbnail px | changed total, x the threshold: raw / JPEG / rescale+JPEG | near-hit |")
    print("|---|---|---|---|")
    for name, make in made.items():
        rec = records[f"{name}.png"]
        scale = sim.thumb_size(rec["image"]["width"], rec["image"]["height"])[0] / rec["image"]["width"]
        boxes = [
            (ln["bbox"][3] - ln["bbox"][1]) * scale
            for blk in rec["blocks"]
            for ln in blk.get("lines") or []
            if "EUR" in ln["text"]
        ]
        box = f"{min(boxes):.1f}" if boxes else "not read"
        d = diffs(make(A), make(B))
        allowed = sim.lines_tall_enough(rec, scale) and min(d) <= 1
        print(f"| {name} | {box} | {' / '.join(map(str, d))} | {'yes: WRONG' if allowed else 'no'} |")


if __name__ == "__main__":
    main()
