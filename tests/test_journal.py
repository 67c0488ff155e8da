"""The journal: append, torn-tail repair, resume decisions, compaction, the lock."""

import json

import pytest

from mineru_cli.errors import SetupError
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


@pytest.mark.parametrize("tail", [b'{"id": "c#0", "sta', b'{"id": "c#0", "status": "ok"', b"garbage\n"])
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


def test_finished_needs_same_content_and_fingerprint(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("ok#0"))
        j.append(rec("bad#0", status="failed"))
        assert j.finished("ok#0", "a" * 64, "f1", retry_failed=False)
        assert not j.finished("ok#0", "b" * 64, "f1", retry_failed=False)   # file changed
        assert not j.finished("ok#0", "a" * 64, "f2", retry_failed=False)   # options changed
        assert not j.finished("new#0", "a" * 64, "f1", retry_failed=False)
        assert j.finished("bad#0", "a" * 64, "f1", retry_failed=False)      # failed kept...
        assert not j.finished("bad#0", "a" * 64, "f1", retry_failed=True)   # ...unless retried


def test_compact_keeps_one_record_per_page_in_input_order(tmp_path):
    out = tmp_path / "r.jsonl"
    with Journal(out) as j:
        j.append(rec("other#0"))                 # from another input set: kept
        j.append(rec("b#0", status="failed"))
        j.append(rec("a#0"))
        j.append(rec("b#0"))                     # retried: replaces the failed one
        j.compact(["a#0", "b#0"])
        j.append(rec("c#0"))                     # the journal stays usable after compaction
        assert j.get("b#0")["status"] == "ok" and j.get("c#0")["id"] == "c#0"
        assert [r["id"] for r in j.records(["c#0", "zz#0", "a#0"])] == ["c#0", "a#0"]
    recs = read_records(out)
    assert [r["id"] for r in recs] == ["a#0", "b#0", "other#0", "c#0"]
    assert [r["status"] for r in recs][:2] == ["ok", "ok"]


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
