"""The embedded engine on born-digital PDFs with `--text-layer auto` against `off` (issue 16).

The documents are the manuals, papers and decks shipped in Debian packages that
scripts/eval_real_pages.py fetches (`python scripts/eval_real_pages.py --fetch`); here whole
page ranges are parsed (MANIFEST), each range cut into its own PDF. Every page is parsed twice
with the public API (`engine="ocr"`, no cache, the CLI's default 200 DPI): once reading its text
layer where it is trusted, once from its pixels only. The truth is `pdftotext`'s text of the page
(poppler: an extractor independent of pdfium, which our text layer reads through), compared as
in eval_real_pages: NFKC, whitespace dropped, CER in reading order and order-free character F1
(pdftotext's own reading order cuts some two-column pages apart at headings, elsarticle's 5p
sample among them, so there the CER of both runs measures the truth's order as much as ours).

Printed and written (--json): per kind, the share of pages whose text layer was trusted, the
reasons for the others, CER with auto and off, and the wall time of each run (pages/min). The
runs alternate auto, off, auto, off ... (--rounds) so that the machine's drift falls on both.

    python scripts/bench_text_layer.py --json text_layer.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_real_pages import DOCS, TEX, cer, char_f1, cpu_model, document, missing_documents, squash

# (package, path, first page, last page, kind): 1-based, inclusive
MANIFEST: list[tuple[str, str, int, int, str]] = [
    ("r-doc-pdf", "usr/share/doc/r-doc-pdf/manual/R-intro.pdf", 5, 24, "prose"),
    ("r-doc-pdf", "usr/share/doc/r-doc-pdf/manual/R-data.pdf", 5, 9, "prose"),
    ("gnuplot-doc", "usr/share/doc/gnuplot/gnuplot.pdf", 20, 29, "prose"),
    ("texlive-publishers-doc", f"{TEX}/elsarticle/elstest-5p.pdf", 1, 3, "two-column"),
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 1, 5, "two-column"),
    ("texlive-publishers-doc", f"{TEX}/revtex/sample/aps/apssamp.pdf", 1, 4, "two-column"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 1, 6, "two-column"),
    ("texlive-latex-recommended-doc", f"{TEX}/booktabs/booktabs.pdf", 1, 6, "table"),
    ("texlive-latex-recommended-doc", f"{TEX}/beamer/beamerexample-conference-talk.pdf", 1, 12, "slide"),
    ("texlive-lang-chinese", f"{TEX}/ctex/ctex.pdf", 1, 6, "CJK"),
]
KINDS = ("prose", "two-column", "table", "slide", "CJK")


def cut(entries, docs: Path, folder: Path) -> dict[str, tuple[str, str, int]]:
    """Each range as its own PDF; returns file name -> (kind, source document, first page)."""
    import pypdfium2 as pdfium

    out = {}
    for n, (package, path, first, last, kind) in enumerate(entries):
        src = pdfium.PdfDocument(str(document(docs, package, path)))
        pdf = pdfium.PdfDocument.new()
        pdf.import_pages(src, list(range(first - 1, last)))
        name = f"r{n:02d}.pdf"
        pdf.save(str(folder / name))
        pdf.close()
        src.close()
        out[name] = (kind, str(document(docs, package, path)), first)
    return out


def truth(pdf: str, page: int) -> str:
    args = ["pdftotext", "-enc", "UTF-8", "-f", str(page), "-l", str(page), pdf, "-"]
    return squash(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def parse_all(folder: Path, text_layer: str) -> tuple[float, list]:
    import mineru_cli

    t = time.perf_counter()
    records = list(mineru_cli.parse([folder], engine="ocr", cache=False, text_layer=text_layer))
    return time.perf_counter() - t, records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DOCS)
    ap.add_argument("--rounds", type=int, default=1, help="auto/off pairs, alternating")
    ap.add_argument("--kind", choices=KINDS, nargs="+")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    entries = [e for e in MANIFEST if not args.kind or e[4] in args.kind]
    missing = missing_documents(args.docs, entries)
    if missing:
        print(f"missing documents (python scripts/eval_real_pages.py --fetch): {missing}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-text-layer-") as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        ranges = cut(entries, args.docs, folder)
        seconds: dict[str, list[float]] = {"auto": [], "off": []}
        results: dict[str, list] = {}
        for _ in range(args.rounds):
            for mode in ("auto", "off"):
                s, records = parse_all(folder, mode)
                seconds[mode].append(s)
                results[mode] = records
                print(f"  {mode}: {len(records)} pages in {s:.0f} s", file=sys.stderr)
        pages = []
        off = {r.id: r for r in results["off"]}
        for rec in results["auto"]:
            kind, doc, first = ranges[Path(rec.source).name]
            number = first + rec.page_index
            gold = truth(doc, number)
            layer = rec.text_layer or {}

            def text(r) -> str:
                return squash("\n".join(b.text for b in r.blocks))

            pages.append(
                {
                    "doc": Path(doc).name,
                    "page": number,
                    "kind": kind,
                    "used": bool(layer.get("used")),
                    "reason": layer.get("reason"),
                    "truth_chars": len(gold),
                    "cer_auto": round(cer(text(rec), gold), 4),
                    "cer_off": round(cer(text(off[rec.id]), gold), 4),
                    "f1_auto": round(char_f1(text(rec), gold), 4),
                    "f1_off": round(char_f1(text(off[rec.id]), gold), 4),
                    "ok": rec.ok and off[rec.id].ok,
                }
            )
    n = len(pages)
    report = {
        "cpu": cpu_model(),
        "pages": pages,
        "seconds": seconds,
        "pages_per_min": {m: round(60 * n / statistics.median(v), 1) for m, v in seconds.items()},
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    print(
        f"CPU: {report['cpu']}; {n} pages; "
        f"pages/min auto {report['pages_per_min']['auto']}, off {report['pages_per_min']['off']}"
    )
    print("| kind | pages | text layer used | not used (reasons) | CER auto | CER off | F1 auto | F1 off |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in (*KINDS, "all"):
        rows = [p for p in pages if kind in ("all", p["kind"])]
        if not rows:
            continue
        used = sum(p["used"] for p in rows)
        reasons = Counter(p["reason"] for p in rows if not p["used"])
        why = ", ".join(f"{r} {c}" for r, c in reasons.most_common()) or "-"
        print(
            f"| {kind} | {len(rows)} | {used} ({100 * used / len(rows):.0f} %) | {why} | "
            + " | ".join(
                f"{statistics.mean(p[k] for p in rows):.3f}" for k in ("cer_auto", "cer_off", "f1_auto", "f1_off")
            )
            + " |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
