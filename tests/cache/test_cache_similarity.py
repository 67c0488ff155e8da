"""Near-duplicate verification: look-alikes are rejected, re-encodings accepted.

The look-alikes share their pHash (asserted), so these tests fail if the
verification stage is weakened to trust the hash.
"""

from functools import lru_cache

import pytest
from PIL import Image
from synthetic import (
    REENCODINGS,
    amount_page,
    chart_slide,
    colour_slide,
    invoice,
    jpeg,
    long_screenshot,
    lookalike_pairs,
    rescale,
    secondary_text_page,
    slide,
    text_page,
)

from mineru_cli.cache import ResultCache
from mineru_cli.cache import similarity as sim
from mineru_cli.cache.similarity import pixel_sha256

FP = "engine=test;v=1"


@lru_cache(maxsize=1)
def pairs():
    return lookalike_pairs()


def verdict(a, b):
    ta = sim.make_thumb(a)
    return sim.compare(ta, sim.make_thumb(b, (ta.shape[1], ta.shape[0])))


def over_threshold(v) -> float:
    """How far past its threshold the deciding measure (luma or chroma) is: > 1 rejects."""
    return max(v.luma_over, v.chroma_diff / sim.CHROMA_DIFF)


REENCODED_PAGES = (
    invoice("1,234.50"),
    slide("higher"),
    text_page(1),
    text_page(9, size=14),
    amount_page("3141.50", 11, 1654, 2339, 17),
    colour_slide("4.2"),
    colour_slide("100,000", (255, 88, 0), (128, 128, 128)),
)


def payload_for(name, w, h):
    """A result whose one line box lies on the page's title (every page here has one at the top
    left), as an engine's would: the line rules look at the pixels inside it."""
    return {
        "blocks": [
            {
                "type": "text",
                "bbox": [10, 20, w - 10, 90],
                "text": name,
                "score": 1.0,
                "lines": [{"bbox": [50, 40, min(w - 10, 420), 85], "text": name}],
            }
        ],
        "markdown": name,
    }


def test_lookalikes_collide_in_phash():
    """The test set means something: pHash alone cannot tell these pages apart."""
    for a, b, what in pairs():
        d = int(
            sim.hamming(__import__("numpy").array([sim.phash64(sim.make_thumb(a))]), sim.phash64(sim.make_thumb(b)))[0]
        )
        assert d <= sim.PHASH_RADIUS, f"{what}: pHash distance {d} would not even nominate it"


@pytest.mark.parametrize("variant", ["raw", "jpeg", "rescale+jpeg"])
def test_lookalikes_fail_verification(variant):
    fn = {"raw": lambda im: im, "jpeg": jpeg, "rescale+jpeg": lambda im: jpeg(rescale(im))}[variant]
    for a, b, what in pairs():
        v = verdict(a, fn(b))
        assert not v.ok, f"{what} ({variant}) verified as the same page: {v}"
        assert over_threshold(v) >= 1.3, f"{what} ({variant}) too close to the threshold: {v}"


@pytest.mark.parametrize("name", list(REENCODINGS))
def test_reencodings_pass_verification(name):
    for page in REENCODED_PAGES:
        v = verdict(page, REENCODINGS[name](page))
        assert v.ok, f"{name}: {v}"
        assert v.mean_diff <= sim.GLOBAL_MEAN_MAX and over_threshold(v) <= 1 / 1.3, (
            f"{name} too close to the threshold: {v}"
        )


def test_a_changed_amount_in_small_type_on_a_small_page_is_never_a_near_hit(tmp_path):
    """The chaos soak's wrong page: a 500x650 invoice whose total (~6 px tall in the thumbnail)
    reads 6,906.50 against 5,605.50 passes the pixel check (40 <= PIXEL_DIFF). Its type is too
    small to verify, so the page gets exact hits only, its re-encodings included."""

    def small(amount):
        return invoice(amount).resize((500, 650))

    a, b = small("6,906.50"), small("5,605.50")
    assert over_threshold(verdict(a, b)) < 1.3  # the pixel check alone has no margin here ...
    assert sim.glyph_height(sim.make_thumb(a)) < sim.GLYPH_MIN  # ... and the type is small
    with ResultCache(tmp_path) as cache:
        cache.store(a, pixel_sha256(a), FP, "inv0577.png#0", payload_for("A", *a.size))
        for query in (b, jpeg(b), jpeg(a)):
            assert cache.lookup(query, pixel_sha256(query), FP) is None
        assert cache.lookup(a, pixel_sha256(a), FP).kind == "hit"


@pytest.mark.parametrize(("width", "eligible"), [(500, False), (540, False), (660, True), (760, True), (1000, True)])
def test_the_type_size_rule_follows_the_invoice_across_sizes(width, eligible, tmp_path):
    """Where the rule lets a page be verified, every look-alike total is rejected with the 1.3x
    margin; where it does not, the page hits exactly only."""

    def inv(amount):
        return invoice(amount).resize((width, round(width * 1.3)), Image.Resampling.LANCZOS)

    page = inv("1,234.50")
    assert (sim.verification_thumb(page) is not None) == eligible, sim.glyph_height(sim.make_thumb(page))
    if eligible:
        for x, y in [("6,906.50", "5,605.50"), ("9,999.99", "9,999.90"), ("5,600.00", "6,600.00")]:
            for variant in (inv(y), jpeg(inv(y)), jpeg(rescale(inv(y)))):
                assert over_threshold(verdict(inv(x), variant)) >= 1.3, (x, y)
        with ResultCache(tmp_path) as cache:
            cache.store(page, pixel_sha256(page), FP, "p#0", payload_for("A", *page.size))
            copy = jpeg(page)
            assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"


def test_a_line_of_small_print_among_large_content_is_never_a_near_hit(tmp_path):
    """The page's median glyph is large (the bars), so the type rule lets it be searched, and a
    changed price in 8 px type measures far under PIXEL_DIFF. The cached result's own line box
    for it (13 px tall, as the OCR engine reads this page; 10.4 px in the thumbnail) refuses it."""
    a, b = chart_slide("5,605.50"), chart_slide("6,906.50")
    assert sim.verification_thumb(a) is not None and verdict(a, b).ok  # stages 1-3 cannot tell
    payload = {
        "blocks": [
            {
                "type": "text",
                "bbox": [56, 657, 250, 670],
                "text": "Price 5,605.50 EUR",
                "lines": [{"bbox": [56, 657, 250, 670], "text": "Price 5,605.50 EUR"}],
            }
        ],
        "markdown": "Price 5,605.50 EUR",
    }
    with ResultCache(tmp_path) as cache:
        cache.store(a, pixel_sha256(a), FP, "a#0", payload)
        for query in (b, jpeg(b), jpeg(a)):  # its re-encodings are refused as well: exact hits only
            assert cache.lookup(query, pixel_sha256(query), FP) is None
        # the same page whose result has only tall lines is found near
        c = chart_slide("1.00", size=24)
        box = [56, 650, 400, 690]
        tall = {"blocks": [{"type": "text", "bbox": box, "lines": [{"bbox": box}]}], "markdown": "Price 1.00 EUR"}
        cache.store(c, pixel_sha256(c), FP, "c#0", tall)
        copy = jpeg(c)
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"


def test_text_told_apart_by_colour_more_than_brightness_is_never_a_near_hit(tmp_path):
    """Gold text on white: a changed total moves the luma less than its colour contrast allows,
    and the chroma blur hides its thin strokes (a review got such pages served each other's
    result). Its line spans under LINE_LUMA_MIN of luma, so the page hits exactly only; the same
    line in black is found near."""
    box = [57, 681, 218, 704]  # the OCR engine's box for this line

    def payload(amount):
        line = f"Total due: {amount}"
        return {"blocks": [{"type": "text", "bbox": box, "lines": [{"bbox": box, "text": line}]}], "markdown": line}

    gold = (255, 215, 0)
    a, b = secondary_text_page("5,600.00", gold), secondary_text_page("6,600.00", gold)
    assert verdict(a, b).ok  # the pixel check cannot tell them apart
    with ResultCache(tmp_path / "gold") as cache:
        cache.store(a, pixel_sha256(a), FP, "a#0", payload("5,600.00"))
        for query in (b, jpeg(b), jpeg(a)):
            assert cache.lookup(query, pixel_sha256(query), FP) is None
    black = secondary_text_page("5,600.00", (0, 0, 0))
    with ResultCache(tmp_path / "black") as cache:
        cache.store(black, pixel_sha256(black), FP, "a#0", payload("5,600.00"))
        copy = jpeg(black)
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"


def test_line_boxes_are_measured_in_thumbnail_pixels():
    def payload(h):
        return {
            "blocks": [{"lines": [{"bbox": [0, 0, 100, 20]}, {"bbox": [0, 30, 100, 30 + h]}]}, {"bbox": [0, 0, 9, 9]}]
        }

    assert sim.lines_tall_enough(payload(19), 0.8)  # 15.2 px
    assert not sim.lines_tall_enough(payload(18), 0.8)  # 14.4 px
    assert not sim.lines_tall_enough(payload(24), 0.62)  # an A4 page at 200 DPI: 14.9 px
    assert sim.lines_tall_enough({"blocks": [{"type": "image", "bbox": [0, 0, 9, 9]}]}, 0.8)  # no text
    # text without line boxes (a block the VLM read whole): its print is unknown, no near-hit
    assert not sim.lines_tall_enough({"blocks": [{"type": "text", "bbox": [0, 0, 900, 90], "text": "Total 5"}]}, 0.8)
    assert not sim.lines_tall_enough({"blocks": [{"type": "text", "text": "Total 5", "lines": []}]}, 0.8)
    assert sim.lines_tall_enough(payload(19) | {"blocks": payload(19)["blocks"] + [7, {"lines": None}]}, 0.8)
    # vertical text: its type size is the box's width
    assert not sim.lines_tall_enough({"blocks": [{"lines": [{"bbox": [17, 853, 34, 1002]}]}]}, 0.8)
    assert sim.lines_tall_enough({"blocks": [{"lines": [{"bbox": [17, 853, 37, 1002]}]}]}, 0.8)
    # a box that is not four numbers, or NaN: what the line holds is unknown, so no near-hit
    for box in (None, ["0", "0", "x", "9"], [[0, 0], [9, 0], [9, 9], [0, 9]], [0, 0, 100, float("nan")]):
        assert not sim.lines_tall_enough({"blocks": [{"lines": [{"bbox": box}]}]}, 0.8), box
    assert not sim.lines_tall_enough({"blocks": {"lines": []}}, 0.8)


def test_colour_decides_where_brightness_cannot():
    """Orange text on a gray of the same brightness: the luma barely differs, the chroma does."""
    v = verdict(
        colour_slide("100,000", (255, 88, 0), (128, 128, 128)), colour_slide("900,000", (255, 88, 0), (128, 128, 128))
    )
    assert v.max_diff < sim.PIXEL_DIFF / 2 and v.chroma_diff > sim.CHROMA_DIFF, v


def test_thumbnails_keep_small_print_and_long_pages_hit_exactly_only(tmp_path):
    # an A4 page at 200 DPI keeps 62 % of its size (6 pt type stays ~10 px tall)
    assert sim.thumb_size(1654, 2339) == (1024, 1448)
    assert sim.thumb_size(1280, 720) == (1024, 576)  # never less than 20 % smaller
    page, other = long_screenshot("5,600.00"), long_screenshot("9,600.00")
    assert not sim.near_eligible(page.width, page.height)
    with ResultCache(tmp_path) as cache:
        cache.store(page, pixel_sha256(page), FP, "long#0", payload_for("A", page.width, page.height))
        for query in (other, jpeg(page)):  # a look-alike and a re-encoding: both misses
            assert cache.lookup(query, pixel_sha256(query), FP) is None
        assert cache.lookup(page, pixel_sha256(page), FP).kind == "hit"
        # beside it, an eligible page stored later is still found near (the thumbnail-less row
        # does not get in the way of the search)
        small = invoice("1,234.50")
        cache.store(small, pixel_sha256(small), FP, "inv#0", payload_for("B", small.width, small.height))
        copy = jpeg(small)
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"


def test_no_lookalike_ever_gets_the_other_result(tmp_path):
    """End to end through ResultCache: zero false hits on the look-alike set."""
    false_hits = []
    for i, (a, b, what) in enumerate(pairs()):
        with ResultCache(tmp_path / f"c{i}") as cache:
            cache.store(a, pixel_sha256(a), FP, "a#0", payload_for("A", a.width, a.height))
            for variant in (b, jpeg(b), jpeg(rescale(b))):
                hit = cache.lookup(variant, pixel_sha256(variant), FP)
                if hit is not None:
                    false_hits.append((what, hit.kind))
    assert false_hits == []


def test_reencoded_copies_are_near_hits_naming_the_source(tmp_path):
    page = invoice("1,234.50")
    with ResultCache(tmp_path) as cache:
        cache.store(page, pixel_sha256(page), FP, "dump/inv.png#0", payload_for("A", page.width, page.height))
        for name in ("jpeg-q70", "rescale-95", "rescale-95+jpeg-q70"):
            copy = REENCODINGS[name](page)
            hit = cache.lookup(copy, pixel_sha256(copy), FP)
            assert hit is not None and hit.kind == "near-hit", name
            assert hit.source == "dump/inv.png#0"
            assert hit.payload["markdown"] == "A"
        # a PNG re-save has the same decoded pixels: an exact hit
        copy = REENCODINGS["png-resave"](page)
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "hit"


def test_near_hit_rescales_boxes(tmp_path):
    page = text_page(3)
    small = rescale(page)  # 950 x 1235
    with ResultCache(tmp_path) as cache:
        cache.store(page, pixel_sha256(page), FP, "p#0", payload_for("A", 1000, 1300))
        hit = cache.lookup(small, pixel_sha256(small), FP)
    assert hit.kind == "near-hit"
    blk = hit.payload["blocks"][0]
    assert blk["bbox"] == [10, 19, 940, 86]  # [10, 20, 990, 90] * 0.95, rounded
    assert blk["lines"][0]["bbox"] == [48, 38, 399, 81]
    assert all(isinstance(v, int) for v in blk["bbox"])


def test_near_off_and_fingerprint_isolation(tmp_path):
    page = invoice("1,234.50")
    copy = jpeg(page)
    with ResultCache(tmp_path, near="off") as cache:
        cache.store(page, pixel_sha256(page), FP, "p#0", payload_for("A", page.width, page.height))
        assert cache.lookup(copy, pixel_sha256(copy), FP) is None
        assert cache.lookup(page, pixel_sha256(page), FP).kind == "hit"
    with ResultCache(tmp_path) as cache:
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"
        assert cache.lookup(page, pixel_sha256(page), "other-engine") is None
        assert cache.lookup(copy, pixel_sha256(copy), "other-engine") is None


def test_disabled_cache_is_a_no_op():
    cache = ResultCache(None)
    page = slide("x")
    cache.store(page, pixel_sha256(page), FP, "p#0", {"blocks": []})
    assert cache.lookup(page, pixel_sha256(page), FP) is None
    cache.close()


def test_a_page_id_from_a_file_name_that_is_not_utf8_is_stored(tmp_path):
    page = invoice("1,234.50")
    name = b"dump/inv\xff.png".decode("utf-8", "surrogateescape") + "#0"  # as os.fsdecode gives it
    with ResultCache(tmp_path, warn=lambda msg: pytest.fail(msg)) as cache:
        cache.store(page, pixel_sha256(page), FP, name, payload_for("A", page.width, page.height))
        assert cache.lookup(page, pixel_sha256(page), FP).source == "dump/inv\ufffd.png#0"
        copy = jpeg(page)
        assert cache.lookup(copy, pixel_sha256(copy), FP).kind == "near-hit"


def test_a_lower_resolution_copy_cached_first_is_never_used_to_verify(tmp_path, monkeypatch):
    """Verification runs at the cached thumbnail's size: a copy cached at 0.4x would check the
    full-size page at a scale where its amounts no longer differ enough."""
    monkeypatch.setattr(sim, "GLYPH_MIN", 0)  # the detail rule alone (the type rule would refuse it too)
    small = amount_page("5,600", 11, 1654, 2339, 28)
    small = small.resize((round(small.width * 0.4), round(small.height * 0.4)), Image.Resampling.LANCZOS)
    other = amount_page("6,600", 11, 1654, 2339, 28)
    with ResultCache(tmp_path) as cache:
        cache.store(small, pixel_sha256(small), FP, "small#0", payload_for("A", small.width, small.height))
        assert cache.lookup(other, pixel_sha256(other), FP) is None


def test_rows_without_a_thumbnail_never_break_the_search(tmp_path, monkeypatch):
    """A long page is stored without thumbnail or signature; were it nominated (here every pHash
    is made equal) for an eligible page of its shape, the search skips it instead of failing."""
    monkeypatch.setattr(sim, "phash64", lambda thumb: 0)
    monkeypatch.setattr(sim, "GLYPH_MIN", 0)  # blank pages: only their shape matters here
    tall = Image.new("RGB", (1400, 3500), "white")  # thumbnail 1024 x 2560: exact hits only
    query = Image.new("RGB", (700, 1750), "white")  # the same shape, thumbnail 560 x 1400
    assert not sim.near_eligible(*tall.size) and sim.near_eligible(*query.size)
    with ResultCache(tmp_path, warn=lambda msg: pytest.fail(msg)) as cache:
        cache.store(tall, pixel_sha256(tall), FP, "tall#0", payload_for("A", *tall.size))
        assert cache.lookup(query, pixel_sha256(query), FP) is None
