"""The Ray executor (`mineru parse --executor ray`): the pool's failure contract on Ray actors.

Design
  * One actor per worker slot (`max_restarts=0, max_task_retries=0`: Ray never re-runs
    anything; the driver owns every retry and blame decision, as pool.py does). Each actor
    builds one engine from the WorkerSpec; its thread variables reach it through the actor's
    `runtime_env` (the driver's environment does not reach workers on a cluster).
  * A batch is one `render` call per page (render + cache lookup; a hit or a failure is
    answered at once) and one `engine` call for the misses (engine, then cache stores),
    submitted together; the actor runs them in order. Pages cross as (absolute path, index):
    actors do not share the driver's working directory, and pixels never cross.
  * Deadlines are the driver's: a render call gets `page_timeout` from the moment the call
    before it answered, the engine call of n waiting pages n x `page_timeout`. On expiry the
    actor is killed (`ray.kill`: a process kill, a hung native call cannot ignore it) and a
    fresh one takes its slot.
  * Blame, as in the pool: the pages the lost actor had started are the suspects. One: it gets
    the record (`timeout`, or `failed` with kind `crash`). Several: each is re-queued solo.
    Pages not started go back to the queue as they were. Results of a replaced actor are
    never read, so every page gets exactly one record.
  * Memory: the actor reports its RSS after each call; above `max_rss` it gets no more pages
    and is replaced once it has answered what it holds.
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
from typing import Any, Callable, Iterable, Iterator

from ..core.errors import SetupError
from ..core.words import Stage
from .blame import Task, crashed, split_lost, timed_out
from .executor import Finished, PageWork
from .messages import PageOutcome, WorkerSpec
from .pool import START_FAILURES, START_TIMEOUT, TICK, PoolStats
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
    spawned: float = field(default_factory=time.monotonic)
    ready: bool = False
    retiring: bool = False
    tasks: dict[int, Task] = field(default_factory=dict)
    calls: deque[_Call] = field(default_factory=deque)
    deadline: float | None = None
    rss: int = 0
    pages: int = 0

    def started(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.started is not None]


class RayExecutor:
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
        self.ray = import_ray()
        self.n = max(1, workers)
        self.spec = spec
        self.page_timeout = page_timeout
        self.max_rss = max_rss
        self.page_batch = max(1, spec.page_batch)
        self.warn, self.info = warn, info
        self.address = address
        self.num_cpus = num_cpus or self.n * max(1, spec.threads)
        self.actors: list[_Actor | None] = [None] * self.n
        self.stats = PoolStats(workers=self.n)
        self.left: list[PageWork] = []
        self._queue: deque = deque()
        self._finished: list[Finished] = []
        self._task_ids = 0
        self._start_failures = 0
        self._warned: set[str] = set()
        self._stopping = False
        self._started_ray = False
        self._temp_dir: str | None = None
        self._actor_cls: Any = None
        self._ray_log: tuple[list[logging.Handler], bool] | None = None

    # -- Ray and actors --------------------------------------------------------------------
    def _init_ray(self) -> None:
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

    def _restore_logging(self) -> None:
        if self._ray_log is not None:
            handlers, propagate = self._ray_log
            ray_log = logging.getLogger("ray")
            ray_log.handlers[:] = handlers
            ray_log.propagate = propagate
            self._ray_log = None

    def _cleanup_temp(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _spawn(self, slot: int) -> None:
        handle = self._actor_cls.options(name=None).remote(self.spec)
        self.actors[slot] = _Actor(slot, handle, handle.start.remote())

    def _kill(self, a: _Actor) -> None:
        try:
            self.ray.kill(a.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        if self.actors[a.slot] is a:
            self.actors[a.slot] = None

    def close(self, kill: bool = False) -> None:
        for a in list(self.actors):
            if a is not None:
                self._kill(a)
        if self._started_ray:
            self._started_ray = False
            try:
                self.ray.shutdown()  # a private instance stops; an attached driver only disconnects
            except Exception:  # noqa: BLE001
                pass
        self._restore_logging()
        self._cleanup_temp()

    def kill_all(self) -> None:
        """From a signal handler: the actors die with the driver anyway; this makes it prompt."""
        for a in self.actors:
            if a is not None:
                try:
                    self.ray.kill(a.handle, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass

    def __enter__(self) -> RayExecutor:
        if not self._started_ray:
            self._init_ray()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)

    # -- the loop --------------------------------------------------------------------------
    def run(
        self,
        items: Iterable[PageWork],
        should_stop: Callable[[], bool] = lambda: False,
        grace: float = 10.0,
        on_tick: Callable[[PoolStats], None] | None = None,
    ) -> Iterator[Finished]:
        if not self._started_ray:
            self._init_ray()
        queue = self._queue = deque((item, False) for item in items)
        for slot in range(min(self.n, len(queue))):
            self._spawn(slot)
        stop_at = None
        while True:
            if should_stop() and stop_at is None:
                stop_at = time.monotonic() + grace
                self._stopping = True
            if stop_at is None:
                self._dispatch(queue)
            busy = [a for a in self.actors if a is not None and a.tasks]
            if not busy and (stop_at is not None or not queue):
                break
            if stop_at is not None and time.monotonic() > stop_at:
                for a in busy:  # in flight past the grace period: not journaled
                    queue.extendleft(reversed([(t.item, False) for t in a.tasks.values()]))
                    self._kill(a)
                break
            self._wait_and_collect(queue)
            self._check_deadlines(queue)
            self._update_stats(queue)
            yield from self._drain()
            if on_tick is not None:
                on_tick(self.stats)
        self._update_stats(queue)
        yield from self._drain()
        self.left = [item for item, _ in queue]

    def _drain(self) -> Iterator[Finished]:
        done, self._finished = self._finished, []
        yield from done

    def _dispatch(self, queue: deque) -> None:
        """An idle ready actor gets one batch: up to page_batch pages, a solo page alone."""
        for a in self.actors:
            if a is None or not a.ready or a.retiring or a.tasks or not queue:
                continue
            batch: list[tuple[PageWork, bool]] = []
            while queue and len(batch) < self.page_batch:
                item, solo = queue[0]
                if solo and batch:
                    break
                batch.append(queue.popleft())
                if solo:
                    break
            now = time.monotonic()
            ids = []
            for item, solo in batch:
                self._task_ids += 1
                tid = self._task_ids
                ids.append(tid)
                src = _absolute(item.src)  # actors do not share the driver's working directory
                a.tasks[tid] = Task(tid, item, solo, now)
                a.calls.append(_Call(a.handle.render.remote(tid, src, item.index), "render", [tid]))
            a.calls.append(_Call(a.handle.parse.remote(ids), "parse", ids))
            self._arm(a, now)

    def _arm(self, a: _Actor, now: float) -> None:
        """The actor begins its next call now: start that call's clock."""
        if not a.calls:
            a.deadline = None
            return
        call = a.calls[0]
        if call.kind == "render":
            task = a.tasks.get(call.task_ids[0])
            if task is not None:
                task.started, task.stage = now, Stage.RENDER
            a.deadline = now + self.page_timeout
        else:
            waiting = [a.tasks[t] for t in call.task_ids if t in a.tasks]
            for t in waiting:
                t.stage = Stage.ENGINE
            a.deadline = now + max(1, len(waiting)) * self.page_timeout

    def _wait_and_collect(self, queue: deque) -> None:
        ray = self.ray
        live = [a for a in self.actors if a is not None]
        refs = [a.calls[0].ref if a.ready else a.start_ref for a in live if a.calls or not a.ready]
        timeout = TICK
        now = time.monotonic()
        for a in live:
            if a.deadline is not None:
                timeout = min(timeout, max(0.0, a.deadline - now))
        if not refs:
            time.sleep(timeout)
            return
        ray.wait(refs, num_returns=1, timeout=timeout)
        done = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
        for a in live:
            if self.actors[a.slot] is not a:
                continue
            if not a.ready:
                if a.start_ref in done:
                    self._started(a)
                continue
            while a.calls and self.actors[a.slot] is a:
                call = a.calls[0]
                if call.ref not in done:
                    r, _ = ray.wait([call.ref], timeout=0)
                    if not r:
                        break
                self._answer(a, call, queue)

    def _started(self, a: _Actor) -> None:
        try:
            kind, value = self.ray.get(a.start_ref)
        except Exception as exc:  # noqa: BLE001 - the actor died while loading
            self._kill(a)
            self._start_failures += 1
            if self._start_failures >= START_FAILURES:
                raise SetupError(f"Ray worker actors keep dying while starting: {_brief(exc)}") from None
            if self._want_worker():
                self._spawn(a.slot)
            return
        if kind == "fatal":
            self._kill(a)
            raise SetupError(str(value))
        a.ready = True
        self._start_failures = 0

    def _answer(self, a: _Actor, call: _Call, queue: deque) -> None:
        try:
            value = self.ray.get(call.ref)
        except Exception as exc:  # noqa: BLE001 - the actor died (or its method raised)
            self._died(a, queue, exc)
            return
        a.calls.popleft()
        now = time.monotonic()
        if call.kind == "render":
            outcome, rss, notices = value
            if outcome is not None:
                task = a.tasks.pop(call.task_ids[0], None)
                if task is not None:
                    self._finish(a, task, outcome, rss, 0)
        else:
            answered, rss, n, notices = value
            for tid, outcome in answered:
                task = a.tasks.pop(tid, None)
                if task is not None:
                    self._finish(a, task, outcome, rss, n)
            if a.tasks:  # not answered (against the actor's contract): each again, alone
                queue.extendleft(reversed([(t.item, True) for t in a.tasks.values()]))
                a.tasks.clear()
        a.rss = rss
        for message in notices:
            if message not in self._warned:
                self._warned.add(message)
                self.warn(message)
        self._arm(a, now)
        if self.max_rss and rss > self.max_rss and not a.retiring:
            self.info(
                f"worker {a.slot}: RSS {rss / (1 << 20):.0f} MB above --max-worker-rss "
                f"{self.max_rss / (1 << 20):.0f} MB after {a.pages} pages; recycled"
            )
            self.stats.recycled += 1
            a.retiring = True
        if a.retiring and not a.tasks:
            self._kill(a)
            if self._want_worker():
                self._spawn(a.slot)

    def _finish(self, a: _Actor, task: Task, outcome: PageOutcome, rss: int, batch: int) -> None:
        a.pages += 1
        self.stats.done += 1
        self._finished.append(Finished(task.item, outcome, a.slot, rss, batch))

    def _lost(self, a: _Actor, queue: deque, fault: Callable[[Task], PageOutcome]) -> None:
        """The pages of a worker that died or was killed: blame a lone suspect, retry the
        suspects of a batch alone, re-queue the pages it had not started (blame.split_lost)."""
        lone, retry, later = split_lost(a.tasks.values())
        if lone is not None:
            self._finish(a, lone, fault(lone), a.rss, 1)
        elif retry:
            self.stats.retried += len(retry)
            self.info(
                f"worker {a.slot}: lost with {len(retry)} pages of a batch in the "
                f"{a.started()[-1].stage} stage; retrying each alone"
            )
        queue.extendleft(reversed(retry + later))
        a.tasks.clear()

    def _died(self, a: _Actor, queue: deque, exc: BaseException) -> None:
        self._kill(a)
        self.stats.restarts += 1
        now = time.monotonic()
        why = _brief(exc)
        self._lost(a, queue, lambda t: crashed(t, now, f"Ray worker actor died ({why})"))
        if self._want_worker():
            self._spawn(a.slot)

    def _check_deadlines(self, queue: deque) -> None:
        now = time.monotonic()
        for a in list(self.actors):
            if a is None:
                continue
            if a.deadline is not None and now > a.deadline:
                if a.calls:  # an answer may have arrived just in time: take it rather than kill
                    r, _ = self.ray.wait([a.calls[0].ref], timeout=0)
                    if r:
                        continue  # collected on the next turn
                self._kill(a)
                self.stats.restarts += 1
                self._lost(a, queue, lambda t: timed_out(t, now, self.page_timeout))
                if self._want_worker():
                    self._spawn(a.slot)
            elif not a.ready and now - a.spawned > START_TIMEOUT:
                self._kill(a)
                self._start_failures += 1
                if self._start_failures >= START_FAILURES:
                    raise SetupError(f"Ray worker actors did not start within {START_TIMEOUT:g} s")
                self._spawn(a.slot)

    def _want_worker(self) -> bool:
        return bool(self._queue) and not self._stopping

    def _update_stats(self, queue: deque) -> None:
        live = [a for a in self.actors if a is not None]
        self.stats.busy = sum(bool(a.tasks) for a in live)
        self.stats.starting = sum(not a.ready for a in live)
        self.stats.queued = len(queue)
        self.stats.inflight = [len(a.tasks) for a in live]
        self.stats.rss = [a.rss for a in live]  # as the actors last reported it


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
