"""The system running out of something under a real run: file descriptors for the main process
(no worker can be started) and for a worker (it cannot open the next page)."""

from __future__ import annotations

import json
import resource
import shutil

import psutil
import pytest
from helpers import mineru, read_journal, start_parse, wait_for_event
from PIL import Image, ImageDraw, ImageFont

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)

# Open files the main process may hold: enough to import, lock and open the journal and plan
# the inputs, too few for the pipes of a worker process. Measured with `ulimit -n` and one
# worker: 9 fails the planning, 10 to 16 refuse the worker; but a CI run at 16 started one of
# its two workers, so one worker and the middle of that range.
NOFILE_WITHOUT_WORKERS = 12


def _pages(folder, n: int) -> None:
    folder.mkdir()
    font = ImageFont.load_default(size=36)
    for i in range(n):
        img = Image.new("RGB", (640, 200), "white")
        ImageDraw.Draw(img).text((20, 70), f"Invoice number {1000 + i}", fill="black", font=font)
        img.save(folder / f"p{i}.png")


def test_workers_the_system_will_not_start_stop_the_run_with_exit_2_and_a_clear_error(tmp_path):
    _pages(tmp_path / "docs", 2)
    out = tmp_path / "out.jsonl"

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE_WITHOUT_WORKERS, NOFILE_WITHOUT_WORKERS))

    r = mineru(
        "parse",
        str(tmp_path / "docs"),
        *("--out", str(out), "--engine", "ocr", "--no-cache", "--workers", "1"),
        preexec_fn=few_files,
    )
    said = r.stdout + r.stderr
    assert r.returncode == 2, said
    assert "Traceback" not in said
    assert "cannot start a worker process: Too many open files" in said
    assert "ulimit -n" in said
    # nothing parsed, and the journal this run made is not left behind (a set-up error before
    # any record: Journal.discard); a re-run with the limit raised parses all
    assert not out.exists() and not (tmp_path / ".out.jsonl.lock").exists()


def test_a_worker_out_of_file_descriptors_fails_one_page_and_the_next_run_parses_it(tmp_path):
    """A worker that cannot open files any more (a leak, a lowered limit) would fail every page
    it gets, each recorded with its file's hash, so no plain re-run would parse them again. It
    fails the page at hand, without a hash, and is replaced: the other pages are parsed."""
    n = 6
    docs = tmp_path / "docs"
    _pages(docs, n)
    out = tmp_path / "out.jsonl"
    proc = start_parse(docs, out, "--workers", "1")
    lines: list[str] = []
    try:
        wait_for_event(proc, lines, lambda e: e["event"] == "page")  # the worker is up: its next page opens a file
        (worker,) = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        resource.prlimit(worker.pid, resource.RLIMIT_NOFILE, (3, 3))  # fewer than it holds: no new one
        _, rest = proc.communicate(timeout=300)
    finally:
        proc.kill()
    events = [json.loads(x) for x in lines + (rest or "").splitlines(keepends=True) if x.startswith("{")]
    assert proc.returncode == 1, events[-1]
    records = read_journal(out)
    assert len(records) == n
    failed = [r for r in records if r["status"] != "ok"]
    assert len(failed) == 1, failed
    assert "Too many open files" in failed[0]["error"]["message"]
    assert failed[0]["source_sha256"] is None  # not the file's failure: never resumed
    assert any(e["event"] == "warning" and "replaced" in e["message"] for e in events)

    again = mineru("parse", str(docs), "--out", str(out), "--engine", "ocr", "--no-cache", "--log-json")
    assert again.returncode == 0, again.stderr[-2000:]
    summary = [json.loads(x) for x in again.stderr.splitlines() if x.startswith('{"event": "summary"')][0]
    assert (summary["ok"], summary["resumed"]) == (1, n - 1)
    assert [r["status"] for r in read_journal(out)] == ["ok"] * n
    shutil.rmtree(docs)
