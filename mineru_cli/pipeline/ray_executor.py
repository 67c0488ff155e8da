"""The Ray executor (`mineru parse --executor ray`): the scheduler's loop (scheduler.py) over
Ray actors, so the pool's failure contract holds on a cluster.

Design
  * One actor per worker slot (`max_restarts=0, max_task_retries=0`: Ray never re-runs
    anything; the scheduler owns every retry and blame decision). Each actor builds one engine
    from the WorkerSpec; its thread variables reach it through the actor's `runtime_env` (the
    driver's environment does not reach workers on a cluster).
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

from ..core.errors import SetupError
from ..core.words import Stage
from .messages import Done, Fatal, Notice, PageOutcome, PageTask, Ready, StageEntered, WorkerSpec
from .scheduler import START_TIMEOUT, Event, Lost, Scheduler, Unanswered
from .worker import FAULTS_ENV, WORKER_ENV

RAY_PIP = "pip install 'mineru-cli[ray]'"
OBJECT_STORE_BYTES = 256 << 20  # private instance: results are small, pixels never cross


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
        """Load the engine: ("ready", pid) or ("fatal", message)."""
        from ..core.errors import SetupError as _SetupError
        from .worker import parse_faults

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's business
        self.faults = parse_faults(os.environ.get(FAULTS_ENV))
        spec = self.spec
        try:
            from ..engines import build_engine

            self.engine = build_engine(spec.engine, threads=spec.threads, spinning=spec.spinning)
            self.engine.warm_up()
            if spec.cache is not None:
                from ..cache import ResultCache

                self.cache = ResultCache(
                    path=spec.cache.path,
                    near=spec.cache.near.value,
                    redis_url=spec.cache.redis_url,
                    ttl_s=spec.cache.ttl_s,
                    warn=self.notices.append,
                )
        except _SetupError as exc:
            return "fatal", str(exc)
        except Exception as exc:  # noqa: BLE001
            return "fatal", f"worker could not start the engine: {type(exc).__name__}: {exc}"
        from ..inputs import OpenDocuments

        self.docs = OpenDocuments(spec.load)
        return "ready", os.getpid()

    def _notices(self) -> list[str]:
        out, self.notices = self.notices, []
        return out

    def render(self, task_id: int, src: Any, index: int) -> tuple[PageOutcome | None, int, list[str]]:
        """Render + cache lookup: the page's outcome (hit or failure), or None (waits for engine)."""
        from .worker import prepare_page, rss_bytes

        out = prepare_page(self.cache, self.docs, self.spec.fingerprint, src, index, lambda s: None)
        if isinstance(out, PageOutcome):
            return out, rss_bytes(), self._notices()
        out.task_id = task_id
        self.waiting[task_id] = out
        return None, rss_bytes(), self._notices()

    def parse(self, task_ids: list[int]) -> tuple[list[tuple[int, PageOutcome]], int, int, list[str]]:
        """One engine call for the pages of `task_ids` that wait; then store and answer each."""
        from .worker import _fault, engine_batch, finish_page, rss_bytes

        waiting = [self.waiting.pop(t) for t in task_ids if t in self.waiting]
        n = len(waiting)
        results: list = [None] * n
        if self.faults:
            for i, w in enumerate(waiting):
                try:
                    _fault(self.faults, w.pid)
                except Exception as exc:  # noqa: BLE001 - an injected per-page failure
                    results[i] = exc
        todo = [i for i in range(n) if results[i] is None]
        t1 = time.perf_counter()
        for i, res in zip(todo, engine_batch(self.engine, [waiting[i].page.image for i in todo])):
            results[i] = res
        share = (time.perf_counter() - t1) / max(1, len(todo))
        done = [
            (w.task_id, finish_page(self.cache, self.spec.fingerprint, w, res, share, lambda s: None))
            for w, res in zip(waiting, results)
        ]
        return done, rss_bytes(), n, self._notices()


@dataclass
class _Call:
    ref: Any  # ray.ObjectRef
    kind: str  # "render" | "parse"
    task_ids: list[int]


@dataclass
class _Actor:
    slot: int
    handle: Any
    start_ref: Any
    ready: bool = False
    calls: deque[_Call] = field(default_factory=deque)  # submitted, not answered, in order
    waiting: set[int] = field(default_factory=set)  # rendered, waiting for the engine call


class RayTransport:
    """Ray actors (see scheduler.Transport). A batch is one `render` call per page and one
    `parse` call; the actor runs them in order, so a call starts when the one before it
    answered: that is when its StageEntered is reported."""

    refill = False  # one engine call per submitted batch: a new batch only when idle

    def __init__(
        self, spec: WorkerSpec, info: Callable[[str], None], address: str | None = None, num_cpus: int | None = None
    ):
        self.ray = import_ray()
        self.spec = spec
        self.info = info
        self.address = address
        self.num_cpus = num_cpus
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
            raise SetupError(f"could not start or reach Ray {where}: {type(exc).__name__}: {exc}") from None
        finally:
            init_log.removeHandler(relay)
            init_log.propagate = init_propagate
            ray_log.handlers[:] = [relay]
            ray_log.propagate = False
            for sig, handler in saved.items():  # ray.init replaces them; ours stop the run gracefully
                if handler is not None:
                    signal.signal(sig, handler)
        self._started_ray = True
        env = {**self.spec.env, WORKER_ENV: "1"}
        if os.environ.get(FAULTS_ENV):
            env[FAULTS_ENV] = os.environ[FAULTS_ENV]
        self._actor_cls = ray.remote(
            num_cpus=max(1, self.spec.threads), max_restarts=0, max_task_retries=0, runtime_env={"env_vars": env}
        )(_PageActor)

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
        handle = self._actor_cls.options(name=None).remote(self.spec)
        return _Actor(slot, handle, handle.start.remote())

    def send(self, a: _Actor, tasks: list[PageTask]) -> tuple[int, list[Event]]:
        idle = not a.calls
        for task in tasks:
            src = _absolute(task.source)  # actors do not share the driver's working directory
            a.calls.append(_Call(a.handle.render.remote(task.task_id, src, task.index), "render", [task.task_id]))
        ids = [t.task_id for t in tasks]
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
                self._kill(a)
                yield Lost(_brief(exc))
                return
            if kind == "fatal":
                yield Fatal(str(value))
                return
            a.ready = True
            yield Ready(value)
        while a.calls and self._answered(a.calls[0].ref):
            call = a.calls.popleft()
            try:
                value = ray.get(call.ref)
            except Exception as exc:  # noqa: BLE001 - the actor died (or its method raised)
                self._kill(a)
                yield Lost(_brief(exc))
                return
            if call.kind == "render":
                outcome, rss, notices = value
                if outcome is None:
                    a.waiting.add(call.task_ids[0])
                else:
                    yield Done(call.task_ids[0], outcome, rss, 0)
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

    def crash_message(self, why: str) -> str:
        return f"Ray worker actor died ({why})"

    def start_error(self, why: str) -> str:
        return f"Ray worker actors keep dying while starting: {why}"

    def start_timeout_error(self) -> str:
        return f"Ray worker actors did not start within {START_TIMEOUT:g} s"


class RayExecutor(Scheduler):
    """The Ray executor (see executor.Executor): parses PageWork items on Ray actors and yields
    a Finished for each page as it finishes, in completion order."""

    def __init__(
        self,
        workers: int,
        spec: WorkerSpec,
        page_timeout: float,
        max_rss: int,
        warn: Callable[[str], None],
        info: Callable[[str], None] = lambda m: None,
        address: str | None = None,
        num_cpus: int | None = None,
    ):
        n = max(1, workers)
        transport = RayTransport(spec, info, address, num_cpus or n * max(1, spec.threads))
        super().__init__(transport, n, spec.page_batch, page_timeout, max_rss, warn, info)
        self.spec = spec


def _absolute(src: Any) -> Any:
    """The source file with an absolute path."""
    path = getattr(src, "path", None)
    if path is None or not dataclasses.is_dataclass(src) or isinstance(src, type):
        return src
    return dataclasses.replace(src, path=Path(path).absolute())


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT address must accept a connection (ray.init would retry for minutes)."""
    import socket

    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"no Ray cluster answers at {address} ({exc})") from None


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
