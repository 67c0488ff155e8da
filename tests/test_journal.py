"""The journal: append, torn-tail repair, resume decisions, compaction, the lock."""

import json
import os
import re
from pathlib import Path

import pytest
from fshelpers import small_filesystem

from mineru_cli.core.errors import OutputError, SetupError
from mineru_cli.journal import Journal, read_records


def rec(pid, status="ok", sha="a" * 64, fp="f1", **extra):
    return {"id": pid, "status": status, "source_sha256": sha, "fingerprint": fp, **extra}


def test_append_is_durable_line_by_line(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
        # Visible on disk before close (flushed + fsynced per record).
        assert [r["id"] for r in read_records(out)] == ["a#0"]
        j.append(rec("b#0"))
    assert [r["id"] for r in read_records(out)] == ["a#0", "b#0"]


@pytest.mark.parametrize("tail", [b'{"id": "c#0", "sta', b'{"id": "c#0", "status": "ok"'])
def test_torn_last_line_is_cut_and_never_propagated(tmp_path, tail):
    out = tmp_path / "r.jsonl"
    good = (json.dumps(rec("a#0")) + "\n").encode()
    out.write_bytes(good + tail)
    with Journal(out) as j:
        assert j.repaired_bytes == len(tail)
        assert list(j.index) == ["a#0"]
        j.append(rec("b#0"))
    data = out.read_bytes()
    assert data.startswith(good) and tail not in data
    assert [r["id"] for r in read_records(out)] == ["a#0", "b#0"]


def test_complete_last_line_is_not_cut_only_dropped_at_compaction(tmp_path):
    # A kill tears a line before its newline; a complete line is never a torn write.
    out = tmp_path / "r.jsonl"
    good = (json.dumps(rec("a#0")) + "\n").encode()
    out.write_bytes(good + b"garbage\n")
    with Journal(out) as j:
        assert j.repaired_bytes == 0 and j.bad_lines == 1
        assert out.read_bytes() == good + b"garbage\n"
        j.compact(["a#0"])
    assert out.read_bytes() == good


def test_torn_first_write_is_cut(tmp_path):
    out = tmp_path / "r.jsonl"
    torn = b'{"schema_version":1,"id":"a.png#0","sour'
    out.write_bytes(torn)
    with Journal(out) as j:
        assert j.repaired_bytes == len(torn) and not j.index
    assert out.read_bytes() == b""


@pytest.mark.parametrize(
    "content",
    [
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\n",  # binary
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",  # binary, no newline
        b'{"name": "config"}\n' + (json.dumps(rec("a#0")) + "\n").encode(),  # first line not a record
        b'{"name": "config"}',  # one JSON object, no newline
        b"notes\nmore notes",
    ],
)
def test_a_file_that_is_not_a_journal_is_refused_and_left_untouched(tmp_path, content):
    out = tmp_path / "keep.bin"
    out.write_bytes(content)
    with pytest.raises(SetupError, match="not a mineru journal"):
        Journal(out).open()
    assert out.read_bytes() == content and os.listdir(tmp_path) == ["keep.bin"]  # no lock file made beside it
    with Journal(out.with_name("other.jsonl")):  # the refusal released the lock it took
        pass


def test_file_names_that_are_not_utf8_round_trip(tmp_path):
    out = tmp_path / "r.jsonl"
    pid = os.fsdecode(b"b_\xff.png") + "#0"  # lone surrogate, as os.listdir gives it
    with Journal(out) as j:
        j.append(rec("a#0", source="a"))
        j.append(rec(pid, source=pid[:-2], markdown="caf\u00e9"))
        j.append(rec("c#0"))
        j.compact(["a#0", pid, "c#0"])
    out.read_bytes().decode("utf-8")  # still a valid UTF-8 file
    with Journal(out) as j:  # resume finds the page again
        assert list(j.index) == ["a#0", pid, "c#0"]
        assert j.finished(pid, "a" * 64, "f1", retry_failed=False)["markdown"] == "caf\u00e9"
        assert os.fsencode(j.get(pid)["source"]) == b"b_\xff.png"


def test_a_symlinked_journal_shares_the_lock_and_stays_a_link(tmp_path):
    target = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with Journal(link) as j:
        with pytest.raises(SetupError, match="another run"):
            Journal(target).open()
        j.append(rec("a#0"))
        j.compact(["a#0"])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [r["id"] for r in read_records(target)] == ["a#0"]


def test_bad_locations_are_setup_errors(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.jsonl").write_text("")
    with pytest.raises(SetupError, match="is a folder"):
        Journal(tmp_path / "folder").open()
    with pytest.raises(SetupError, match="existing file"):
        Journal(tmp_path / "file.jsonl" / "x.jsonl").open()
    with pytest.raises(SetupError, match="existing file"):
        Journal(tmp_path / "file.jsonl" / "sub" / "x.jsonl").open()


def test_an_out_that_is_no_regular_file_is_refused_before_anything_is_opened(tmp_path, monkeypatch):
    """A named pipe as the journal hung the run (opening it to read waits for a writer), a device
    took a lock file beside it (in /dev): such an --out is refused, saying what it is, before
    anything is opened or made. /dev/null is only looked at (check_out opens nothing)."""
    import socket

    from mineru_cli.journal import check_out

    monkeypatch.chdir(tmp_path)  # a socket's path must be short: bound by a relative name
    os.mkfifo("ff")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
    for name, what in (("ff", "a named pipe (FIFO)"), ("sock", "a socket"), ("/dev/null", "a character device")):
        said = rf"^--out {name} is {re.escape(what)}, not a regular file: .* give the name of a file"
        with pytest.raises(SetupError, match=said):
            check_out(Path(name))
    (tmp_path / "link.jsonl").symlink_to("ff")  # followed: the pipe is what would be opened
    with pytest.raises(SetupError, match="is a named pipe"):
        check_out(Path("link.jsonl"))
    for name in ("ff", "sock", "link.jsonl"):  # the run's open() checks first: no lock file, no hang
        with pytest.raises(SetupError, match="not a regular file"):
            Journal(Path(name)).open()
    assert sorted(os.listdir(tmp_path)) == ["ff", "link.jsonl", "sock"]


def test_finished_needs_same_content_and_fingerprint(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("ok#0"))
        j.append(rec("bad#0", status="failed"))
        assert j.finished("ok#0", "a" * 64, "f1", retry_failed=False)
        assert not j.finished("ok#0", "b" * 64, "f1", retry_failed=False)  # file changed
        assert not j.finished("ok#0", "a" * 64, "f2", retry_failed=False)  # options changed
        assert not j.finished("new#0", "a" * 64, "f1", retry_failed=False)
        assert j.finished("bad#0", "a" * 64, "f1", retry_failed=False)  # failed kept...
        assert not j.finished("bad#0", "a" * 64, "f1", retry_failed=True)  # ...unless retried


def test_a_page_with_a_block_the_engine_could_not_read_is_parsed_again_with_retry_failed(tmp_path):
    """An ok page whose record holds a block marked failed (the VLM could not read its crop) is
    kept by a plain re-run and parsed again by --retry-failed, as a failed page is; before, only
    --force (every page of the batch) parsed it again. Also once the journal is read back from
    its file and after compaction."""
    out = tmp_path / "r.jsonl"
    degraded = rec("t.pdf#0", blocks=[{"type": "text", "text": "a"}, {"type": "table", "text": "", "failed": True}])
    whole = rec("t.pdf#1", blocks=[{"type": "table", "text": "<table></table>"}])
    with Journal(out) as j:
        j.append(degraded)
        j.append(whole)
        for journal_state in ("appended", "compacted"):
            assert j.finished("t.pdf#0", "a" * 64, "f1", retry_failed=False), journal_state
            assert not j.finished("t.pdf#0", "a" * 64, "f1", retry_failed=True), journal_state
            assert j.finished("t.pdf#1", "a" * 64, "f1", retry_failed=True), journal_state
            j.compact(["t.pdf#1", "t.pdf#0"])
    with Journal(out) as j:  # read back from the file
        assert j.finished("t.pdf#0", "a" * 64, "f1", retry_failed=False)
        assert not j.finished("t.pdf#0", "a" * 64, "f1", retry_failed=True)
        assert j.finished("t.pdf#1", "a" * 64, "f1", retry_failed=True)


def test_compact_keeps_one_record_per_page_in_input_order(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("other#0"))  # from another input set: kept
        j.append(rec("b#0", status="failed"))
        j.append(rec("a#0"))
        j.append(rec("b#0"))  # retried: replaces the failed one
        j.compact(["a#0", "b#0"])
        j.append(rec("c#0"))  # the journal stays usable after compaction
        assert j.get("b#0")["status"] == "ok" and j.get("c#0")["id"] == "c#0"
        assert [r["id"] for r in j.records(["c#0", "zz#0", "a#0"])] == ["c#0", "a#0"]
    recs = read_records(out)
    assert [r["id"] for r in recs] == ["a#0", "b#0", "other#0", "c#0"]
    assert [r["status"] for r in recs][:2] == ["ok", "ok"]


def test_compact_drops_the_pages_it_is_told_are_gone(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        for pid in ["doc.pdf#0", "doc.pdf#1", "doc.pdf#2", "other#0"]:
            j.append(rec(pid))
        j.compact(["doc.pdf#0"], drop=["doc.pdf#1", "doc.pdf#2"])
        assert list(j.index) == ["doc.pdf#0", "other#0"]
    assert [r["id"] for r in read_records(out)] == ["doc.pdf#0", "other#0"]


def test_bad_lines_inside_are_counted_and_dropped_at_compaction(tmp_path):
    out = tmp_path / "r.jsonl"
    lines = [json.dumps(rec("a#0")), "not json", json.dumps(rec("b#0"))]
    out.write_text("\n".join(lines) + "\n")
    with Journal(out) as j:
        assert j.bad_lines == 1 and j.repaired_bytes == 0 and list(j.index) == ["a#0", "b#0"]
        j.compact(["a#0", "b#0"])
    assert out.read_text().splitlines() == [lines[0], lines[2]]


def test_second_writer_is_refused(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out):
        with pytest.raises(SetupError, match="another run"):
            Journal(out).open()


def test_a_journal_already_compact_is_left_as_it_is(tmp_path):
    """Compaction copies the journal beside itself: one that already holds one record per page in
    order is left as it is, so a re-run with nothing new neither rewrites a large journal nor,
    on a disk without room for the copy, stops with an output error (exit 3) on every run."""
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        for pid in ["a#0", "b#0", "other#0"]:
            j.append(rec(pid))
    os.link(out, tmp_path / "before")  # the same file until a compaction replaces it
    with Journal(out) as j:
        j.compact(["a#0", "b#0"])  # this run's pages first, then another input's: as they are
        j.append(rec("c#0"))
        j.compact(["a#0", "b#0"])  # c#0 is another input's page, last: still compact
        assert os.path.samefile(out, tmp_path / "before")
        j.append(rec("a#0", status="failed"))  # a later record of a page: rewritten
        j.compact(["a#0", "b#0"])
        assert not os.path.samefile(out, tmp_path / "before")
        assert [r["id"] for r in j.records(j.index)] == ["a#0", "b#0", "other#0", "c#0"]
    with small_filesystem(tmp_path / "fs", "64k") as fs:
        if fs is None:
            return
        out = fs / "r.jsonl"
        with Journal(out) as j:
            for i in range(20):
                j.append(rec(f"p{i:02d}#0", blob="x" * 2000))  # ~42 kB: no room for a copy
        with Journal(out) as j:
            j.compact([f"p{i:02d}#0" for i in range(20)])
        assert len(read_records(out)) == 20


def test_a_journal_removed_during_the_run_is_written_back_whole(tmp_path):
    """`rm results.jsonl` while a run goes on: the run's records are still in its open file and
    are read from it (resumed pages too); compaction writes them all back under the name."""
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps(rec("old#0")) + "\n")
    with Journal(out) as j:
        j.append(rec("a#0"))
        out.unlink()
        j.append(rec("b#0"))
        assert j.get("old#0")["id"] == "old#0"  # read back from the file it has open
        j.compact(["old#0", "a#0", "b#0"])
        j.append(rec("c#0"))  # and goes on appending to the file written back
    assert [r["id"] for r in read_records(out)] == ["old#0", "a#0", "b#0", "c#0"]


def test_a_journal_replaced_during_the_run_is_left_to_the_new_file(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
        other = tmp_path / "other.jsonl"
        other.write_text(json.dumps(rec("x#0")) + "\n")
        os.replace(other, out)
        with pytest.raises(OutputError, match="replaced by another file during the run"):
            j.compact(["a#0"])
    assert [r["id"] for r in read_records(out)] == ["x#0"]


def test_a_journal_whose_folder_is_removed_during_the_run_is_written_back_or_said_lost(tmp_path):
    """`rm -rf out/` while a run goes on: the folder is made again and the journal written back
    whole (the message said the journal was 'valid as it is', and it was gone); a folder replaced
    by a file cannot take it back: an OutputError that says the records are not there (it was a
    NotADirectoryError traceback)."""
    import shutil

    out = tmp_path / "out" / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
        shutil.rmtree(tmp_path / "out")
        j.append(rec("b#0"))
        j.compact(["a#0", "b#0"])
        j.append(rec("c#0"))
    assert [r["id"] for r in read_records(out)] == ["a#0", "b#0", "c#0"]

    out = tmp_path / "gone" / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
        shutil.rmtree(tmp_path / "gone")
        (tmp_path / "gone").write_text("a file where the folder was")
        with pytest.raises(OutputError, match="removed during the run") as info:
            j.compact(["a#0"])
        assert "valid as it is" not in str(info.value)
    assert (tmp_path / "gone").read_text() == "a file where the folder was"


def test_a_journal_cut_in_place_during_the_run_is_not_compacted_from_stale_offsets(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
        j.append(rec("b#0"))
        out.write_bytes(b"")  # `: > r.jsonl`: the same file, emptied
        with pytest.raises(OutputError, match="cut or written to by something else"):
            j.compact(["b#0", "a#0"])
    assert out.read_bytes() == b""


def test_a_compactions_copy_left_by_a_kill_goes_when_the_journal_opens(tmp_path):
    """A run killed while compacting leaves its copy, as large as the journal; a journal already
    in order is never copied again, so the copy stayed for good."""
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("a#0"))
    copy = tmp_path / ".r.jsonl.tmp"
    copy.write_bytes(out.read_bytes() * 3)
    with Journal(out) as j:
        j.compact(["a#0"])  # in order already: no copy made
    assert not copy.exists() and [r["id"] for r in read_records(out)] == ["a#0"]


# What another run does at a given moment of this one: sys.addaudithook's events (os.remove,
# fcntl.flock) are the moments; a hook cannot be removed, so it calls whatever `_at_event` holds
_at_event: list = []
_hooks_added: list = []


def _on_audit(event: str, args: tuple) -> None:
    if _at_event:
        _at_event[0](event, args)


@pytest.fixture
def at_event():
    """`at_event(fn)`: fn(event, args) is called at each audit event until the test ends."""
    import sys

    if _on_audit not in _hooks_added:
        sys.addaudithook(_on_audit)
        _hooks_added.append(_on_audit)
    yield lambda fn: _at_event.append(fn)
    _at_event.clear()


def test_a_run_opening_as_a_failed_set_up_discards_its_journal_keeps_its_own(tmp_path, at_event):
    """Two runs start at once on a new --out and one fails its set-up (a model its workers cannot
    load), which removes the journal and lock file it made. It removed the lock file first: a run
    that opened the name then made a new lock file, found the failed run's journal still there and
    appended to it, and the failed run then removed that journal's name, so the records of the
    run that went on were in a file no name reached (lost to a kill, unseen by `tail -f`)."""
    out = tmp_path / "new" / "r.jsonl"
    failed = Journal(out).open()
    made = {os.fspath(out), os.fspath(out.with_name(".r.jsonl.lock"))}
    other, opened = Journal(out), []

    def other_opens(event: str, args: tuple) -> None:
        if event == "os.remove" and os.fspath(args[0]) in made and not opened:
            try:
                opened.append(other.open())  # as the failed run is about to remove each of its files
            except SetupError:
                pass  # the failed run holds the lock yet: refused, as it should be then

    at_event(other_opens)
    failed.discard()
    _at_event.clear()
    if not opened:
        other.open()
    try:
        other.append(rec("a#0"))
        assert other.is_file(out), "the other run's journal has no name"
    finally:
        other.close()
    assert [r["id"] for r in read_records(out)] == ["a#0"]


def test_a_run_opening_the_lock_file_a_failed_set_up_removes_is_not_refused(tmp_path, at_event):
    """A run that opened the lock file just before a run whose set-up failed removed it, and took
    the lock once that run let it go, was refused 'another run is writing (lock held)' while no
    run was. It opens the lock file again and runs."""
    out = tmp_path / "r.jsonl"
    failed = Journal(out).open()

    def failed_discards(event: str, args: tuple) -> None:
        if event == "fcntl.flock":
            _at_event.clear()
            failed.discard()  # between the other run's opening of the lock file and its flock

    at_event(failed_discards)
    with Journal(out) as j:
        j.append(rec("a#0"))
    assert [r["id"] for r in read_records(out)] == ["a#0"]
