"""Layout PDF and review page figures: `python scripts/bench_outputs.py [--records 1000 10000]`.

Reports the time to draw `--format layout` PDFs for examples/ and for a 100-page PDF (report.pdf's
two pages repeated), and the review page's size and load time in headless Chromium (from
navigation to the first cards drawn) for synthetic journals of N records (the examples' records
cycled over N/10 ten-page PDFs, 2% failed, 1% timed out), with and without thumbnails. With
--screenshot PATH it also saves a screenshot of the viewer on the examples' run.

The examples' journal is parsed once (embedded engine, about a minute on 2 cores) unless
--journal gives one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium

from mineru_cli.config import LoadOptions
from mineru_cli.hashing import file_sha256
from mineru_cli.inputs import OpenDocuments, SourceFile
from mineru_cli.journal import read_records
from mineru_cli.review import write_review
from mineru_cli.writers import write_documents

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def examples_journal(work: Path, given: Path | None) -> Path:
    if given:
        return given
    out = work / "examples.jsonl"
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(EXAMPLES), "--out", str(out), "--no-cache", "--quiet"]
    subprocess.run(cmd, check=True, env={**os.environ, "MINERU_CACHE_DIR": str(work / "cache")})
    return out


def time_layout(records: list[dict], root: Path, out_dir: Path) -> tuple[float, int]:
    """Seconds to write the layout PDFs of `records` (sources under root, rendered at 200 DPI)."""
    docs = OpenDocuments(LoadOptions())
    t = time.perf_counter()
    try:
        written = write_documents(
            records,
            out_dir,
            {"layout"},
            lambda source, index: docs.get(SourceFile(root / source, source, "pdf")).page(index).image,
            dpi=LoadOptions().dpi,
        )
    finally:
        docs.close()
    return time.perf_counter() - t, sum(p.stat().st_size for p in written)


def repeat_pdf(src: Path, dst: Path, pages: int) -> None:
    source = pdfium.PdfDocument(str(src))
    out = pdfium.PdfDocument.new()
    n = len(source)
    while len(out) < pages:
        out.import_pages(source, list(range(min(n, pages - len(out)))))
    out.save(str(dst))
    out.close()
    source.close()


def synthetic_run(base: list[dict], n: int, work: Path) -> tuple[Path, Path]:
    """A journal of n records over n/10 ten-page PDFs (links to one file) and its root."""
    root = work / f"run{n}"
    root.mkdir()
    ten = work / "ten.pdf"
    if not ten.exists():
        repeat_pdf(EXAMPLES / "report.pdf", ten, 10)
    sha = file_sha256(ten)
    pdf_pages = [r for r in base if r["source"] == "report.pdf"]
    others = [r for r in base if r["source"] != "report.pdf"]
    lines = []
    for i in range(n):
        doc, page = divmod(i, 10)
        name = f"d{doc:05d}.pdf"
        if page == 0:
            (root / name).symlink_to(ten)
        # pages take the blocks of an example page (a PDF page's size: boxes of other pages are
        # scaled to it), so the blocks per page are the examples' mix
        model = pdf_pages[page % 2] if i % 3 else others[i % len(others)]
        rec = json.loads(json.dumps(pdf_pages[page % 2]))
        sx = rec["image"]["width"] / model["image"]["width"]
        sy = rec["image"]["height"] / model["image"]["height"]
        rec["blocks"] = [
            {
                **b,
                "bbox": [
                    round(b["bbox"][0] * sx),
                    round(b["bbox"][1] * sy),
                    round(b["bbox"][2] * sx),
                    round(b["bbox"][3] * sy),
                ],
            }
            for b in model["blocks"]
        ]
        rec.update(id=f"{name}#{page}", source=name, page_index=page, page_count=10, source_sha256=sha)
        if i % 50 == 7:
            rec.update(
                status="failed",
                blocks=[],
                markdown="",
                error={"kind": "engine", "stage": "engine", "message": "RuntimeError: synthetic failure"},
            )
        elif i % 100 == 13:
            rec.update(
                status="timeout",
                blocks=[],
                markdown="",
                error={"kind": "timeout", "stage": "engine", "message": "page took longer than 600 s"},
            )
        lines.append(json.dumps(rec, ensure_ascii=False))
    journal = work / f"run{n}.jsonl"
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return journal, root


def load_time(browser, html: Path, repeat: int = 3) -> float:
    """Median seconds from navigation to the page's first cards drawn (window.reviewReady)."""
    times = []
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        t = time.perf_counter()
        page.goto(html.as_uri(), timeout=300_000)
        page.wait_for_function("window.reviewReady === true", timeout=300_000)
        times.append(time.perf_counter() - t)
        assert not errors, errors
        page.close()
    return sorted(times)[len(times) // 2]


def screenshot(browser, html: Path, path: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1250})
    page.goto(html.as_uri())
    page.wait_for_function("window.reviewReady === true")
    page.wait_for_timeout(500)
    page.click(".page[data-id='prose.png#0'] rect[data-type='title']")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    page.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--journal", type=Path, help="the examples' journal (default: parse examples/ now)")
    ap.add_argument("--screenshot", type=Path, help="save a screenshot of the viewer here (PNG)")
    ap.add_argument(
        "--no-images-only", type=int, nargs="*", default=[], help="record counts measured only without images"
    )
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = read_records(examples_journal(work, args.journal))
        seconds, size = time_layout(base, EXAMPLES, work / "layout-examples")
        pages = len(base)
        print(f"layout examples/: {pages} pages in {seconds:.2f} s ({seconds / pages:.3f} s/page), {size / 1e6:.2f} MB")
        repeat_pdf(EXAMPLES / "report.pdf", work / "hundred.pdf", 100)
        report = [r for r in base if r["source"] == "report.pdf"]
        hundred = [
            {**report[i % 2], "id": f"hundred.pdf#{i}", "source": "hundred.pdf", "page_index": i} for i in range(100)
        ]
        seconds, size = time_layout(hundred, work, work / "layout-100")
        print(f"layout 100-page PDF: {seconds:.2f} s ({seconds / 100:.3f} s/page), {size / 1e6:.2f} MB")

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            if args.screenshot:  # the examples' run, with one file that failed to open
                html, journal = work / "examples.html", work / "shown.jsonl"
                broken = {
                    **base[0],
                    **{"id": "scans/broken.pdf#0", "source": "scans/broken.pdf", "status": "failed", "blocks": []},
                    **{"image": None, "page_count": None, "markdown": ""},
                    "error": {"kind": "corrupt", "stage": "open", "message": "PDF: data format error (not a PDF)"},
                }
                journal.write_text("".join(json.dumps(r) + "\n" for r in [*base, broken]), encoding="utf-8")
                write_review(journal, html, EXAMPLES)
                screenshot(browser, html, args.screenshot)
                print(f"screenshot: {args.screenshot}")
            for n in args.records + args.no_images_only:
                journal, root = synthetic_run(base, n, work)
                for images in (False, True) if n not in args.no_images_only else (False,):
                    html = work / f"run{n}-{images}.html"
                    t = time.perf_counter()
                    stats = write_review(journal, html, root, images=images)
                    build = time.perf_counter() - t
                    load = load_time(browser, html)
                    print(
                        f"review {n} records, images {images}: {stats.bytes / 1e6:.1f} MB "
                        f"({stats.bytes / 1e6 / (n / 1000):.1f} MB per 1,000 pages), {stats.images} thumbnails, "
                        f"written in {build:.1f} s, loads in {load:.2f} s"
                    )
            browser.close()


if __name__ == "__main__":
    main()
