"""The Python API: mineru_cli.parse() yields typed records, with the CLI's journal semantics."""

from __future__ import annotations

import re
import shutil

import pytest
from helpers import EXAMPLES, read_journal

import mineru_cli
from mineru_cli.core import PageRecord, SetupError, Status

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


@pytest.fixture()
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    shutil.copy(EXAMPLES / "prose.png", d / "prose.png")
    shutil.copy(EXAMPLES / "report.pdf", d / "report.pdf")
    (d / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage")
    return d


def test_parse_without_out_yields_records_and_writes_nothing(docs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = list(mineru_cli.parse(docs, engine="ocr", cache=False))
    assert all(isinstance(r, PageRecord) for r in got)
    by_id = {r.id: r for r in got}
    assert sorted(by_id) == ["broken.pdf#0", "prose.png#0", "report.pdf#0", "report.pdf#1"]
    assert by_id["broken.pdf#0"].status is Status.FAILED and by_id["broken.pdf#0"].error.kind == "corrupt"
    prose = by_id["prose.png#0"]
    assert prose.ok and prose.blocks and prose.blocks[0].type == "title" and "#" in prose.markdown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_parse_with_out_journals_each_record_and_resumes(docs, tmp_path, record_validator):
    out = tmp_path / "r.jsonl"
    first = list(mineru_cli.parse([docs / "prose.png", docs / "broken.pdf"], out=out, engine="ocr", cache=False))
    lines = read_journal(out, record_validator)
    assert sorted(r.as_dict()["id"] for r in first) == sorted(line["id"] for line in lines)
    assert {line["id"]: line for line in lines} == {r.id: r.as_dict() for r in first}
    again = list(mineru_cli.parse([docs / "prose.png", docs / "broken.pdf"], out=out, engine="ocr", cache=False))
    assert [r.as_dict() for r in sorted(again, key=lambda r: r.id)] == sorted(lines, key=lambda x: x["id"])
    assert read_journal(out) == lines  # resumed: nothing redone, nothing added


def test_breaking_out_keeps_what_was_journaled(docs, tmp_path):
    out = tmp_path / "r.jsonl"
    records = mineru_cli.parse(docs, out=out, engine="ocr", cache=False, workers=1)
    first = next(records)
    records.close()  # what a `break` out of the loop does
    lines = read_journal(out)
    assert [line["id"] for line in lines] == [first.id]
    rest = list(mineru_cli.parse(docs, out=out, engine="ocr", cache=False))
    assert len(rest) == 4 and len(read_journal(out)) == 4  # the rest parsed, none twice


def test_bad_options_raise_setup_errors_before_any_work(docs, tmp_path):
    with pytest.raises(SetupError, match="--mode 'fast': choose from vlm, hybrid, standard, ocr"):
        next(mineru_cli.parse(docs, out=tmp_path / "r.jsonl", mode="fast"))
    with pytest.raises(SetupError, match="unknown option"):
        next(mineru_cli.parse(docs, colour="red"))
    with pytest.raises(SetupError, match="--format needs a journal"):
        next(mineru_cli.parse(docs, formats=["markdown"]))
    assert not (tmp_path / "r.jsonl").exists()


def test_options_and_paths_are_checked_when_parse_is_called(docs, tmp_path):
    with pytest.raises(SetupError, match="unknown option"):
        mineru_cli.parse(docs, colour="red")  # no next(): the call itself refuses
    with pytest.raises(SetupError, match="input not found"):
        mineru_cli.parse(tmp_path / "nowhere")


def test_every_set_up_problem_raises_when_parse_is_called(docs, tmp_path, monkeypatch):
    """README: a bad option raises SetupError when parse() is called. A mode the engine cannot
    run, an unknown lang, bad --pages and an `out` that is not a journal raised only at the first
    next(); now the call refuses them, and the journal of a good call is not touched until then."""
    monkeypatch.chdir(tmp_path)  # no ./models
    for name, value in (("HF_HUB_CACHE", "hub"), ("MODELSCOPE_CACHE", "ms"), ("MINERU_TOOLS_CONFIG_JSON", "m.json")):
        monkeypatch.setenv(name, str(tmp_path / value))
    monkeypatch.setenv("MINERU_MODEL_PATH", "")
    other = tmp_path / "notes.txt"
    other.write_text("someone else's file\n")
    for options, message in (
        ({"mode": "hybrid"}, "--mode hybrid needs the vlm engine: no MinerU2.5 model found"),
        ({"engine": "ocr", "lang": "fr"}, "unsupported lang 'fr'"),
        ({"engine": "ocr", "pages": "0-x"}, "--pages '0-x'"),
        ({"engine": "ocr", "out": other}, "notes.txt"),
    ):
        with pytest.raises(SetupError, match=re.escape(message)):
            mineru_cli.parse(docs, cache=False, **options)  # no next(): the call itself refuses
    assert other.read_text() == "someone else's file\n"
    out = tmp_path / "r.jsonl"
    records = mineru_cli.parse(docs / "prose.png", out=out, engine="ocr", cache=False)
    assert not out.exists() or out.read_bytes() == b""  # nothing parsed before a record is asked for
    assert [r.id for r in records] == ["prose.png#0"] and len(read_journal(out)) == 1


def test_records_can_be_taken_from_a_thread_that_then_ends(docs, tmp_path):
    """Workers started from a thread outlive it (they watch their process, not the thread)."""
    import threading

    paths = [docs / "prose.png", docs / "report.pdf"]  # no planning failure: the first record starts the pool
    records = mineru_cli.parse(paths, out=tmp_path / "r.jsonl", engine="ocr", cache=False, workers=2)
    first = []
    t = threading.Thread(target=lambda: first.append(next(records)))
    t.start()
    t.join()
    rest = list(records)
    got = {r.id: r.status for r in first + rest}
    assert got == dict.fromkeys(["prose.png#0", "report.pdf#0", "report.pdf#1"], Status.OK), got
    assert len(read_journal(tmp_path / "r.jsonl")) == 3


def test_a_script_without_a_main_guard_gets_a_clear_error(docs, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import mineru_cli\n"
        f"for r in mineru_cli.parse([{str(docs / 'prose.png')!r}], engine='ocr', cache=False):\n"
        "    print(r.id)\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode != 0
    assert 'if __name__ == "__main__":' in r.stderr and "worker processes are spawned" in r.stderr, r.stderr[-3000:]
