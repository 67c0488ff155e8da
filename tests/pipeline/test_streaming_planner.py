"""The streaming planner (issue 17 item 2): discovery, hashing and page counting run beside the
parsing, so a huge dump's first record comes at once and the driver's memory stays flat; resume
decides page by page as files are planned; the summary is exact at the end.

The dumps are mostly empty files (each is its clear `failed` record, settled by the driver
without a worker, so 20,000 of them finish in seconds) with a few real text pages between them,
parsed by the embedded engine.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from helpers import mineru, read_journal, start_parse, wait_for_event
from PIL import Image, ImageDraw, ImageFont

from mineru_cli.config import LoadOptions
from mineru_cli.inputs import discover, iter_sources
from mineru_cli.journal import read_records
from mineru_cli.planner import Planner


def text_page(path: Path, text: str) -> None:
    img = Image.new("RGB", (420, 110), "white")
    ImageDraw.Draw(img).text((14, 34), text, fill="black", font=ImageFont.load_default(size=32))
    img.save(path)


def make_dump(root: Path, files: int, real_every: int) -> dict[str, str]:
    """`files` PNG names in folders of 1,000; every `real_every`-th is a real text page, the rest
    empty. Returns the page ids of the real pages -> their text."""
    real = {}
    for i in range(files):
        folder = root / f"d{i // 1000:02d}"
        if i % 1000 == 0:
            folder.mkdir(parents=True)
        path = folder / f"f{i:05d}.png"
        if i % real_every == 0:
            real[f"{folder.name}/{path.name}#0"] = f"Page {i}"
            text_page(path, f"Page {i}")
        else:
            path.touch()
    return real


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def all_ids(files: int) -> list[str]:
    return [f"d{i // 1000:02d}/f{i:05d}.png#0" for i in range(files)]


# -- the planner on its own -----------------------------------------------------------------
def assert_resumed_exactly_once(r, out: Path, before: set[str], files: int, real, record_validator) -> list[dict]:
    """The resumed run (--log-json) after a kill -9: what was journaled is never redone, the rest is
    parsed, and the journal holds every page exactly once, in input order."""
    assert r.returncode == 1, r.stderr[-2000:]
    pages = [json.loads(x) for x in r.stderr.splitlines() if x.startswith('{"event": "page"')]
    assert {e["id"] for e in pages if e["resumed"]} == before  # never redone
    assert sorted(e["id"] for e in pages if not e["resumed"]) == sorted(set(all_ids(files)) - before)
    recs = read_journal(out, record_validator)
    assert [x["id"] for x in recs] == all_ids(files)  # exactly once each, in input order
    assert {x["id"] for x in recs if x["status"] == "ok"} == set(real)
    return recs


def test_discovery_is_a_stream_and_discover_is_its_list(tmp_path):
    make_dump(tmp_path, 30, real_every=1000)
    stream = iter_sources([tmp_path])
    first = next(stream)  # a generator: one file at a time, not the whole walk first
    assert first.rel == "d00/f00000.png"
    assert [first, *stream] == discover([tmp_path])


def test_planner_keeps_discovery_order_bounds_its_window_and_counts_the_total(tmp_path):
    make_dump(tmp_path, 400, real_every=50)  # 8 real pages, 392 empty files
    with Planner([tmp_path], (), (), None, LoadOptions(), ahead=16, threads=4) as planner:
        deadline = time.monotonic() + 30
        while not planner.counted and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the threads plan what the window allows, then wait for the driver
        assert planner.counted and planner.found == 400  # the census: every file found, none held
        assert planner._planned_files <= 16 + 4 + 1  # the window, the threads' hands, the one waiting
        assert planner.total() == 400  # one page per file found (images), planned or not
        got = list(planner)
    assert [p.src.rel for p in got] == [i[:-2] for i in all_ids(400)]  # discovery order, every file once
    assert sum(p.error is None for p in got) == 8
    assert all(p.error.kind == "empty" for p in got if p.error is not None)
    assert planner.done and planner.files == 400


def test_planner_stops_when_closed(tmp_path):
    make_dump(tmp_path, 2000, real_every=10**6)
    planner = Planner([tmp_path], (), (), None, LoadOptions(), ahead=8)
    with planner:
        assert planner.take(timeout=5) is not None
    assert not planner._thread.is_alive() and not planner._census.is_alive()
    assert planner._planned_files < 2000


# -- the real CLI ------------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.slow
def test_a_20000_file_dump_streams_with_flat_driver_memory_and_an_exact_summary(tmp_path, record_validator):
    files = 20_000
    real = make_dump(tmp_path / "dump", files, real_every=7_000)  # pages 0, 7000, 14000
    out = tmp_path / "o.jsonl"
    t0 = time.monotonic()
    proc = start_parse(tmp_path / "dump", out, "--cpus", "2")
    first_rss = peak = 0.0  # the driver's RSS at its first event (imports done), and its peak
    lines: list[str] = []
    first_record = first_ok = planned_at = None
    assert proc.stderr is not None
    for line in proc.stderr:  # every event as it comes, the driver's RSS sampled with each
        lines.append(line)
        try:
            peak = max(peak, rss_mb(proc.pid))
            first_rss = first_rss or peak
        except (FileNotFoundError, ProcessLookupError, AssertionError):
            pass  # exited
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event["event"] == "page":
            if first_record is None:
                first_record = (time.monotonic() - t0, planned_at)
            if event["status"] == "ok" and first_ok is None:
                first_ok = time.monotonic() - t0
        elif event["event"] == "planned":
            planned_at = len(lines)
    proc.wait(timeout=300)
    evs = [json.loads(x) for x in lines if x.startswith("{")]
    summary = [e for e in evs if e["event"] == "summary"][0]
    print(
        f"20,000 files: first record {first_record[0]:.2f} s, first ok page {first_ok:.1f} s, "
        f"driver RSS {first_rss:.0f} -> {peak:.0f} MB, wall {time.monotonic() - t0:.1f} s"
    )
    assert proc.returncode == 1, "".join(lines[-5:])  # the empty files failed, clearly
    assert first_record[0] < 30 and first_record[1] is None  # the first record came before planning ended
    assert peak - first_rss < 200, (first_rss, peak)
    # exact at the end: every file one record, in input order; the real pages parsed
    assert (summary["pages"], summary["ok"], summary["failed"], summary["unfinished"]) == (files, 3, files - 3, 0)
    assert [e for e in evs if e["event"] == "planned"][0]["pages"] == files
    recs = read_journal(out, record_validator)
    assert [r["id"] for r in recs] == all_ids(files)
    ok = {r["id"]: r["markdown"] for r in recs if r["status"] == "ok"}
    assert set(ok) == set(real) and all(real[k] in md for k, md in ok.items()), ok
    assert {r["error"]["kind"] for r in recs if r["status"] != "ok"} == {"empty"}


@pytest.mark.e2e
def test_kill_9_mid_stream_then_resume_settles_every_page_exactly_once(tmp_path, record_validator):
    files = 100
    real = make_dump(tmp_path / "dump", files, real_every=10)  # 10 real pages between empty files
    out = tmp_path / "o.jsonl"
    proc = start_parse(tmp_path / "dump", out, "--cpus", "2")
    lines: list[str] = []
    ok: list[dict] = []
    wait_for_event(
        proc, lines, lambda e: e["event"] == "page" and e["status"] == "ok" and not ok.append(e) and len(ok) >= 2
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not any('"event": "planned"' in x for x in lines)  # killed mid-stream: files were still to plan
    before = {r["id"] for r in read_records(out)}  # what the killed run journaled (a torn tail is cut)
    assert 2 <= len([i for i in before if i in real]) < len(real) and len(before) < files

    r = mineru(
        "parse", str(tmp_path / "dump"), "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path
    )
    recs = assert_resumed_exactly_once(r, out, before, files, real, record_validator)

    # nothing left to do: every page resumed as the plan reaches it, and no worker is started
    again = mineru(
        "parse", str(tmp_path / "dump"), "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json", cwd=tmp_path
    )
    summary = [json.loads(x) for x in again.stderr.splitlines() if '"event": "summary"' in x][0]
    assert (summary["pages"], summary["resumed"], summary["ok"]) == (files, files, 0)
    assert "pipeline:" not in again.stderr
    assert read_journal(out) == recs
