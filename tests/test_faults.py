"""Faults of the output side through the real CLI: per-document files of a document that now
fails, an --out-dir without --format, and a filesystem that fills up (journal, cache,
per-document files) followed by a re-run once there is room again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import mineru, read_journal
from PIL import Image, ImageDraw, ImageFont

from mineru_cli.core.errors import SetupError

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


def text_page(path: Path, text: str, size=(640, 200)) -> Path:
    img = Image.new("RGB", size, "white")
    ImageDraw.Draw(img).text((20, 70), text, fill="black", font=ImageFont.load_default(size=36))
    img.save(path)
    return path


def test_files_of_a_document_that_now_fails_are_removed_not_kept(tmp_path):
    (tmp_path / "in").mkdir()
    text_page(tmp_path / "in" / "keep.png", "Still a good page")
    bad = text_page(tmp_path / "in" / "gone.png", "Soon a broken page")
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "-f", "content-list"]
    args += ["--out-dir", "docs"]
    assert mineru(*args, cwd=tmp_path).returncode == 0
    docs = tmp_path / "docs"
    assert "Soon" in (docs / "gone_png" / "gone.md").read_text()
    bad.write_bytes(bad.read_bytes()[:100])  # the file is now truncated: its page fails
    r = mineru(*args, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    recs = {x["id"]: x for x in read_journal(tmp_path / "o.jsonl")}
    assert recs["gone.png#0"]["status"] == "failed" and recs["keep.png#0"]["status"] == "ok"
    assert not (docs / "gone_png" / "gone.md").exists()
    assert not (docs / "gone_png" / "gone_content_list.json").exists()
    assert "removed 2 per-document file(s) of documents with no ok page now" in r.stderr, r.stderr
    assert "Still" in (docs / "keep_png" / "keep.md").read_text()
    assert json.loads((docs / "keep_png" / "keep_content_list.json").read_text())
    text_page(bad, "Mended page")  # and back: written again
    assert mineru(*args, cwd=tmp_path).returncode == 0
    assert "Mended" in (docs / "gone_png" / "gone.md").read_text()


def test_an_out_dir_without_a_format_is_refused(tmp_path):
    text_page(tmp_path / "p.png", "Alpha")
    r = mineru("parse", "p.png", "--out", "o.jsonl", "--no-cache", "--out-dir", "docs", cwd=tmp_path)
    assert r.returncode == 2 and "--out-dir docs needs --format" in r.stderr, r.stderr
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "docs").exists()
    import mineru_cli

    with pytest.raises(SetupError, match="needs --format"):
        mineru_cli.parse([tmp_path / "p.png"], out=tmp_path / "o.jsonl", out_dir=tmp_path / "docs")
