"""The CPU budget: how many cores this process may use, and how the pipeline splits them.

One budget (`--cpus N`, default: the cores we may use) is split into worker processes x
ONNX Runtime intra-op threads per worker. The rule (see `plan_cpus`, printed by
`mineru parse --explain-plan`):

  workers = min(budget, memory available / WORKER_MEM, pages to do)   (--workers overrides)
  threads = max(1, budget // workers)                                   (intra-op, per worker)
  spinning = off when workers x threads > cores we may use              (no busy-waiting
             thread pools fighting for oversubscribed cores)

Why processes first: the embedded engine's models are small convolutional nets run image by
image; one ONNX Runtime session scales poorly past one thread on them (much of a page is
Python pre/post-processing, single-threaded), while separate processes scale with the cores.
The measured figures (2 x 1 against 1 x 2 on two cores) are in docs/benchmarks.md.

Page batches (`--page-batch`, pages a worker holds and hands to its engine together): 1 for
the ocr engine (it parses page by page: a batch would only delay answers), 4 for the vlm
engine, whose layout steps and crops decode together across the batch's pages. 4 keeps what
a batch holds small (four rendered pages of at most 3500x3500 px, ~150 MB; a killed run loses
at most four pages per worker) while giving the decoder several sequences per step.
`--crop-batch` (8) is the vlm engine's crops decoded together. Neither changes a record.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import EngineSpec, RunConfig

GiB = 1 << 30
# Memory one worker may need while parsing a large page with the embedded engine (its RSS is
# about 0.3-0.5 GiB; headroom for a 3500x3500 page). Caps the worker count on small machines.
WORKER_MEM = 1 * GiB


CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
# cgroup v1 mounts the cpu controller under one of these names (alone, or joined with cpuacct)
_CGROUP_V1_CPU = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
# cgroup v1 writes "no memory limit" as the largest page-aligned number (2^63 - 4096): anything
# this large is no limit
_V1_NO_LIMIT = 1 << 62


def _own_cgroups(mount: Path, controller: str, proc_cgroup: Path) -> list[Path]:
    """This process's cgroup folders for `controller` under `mount`, from its own up to the
    mount's root: a limit set on any of them holds (the kernel applies the tightest). The path
    comes from /proc/self/cgroup (`0::/path` on v2, `N:cpu,cpuacct:/path` on v1); a path that
    is not under this mount (a container that sees its own cgroup as the mount's root, with the
    host's path in /proc) leaves the root alone."""
    rel = ""
    try:
        for line in proc_cgroup.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (controller == "" and controllers == "") or controller in controllers.split(","):
                rel = path.strip("/")
                break
    except (OSError, ValueError):
        pass
    parts = [p for p in rel.split("/") if p]
    dirs = [mount.joinpath(*parts[:i]) for i in range(len(parts), 0, -1)]
    return [d for d in dirs if d.is_dir()] + [mount]


def _v2_cpu_quota(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        if quota != "max" and int(quota) > 0 and int(period) > 0:  # no kernel writes others; a hand-made file may
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    return None


def _v1_cpu_quota(folder: Path) -> float | None:
    try:
        quota_us = int((folder / "cpu.cfs_quota_us").read_text())
        period_us = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _unified(root: Path, limit_file: str) -> bool:
    """Whether the cgroup filesystem at `root` is cgroup v2 (unified): its root lists the
    controllers, or holds the v2 limit file itself (a container's own cgroup as the mount)."""
    return (root / "cgroup.controllers").is_file() or (root / limit_file).is_file()


def _tightest(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None


def cgroup_cpu_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The CPUs a cgroup quota allows this process (2.5: 250 ms of CPU per 100 ms), or None
    without a quota: cgroup v2's cpu.max, else cgroup v1's cpu.cfs_quota_us / cpu.cfs_period_us
    (-1: no quota), the tightest of this process's cgroup and its parents. `root`: where the
    cgroup filesystem is mounted."""
    if _unified(root, "cpu.max"):
        return _tightest([_v2_cpu_quota(d) for d in _own_cgroups(root, "", proc_cgroup)])
    for name in _CGROUP_V1_CPU:
        if (root / name).is_dir():
            return _tightest([_v1_cpu_quota(d) for d in _own_cgroups(root / name, "cpu", proc_cgroup)])
    return None


def available_cpus(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """Cores we may use: the affinity mask, further limited by a cgroup CPU quota (v2 or v1).

    os.cpu_count() counts the host's cores, which oversubscribes a container or a taskset."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def _memory_room(folder: Path, limit_file: str, usage_file: str, inactive_file: str) -> float | None:
    """Bytes a cgroup's memory limit leaves (limit - usage), None without a limit. The usage
    counts the page cache of files its processes read or wrote, which the kernel takes back
    when the memory is wanted: its inactive part (memory.stat's `inactive_file`, v1's
    `total_inactive_file` with its children's) is room, as a container's working set leaves it
    out. A cgroup that has read as many files as its limit, as a cron job's does after a run,
    shows a usage at the limit with that limit free."""
    try:
        limit = (folder / limit_file).read_text().strip()
        if limit == "max" or int(limit) >= _V1_NO_LIMIT:
            return None
        used = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        return None
    return max(0, int(limit) - max(0, used - _stat(folder, inactive_file)))


def _stat(folder: Path, key: str) -> int:
    """A value of the cgroup's memory.stat (0 where it cannot be read)."""
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def cgroup_memory_room(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """Bytes this process's cgroup memory limits leave (cgroup v2's memory.max - memory.current,
    v1's memory.limit_in_bytes - memory.usage_in_bytes, the page cache it can take back not
    counted as used: _memory_room; the tightest of its cgroup and parents), None without a
    limit."""
    if _unified(root, "memory.max"):
        dirs, files = _own_cgroups(root, "", proc_cgroup), ("memory.max", "memory.current", "inactive_file")
    else:
        dirs, files = (
            _own_cgroups(root / "memory", "memory", proc_cgroup),
            ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
        )
    room = _tightest([_memory_room(d, *files) for d in dirs])
    return None if room is None else int(room)


def available_memory(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """Bytes we may still use: MemAvailable, further limited by a cgroup memory limit (v2 or v1)."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError):
        pass
    room = cgroup_memory_room(cgroup_root, proc_cgroup)
    if room is not None:
        avail = room if avail is None else min(avail, room)
    return avail


@dataclass(frozen=True)
class CpuPlan:
    cores: int  # cores we may use (affinity / cgroup)
    budget: int  # --cpus, or cores
    workers: int  # engine processes
    threads: int  # intra-op threads per worker
    spinning: bool  # ONNX Runtime thread-pool spinning
    why: str  # one line: how the worker count was chosen
    warning: str | None = None  # the workers need more memory than is available

    @property
    def oversubscribed(self) -> bool:
        return self.workers * self.threads > self.cores

    def thread_env(self) -> dict[str, str]:
        """Environment a worker gets before it imports numpy / onnxruntime."""
        t = str(self.threads)
        env = {"OMP_NUM_THREADS": t, "OPENBLAS_NUM_THREADS": t, "MKL_NUM_THREADS": t}
        if not self.spinning:
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        return env

    def as_dict(self) -> dict:
        return {
            "cores": self.cores,
            "cpus": self.budget,
            "workers": self.workers,
            "threads": self.threads,
            "spinning": self.spinning,
            "why": self.why,
        }


def plan_cpus(
    cpus: int | None = None,
    workers: int | None = None,
    pages: int | None = None,
    cores: int | None = None,
    memory: int | None = -1,
    engine: str = "ocr",
) -> CpuPlan:
    """Split the CPU budget into workers x threads (the rule is in the module docstring).

    `pages`: pages to do, if known (no point starting more workers than pages).
    `memory`: bytes available (-1: measure; None: unknown, no cap).
    `engine`: "vlm" gets one worker with every thread by default (one copy of a large model;
    its batching across pages is the VLM pipeline's business)."""
    cores = cores or available_cpus()
    budget = max(1, cpus or cores)
    if memory == -1:
        memory = available_memory()
    if workers:
        n, why = workers, "--workers"
    elif engine == "vlm":
        n, why = 1, "vlm engine: one model copy, all threads to it"
    else:
        n, why = budget, "one worker per CPU of the budget"
        if memory is not None and memory // WORKER_MEM < n:
            n, why = (
                max(1, int(memory // WORKER_MEM)),
                (f"memory: {memory / GiB:.1f} GiB available, {WORKER_MEM / GiB:.0f} GiB per worker"),
            )
    if pages is not None and 0 < pages < n:
        n, why = pages, f"only {pages} page(s) to do"
    threads = max(1, budget // n)
    spinning = n * threads <= cores
    warning = None
    # One worker starts whatever the memory, and --workers is obeyed: say when they will not
    # fit. The vlm engine's need is its model's size, which the plan does not know.
    if memory is not None and memory < n * WORKER_MEM and engine != "vlm":
        warning = (
            f"{memory / GiB:.1f} GiB of memory available (MemAvailable, cgroup limit) for {n} worker(s) "
            f"of about {WORKER_MEM / GiB:.0f} GiB each: pages may fail and workers be killed for lack of memory"
        )
    return CpuPlan(cores, budget, n, threads, spinning, why, warning)


@dataclass(frozen=True)
class NodeCpus:
    """A machine of a cluster as the planner sees it: its CPUs and the memory it offers."""

    node: str  # its id (Ray's node id)
    name: str  # for messages and reports: host and a short id
    cpus: int
    memory: int | None  # bytes; None: unknown, no cap


def plan_nodes(
    nodes: list[NodeCpus],
    workers: int | None = None,
    pages: int | None = None,
    engine: str = "ocr",
    cores: int | None = None,
) -> list[tuple[NodeCpus, CpuPlan]]:
    """The same rule as plan_cpus on each node's own CPUs and memory (workers x threads per
    node; --workers is per node), then the slots one per worker, taken round-robin across the
    nodes: a run of fewer `pages` than slots starts only that many, spread over the nodes, each
    node's share getting all its CPUs as threads. `cores`: the cores under a node's CPUs when it
    is this machine (a private instance: spinning is decided on the real cores); else its CPUs."""
    plans = [(n, plan_cpus(n.cpus, workers, cores=cores or n.cpus, memory=n.memory, engine=engine)) for n in nodes]
    slots = slot_order(plans)
    if pages is not None and 0 < pages < len(slots):
        share = [sum(1 for n, _ in slots[:pages] if n is node) for node, _ in plans]
        plans = [
            (n, plan_cpus(n.cpus, workers, pages=k, cores=cores or n.cpus, memory=n.memory, engine=engine))
            for (n, _), k in zip(plans, share)
            if k
        ]
    return [(n, p) for n, p in plans if p.workers]


def slot_order(plans: list[tuple[NodeCpus, CpuPlan]]) -> list[tuple[NodeCpus, CpuPlan]]:
    """One entry per worker slot, round-robin across the nodes (slots start in this order, so a
    run that needs few workers spreads them over the machines)."""
    most = max((p.workers for _, p in plans), default=0)
    return [(n, p) for r in range(most) for n, p in plans if r < p.workers]


def explain(plan: CpuPlan, config: RunConfig, spec: EngineSpec) -> str:
    """The CPU plan and the batch settings `config` runs with on the engine `spec` (the one the
    run resolves, runner.prepare), for --explain-plan."""
    from .config import default_page_batch

    page_timeout, max_rss = config.page_timeout, config.max_worker_rss
    batch_wait_ms, crop_batch = config.batch_wait_ms, config.crop_batch
    engine = spec.engine.value
    if config.page_batch is not None:
        batch = f"{config.page_batch}  (--page-batch)"
    else:
        batch = f"{default_page_batch(engine)}  (default for the {engine} engine)"
    mode_line = f"{spec.mode}  (engine {engine}" + (f", model {spec.model})" if spec.model else ")")
    # vlm and hybrid read a page's OCR lines in a thread of their own during the layout step;
    # standard has no layout step: its embedded engine runs first, on the worker's threads
    ocr_line = (
        "  embedded engine    runs before the VLM, on the worker's threads: its layout model finds the blocks, "
        "its OCR (or the text layer) reads the text; the VLM reads only tables and equations"
        if spec.mode == "standard"
        else "  ocr thread         +1 thread per worker runs the embedded OCR beside the VLM"
    )
    measured = "VLM stages and plans" if engine == "vlm" else "Embedded engine"
    lines = [
        "CPU plan (mineru parse)",
        f"  cores we may use   {plan.cores}  (affinity mask, cgroup quota)",
        f"  CPU budget         {plan.budget}  (--cpus; default: the cores we may use)",
        f"  workers            {plan.workers}  ({plan.why}); one engine per process",
        *([f"  warning            {plan.warning}"] if plan.warning else []),
        f"  threads/worker     {plan.threads}  (ONNX Runtime intra-op = budget // workers; "
        f"OMP/OPENBLAS/MKL_NUM_THREADS={plan.threads})",
        f"  thread spinning    {'on' if plan.spinning else 'off'}  "
        f"(workers x threads = {plan.workers * plan.threads} "
        f"{'<=' if plan.spinning else '>'} {plan.cores} cores)",
        f"  page timeout       {page_timeout:g} s  (worker killed and restarted; record status timeout)",
        f"  worker recycle     RSS above {max_rss / GiB:.2f} GiB (checked after each page)",
        f"  page batch         {batch}; pages a worker holds and parses together",
        f"  batch wait         {batch_wait_ms} ms  (a batch closes when full or no page came this long)",
        f"  crop batch         {crop_batch}  (vlm: crops decoded together)",
        f"  mode               {mode_line}",
        *([ocr_line] if engine == "vlm" else []),
        "",
        "Rule: workers = min(budget, available memory / "
        f"{WORKER_MEM / GiB:.0f} GiB, pages to do); threads = budget // workers; spinning off when",
        "workers x threads > cores. --workers K overrides the worker count. A batch of n pages",
        "gets n x the page timeout from the start of its engine stage; if its worker dies or hangs,",
        "each of its pages is retried alone, so one bad page costs only itself.",
        f"Measured pages/min per plan: docs/benchmarks.md ({measured}).",
    ]
    return "\n".join(lines)
