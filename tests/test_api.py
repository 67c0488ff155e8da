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


def test_a_mode_without_its_model_says_where_to_get_it_and_a_bad_profile_is_refused(docs, tmp_path, monkeypatch):
    """docs/usage.md: a missing model says how to get it. --engine vlm did, but --mode standard
    or hybrid with no model said only "no MinerU2.5 model found". An unknown --model-profile
    passed silently whenever the run fell back to (or named) the ocr engine, where an unknown
    --runtime is refused."""
    monkeypatch.chdir(tmp_path)  # no ./models
    for name, value in (("HF_HUB_CACHE", "hub"), ("MODELSCOPE_CACHE", "ms"), ("MINERU_TOOLS_CONFIG_JSON", "m.json")):
        monkeypatch.setenv(name, str(tmp_path / value))
    monkeypatch.setenv("MINERU_MODEL_PATH", "")
    page = docs / "prose.png"
    for mode in ("standard", "hybrid", "vlm"):
        with pytest.raises(SetupError, match=re.escape("hf download opendatalab/MinerU2.5-2509-1.2B")):
            mineru_cli.parse(page, mode=mode, cache=False)
    for options in ({}, {"engine": "ocr"}):
        with pytest.raises(SetupError, match=re.escape("--model-profile 'prp': choose from 2509, pro")):
            mineru_cli.parse(page, model_profile="prp", cache=False, **options)
    assert next(iter(mineru_cli.parse(page, engine="ocr", model_profile="Pro", cache=False))).ok


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


def test_option_values_of_the_wrong_type_raise_setup_errors(docs):
    """README: a bad option raises SetupError. Values of the wrong type raised TypeError or
    AttributeError (pages=3, include=None, root=5, cache_ttl=None), and a switch given as a
    string was taken by its truth (cache="no" kept the cache on)."""
    for options, message in (
        ({"include": None}, "--include takes one value or a list of them, not None"),
        ({"exclude": ["*.pdf", 5]}, "--exclude takes glob patterns (strings), not 5"),
        ({"formats": None}, "--format takes one value or a list of them, not None"),
        ({"root": 5}, "--root must be a path, not 5"),
        ({"cache_dir": 5}, "--cache-dir must be a path, not 5"),
        ({"out": 5}, "--out must be a path, not 5"),
        ({"cache_ttl": None}, "--cache-ttl: not a duration: None"),
        ({"cache_ttl": 0}, "--cache-ttl must be at least 1 second, not 0"),
        ({"load": None}, "load must be a LoadOptions, not None"),
        ({"pages": [1, 2.5]}, "--pages takes ranges such as '1-3,7' (or page numbers), not [1, 2.5]"),
        ({"cache": "no"}, "--cache must be True or False, not 'no'"),
        ({"force": 1}, "--force must be True or False, not 1"),
        ({"inputs": [docs]}, "unknown option(s): inputs"),
    ):
        with pytest.raises(SetupError, match=re.escape(message)):
            mineru_cli.parse(docs, engine="ocr", **options)
    for paths, message in ((5, "paths takes one value or a list of them, not 5"), ([docs, 5], "not 5")):
        with pytest.raises(SetupError, match=re.escape(message)):
            mineru_cli.parse(paths, engine="ocr")


def test_pages_as_numbers(docs):
    """pages takes a page number, or a list of numbers and ranges, as well as --pages' text."""
    got = [r.id for r in mineru_cli.parse(docs / "report.pdf", engine="ocr", cache=False, pages=2)]
    assert got == ["report.pdf#1"]
    got = [r.id for r in mineru_cli.parse(docs / "report.pdf", engine="ocr", cache=False, pages=range(1, 3))]
    assert sorted(got) == ["report.pdf#0", "report.pdf#1"]


def test_parse_in_another_thread_while_workers_start_is_no_worker(docs):
    """A service calling parse() from two threads: while one run spawned its workers (its
    environment holds the worker marker then), a parse() in another thread took itself for a
    worker and raised the "called while a worker process imported your script" SetupError."""
    import threading

    stop = threading.Event()
    messages: set[str] = set()

    def other_requests() -> None:
        while not stop.is_set():
            with pytest.raises(SetupError) as exc:
                mineru_cli.parse(docs / "missing.pdf")
            messages.add(str(exc.value))

    t = threading.Thread(target=other_requests)
    t.start()
    try:
        paths = [docs / "prose.png", docs / "report.pdf"]
        records = list(mineru_cli.parse(paths, engine="ocr", cache=False, workers=2))
    finally:
        stop.set()
        t.join()
    assert len(records) == 3
    assert messages == {f"input not found: {docs / 'missing.pdf'}"}


def test_each_call_does_not_leave_an_exit_hook(docs):
    """A long-lived process calls parse() again and again: each call registered an atexit hook
    that stayed for the life of the process."""
    import atexit

    count = getattr(atexit, "_ncallbacks", None)  # CPython's count of registered hooks
    if count is None:
        pytest.skip("this interpreter does not count its exit hooks")
    mineru_cli.parse(docs, engine="ocr", cache=False).close()  # imports what registers hooks once
    before = count()
    for _ in range(20):
        mineru_cli.parse(docs, engine="ocr", cache=False).close()
    assert count() == before


def test_the_package_is_typed_for_its_users(tmp_path):
    """README: parse() yields typed PageRecords. The package had no py.typed marker (mypy
    skipped it: "missing library stubs or py.typed marker") and its lazily loaded names were
    Any to a type checker, so a user's mypy --strict saw no types at all."""
    import subprocess
    import sys
    import venv
    import zipfile
    from pathlib import Path

    pytest.importorskip("mypy")
    repo = Path(mineru_cli.__file__).parent.parent
    src = tmp_path / "src"
    src.mkdir()
    shutil.copytree(repo / "mineru_cli", src / "mineru_cli", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, src / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src)]
    subprocess.run([*build, "-w", str(tmp_path / "wheel")], check=True, capture_output=True, timeout=300)
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    zipfile.ZipFile(wheel).extractall(site)  # installed as pip installs it
    script = tmp_path / "user.py"

    def mypy(body: str) -> subprocess.CompletedProcess[str]:
        script.write_text(
            "import mineru_cli\nfrom mineru_cli import PageRecord\n\n\n"
            "def main() -> None:\n"
            "    for record in mineru_cli.parse(['docs/'], out='results.jsonl', engine='ocr'):\n"
            f"        {body}\n"
        )
        cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", str(python)]
        return subprocess.run([*cmd, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)

    ok = mypy("r: PageRecord = record\n        print(r.id, r.status.value, len(r.blocks), r.as_dict()['id'])")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = mypy("print(record.page_number)")
    assert '"PageRecord" has no attribute "page_number"' in bad.stdout, bad.stdout + bad.stderr
