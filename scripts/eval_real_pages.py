"""Held-out evaluation of the embedded engine on real PDF pages (issue 15).

The pages come from documents shipped in Debian packages (MANIFEST: package, path inside it,
1-based page, kind). Each page is cut into a one-page PDF and parsed with the public API
(`mineru_cli.parse(..., engine="ocr", cache=False, dpi=..., text_layer="off")`) at each DPI, so
it takes the same PDF render path a user's document does and is read from its pixels, as a scan
of it would be (`--text-layer auto` lets born-digital pages take their text layer's lines: then
only the layout and the order are measured). The ground truth is the page's text layer, in
the order the PDF's producer wrote it (pypdfium2's text page: for these TeX documents, each
column top to bottom, left column first). `pdftotext`'s own reading-order analysis was tried
first and is not used: it cuts columns apart at headings that span two lines (elsarticle 5p,
page 2). Pages marked "layout" (a page that is mostly one table) use `pdftotext -layout`
(poppler-utils), which keeps table rows together.

Text inside the page's raster images (screenshots, scanned figures) is in no text layer, so
the truth cannot have it: a line the engine read there (its centre inside one of the page's image
objects) over which the text layer has no character is left out of the scored text and kept apart
in the results ("raster_text"), so reading a screenshot's words is not counted as an error.

Metrics, on NFKC-normalised text with all whitespace and dot leaders (runs of three or more
dots) dropped (line breaks and spacing are layout, and CJK has no spaces), the hypothesis
being the record's blocks' text in order:
- CER in reading order: Levenshtein distance / truth length (so it can exceed 1),
- order-free character F1 (multiset of characters: are the characters there at all),
- the per-page CER gap between the highest and the lowest DPI (resolution must not matter).

These pages are a held-out set: no test uses them and nothing is tuned on one of them alone.

    apt-get install poppler-utils
    python scripts/eval_real_pages.py --fetch            # apt-get download + extract the .debs
    python scripts/eval_real_pages.py --dpi 150 300 --json before.json
    python scripts/eval_real_pages.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

DOCS = Path("/tmp/mineru-eval-docs")  # where --fetch extracts the packages
TEX = "usr/share/doc/texlive-doc/latex"
# package -> the Debian package holding the document (paths below are inside it)
MANIFEST: list[tuple[str, str, int, str, str]] = [
    # (package, path, page, kind, truth mode)
    # prose: manuals, single column
    ("r-doc-pdf", "usr/share/doc/r-doc-pdf/manual/R-intro.pdf", 10, "prose", "stream"),
    ("r-doc-pdf", "usr/share/doc/r-doc-pdf/manual/R-intro.pdf", 25, "prose", "stream"),
    ("r-doc-pdf", "usr/share/doc/r-doc-pdf/manual/R-data.pdf", 7, "prose", "stream"),
    ("gnuplot-doc", "usr/share/doc/gnuplot/gnuplot.pdf", 25, "prose", "stream"),
    ("gnuplot-doc", "usr/share/doc/gnuplot/gnuplot.pdf", 60, "prose", "stream"),
    ("libtasn1-doc", "usr/share/doc/libtasn1-doc/libtasn1.pdf", 5, "prose", "stream"),
    ("shared-mime-info", "usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf", 3, "prose", "stream"),
    ("texlive-publishers-doc", f"{TEX}/elsarticle/elstest-1p.pdf", 2, "prose", "stream"),
    # two-column papers
    ("texlive-publishers-doc", f"{TEX}/elsarticle/elstest-5p.pdf", 1, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/elsarticle/elstest-5p.pdf", 2, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/elsarticle/elstest-5p.pdf", 3, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 1, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 2, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 5, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/revtex/sample/aps/apssamp.pdf", 2, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/revtex/sample/aps/apssamp.pdf", 3, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 2, "two-column", "stream"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 3, "two-column", "stream"),
    # tables (in papers and on their own)
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 3, "table", "stream"),
    ("texlive-publishers-doc", f"{TEX}/acmart/samples/sample-sigconf.pdf", 4, "table", "stream"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 4, "table", "stream"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 5, "table", "layout"),
    ("texlive-publishers-doc", f"{TEX}/mnras/mnras_guide.pdf", 9, "table", "stream"),
    ("texlive-latex-recommended-doc", f"{TEX}/booktabs/booktabs.pdf", 4, "table", "stream"),
    # slides (beamer decks, 4:3 and 16:9)
    ("texlive-latex-recommended-doc", f"{TEX}/beamer/beamerexample-conference-talk.pdf", 3, "slide", "stream"),
    ("texlive-latex-recommended-doc", f"{TEX}/beamer/beamerexample-conference-talk.pdf", 6, "slide", "stream"),
    ("texlive-latex-recommended-doc", f"{TEX}/beamer/beamerexample-conference-talk.pdf", 10, "slide", "stream"),
    ("texlive-publishers-doc", f"{TEX}/tuda-ci/DEMO-TUDaBeamer.pdf", 3, "slide", "stream"),
    ("texlive-publishers-doc", f"{TEX}/bfh-ci/DEMO-BFHBeamer.pdf", 6, "slide", "stream"),
    ("texlive-publishers-doc", f"{TEX}/thubeamer/thubeamer-example-en.pdf", 2, "slide", "stream"),
    ("texlive-publishers-doc", f"{TEX}/thubeamer/thubeamer-example-en.pdf", 5, "slide", "stream"),
    ("texlive-latex-recommended-doc", f"{TEX}/beamer-verona/beamer-verona-default.pdf", 3, "slide", "stream"),
    # CJK (Simplified Chinese manuals)
    ("texlive-lang-chinese", f"{TEX}/ctex/ctex.pdf", 1, "CJK", "stream"),
    ("texlive-lang-chinese", f"{TEX}/ctex/ctex.pdf", 3, "CJK", "stream"),
    ("texlive-lang-chinese", f"{TEX}/ctex-faq/ctex-faq.pdf", 5, "CJK", "stream"),
    ("texlive-lang-chinese", f"{TEX}/ctex-faq/ctex-faq.pdf", 6, "CJK", "stream"),
    (
        "texlive-lang-chinese",
        "usr/share/doc/texlive-doc/support/tlmgr-intro-zh-cn/tlmgr-intro-zh-cn.pdf",
        2,
        "CJK",
        "flow",
    ),
    ("texlive-lang-chinese", f"{TEX}/xpinyin/xpinyin.pdf", 1, "CJK", "stream"),
]
KINDS = ("prose", "two-column", "table", "slide", "CJK")
INSTALLED = ("libtasn1-doc", "shared-mime-info")  # read from / when the system has them


def fetch(docs: Path) -> None:
    """apt-get download the manifest's packages and extract them under `docs`."""
    docs.mkdir(parents=True, exist_ok=True)
    debs = docs / "debs"
    debs.mkdir(exist_ok=True)
    packages = sorted({p for p, *_ in MANIFEST})
    subprocess.run(["apt-get", "download", *packages], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(docs)], check=True)


def document(docs: Path, package: str, path: str) -> Path:
    if package in INSTALLED and (Path("/") / path).is_file():
        return Path("/") / path
    return docs / path


def missing_documents(docs: Path, entries) -> list[str]:
    """The documents of these manifest entries ((package, path, ...) each) not on disk."""
    return sorted({str(document(docs, p, path)) for p, path, *_ in entries if not document(docs, p, path).is_file()})


# Dot leaders (". . . . ." between a table of contents' entry and its page) are spacing drawn
# with dots: their count depends on the font and the line's width, and no reader reproduces it.
_LEADERS = re.compile(r"(?:\.\s*){3,}")


def squash(text: str) -> str:
    return re.sub(r"\s+", "", _LEADERS.sub("", unicodedata.normalize("NFKC", text)))


def cer(hyp: str, truth: str) -> float:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(hyp, truth) / max(1, len(truth))


def char_f1(hyp: str, truth: str) -> float:
    if not hyp or not truth:
        return 0.0
    tp = sum((Counter(hyp) & Counter(truth)).values())
    precision, recall = tp / len(hyp), tp / len(truth)
    return 0.0 if tp == 0 else 2 * precision * recall / (precision + recall)


# pdfium reports a hyphen that TeX set at a line's end as U+0002: the word the line breaks is
# one word ("polari-" / "ton" is polariton), and the reader joins such a word across the break.
_PDFIUM_HYPHEN = "\x02"


def truth_text(pdf: Path, page: int, mode: str) -> str:
    if mode == "stream":
        import pypdfium2 as pdfium

        doc = pdfium.PdfDocument(str(pdf))
        try:
            text: str = doc[page - 1].get_textpage().get_text_bounded()
        finally:
            doc.close()
        return text.replace(_PDFIUM_HYPHEN, "")
    args = ["pdftotext", "-enc", "UTF-8", "-f", str(page), "-l", str(page)]
    args += ["-layout"] if mode == "layout" else []  # "flow": pdftotext's reading order
    return subprocess.run([*args, str(pdf), "-"], capture_output=True, text=True, check=True).stdout


Rect = tuple[float, float, float, float]  # (x1, y1, x2, y2) fractions of the page as shown, top left first


class RasterText:
    """Where a page's raster images are, and whether its text layer has text at a place: a line
    the engine read inside an image is left out of the scored text only when the text layer has
    nothing under it (text set over a background picture, or beside a picture whose clipped-away
    part spans it, is in the text layer and is scored)."""

    def __init__(self, pdf: Path, page: int):
        import pypdfium2 as pdfium

        self._doc = pdfium.PdfDocument(str(pdf))
        self._page = self._doc[page - 1]
        self._text = self._page.get_textpage()
        self._crop = self._page.get_cropbox()  # (left, bottom, right, top), PDF points
        self.rotation = self._page.get_rotation() % 360
        self.rects = [self._shown(r) for r in self._image_rects()]

    def close(self) -> None:
        self._doc.close()

    def _image_rects(self) -> list[Rect]:
        """The image objects' bounds as fractions of the unrotated page. Images inside form
        XObjects report bounds in their form's space: each is carried to the page through the
        matrices of the forms holding it."""
        import pypdfium2 as pdfium
        import pypdfium2.raw as pdfium_c

        left, bottom, right, top = self._crop
        width, height = right - left, top - bottom
        forms: list[tuple[int, pdfium.PdfMatrix]] = []  # (level, form space -> page space)
        rects = []
        for obj in self._page.get_objects(max_depth=8):
            while forms and forms[-1][0] >= obj.level:
                forms.pop()
            if obj.type == pdfium_c.FPDF_PAGEOBJ_FORM:
                matrix = obj.get_matrix()
                forms.append((obj.level, matrix.multiply(forms[-1][1]) if forms else matrix))
            elif obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                x1, y1, x2, y2 = obj.get_bounds()
                if forms:
                    x1, y1, x2, y2 = forms[-1][1].on_rect(x1, y1, x2, y2)
                rects.append(((x1 - left) / width, (top - y2) / height, (x2 - left) / width, (top - y1) / height))
        return rects

    def _shown(self, r: Rect) -> Rect:
        """An unrotated page's rectangle as the page is shown (its /Rotate turns it clockwise)."""
        x1, y1, x2, y2 = r
        return {
            0: (x1, y1, x2, y2),
            90: (1 - y2, x1, 1 - y1, x2),
            180: (1 - x2, 1 - y2, 1 - x1, 1 - y1),
            270: (y1, 1 - x2, y2, 1 - x1),
        }[self.rotation]

    def _unshown(self, r: Rect) -> Rect:
        """The inverse of _shown."""
        x1, y1, x2, y2 = r
        return {
            0: (x1, y1, x2, y2),
            90: (y1, 1 - x2, y2, 1 - x1),
            180: (1 - x2, 1 - y2, 1 - x1, 1 - y1),
            270: (1 - y2, x1, 1 - y1, x2),
        }[self.rotation]

    def in_image(self, r: Rect) -> bool:
        cx, cy = (r[0] + r[2]) / 2, (r[1] + r[3]) / 2
        return any(x1 <= cx <= x2 and y1 <= cy <= y2 for x1, y1, x2, y2 in self.rects)

    def has_text(self, r: Rect) -> bool:
        """Whether the text layer has a character (not a space) inside this shown rectangle."""
        left, bottom, right, top = self._crop
        x1, y1, x2, y2 = self._unshown(r)
        width, height = right - left, top - bottom
        found = self._text.get_text_bounded(
            left=left + x1 * width, bottom=top - y2 * height, right=left + x2 * width, top=top - y1 * height
        )
        return bool(found.strip())


def scored_text(record, raster: RasterText) -> tuple[str, str]:
    """(the record's text in reading order without the lines read inside raster images that the
    text layer has nothing under, those lines)."""
    kept, inside = [], []
    width, height = (record.image.width, record.image.height) if record.image else (1, 1)

    def image_only(box) -> bool:
        r = (box[0] / width, box[1] / height, box[2] / width, box[3] / height)
        return raster.in_image(r) and not raster.has_text(r)

    for block in record.blocks:
        lines = block.extra.get("lines") or []
        out = [ln for ln in lines if image_only(ln["bbox"])]
        if not out:
            kept.append(block.text)
        elif len(out) < len(lines):
            kept.append(" ".join(ln["text"] for ln in lines if ln not in out))
        inside += [ln["text"] for ln in out]
    return "\n".join(kept), "\n".join(inside)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def one_page_pdfs(entries, docs: Path, folder: Path) -> list[Path]:
    """Each manifest page as its own PDF (its fonts and images kept), named by its index."""
    import pypdfium2 as pdfium

    paths = []
    for n, (package, path, page, _kind, _mode) in enumerate(entries):
        src = pdfium.PdfDocument(str(document(docs, package, path)))
        out = pdfium.PdfDocument.new()
        out.import_pages(src, [page - 1])
        target = folder / f"p{n:03d}.pdf"
        out.save(str(target))
        out.close()
        src.close()
        paths.append(target)
    return paths


def run(entries, docs: Path, dpis: list[int], text_layer: str = "off") -> dict:
    import mineru_cli

    truths = [squash(truth_text(document(docs, p, path), page, mode)) for p, path, page, _k, mode in entries]
    rasters = [RasterText(document(docs, p, path), page) for p, path, page, _k, _m in entries]
    results: dict = {
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "text_layer": text_layer,
        "pages": [],
        "timings": {},
    }
    with tempfile.TemporaryDirectory(prefix="eval-pages-") as tmp:
        pdfs = one_page_pdfs(entries, docs, Path(tmp))
        by_name = {p.name: n for n, p in enumerate(pdfs)}
        rows = [
            {
                "doc": path,
                "page": page,
                "kind": kind,
                "truth_chars": len(truths[n]),
                "cer": {},
                "f1": {},
                "text": {},
                "raster_text": {},
            }
            for n, (_pkg, path, page, kind, _mode) in enumerate(entries)
        ]
        for dpi in dpis:
            t = time.perf_counter()
            for record in mineru_cli.parse(pdfs, engine="ocr", cache=False, dpi=dpi, text_layer=text_layer):
                n = by_name[Path(record.source).name]
                if not record.ok:
                    print(f"  page {n} failed: {record.error}", file=sys.stderr)
                text, rows[n]["raster_text"][str(dpi)] = scored_text(record, rasters[n])
                rows[n]["text"][str(dpi)] = text
                hyp = squash(text)
                rows[n]["cer"][str(dpi)] = round(cer(hyp, truths[n]), 4)
                rows[n]["f1"][str(dpi)] = round(char_f1(hyp, truths[n]), 4)
            seconds = time.perf_counter() - t
            results["timings"][str(dpi)] = {
                "seconds": round(seconds, 1),
                "pages_per_min": round(60 * len(pdfs) / seconds, 1),
            }
            print(f"  {dpi} DPI: {len(pdfs)} pages in {seconds:.0f} s", file=sys.stderr)
    for raster in rasters:
        raster.close()
    results["pages"] = rows
    return results


def rescore(results: dict, docs: Path) -> dict:
    """Recompute a saved run's metrics against today's truths (the hypotheses are kept: a run
    saved before raster text was kept apart still has it in its text)."""
    modes = {(path, page): (package, mode) for package, path, page, _kind, mode in MANIFEST}
    for row in results["pages"]:
        package, mode = modes[(row["doc"], row["page"])]
        truth = squash(truth_text(document(docs, package, row["doc"]), row["page"], mode))
        row["truth_chars"] = len(truth)
        for dpi, text in row["text"].items():
            row["cer"][dpi] = round(cer(squash(text), truth), 4)
            row["f1"][dpi] = round(char_f1(squash(text), truth), 4)
    return results


def summary(results: dict) -> list[str]:
    rows, dpis = results["pages"], list(results["timings"])
    out = [
        f"CPU: {results['cpu']}; "
        + ", ".join(
            f"{d} DPI: {v['seconds']} s ({v['pages_per_min']} pages/min)" for d, v in results["timings"].items()
        )
    ]
    head = "| kind | pages | " + " | ".join(f"CER {d} | F1 {d}" for d in dpis) + " |"
    out += [head, "|" + " --- |" * (2 + 2 * len(dpis))]
    groups = [(k, [r for r in rows if r["kind"] == k]) for k in KINDS]
    groups.append(("all but CJK", [r for r in rows if r["kind"] != "CJK"]))
    for kind, members in groups:
        if not members:
            continue
        cells = []
        for d in dpis:
            cells.append(f"{statistics.mean(r['cer'][d] for r in members):.3f}")
            cells.append(f"{statistics.mean(r['f1'][d] for r in members):.3f}")
        out.append(f"| {kind} | {len(members)} | " + " | ".join(cells) + " |")
    hi = max(dpis, key=int)
    for lo in sorted((d for d in dpis if d != hi), key=int):  # the highest DPI against each lower one
        gaps = [(r["cer"][hi] - r["cer"][lo], r) for r in rows]
        worse = [g for g in gaps if g[0] > 0.02]
        out.append(
            f"CER {hi} - {lo} DPI per page: mean {statistics.mean(g for g, _ in gaps):+.3f}, "
            f"max {max(g for g, _ in gaps):+.3f}; {len(worse)} page(s) more than 0.02 worse at {hi} DPI"
        )
        for g, r in sorted(worse, key=lambda x: -x[0]):
            out.append(
                f"  {g:+.3f}  {r['kind']:<10} {Path(r['doc']).name} p{r['page']}  CER {r['cer'][lo]} -> {r['cer'][hi]}"
            )
    for r in rows:
        left_out = {d: len(squash(r.get("raster_text", {}).get(d, ""))) for d in dpis}
        if any(left_out.values()):
            counts = ", ".join(f"{n} at {d} DPI" for d, n in left_out.items())
            out.append(f"  left out (read inside raster images): {Path(r['doc']).name} p{r['page']}: {counts} chars")
    return out


def per_page(results: dict) -> list[str]:
    dpis = list(results["timings"])
    lines = []
    for r in results["pages"]:
        vals = "  ".join(f"{d}: CER {r['cer'][d]:.3f} F1 {r['f1'][d]:.3f}" for d in dpis)
        lines.append(f"{r['kind']:<10} {Path(r['doc']).name:<34} p{r['page']:<3} {vals}")
    return lines


def _of_kind(results: dict, kind: str) -> list[dict]:
    return [r for r in results["pages"] if (r["kind"] == kind if kind in KINDS else r["kind"] != "CJK")]


def compare(before: dict, after: dict) -> list[str]:
    dpis = [d for d in before["timings"] if d in after["timings"]]
    out = ["| kind | " + " | ".join(f"CER {d} before -> after | F1 {d} before -> after" for d in dpis) + " |"]
    out.append("|" + " --- |" * (1 + 2 * len(dpis)))
    for kind in (*KINDS, "all but CJK"):
        b, a = _of_kind(before, kind), _of_kind(after, kind)
        if not b or not a:
            continue
        cells = []
        for d in dpis:
            for metric in ("cer", "f1"):
                cells.append(
                    f"{statistics.mean(r[metric][d] for r in b):.3f} -> {statistics.mean(r[metric][d] for r in a):.3f}"
                )
        out.append(f"| {kind} | " + " | ".join(cells) + " |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DOCS, help="where the packages are extracted")
    ap.add_argument("--fetch", action="store_true", help="apt-get download and extract the packages, then stop")
    ap.add_argument("--dpi", type=int, nargs="+", default=[150, 300])
    ap.add_argument("--kind", choices=KINDS, nargs="+", help="only these kinds")
    ap.add_argument(
        "--text-layer",
        choices=("off", "auto"),
        default="off",
        help="off (default): every page is read from its pixels, as a scan would be; auto: born-digital "
        "pages take their text layer's lines (then only the layout and the order are measured)",
    )
    ap.add_argument("--json", type=Path, help="write the per-page results here")
    ap.add_argument("--pages", action="store_true", help="print every page's figures")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --json files")
    ap.add_argument("--manifest", action="store_true", help="print the manifest and stop")
    ap.add_argument("--rescore", type=Path, help="recompute a --json file's metrics (its texts kept) and print them")
    args = ap.parse_args(argv)

    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print("\n".join(compare(before, after)))
        return 0
    if args.rescore:
        results = rescore(json.loads(args.rescore.read_text()), args.docs)
        args.rescore.write_text(json.dumps(results, indent=1))
        print("\n".join((per_page(results) if args.pages else []) + summary(results)))
        return 0
    if args.manifest:
        for package, path, page, kind, mode in MANIFEST:
            print(f"{kind:<10} {package:<30} {path} p{page} ({mode})")
        return 0
    if args.fetch:
        fetch(args.docs)
        return 0
    entries = [e for e in MANIFEST if not args.kind or e[3] in args.kind]
    missing = missing_documents(args.docs, entries)
    if missing:
        print(f"missing documents (run with --fetch): {missing}", file=sys.stderr)
        return 2
    results = run(entries, args.docs, args.dpi, args.text_layer)
    if args.json:  # ASCII: a text layer may hold lone surrogates, which UTF-8 cannot write
        args.json.write_text(json.dumps(results, indent=1))
    if args.pages:
        print("\n".join(per_page(results)))
    print("\n".join(summary(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
