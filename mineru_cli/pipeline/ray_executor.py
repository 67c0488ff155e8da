"""The Ray executor (`mineru parse --executor ray`): the scheduler's loop (scheduler.py) over
Ray actors, so the pool's failure contract holds on a cluster.

Design
  * One actor per worker slot (`max_restarts=0, max_task_retries=0`: Ray never re-runs
    anything; the scheduler owns every retry and blame decision). Each actor builds one engine
    from the WorkerSpec; its thread variables reach it through the actor's `runtime_env` (the
    driver's environment does not reach workers on a cluster).
  * Slots per node: once Ray is up, the CPU planner (budget.plan_nodes) runs on each alive
    node's own CPUs and memory (workers x threads per node, as the local pool plans one
    machine), and each slot's actor asks for its threads as CPUs and is pinned to its node
    (soft node affinity: a slot whose node was lost starts wherever there is room). Nodes that
    join mid-run get no slots.
  * A batch is one `render` call per page (render + cache lookup; a hit or a failure is
    answered at once) and one `parse` call for the misses (engine, then cache stores),
    submitted together; the actor runs them in order. Pages cross as (absolute path, index):
    actors do not share the driver's working directory, and pixels never cross.
  * The transport turns the calls' answers into the pipe's messages: a call starts when the one
    before it answered (StageEntered: the scheduler's clocks), a page's answer is Done, an
    actor whose call raised is Lost (killed first, its other answers never read). On a
    deadline the scheduler kills the actor (`ray.kill`: a process kill, a hung native call
    cannot ignore it) and a fresh one takes its slot.
  * Memory: the actor reports its RSS with each answer (the scheduler recycles on it).
  * Ray itself: without an address a private local instance is started (never an existing
    cluster) and shut down at the end; with one, the driver attaches and only its actors go.
    `ray.init` installs its own SIGINT/SIGTERM handlers: ours are put back after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..budget import CpuPlan, NodeCpus, available_cpus, available_memory, plan_nodes, slot_order
from ..core.errors import SetupError
from ..core.words import ErrorKind, Stage
from .blame import Task
from .messages import Done, Fatal, Notice, PageOutcome, Ready, StageEntered, WorkerSpec
from .scheduler import Event, Lost, Scheduler, Unanswered
from .worker import FAULTS_ENV, WORKER_ENV

RAY_PIP = "pip install 'mineru-cli[ray]'"
OBJECT_STORE_BYTES = 256 << 20  # private instance: results are small, pixels never cross
SAME_VERSIONS = "install the same Ray and Python versions on the driver and every node"
SHARED = "inputs must be on a filesystem shared at the same path on every node"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SetupError(f"--executor ray needs Ray, which is not installed: run {RAY_PIP}") from None
    return ray


class _PageActor:
    """Runs in a Ray worker process: one engine, the pages of one batch at a time."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.engine: Any = None
        self.cache: Any = None
        self.docs: Any = None
        self.faults: dict[str, list[str]] = {}
        self.waiting: dict[int, Any] = {}  # task id -> worker._Waiting
        self.notices: list[str] = []

    def start(self) -> tuple[str, Any]:
        """Load the engine: ("ready", who this worker is: identity()) or ("fatal", message)."""
        from ..core.errors import SetupError as _SetupError
        from .worker import parse_faults, start_engine

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's business
        self.faults = parse_faults(os.environ.get(FAULTS_ENV))
        spec = self.spec
        try:
            self.engine, self.cache = start_engine(spec, self.notices.append)
        except _SetupError as exc:
            return "fatal", str(exc)
        from ..inputs import OpenDocuments

        self.docs = OpenDocuments(spec.load)
        try:
            return "ready", self.identity()
        except Exception as exc:  # noqa: BLE001 - a worker that cannot say what it runs is not used
            return "fatal", f"worker could not describe its engine: {type(exc).__name__}: {exc}"

    def identity(self) -> dict[str, Any]:
        """What the driver checks before it hands this worker a page: where it runs, its Ray and
        Python, and the pages' fingerprints (per kind of file) computed here, from this node's own files."""
        import platform
        import socket

        import ray

        from ..config import page_fingerprints
        from ..engines import describe

        fps = page_fingerprints(describe(self.spec.engine), self.spec.load)
        if self.faults.get("fingerprint"):  # test hook: a node whose engine or models differ
            fps = {kind: "0" * len(fp) for kind, fp in fps.items()}
        ctx = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "node": ctx.get_node_id(),
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "ray": ray.__version__,
            "python": platform.python_version(),
            "fingerprints": fps,
        }

    def _notices(self) -> list[str]:
        """The warnings since the last answer. The list is emptied in place: the cache appends
        to this very list (its `warn`), so a new list would take none of its later warnings."""
        out = self.notices[:]
        self.notices.clear()
        return out

    def render(
        self, task_id: int, src: Any, index: int, planned: tuple[int, int] | None = None
    ) -> tuple[PageOutcome | None, int, list[str]]:
        """Render + cache lookup: the page's outcome (hit or failure), or None (waits for engine).
        `planned`: the file's (size, mtime_ns) when the driver hashed it; another file here is
        this page's error, never another file's result."""
        from .worker import prepare_page, rss_bytes

        if planned is not None and (mismatch := _check_planned(src.path, planned)) is not None:
            return mismatch, rss_bytes(), self._notices()
        out = prepare_page(self.cache, self.docs, self.spec.fingerprints, src, index, lambda s: None)
        if isinstance(out, PageOutcome):
            return out, rss_bytes(), self._notices()
        out.task_id = task_id
        self.waiting[task_id] = out
        return None, rss_bytes(), self._notices()

    def parse(self, task_ids: list[int]) -> tuple[list[tuple[int, PageOutcome]], int, int, list[str]]:
        """One engine call for the pages of `task_ids` that wait; then store and answer each."""
        from .worker import finish_page, parse_waiting, rss_bytes

        waiting = [self.waiting.pop(t) for t in task_ids if t in self.waiting]
        results, share = parse_waiting(self.engine, waiting, self.faults)
        done = [(w.task_id, finish_page(self.cache, w, res, share, lambda s: None)) for w, res in zip(waiting, results)]
        return done, rss_bytes(), len(waiting), self._notices()


@dataclass
class _Call:
    ref: Any  # ray.ObjectRef
    kind: str  # "render" | "parse"
    task_ids: list[int]
    path: Path | None = None  # a render's file, as the driver names it


@dataclass
class _Actor:
    slot: int
    handle: Any
    start_ref: Any
    ready: bool = False
    node: str | None = None  # the Ray node id it runs on (from its identity)
    where: str = "?"  # its host and IP, for messages
    label: str | None = None  # the planned node's name (host/short id), for reports
    calls: deque[_Call] = field(default_factory=deque)  # submitted, not answered, in order
    waiting: set[int] = field(default_factory=set)  # rendered, waiting for the engine call


class RayTransport:
    """Ray actors (see scheduler.Transport). A batch is one `render` call per page and one
    `parse` call; the actor runs them in order, so a call starts when the one before it
    answered: that is when its StageEntered is reported."""

    refill = False  # one engine call per submitted batch: a new batch only when idle
    noun, nouns = "Ray worker actor", "Ray worker actors"

    def __init__(
        self,
        spec: WorkerSpec,
        info: Callable[[str], None],
        address: str | None = None,
        num_cpus: int | None = None,
        workers: int | None = None,
        pages: int | None = None,
    ):
        self.ray = import_ray()
        self.spec = spec
        self.info = info
        self.address = address
        self.num_cpus = num_cpus
        self.workers, self.pages = workers, pages  # --workers (per node); pages to do, if known
        self.slots: list[tuple[NodeCpus, CpuPlan]] = []  # per slot: its node and that node's plan
        self._names: dict[str, str] = {}  # node id -> name, of the planned nodes
        self._started_ray = False
        self._temp_dir: str | None = None
        self._actor_cls: Any = None
        self._ray_log: tuple[list[logging.Handler], bool] | None = None

    # -- Ray itself ------------------------------------------------------------------------
    def open(self) -> None:
        if self._started_ray:
            return
        ray = self.ray
        main = threading.current_thread() is threading.main_thread()
        saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
        kwargs: dict[str, Any] = dict(
            log_to_driver=False, include_dashboard=False, configure_logging=False, logging_level=logging.WARNING
        )
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray's own log (token auth, /dev/shm size, ...) goes to our info channel while we run,
        # not straight to stderr: --quiet and --log-json stay clean.
        # (ray.init clears the "ray" logger's handlers: its own messages meanwhile are caught
        # on "ray._private", then the "ray" logger gets the relay.)
        ray_log, init_log = logging.getLogger("ray"), logging.getLogger("ray._private")
        self._ray_log = (ray_log.handlers[:], ray_log.propagate)
        relay = _Relay(self.info)
        init_propagate = init_log.propagate
        init_log.addHandler(relay)
        init_log.propagate = False
        try:
            if self.address:
                _check_reachable(self.address)
                ray.init(address=self.address, **kwargs)
            else:
                self._temp_dir = tempfile.mkdtemp(prefix="mray", dir="/tmp" if os.path.isdir("/tmp") else None)
                with _sigterm_held_off():
                    ray.init(
                        address="local",
                        num_cpus=self.num_cpus,
                        object_store_memory=OBJECT_STORE_BYTES,
                        _temp_dir=self._temp_dir,
                        **kwargs,
                    )
        except Exception as exc:  # noqa: BLE001 - no cluster there, version mismatch, ...
            where = f"at --ray-address {self.address}" if self.address else "(a private local instance)"
            self._started_ray = True  # whatever it got to: shut it down
            self.close()
            raise SetupError(_init_error(exc, where)) from None
        except SystemExit as exc:
            # ray.init's first step installs Ray's own SIGTERM handler, sys.exit(SIGTERM): a SIGTERM
            # while Ray starts ended the run with exit 15 and left the private instance's folder.
            # It is ours to handle, as at any other time: Ray shut down, the run stops (exit 130).
            self._started_ray = True
            self.close()
            ours = saved.get(signal.SIGTERM)
            if exc.code != signal.SIGTERM or not callable(ours):
                raise
            ours(signal.SIGTERM, None)
            raise KeyboardInterrupt from None
        finally:
            init_log.removeHandler(relay)
            init_log.propagate = init_propagate
            ray_log.handlers[:] = [relay]
            ray_log.propagate = False
            for sig, handler in saved.items():  # ray.init replaces them; ours stop the run gracefully
                if handler is not None:
                    signal.signal(sig, handler)
        self._started_ray = True
        self._actor_cls = ray.remote(max_restarts=0, max_task_retries=0)(_PageActor)
        self.slots = slot_order(self._plan_nodes())
        self._names = {n.node: n.name for n, _ in self.slots}
        for node, plan in dict((n.node, (n, p)) for n, p in self.slots).values():
            self.info(
                f"ray: node {node.name}: {node.cpus} CPU(s) -> {plan.workers} worker(s) x {plan.threads} "
                f"thread(s) ({plan.why})" + (f"; warning: {plan.warning}" if plan.warning else "")
            )

    def _plan_nodes(self) -> list[tuple[NodeCpus, CpuPlan]]:
        """The CPU planner on each alive node with CPUs (a private instance: this machine, its
        CPUs the --cpus budget, its memory measured here)."""
        private = self.address is None
        nodes = []
        for n in self.ray.nodes():
            resources = n.get("Resources", {})
            cpus = int(resources.get("CPU", 0))
            if n.get("Alive") and cpus >= 1:
                memory = available_memory() if private else int(resources.get("memory", 0)) or None
                name = f"{n.get('NodeManagerHostname', '?')}/{n['NodeID'][:6]}"  # hosts may hold several
                nodes.append(NodeCpus(n["NodeID"], name, cpus, memory))
        if not nodes:
            where = f"at --ray-address {self.address}" if self.address else "in the private instance"
            raise SetupError(f"the Ray cluster {where} has no alive node with a CPU to run workers on")
        cores = available_cpus() if private else None  # a private node's CPUs are --cpus, not cores
        return plan_nodes(nodes, self.workers, self.pages, engine=self.spec.engine.engine.value, cores=cores)

    def node_plans(self) -> list[dict[str, Any]]:
        """The plan per node, for the summary: its name, CPUs, workers and threads."""
        seen: dict[str, dict[str, Any]] = {}
        for n, p in self.slots:
            seen.setdefault(n.node, {"node": n.name, "cpus": n.cpus, "workers": p.workers, "threads": p.threads})
        return list(seen.values())

    def close(self) -> None:
        if self._started_ray:
            self._started_ray = False
            try:
                self.ray.shutdown()  # a private instance stops; an attached driver only disconnects
            except Exception:  # noqa: BLE001 - shutting down a half-started Ray
                pass
        if self._ray_log is not None:
            handlers, propagate = self._ray_log
            ray_log = logging.getLogger("ray")
            ray_log.handlers[:] = handlers
            ray_log.propagate = propagate
            self._ray_log = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    # -- actors ----------------------------------------------------------------------------
    def start(self, slot: int) -> _Actor:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node, plan = self.slots[slot]
        spec = dataclasses.replace(
            self.spec, threads=plan.threads, spinning=plan.spinning, env={**self.spec.env, **plan.thread_env()}
        )
        env = {**spec.env, WORKER_ENV: "1"}
        if os.environ.get(FAULTS_ENV):
            env[FAULTS_ENV] = os.environ[FAULTS_ENV]
        handle = self._actor_cls.options(
            num_cpus=plan.threads,
            runtime_env={"env_vars": env},
            # soft: a lost node's slot starts elsewhere (it waits for room there)
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node, soft=True),
        ).remote(spec)
        return _Actor(slot, handle, handle.start.remote(), label=node.name)

    def node(self, a: _Actor) -> str | None:
        """The node it runs on (pages per node in the summary): where it says it is once it is
        ready, the node its slot was planned on before."""
        if a.node is not None:
            return self._names.get(a.node, a.where)
        return a.label

    def send(self, a: _Actor, tasks: list[Task]) -> tuple[int, list[Event]]:
        idle = not a.calls
        for t in tasks:
            src = _absolute(t.item.src)  # actors do not share the driver's working directory
            planned = getattr(t.item, "stat", None)  # (size, mtime_ns) when the driver hashed it
            ref = a.handle.render.remote(t.id, src, t.item.index, planned)
            a.calls.append(_Call(ref, "render", [t.id], getattr(src, "path", None)))
        ids = [t.id for t in tasks]
        a.calls.append(_Call(a.handle.parse.remote(ids), "parse", ids))
        return len(tasks), self._begun(a) if idle else []

    def _begun(self, a: _Actor) -> list[Event]:
        """The actor begins its next call now: what that call's pages enter."""
        if not a.calls:
            return []
        call = a.calls[0]
        if call.kind == "render":
            return [StageEntered(call.task_ids[0], Stage.RENDER)]
        waiting = [t for t in call.task_ids if t in a.waiting]
        return [StageEntered(t, Stage.ENGINE, len(waiting)) for t in waiting]

    def wait(self, handles: list[_Actor], timeout: float) -> None:
        refs = [a.calls[0].ref if a.ready else a.start_ref for a in handles if a.calls or not a.ready]
        if refs:
            self.ray.wait(refs, num_returns=1, timeout=timeout)
        else:
            time.sleep(timeout)

    def _answered(self, ref: Any) -> bool:
        return bool(self.ray.wait([ref], timeout=0)[0])

    def receive(self, a: _Actor) -> Iterator[Event]:
        ray = self.ray
        if not a.ready:
            if not self._answered(a.start_ref):
                return
            try:
                kind, value = ray.get(a.start_ref)
            except Exception as exc:  # noqa: BLE001 - the actor died while loading
                yield self._lost(a, exc)
                return
            if kind == "fatal":
                yield Fatal(str(value))
                return
            a.node, a.where = value["node"], f"{value['host']} ({value['ip']})"
            refused = self._refuse(value)
            if refused is not None:
                yield Fatal(refused)
                return
            a.ready = True
            yield Ready(value["pid"])
        while a.calls and self._answered(a.calls[0].ref):
            call = a.calls.popleft()
            try:
                value = ray.get(call.ref)
            except Exception as exc:  # noqa: BLE001 - the actor died (or its method raised)
                yield self._lost(a, exc)
                return
            if call.kind == "render":
                outcome, rss, notices = value
                if outcome is None:
                    a.waiting.add(call.task_ids[0])
                else:
                    yield Done(call.task_ids[0], _gone_here(outcome, call.path), rss, 0)
            else:
                answered, rss, n, notices = value
                for tid, outcome in answered:
                    a.waiting.discard(tid)
                    yield Done(tid, outcome, rss, n)
                missing = tuple(t for t in call.task_ids if t in a.waiting)
                if missing:
                    a.waiting.difference_update(missing)
                    yield Unanswered(missing)
            for message in notices:
                yield Notice(message)
            yield from self._begun(a)

    def _refuse(self, who: dict[str, Any]) -> str | None:
        """Why the driver will not use this worker (exit 2), or None: another Ray or Python than
        the driver's, or another engine fingerprint (its node's package, models or export differ)."""
        import platform

        node = f"the worker on node {who['host']} ({who['ip']})"
        mismatch = version_mismatch(
            {"ray": self.ray.__version__, "python": platform.python_version()},
            {"ray": who["ray"], "python": who["python"]},
        )
        if mismatch is not None:
            return f"{node} runs {mismatch}: {SAME_VERSIONS}"
        theirs, ours = who["fingerprints"], self.spec.fingerprints
        other = next((kind for kind in ours if theirs.get(kind) != ours[kind]), None)
        if other is not None:
            return (
                f"{node} computes engine fingerprint {theirs.get(other)}, the driver {ours[other]}: "
                "its mineru-cli version, engine packages, models or export differ from the driver's "
                "(install the same ones on every node); refused, so no page gets another engine's answer"
            )
        return None

    def _lost(self, a: _Actor, exc: BaseException) -> Lost:
        """An actor whose call raised: killed (its other answers are never read); whether its
        node went away (then its pages are not to blame). The private instance's node is its
        only one: nothing could run again, so the run stops (SetupError)."""
        self._kill(a)
        if self._node_died(a, exc):
            if self.address is None:
                raise SetupError(
                    f"the private Ray instance lost its node ({_brief(exc)}): its raylet died (killed, "
                    "`ray stop`, out of memory?); the pages finished are in the journal, re-run to resume"
                )
            return Lost(f"node {a.where} lost: {_brief(exc)}", node=True)
        return Lost(_brief(exc))

    def _node_died(self, a: _Actor, exc: BaseException) -> bool:
        if "its node has died" in str(exc):  # Ray's ActorDiedError for a node that went away
            return True
        if a.node is None:
            return False
        try:
            nodes = self.ray.nodes()
        except Exception:  # noqa: BLE001 - no answer from the GCS: not evidence of a node loss
            return False
        return any(n.get("NodeID") == a.node and not n.get("Alive", True) for n in nodes)

    def _kill(self, a: _Actor) -> None:
        try:
            self.ray.kill(a.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def stop(self, a: _Actor, kill: bool) -> None:
        self._kill(a)  # an actor holds nothing worth a graceful exit: its results are all read

    def kill_now(self, a: _Actor) -> None:
        self.ray.kill(a.handle, no_restart=True)

    def rss(self, a: _Actor) -> int | None:
        return None  # as the actor last reported it

    def start_hint(self) -> str:
        return ""


class RayExecutor(Scheduler):
    """The Ray executor (see executor.Executor): parses PageWork items on Ray actors and yields
    a Finished for each page as it finishes, in completion order. `address`: the cluster to
    attach to (None: a private local instance of `num_cpus` CPUs, default workers x threads)."""

    transport: RayTransport

    def __init__(
        self,
        *args: Any,
        address: str | None = None,
        num_cpus: int | None = None,
        node_workers: int | None = None,
        pages: int | None = None,
        **kwargs: Any,
    ):
        """`node_workers`: --workers, per node; `pages`: pages to do when known (a small run
        starts no more workers than that); the slots are planned per node once Ray is up."""
        self.address, self.num_cpus = address, num_cpus
        self.node_workers, self.pages = node_workers, pages
        super().__init__(*args, **kwargs)

    def make_transport(self) -> RayTransport:
        cpus = self.num_cpus or self.n * max(1, self.spec.threads)
        return RayTransport(self.spec, self.info, self.address, cpus, self.node_workers, self.pages)

    def __enter__(self) -> RayExecutor:
        super().__enter__()  # Ray up, the nodes planned: one slot per planned worker
        self.set_slots(len(self.transport.slots))
        return self

    def node_plans(self) -> list[dict[str, Any]]:
        return self.transport.node_plans()


@contextlib.contextmanager
def _sigterm_held_off() -> Iterator[None]:
    """Block SIGTERM in this thread while the private instance starts: its processes (GCS,
    raylet, and the actors they start) inherit the mask, as they inherit the SIGINT that Ray
    blocks for them. A SIGTERM to the whole process group or cgroup (`timeout`, `kill -- -PGID`,
    a service manager's stop) then reaches the driver alone, which stops gracefully with its
    actors still there to finish their pages; `ray.shutdown()` ends them with SIGKILL once its
    SIGTERM goes unanswered (a second per process). A SIGTERM to the driver meanwhile is not held
    off (the driver's other threads take it) and meets the handler ray.init installs: open() turns
    its exit into the run's stop."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks, no process groups
        yield
        return
    held = {signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        if signal.SIGTERM not in previous:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _absolute(src: Any) -> Any:
    """The source file with an absolute path."""
    path = getattr(src, "path", None)
    if path is None or not dataclasses.is_dataclass(src) or isinstance(src, type):
        return src
    return dataclasses.replace(src, path=Path(path).absolute())


def _init_error(exc: BaseException, where: str) -> str:
    """ray.init's failure, said plainly: a cluster of another Ray or Python, or the error itself."""
    import platform
    import re

    found = re.search(r"Version mismatch: The cluster was started with:\s*Ray:\s*(\S+)\s*Python:\s*(\S+)", str(exc))
    if found:
        import ray

        theirs = {"ray": found.group(1), "python": found.group(2)}
        mismatch = version_mismatch({"ray": ray.__version__, "python": platform.python_version()}, theirs)
        if mismatch is not None:
            return f"the Ray cluster {where} runs {mismatch}: {SAME_VERSIONS}"
    return f"could not start or reach Ray {where}: {type(exc).__name__}: {exc}"


def version_mismatch(driver: dict[str, str], worker: dict[str, str]) -> str | None:
    """Where the worker's Ray or Python differs from the driver's (Ray refuses a Python that
    differs in its patch level too): "Ray X on Python Y, the driver Ray A on Python B"; else None."""
    if (driver["ray"], driver["python"]) == (worker["ray"], worker["python"]):
        return None
    theirs = f"Ray {worker['ray']} on Python {worker['python']}"
    return f"{theirs}, the driver Ray {driver['ray']} on Python {driver['python']}"


def _check_planned(path: Path, planned: tuple[int, int]) -> PageOutcome | None:
    """This node's file against the driver's plan: None if it is the same (size and mtime), else
    the page's error record."""
    import socket

    here = socket.gethostname()
    try:
        st = os.stat(path)
    except OSError as exc:
        return PageOutcome.failed(
            ErrorKind.NOT_FOUND if isinstance(exc, FileNotFoundError) else ErrorKind.UNREADABLE,
            Stage.OPEN,
            f"{path} cannot be read on node {here} ({exc.strerror or exc}); {SHARED}",
            0.0,
        )
    if (st.st_size, st.st_mtime_ns) == tuple(planned):
        return None
    size, mtime = planned
    return PageOutcome.failed(
        ErrorKind.UNREADABLE,
        Stage.OPEN,
        f"{path} on node {here} is {st.st_size} bytes, modified {_when(st.st_mtime_ns)}; the driver planned "
        f"{size} bytes, modified {_when(mtime)}: the file changed since, or this node sees another copy ({SHARED})",
        0.0,
    )


def _gone_here(outcome: PageOutcome, path: Path | None) -> PageOutcome:
    """A page whose file its node could not find (_check_planned, or its opening there), said as
    the process pool says it where the driver cannot find the file either: it was removed (or
    its link left dangling) since the run planned it. The node's advice to share the inputs is
    wrong then, and on a private instance, whose node is the driver's machine, always."""
    if path is None or outcome.error is None or outcome.error.kind is not ErrorKind.NOT_FOUND:
        return outcome
    from ..inputs import os_error

    try:
        os.stat(path)
    except FileNotFoundError as exc:
        gone = os_error(exc, Stage.OPEN)
        return PageOutcome.failed(gone.kind, gone.stage, gone.message, outcome.timings.get("total", 0.0))
    except OSError:  # there, but not to be read here either: the node's words stand
        pass
    return outcome


def _when(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mtime_ns / 1e9)) + f".{mtime_ns % 10**9:09d} UTC"


# The client's opening of an HTTP/2 connection (gRPC's transport) and an empty SETTINGS frame:
# a Ray head's GCS, a gRPC server, answers with a SETTINGS frame of its own.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type, the 4th byte of a frame's 9-byte header


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """The cluster at a HOST:PORT address, or the one `auto` stands for, must answer as a Ray head
    does. ray.init retries an address that refuses the connection, never answers, or answers in
    another protocol (a Redis, a web server) for about 12 minutes, Ray's own log lines on stderr
    meanwhile, even under --quiet."""
    import socket

    if address == "auto":
        address = _auto_address() or address
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return  # a TLS cluster answers a TLS handshake, not a plain HTTP/2 opening
            conn.sendall(_HTTP2_PREFACE)
            head = b""
            while len(head) < 9 and (got := conn.recv(64)):
                head += got
    except OSError as exc:
        raise ConnectionError(f"no Ray cluster answers at {address} ({exc})") from None
    if len(head) < 9 or head[3] != _SETTINGS:
        said = f"it answered {head[:40].decode('ascii', 'replace')!r}" if head else "it closed the connection"
        raise ConnectionError(
            f"no Ray cluster answers at {address}: something listens there but does not speak gRPC as a "
            f"Ray head does ({said}); give the head's GCS address (`ray start --head` prints it; port 6379 "
            "by default)"
        )


def _auto_address() -> str | None:
    """The HOST:PORT `--ray-address auto` stands for where Ray's documented RAY_ADDRESS names it;
    None otherwise: `auto` then means the cluster last started on this machine, which only Ray's
    private modules can find, so ray.init looks for it and says where there is none."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    return address if address and address != "auto" else None


class _Relay(logging.Handler):
    """Ray's log records at WARNING and above, as our info lines ("ray: ...")."""

    def __init__(self, info: Callable[[str], None]):
        super().__init__(logging.WARNING)
        self._info = info

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._info(f"ray: {record.getMessage()}")
        except Exception:  # noqa: BLE001 - logging must never break the run
            pass


def _brief(exc: BaseException) -> str:
    """The first line of a Ray error (they run to many lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
