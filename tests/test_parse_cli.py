"""`mineru parse` end to end through the real CLI: bad inputs, exit codes, resume, kill -9."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers import mineru, read_journal
from pdfs import prose, write_pdf
from PIL import Image, ImageDraw, ImageFont

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


def text_page(path: Path, text: str, size=(640, 200)) -> Path:
    """A small real page with one line of text the OCR engine can read."""
    img = Image.new("RGB", size, "white")
    ImageDraw.Draw(img).text((20, 70), text, fill="black", font=ImageFont.load_default(size=36))
    img.save(path)
    return path


def by_id(records):
    return {r["id"]: r for r in records}


@pytest.fixture
def bad_tree(tmp_path):
    """A folder holding good pages next to every kind of bad input."""
    d = tmp_path / "in"
    d.mkdir()
    text_page(d / "a_good.png", "Good page one")
    (d / "b_empty.png").write_bytes(b"")
    good = (d / "a_good.png").read_bytes()
    (d / "c_truncated.png").write_bytes(good[: len(good) // 2])
    (d / "d_notanimage.jpg").write_text("this is plain text, not a JPEG\n")
    (d / "e_dir.png").mkdir()
    (d / "f_dangling.png").symlink_to(d / "does-not-exist.png")
    (d / "g_corrupt.pdf").write_bytes(b"%PDF-1.4\n garbage garbage\n")
    sub = d / "loop"
    sub.mkdir()
    (sub / "back").symlink_to(d, target_is_directory=True)
    frames = [Image.new("RGB", (320, 120), "white") for _ in range(3)]
    for i, f in enumerate(frames):
        ImageDraw.Draw(f).text((10, 40), f"Frame {i + 1}", fill="black", font=ImageFont.load_default(size=32))
    frames[0].save(d / "h_frames.tif", save_all=True, append_images=frames[1:])
    text_page(d / "z_good.png", "Good page two")
    return d


def test_bad_inputs_each_get_a_record_and_the_batch_goes_on(tmp_path, bad_tree, record_validator):
    out = tmp_path / "out.jsonl"
    r = mineru("parse", str(bad_tree), "--out", str(out), "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    recs = by_id(read_journal(out, record_validator))
    expected_fail = {
        "b_empty.png#0": "empty",
        "c_truncated.png#0": "corrupt",
        "d_notanimage.jpg#0": "corrupt",
        "e_dir.png#0": "not_a_file",
        "f_dangling.png#0": "not_found",
        "g_corrupt.pdf#0": "corrupt",
    }
    for pid, kind in expected_fail.items():
        assert recs[pid]["status"] == "failed", recs[pid]
        assert recs[pid]["error"]["kind"] == kind, recs[pid]["error"]
        assert recs[pid]["error"]["message"]
    assert recs["loop/back#0"]["status"] == "skipped"
    assert recs["loop/back#0"]["error"]["kind"] == "symlink_loop"
    # Good pages and all three TIFF frames still parsed.
    for pid in ["a_good.png#0", "z_good.png#0", "h_frames.tif#0", "h_frames.tif#1", "h_frames.tif#2"]:
        assert recs[pid]["status"] == "ok", recs[pid]
    assert "Good page one" in recs["a_good.png#0"]["markdown"]
    assert "Frame 3" in recs["h_frames.tif#2"]["markdown"]
    assert recs["h_frames.tif#1"]["page_count"] == 3
    assert len(recs) == len(read_journal(out))  # one record per page, no duplicates


def test_exit_codes(tmp_path):
    text_page(tmp_path / "p.png", "Hello world")
    ok = mineru("parse", "p.png", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "no images or PDFs" not in ok.stderr
    missing = mineru("parse", "nope/", "--out", "o.jsonl", "--no-cache", cwd=tmp_path)
    assert missing.returncode == 2 and "not found" in missing.stderr
    bad_pages = mineru("parse", "p.png", "--pages", "3-1", "--no-cache", cwd=tmp_path)
    assert bad_pages.returncode == 2 and "--pages" in bad_pages.stderr
    bad_engine = mineru("parse", "p.png", "--engine", "gpt", "--no-cache", cwd=tmp_path)
    assert bad_engine.returncode == 2 and "Invalid value for '--engine'" in bad_engine.stderr
    assert "'auto', 'ocr', 'vlm'" in bad_engine.stderr  # the choices come from the configuration


def test_a_run_that_finds_no_page_says_where_it_looked_and_exits_0(tmp_path):
    """An empty folder, a folder of other files, or a glob that selects nothing gave a summary of
    0 pages and no word: a wrong path or glob in a cron line went unnoticed. It is told now, with
    what narrowed the walk; an empty dump is no failure (exit 0), and --quiet keeps it out."""
    (tmp_path / "dump" / "sub").mkdir(parents=True)
    (tmp_path / "dump" / "notes.md").write_text("not a page\n")
    r = mineru("parse", "dump", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "warning: no images or PDFs to parse in dump (mineru parse reads files named *.bmp" in r.stderr, r.stderr
    assert read_journal(tmp_path / "o.jsonl") == []
    text_page(tmp_path / "dump" / "sub" / "p.png", "Hello world")
    glob = mineru("parse", "dump", "--include", "*.pdf", "--out", "g.jsonl", "--no-cache", "--log-json", cwd=tmp_path)
    assert glob.returncode == 0, glob.stderr
    warned = [e["message"] for e in events(glob.stderr) if e["event"] == "warning"]
    assert [w for w in warned if w.startswith("no images or PDFs to parse in dump with --include '*.pdf' (")], warned
    quiet = mineru("parse", "dump", "--include", "*.pdf", "--out", "q.jsonl", "--no-cache", "-q", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    found = mineru("parse", "dump", "--out", "f.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert found.returncode == 0 and "no images or PDFs" not in found.stderr, found.stderr


def test_log_json_reports_an_error_that_stops_the_run_as_a_json_event(tmp_path):
    """--log-json promises one JSON object a line on stderr: the set-up error that stopped a run
    was a plain `error: ...` line among the JSON events, which a log shipper cannot read."""
    text_page(tmp_path / "p.png", "Hello world")
    for args, message in ((("p.png", "--lang", "fr"), "unsupported lang 'fr'"), (("nope/",), "not found")):
        r = mineru("parse", *args, "--out", "o.jsonl", "--no-cache", "--log-json", cwd=tmp_path)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and lines and all(line.startswith("{") for line in lines), r.stderr
        last = json.loads(lines[-1])
        assert last["event"] == "error" and message in last["message"], last


def test_log_json_reports_a_usage_error_as_a_json_event(tmp_path):
    """A usage error of `parse --log-json` (an unknown option, a bad value, a missing argument)
    was click's boxed text, which a log shipper cannot read: it is one JSON `error` event on
    stderr, exit 2 as before. Without --log-json, after `--` (a path there) and for a command
    that has no --log-json, click's text stays."""
    for args, message in [
        (("p.png", "--bogus", "--log-json"), "No such option: --bogus"),
        (("p.png", "--engine", "gpt", "--log-json"), "Invalid value for '--engine'"),
        (("--cpus", "0", "p.png", "--log-json"), "Invalid value for '--cpus'"),
        (("--log-json",), "Missing argument"),
        # click raises these two with no context of the command
        (("p.png", "--log-json", "-e"), "Option '-e' requires an argument"),
        (("--log-json", "--log-json=1", "p.png"), "Option '--log-json' does not take a value"),
    ]:
        r = mineru("parse", *args, cwd=tmp_path)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, (args, r.stderr)
        event = json.loads(lines[0])
        assert event["event"] == "error" and message in event["message"], event
        assert event["message"].endswith("parse --help'") and ".;" not in event["message"], event
    plain = [("parse", "p.png", "--bogus"), ("parse", "--bogus", "--", "--log-json"), ("cache", "stats", "--log-json")]
    for args in plain:
        r = mineru(*args, cwd=tmp_path)
        assert r.returncode == 2 and "No such option" in r.stderr and not r.stderr.startswith("{"), (args, r.stderr)


def test_log_json_is_asked_for_only_where_click_parses_it_as_the_flag(tmp_path):
    """`parse -o --log-json --bogus x` answered in JSON, though "--log-json" was -o's value there
    (the journal's name): JSON is decided by the command line as click parses it, so there the
    error is click's text, and with --log-json as a flag (before or after the bad option) it is
    one JSON event."""
    for args in (
        ("-o", "--log-json", "--bogus", "x"),
        ("x", "-o", "--log-json=1", "--bogus"),
        ("--bogus", "--", "--log-json"),
    ):
        r = mineru("parse", *args, cwd=tmp_path)
        assert r.returncode == 2 and "No such option: --bogus" in r.stderr, (args, r.stderr)
        assert not r.stderr.startswith("{") and '"event"' not in r.stderr, (args, r.stderr)
    for args in (("--log-json", "-o", "o.jsonl", "--bogus", "x"), ("-o", "o.jsonl", "--bogus", "x", "--log-json")):
        r = mineru("parse", *args, cwd=tmp_path)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 1, (args, r.stderr)
        event = json.loads(lines[0])
        assert event["event"] == "error" and "No such option: --bogus" in event["message"], event
    assert not (tmp_path / "--log-json").exists() and not (tmp_path / "o.jsonl").exists()


def test_a_cache_ttl_no_tier_keeps_is_refused_in_one_short_line(tmp_path):
    """--cache-ttl 2**70 s was taken (each store in Redis then failed); 5,000 digits were
    repeated whole in the refusal. Both are refused before the run, exit 2, in one short line."""
    text_page(tmp_path / "p.png", "Hello world")
    for ttl in (str(2**70), "9" * 5000):
        r = mineru("parse", "p.png", "--out", "o.jsonl", "--cache-ttl", ttl, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and len(r.stderr) < 200, r.stderr
        assert r.stderr.startswith(f"error: --cache-ttl '{ttl[:38]}") and "is too long" in r.stderr, r.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_quiet_prints_nothing_for_a_blank_page_and_a_text_page(tmp_path):
    # RapidOCR warns "The text detection result is empty" on a blank page through its own
    # logger: a cron job's --quiet stderr must stay empty while every page is ok
    Image.new("RGB", (800, 600), "white").save(tmp_path / "blank.png")
    text_page(tmp_path / "p.png", "Hello world")
    r = mineru("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", (r.stdout, r.stderr)
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert recs["blank.png#0"]["status"] == "ok" and recs["blank.png#0"]["blocks"] == []
    assert recs["p.png#0"]["status"] == "ok" and "Hello" in recs["p.png#0"]["markdown"]


def test_quiet_prints_each_failure_and_the_count_but_no_warning(tmp_path):
    """--quiet is documented as printing nothing but failures: it printed only their count. Each
    failed page's id and message come first now, as the full summary lists them; a warning (here
    the repair of a torn journal line) stays out."""
    (tmp_path / "bad.png").write_bytes(b"")
    (tmp_path / "worse.pdf").write_bytes(b"%PDF-1.4\n garbage\n")
    text_page(tmp_path / "p.png", "Hello world")
    (tmp_path / "o.jsonl").write_bytes(b'{"schema_version":1,"id":"p')  # torn by a kill: cut off with a warning
    r = mineru("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    failed = [f"failed {pid}: {recs[pid]['error']['message']}" for pid in ("bad.png#0", "worse.pdf#0")]
    assert r.returncode == 1 and r.stdout == "", r.stdout
    assert r.stderr.splitlines() == [*failed, "2 of 3 pages failed; see o.jsonl"], r.stderr
    loud = mineru("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert loud.returncode == 1 and all(line in loud.stderr.splitlines() for line in failed), loud.stderr


def events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_resume_skips_done_pages_and_reprocesses_changes(tmp_path, record_validator):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(3):
        text_page(d / f"p{i}.png", f"Page number {i}")
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]
    first = mineru(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = by_id(read_journal(tmp_path / "o.jsonl", record_validator))

    again = mineru(*args, cwd=tmp_path)
    pages = [e for e in events(again.stderr) if e["event"] == "page"]
    assert [e["resumed"] for e in pages] == [True, True, True]
    assert by_id(read_journal(tmp_path / "o.jsonl")) == before  # untouched, not rewritten

    text_page(d / "p1.png", "Page number 1 changed")  # changed content
    third = mineru(*args, cwd=tmp_path)
    redone = [e["id"] for e in events(third.stderr) if e["event"] == "page" and not e["resumed"]]
    assert redone == ["p1.png#0"]
    recs = by_id(read_journal(tmp_path / "o.jsonl", record_validator))
    assert "changed" in recs["p1.png#0"]["markdown"] and len(recs) == 3

    forced = mineru(*args, "--force", cwd=tmp_path)
    assert all(not e["resumed"] for e in events(forced.stderr) if e["event"] == "page")
    assert len(read_journal(tmp_path / "o.jsonl")) == 3

    other_opts = mineru(*args, "--lang", "ch", cwd=tmp_path)  # options change the fingerprint
    assert all(not e["resumed"] for e in events(other_opts.stderr) if e["event"] == "page")


def mixed_tree(d: Path) -> Path:
    """A folder of each kind of file the loader knows: a PDF, a PNG, a two-frame GIF and a
    two-page TIFF (each small, with text the OCR engine reads)."""
    d.mkdir()
    write_pdf(d / "a.pdf", lambda c: prose(c, ["Quarterly report"], x=20, top=50), pagesize=(300, 100))
    text_page(d / "b.png", "Page of an image")
    frames = [Image.new("RGB", (320, 120), "white") for _ in range(2)]
    for i, f in enumerate(frames):
        ImageDraw.Draw(f).text((10, 40), f"Frame {i + 1}", fill="black", font=ImageFont.load_default(size=32))
    frames[0].save(d / "c.gif", save_all=True, append_images=frames[1:])
    frames[0].save(d / "d.tif", save_all=True, append_images=frames[1:])
    return d


def parsed(r: subprocess.CompletedProcess) -> list[str]:
    """The ids of the pages a --log-json run parsed (not resumed)."""
    assert r.returncode == 0, r.stderr
    return sorted(e["id"] for e in events(r.stderr) if e["event"] == "page" and not e["resumed"])


def test_a_load_option_parses_again_only_the_files_it_applies_to(tmp_path, record_validator):
    """--dpi and --text-layer make a PDF's pages: every page of every file was parsed again when
    one of them changed (the fingerprint hashed them all for every file). --gif-frames makes no
    page, it chooses a GIF's: only the frames it adds are parsed."""
    mixed_tree(tmp_path / "in")
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json", "--format", "markdown"]
    assert parsed(mineru(*args, cwd=tmp_path)) == ["a.pdf#0", "b.png#0", "c.gif#0", "d.tif#0", "d.tif#1"]
    first = by_id(read_journal(tmp_path / "o.jsonl", record_validator))
    (md := next((tmp_path / "mineru_output").rglob("b.md"))).unlink()

    assert parsed(mineru(*args, "--dpi", "150", cwd=tmp_path)) == ["a.pdf#0"]
    assert "Page of an image" in md.read_text()  # the resumed PNG's record makes its document
    assert parsed(mineru(*args, "--dpi", "150", "--text-layer", "off", cwd=tmp_path)) == ["a.pdf#0"]
    more = ["--dpi", "150", "--text-layer", "off", "--gif-frames", "all"]
    assert parsed(mineru(*args, *more, cwd=tmp_path)) == ["c.gif#1"]
    assert parsed(mineru(*args, cwd=tmp_path)) == ["a.pdf#0"]  # the defaults again

    last = by_id(read_journal(tmp_path / "o.jsonl", record_validator))
    assert {pid: r["fingerprint"] for pid, r in last.items() if pid != "c.gif#1"} == {
        pid: r["fingerprint"] for pid, r in first.items()
    }
    assert last["c.gif#0"]["page_count"] == 1 and last["c.gif#1"]["page_count"] == 2
    assert last["b.png#0"] == first["b.png#0"] and last["d.tif#1"] == first["d.tif#1"]  # never parsed again


def test_gif_frames_parses_only_the_frames_it_adds_and_counts_them_right(tmp_path, record_validator):
    """--gif-frames all after first parsed the GIF's first frame again though its pixels, and
    so its answer, are the same under either (the option was in its fingerprint), and first
    after all parsed it a third time. Now only the frames it adds are parsed; the first frame's
    record resumes with the page count of the run (2, then 1 again), and the Markdown is made of
    the frames the GIF has in that run."""
    d = tmp_path / "in"
    d.mkdir()
    frames = [Image.new("RGB", (320, 120), "white") for _ in range(2)]
    for i, f in enumerate(frames):
        ImageDraw.Draw(f).text((10, 40), f"Frame {i + 1}", fill="black", font=ImageFont.load_default(size=32))
    frames[0].save(d / "c.gif", save_all=True, append_images=frames[1:])
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json", "--format", "markdown"]

    def counts() -> dict[str, int]:
        return {pid: r["page_count"] for pid, r in by_id(read_journal(tmp_path / "o.jsonl", record_validator)).items()}

    assert parsed(mineru(*args, cwd=tmp_path)) == ["c.gif#0"]
    first = by_id(read_journal(tmp_path / "o.jsonl"))["c.gif#0"]
    md = next((tmp_path / "mineru_output").rglob("c.md"))
    assert "Frame 1" in md.read_text() and "Frame 2" not in md.read_text()
    assert parsed(mineru(*args, "--gif-frames", "all", cwd=tmp_path)) == ["c.gif#1"]
    assert counts() == {"c.gif#0": 2, "c.gif#1": 2}
    assert "Frame 1" in md.read_text() and "Frame 2" in md.read_text()
    again = mineru(*args, cwd=tmp_path)
    assert parsed(again) == [] and "warning" not in again.stderr, again.stderr
    assert counts() == {"c.gif#0": 1, "c.gif#1": 2}  # frame 2's record is kept, as before, for `all`
    assert "Frame 1" in md.read_text() and "Frame 2" not in md.read_text()
    last = by_id(read_journal(tmp_path / "o.jsonl"))["c.gif#0"]
    assert {**last, "page_count": 2} == {**first, "page_count": 2}  # the same result, never parsed again
    assert parsed(mineru(*args, "--gif-frames", "all", cwd=tmp_path)) == []


def test_an_image_page_is_a_cache_hit_whatever_the_pdf_options(tmp_path):
    """An image's page parsed again (a new journal) with another --dpi or --text-layer was a
    cache miss though its pixels and its answer are the same."""
    mixed_tree(tmp_path / "in")
    args = ["parse", "in", "--engine", "ocr"]
    assert mineru(*args, "--out", "one.jsonl", cwd=tmp_path).returncode == 0
    again = mineru(*args, "--out", "two.jsonl", "--dpi", "150", "--text-layer", "off", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    cache = {r["id"]: r["cache"]["status"] for r in read_journal(tmp_path / "two.jsonl")}
    assert cache == {"a.pdf#0": "miss", "b.png#0": "hit", "c.gif#0": "hit", "d.tif#0": "hit", "d.tif#1": "hit"}
    gif = mineru(*args, "--out", "three.jsonl", "--gif-frames", "all", cwd=tmp_path)
    assert gif.returncode == 0, gif.stderr
    cache = {r["id"]: r["cache"]["status"] for r in read_journal(tmp_path / "three.jsonl")}
    assert cache == {
        "a.pdf#0": "hit",
        "b.png#0": "hit",
        "c.gif#0": "hit",  # the same pixels under either --gif-frames
        "c.gif#1": "hit",  # the same pixels as d.tif#1 (mixed_tree), parsed by the first run
        "d.tif#0": "hit",
        "d.tif#1": "hit",
    }


def test_root_keeps_ids_and_resume_when_a_glob_matches_more_folders(tmp_path, record_validator):
    # cron runs `mineru parse dump/* ...`: the inputs' common folder moves from dump/2024 to
    # dump when dump/2025 appears, and with it every id; --root pins the ids
    (tmp_path / "dump" / "2024").mkdir(parents=True)
    text_page(tmp_path / "dump" / "2024" / "a.png", "January report")
    args = ["--root", "dump", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]
    first = mineru("parse", "dump/2024", *args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert list(by_id(read_journal(tmp_path / "o.jsonl", record_validator))) == ["2024/a.png#0"]

    (tmp_path / "dump" / "2025").mkdir()
    text_page(tmp_path / "dump" / "2025" / "c.png", "March report")
    second = mineru("parse", "dump/2024", "dump/2025", *args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    pages = {e["id"]: e["resumed"] for e in events(second.stderr) if e["event"] == "page"}
    assert pages == {"2024/a.png#0": True, "2025/c.png#0": False}
    assert list(by_id(read_journal(tmp_path / "o.jsonl", record_validator))) == ["2024/a.png#0", "2025/c.png#0"]

    outside = mineru("parse", "dump/2024", "dump/2025", "--root", "dump/2024", "--out", "x.jsonl", cwd=tmp_path)
    assert outside.returncode == 2 and "dump/2025 is not inside dump/2024" in outside.stderr
    assert not (tmp_path / "x.jsonl").exists()
    missing = mineru("parse", "dump", "--root", "nowhere", "--out", "x.jsonl", cwd=tmp_path)
    assert missing.returncode == 2 and "--root: not a folder: nowhere" in missing.stderr


def test_a_run_whose_input_root_moved_warns_and_names_the_root_to_give(tmp_path, record_validator):
    """`mineru parse dump/* ...` without --root: when dump/2025 appears, the arguments' common folder
    moves from dump/2024 to dump and every page id with it, so every page was parsed again and
    recorded twice, in silence (`mineru merge` warns of journals that differ so). The run says so,
    with an id before and now, the two roots and the --root to give; a run that only resumes,
    or one with that --root, says nothing."""
    (tmp_path / "dump" / "2024").mkdir(parents=True)
    text_page(tmp_path / "dump" / "2024" / "a.png", "January report")
    args = ["--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]

    def warnings(r: subprocess.CompletedProcess) -> list[str]:
        assert r.returncode == 0, r.stderr
        return [e["message"] for e in events(r.stderr) if e["event"] == "warning"]

    assert warnings(mineru("parse", "dump/2024", *args, cwd=tmp_path)) == []
    (tmp_path / "dump" / "2025").mkdir()
    text_page(tmp_path / "dump" / "2025" / "c.png", "March report")
    (told,) = warnings(mineru("parse", "dump/2024", "dump/2025", *args, cwd=tmp_path))
    assert told.startswith(
        "1 page(s) parsed again: o.jsonl holds them under other ids (e.g. a.png#0, now 2024/a.png#0)"
    )
    assert "moved from dump/2024 to dump" in told and "same --root dump to keep the ids steady" in told, told
    assert sorted(by_id(read_journal(tmp_path / "o.jsonl", record_validator))) == [
        "2024/a.png#0",
        "2025/c.png#0",
        "a.png#0",
    ]
    assert warnings(mineru("parse", "dump/2024", "dump/2025", *args, cwd=tmp_path)) == []  # resumed: nothing new
    (told,) = warnings(mineru("parse", "dump/2025", *args, cwd=tmp_path))  # narrower again: c.png#0
    assert "(e.g. 2025/c.png#0, now c.png#0)" in told and "moved from dump to dump/2025" in told, told
    assert "same --root dump to keep" in told, told
    assert warnings(mineru("parse", "dump/2025", "--root", "dump", *args, cwd=tmp_path)) == []


def test_a_new_copy_of_a_file_at_a_longer_path_is_no_moved_root(tmp_path):
    """A copy of dump/2024/a.png added at dump/x/2024/a.png (a path ending with the old one's)
    is parsed beside it; the run said the input root had moved from dump/x to dump, though
    dump/2024/a.png is still there and still resumed. Nor is the copy told of the other way
    round (a copy at the shorter path, beside the longer one)."""
    (tmp_path / "dump" / "2024").mkdir(parents=True)
    text_page(tmp_path / "dump" / "2024" / "a.png", "January report")
    args = ["--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]

    def warnings(r: subprocess.CompletedProcess) -> list[str]:
        assert r.returncode == 0, r.stderr
        return [e["message"] for e in events(r.stderr) if e["event"] == "warning"]

    assert warnings(mineru("parse", "dump", *args, cwd=tmp_path)) == []
    (tmp_path / "dump" / "x" / "2024").mkdir(parents=True)
    shutil.copy(tmp_path / "dump" / "2024" / "a.png", tmp_path / "dump" / "x" / "2024" / "a.png")
    assert warnings(mineru("parse", "dump", *args, cwd=tmp_path)) == []
    (tmp_path / "other" / "deep").mkdir(parents=True)  # the copy at the shorter path
    text_page(tmp_path / "other" / "deep" / "b.png", "February report")
    args = ["--out", "p.jsonl", *args[2:]]
    assert warnings(mineru("parse", "other", *args, cwd=tmp_path)) == []
    shutil.copy(tmp_path / "other" / "deep" / "b.png", tmp_path / "other" / "b.png")
    assert warnings(mineru("parse", "other", *args, cwd=tmp_path)) == []
    assert sorted(by_id(read_journal(tmp_path / "p.jsonl"))) == ["b.png#0", "deep/b.png#0"]


def test_failed_pages_are_retried_only_when_asked(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    text_page(tmp_path / "good.png", "Fine page")
    args = ["parse", "bad.png", "good.png", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]
    assert mineru(*args, cwd=tmp_path).returncode == 1
    second = mineru(*args, cwd=tmp_path)
    assert second.returncode == 1  # the failure still stands
    assert all(e["resumed"] for e in events(second.stderr) if e["event"] == "page")
    text_page(tmp_path / "bad.png", "Repaired page")  # the user fixes the file
    fixed = mineru(*args, cwd=tmp_path)
    assert fixed.returncode == 0
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert recs["bad.png#0"]["status"] == "ok" and len(recs) == 2
    # --retry-failed redoes a failed page whose file did not change.
    (tmp_path / "bad2.png").write_bytes(b"")
    args2 = ["parse", "bad2.png", "--out", "o2.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]
    mineru(*args2, cwd=tmp_path)
    retried = mineru(*args2, "--retry-failed", cwd=tmp_path)
    assert [e["resumed"] for e in events(retried.stderr) if e["event"] == "page"] == [False]
    assert len(read_journal(tmp_path / "o2.jsonl")) == 1


def test_sigkill_mid_run_then_resume_does_every_page_once(tmp_path, record_validator):
    d = tmp_path / "in"
    d.mkdir()
    n = 16
    for i in range(n):
        text_page(d / f"p{i:02d}.png", f"Line of text {i}", size=(900, 600))
    out = tmp_path / "o.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "mineru_cli",
        "parse",
        "in",
        "--out",
        str(out),
        "--no-cache",
        "--engine",
        "ocr",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = {r["id"]: r for r in read_journal(out)}
    assert 3 <= len(done_before) < n, "the kill should land mid-run"

    r = mineru("parse", "in", "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pages = [e for e in events(r.stderr) if e["event"] == "page"]
    assert {e["id"] for e in pages if e["resumed"]} == set(done_before)  # not redone
    recs = read_journal(out, record_validator)
    assert sorted(x["id"] for x in recs) == sorted(f"p{i:02d}.png#0" for i in range(n))
    for rec in recs:  # earlier records kept as written
        if rec["id"] in done_before:
            assert rec == done_before[rec["id"]]


def test_a_file_name_that_is_not_utf8_gets_a_record_and_resumes(tmp_path, record_validator):
    d = tmp_path / "in"
    d.mkdir()
    text_page(d / "a.png", "First page")
    bad = os.fsdecode(b"b_\xff.png")  # as os.listdir gives it: a lone surrogate
    text_page(d / bad, "Second page")
    text_page(d / "c.png", "Third page")
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--log-json"]
    first = mineru(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (tmp_path / "o.jsonl").read_bytes().decode("utf-8")  # the journal stays valid UTF-8
    recs = by_id(read_journal(tmp_path / "o.jsonl", record_validator))
    assert list(recs) == ["a.png#0", bad + "#0", "c.png#0"]
    assert recs[bad + "#0"]["status"] == "ok" and "Second" in recs[bad + "#0"]["markdown"]
    again = mineru(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert [e["resumed"] for e in events(again.stderr) if e["event"] == "page"] == [True, True, True]


def test_an_out_file_that_is_not_a_journal_is_refused_untouched(tmp_path):
    text_page(tmp_path / "p.png", "Hello world")
    pdf = tmp_path / "keep.pdf"
    Image.new("RGB", (200, 100), "white").save(pdf)
    before = pdf.read_bytes()
    r = mineru("parse", "p.png", "--out", "keep.pdf", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 2 and "not a mineru journal" in r.stderr and "Traceback" not in r.stderr
    assert pdf.read_bytes() == before


def test_bad_out_locations_are_setup_errors(tmp_path):
    text_page(tmp_path / "p.png", "Hello world")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "out[bold]").mkdir()  # brackets: printed as they are, not as markup
    (tmp_path / "r1.jsonl").write_text("")
    for out, message in [
        ("outdir", "is a folder"),
        ("out[bold]", "out[bold] is a folder"),
        ("r1.jsonl/x.jsonl", "existing file"),
    ]:
        r = mineru("parse", "p.png", "--out", out, "--no-cache", "--engine", "ocr", cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "r1.jsonl").read_text() == "" and not any((tmp_path / "outdir").iterdir())


def test_an_out_in_folders_that_do_not_exist_makes_them(tmp_path):
    """--out in folders not made yet makes them, as docs/usage.md says (an empty file: a page that
    fails at once, so no engine starts)."""
    (tmp_path / "empty.png").write_bytes(b"")
    r = mineru("parse", "empty.png", "--out", "new/deeper/r.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # the page failed: the file is empty
    records = read_journal(tmp_path / "new" / "deeper" / "r.jsonl")
    assert [(rec["id"], rec["status"]) for rec in records] == [("empty.png#0", "failed")]


def test_an_out_symlink_writes_through_and_stays_a_link(tmp_path):
    text_page(tmp_path / "p.png", "Hello world")
    (tmp_path / "link.jsonl").symlink_to("real.jsonl")
    r = mineru("parse", "p.png", "--out", "link.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "link.jsonl").is_symlink()  # compaction kept the link
    assert [x["id"] for x in read_journal(tmp_path / "real.jsonl")] == ["p.png#0"]
    assert not (tmp_path / ".link.jsonl.lock").exists()  # the lock is the target's
    again = mineru("parse", "p.png", "--out", "real.jsonl", "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path)
    assert [e["resumed"] for e in events(again.stderr) if e["event"] == "page"] == [True]


@pytest.mark.parametrize("name", ["doc.pdf", "doc.png"])
def test_pages_of_a_pdf_that_shrank_are_dropped(tmp_path, name):
    """Also when its name lies (a PDF named .png): the page count is the file's own by content;
    by extension the stale pages of a PDF named .png stayed for ever."""

    def pdf(n):
        pages = [Image.new("RGB", (400, 150), "white") for _ in range(n)]
        for i, page in enumerate(pages):
            ImageDraw.Draw(page).text((10, 50), f"Page {i + 1}", fill="black", font=ImageFont.load_default(size=32))
        pages[0].save(tmp_path / name, format="PDF", save_all=True, append_images=pages[1:])

    text_page(tmp_path / "other.png", "Another input")
    mineru("parse", "other.png", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    args = ["parse", name, "--out", "o.jsonl", "--no-cache", "--engine", "ocr"]
    pdf(3)
    assert mineru(*args, cwd=tmp_path).returncode == 0
    assert sorted(by_id(read_journal(tmp_path / "o.jsonl"))) == [f"{name}#0", f"{name}#1", f"{name}#2", "other.png#0"]
    pdf(1)
    assert mineru(*args, cwd=tmp_path).returncode == 0
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert sorted(recs) == [f"{name}#0", "other.png#0"]  # other inputs are kept
    assert recs[f"{name}#0"]["page_count"] == 1


def test_a_journal_named_like_a_document_in_the_input_folder_is_not_an_input(tmp_path):
    """`--out docs/out.pdf` inside the folder being parsed: the journal was planned as an input
    (a failed record for it, exit 1). A `.jsonl` was left out only for its extension; the
    journal's own file is left out by what it is, under any name (here a link too)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    text_page(docs / "a.png", "A page beside its journal")
    (docs / "link.png").symlink_to("out.pdf")
    args = ["parse", "docs", "--out", "docs/out.pdf", "--no-cache", "--engine", "ocr"]
    for _ in range(2):  # the second run: the journal exists before the walk
        r = mineru(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert [x["id"] for x in read_journal(docs / "out.pdf")] == ["a.png#0"]


def test_names_with_brackets_are_printed_as_they_are(tmp_path):
    """Rich reads [brackets] as markup: a failure's file name must be printed literally."""
    (tmp_path / "bad[red].png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    r = mineru("parse", "bad[red].png", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 1
    assert "bad[red].png#0" in r.stderr, r.stderr


def test_a_page_that_failed_while_its_file_changed_is_tried_again(tmp_path):
    """A failure recorded after the file changed under the run (here: rewritten while its page
    hung) carries no content hash, so the next run parses the page instead of resuming the
    failure; a failure on an unchanged file is resumed as before."""
    text_page(tmp_path / "a.png", "Alpha page")
    text_page(tmp_path / "b.png", "Bravo page")
    text_page(tmp_path / "c.png", "Charlie page")
    args = [
        "parse",
        ".",
        "--out",
        "o.jsonl",
        "--no-cache",
        "--engine",
        "ocr",
        "--cpus",
        "1",
        "--page-timeout",
        "6",
        "--log-json",
    ]
    env = {
        **os.environ,
        "MINERU_CACHE_DIR": str(tmp_path / ".cache-test"),
        "MINERU_TEST_FAULTS": "hang=b.png*;raise=c.png*",
    }
    run = subprocess.Popen(
        [sys.executable, "-m", "mineru_cli", *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    for line in run.stderr:  # planning is over once the first page is reported
        if line.startswith("{") and json.loads(line)["event"] == "page":
            break
    os.utime(tmp_path / "b.png", ns=(time.time_ns(), time.time_ns() + 10**9))  # the file changes
    run.stderr.read()
    assert run.wait(timeout=120) == 1
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert recs["b.png#0"]["status"] == "timeout" and recs["b.png#0"]["source_sha256"] is None
    assert recs["c.png#0"]["status"] == "failed" and recs["c.png#0"]["source_sha256"] is not None
    assert recs["a.png#0"]["source_sha256"] is not None
    again = mineru(*args, cwd=tmp_path)
    assert again.returncode == 1  # c's failure, on an unchanged file, is kept
    assert {e["id"]: e["resumed"] for e in events(again.stderr) if e["event"] == "page"} == {
        "a.png#0": True,
        "b.png#0": False,
        "c.png#0": True,
    }


def test_pages_past_the_end_are_dropped_by_content_never_for_a_gif(tmp_path):
    """A GIF's frame count follows --gif-frames: its frames' records are never dropped. What a
    file is comes from its content, not its name (a PDF named .png, a TIFF named .dat)."""
    from mineru_cli.config import LoadOptions
    from mineru_cli.inputs import SourceFile
    from mineru_cli.planner import plan_file
    from mineru_cli.runner import _vanished_pages

    frames = [Image.new("RGB", (40, 30), c) for c in ("red", "green")]
    frames[0].save(tmp_path / "doc.pdf", format="PDF")
    frames[0].save(tmp_path / "lying.png", format="PDF")
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    frames[0].save(tmp_path / "scan.TIF", save_all=True, append_images=frames[1:])
    frames[0].save(tmp_path / "scan.dat", format="TIFF", save_all=True, append_images=frames[1:])
    plan = [
        plan_file(SourceFile(tmp_path / rel, rel, kind), None, LoadOptions())
        for rel, kind in [
            ("doc.pdf", "pdf"),
            ("lying.png", "image"),
            ("anim.gif", "image"),
            ("scan.TIF", "image"),
            ("scan.dat", "image"),
        ]
    ]
    assert [p.page_count for p in plan] == [1, 1, 1, 2, 2] and all(p.error is None for p in plan)
    old = ["doc.pdf#0", "doc.pdf#1", "lying.png#2", "anim.gif#0", "anim.gif#2", "other.pdf#3", "scan.TIF#2"]
    index = dict.fromkeys([*old, "scan.dat#1", "scan.dat#2"])
    assert _vanished_pages(index, plan) == ["doc.pdf#1", "lying.png#2", "scan.TIF#2", "scan.dat#2"]


def _pdf(path: Path, texts: list[str]) -> None:
    pages = [Image.new("RGB", (500, 160), "white") for _ in texts]
    for page, text in zip(pages, texts):
        ImageDraw.Draw(page).text((20, 50), text, fill="black", font=ImageFont.load_default(size=36))
    pages[0].save(path, save_all=True, append_images=pages[1:])


def test_per_document_output_is_never_an_input_and_keeps_every_page(tmp_path):
    """The default --out-dir sits inside the folder being parsed: its crops (images) must not be
    parsed by the next run. A later run with --pages rewrites the document from all its pages."""
    _pdf(tmp_path / "doc.pdf", ["Alpha one", "Bravo two", "Charlie three"])
    args = ["parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "-f", "content-list"]
    assert mineru(*args, cwd=tmp_path).returncode == 0
    assert (tmp_path / "mineru_output").is_dir()
    assert mineru(*args, cwd=tmp_path).returncode == 0
    assert sorted(by_id(read_journal(tmp_path / "o.jsonl"))) == ["doc.pdf#0", "doc.pdf#1", "doc.pdf#2"]
    r = mineru(*args, "--pages", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    md = next((tmp_path / "mineru_output").rglob("doc.md")).read_text()
    assert "Alpha" in md and "Bravo" in md and "Charlie" in md
    items = json.loads(next((tmp_path / "mineru_output").rglob("doc_content_list.json")).read_text())
    assert {i["page_idx"] for i in items} == {0, 1, 2}
    r = mineru(*args, "--pages", "7", cwd=tmp_path)
    assert r.returncode == 0 and "--pages selects no page of 1 file(s), e.g. doc.pdf" in r.stderr
    # the file changes: pages parsed from its old content are not mixed into the new document
    _pdf(tmp_path / "doc.pdf", ["Delta one", "Echo two", "Foxtrot three"])
    assert mineru(*args, "--pages", "2", cwd=tmp_path).returncode == 0
    md = next((tmp_path / "mineru_output").rglob("doc.md")).read_text()
    assert "Echo" in md and "Alpha" not in md and "Charlie" not in md


def test_a_file_pages_selects_nothing_of_is_no_page_of_the_summary(tmp_path):
    """A file --pages selects no page of gets no record, but the summary and the `planned` event
    counted one page for it: `pages 2`, with 0 ok, failed, skipped or resumed, and the progress
    bar's total one too many."""
    from helpers import EXAMPLES

    for name in ("report.pdf", "prose.png"):  # two pages, and an image's one page
        shutil.copy(EXAMPLES / name, tmp_path / name)
    for pages, ok in (("5", 0), ("2", 1)):  # nothing of either; report.pdf's second page alone
        r = mineru(
            "parse",
            ".",
            "--pages",
            pages,
            "--out",
            f"o{pages}.jsonl",
            "--no-cache",
            "--engine",
            "ocr",
            "--log-json",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        got = {e["event"]: e for e in events(r.stderr)}
        assert got["planned"]["pages"] == got["summary"]["pages"] == got["summary"]["ok"] == ok, r.stderr
        assert len(read_journal(tmp_path / f"o{pages}.jsonl")) == ok


def test_a_rerun_rewrites_only_the_documents_whose_files_are_not_those_of_their_records(tmp_path):
    """A re-run with nothing new wrote every document's files again, rendering each page anew
    for its crops and layout page (0.1-0.2 s a page: hours a run for a cron job over a large
    dump). Now a document's files are written again only when its records changed, the formats
    or --dpi changed, or one of its files is gone."""
    import shutil

    from helpers import EXAMPLES

    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("table.png", "report.pdf"):
        shutil.copy(EXAMPLES / name, docs / name)
    text_page(docs / "note.png", "Alpha one")
    args = ["parse", "docs", "--out", "o.jsonl", "--engine", "ocr", "-f", "content-list", "-f", "layout"]
    args += ["--out-dir", "out"]
    out = tmp_path / "out"

    def files() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}

    assert mineru(*args, cwd=tmp_path).returncode == 0
    first = files()
    crops = [name for name in first if name.startswith("table_png/images/")]
    assert crops and "report_pdf/report_layout.pdf" in first
    r = mineru(*args, cwd=tmp_path)
    assert r.returncode == 0 and "wrote 0 file(s)" in r.stderr, r.stderr
    assert files() == first  # nothing written again
    text_page(docs / "note.png", "Bravo two")  # one document changes
    (out / crops[0]).unlink()  # and one loses a crop
    r = mineru(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    third = files()
    rewritten = {name for name in first if third.get(name) != first[name]}
    assert {n.split("/")[0] for n in rewritten} == {"note_png", "table_png"}, rewritten
    assert crops[0] in third and "Bravo" in (out / "note_png" / "note.md").read_text()
    r = mineru(*args[:-4], "-f", "content-list", "--out-dir", "out", cwd=tmp_path)  # another set of formats
    assert r.returncode == 0, r.stderr
    assert (out / "report_pdf" / "report_content_list.json").stat().st_mtime_ns != third[
        "report_pdf/report_content_list.json"
    ][1]


def test_an_out_dir_is_judged_by_writing_in_it(tmp_path):
    """--out-dir was judged writable by os.access, which answers for the real user id without
    capabilities: a service user given CAP_DAC_OVERRIDE was refused a folder it may write in
    ("the folder cannot be written", exit 2). A file is made there to find out: that user's run
    writes its markdown; a read-only folder is refused before parsing."""
    from fshelpers import read_only, with_capability

    text_page(tmp_path / "p.png", "Alpha")
    (tmp_path / "out").mkdir()
    args = ["parse", "p.png", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "-f", "markdown", "--out-dir", "out"]
    with read_only(tmp_path / "out"):
        r = mineru(*args, cwd=tmp_path)
    assert r.returncode == 2 and "--out-dir out: the folder cannot be written" in r.stderr, r.stderr
    assert not (tmp_path / "o.jsonl").exists()
    prefix = with_capability("dac_override")
    # a folder on a path every user may search (tmp_path's is its owner's alone), the page readable by all
    shared = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        shared.chmod(0o755)
        shutil.copy(tmp_path / "p.png", shared / "p.png")
        (shared / "out").mkdir()  # this process's: not the other user's to write in but for its capability
        env = {**os.environ, "HOME": str(shared), "MINERU_CACHE_DIR": str(shared / "cache")}
        r = subprocess.run(
            [*prefix, sys.executable, "-m", "mineru_cli", *args], cwd=shared, env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        assert list((shared / "out").rglob("*.md")), r.stderr
    finally:
        shutil.rmtree(shared)


def test_an_out_dir_that_is_a_file_is_refused_before_parsing(tmp_path):
    text_page(tmp_path / "p.png", "Alpha")
    (tmp_path / "afile").write_text("mine")
    r = mineru(
        "parse",
        "p.png",
        "--out",
        "o.jsonl",
        "--no-cache",
        "--engine",
        "ocr",
        "-f",
        "markdown",
        "--out-dir",
        "afile",
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "--out-dir afile is a file, not a folder" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o.jsonl").exists()
    assert (tmp_path / "afile").read_text() == "mine"


def test_every_parse_option_default_is_the_run_configuration_default():
    """`mineru parse`'s defaults and RunConfig's (what the Python API builds) are one set: an
    option whose default differs would run a CLI batch differently from the same batch
    started from Python (--max-worker-rss was once 3GB in one and 3 GiB in the other)."""
    import dataclasses

    import typer

    from mineru_cli.cli import app
    from mineru_cli.config import LoadOptions, RunConfig

    command = next(c for c in typer.main.get_command(app).commands.values() if c.name == "parse")
    cli = {p.name: p.default for p in command.params}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    built = RunConfig(inputs=("x",), **{k: v for k, v in cli.items() if k in fields})
    default = RunConfig(inputs=("x",))
    for f in dataclasses.fields(RunConfig):
        if f.name in cli:
            assert getattr(built, f.name) == getattr(default, f.name), (f.name, cli[f.name])
    compared = set(cli) & fields
    assert {
        "page_timeout",
        "max_worker_rss",
        "batch_wait_ms",
        "crop_batch",
        "cache_ttl",
        "engine",
        "mode",
        "runtime",
        "out_dir",
        "page_batch",
        "workers",
        "cpus",
        "cache_near",
        "formats",
    } <= compared, compared
    assert cli["no_cache"] is (not default.cache)
    assert (cli["dpi"], cli["gif_frames"]) == (LoadOptions().dpi, LoadOptions().gif_frames)


def test_parse_help_lists_the_choices_of_every_enumerated_option():
    from mineru_cli.config import CacheNear, EngineChoice, GifFrames, Mode, OutputFormat, Runtime

    r = mineru("parse", "--help", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    for kind in (EngineChoice, Mode, Runtime, CacheNear, GifFrames, OutputFormat):
        assert "|".join(kind.values()) in r.stdout.replace(" ", ""), (kind.__name__, r.stdout)
    assert "2509|pro" in r.stdout  # --model-profile's choices, refused otherwise


def _help(*command: str) -> str:
    """A command's rendered --help, its table's borders and line breaks taken out (a 400-column
    terminal keeps each option's help on few lines)."""
    r = mineru(*command, "--help", env={"COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    text = " ".join(line.strip(" │╭╮╰╯─") for line in r.stdout.splitlines())
    return " ".join(text.split())


def test_help_says_what_the_code_does():
    """Rich read `[ray]` and `[client]` as markup and dropped them; --lang claimed to pick the OCR
    models; --model's search order left places out; doctor and models verify promised exit codes
    the code does not give."""
    parse = _help("parse")
    assert "pip install 'mineru-cli[ray]'" in parse and "ray://HOST:PORT with ray[client]" in parse
    assert "picks the OCR models" not in parse and "both read with the same OCR models" in parse
    order = (
        "the first found of $MINERU_MODEL_PATH, models/MinerU2.5-2509-1.2B, then models/MinerU2.5-Pro-2605-1.2B, "
        "~/mineru.json's (or $MINERU_TOOLS_CONFIG_JSON's) models-dir, then the Hugging Face cache, then the "
        "ModelScope cache"
    )
    assert order in parse and order in _help("export")
    export = _help("export")  # --int4 keeps the vision encoder INT8, as docs/export.md says
    assert "INT4 decoder weights (MatMulNBits, blocks of 32); the vision encoder INT8" in export
    assert "--model-profile 2509|pro" in export and "--model-profile 2509|pro" in parse
    doctor = _help("doctor")
    assert "when `mineru parse` can run" not in doctor and "run degraded, with a warning" in doctor
    assert "2 when PATH is no folder" in _help("models", "verify")
    assert "none is found, 2 when --model is no folder" in _help("models")


def test_help_lists_the_exit_codes_of_usage_md():
    """A cron user reads the exit codes in `mineru --help`; the main help showed none (the callback's
    docstring that listed them is not shown where the app has a help text). The help and docs/usage.md's
    table say the same."""
    from mineru_cli.core.errors import EXIT_CODES

    usage = (Path(__file__).parents[1] / "docs" / "usage.md").read_text()
    main = _help()
    for code, meaning in EXIT_CODES:
        assert f"{code}: {meaning}" in main, (code, main)
        assert f"\n| {code} | {meaning}" in usage, code


def test_help_of_the_commands_the_main_help_names_says_their_exit_codes():
    """The main help sends a reader to these commands' --help for their exit codes; review and
    merge said none (both exit 2 on a missing journal and 3 on a failed write)."""
    named = re.search(r"Exit codes of mineru parse \(([^)]*) say theirs", _help())
    assert named, _help()
    commands = re.split(r",\s*|\s+and\s+", named.group(1))
    assert {"merge", "review"} <= set(commands), commands
    for command in commands:
        assert re.search(r"\bExit [0-9]", _help(command)), command


def test_help_paragraphs_follow_the_terminal_width():
    """Docstrings' line breaks stayed in the rendered help, so a paragraph broke mid-sentence at
    any width, and a command list showed a whole paragraph, broken the same way."""
    parse = mineru("parse", "--help", env={"COLUMNS": "200"}).stdout
    assert any("a page that hangs or crashes its worker costs only that page" in line for line in parse.splitlines())
    main = mineru("--help", env={"COLUMNS": "200"}).stdout
    merge = "Join journals into OUT with one record per page: where several hold a page, its ok record wins"
    assert any(merge in line for line in main.splitlines()), main
    assert "Exit 1 when a check failed" not in main  # doctor's line is its first sentence
    narrow = mineru("review", "--help", env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "(kind, stage, message)" in " ".join(narrow.split())


def test_a_damaged_tiff_says_what_is_wrong_with_the_file(tmp_path):
    """A scanned page's TIFF cut short in its image file directory (an interrupted copy) was "not an
    image or PDF (content not recognised)", one with a damaged directory "decoder error -2", and
    Pillow's "Corrupt EXIF data" warnings went to stderr under --quiet. The record says it is a TIFF
    cut short or damaged, where, and to get the file again, keeping Pillow's words."""
    good = (Path(__file__).parent / "data" / "scan_ragged2e_p1.tif").read_bytes()
    ifd = int.from_bytes(good[4:8], "little")
    d = tmp_path / "in"
    d.mkdir()
    (d / "cut.tif").write_bytes(good[: ifd + 20])
    entries = int.from_bytes(good[ifd : ifd + 2], "little")
    damaged = bytearray(good)
    damaged[ifd + 2 : ifd + 2 + 12 * entries] = b"\xab" * (12 * entries)
    (d / "damaged.tif").write_bytes(bytes(damaged))
    out = tmp_path / "r.jsonl"
    r = mineru("parse", str(d), "--out", str(out), "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    errors = {rec["id"]: rec["error"] for rec in read_journal(out)}
    cut = errors["cut.tif#0"]["message"]
    assert cut.startswith("a TIFF file cut short or damaged: its image file directory (each page's size"), cut
    assert f"at byte {ifd} says it holds {entries} entries" in cut and f"the file ends at byte {ifd + 20}" in cut
    assert "get the file again (Pillow: Corrupt EXIF data." in cut and "UnidentifiedImageError" in cut
    message = errors["damaged.tif#0"]["message"]
    assert message.startswith("a TIFF file whose image file directory") and "is damaged; get the file again" in message
    assert errors["damaged.tif#0"]["kind"] == "corrupt" and "UserWarning" not in r.stderr, r.stderr


def test_a_page_too_thin_to_read_fails_in_plain_words(tmp_path):
    """A 1900 x 4 px spacer image (a rule of a saved web page) fails: its record and the console
    said "RuntimeError: the text detector cannot read ...", a Python class name no other error
    message carries. The words are the reason alone."""
    d = tmp_path / "in"
    d.mkdir()
    Image.new("RGB", (1900, 4), "white").save(d / "spacer.png")
    out = tmp_path / "r.jsonl"
    r = mineru("parse", str(d), "--out", str(out), "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    (rec,) = read_journal(out)
    words = "the text detector cannot read a 1900x4 px page (the page is too elongated: "
    assert rec["error"]["kind"] == "engine_error" and rec["error"]["message"].startswith(words), rec["error"]
    assert f"spacer.png#0: {words}" in r.stdout + r.stderr and "Error" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_a_model_path_that_is_no_folder_is_said_so(tmp_path):
    """--model (or $MINERU_MODEL_PATH) mistyped was "not a MinerU2.5 model folder (missing: the folder
    itself)"; it says the path does not exist (or is a file) and to check it."""
    page = Path(__file__).parent / "data" / "dash_row_table_chromium.png"
    out = tmp_path / "r.jsonl"
    r = mineru("parse", str(page), "--out", str(out), "--model", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert r.returncode == 2 and f"--model {tmp_path / 'nowhere'} does not exist: check the path, or get it" in r.stderr
    env = {"MINERU_MODEL_PATH": str(page)}
    r = mineru("parse", str(page), "--out", str(out), cwd=tmp_path, env=env)
    assert r.returncode == 2 and f"MINERU_MODEL_PATH {page} is a file, not a folder: check the path" in r.stderr
    assert not out.exists()


def test_a_bad_pages_spec_names_the_bad_range_once(tmp_path):
    """--pages '3-1' was "bad page range '3-1' in '3-1'"; a range with a typo gave the forms but no
    example of the whole spec."""
    page = Path(__file__).parent / "data" / "dash_row_table_chromium.png"
    out = tmp_path / "r.jsonl"
    r = mineru("parse", str(page), "--out", str(out), "--pages", "3-1", cwd=tmp_path)
    assert r.returncode == 2 and "--pages '3-1': bad page range '3-1': pages start at 1" in r.stderr, r.stderr
    r = mineru("parse", str(page), "--out", str(out), "--pages", "1,x", cwd=tmp_path)
    expected = "--pages '1,x': bad page range 'x' in '1,x': expected N, N-M or N- joined by commas, e.g. 1-3,7,10-"
    assert r.returncode == 2 and expected in r.stderr, r.stderr
    assert not out.exists()


def test_a_file_that_fails_to_open_is_tried_again_once_it_changes(tmp_path):
    """A file read whole that fails to open for its content keeps its sha256 in its record: a
    later run tries it again once it changes (it resumed "file is empty" for a file that had become
    a damaged PDF: both records had no hash). The pages of its earlier, readable content leave the
    journal then: its one record is the failure (a 3-frame TIFF's pages 2 and 3 stayed as ok)."""
    frames = [Image.new("RGB", (120, 80), c) for c in ("white", "gray", "black")]
    frames[0].save(tmp_path / "scan.tif", save_all=True, append_images=frames[1:])
    (tmp_path / "e.pdf").write_bytes(b"")
    args = ("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--quiet")
    first = mineru(*args, cwd=tmp_path)
    assert first.returncode == 1
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert recs["e.pdf#0"]["error"]["kind"] == "empty" and recs["e.pdf#0"]["source_sha256"]
    assert [recs[f"scan.tif#{i}"]["status"] for i in range(3)] == ["ok"] * 3
    (tmp_path / "e.pdf").write_bytes(b"%PDF-1.4\n garbage\n")
    (tmp_path / "scan.tif").write_bytes(b"II*\x00" + b"\xff" * 40)  # a TIFF header, then no directory
    again = mineru(*args, cwd=tmp_path)
    assert again.returncode == 1
    recs = by_id(read_journal(tmp_path / "o.jsonl"))
    assert sorted(recs) == ["e.pdf#0", "scan.tif#0"]
    assert recs["e.pdf#0"]["error"]["kind"] == "corrupt" and recs["scan.tif#0"]["status"] == "failed"
    assert again.stderr.splitlines()[-1] == "2 of 2 pages failed; see o.jsonl"
    unchanged = mineru(*args, cwd=tmp_path)  # the same content: resumed, not tried again
    assert unchanged.returncode == 1 and read_journal(tmp_path / "o.jsonl") == list(recs.values())


def test_quiet_writes_a_name_with_a_newline_on_one_line(tmp_path):
    """A cron job reads --quiet's lines: a file name holding a newline printed a second, false
    "failed ..." line, and a carriage return or an escape sequence in a name was dropped (the id
    printed was not the journal's). Control characters are written as Python writes them."""
    name = "evil\nfailed fake.png#0: injected\r\x1b[2J.png"
    (tmp_path / name).write_bytes(b"not an image")
    r = mineru("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    (rec,) = read_journal(tmp_path / "o.jsonl")
    assert rec["id"] == f"{name}#0"
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == "1 of 1 pages failed; see o.jsonl", r.stderr
    assert lines[0].startswith("failed evil\\nfailed fake.png#0: injected\\r\\x1b[2J.png#0: "), lines[0]
    # Unicode's line and paragraph separators end a line for editors and log viewers; a
    # right-to-left override turns the name round on screen
    (tmp_path / name).unlink()
    (tmp_path / "ls\u2028failed x.png").write_bytes(b"not an image")
    (tmp_path / "bidi\u202egnp.exe.png").write_bytes(b"not an image")
    r = mineru("parse", ".", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--quiet", cwd=tmp_path)
    failed = sorted(line for line in r.stderr.splitlines() if line.startswith("failed "))
    names = [line.split(": ")[0] for line in failed]
    assert names == ["failed bidi\\u202egnp.exe.png#0", "failed ls\\u2028failed x.png#0"], r.stderr
