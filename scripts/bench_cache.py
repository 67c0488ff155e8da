"""Cache benchmark: `python scripts/bench_cache.py [--pages 1000] [--margins]`.

Reports the cost a miss adds to a page (hash + lookup + store), the hit
throughput of a re-run, near-hit cost, the false-hit count on the look-alike
set, and (with --margins) the verification margins the thresholds rest on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mineru_cli.cache import similarity as sim
from mineru_cli.cache.result_cache import ResultCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic test pages
from synthetic import REENCODINGS, amount_page, colour_slide, invoice, jpeg, lookalike_pairs, rescale, slide, text_page

FP = "bench-engine;v=1"


def payload(i: int) -> dict:
    """A result of about the size of a real page's, whose line boxes lie on the page's text (the
    near-hit rules read the pixels inside them): the title, then the body as one box."""
    title, body = [55, 45, 700, 90], [60, 115, 940, 1220]
    return {
        "blocks": [
            {
                "type": "title",
                "bbox": title,
                "text": f"Section {i}",
                "lines": [{"bbox": title, "text": f"Section {i}"}],
            },
            {
                "type": "text",
                "bbox": body,
                "text": "line " * 400,
                "score": 0.99,
                "lines": [{"bbox": body, "text": "line " * 400}],
            },
        ],
        "markdown": f"# page {i}\n" + "text " * 400,
    }


def run(pages: int, cache_dir: Path) -> None:
    t = time.perf_counter()
    imgs = [text_page(i) for i in range(pages)]
    shas = [sim.pixel_sha256(im) for im in imgs]
    print(f"generated {pages} pages of {imgs[0].size} in {time.perf_counter() - t:.1f}s")

    miss_ms, lookup_ms = [], []
    with ResultCache(cache_dir) as c:
        for i, (im, sha) in enumerate(zip(imgs, shas)):
            t0 = time.perf_counter()
            assert c.lookup(im, sha, FP) is None
            t1 = time.perf_counter()
            c.store(im, sha, FP, f"p{i}", payload(i))
            t2 = time.perf_counter()
            lookup_ms.append((t1 - t0) * 1e3)
            miss_ms.append((t2 - t0) * 1e3)
    print(
        f"miss (first run): lookup {statistics.median(lookup_ms):.1f} ms median, "
        f"lookup+store {statistics.median(miss_ms):.1f} ms median / {statistics.mean(miss_ms):.1f} ms mean per page"
    )

    with ResultCache(cache_dir) as c:  # a re-run: a fresh process would open it like this
        t0 = time.perf_counter()
        for im, sha in zip(imgs, shas):
            assert c.lookup(im, sha, FP).kind == "hit"
        dt = time.perf_counter() - t0
        print(f"re-run, {pages} exact hits: {pages / dt:.0f} pages/s ({dt / pages * 1e3:.2f} ms/page)")
        t0 = time.perf_counter()
        for im in imgs:
            assert c.lookup(im, sim.pixel_sha256(im), FP).kind == "hit"
        dt = time.perf_counter() - t0
        print(f"re-run incl. pixel sha256 of the decoded page: {pages / dt:.0f} pages/s")

        copies = [jpeg(rescale(im)) for im in imgs[:50]]
        t0 = time.perf_counter()
        kinds = [c.lookup(cp, sim.pixel_sha256(cp), FP) for cp in copies]
        dt = time.perf_counter() - t0
        near = sum(h is not None and h.kind == "near-hit" for h in kinds)
        print(f"near-hits (95% rescale + JPEG q70 copies): {near}/{len(copies)}, {dt / len(copies) * 1e3:.0f} ms/page")
    size = sum(p.stat().st_size for p in cache_dir.iterdir() if p.is_file())
    print(f"cache size: {size / 1e6:.1f} MB for {pages} pages ({size / pages / 1e3:.0f} KB/page)")


def false_hits(cache_dir: Path) -> None:
    n, bad = 0, 0
    for i, (a, b, what) in enumerate(lookalike_pairs()):
        with ResultCache(cache_dir / f"lookalike{i}") as c:
            c.store(a, sim.pixel_sha256(a), FP, "a", payload(0))
            for v in (b, jpeg(b), jpeg(rescale(b))):
                n += 1
                if c.lookup(v, sim.pixel_sha256(v), FP) is not None:
                    bad += 1
                    print(f"  FALSE HIT: {what}")
    print(f"false hits on the look-alike set: {bad}/{n}")


def margins() -> None:
    def v(a, b):
        ta = sim.make_thumb(a)
        return sim.compare(ta, sim.make_thumb(b, (ta.shape[1], ta.shape[0])))

    def ph(a, b):
        return int(sim.hamming(np.array([sim.phash64(sim.make_thumb(a))]), sim.phash64(sim.make_thumb(b)))[0])

    def over(x):  # the deciding measure against its threshold: > 1 rejects
        return max(x.luma_over, x.chroma_diff / sim.CHROMA_DIFF)

    neg, neg_ph = [], []
    for a, b, what in lookalike_pairs():
        neg_ph.append(ph(a, b))
        for name, fn in (("raw", lambda x: x), ("jpeg", jpeg), ("rescale+jpeg", lambda x: jpeg(rescale(x)))):
            x = v(a, fn(b))
            neg.append((over(x), x.max_diff, x.chroma_diff, f"{what} [{name}]"))
    pos, pos_ph = [], []
    for page in (
        invoice("1,234.50"),
        slide("higher"),
        text_page(1),
        text_page(9, size=14),
        text_page(11, 1654, 2339, 28),
        amount_page("3141.50", 11, 1654, 2339, 17),
        colour_slide("4.2"),
        colour_slide("100,000", (255, 88, 0), (128, 128, 128)),
    ):
        for name, fn in REENCODINGS.items():
            cp = fn(page)
            x = v(page, cp)
            pos.append((over(x), x.max_diff, x.chroma_diff, name))
            pos_ph.append(ph(page, cp))
    lo, hi = min(neg), max(pos)
    print(f"thresholds: luma {sim.PIXEL_DIFF}, chroma {sim.CHROMA_DIFF}")
    print(
        f"look-alikes:  {lo[0]:.2f}x the threshold at least (luma {lo[1]}, chroma {lo[2]}: {lo[3]}); "
        f"luma alone >= {min(n[1] for n in neg)}; pHash distance {min(neg_ph)}-{max(neg_ph)}"
    )
    print(
        f"re-encodings: {hi[0]:.2f}x the threshold at most (luma {hi[1]}, chroma {hi[2]}: {hi[3]}); "
        f"luma <= {max(p[1] for p in pos)}, chroma <= {max(p[2] for p in pos)}; "
        f"pHash distance {min(pos_ph)}-{max(pos_ph)}"
    )
    print(f"margins: {lo[0]:.2f}x below look-alikes, {1 / hi[0]:.2f}x above re-encodings")
    type_rule()


def type_rule() -> None:
    """The type-size rule (sim.GLYPH_MIN): the synthetic invoice at widths 500-900 px, its
    glyph height in the thumbnail against the closest look-alike total (raw, JPEG, rescale+JPEG)."""
    from PIL import Image

    totals = [
        ("6,906.50", "5,605.50"),
        ("1,234.50", "1,284.50"),
        ("1,234.50", "1,234.58"),
        ("9,999.99", "9,999.90"),
        ("3,141.59", "8,141.59"),
        ("5,600.00", "6,600.00"),
        ("7,310.00", "1,310.00"),
    ]
    print(f"type rule: near-duplicate search only where the glyph median is >= {sim.GLYPH_MIN} px")
    for width in (500, 540, 580, 620, 660, 700, 760, 820, 900):

        def inv(amount, width=width):
            return invoice(amount).resize((width, round(width * 1.3)), Image.Resampling.LANCZOS)

        def v(a, b):
            ta = sim.make_thumb(a)
            return sim.compare(ta, sim.make_thumb(b, (ta.shape[1], ta.shape[0]))).luma_over

        base = inv("1,234.50")
        closest = min(
            (v(inv(a), f(inv(b))), f"{a} vs {b}")
            for a, b in totals
            for f in (lambda x: x, jpeg, lambda x: jpeg(rescale(x)))
        )
        copies = max(v(base, f(base)) for f in (jpeg, rescale, lambda x: jpeg(rescale(x))))
        g = sim.glyph_height(sim.make_thumb(base))
        rule = "verified" if g >= sim.GLYPH_MIN else "exact only"
        print(
            f"  invoice {width}x{round(width * 1.3)}: glyph median {g:.0f} px ({rule}); closest look-alike "
            f"{closest[0]:.2f}x the threshold ({closest[1]}), re-encodings <= {copies:.2f}x"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--cache-dir", type=Path)
    ap.add_argument("--margins", action="store_true", help="only print verification margins")
    args = ap.parse_args()
    if args.margins:
        margins()
        return
    with tempfile.TemporaryDirectory() as tmp:
        d = args.cache_dir or Path(tmp)
        run(args.pages, d / "bench")
        false_hits(d)


if __name__ == "__main__":
    main()
