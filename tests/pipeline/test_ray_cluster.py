"""The Ray executor on a real two-node cluster on this machine (`ray.cluster_utils.Cluster`, no
mocks): a node lost mid-run (two 1-CPU nodes): its pages go back to the queue without blame and
finish on the node that is left, each page exactly one record; and nodes of 1 and 2 CPUs: the
CPU planner runs on each node's own CPUs, each node gets its planned slots and parses pages.
Only this test's own Ray processes are stopped (never `ray stop`)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager

import pytest
from helpers import read_journal, wait_for_event
from test_ray_executor import start_ray, summary, text_pages

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # starts a Ray cluster and the real engine: ~50 s


@contextmanager
def cluster_of(monkeypatch, head_cpus: int, worker_cpus: int):
    """A head and a worker node on this machine; a short temp dir (socket paths)."""
    temp = tempfile.mkdtemp(prefix="mrc", dir="/tmp")
    # Cluster writes its address for a bare ray.init() to find: into our folder, not /tmp/ray
    monkeypatch.setenv("RAY_TMPDIR", temp)
    os.makedirs(os.path.join(temp, "ray"))
    # The nodes take the machine's own address: ray.init turns a 127.0.0.1 address into it anyway.
    store = {"object_store_memory": 80 << 20}
    # The GCS notices a node that stops answering within ~1 s instead of the default ~30 s.
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 2, "health_check_initial_delay_ms": 0}
    cluster = ray_cluster_utils.Cluster(shutdown_at_exit=True)
    try:  # the head, then the worker node
        cluster.add_node(num_cpus=head_cpus, **store, temp_dir=temp, include_dashboard=False, _system_config=fast)
        worker = cluster.add_node(num_cpus=worker_cpus, **store)
        yield cluster, worker
    finally:
        cluster.shutdown()  # this cluster's own processes only
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def two_nodes(monkeypatch):
    """Two 1-CPU nodes."""
    with cluster_of(monkeypatch, 1, 1) as nodes:
        yield nodes


def test_pages_of_a_lost_node_finish_on_the_other_one(two_nodes, tmp_path, record_validator):
    cluster, worker = two_nodes
    words = [f"Word{i}" for i in range(10)]
    src = text_pages(tmp_path / "in", words)
    out = tmp_path / "o.jsonl"
    proc = start_ray(src, out, "--ray-address", cluster.address, env={"MINERU_TEST_FAULTS": "slow=*"})  # 1 s a page
    lines: list[str] = []
    workers: set[int] = set()

    def both_answered(event: dict) -> bool:  # then each actor holds its next page (both nodes busy)
        if event["event"] == "page":
            workers.add(event["worker"])
        return len(workers) == 2

    try:
        wait_for_event(proc, lines, both_answered)
        cluster.remove_node(worker, allow_graceful=False)  # SIGKILL: its raylet and workers, mid-page
        _, rest = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:  # a failed test leaves no driver behind
            proc.kill()
            proc.communicate()
    log = "".join(lines) + rest
    assert proc.returncode == 0, log
    recs = read_journal(out, record_validator)
    assert sorted(r["id"] for r in recs) == sorted(f"p{i}.png#0" for i in range(len(words)))  # exactly once
    assert all(r["status"] == "ok" for r in recs), log
    assert "re-queued without blame" in log, log
    s = summary(log)
    assert s["ok"] == len(words) and s["restarts"] >= 1


def test_each_node_gets_the_slots_the_cpu_planner_gives_its_own_cpus(monkeypatch, tmp_path, record_validator):
    with cluster_of(monkeypatch, 1, 2) as (cluster, _):
        words = [f"Word{i}" for i in range(9)]
        src = text_pages(tmp_path / "in", words)
        out = tmp_path / "o.jsonl"
        # 1 s a page: every slot has pages while the others work
        proc = start_ray(src, out, "--ray-address", cluster.address, env={"MINERU_TEST_FAULTS": "slow=*"})
        try:
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    events = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    s = summary(err)
    plans = sorted((n["cpus"], n["workers"], n["threads"]) for n in s["plan"]["nodes"])
    assert plans == [(1, 1, 1), (2, 2, 1)], s["plan"]  # plan_cpus on each node's CPUs, not the driver's --cpus 2
    assert s["plan"]["workers"] == 3
    cpus = {n["node"]: n["cpus"] for n in s["plan"]["nodes"]}
    # pages parsed on both nodes; the heartbeats show each node's workers
    assert set(s["nodes"]) == set(cpus) and all(v > 0 for v in s["nodes"].values()), s["nodes"]
    assert sum(s["nodes"].values()) == len(words) == s["ok"]
    beats = [e["nodes"] for e in events if e["event"] == "heartbeat" and e["nodes"]]
    assert {node: cpus[node] for node in cpus} in beats, beats[-5:]  # at some point: 1 and 2 workers
    pages = [e for e in events if e["event"] == "page"]
    by_node: dict[str, set[int]] = {}
    for e in pages:
        by_node.setdefault(e["node"], set()).add(e["worker"])
    assert {node: len(w) for node, w in by_node.items()} == cpus, by_node  # each slot answered on its node
    recs = read_journal(out, record_validator)
    assert sorted(r["id"] for r in recs) == sorted(f"p{i}.png#0" for i in range(len(words)))
