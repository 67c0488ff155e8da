"""What an executor must offer the runner: the one interface every way of running pages
(worker processes here, a Ray cluster next) implements exactly.

The runner hands an executor the pages still to do, as a stream (planned while the first ones
parse), and consumes what it yields; it never looks inside. An executor owns the failure
contract for the pages it runs: every item it takes from the stream either comes back exactly
once as a Finished (parsed, failed, timed out, crashed) or is listed in `left` (only after a
stop request), never both and never twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol

from .messages import PageOutcome


class PageWork(Protocol):
    """A page to parse: its source file (inputs.SourceFile) and 0-based page index."""

    @property
    def src(self): ...

    @property
    def index(self) -> int: ...


@dataclass(frozen=True)
class Finished:
    """A page the executor is done with: its outcome, which worker answered it, that worker's
    RSS after it, and the pages that shared its engine call (0: none, e.g. a cache hit)."""

    item: PageWork
    outcome: PageOutcome
    worker: int
    rss: int
    batch: int
    node: str | None = None  # the machine the worker runs on, when the executor knows it

    def worker_info(self) -> dict[str, int | str]:
        info: dict[str, int | str] = {"worker": self.worker, "rss": self.rss, "batch": self.batch}
        if self.node is not None:
            info["node"] = self.node
        return info


class ExecutorStats(Protocol):
    """Counts the run's summary and heartbeat report (pool.PoolStats is one)."""

    workers: int  # worker slots
    restarts: int  # workers replaced after a crash or timeout
    recycled: int  # workers replaced for memory
    retried: int  # pages re-queued alone after their batch lost its worker
    done: int

    def as_dict(self) -> dict: ...


class Executor(Protocol):
    """Runs pages; a context manager that frees its workers on exit (kills them on an error)."""

    left: list[PageWork]  # after run() is exhausted: the items not finished (after a stop)

    @property
    def stats(self) -> ExecutorStats: ...

    def run(
        self,
        items: Iterable[PageWork | None],
        should_stop: Callable[[], bool] = ...,
        grace: float = ...,
        on_tick: Callable[[ExecutorStats], None] | None = None,
    ) -> Iterator[Finished | None]:
        """Yield each page's Finished as it finishes (any order), and None at a wake-up where
        none did (the caller's turn for records of its own). `items` is a stream, pulled as
        workers need pages: a None in it means none is ready yet. When should_stop() turns
        true, pull and hand out nothing more and give pages in flight `grace` seconds."""
        ...

    def kill_all(self) -> None:
        """Stop every worker now; callable from a signal handler (no joins, no pipes)."""
        ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: object) -> None: ...
