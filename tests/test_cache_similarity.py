"""Near-duplicate verification: look-alikes are rejected, re-encodings accepted.

The look-alikes share their pHash (asserted), so these tests fail if the
verification stage is weakened to trust the hash.
"""

from functools import lru_cache

import pytest

from mineru_cli.cache import ResultCache
from mineru_cli.cache import similarity as sim
from mineru_cli.cache.synthetic import (REENCODINGS, invoice, jpeg, lookalike_pairs, rescale, slide,
                                        text_page)
from mineru_cli.cache.similarity import pixel_sha256

FP = "engine=test;v=1"


@lru_cache(maxsize=1)
def pairs():
    return lookalike_pairs()


def verdict(a, b):
    ta = sim.make_thumb(a)
    return sim.compare(ta, sim.make_thumb(b, (ta.shape[1], ta.shape[0])))


def payload_for(name, w, h):
    return {"blocks": [{"type": "text", "bbox": [10, 20, w - 10, 60], "text": name, "score": 1.0,
                        "lines": [{"bbox": [10, 20, w // 2, 40], "text": name}]}],
            "markdown": name}


def test_lookalikes_collide_in_phash():
    """The test set means something: pHash alone cannot tell these pages apart."""
    for a, b, what in pairs():
        d = int(sim.hamming(__import__("numpy").array([sim.phash64(sim.make_thumb(a))]),
                            sim.phash64(sim.make_thumb(b)))[0])
        assert d <= sim.PHASH_RADIUS, f"{what}: pHash distance {d} would not even nominate it"


@pytest.mark.parametrize("variant", ["raw", "jpeg", "rescale+jpeg"])
def test_lookalikes_fail_verification(variant):
    fn = {"raw": lambda im: im, "jpeg": jpeg, "rescale+jpeg": lambda im: jpeg(rescale(im))}[variant]
    for a, b, what in pairs():
        v = verdict(a, fn(b))
        assert not v.ok, f"{what} ({variant}) verified as the same page: {v}"
        assert v.max_diff >= 1.3 * sim.PIXEL_DIFF, f"{what} ({variant}) too close to the threshold: {v}"


@pytest.mark.parametrize("name", list(REENCODINGS))
def test_reencodings_pass_verification(name):
    for page in (invoice("1,234.50"), slide("higher"), text_page(1), text_page(9, size=14)):
        v = verdict(page, REENCODINGS[name](page))
        assert v.ok, f"{name}: {v}"
        assert v.max_diff <= sim.PIXEL_DIFF / 1.3, f"{name} too close to the threshold: {v}"


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
    assert blk["bbox"] == [10, 19, 940, 57]          # [10, 20, 990, 60] * 0.95, rounded
    assert blk["lines"][0]["bbox"] == [10, 19, 475, 38]
    assert all(isinstance(v, int) for v in blk["bbox"])


def test_near_off_and_fingerprint_isolation(tmp_path):
    page = invoice("1,234.50")
    copy = jpeg(page)
    with ResultCache(tmp_path, near="off") as cache:
        cache.store(page, pixel_sha256(page), FP, "p#0", payload_for("A", 10, 10))
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
