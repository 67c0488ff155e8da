"""The driver's loop, once, for every way of running pages: what is in flight, dispatch,
deadlines, blame, retries, the stop and its grace period, and recycling. The process pool
(pool.py) and the Ray actors (ray_executor.py) are transports under it: they start a worker
slot, send it pages, report what it says, and kill it.

Design
  * The scheduler owns every decision; a transport owns only its wire. A transport reports a
    worker's life as the pipe's messages (messages.py: Ready, Fatal, StageEntered, Notice,
    Done) plus two of its own here: Lost (the worker is gone; the transport has already freed
    it) and Unanswered (a batch came back without some of its pages). The pool's workers send
    those messages themselves; the Ray transport makes them from its calls' answers (a call
    starts when the one before it answers), so both get the same clocks and records.
  * Back-pressure: a slot holds at most `page_batch` pages in flight. A transport that
    `refill`s (the pool: the worker batches what arrives) is topped up as it answers; one that
    does not (Ray: one engine call per submitted batch) gets a new batch only when it holds
    nothing. A solo page goes only to a slot holding nothing, and alone.
  * Deadlines (the pool's contract): render + cache lookup get `page_timeout` from the moment a
    page enters its render stage; the engine stage of n pages gets n x `page_timeout` from the
    moment the batch enters it. Past it the slot is killed (a hung native call cannot ignore
    a kill) and a fresh one started; an answer that arrived just in time is taken instead.
  * Blame (blame.py): the pages a lost slot had started are the suspects. One: its record
    (`timeout`, or `failed` with kind `crash`). Several: each is retried alone. Pages not
    started are re-queued as they were. Answers of a slot already replaced are never read, and
    an answer for a task the scheduler no longer holds is dropped: one record per page.
  * The stop: after a stop request nothing new is handed out and pages in flight get a grace
    period. A worker lost meanwhile is not blamed (the signal that stops the run may have
    reached it too): its pages are left to the next run, as pages past the grace period are.
  * Node loss (a cluster transport): the pages of a worker whose machine went away go back to
    the queue as they were, without blame, up to NODE_REQUEUES times each (a page that keeps
    losing nodes is then blamed like any other).
  * Memory: above `max_rss` after a page, a slot gets no more pages and is retired and
    replaced once it has answered what it holds.
  * The items are a stream (the runner plans files beside the parsing): the loop pulls them as
    its queue runs short, holding at most a few batches per slot beyond what is in flight; a
    None from the stream means "none planned yet" (asked again at the next wake-up). Slots are
    started as there are pages for them, so a stream whose pages are all done starts none.
    The loop yields None at a wake-up where nothing finished: the caller's turn to emit records
    of its own (pages resumed from the journal) without waiting for a page to finish.
"""

from __future__ import annotations

import errno
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol, Union

from ..core.errors import SetupError
from ..core.words import Stage
from .blame import Task, crashed, split_lost, timed_out
from .executor import Finished, PageWork
from .messages import Done, Fatal, FromWorker, Notice, PageOutcome, Ready, StageEntered, WorkerSpec

START_TIMEOUT = 300.0  # seconds a fresh worker may take to import and load its models
START_FAILURES = 3  # workers dying before they are ready, in a row: give up (exit 2)
TICK = 0.25  # wake-up interval: signals, deadlines, heartbeats
FEED_TICK = 0.05  # wake-up interval while the queue is short and the stream may have more
AHEAD = 2  # batches per slot pulled from the stream beyond what is in flight
NODE_REQUEUES = 3  # times a page goes back blameless after losing its worker's node; then blamed


def _limit_hint(exc: OSError) -> str:
    """Which limit to raise, for the refusals a limit explains."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return " (the open-file limit: raise `ulimit -n`)"
    if exc.errno == errno.EAGAIN:
        return " (the process limit: raise `ulimit -u` or the cgroup's pids.max)"
    return ""


@dataclass(frozen=True)
class Lost:
    """The worker is gone (died, killed from outside); the transport has already freed it.
    `why`: how, for the record ("killed by SIGKILL", "ActorDiedError: ..."). `node`: the
    machine it ran on went away, so nothing it held is to blame."""

    why: str
    node: bool = False


@dataclass(frozen=True)
class Unanswered:
    """A batch came back without these pages (against the worker's contract): each again, alone."""

    task_ids: tuple[int, ...]


Event = Union[FromWorker, Lost, Unanswered]


class Transport(Protocol):
    """What carries pages to one kind of worker. `handle`s are the transport's own objects."""

    refill: bool  # top a worker up as it answers (True), or a new batch only when it holds none
    noun: str  # what a worker is, in messages: "worker process", "Ray worker actor"
    nouns: str  # and several of them: "worker processes", "Ray worker actors"

    def open(self) -> None:
        """Get ready to start workers (idempotent)."""

    def close(self) -> None:
        """After every worker has been stopped: free what open() took."""

    def start(self, slot: int) -> Any:
        """Start a worker for `slot`; it reports Ready (or Fatal, or is Lost) when loaded."""

    def send(self, handle: Any, tasks: list[Task]) -> tuple[int, list[Event]]:
        """Hand pages over: how many were delivered (the rest go back to the queue) and the
        events already known (a page that starts now)."""

    def wait(self, handles: list[Any], timeout: float) -> None:
        """Block until any worker has something to say, or `timeout` seconds."""

    def receive(self, handle: Any) -> Iterator[Event]:
        """What the worker has said since, in order; Lost last if it is gone."""

    def stop(self, handle: Any, kill: bool) -> None:
        """Let the worker finish and exit (kill=False, it holds nothing), or kill it now."""

    def kill_now(self, handle: Any) -> None:
        """Kill from a signal handler: no joins, no waiting."""

    def rss(self, handle: Any) -> int | None:
        """The worker's RSS measured from outside, or None (use what it last reported)."""

    def node(self, handle: Any) -> str | None:
        """The machine the worker runs on, for pages per node (None: not known)."""

    def start_hint(self) -> str:
        """What to add when workers keep dying at start (the usual cause), or ""."""


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
    nodes: dict[str, int] = field(default_factory=dict)  # live workers per node

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
            "nodes": dict(self.nodes),
        }


class _Slot:
    """A live worker as the scheduler sees it: the pages it holds and its clock."""

    def __init__(self, slot: int, handle: Any):
        self.slot, self.handle = slot, handle
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


class Scheduler:
    """An executor (see executor.Executor) over the transport `make_transport` gives: parses
    PageWork items on its workers and yields a Finished for each page as it finishes, in
    completion order."""

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
        self.page_batch = max(1, spec.page_batch)
        self.page_timeout = page_timeout
        self.max_rss = max_rss
        self.warn, self.info = warn, info
        self.workers: list[_Slot | None] = [None] * self.n
        self.stats = PoolStats(workers=self.n)
        self.left: list[PageWork] = []  # after run(): the items not finished
        self._task_ids = 0
        self._start_failures = 0
        self._warned: set[str] = set()
        self._queue: deque[tuple[PageWork, bool]] = deque()  # (item, solo)
        self._source: Iterator[PageWork | None] = iter(())  # the stream run() pulls from
        self._exhausted = True  # the stream has ended
        self._ahead = self.n * self.page_batch * AHEAD
        self._finished: list[Finished] = []
        self._stopping = False
        self._should_stop: Callable[[], bool] = lambda: False  # run()'s, asked between its steps too
        self._rss_at = 0.0
        self._node_losses: dict[int, int] = {}  # id(item) -> times its worker's node was lost
        self.transport = self.make_transport()

    def make_transport(self) -> Transport:
        raise NotImplementedError  # WorkerPool: worker processes; RayExecutor: Ray actors

    def set_slots(self, n: int) -> None:
        """Before run(): the number of worker slots (the Ray executor plans them per node once
        Ray is up)."""
        self.n = max(1, n)
        self.workers = [None] * self.n
        self.stats.workers = self.n
        self._ahead = self.n * self.page_batch * AHEAD

    def _crash(self, why: str) -> str:
        return f"{self.transport.noun} died ({why})"

    # -- slots -----------------------------------------------------------------------------
    def _spawn(self, slot: int) -> None:
        try:
            handle = self.transport.start(slot)
        except OSError as exc:
            self._start_refused(exc)
            return
        self.workers[slot] = _Slot(slot, handle)

    def _start_refused(self, exc: OSError) -> None:
        """The system would not start a worker (no file descriptors, pipes or processes left):
        with others running the run goes on with them (the empty slot is tried again as pages
        wait); with none it stops (exit 2), as nothing could parse its pages."""
        why = f"cannot start a {self.transport.noun}: {exc.strerror or exc}{_limit_hint(exc)}"
        if not any(w is not None for w in self.workers):
            raise SetupError(why)
        if why not in self._warned:
            self._warned.add(why)
            self.warn(f"{why}; going on with the workers running")

    def _stop(self, w: _Slot, kill: bool) -> None:
        if self.workers[w.slot] is w:
            self.workers[w.slot] = None
        self.transport.stop(w.handle, kill)

    def _gone(self, w: _Slot) -> None:
        """The transport has freed the worker already (Lost)."""
        if self.workers[w.slot] is w:
            self.workers[w.slot] = None

    def close(self, kill: bool = False) -> None:
        for w in list(self.workers):
            if w is not None:
                self._stop(w, kill=kill or w.busy or not w.ready)
        self.transport.close()

    def kill_all(self) -> None:
        """From a signal handler: no joins, no pipes."""
        for w in self.workers:
            if w is not None:
                try:
                    self.transport.kill_now(w.handle)
                except Exception:  # noqa: BLE001 - a signal handler must not raise
                    pass

    def __enter__(self) -> Scheduler:
        self.transport.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)

    # -- the loop --------------------------------------------------------------------------
    def run(
        self,
        items: Iterable[PageWork | None],
        should_stop: Callable[[], bool] = lambda: False,
        grace: float = 10.0,
        on_tick: Callable[[PoolStats], None] | None = None,
    ) -> Iterator[Optional[Finished]]:
        """Parse all items, yielding each page's Finished as it comes, and None at a wake-up
        where nothing finished. `items` is pulled as the queue runs short (None in it: nothing
        ready yet). After a stop request nothing more is pulled, pages in flight get `grace`
        seconds; `self.left` then holds the items pulled and not finished (in flight past the
        grace period, and never handed out)."""
        self.transport.open()
        queue = self._queue = deque()
        self._source, self._exhausted = iter(items), False
        self._should_stop = should_stop
        stop_at = None
        while True:
            if should_stop() and stop_at is None:
                stop_at = time.monotonic() + grace
                self._stopping = True
            if stop_at is None:
                self._pull()
                self._fill_slots()
                self._dispatch()
            busy = [w for w in self.workers if w is not None and w.busy]
            if not busy and (stop_at is not None or (not queue and self._exhausted)):
                break
            if stop_at is not None and time.monotonic() > stop_at:
                for w in busy:  # in flight past the grace period: not journaled
                    queue.extendleft(reversed([(t.item, False) for t in w.tasks.values()]))
                    self._stop(w, kill=True)
                break
            self._wait()
            for live in list(self.workers):
                if live is not None:
                    self._receive(live)
            self._check_deadlines()
            self._update_stats()
            finished = bool(self._finished)
            yield from self._drain()
            if not finished:
                yield None
            if on_tick is not None:
                on_tick(self.stats)
        self._update_stats(rss=False)
        yield from self._drain()
        self.left = [item for item, _ in queue]

    def _drain(self) -> Iterator[Finished]:
        done, self._finished = self._finished, []
        yield from done

    def _pull(self) -> None:
        """Top the queue up from the stream, up to a few batches per slot."""
        while not self._exhausted and len(self._queue) < self._ahead:
            try:
                item = next(self._source)
            except StopIteration:
                self._exhausted = True
                return
            if item is None:  # nothing planned yet: ask again at the next wake-up
                return
            self._queue.append((item, False))

    def _fill_slots(self) -> None:
        """Start a worker in each empty slot while there are more queued pages than idle workers
        (at the start, and when pages come after a slot was left empty for want of them)."""
        if self._stopping:
            return
        want = len(self._queue) - sum(1 for w in self.workers if w is not None and not w.tasks)
        for slot, w in enumerate(self.workers):
            if want <= 0:
                break
            if w is None:
                self._spawn(slot)
                want -= 1

    def _dispatch(self) -> None:
        """Fill free slots. A solo page goes only to a worker holding nothing, and alone."""
        queue = self._queue
        for w in self.workers:
            if w is None or not w.ready or w.retiring or (w.tasks and not self.transport.refill):
                continue
            batch: list[Task] = []
            while queue:
                item, solo = queue[0]
                held = list(w.tasks.values()) + batch
                if (held and solo) or len(held) >= self.page_batch or any(t.solo for t in held):
                    break
                queue.popleft()
                self._task_ids += 1
                batch.append(Task(self._task_ids, item, solo, time.monotonic()))
            if not batch:
                continue
            for t in batch:
                w.tasks[t.id] = t
            sent, events = self.transport.send(w.handle, batch)
            unsent = batch[sent:]  # died while idle: Lost will tell; the pages go back as they were
            for t in unsent:
                del w.tasks[t.id]
            queue.extendleft(reversed([(t.item, t.solo) for t in unsent]))
            for ev in events:
                self._handle(w, ev)

    def _wait(self) -> None:
        live = [w for w in self.workers if w is not None]
        # the stream may have pages by now: look again soon while the queue is short
        timeout = TICK if self._exhausted or len(self._queue) >= self._ahead else FEED_TICK
        now = time.monotonic()
        for w in live:
            if w.deadline is not None:
                timeout = min(timeout, max(0.0, w.deadline - now))
        self.transport.wait([w.handle for w in live], timeout)

    def _receive(self, w: _Slot) -> None:
        for ev in self.transport.receive(w.handle):
            self._handle(w, ev)
            if self.workers[w.slot] is not w:  # retired / replaced / lost while handling
                break

    def _finish(self, w: _Slot, task: Task, outcome: PageOutcome, rss: int, batch: int) -> None:
        self.stats.done += 1
        self._finished.append(Finished(task.item, outcome, w.slot, rss, batch, self.transport.node(w.handle)))

    def _handle(self, w: _Slot, msg: Event) -> None:
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
            self._stop(w, kill=True)
            raise SetupError(msg.message)
        elif isinstance(msg, Done):
            self._done(w, msg)
        elif isinstance(msg, Unanswered):
            again = [w.tasks.pop(t) for t in msg.task_ids if t in w.tasks]
            self._queue.extendleft(reversed([(t.item, True) for t in again]))
        elif isinstance(msg, Lost):
            self._died(w, msg.why, msg.node)

    def _done(self, w: _Slot, msg: Done) -> None:
        task = w.tasks.pop(msg.task_id, None)
        if task is None:  # not held any more (lost and re-queued): dropped, one record per page
            return
        w.rss = msg.rss
        w.pages += 1
        if not w.started():
            w.deadline, w.last_stage = None, None
        self._finish(w, task, msg.outcome, msg.rss, msg.batch)
        if msg.outcome.transient and not w.retiring:
            self._exhausted_worker(w, msg.outcome)
        if self.max_rss and msg.rss > self.max_rss and not w.retiring:
            self.info(
                f"worker {w.slot}: RSS {msg.rss / (1 << 20):.0f} MB above --max-worker-rss "
                f"{self.max_rss / (1 << 20):.0f} MB after {w.pages} pages; recycled"
            )
            self.stats.recycled += 1
            w.retiring = True
        if w.retiring and not w.tasks:
            self._stop(w, kill=False)
            if self._want_worker():
                self._spawn(w.slot)

    def _exhausted_worker(self, w: _Slot, outcome: PageOutcome) -> None:
        """A worker that ran out of something (file descriptors) would fail every page it gets:
        it takes no more and is replaced (a fresh process starts with none of them in use)."""
        why = outcome.error.message if outcome.error is not None else "out of resources"
        note = f"a worker ran out of resources ({why}): it is replaced; its failed page is parsed again by the next run"
        if note not in self._warned:
            self._warned.add(note)
            self.warn(note)
        self.stats.recycled += 1
        w.retiring = True

    def _lost(self, w: _Slot, fault: Callable[[Task], PageOutcome]) -> None:
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
        self._queue.extendleft(reversed(retry + later))
        w.tasks.clear()

    def _died(self, w: _Slot, why: str, node: bool = False) -> None:
        self._gone(w)
        self._stopping = self._stopping or self._should_stop()  # and no replacement is started
        if w.tasks and self._stopping:
            # A worker lost during a stop (asked for since the loop last looked, too) was most
            # likely killed with the run (a signal to the whole process group): its pages are
            # left unsettled, as pages past the grace period are, and the next run parses them
            # (a page that really kills its worker gets its record then).
            self._queue.extendleft(reversed([(t.item, t.solo) for t in w.tasks.values()]))
            w.tasks.clear()
        if w.tasks:
            self.stats.restarts += 1
            now = time.monotonic()
            if node:
                self._node_lost(w, why, now)
            else:
                self._lost(w, lambda t: crashed(t, now, self._crash(why)))
        # a node lost under a starting worker is not its failure, nor a worker a stop's signal
        # reached before it could ignore it (a SIGTERM to the process group while it starts)
        elif not w.ready and not node and not self._stopping:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES:
                raise SetupError(
                    f"{self.transport.nouns} keep dying while starting ({why}){self.transport.start_hint()}"
                )
        if self._want_worker():
            self._spawn(w.slot)

    def _node_lost(self, w: _Slot, why: str, now: float) -> None:
        """The pages of a worker whose node went away: back to the queue as they were, without
        blame, unless a page has lost its node NODE_REQUEUES times already."""
        again = []
        for t in w.tasks.values():
            n = self._node_losses[id(t.item)] = self._node_losses.get(id(t.item), 0) + 1
            if n > NODE_REQUEUES:
                lost = f"{self._crash(why)}; the page's node was lost {n} times"
                self._finish(w, t, crashed(t, now, lost), w.rss, 1)
            else:
                again.append((t.item, t.solo))
        if again:
            self.info(f"worker {w.slot}: its node was lost ({why}); {len(again)} page(s) re-queued without blame")
        self._queue.extendleft(reversed(again))
        w.tasks.clear()

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for w in list(self.workers):
            if w is None:
                continue
            if w.deadline is not None and now > w.deadline:
                self._receive(w)  # an answer may have arrived just in time: take it rather than kill
                if self.workers[w.slot] is not w or w.deadline is None or now <= w.deadline:
                    continue
                self._stop(w, kill=True)
                self.stats.restarts += 1
                self._lost(w, lambda t: timed_out(t, now, self.page_timeout))
                if self._want_worker():
                    self._spawn(w.slot)
            elif not w.ready and now - w.spawned > START_TIMEOUT:
                self._stop(w, kill=True)
                # A slot that cannot start while others run (a cluster short of a lost node's
                # CPUs) is tried again, not fatal: only starts that fail with nothing running are.
                if not any(o is not None and o.ready for o in self.workers):
                    self._start_failures += 1
                if self._start_failures >= START_FAILURES:
                    raise SetupError(f"{self.transport.nouns} did not start within {START_TIMEOUT:g} s")
                self._spawn(w.slot)

    def _want_worker(self) -> bool:
        """Replace a worker that went away? Only while there is work it could take."""
        return bool(self._queue) and not self._stopping

    def _update_stats(self, rss: bool = True) -> None:
        live = [w for w in self.workers if w is not None]
        self.stats.busy = sum(w.busy for w in live)
        self.stats.starting = sum(not w.ready for w in live)
        self.stats.queued = len(self._queue)  # pulled from the stream, not yet handed to a worker
        self.stats.inflight = [len(w.tasks) for w in live]
        nodes: dict[str, int] = {}
        for w in live:
            if (node := self.transport.node(w.handle)) is not None:
                nodes[node] = nodes.get(node, 0) + 1
        self.stats.nodes = nodes
        now = time.monotonic()
        if rss and now - self._rss_at >= 1.0:  # measured from outside where it can be: busy workers too
            self._rss_at = now
            self.stats.rss = [r if (r := self.transport.rss(w.handle)) is not None else w.rss for w in live]
