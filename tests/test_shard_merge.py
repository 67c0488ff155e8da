"""Static sharding across machines (--shard K/N) and joining their journals (mineru merge)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest
from helpers import EXAMPLES, mineru, read_journal

from mineru_cli.config import Shard

pytestmark = pytest.mark.e2e  # runs the real CLI on the examples


def test_shards_split_the_files_disjointly_and_merge_joins_them(tmp_path, record_validator):
    runs = {}
    for k in (1, 2):
        out = tmp_path / f"shard{k}.jsonl"
        r = mineru(
            "parse",
            str(EXAMPLES),
            "--out",
            str(out),
            "--no-cache",
            "--engine",
            "ocr",
            "--shard",
            f"{k}/2",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        runs[k] = {rec["id"]: rec for rec in read_journal(out, record_validator)}
    ids1, ids2 = set(runs[1]), set(runs[2])
    everything = {f"{p.name}#0" for p in EXAMPLES.iterdir() if p.suffix in (".png", ".pdf")} | {"report.pdf#1"}
    assert ids1 and ids2 and not ids1 & ids2 and ids1 | ids2 == everything
    assert ("report.pdf#0" in ids1) == ("report.pdf#1" in ids1)  # a document stays whole
    assert all(Shard(k, 2).holds(pid.rpartition("#")[0]) for k in (1, 2) for pid in runs[k])

    merged = tmp_path / "all.jsonl"
    r = mineru("merge", str(tmp_path / "shard1.jsonl"), str(tmp_path / "shard2.jsonl"), "--out", str(merged))
    assert r.returncode == 0, r.stderr
    assert "7 page(s) from 2 journal(s); 0 found in more than one" in r.stdout
    lines = read_journal(merged, record_validator)
    assert {rec["id"]: rec for rec in lines} == {**runs[1], **runs[2]} and len(lines) == 7
    again = mineru("merge", str(tmp_path / "shard1.jsonl"), "--out", str(merged))
    assert again.returncode == 0 and read_journal(merged) == lines  # idempotent: nothing added
    # the merged journal resumes like any journal: nothing is parsed again
    r = mineru(
        "parse", str(EXAMPLES), "--out", str(merged), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path
    )
    summary = [json.loads(x) for x in r.stderr.splitlines() if x.startswith("{")][-1]
    assert r.returncode == 0 and summary["resumed"] == 7 and summary["ok"] == 0, r.stderr


def test_merge_keeps_an_ok_record_over_a_failed_one_and_refuses_what_is_no_journal(tmp_path):
    r = mineru("parse", str(EXAMPLES / "prose.png"), "--out", "ok.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (ok,) = read_journal(tmp_path / "ok.jsonl")
    failed = {
        **ok,
        "status": "failed",
        "blocks": [],
        "markdown": "",
        "created": "2099-01-01T00:00:00+00:00",
        "error": {"kind": "crash", "stage": "engine", "message": "m"},
    }
    (tmp_path / "failed.jsonl").write_text(json.dumps(failed) + "\n")
    r = mineru("merge", "failed.jsonl", "ok.jsonl", "--out", "m.jsonl", cwd=tmp_path)
    assert r.returncode == 0 and "1 found in more than one" in r.stdout, r.stdout + r.stderr
    assert read_journal(tmp_path / "m.jsonl") == [ok]  # later, but failed: loses
    (tmp_path / "notes.txt").write_text("hello\n")
    bad = mineru("merge", "notes.txt", "ok.jsonl", "--out", "m.jsonl", cwd=tmp_path)
    missing = mineru("merge", "nope.jsonl", "--out", "m.jsonl", cwd=tmp_path)
    assert bad.returncode == 2 and "not a mineru journal" in bad.stderr
    assert missing.returncode == 2 and "no such journal" in missing.stderr
    assert read_journal(tmp_path / "m.jsonl") == [ok]  # untouched


def test_merge_refuses_a_named_pipe_as_out_or_as_a_journal_without_opening_it(tmp_path):
    """merge --out a named pipe hung (opening it to read waits for a writer) and left a lock
    file; a named pipe given as a journal was 'no such journal'. Both are said to be a named
    pipe, exit 2, and nothing is made."""
    import os

    os.mkfifo(tmp_path / "ff")
    (tmp_path / "a.jsonl").write_text("")  # an empty journal
    given = mineru("merge", "ff", "--out", "m.jsonl", cwd=tmp_path, timeout=60)
    assert given.returncode == 2 and "error: ff is a named pipe (FIFO), not a journal" in given.stderr, given.stderr
    out = mineru("merge", "a.jsonl", "--out", "ff", cwd=tmp_path, timeout=60)
    said = "error: --out ff is a named pipe (FIFO), not a regular file"
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert sorted(os.listdir(tmp_path)) == ["a.jsonl", "ff"]


def test_merge_counts_out_as_a_journal_wherever_it_counts_its_pages(tmp_path):
    """OUT's own records compete with the inputs' and are counted among the pages and those found
    more than once, but the summary said "from 2 journal(s)" of them, and counted a page each
    time it was seen again: a nightly merge of the same two shards said "4 page(s) from 2
    journal(s); 5 found more than once". OUT is named among the journals where it held records,
    and each page is counted once."""

    def journal(name: str, numbers: range | tuple[int, ...]) -> str:
        records = [{"schema_version": 1, "id": f"p{i}.png#0", "status": "ok", "blocks": []} for i in numbers]
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records))
        return name

    a, b = journal("a.jsonl", range(3)), journal("b.jsonl", (2, 3))  # p2 in both
    first = mineru("merge", a, b, "--out", "all.jsonl", cwd=tmp_path)
    assert first.returncode == 0 and "all.jsonl: 4 page(s) from 2 journal(s); 1 found in more than one" in first.stdout
    again = mineru("merge", a, b, "--out", "all.jsonl", cwd=tmp_path)
    said = "all.jsonl: 4 page(s) from 3 journal(s) (all.jsonl itself and 2 given); 4 found in more than one"
    assert again.returncode == 0 and said in again.stdout, again.stdout
    one = mineru("merge", b, "--out", "all.jsonl", cwd=tmp_path)
    said = "all.jsonl: 4 page(s) from 2 journal(s) (all.jsonl itself and 1 given); 2 found in more than one"
    assert one.returncode == 0 and said in one.stdout, one.stdout
    assert [r["id"] for r in read_journal(tmp_path / "all.jsonl")] == [f"p{i}.png#0" for i in range(4)]


def test_merge_takes_a_shard_whose_only_line_is_torn_as_parse_does(tmp_path):
    """A shard whose run was killed during its first write holds one torn line: `parse --out`
    takes it (and cuts the line off), `merge` refused it as "not a mineru journal" (exit 2)."""
    records = [{"schema_version": 1, "id": f"p{i}.png#0", "status": "ok", "blocks": []} for i in range(2)]
    (tmp_path / "s1.jsonl").write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    torn = json.dumps({**records[0], "id": "q.png#0", "pad": "x" * 200}, separators=(",", ":"))[:150]
    (tmp_path / "s3.jsonl").write_text(torn)
    r = mineru("merge", "s1.jsonl", "s3.jsonl", "--out", "all.jsonl", cwd=tmp_path)
    assert r.returncode == 0 and "2 page(s) from 2 journal(s)" in r.stdout, r.stdout + r.stderr
    assert read_journal(tmp_path / "all.jsonl") == records
    assert (tmp_path / "s3.jsonl").read_text() == torn  # an input: never changed
    (tmp_path / "other.txt").write_text("hello, no newline")  # a fragment that is not ours
    r = mineru("merge", "s1.jsonl", "other.txt", "--out", "all.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "not a mineru journal" in r.stderr, r.stderr


def test_merge_onto_a_full_disk_exits_3_with_the_journal_whole(tmp_path):
    """A merge whose output cannot be written (a full disk; here a file-size limit, which fails
    the same way) ended with a traceback (exit 1). It is exit 3 and the message, as for parse."""
    records = [
        {"schema_version": 1, "id": f"p{i}.png#0", "status": "ok", "blocks": [], "pad": "x" * 1000} for i in range(8)
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4000, resource.RLIM_INFINITY))

    args = [sys.executable, "-m", "mineru_cli", "merge", "a.jsonl", "--out", "m.jsonl"]
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, preexec_fn=limit)
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert "--out m.jsonl: File too large" in r.stderr, r.stderr
    assert 1 <= len(read_journal(tmp_path / "m.jsonl")) < 8  # every line whole
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)  # room again
    assert r.returncode == 0 and read_journal(tmp_path / "m.jsonl") == records, r.stderr


def test_merge_warns_when_journals_name_one_page_from_two_roots(tmp_path):
    """Shards made with different roots (one run over `dump/`, one over `dump/a`) name one page
    `a/prose.png#0` and `prose.png#0`: the merge keeps both, and says so; copies of a file at
    unrelated paths are no such pair."""
    (tmp_path / "dump" / "a").mkdir(parents=True)
    (tmp_path / "dump" / "b").mkdir()
    page = (EXAMPLES / "prose.png").read_bytes()
    (tmp_path / "dump" / "a" / "prose.png").write_bytes(page)
    (tmp_path / "dump" / "b" / "copy.png").write_bytes(page)
    for out, root in (("wide.jsonl", "dump"), ("narrow.jsonl", "dump/a")):
        r = mineru("parse", root, "--out", out, "--no-cache", "--engine", "ocr", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = mineru("merge", "wide.jsonl", "narrow.jsonl", "--out", "all.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {rec["id"] for rec in read_journal(tmp_path / "all.jsonl")} == {
        "a/prose.png#0",
        "b/copy.png#0",
        "prose.png#0",
    }
    assert "warning: 1 page(s) are in all.jsonl twice" in r.stderr and "(a/prose.png#0 and prose.png#0)" in r.stderr
    alone = mineru("merge", "wide.jsonl", "--out", "wide-again.jsonl", cwd=tmp_path)
    assert alone.returncode == 0 and "warning" not in alone.stderr, alone.stderr


def test_merge_says_nothing_of_copies_one_journal_holds_at_nested_paths(tmp_path):
    """A folder holding a file and a copy of it in a subfolder (`prose.png`, `archive/prose.png`)
    is one run under one root: merging its journal (alone, or again into its output) warned of
    two roots and told the user to give every shard the same --root."""
    (tmp_path / "dump" / "archive").mkdir(parents=True)
    page = (EXAMPLES / "prose.png").read_bytes()
    (tmp_path / "dump" / "prose.png").write_bytes(page)
    (tmp_path / "dump" / "archive" / "prose.png").write_bytes(page)
    r = mineru("parse", "dump", "--out", "one.jsonl", "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for _ in range(2):
        r = mineru("merge", "one.jsonl", "--out", "all.jsonl", cwd=tmp_path)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert {rec["id"] for rec in read_journal(tmp_path / "all.jsonl")} == {"prose.png#0", "archive/prose.png#0"}
