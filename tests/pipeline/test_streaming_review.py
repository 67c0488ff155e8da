"""Review of the streaming planner (311c043): files that change between discovery and
planning, overlapping inputs, --shard, a stop while discovery still runs. Real files, the real
planner and the real CLI; the dumps are mostly empty files (each a clear `failed` record,
settled by the driver without a worker), so no engine page is parsed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from helpers import mineru, read_journal

from mineru_cli.config import LoadOptions
from mineru_cli.planner import Planner


def blank_pdf(path: Path, pages: int) -> None:
    doc = pdfium.PdfDocument.new()
    for _ in range(pages):
        doc.new_page(200, 100)
    doc.save(str(path))
    doc.close()


def empty_files(root: Path, files: int, per_folder: int = 1000) -> list[str]:
    """`files` empty PNGs in folders of `per_folder`; their page ids in input order."""
    ids = []
    for i in range(files):
        folder = root / f"d{i // per_folder:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.png").touch()
        ids.append(f"{folder.name}/f{i:05d}.png#0")
    return ids


def events(stderr: str) -> list[dict]:
    return [json.loads(x) for x in stderr.splitlines() if x.startswith("{")]


def test_a_file_replaced_by_a_fifo_after_discovery_is_its_error_not_a_hung_run(tmp_path):
    # Discovery saw a regular file; before the planner hashed it, it became a FIFO (a dump being
    # rewritten under the run). Reading a FIFO blocks until a writer comes: the hashing thread
    # hung for ever, and as results come in discovery order, so did every file after it and
    # the run (a cron job that never ends and keeps the journal's lock).
    src = tmp_path / "in"
    src.mkdir()
    blank_pdf(src / "a.pdf", 2)
    blank_pdf(src / "b.pdf", 1)
    fifo = src / "a.pdf"
    swapped = threading.Lock()
    state = {"done": False}

    def keep(found) -> bool:  # runs just after the walk saw the file (the census's walk too: not there)
        with swapped:
            if found.rel == "a.pdf" and not state["done"] and threading.current_thread().name == "mineru-discover":
                state["done"] = True
                os.remove(fifo)
                os.mkfifo(fifo)
        return True

    got = []
    try:
        with Planner([src], (), (), None, LoadOptions(), keep=keep) as planner:
            deadline = time.monotonic() + 20
            while not planner.done and time.monotonic() < deadline:
                planned = planner.take(timeout=0.2)
                if planned is not None:
                    got.append(planned)
    finally:  # a hung reader (the bug) gets its EOF, so the test process can end
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert [p.src.rel for p in got] == ["a.pdf", "b.pdf"], got
    a, b = got
    assert a.error is not None and a.error.kind == "not_a_file", a
    assert b.error is None and b.page_count == 1


@pytest.mark.e2e
def test_overlapping_inputs_and_a_single_file_give_one_record_per_page(tmp_path):
    dump = tmp_path / "d"
    ids = empty_files(dump, 40, per_folder=10)  # d00..d03
    blank_pdf(dump / "d01" / "two.pdf", 2)
    ids += ["d01/two.pdf#0", "d01/two.pdf#1"]
    out = tmp_path / "o.jsonl"
    # the folder, a sub-folder of it and a file in it again: each page once
    r = mineru(
        "parse", str(dump), str(dump / "d01"), str(dump / "d02" / "f00025.png"), str(dump),
        "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr[-2000:]  # the empty files failed
    recs = read_journal(out)
    assert sorted(x["id"] for x in recs) == sorted(ids)
    assert len({x["id"] for x in recs}) == len(recs)
    summary = [e for e in events(r.stderr) if e["event"] == "summary"][0]
    planned = [e for e in events(r.stderr) if e["event"] == "planned"][0]
    assert (summary["pages"], summary["ok"], summary["failed"]) == (len(ids), 2, 40)
    assert (planned["pages"], planned["files"]) == (len(ids), 41)

    one = tmp_path / "one.jsonl"  # a single file named alone
    r = mineru("parse", str(dump / "d01" / "two.pdf"), "--out", str(one), "--no-cache", "--engine", "ocr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [x["id"] for x in read_journal(one)] == ["two.pdf#0", "two.pdf#1"]


@pytest.mark.e2e
def test_shards_of_a_streamed_dump_cover_it_exactly_once(tmp_path):
    ids = empty_files(tmp_path / "dump", 300, per_folder=100)
    seen: list[str] = []
    for k in (1, 2, 3):
        out = tmp_path / f"s{k}.jsonl"
        r = mineru(
            "parse", str(tmp_path / "dump"), "--out", str(out), "--no-cache", "--engine", "ocr",
            "--shard", f"{k}/3", "--log-json", cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == 1, r.stderr[-2000:]
        got = [x["id"] for x in read_journal(out)]
        summary = [e for e in events(r.stderr) if e["event"] == "summary"][0]
        assert summary["pages"] == summary["failed"] == len(got) > 0
        seen += got
    assert sorted(seen) == ids  # every file in exactly one shard


@pytest.mark.e2e
def test_sigterm_while_discovery_runs_stops_compacts_and_resume_finishes_exactly_once(tmp_path):
    files = 8000
    ids = empty_files(tmp_path / "dump", files)
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(tmp_path / "dump"), "--out", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--no-cache", "--engine", "ocr", "--log-json"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:  # the first records: discovery and planning are under way
        lines.append(line)
        if sum('"event": "page"' in x for x in lines) >= 50:
            break
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    lines += proc.stderr.readlines()
    proc.wait(timeout=60)
    assert proc.returncode == 130, "".join(lines[-5:])
    assert time.monotonic() - t0 < 15  # the discovery, census and hashing threads stopped
    evs = [json.loads(x) for x in lines if x.startswith("{")]
    summary = [e for e in evs if e["event"] == "summary"][0]
    assert not any(e["event"] == "planned" for e in evs)  # stopped before planning ended
    recs = read_journal(out)
    got = [x["id"] for x in recs]
    assert got == ids[: len(got)] and 50 <= len(got) < files  # compacted: input order, each once
    assert summary["interrupted"] and summary["failed"] == len(got)
    assert summary["failed"] + summary["unfinished"] == summary["pages"] >= len(got)

    r = mineru(
        "parse", str(tmp_path / "dump"), "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path
    )
    assert r.returncode == 1, r.stderr[-2000:]
    summary = [e for e in events(r.stderr) if e["event"] == "summary"][0]
    assert (summary["pages"], summary["resumed"], summary["failed"]) == (files, len(got), files)
    assert [x["id"] for x in read_journal(out)] == ids


@pytest.mark.e2e
def test_sigterm_while_a_huge_file_is_hashed_exits_at_once(tmp_path):
    # The planning threads are the executor's (joined when the interpreter exits): a stop left
    # a thread hashing a big file to the end, so the run said its summary and then lingered for
    # as long as the hash took (a 3 GB file: 11 s under load; a file on a slow mount: minutes).
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "a.png").touch()
    with open(dump / "big.pdf", "wb") as fh:  # sparse: no disk used, reads as zeros at CPU speed
        fh.truncate(40 << 30)
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(dump), "--out", str(out), "--no-cache", "--engine", "ocr"]
    proc = subprocess.Popen(
        [*cmd, "--log-json"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if '"event": "page"' in line:  # a.png's record: big.pdf is being hashed now
            break
    proc.send_signal(signal.SIGTERM)
    for line in proc.stderr:
        lines.append(line)
        if '"event": "summary"' in line:
            break
    said = time.monotonic()
    try:
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, "".join(lines[-5:])
    assert time.monotonic() - said < 5, "exited long after its summary"
    assert [x["id"] for x in read_journal(out)] == ["a.png#0"]
