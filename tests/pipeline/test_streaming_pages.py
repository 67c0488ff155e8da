"""The streaming planner's window in pages (issue 17): a 335-byte PDF can claim a million
pages (its page tree's /Count; PDFium believes it), so a window of files is bounded in pages
too, and a planned file holds its pages as a range, never a list (40 such files held 1.5 GB in
the driver before). A claimed page that is not there is that page's clear `corrupt` record, as
before; the summary after a stop says when its page count is only a floor.

The PDFs are written by hand here (a catalog, a page tree whose /Count lies, one real page)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import mineru, read_journal, start_parse
from test_streaming_planner import rss_mb

from mineru_cli.config import LoadOptions
from mineru_cli.inputs import parse_page_ranges
from mineru_cli.planner import Planner

MILLION = 1_000_000


def claiming_pdf(path: Path, claimed: int) -> None:
    """A valid one-page PDF whose page tree says it has `claimed` pages."""
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % claimed,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))


def claiming_dump(root: Path, files: int, claimed: int) -> Path:
    root.mkdir()
    for i in range(files):
        claiming_pdf(root / f"c{i:02d}.pdf", claimed)
    return root


def test_a_window_of_files_claiming_a_million_pages_each_holds_no_page_list(tmp_path):
    src = claiming_dump(tmp_path / "in", 40, MILLION)
    assert (src / "c00.pdf").stat().st_size < 400
    tracemalloc.start()
    try:  # no page bound here: all 40 files planned ahead at once, each 1M pages
        with Planner([src], (), (), None, LoadOptions(), ahead=64, ahead_pages=10**12) as planner:
            deadline = time.monotonic() + 60
            while planner.total() < 40 * MILLION and time.monotonic() < deadline:
                time.sleep(0.05)
            _, peak = tracemalloc.get_traced_memory()
            assert planner.total() == 40 * MILLION
            first = planner.take(timeout=5)
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, f"{peak / 2**20:.0f} MB traced while 40 files of 1M pages were planned"
    assert first is not None and first.page_count == MILLION and len(first.pages) == MILLION
    assert list(first.pages[:3]) == [0, 1, 2] and first.pages[-1] == MILLION - 1


def test_the_window_is_bounded_in_pages_as_well_as_files(tmp_path):
    src = claiming_dump(tmp_path / "in", 12, 1000)
    with Planner([src], (), (), None, LoadOptions(), ahead=64, threads=2, ahead_pages=1500) as planner:
        time.sleep(1.0)  # the threads plan what the window allows, then wait for the driver
        held = planner._planned_files
        # 1,500 pages: the second file fills it; and the file each thread was planning meanwhile
        assert 2 <= held <= 2 + 2, held
        got = list(planner)  # the driver takes them: the window moves on
    assert [p.src.rel for p in got] == [f"c{i:02d}.pdf" for i in range(12)] and planner.total() == 12_000


def test_a_page_selection_of_a_huge_claim_is_counted_not_listed():
    from mineru_cli.planner import PageSelection

    pages = PageSelection(MILLION, parse_page_ranges("1-3,999998-"))  # type: ignore[arg-type]
    assert len(pages) == 6 and list(pages) == [0, 1, 2, 999997, 999998, 999999]
    assert 999998 in pages and 5 not in pages and pages[3] == 999997


@pytest.mark.e2e
def test_every_claimed_page_gets_one_record_the_missing_ones_a_clear_error(tmp_path, record_validator):
    src = tmp_path / "in"
    src.mkdir()
    claiming_pdf(src / "claims.pdf", 1500)
    out = tmp_path / "o.jsonl"
    r = mineru("parse", str(src), "--out", str(out), "--no-cache", "--engine", "ocr", "--cpus", "1",
               "--pages", "1-3,1400-", "--log-json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 1, r.stderr[-2000:]  # the missing pages failed
    recs = read_journal(out, record_validator)
    want = [0, 1, 2, *range(1399, 1500)]
    assert [x["id"] for x in recs] == [f"claims.pdf#{i}" for i in want]  # once each, in page order
    assert recs[0]["status"] == "ok" and all(x["page_count"] == 1500 for x in recs)
    assert {(x["status"], x["error"]["kind"], x["error"]["stage"]) for x in recs[1:]} == {
        ("failed", "corrupt", "render")
    }
    summary = [json.loads(x) for x in r.stderr.splitlines() if '"event": "summary"' in x][0]
    assert (summary["pages"], summary["ok"], summary["failed"], summary["pages_at_least"]) == (104, 1, 103, False)


@pytest.mark.e2e
def test_40_files_claiming_a_million_pages_keep_the_driver_small_and_a_stop_says_at_least(tmp_path):
    src = claiming_dump(tmp_path / "in", 40, MILLION)
    out = tmp_path / "o.jsonl"
    proc = start_parse(src, out, "--cpus", "1")
    lines: list[str] = []
    first_rss = peak = 0.0
    pages: list[dict] = []
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:
            lines.append(line)
            peak = max(peak, rss_mb(proc.pid))
            first_rss = first_rss or peak
            if line.startswith('{"event": "page"'):
                pages.append(json.loads(line))
            if len(pages) >= 300 or time.monotonic() > deadline:
                break
        t_end = time.monotonic() + 2  # keep sampling while it runs on
        while time.monotonic() < t_end:
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    log = "".join(lines) + rest
    print(f"40 x 1M claimed pages: driver RSS {first_rss:.0f} -> {peak:.0f} MB over {len(pages)} page events")
    assert proc.returncode == 130, log[-2000:]
    assert len(pages) >= 300, log[-2000:]
    assert peak - first_rss < 250, (first_rss, peak)  # 1.5 GB before (the window's page lists)
    recs = read_journal(out)
    assert len({x["id"] for x in recs}) == len(recs) >= 300  # one record per page
    assert recs[0]["id"] == "c00.pdf#0" and recs[0]["status"] == "ok"
    assert {x["error"]["kind"] for x in recs[1:]} == {"corrupt"}
    summary = [json.loads(x) for x in rest.splitlines() if '"event": "summary"' in x][0]
    # the files past the window were found, not planned: their pages are not known, only a floor
    assert summary["interrupted"] and summary["pages_at_least"], summary
    assert len(recs) < summary["pages"] < 40 * MILLION
    assert summary["unfinished"] == summary["pages"] - len(recs)


@pytest.mark.e2e
def test_the_plain_summary_after_a_stop_says_the_count_is_a_floor_and_is_exact_otherwise(tmp_path):
    src = claiming_dump(tmp_path / "in", 8, 50_000)
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(src), "--out", str(out), "--no-cache", "--engine", "ocr"]
    proc = subprocess.Popen(
        [*cmd, "--cpus", "1"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MINERU_CACHE_DIR": str(tmp_path / ".cache")},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (not out.exists() or out.read_bytes().count(b"\n") < 20) and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    # 2 files of 50,000 pages fill the window (4 with the threads'): the others were found, not counted
    assert re.search(r"│ pages +│ at least \d+ ", err), err[-2000:]
    assert re.search(r"at least \d+ page\(s\) not parsed \(stopped before every file was counted\)", err), err

    # a run that planned everything before its stop: the count is exact, no "at least"
    one = tmp_path / "one"
    one.mkdir()
    claiming_pdf(one / "a.pdf", 3000)
    out2 = tmp_path / "o2.jsonl"
    proc = start_parse(one, out2, "--cpus", "1")
    lines: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith('{"event": "planned"'):
                break
        while not out2.exists() or out2.read_bytes().count(b"\n") < 5:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    summary = [json.loads(x) for x in rest.splitlines() if '"event": "summary"' in x][0]
    assert summary["interrupted"] and (summary["pages"], summary["pages_at_least"]) == (3000, False), summary
