"""`mineru parse --executor ray` on a real private local Ray instance (no mocks): the same
records as the process pool, a hung page gets `timeout`, a crashing page `crash`, and every
page exactly one record. Skipped when Ray is not installed (`pip install 'mineru-cli[ray]'`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from helpers import mineru, read_journal, start_parse, wait_for_event
from PIL import Image, ImageDraw, ImageFont

pytest.importorskip("ray")

pytestmark = pytest.mark.e2e  # starts Ray and the real engine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot"]


def answers(path: Path) -> dict[str, tuple]:
    return {r["id"]: (r["status"], r["blocks"], r["markdown"]) for r in read_journal(path)}


def summary(stderr: str) -> dict:
    return [e for e in (json.loads(x) for x in stderr.splitlines() if x.startswith("{")) if e["event"] == "summary"][0]


def text_pages(d: Path, words: list[str]) -> Path:
    """One single-page PNG per word: p0.png, p1.png, ..."""
    d.mkdir()
    for i, word in enumerate(words):
        img = Image.new("RGB", (480, 140), "white")
        draw = ImageDraw.Draw(img)
        draw.text((16, 46), f"{word} page number {i}", fill="black", font=ImageFont.load_default(size=32))
        img.save(d / f"p{i}.png")
    return d


def parse(src: Path, out: Path, *extra: str, env: dict | None = None):
    return mineru(
        "parse",
        str(src),
        "--out",
        str(out),
        "--no-cache",
        "--engine",
        "ocr",
        "--cpus",
        "2",
        "--log-json",
        *extra,
        cwd=out.parent,
        env=env,
    )


def start_ray(
    src: Path, out: Path, *extra: str, env: dict | None = None, new_session: bool = False
) -> subprocess.Popen:
    """`mineru parse ... --executor ray --log-json` started, not waited for (helpers.start_parse)."""
    return start_parse(src, out, "--cpus", "2", "--executor", "ray", *extra, env=env, new_session=new_session)


def test_examples_parse_to_the_same_records_as_the_local_executor(tmp_path, record_validator):
    local, ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    r = parse(EXAMPLES, local)
    assert r.returncode == 0, r.stderr
    r = parse(EXAMPLES, ray, "--executor", "ray")
    assert r.returncode == 0, r.stderr
    recs = read_journal(ray, record_validator)
    assert len({rec["id"] for rec in recs}) == len(recs)  # one record per page
    assert answers(ray) == answers(local)
    assert summary(r.stderr)["ok"] == len(recs)


def test_stderr_is_clean_under_quiet(tmp_path, record_validator):
    """--quiet under Ray: nothing on stderr (no Ray start-up lines, no worker logs, no bar), as
    with the local pool; the records are all there."""
    src = text_pages(tmp_path / "in", WORDS[:3])
    out = tmp_path / "out.jsonl"
    args = ("--no-cache", "--engine", "ocr", "--cpus", "2", "--executor", "ray", "--quiet")
    r = mineru("parse", str(src), "--out", str(out), *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert [rec["status"] for rec in read_journal(out, record_validator)] == ["ok"] * 3


def test_hung_page_times_out_and_crashing_page_is_a_crash(tmp_path, record_validator):
    src = text_pages(tmp_path / "in", WORDS)
    out = tmp_path / "faults.jsonl"
    # 15 s: an innocent page's engine stage took 4 s on this 2-core machine under a load of 5,
    # and each page timed out in turn with 5 s
    r = parse(
        src, out, "--executor", "ray", "--page-timeout", "15", env={"MINERU_TEST_FAULTS": "hang=p1.png*;kill=p2.png*"}
    )
    assert r.returncode == 1, r.stderr
    recs = read_journal(out, record_validator)
    by_id = {rec["id"]: rec for rec in recs}
    assert len(by_id) == len(recs) == len(WORDS)  # every page exactly once
    hung = by_id["p1.png#0"]
    assert hung["status"] == "timeout" and hung["error"]["kind"] == "timeout", hung
    assert hung["error"]["stage"] == "engine" and "--page-timeout" in hung["error"]["message"]
    killed = by_id["p2.png#0"]
    assert killed["status"] == "failed" and killed["error"]["kind"] == "crash", killed
    for i, word in enumerate(WORDS):
        if i not in (1, 2):
            rec = by_id[f"p{i}.png#0"]
            assert rec["status"] == "ok" and word in rec["markdown"], rec
    s = summary(r.stderr)
    assert s["ok"] == len(WORDS) - 2 and s["failed"] == 2 and s["restarts"] == 2


def test_ray_address_needs_the_ray_executor(tmp_path):
    r = mineru("parse", str(EXAMPLES), "--out", str(tmp_path / "o.jsonl"), "--ray-address", "auto", cwd=tmp_path)
    assert r.returncode == 2 and "--executor ray" in r.stderr


def test_a_batch_that_loses_its_actor_is_retried_page_by_page(tmp_path, record_validator):
    src = text_pages(tmp_path / "in", WORDS[:4])
    out = tmp_path / "batch.jsonl"
    r = parse(
        src, out, "--executor", "ray", "--workers", "1", "--page-batch", "4", env={"MINERU_TEST_FAULTS": "kill=p1.png*"}
    )
    assert r.returncode == 1, r.stderr
    recs = read_journal(out, record_validator)
    by_id = {rec["id"]: rec for rec in recs}
    assert len(by_id) == len(recs) == 4
    assert by_id["p1.png#0"]["error"]["kind"] == "crash"  # blamed only once retried alone
    assert all(by_id[f"p{i}.png#0"]["status"] == "ok" for i in (0, 2, 3))
    s = summary(r.stderr)
    assert s["retried"] >= 2 and s["ok"] == 3 and s["failed"] == 1


def test_ray_not_installed_is_a_clear_setup_error(tmp_path):
    stub = tmp_path / "stub" / "ray"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ImportError("No module named ray")\n')
    r = mineru(
        "parse", str(EXAMPLES / "prose.png"), "--out", str(tmp_path / "o.jsonl"), "--executor", "ray",
        cwd=tmp_path, env={"PYTHONPATH": str(stub.parent)},
    )  # fmt: skip
    assert r.returncode == 2 and "pip install 'mineru-cli[ray]'" in r.stderr, r.stderr


def test_an_address_with_no_cluster_is_a_clear_setup_error(tmp_path):
    r = mineru(
        "parse", str(EXAMPLES / "prose.png"), "--out", str(tmp_path / "o.jsonl"), "--executor", "ray",
        "--ray-address", "127.0.0.1:1", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "no Ray cluster answers at 127.0.0.1:1" in r.stderr, r.stderr


@contextmanager
def listener(answer: bytes) -> Iterator[int]:
    """A loopback port where something other than Ray listens: it reads what comes and answers
    `answer`, as a Redis or a web server would."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.recv(1024)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


@pytest.mark.parametrize("where", ["a Redis", "auto, a dead RAY_ADDRESS"])
def test_an_address_where_no_ray_head_answers_is_refused_at_once(tmp_path, where):
    """A --ray-address where something else listens (a Redis on Ray's default port 6379, a web
    server), or `auto` leading to an address that refuses connections (RAY_ADDRESS left set):
    ray.init retried it for about 12 minutes, Ray's log lines on stderr under
    --quiet. Now exit 2 at once, in one line."""
    with listener(b"-ERR unknown command 'PRI'\r\n") as port:
        address, env = f"127.0.0.1:{port}", {}
        if where != "a Redis":  # a port nothing listens on any more
            with socket.create_server(("127.0.0.1", 0)) as gone:
                port = gone.getsockname()[1]
            address, env = "auto", {"RAY_ADDRESS": f"127.0.0.1:{port}"}
        r = mineru(
            "parse", str(EXAMPLES / "prose.png"), "--out", str(tmp_path / "o.jsonl"), "--executor", "ray",
            "--ray-address", address, "--quiet", cwd=tmp_path, env=env, timeout=120,
        )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"error: could not start or reach Ray at --ray-address {address}: ")
    assert "no Ray cluster answers at " in r.stderr and f":{port}" in r.stderr and r.stderr.count("\n") == 1
    if where == "a Redis":
        assert 'does not speak gRPC as a Ray head does (it answered "-ERR unknown command' in r.stderr


def test_sigterm_stops_gracefully_then_resume_does_every_page_once(tmp_path, record_validator):
    words = [f"Word{i}" for i in range(10)]
    src = text_pages(tmp_path / "in", words)
    out = tmp_path / "o.jsonl"
    proc = start_ray(src, out)
    lines: list[str] = []
    wait_for_event(proc, lines, lambda e: e["event"] == "page")  # the first record, then SIGTERM (ours, not Ray's)
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    s = summary("".join(lines) + rest)
    assert s["interrupted"] and s["ok"] + s["unfinished"] == len(words)
    first = {r["id"] for r in read_journal(out, record_validator)}
    assert 1 <= len(first) < len(words)
    r = parse(src, out, "--executor", "ray")
    assert r.returncode == 0, r.stderr
    recs = read_journal(out, record_validator)
    assert sorted(x["id"] for x in recs) == sorted(f"p{i}.png#0" for i in range(len(words)))  # exactly once
    assert all(x["status"] == "ok" for x in recs)


def test_sigterm_to_the_process_group_stops_gracefully_and_a_rerun_does_each_once(tmp_path, record_validator):
    """SIGTERM to the whole process group (`timeout`, `kill -- -PGID`, a service manager) reached
    the private Ray instance's GCS and raylet too: the actors died with the pages in flight, and
    the driver waited out its grace period or hung 60 s until Ray ended it with exit 1. Ray's
    processes hold SIGTERM off as they hold SIGINT: the pages in flight finish, the run stops as
    without Ray (exit 130), and a re-run parses each page once."""
    words = [f"Word{i}" for i in range(8)]
    src = text_pages(tmp_path / "in", words)
    out = tmp_path / "o.jsonl"
    proc = start_ray(src, out, env={"MINERU_TEST_FAULTS": "slow=*"}, new_session=True)
    lines: list[str] = []
    # every page sleeps 1 s at its engine stage: both actors hold pages when the signal comes
    wait_for_event(proc, lines, lambda e: e["event"] == "heartbeat" and e["busy"] == 2 and e["done"] >= 1)
    before = sum('"event": "page"' in x for x in lines)
    os.killpg(proc.pid, signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines[-5:]) + rest
    s = summary("".join(lines) + rest)
    assert s["interrupted"] and s["ok"] + s["unfinished"] == len(words)
    assert s["ok"] >= before + 2, s  # the pages in flight finished: their actors were not killed
    _resumes_each_page_once(src, out, len(words), record_validator)


def test_sigterm_while_ray_starts_stops_as_at_any_other_time(tmp_path, record_validator):
    """ray.init installs Ray's own SIGTERM handler (sys.exit(SIGTERM)) as its first step: a
    SIGTERM while the private instance started ended the run with exit 15, a code the exit-code
    table does not have, and left the instance's folder in /tmp. Now it stops as at any other
    time: exit 130, every page counted as not parsed, Ray's folder gone, and a re-run parses them."""
    import glob

    src = text_pages(tmp_path / "in", WORDS[:2])
    out = tmp_path / "o.jsonl"
    proc = start_ray(src, out)
    lines: list[str] = []
    # Ray's first line of its own (its token note) comes from inside ray.init, before the instance is up
    wait_for_event(proc, lines, lambda e: e["event"] == "info" and e["message"].startswith("ray: "))
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(lines) + rest
    s = summary("".join(lines) + rest)
    assert s["interrupted"] and s["ok"] == 0 and s["unfinished"] == 2, s
    assert glob.glob(f"/tmp/mray*/session_*_{proc.pid}") == []  # the private instance's folder is removed
    assert not out.exists() or read_journal(out, record_validator) == []
    r = parse(src, out, "--executor", "ray")
    assert r.returncode == 0, r.stderr
    assert sorted(x["id"] for x in read_journal(out, record_validator)) == ["p0.png#0", "p1.png#0"]


def _resumes_each_page_once(src, out, pages: int, record_validator) -> None:
    """The journal of a stopped run holds only ok records; a re-run parses the rest, and every
    page p0..p{pages-1} ends with exactly one ok record."""
    first = read_journal(out, record_validator)
    assert first and all(r["status"] == "ok" for r in first), first
    r = parse(src, out, "--executor", "ray")
    assert r.returncode == 0, r.stderr
    recs = read_journal(out, record_validator)
    assert sorted(x["id"] for x in recs) == sorted(f"p{i}.png#0" for i in range(pages))  # exactly once
    assert all(x["status"] == "ok" for x in recs)


def test_a_private_instance_that_loses_its_node_stops_at_once_and_a_rerun_resumes(tmp_path, record_validator):
    """The private instance's raylet killed mid-run (the OOM killer, `ray stop`): its one node is
    gone for good. The run waited for actors that could never be placed (10 min) before it gave
    up; it now stops at once with exit 2 saying so, the pages done are in the journal, and a
    re-run parses the rest, each page once."""
    import psutil

    words = [f"Word{i}" for i in range(4)]
    src = text_pages(tmp_path / "in", words)
    out = tmp_path / "o.jsonl"
    # p3 hangs: the run is still going when the GCS finds the node gone (already created
    # actors answer their calls without a raylet)
    faults = {"MINERU_TEST_FAULTS": "hang=p3.png*"}
    proc = start_ray(src, out, "--page-timeout", "600", env=faults, new_session=True)
    try:
        lines: list[str] = []
        wait_for_event(proc, lines, lambda e: e["event"] == "page")
        ray_procs = psutil.Process(proc.pid).children(recursive=True)
        raylets = [p for p in ray_procs if "raylet/raylet" in " ".join(p.cmdline())]
        assert len(raylets) == 1
        raylets[0].kill()
        _, rest = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, "".join(lines[-5:]) + rest
    assert "private Ray instance" in rest and "re-run" in rest, rest
    _resumes_each_page_once(src, out, len(words), record_validator)


def test_actors_above_the_rss_limit_are_recycled(tmp_path, record_validator):
    src = text_pages(tmp_path / "in", WORDS[:4])
    out = tmp_path / "rss.jsonl"
    r = parse(src, out, "--executor", "ray", "--max-worker-rss", "400MB", env={"MINERU_TEST_FAULTS": "leak=*"})
    assert r.returncode == 0, r.stderr
    recs = read_journal(out, record_validator)
    assert len({x["id"] for x in recs}) == len(recs) == 4 and all(x["status"] == "ok" for x in recs)
    assert summary(r.stderr)["recycled"] >= 1


def test_a_worker_with_another_engine_fingerprint_is_refused(tmp_path):
    # MINERU_TEST_FAULTS fingerprint: the actor reports a fingerprint as a node with other
    # engine packages or models would
    out = tmp_path / "o.jsonl"
    r = parse(EXAMPLES / "prose.png", out, "--executor", "ray", env={"MINERU_TEST_FAULTS": "fingerprint=*"})
    assert r.returncode == 2, r.stderr
    assert "computes engine fingerprint 000" in r.stderr and "refused" in r.stderr, r.stderr
    assert not out.exists() or read_journal(out) == []  # no page got another engine's answer


def test_a_file_that_is_not_what_the_driver_planned_is_that_page_s_error(tmp_path, record_validator):
    src = text_pages(tmp_path / "in", WORDS[:3])
    out = tmp_path / "o.jsonl"
    proc = start_ray(src, out)
    lines: list[str] = []
    wait_for_event(proc, lines, lambda e: e.get("message", "").startswith("pipeline:"))  # the files are hashed by now
    later = src / "p2.png"
    st = later.stat()
    # what a node that sees another copy (or a file rewritten since) has: same size, other mtime
    os.utime(later, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 1, "".join(lines) + rest
    by_id = {rec["id"]: rec for rec in read_journal(out, record_validator)}
    assert by_id["p0.png#0"]["status"] == by_id["p1.png#0"]["status"] == "ok"
    err = by_id["p2.png#0"]["error"]
    assert by_id["p2.png#0"]["status"] == "failed" and err["stage"] == "open", err
    assert "the driver planned" in err["message"] and "shared at the same path on every node" in err["message"], err


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_file_removed_mid_run_is_said_removed_as_the_process_pool_says(tmp_path, record_validator, executor):
    """A file deleted after the driver planned it, on the private instance mineru starts on this
    machine: its record said `... cannot be read on node HOST (No such file or directory); inputs
    must be on a filesystem shared at the same path on every node`, advice that cannot apply to
    one machine. Where the driver cannot find the file either, the record says what the process
    pool's does: it was removed."""
    src = text_pages(tmp_path / "in", WORDS[:3])
    out = tmp_path / "o.jsonl"
    proc = start_parse(src, out, "--cpus", "2", "--executor", executor)
    lines: list[str] = []
    wait_for_event(proc, lines, lambda e: e.get("message", "").startswith("pipeline:"))  # the files are hashed by now
    (src / "p2.png").unlink()
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 1, "".join(lines) + rest
    by_id = {rec["id"]: rec for rec in read_journal(out, record_validator)}
    assert by_id["p0.png#0"]["status"] == by_id["p1.png#0"]["status"] == "ok"
    assert by_id["p2.png#0"]["status"] == "failed" and by_id["p2.png#0"]["source_sha256"] is None
    assert by_id["p2.png#0"]["error"] == {
        "kind": "not_found",
        "stage": "open",
        "message": "no such file (removed or a dangling link)",
    }


def test_version_mismatch_says_both_sides():
    from mineru_cli.pipeline.ray_executor import _init_error, version_mismatch

    same = {"ray": "2.60.0", "python": "3.11.7"}
    assert version_mismatch(same, dict(same)) is None
    said = version_mismatch(same, {"ray": "2.60.0", "python": "3.11.2"})
    assert said == "Ray 2.60.0 on Python 3.11.2, the driver Ray 2.60.0 on Python 3.11.7"
    # ray.init's own words for a cluster of another version (ray._private.utils.check_version_info)
    raised = RuntimeError(
        "Version mismatch: The cluster was started with:\n    Ray: 2.59.0\n    Python: 3.12.1\n"
        "This process on node 127.0.0.1 was started with:\n    Ray: 2.60.0\n    Python: 3.11.7\n"
    )
    text = _init_error(raised, "at --ray-address 127.0.0.1:6379")
    assert text.startswith(
        "the Ray cluster at --ray-address 127.0.0.1:6379 runs Ray 2.59.0 on Python 3.12.1, the driver"
    )
    assert "install the same Ray and Python versions" in text
