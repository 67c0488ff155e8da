"""The Ray executor's costs (issue 17): start-up time and memory of a private local Ray instance,
and recovery time after killing a worker actor's process and after losing a node.

    .venv/bin/python scripts/bench_ray.py --runs 3

* start-up: `RayTransport.open()` (ray.init of a private instance, as `--executor ray` starts
  it) and `close()`, timed; the memory is the summed RSS of the processes Ray started (the
  driver's descendants) once it is up, before any actor.
* worker killed: `mineru parse --executor ray` on ten text pages (1 s a page with the test
  hook), SIGKILL to one actor's process once both actors have answered a page; figures are the
  seconds from the kill to that page's `crash` record (the loss seen), to the first ok record
  of the slot's replacement (pages flow again on that slot) and to the end of the run.
* node lost: a two-node `ray.cluster_utils.Cluster` (two 1-CPU nodes, the GCS health check at
  500 ms x 2, as tests/pipeline/test_ray_cluster.py), the worker node removed without grace
  (SIGKILL of its raylet and workers) once both actors have answered; figures are the seconds
  to the "re-queued without blame" line and to the end of the run (the other node parses what
  is left, the lost page first).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def start_up() -> dict[str, float]:
    from mineru_cli.config import LoadOptions
    from mineru_cli.engines import resolve_engine
    from mineru_cli.pipeline.messages import WorkerSpec
    from mineru_cli.pipeline.ray_executor import RayTransport

    spec = WorkerSpec(resolve_engine("ocr"), 1, True, {}, "fp", LoadOptions(), None, 1, 0)
    transport = RayTransport(spec, info=lambda m: None, num_cpus=2)
    t0 = time.monotonic()
    transport.open()
    up = time.monotonic() - t0
    time.sleep(1.0)  # let its processes settle
    pids = descendants(os.getpid())
    memory = sum(rss_mb(p) for p in pids)
    t1 = time.monotonic()
    transport.close()
    return {"start_s": up, "stop_s": time.monotonic() - t1, "processes": len(pids), "rss_mb": memory}


def text_pages(d: Path, n: int) -> Path:
    from PIL import Image, ImageDraw, ImageFont

    d.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = Image.new("RGB", (480, 140), "white")
        font = ImageFont.load_default(size=32)
        ImageDraw.Draw(img).text((16, 46), f"Word{i} page number {i}", fill="black", font=font)
        img.save(d / f"p{i}.png")
    return d


def start_parse(src: Path, out: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(src), "--out", str(out), "--no-cache", "--engine", "ocr"]
    env = {**os.environ, "MINERU_HEARTBEAT_S": "0.2", "MINERU_TEST_FAULTS": "slow=*"}
    return subprocess.Popen(
        [*cmd, "--cpus", "2", "--executor", "ray", "--log-json", *extra],
        cwd=out.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def actor_pids(driver: int) -> list[int]:
    out = []
    for pid in descendants(driver):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"_PageActor" in fh.read():
                    out.append(pid)
        except OSError:
            continue
    return out


def recovery(work: Path, kill) -> dict[str, float | None]:
    """Run ten pages; once both slots answered, `kill(proc)`; seconds from the kill to the loss
    being seen (a crash record, or the node-loss line), to the first ok record of that slot's
    replacement (a worker killed; a lost node's slot gets none: its CPU went with it), and to the
    end of the run, with the pages still to do at the kill."""
    src = text_pages(work / "in", 10)
    out = work / "o.jsonl"
    out.unlink(missing_ok=True)
    proc = start_parse(src, out, *kill.extra)
    assert proc.stderr is not None
    workers: set[int] = set()
    killed_at = seen = again = None
    slot = None
    done = left = 0
    for line in proc.stderr:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        now = time.monotonic()
        if event["event"] == "page":
            done += 1
        if killed_at is None:
            if event["event"] == "page":
                workers.add(event["worker"])
            if len(workers) == 2:
                kill(proc)
                killed_at = time.monotonic()
                left = 10 - done
            continue
        if seen is None and kill.seen(event):
            seen = now - killed_at
            slot = kill.slot(event)
        elif seen is not None and again is None and event["event"] == "page" and event["status"] == "ok":
            if event["worker"] == slot:
                again = now - killed_at
    proc.wait()
    end = time.monotonic() - killed_at if killed_at is not None else None
    return {"seen_s": seen, "replacement_ok_s": again, "end_s": end, "left": left, "rc": proc.returncode}


class KillActor:
    extra: tuple[str, ...] = ()

    def __call__(self, proc: subprocess.Popen) -> None:
        pids = actor_pids(proc.pid)
        os.kill(pids[0], signal.SIGKILL)

    @staticmethod
    def seen(event: dict) -> bool:
        return event["event"] == "page" and event["status"] != "ok"

    @staticmethod
    def slot(event: dict) -> int | None:
        return event["worker"]


class LoseNode:
    def __init__(self, cluster, node):
        self.cluster, self.node = cluster, node
        self.extra = ("--ray-address", cluster.address)

    def __call__(self, proc: subprocess.Popen) -> None:
        self.cluster.remove_node(self.node, allow_graceful=False)

    @staticmethod
    def seen(event: dict) -> bool:
        return event["event"] == "info" and "re-queued without blame" in event.get("message", "")

    @staticmethod
    def slot(event: dict) -> int | None:
        return int(event["message"].split(":")[0].split()[1])  # "worker N: its node was lost ..."


def node_loss(work: Path) -> dict[str, float | None]:
    import ray.cluster_utils

    temp = tempfile.mkdtemp(prefix="mrb", dir="/tmp")
    os.environ["RAY_TMPDIR"] = temp
    os.makedirs(os.path.join(temp, "ray"))
    node = {"num_cpus": 1, "object_store_memory": 80 << 20}
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 2, "health_check_initial_delay_ms": 0}
    cluster = ray.cluster_utils.Cluster(shutdown_at_exit=True)
    try:
        cluster.add_node(**node, temp_dir=temp, include_dashboard=False, _system_config=fast)
        worker = cluster.add_node(**node)
        return recovery(work, LoseNode(cluster, worker))
    finally:
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        os.environ.pop("RAY_TMPDIR", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_ray"))
    ap.add_argument("--what", default="startup,worker,node")
    args = ap.parse_args()
    with open("/proc/cpuinfo") as fh:
        model = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    print(f"{model}, {os.cpu_count()} CPUs")
    results: dict[str, list[dict]] = {}
    for run in range(args.runs):
        for what in args.what.split(","):
            load = os.getloadavg()[0]
            work = args.work / f"{what}{run}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            if what == "startup":
                r = start_up()
            elif what == "worker":
                r = recovery(work, KillActor())
            else:
                r = node_loss(work)
            r["load"] = load
            results.setdefault(what, []).append(r)
            print(json.dumps({"run": run, "what": what, **{k: v if v is None else round(v, 2) for k, v in r.items()}}))
            sys.stdout.flush()
    print("medians (min-max):")
    for what, rs in results.items():
        cells = []
        for key in rs[0]:
            values = [r[key] for r in rs if r[key] is not None]
            if values:
                cells.append(f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"  {what:8} " + ", ".join(cells))


if __name__ == "__main__":
    main()
