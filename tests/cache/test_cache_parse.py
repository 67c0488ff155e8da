"""The result cache through `mineru parse`: hits, verified near-hits, look-alikes never reused."""

from __future__ import annotations

import io

import pytest
from helpers import mineru, read_journal
from PIL import Image
from synthetic import chart_slide, invoice

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


def _only(path):
    (rec,) = read_journal(path)
    return rec


def test_parse_reuses_verified_near_duplicates_and_never_look_alikes(tmp_path, record_validator):
    cache = tmp_path / "cache"
    first = tmp_path / "a" / "invoice.png"
    first.parent.mkdir()
    invoice("1,234.00").save(first)
    args = ["--cache-dir", str(cache), "--engine", "ocr"]

    r = mineru("parse", "a", "--out", "a.jsonl", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    original = read_journal(tmp_path / "a.jsonl", record_validator)[0]
    assert original["cache"] == {"status": "miss"}
    assert "1,234.00" in original["markdown"] or "1234.00" in original["markdown"].replace(",", "")

    # A JPEG re-encode of the same page elsewhere: verified near-hit, names its source.
    copy = tmp_path / "b" / "invoice-copy.jpg"
    copy.parent.mkdir()
    buf = io.BytesIO()
    Image.open(first).convert("RGB").save(buf, "JPEG", quality=70)
    copy.write_bytes(buf.getvalue())
    r = mineru("parse", "b", "--out", "b.jsonl", *args, cwd=tmp_path)
    near = read_journal(tmp_path / "b.jsonl", record_validator)[0]
    assert near["cache"] == {"status": "near-hit", "from": "invoice.png#0"}
    assert near["blocks"] == original["blocks"] and near["markdown"] == original["markdown"]

    # The same invoice with another total: its pHash collides, but it must be parsed afresh.
    other = tmp_path / "c" / "invoice.png"
    other.parent.mkdir()
    invoice("7,234.00").save(other)
    r = mineru("parse", "c", "--out", "c.jsonl", *args, cwd=tmp_path)
    fresh = read_journal(tmp_path / "c.jsonl", record_validator)[0]
    assert fresh["cache"] == {"status": "miss"}
    assert "7,234.00" in fresh["markdown"] or "7234.00" in fresh["markdown"].replace(",", "")

    # A lossless copy under another name: exact hit on the pixels.
    (tmp_path / "d").mkdir()
    Image.open(first).save(tmp_path / "d" / "renamed.png", optimize=True)
    mineru("parse", "d", "--out", "d.jsonl", *args, cwd=tmp_path)
    assert read_journal(tmp_path / "d.jsonl")[0]["cache"] == {"status": "hit"}

    # --no-cache and --cache-near off are honoured.
    mineru("parse", "b", "--out", "b2.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert read_journal(tmp_path / "b2.jsonl")[0]["cache"] == {"status": "off"}
    mineru("parse", "b", "--out", "b3.jsonl", "--cache-near", "off", *args, cwd=tmp_path)
    assert read_journal(tmp_path / "b3.jsonl")[0]["cache"] == {"status": "miss"}


def test_small_print_among_large_content_is_parsed_afresh(tmp_path, record_validator):
    """A slide of large bars whose one line of small print (8 px) carries the price: the pixel
    check cannot tell two prices apart there; the OCR engine's own line box for it refuses the
    near-hit, so the second slide is parsed and reads its own price."""
    args = ["--cache-dir", str(tmp_path / "cache"), "--engine", "ocr"]
    for folder, price in (("a", "5,605.50"), ("b", "6,906.50")):
        (tmp_path / folder).mkdir()
        chart_slide(price).save(tmp_path / folder / "slide.png")
        r = mineru("parse", folder, "--out", f"{folder}.jsonl", *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        rec = _only(tmp_path / f"{folder}.jsonl")
        assert rec["cache"] == {"status": "miss"}
        assert price in rec["markdown"], rec["markdown"]


def test_parse_with_a_cache_folder_that_is_a_broken_link_runs_without_it_and_says_what_it_is(tmp_path):
    """A --cache-dir that is a link that loops or points at a missing path: parse warned "local
    cache ... unavailable (FileExistsError: [Errno 17] File exists: ...)". As the design has it
    for any cache that cannot be opened (a cache makes a run faster, never failed), the run goes
    on without the local cache, every page a miss, exit 0, and its one warning says what the
    path is."""
    (tmp_path / "in").mkdir()
    invoice("1,234.00").save(tmp_path / "in" / "invoice.png")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    cases = [("loop", "is a link that loops"), ("dangling", f"is a link to {tmp_path / 'gone'}, which does not exist")]
    for name, words in cases:
        args = ["--cache-dir", str(tmp_path / name), "--engine", "ocr"]
        r = mineru("parse", "in", "--out", f"{name}.jsonl", *args, cwd=tmp_path)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert _only(tmp_path / f"{name}.jsonl")["cache"] == {"status": "miss"}
        said = [line for line in r.stderr.splitlines() if "local cache" in line]
        assert len(said) == 1 and f"cache folder {tmp_path / name} {words}" in said[0], r.stderr
        assert "running without it" in said[0] and "Errno" not in said[0], said
    assert not (tmp_path / "gone").exists()
