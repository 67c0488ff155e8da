"""Faults of the output side through the real CLI: per-document files of a document that now
fails, an --out-dir without --format, and a filesystem that fills up (journal, cache,
per-document files) followed by a re-run once there is room again."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fshelpers import as_plain_user, fill, read_only, small_filesystem
from helpers import EXAMPLES, mineru, read_journal
from PIL import Image, ImageDraw, ImageFont

from mineru_cli.core.errors import OutputError, SetupError
from mineru_cli.report import Reporter

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
    # the default folder named as such is given all the same: refused too, not taken as unset
    r = mineru("parse", "p.png", "--out", "o.jsonl", "--out-dir", "mineru_output", cwd=tmp_path)
    assert r.returncode == 2 and "--out-dir mineru_output needs --format" in r.stderr, r.stderr
    with pytest.raises(SetupError, match="needs --format"):
        mineru_cli.parse([tmp_path / "p.png"], out=tmp_path / "o.jsonl", out_dir="mineru_output")


def test_a_full_disk_stops_the_run_whole_and_a_rerun_resumes(tmp_path):
    """The journal, the cache and the per-document files share a filesystem that fills up mid-run
    (a small tmpfs where this machine may mount one, else a file-size limit on the run): exit 3,
    a clear message, no torn record or file, the cache a miss; once there is room the same
    command resumes and every page has one record."""
    n = 8
    (tmp_path / "in").mkdir()
    for i in range(n):
        text_page(tmp_path / "in" / f"p{i:02d}.png", f"Page number {i} of the dump")
    with small_filesystem(tmp_path / "fs", "4m") as fs:
        base = fs or tmp_path / "out"
        base.mkdir(exist_ok=True)
        out, cache, docs = base / "o.jsonl", base / "cache", base / "docs"
        args = [sys.executable, "-m", "mineru_cli", "parse", "in", "--out", str(out), "--cache-dir", str(cache)]
        args += ["--engine", "ocr", "--workers", "1", "-f", "markdown", "--out-dir", str(docs)]
        limit = 6 * 1024  # without a tmpfs: bytes any one file may hold (the journal: ~2 records)

        def limit_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        if fs is not None:
            ballast = fill(
                fs, 320 * 1024
            )  # a few pages: the cache (-shm 32 kB, ~65 kB of WAL a row), records (~2.3 kB)
        r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, preexec_fn=None if fs else limit_files)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "Traceback" not in r.stderr
        assert f"--out {out}: {'No space left on device' if fs else 'File too large'}" in r.stderr, r.stderr
        assert "run the same command again to resume" in r.stderr, r.stderr
        # the cache could not store: a warning, not the reason to stop (a full disk: read-only then)
        assert f"cache folder {cache} has no space left on its disk" in r.stderr if fs else "local cache" in r.stderr
        before = read_journal(out)  # every line whole (read_journal checks each newline)
        ids = [x["id"] for x in before]
        assert len(ids) == len(set(ids)) and 1 <= len(ids) < n, ids
        assert not list(base.rglob("*.tmp")) and not docs.exists() or not list(docs.iterdir())
        if (cache / "results.sqlite3").exists():
            con = sqlite3.connect(cache / "results.sqlite3")
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            con.close()

        if fs is not None:
            ballast.unlink()  # room again
        r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        after = read_journal(out)
        assert sorted(x["id"] for x in after) == [f"p{i:02d}.png#0" for i in range(n)]
        kept = {x["id"]: x for x in after}
        assert all(kept[x["id"]] == x for x in before)  # resumed as written, not redone
        assert all(x["status"] == "ok" for x in after)
        assert len(list(docs.rglob("*.md"))) == n
        if fs is None:
            return

        # Full again while the per-document files are written (compaction still fits): exit 3,
        # no torn or temporary file, the journal untouched; then room, and they are all written.
        whole = {f.relative_to(docs): f.read_bytes() for f in docs.rglob("*.md")}
        shutil.rmtree(docs)
        journal = out.read_bytes()
        ballast = fill(fs, len(journal) + 4096)  # a copy of the journal, then a small file or two
        r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 3 and f"--out-dir {docs}: No space left on device" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and out.read_bytes() == journal
        assert not list(base.rglob("*.tmp"))
        written = {f.relative_to(docs): f.read_bytes() for f in docs.rglob("*.md")}
        assert len(written) < n and all(whole[f] == text for f, text in written.items())
        ballast.unlink()
        assert subprocess.run(args, cwd=tmp_path, capture_output=True).returncode == 0
        assert {f.relative_to(docs): f.read_bytes() for f in docs.rglob("*.md")} == whole
        assert out.read_bytes() == journal


class _Warnings(Reporter):
    """A quiet reporter that keeps the run's warnings."""

    def __init__(self) -> None:
        super().__init__(quiet=True)
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def test_a_document_changed_or_gone_after_its_pages_were_parsed_gets_no_files(tmp_path):
    """content-list crops and layout pages are read again from the files at the end of the run: a
    file removed, or rewritten with other pixels, after its page was parsed stopped the run there
    with a traceback (and no later document got its files), or gave crops of the new pixels at the
    old record's boxes. Such a document gets no files (its earlier ones are removed, with a
    warning, as for a document that fails now); the others get theirs."""
    import mineru_cli

    src = tmp_path / "in"
    src.mkdir()
    for name in ("a_gone.png", "b_swapped.png"):
        shutil.copy(EXAMPLES / "table.png", src / name)
    text_page(src / "c_keep.png", "A page that stays")
    docs = tmp_path / "docs"
    stale = docs / "a_gone_png" / "a_gone.md"  # from an earlier run
    stale.parent.mkdir(parents=True)
    stale.write_text("earlier content")
    options = dict(engine="ocr", workers=1, cache=False, formats=["content-list", "layout"], out_dir=docs)
    reporter = _Warnings()
    seen = []
    for rec in mineru_cli.parse(src, tmp_path / "o.jsonl", reporter=reporter, **options):
        seen.append(rec.status)
        if len(seen) == 3:  # every page parsed; the files are written after the last record
            (src / "a_gone.png").unlink()
            other = Image.open(src / "b_swapped.png").transpose(Image.Transpose.FLIP_TOP_BOTTOM)
            other.save(src / "b_swapped.png")
    assert seen == ["ok"] * 3
    for name in ("a_gone", "b_swapped"):
        assert not (docs / f"{name}_png" / f"{name}.md").exists()
        assert not (docs / f"{name}_png" / f"{name}_content_list.json").exists()
        assert not (docs / f"{name}_png" / f"{name}_layout.pdf").exists()
    assert not list((docs / "b_swapped_png").rglob("*.jpg"))  # no crop of the flipped pixels
    assert "stays" in (docs / "c_keep_png" / "c_keep.md").read_text()
    assert (docs / "c_keep_png" / "c_keep_layout.pdf").is_file()
    assert any("2 document(s) changed or went away" in w and "a_gone.png" in w for w in reporter.warnings), (
        reporter.warnings
    )


def test_an_out_dir_that_is_the_input_folder_parses_it_and_not_its_own_output(tmp_path):
    """Everything under --out-dir was taken for our own output and left out, so `--out-dir` set to
    the folder being parsed (or a folder above it, such as `.`) parsed nothing and exited 0. Only
    what --format writes there that could be an input (crops under images/, layout PDFs) is ours."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(EXAMPLES / "table.png", src / "table.png")  # its table gives a crop
    text_page(src / "t.png", "A page next to its own output")
    args = ["parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", "--workers", "1"]
    args += ["-f", "content-list", "-f", "layout"]
    for out_dir in ("in", ".", "in"):  # the input folder, a folder above it, then again: nothing new
        r = mineru(*args, "--out-dir", out_dir, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert sorted(x["id"] for x in read_journal(tmp_path / "o.jsonl")) == ["t.png#0", "table.png#0"]
    assert list((src / "table_png" / "images").glob("*.jpg")) and (src / "t_png" / "t_layout.pdf").is_file()
    assert (tmp_path / "table_png" / "table_layout.pdf").is_file()  # `--out-dir .`


def test_sigterm_while_the_per_document_files_are_written_stops_there_with_exit_130(tmp_path):
    """A stop asked for while the per-document files are written (after every page is settled)
    went on writing all of them, however many, and then exited 0 as if never asked. It stops
    between documents: exit 130, no file torn, and the next run writes the rest."""
    n = 30
    src = tmp_path / "in"
    src.mkdir()
    text_page(src / "d00.png", "The same page in many files")
    for i in range(1, n):
        shutil.copy(src / "d00.png", src / f"d{i:02d}.png")  # cache hits: one page is parsed
    args = ["parse", "in", "--out", "o.jsonl", "--engine", "ocr", "--workers", "1"]
    assert mineru(*args, cwd=tmp_path).returncode == 0
    journal = (tmp_path / "o.jsonl").read_bytes()
    docs = tmp_path / "docs"
    env = {**os.environ, "MINERU_CACHE_DIR": str(tmp_path / ".cache-test")}
    run = [sys.executable, "-m", "mineru_cli", *args, "-f", "layout", "--out-dir", str(docs)]
    proc = subprocess.Popen(run, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not list(docs.rglob("*_layout.pdf")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130, (proc.returncode, err)
    written = list(docs.rglob("*_layout.pdf"))
    assert 1 <= len(written) < n and not list(docs.rglob("*.tmp"))
    assert all(f.read_bytes().rstrip().endswith(b"%%EOF") for f in written)
    assert (tmp_path / "o.jsonl").read_bytes() == journal
    r = mineru(*args, "-f", "layout", "--out-dir", str(docs), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(list(docs.rglob("*_layout.pdf"))) == n


def test_a_document_whose_files_cannot_be_written_does_not_stop_the_others(tmp_path):
    """A per-document file the filesystem refuses for a reason other than room (here a name past
    255 bytes: a 240-character file name plus `_content_list.json`) ended the run with a traceback
    (exit 1) and no later document got its files. The others get theirs; exit 3 names it."""
    src = tmp_path / "in"
    src.mkdir()
    long = "x" * 240
    text_page(src / f"{long}.png", "A page with a long name")
    text_page(src / "z.png", "A page after it")
    args = ["parse", "in", "--out", "o.jsonl", "--engine", "ocr", "--workers", "1", "-f", "content-list"]
    r = mineru(*args, "--out-dir", "docs", cwd=tmp_path)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert "could not write the files of 1 document(s)" in r.stderr and "File name too long" in r.stderr, r.stderr
    assert "after it" in (tmp_path / "docs" / "z_png" / "z.md").read_text()
    assert (tmp_path / "docs" / "z_png" / "z_content_list.json").is_file()
    assert not list((tmp_path / "docs").rglob("*.tmp"))
    assert sorted(x["status"] for x in read_journal(tmp_path / "o.jsonl")) == ["ok", "ok"]


def test_an_out_dir_that_cannot_be_written_is_refused_before_parsing(tmp_path):
    text_page(tmp_path / "p.png", "Alpha")
    (tmp_path / "docs").mkdir()
    with read_only(tmp_path / "docs"):
        r = mineru("parse", "p.png", "--out", "o.jsonl", "-f", "markdown", "--out-dir", "docs", cwd=tmp_path)
    assert r.returncode == 2 and "--out-dir docs" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    "out_dir, said",
    [
        ("docs", "--out-dir docs: the folder cannot be written"),
        ("docs/new", "--out-dir docs/new: cannot make it in docs, which cannot be written"),
    ],
)
def test_explain_plan_refuses_an_out_dir_that_cannot_be_written_as_the_run_does(tmp_path, out_dir, said):
    """--explain-plan exits 2 with the run's words on a read-only --out-dir, or one to be made
    in a read-only folder (it said nothing and exited 0)."""
    text_page(tmp_path / "p.png", "Alpha")
    (tmp_path / "docs").mkdir()
    args = (
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
        out_dir,
    )
    with read_only(tmp_path / "docs"):
        plan = mineru(*args, "--explain-plan", cwd=tmp_path)
        run = mineru(*args, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr == f"error: {said}\n", run.stderr
    assert (plan.returncode, plan.stderr, plan.stdout) == (2, run.stderr, "")
    assert sorted(os.listdir(tmp_path)) == ["docs", "p.png"]


class _ChangeOnFound(Reporter):
    """A quiet reporter that rewrites the second file once the run has taken it from the planner
    (hashed, counted), before any worker reads it."""

    def __init__(self, path: Path, data: bytes) -> None:
        super().__init__(quiet=True)
        self.path, self.data = path, data
        self.taken = 0

    def found(self, total: int) -> None:
        # one call per file taken, in input order; `total` is no sign of which: it counts files
        # found and not planned yet too, so total == 2 can come while b.png is still to be hashed
        self.taken += 1
        if self.taken == 2:  # b.png: hashed, not yet handed out
            self.path.write_bytes(self.data)


def test_an_ok_page_read_from_a_file_that_changed_since_it_was_hashed_is_parsed_again(tmp_path):
    """A file rewritten between its hashing and its parsing got an ok record with the hash of the
    content planned and the blocks of the content parsed. Had the file gone back to the content
    hashed (a copy over itself: cut short, then whole again), every later run resumed those
    blocks. Such a record has no content hash, as a failed one, so the next run parses it again."""
    import mineru_cli

    src = tmp_path / "in"
    src.mkdir()
    text_page(src / "a.png", "First page here")
    before = text_page(src / "b.png", "Alpha original words").read_bytes()
    after = text_page(tmp_path / "other.png", "Bravo changed words").read_bytes()
    options = dict(engine="ocr", workers=1, cache=False)
    for rec in mineru_cli.parse(src, tmp_path / "o.jsonl", reporter=_ChangeOnFound(src / "b.png", after), **options):
        if rec.source == "b.png":
            assert "Bravo" in rec.markdown and rec.status == "ok"  # what the file held when parsed
            (src / "b.png").write_bytes(before)  # and back
    (again,) = [r for r in mineru_cli.parse(src, tmp_path / "o.jsonl", **options) if r.source == "b.png"]
    assert "Alpha" in again.markdown, again.markdown


def test_a_folder_that_cannot_be_searched_gets_a_record_and_exit_1(tmp_path):
    """In a folder without search (x) permission the names can be listed but not stat'ed: its
    documents got `unreadable` records, but its subfolders (no document name) were dropped
    without a word, and the documents under them with them."""
    src = tmp_path / "in"
    src.mkdir()
    text_page(src / "ok.png", "A page that is read")
    locked = src / "locked"
    (locked / "sub").mkdir(parents=True)
    shutil.copy(src / "ok.png", locked / "a.png")
    shutil.copy(src / "ok.png", locked / "sub" / "b.png")
    (locked / "notes.txt").write_text("not a document: not ours")
    locked.chmod(0o644)  # r: names are listed; no x: nothing in it can be stat'ed or opened
    try:
        r = mineru(
            "parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path, preexec_fn=as_plain_user()
        )
    finally:
        locked.chmod(0o755)
    assert r.returncode == 1, r.stderr
    recs = {x["id"]: x for x in read_journal(tmp_path / "o.jsonl")}
    assert sorted(recs) == ["locked/a.png#0", "locked/sub#0", "ok.png#0"], sorted(recs)
    assert recs["ok.png#0"]["status"] == "ok"
    for rid in ("locked/a.png#0", "locked/sub#0"):
        assert recs[rid]["status"] == "failed" and recs[rid]["error"]["kind"] == "unreadable", recs[rid]
    assert "folder" in recs["locked/sub#0"]["error"]["message"]

    # once it can be searched, its documents are read and the folder's own record goes: no id
    # of a document ever takes its place, so it would say the folder is unreadable for ever
    again = mineru("parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    recs = {x["id"]: x for x in read_journal(tmp_path / "o.jsonl")}
    assert sorted(recs) == ["locked/a.png#0", "locked/sub/b.png#0", "ok.png#0"], sorted(recs)
    assert all(x["status"] == "ok" for x in recs.values())


STAMP = ".chapters_chromium.mineru-files.json"  # the stamp beside its files (writers.STAMP)


def _stopped_halfway_through_its_files(proc: subprocess.Popen, stamp: Path, limit: float = 120) -> None:
    """SIGSTOP `proc` once its pending stamp names the Markdown and the content list it wrote and
    not yet its layout PDF (whose pages take a while to draw): the run is halfway through the
    document's files."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            held = json.loads(stamp.read_text())
        except (OSError, ValueError):
            held = {}
        names = held.get("written", {}) if not held.get("digest") else {}
        if "chapters_chromium_content_list.json" in names and "chapters_chromium_layout.pdf" not in names:
            os.kill(proc.pid, signal.SIGSTOP)
            return
        time.sleep(0.002)
    proc.kill()
    pytest.fail(f"the first run never stopped halfway through its files: {proc.communicate()[1][-2000:]}")


def _wait_for_a_record(proc: subprocess.Popen, journal: Path, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while not journal.exists() or not read_journal(journal):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.1)


def test_two_runs_writing_one_document_take_turns(tmp_path):
    """Two cron runs with other journals and one --out-dir: a run halfway through a document's
    files (its Markdown and content list written, its layout PDF not yet) holds the document; the other run
    parses its pages and waits for it, then writes all its own files (a run stopped while it
    waits leaves the document to the next run: exit 130). The document's Markdown
    and content list are then of one run, and every crop the content list names is there."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "chapters_chromium.pdf", src)
    docs = tmp_path / "docs"
    common = ["-m", "mineru_cli", "parse", "in", "--engine", "ocr", "--no-cache", "--workers", "1"]
    common += ["-f", "content-list", "-f", "layout", "--out-dir", "docs"]
    env = {**os.environ, "MINERU_CACHE_DIR": str(tmp_path / ".cache-test")}

    def run(*args: str) -> subprocess.Popen:
        cmd = [sys.executable, *common, *args]
        return subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)

    first = run("--out", "a.jsonl", "--pages", "1-7")
    _stopped_halfway_through_its_files(first, docs / "chapters_chromium_pdf" / STAMP)
    try:
        second = run("--out", "b.jsonl", "--pages", "8")
        third = run("--out", "c.jsonl", "--pages", "8")  # a third one is stopped while it waits
        for proc, journal in ((second, "b.jsonl"), (third, "c.jsonl")):
            _wait_for_a_record(proc, tmp_path / journal)
        time.sleep(3)
        assert second.poll() is None, "the second run wrote the document while the first was halfway through it"
        third.send_signal(signal.SIGTERM)
        assert third.wait(timeout=30) == 130, third.communicate()[1][-2000:]
        told = third.communicate()[1]
        assert "re-run to write them" in told
        assert "waiting for another run to finish writing" in told and "chapters_chromium_pdf" in told, told
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(timeout=120) == 0, first.communicate()[1][-2000:]
    assert second.wait(timeout=120) == 0, second.communicate()[1][-2000:]
    folder = docs / "chapters_chromium_pdf"
    markdown = (folder / "chapters_chromium.md").read_text()
    items = json.loads((folder / "chapters_chromium_content_list.json").read_text())
    assert "Chapter 8" in markdown and "Chapter 1" not in markdown, markdown[:300]  # the later run's, whole
    assert {it["page_idx"] for it in items} == {7}
    for it in items:
        assert it.get("text", "")[:40] in markdown
        assert not it.get("img_path") or (folder / it["img_path"]).is_file()


def test_a_journal_with_no_room_to_be_reordered_is_left_as_it_is_and_the_documents_are_written(tmp_path):
    """Workers record pages in the order they finish, and putting them in input order copies the
    whole journal: on a disk with less room than that, every run (a cron re-run with nothing new
    too) stopped with exit 3 and never wrote the per-document files. Only the order to change:
    a warning, exit 0, the documents written; a journal that holds more (a page twice) is still an
    output error, after the documents are written."""
    for name in ("a", "b"):
        text_page(tmp_path / f"{name}.png", f"Page {name} of the dump")
    with small_filesystem(tmp_path / "fs", "1m") as fs:
        if fs is None:
            pytest.skip("cannot mount a small filesystem here (not root, or no mount rights)")
        out = fs / "o.jsonl"
        args = ("parse", "a.png", "b.png", "--out", str(out), "--no-cache", "--engine", "ocr")
        assert mineru(*args, cwd=tmp_path).returncode == 0
        a, b = out.read_bytes().splitlines(keepends=True)
        out.write_bytes(b + a)  # finished the other way round
        ballast = fill(fs, len(a) // 2)  # room for less than the copy
        docs = tmp_path / "docs"
        r = mineru(*args, "-f", "markdown", "--out-dir", str(docs), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert f"warning: --out {out}: no room to rewrite it in input order" in r.stderr, r.stderr
        assert out.read_bytes() == b + a and sorted(p.name for p in docs.rglob("*.md")) == ["a.md", "b.md"]
        ballast.unlink()
        out.write_bytes(b + a + a)  # a page twice: the copy is what makes it one record a page
        ballast = fill(fs, len(a) // 2)
        shutil.rmtree(docs)
        r = mineru(*args, "-f", "markdown", "--out-dir", str(docs), cwd=tmp_path)
        assert r.returncode == 3 and "while compacting it" in r.stderr, r.stderr
        assert sorted(p.name for p in docs.rglob("*.md")) == ["a.md", "b.md"]
        ballast.unlink()
        assert mineru(*args, cwd=tmp_path).returncode == 0
        assert out.read_bytes() == a + b


def test_a_log_that_takes_no_more_does_not_stop_the_run(tmp_path):
    """A cron job's log on a full disk (`2>> mineru.log`): the first message that did not fit
    ended the run with a traceback and exit 1, before its first page (the log on /dev/full) or
    later (here a file-size limit the log is a few bytes short of, which fails part-way through a
    line as a disk that fills up does). What the run says from there on is dropped; every page
    gets its record and the exit code says how the run went."""
    (tmp_path / "in").mkdir()
    text_page(tmp_path / "in" / "a.png", "A good page")
    text_page(tmp_path / "in" / "b.png", "Another good page")
    args = [sys.executable, "-m", "mineru_cli", "parse", "in", "--out", "o.jsonl", "--no-cache", "--engine", "ocr"]
    with open("/dev/full", "w") as full:
        r = subprocess.run(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=full)
    assert r.returncode == 0
    first = read_journal(tmp_path / "o.jsonl")
    assert [(x["id"], x["status"]) for x in first] == [("a.png#0", "ok"), ("b.png#0", "ok")]

    (tmp_path / "in" / "c.png").write_bytes((EXAMPLES / "slide.png").read_bytes()[:3000])  # truncated
    limit = 1 << 20
    log = tmp_path / "mineru.log"
    with open(log, "wb") as f:
        f.truncate(limit - 100)  # room for part of the first line

    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with open(log, "ab") as stderr:
        r = subprocess.run(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=limit_files)
    said = log.read_bytes()[limit - 100 :].decode(errors="replace")
    assert said.startswith("pipeline: ") and len(said) == 100, said  # the log full part-way through
    assert r.returncode == 1, said  # c.png failed
    after = read_journal(tmp_path / "o.jsonl")
    assert after[:2] == first and [(x["id"], x["status"]) for x in after[2:]] == [("c.png#0", "failed")]


def test_a_full_standard_output_is_exit_3_and_said_of_standard_output(tmp_path):
    """A command whose answer cannot be written (stdout on a full disk: /dev/full) ended with a
    traceback and exit 1, and `cache stats` said "cache folder ...: no space left on its disk",
    sending the user to free space where there was no problem. It is exit 3 and one line that
    says standard output; what the command wrote elsewhere (merge's journal) is whole."""
    (tmp_path / "s.jsonl").write_text(
        "".join(
            json.dumps({"schema_version": 1, "id": f"p{i}.png#0", "status": "ok", "blocks": []}) + "\n"
            for i in range(3)
        )
    )
    for command in (["schema"], ["cache", "stats", "--cache-dir", "cache"], ["merge", "s.jsonl", "--out", "m.jsonl"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                [sys.executable, "-m", "mineru_cli", *command],
                cwd=tmp_path,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
            )
        assert r.returncode == 3, (command, r.returncode, r.stderr)
        assert r.stderr == "error: standard output: No space left on device\n", (command, r.stderr)
    assert read_journal(tmp_path / "m.jsonl") == read_journal(tmp_path / "s.jsonl")


def test_a_reader_that_goes_away_ends_a_command_without_a_word(tmp_path):
    """`mineru schema | head -1`: the reader takes its line and closes the pipe; the command said
    "error: standard output: Broken pipe" and exited 3, an error where the user got what they
    asked for. It ends without a word, exit 141 (128 + SIGPIPE, as a shell reports a program the
    signal ended), so `set -o pipefail` still sees the cut."""
    for command in (["schema"], ["--help"]):
        reader, writer = os.pipe()
        os.close(reader)  # gone before the first write: the answer is larger than no pipe buffer
        try:
            r = subprocess.run(
                [sys.executable, "-m", "mineru_cli", *command],
                cwd=tmp_path,
                stdout=writer,
                stderr=subprocess.PIPE,
                text=True,
            )
        finally:
            os.close(writer)
        assert (r.returncode, r.stderr) == (141, ""), (command, r.returncode, r.stderr)


def test_an_out_dir_made_read_only_mid_run_says_so_and_a_rerun_writes_its_files(tmp_path):
    """An --out-dir remounted read-only while the pages parse (EROFS when the files are written
    after the last record): the run stops with an output error (exit 3) that said "free space",
    which frees nothing on a read-only mount. It says to make it writable; then the same run
    writes the files and parses nothing again."""
    if os.geteuid() != 0:
        pytest.skip("a read-only mount needs root (a read-only folder is EACCES otherwise, refused at the start)")
    import mineru_cli

    text_page(tmp_path / "p.png", "A page for a read-only folder")
    docs = tmp_path / "docs"
    docs.mkdir()
    options = dict(engine="ocr", workers=1, cache=False, formats=["markdown"], out_dir=docs)
    with contextlib.ExitStack() as mounted, pytest.raises(OutputError) as exc:
        for _ in mineru_cli.parse(tmp_path / "p.png", tmp_path / "o.jsonl", **options):
            mounted.enter_context(read_only(docs))  # the page is parsed; its files come next
    assert "Read-only file system" in str(exc.value) and "make it writable again" in str(exc.value), exc.value
    assert not list(docs.iterdir())
    journal = (tmp_path / "o.jsonl").read_bytes()
    assert [r.status for r in mineru_cli.parse(tmp_path / "p.png", tmp_path / "o.jsonl", **options)] == ["ok"]
    assert "read-only" in (docs / "p_png" / "p.md").read_text()
    assert (tmp_path / "o.jsonl").read_bytes() == journal  # resumed, not parsed again
