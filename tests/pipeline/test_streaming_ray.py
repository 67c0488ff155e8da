"""The streaming planner's tests under `--executor ray` (a real private local Ray instance, no
mocks): a 20,000-file dump writes its first record within seconds with the driver's memory
bounded, and kill -9 of the driver mid-stream takes its Ray instance with it and a resumed run
settles every page exactly once. The dumps: test_streaming_planner.make_dump (mostly empty
files, settled by the driver; a few real text pages parsed by the actors)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time

import psutil
import pytest
from helpers import mineru, read_journal, start_parse, wait_for_event
from test_streaming_planner import all_ids, assert_resumed_exactly_once, make_dump, rss_mb

from mineru_cli.journal import read_records

pytest.importorskip("ray")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a private Ray instance and the real engine


def test_a_20000_file_dump_streams_under_ray_with_bounded_driver_memory(tmp_path, record_validator):
    files = 20_000
    real = make_dump(tmp_path / "dump", files, real_every=7_000)
    out = tmp_path / "o.jsonl"
    t0 = time.monotonic()
    proc = start_parse(tmp_path / "dump", out, "--cpus", "2", "--executor", "ray")
    first_rss = peak = 0.0
    lines: list[str] = []
    first_record = None
    planned = False
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        try:
            peak = max(peak, rss_mb(proc.pid))
            first_rss = first_rss or peak
        except (FileNotFoundError, ProcessLookupError, AssertionError):
            pass
        if line.startswith('{"event": "page"') and first_record is None:
            first_record = (time.monotonic() - t0, planned)
        elif line.startswith('{"event": "planned"'):
            planned = True
    proc.wait(timeout=300)
    evs = [json.loads(x) for x in lines if x.startswith("{")]
    summary = [e for e in evs if e["event"] == "summary"][0]
    print(
        f"ray, 20,000 files: first record {first_record[0]:.2f} s, driver RSS {first_rss:.0f} -> {peak:.0f} MB, "
        f"wall {time.monotonic() - t0:.1f} s"
    )
    assert proc.returncode == 1, "".join(lines[-5:])
    assert first_record[0] < 30 and not first_record[1]  # before planning ended
    # Ray's driver side (its core worker, the GCS client) is in this figure: bounded, not growing per file
    assert peak - first_rss < 400, (first_rss, peak)
    assert (summary["pages"], summary["ok"], summary["failed"], summary["unfinished"]) == (files, 3, files - 3, 0)
    recs = read_journal(out, record_validator)
    assert [r["id"] for r in recs] == all_ids(files)
    ok = {r["id"]: r["markdown"] for r in recs if r["status"] == "ok"}
    assert set(ok) == set(real) and all(real[k] in md for k, md in ok.items()), ok


def test_kill_9_of_the_driver_under_ray_then_resume_settles_every_page_exactly_once(tmp_path, record_validator):
    files = 100
    real = make_dump(tmp_path / "dump", files, real_every=10)
    out = tmp_path / "o.jsonl"
    proc = start_parse(tmp_path / "dump", out, "--cpus", "2", "--executor", "ray")
    lines: list[str] = []
    ok: list[dict] = []
    wait_for_event(
        proc,
        lines,
        lambda e: e["event"] == "page" and e["status"] == "ok" and not ok.append(e) and len(ok) >= 2,
        limit=300,
    )
    ray_procs = psutil.Process(proc.pid).children(recursive=True)  # the private instance: raylet, GCS, actors
    names = {p.pid: p.name() for p in ray_procs}
    # the private instance's folder (/tmp/mray...): left behind by a killed driver, removed here
    temp = {m.group(0) for p in ray_procs for m in re.finditer(r"/tmp/mray[A-Za-z0-9_]+", " ".join(p.cmdline()))}
    assert any(n.startswith("ray::_PageActor") for n in names.values()), names
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    _, alive = psutil.wait_procs(ray_procs, timeout=60)  # they go with the driver
    for p in alive:  # our own leftovers, by pid: a test leaves none behind
        p.kill()
    # The raylet, the GCS and the actors die with the driver. Ray's per-node agents may linger
    # (they report the raylet's death to the GCS, which is gone too): known, docs/usage.md.
    left = sorted(names[p.pid] for p in alive)
    print(f"left 60 s after kill -9 of the driver (killed now): {left}")
    for folder in temp:
        shutil.rmtree(folder, ignore_errors=True)
    assert all(n.startswith(("ray::DashboardAgent", "ray::RuntimeEnv")) for n in left), left
    before = {r["id"] for r in read_records(out)}
    assert 2 <= len([i for i in before if i in real]) < len(real) and len(before) < files

    args = ["parse", str(tmp_path / "dump"), "--out", str(out), "--no-cache", "--engine", "ocr", "--log-json"]
    r = mineru(*args, "--cpus", "2", "--executor", "ray", cwd=tmp_path)
    assert_resumed_exactly_once(r, out, before, files, real, record_validator)
