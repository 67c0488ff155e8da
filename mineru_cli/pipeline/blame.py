"""The failure contract both executors keep (pool.py, ray_executor.py): a page in flight, the
records a lost page gets, and who is blamed when a worker that held several pages is lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..core.words import ErrorKind, Stage, Status
from .executor import PageWork
from .messages import PageOutcome


@dataclass
class Task:
    """A page handed to a worker and not answered yet."""

    id: int
    item: PageWork
    solo: bool
    sent: float
    started: float | None = None  # when the worker began rendering it
    stage: Stage | None = None  # the stage it is in (None: sent, not started)

    def seconds(self, now: float) -> float:
        return now - (self.started or self.sent)


def timed_out(task: Task, now: float, page_timeout: float) -> PageOutcome:
    """The record of a lone page whose worker was killed at its deadline."""
    took = task.seconds(now)
    return PageOutcome.failed(
        ErrorKind.TIMEOUT,
        task.stage or Stage.RENDER,
        # tenths under 10 s: a --page-timeout of 0.3 was "no result after 0 s"
        f"no result after {took:.{1 if took < 10 else 0}f} s (--page-timeout {page_timeout:g} s per page) in the "
        f"{task.stage} stage; worker killed and restarted",
        took,
        status=Status.TIMEOUT,
    )


def crashed(task: Task, now: float, what: str) -> PageOutcome:
    """The record of a lone page whose worker died; `what` says how ("worker process died (...)")."""
    return PageOutcome.failed(
        ErrorKind.CRASH,
        task.stage or Stage.RENDER,
        f"{what} during the {task.stage} stage; worker restarted",
        task.seconds(now),
    )


def split_lost(tasks: Iterable[Task]) -> tuple[Task | None, list[tuple[PageWork, bool]], list[tuple[PageWork, bool]]]:
    """The pages of a lost worker: (the lone suspect to blame, or None; the suspects of a batch,
    to retry each alone; the pages it had not started, to re-queue as they were)."""
    held = list(tasks)
    suspects = [t for t in held if t.started is not None]
    later = [(t.item, t.solo) for t in held if t.started is None]
    if len(suspects) == 1:
        return suspects[0], [], later
    return None, [(t.item, True) for t in suspects], later
