"""The main-process side: a pool of worker processes, each fed small batches of pages.

Design
  * One duplex pipe per worker (no shared queue: a worker killed while holding a shared
    queue's lock would wedge every other worker). The main process waits on all pipes and
    all process sentinels at once (`multiprocessing.connection.wait`).
  * Batches and back-pressure: a worker holds at most `page_batch` pages in flight (sent and
    not yet answered); it gets more only as it answers, so at most workers x page_batch pages
    are loaded/rendered at any time; the rest is a list of (source, page index) in the main
    process. Pixels never cross the process boundary. The worker groups what it holds into
    one engine call (see worker.py).
  * Timeouts are not cooperative: the main process keeps each worker's deadline and SIGKILLs
    the worker when it passes (a hung native call cannot ignore that), then starts a fresh
    worker. Deadlines: render + cache lookup get `page_timeout` per page, from the moment the
    worker starts rendering it; the engine stage of a batch of n pages (and the cache stores
    after it) gets n x `page_timeout`, from the moment the batch entered the engine stage.
  * Crashes: a worker that dies (segfault, abort, SIGKILL, OOM killer) is seen through its
    sentinel / pipe EOF, and a fresh worker takes its place.
  * Blame: the pages a dead or killed worker had started (it renders them one by one, then
    parses the misses together) are the suspects. One suspect: it gets the record (`timeout`,
    or `failed` with error kind `crash`, the exit code or signal, the stage it was in). Several
    (a batch died in its engine stage): none is blamed yet; each is re-queued "solo", at the
    front of the queue, to be sent alone to an idle worker, where a poison page then costs
    only itself. Pages the worker had not started yet are re-queued as they were.
  * Memory: workers report their RSS after each page; above `max_rss` a worker gets no more
    pages and is retired and replaced (recycling) once it has answered those it holds.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Callable, Iterable, Iterator

from ..core.errors import SetupError
from ..core.words import Stage
from .blame import Task, crashed, split_lost, timed_out
from .executor import Finished, PageWork
from .messages import Done, Fatal, Finish, FromWorker, Notice, PageOutcome, PageTask, Ready, StageEntered, WorkerSpec
from .worker import WORKER_ENV, rss_bytes, worker_main

_SPAWN_LOCK = threading.Lock()
START_TIMEOUT = 300.0  # seconds a fresh worker may take to import and load its models
START_FAILURES = 3  # workers dying before they are ready, in a row: give up (exit 2)
TICK = 0.25  # wake-up interval: signals, deadlines, heartbeats


def _script_hint() -> str:
    """When a user's script drives the run: the usual cause of workers that die at start."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if getattr(main, "__file__", None) and not (spec and spec.name.startswith("mineru_cli")):
        return (
            '; a script that calls mineru_cli.parse() must call it under `if __name__ == "__main__":` '
            "(worker processes are spawned and import the script again)"
        )
    return ""


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (killed: out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


@dataclass
class PoolStats:
    workers: int = 0  # worker slots
    busy: int = 0  # holding at least one page now
    starting: int = 0  # spawning / loading models
    queued: int = 0  # pages not yet handed to a worker (pool queue depth)
    done: int = 0  # pages answered by the pool
    restarts: int = 0  # workers replaced after a crash or timeout
    recycled: int = 0  # workers replaced for RSS
    retried: int = 0  # pages re-queued alone after their batch lost its worker
    inflight: list[int] = field(default_factory=list)  # pages held, per live worker
    rss: list[int] = field(default_factory=list)  # per live worker, bytes

    def as_dict(self) -> dict:
        return {
            "workers": self.workers,
            "busy": self.busy,
            "starting": self.starting,
            "queued": self.queued,
            "inflight": list(self.inflight),
            "done": self.done,
            "restarts": self.restarts,
            "recycled": self.recycled,
            "retried": self.retried,
            "rss_mb": [round(r / (1 << 20)) for r in self.rss],
        }


class _Worker:
    def __init__(self, slot: int, proc, conn):
        self.slot, self.proc, self.conn = slot, proc, conn
        self.ready = False
        self.retiring = False  # above --max-worker-rss: no more pages, retire when empty
        self.spawned = time.monotonic()
        self.tasks: dict[int, Task] = {}  # in flight, in the order sent
        self.deadline: float | None = None  # kill after this (monotonic), while a page is started
        self.last_stage: Stage | None = None
        self.rss = 0
        self.pages = 0

    @property
    def busy(self) -> bool:
        return bool(self.tasks)

    def started(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.started is not None]


class WorkerPool:
    """The process executor (see executor.Executor): parses PageWork items on worker processes
    and yields a Finished for each page as it finishes, in completion order."""

    def __init__(
        self,
        workers: int,
        spec: WorkerSpec,
        page_timeout: float,
        max_rss: int,
        warn: Callable[[str], None],
        info: Callable[[str], None] = lambda m: None,
    ):
        self.n = max(1, workers)
        self.spec = spec
        self.page_timeout = page_timeout
        self.max_rss = max_rss
        self.page_batch = max(1, spec.page_batch)
        self.warn, self.info = warn, info
        self.ctx = mp.get_context("spawn")
        self.workers: list[_Worker | None] = [None] * self.n
        self.stats = PoolStats(workers=self.n)
        self._task_ids = 0
        self._start_failures = 0
        self._warned: set[str] = set()
        self._queue: deque = deque()  # (item, solo)
        self._finished: list[Finished] = []
        self._stopping = False
        self._rss_at = 0.0
        self.left: list[PageWork] = []  # after run(): the items not finished

    # -- processes -----------------------------------------------------------------------
    def _spawn(self, slot: int) -> None:
        parent, child = self.ctx.Pipe(duplex=True)
        main_thread = threading.current_thread() is threading.main_thread()
        proc = self.ctx.Process(
            target=worker_main,
            args=(child, self.spec, os.getpid(), main_thread),
            daemon=True,
            name=f"mineru-worker-{slot}",
        )
        # The child inherits this environment at exec: thread counts are in place before the
        # interpreter imports numpy / onnxruntime (even via the __main__ re-import of spawn).
        # WORKER_ENV tells a script that the spawn re-import runs (one without a __main__ guard)
        # that it is inside our worker. The lock keeps two pools in two threads from mixing envs.
        env = {**self.spec.env, WORKER_ENV: "1"}
        with _SPAWN_LOCK:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                proc.start()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        child.close()
        self.workers[slot] = _Worker(slot, proc, parent)

    def _reap(self, w: _Worker, kill: bool) -> int | None:
        if kill and w.proc.is_alive():
            w.proc.kill()
        w.proc.join(timeout=5)
        if w.proc.is_alive():  # did not exit when asked: no more patience
            w.proc.kill()
            w.proc.join(timeout=5)
        try:
            w.conn.close()
        except OSError:
            pass
        self.workers[w.slot] = None
        return w.proc.exitcode

    def _retire(self, w: _Worker) -> None:
        try:
            w.conn.send(Finish())
        except OSError:
            pass
        self._reap(w, kill=False)

    def close(self, kill: bool = False) -> None:
        for w in list(self.workers):
            if w is not None:
                if kill or w.busy or not w.ready:
                    self._reap(w, kill=True)
                else:
                    self._retire(w)

    def kill_all(self) -> None:
        """From a signal handler: no joins, no pipes."""
        for w in self.workers:
            if w is not None:
                try:
                    w.proc.kill()
                except Exception:  # noqa: BLE001
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close(kill=exc[0] is not None)

    # -- the loop ------------------------------------------------------------------------
    def run(
        self,
        items: Iterable[PageWork],
        should_stop: Callable[[], bool] = lambda: False,
        grace: float = 10.0,
        on_tick: Callable[[PoolStats], None] | None = None,
    ) -> Iterator[Finished]:
        """Parse all items, yielding each page's Finished as it comes. After a stop request,
        pages in flight get `grace` seconds; `self.left` then holds the items not finished
        (in flight past the grace period, and never handed out)."""
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
            busy = [w for w in self.workers if w is not None and w.busy]
            if not busy and (stop_at is not None or not queue):
                break
            if stop_at is not None and time.monotonic() > stop_at:
                for w in busy:  # in flight past the grace period: not journaled
                    queue.extendleft(reversed([(t.item, False) for t in w.tasks.values()]))
                    self._reap(w, kill=True)
                break
            self._wait()
            self._collect(queue)
            self._check_deadlines(queue)
            self._update_stats(queue)
            yield from self._drain()
            if on_tick is not None:
                on_tick(self.stats)
        self._update_stats(queue, rss=False)
        yield from self._drain()
        self.left = [item for item, _ in queue]

    def _drain(self) -> Iterator[Finished]:
        done, self._finished = self._finished, []
        yield from done

    def _dispatch(self, queue: deque) -> None:
        """Fill free slots. A solo page goes only to a worker holding nothing, and alone."""
        for w in self.workers:
            if w is None or not w.ready or w.retiring:
                continue
            while queue:
                item, solo = queue[0]
                if (w.tasks and solo) or len(w.tasks) >= self.page_batch or any(t.solo for t in w.tasks.values()):
                    break
                queue.popleft()
                self._task_ids += 1
                try:
                    w.conn.send(PageTask(self._task_ids, item.src, item.index, solo))
                except OSError:  # died while idle: its sentinel will tell; retry the item
                    queue.appendleft((item, solo))
                    break
                w.tasks[self._task_ids] = Task(self._task_ids, item, solo, time.monotonic())

    def _wait(self) -> None:
        live = [w for w in self.workers if w is not None]
        timeout = TICK
        now = time.monotonic()
        for w in live:
            if w.deadline is not None:
                timeout = min(timeout, max(0.0, w.deadline - now))
        waitables = [w.conn for w in live] + [w.proc.sentinel for w in live]
        if waitables:
            wait(waitables, timeout)
        else:
            time.sleep(timeout)

    def _collect(self, queue: deque) -> None:
        for w in list(self.workers):
            if w is None:
                continue
            dead = False
            try:
                while w.conn.poll():
                    self._handle(w, w.conn.recv())
                    if self.workers[w.slot] is not w:  # retired / replaced while handling
                        break
            except (EOFError, OSError):
                dead = True
            if self.workers[w.slot] is not w:
                continue
            if dead or not w.proc.is_alive():
                self._died(w, queue)

    def _finish(self, w: _Worker, task: Task, outcome: PageOutcome, rss: int, batch: int) -> None:
        self.stats.done += 1
        self._finished.append(Finished(task.item, outcome, w.slot, rss, batch))

    def _handle(self, w: _Worker, msg: FromWorker) -> None:
        if isinstance(msg, Ready):
            w.ready = True
            self._start_failures = 0
        elif isinstance(msg, StageEntered):
            task = w.tasks.get(msg.task_id)
            if task is None:
                return
            now = time.monotonic()
            if task.started is None:
                task.started = now
            task.stage = msg.stage
            if msg.stage is Stage.RENDER:  # this page's own clock
                w.deadline = now + self.page_timeout
            elif msg.stage is Stage.ENGINE and w.last_stage is not Stage.ENGINE:  # the batch's clock
                w.deadline = now + msg.batch * self.page_timeout
            w.last_stage = msg.stage
        elif isinstance(msg, Notice):
            if msg.message not in self._warned:
                self._warned.add(msg.message)
                self.warn(msg.message)
        elif isinstance(msg, Fatal):
            self._reap(w, kill=True)
            raise SetupError(msg.message)
        elif isinstance(msg, Done):
            task = w.tasks.pop(msg.task_id, None)
            if task is None:
                return
            w.rss = msg.rss
            w.pages += 1
            if not w.started():
                w.deadline, w.last_stage = None, None
            self._finish(w, task, msg.outcome, msg.rss, msg.batch)
            if self.max_rss and msg.rss > self.max_rss and not w.retiring:
                self.info(
                    f"worker {w.slot}: RSS {msg.rss / (1 << 20):.0f} MB above --max-worker-rss "
                    f"{self.max_rss / (1 << 20):.0f} MB after {w.pages} pages; recycled"
                )
                self.stats.recycled += 1
                w.retiring = True
            if w.retiring and not w.tasks:
                self._retire(w)
                if self._want_worker():
                    self._spawn(w.slot)

    def _lost(self, w: _Worker, queue: deque, fault: Callable[[Task], PageOutcome]) -> None:
        """The pages of a worker that died or was killed: blame a lone suspect, retry the
        suspects of a batch alone, re-queue the pages it had not started (blame.split_lost)."""
        lone, retry, later = split_lost(w.tasks.values())
        if lone is not None:
            self._finish(w, lone, fault(lone), w.rss, 1)
        elif retry:
            self.stats.retried += len(retry)
            self.info(
                f"worker {w.slot}: lost with {len(retry)} pages of a batch in the "
                f"{w.started()[-1].stage} stage; retrying each alone"
            )
        queue.extendleft(reversed(retry + later))
        w.tasks.clear()

    def _died(self, w: _Worker, queue: deque) -> None:
        code = self._reap(w, kill=True)
        if w.tasks:
            self.stats.restarts += 1
            now = time.monotonic()
            self._lost(w, queue, lambda t: crashed(t, now, f"worker process died ({describe_exit(code)})"))
        elif not w.ready:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES:
                raise SetupError(f"worker processes keep dying while starting ({describe_exit(code)}){_script_hint()}")
        if self._want_worker():
            self._spawn(w.slot)

    def _check_deadlines(self, queue: deque) -> None:
        now = time.monotonic()
        for w in list(self.workers):
            if w is None:
                continue
            if w.deadline is not None and now > w.deadline:
                # A result may have arrived just in time: take it rather than kill.
                try:
                    while w.conn.poll():
                        self._handle(w, w.conn.recv())
                        if self.workers[w.slot] is not w:
                            break
                except (EOFError, OSError):
                    pass
                if self.workers[w.slot] is not w or w.deadline is None or now <= w.deadline:
                    continue
                self._reap(w, kill=True)
                self.stats.restarts += 1
                self._lost(w, queue, lambda t: timed_out(t, now, self.page_timeout))
                if self._want_worker():
                    self._spawn(w.slot)
            elif not w.ready and now - w.spawned > START_TIMEOUT:
                self._reap(w, kill=True)
                self._start_failures += 1
                if self._start_failures >= START_FAILURES:
                    raise SetupError(f"worker processes did not start within {START_TIMEOUT:g} s")
                self._spawn(w.slot)

    def _want_worker(self) -> bool:
        """Replace a worker that went away? Only while there is work it could take."""
        return bool(self._queue) and not self._stopping

    def _update_stats(self, queue: deque, rss: bool = True) -> None:
        live = [w for w in self.workers if w is not None]
        self.stats.busy = sum(w.busy for w in live)
        self.stats.starting = sum(not w.ready for w in live)
        self.stats.queued = len(queue)
        self.stats.inflight = [len(w.tasks) for w in live]
        now = time.monotonic()
        if rss and now - self._rss_at >= 1.0:  # measured from outside: busy workers too
            self._rss_at = now
            self.stats.rss = [rss_bytes(w.proc.pid) if w.proc.pid else 0 for w in live]
