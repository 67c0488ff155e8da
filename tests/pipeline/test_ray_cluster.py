"""The Ray executor on a real two-node cluster on this machine (`ray.cluster_utils.Cluster`, two
1-CPU nodes, no mocks): a node lost mid-run. Its pages go back to the queue without blame and
finish on the node that is left, each page exactly one record. Only this test's own Ray
processes are stopped (never `ray stop`)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from helpers import read_journal, wait_for_event
from test_ray_executor import start_ray, summary, text_pages

ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # starts a Ray cluster and the real engine: ~50 s


@pytest.fixture
def two_nodes(monkeypatch):
    """A head and a worker node on this machine, 1 CPU each; a short temp dir (socket paths)."""
    temp = tempfile.mkdtemp(prefix="mrc", dir="/tmp")
    # Cluster writes its address for a bare ray.init() to find: into our folder, not /tmp/ray
    monkeypatch.setenv("RAY_TMPDIR", temp)
    os.makedirs(os.path.join(temp, "ray"))
    # The nodes take the machine's own address: ray.init turns a 127.0.0.1 address into it anyway.
    node = {"num_cpus": 1, "object_store_memory": 80 << 20}
    # The GCS notices a node that stops answering within ~1 s instead of the default ~30 s.
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 2, "health_check_initial_delay_ms": 0}
    cluster = ray_cluster_utils.Cluster(shutdown_at_exit=True)
    try:
        cluster.add_node(**node, temp_dir=temp, include_dashboard=False, _system_config=fast)  # the head
        worker = cluster.add_node(**node)
        yield cluster, worker
    finally:
        cluster.shutdown()  # this cluster's own processes only
        shutil.rmtree(temp, ignore_errors=True)


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
