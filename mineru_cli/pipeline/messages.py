"""What crosses the pipe between the main process and a worker, and what a page comes to.

Every message is a small frozen dataclass (pickled by multiprocessing); pixels never cross.

main -> worker:  PageTask (a page to parse), Finish (answer what you hold, then exit)
worker -> main:  Ready (engine loaded), Fatal (cannot start: the run stops with exit 2),
                 StageEntered (a page enters a stage; the engine stage names its batch size),
                 Notice (a warning for the user), Done (a page's outcome)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ..config import CacheSpec, EngineSpec, FileKind, LoadOptions
from ..core.blocks import Block
from ..core.errors import ErrorInfo
from ..core.record import CacheInfo, ImageInfo
from ..core.words import ErrorKind, Stage, Status


@dataclass
class PageOutcome:
    """What a page came to in a worker (or in the pool, for a page its worker lost): the
    record's fields that are not about the file or the run."""

    status: Status
    error: ErrorInfo | None = None
    image: ImageInfo | None = None
    text_layer: dict[str, Any] | None = None  # the record's text_layer (PDF pages)
    cache: CacheInfo | None = None
    blocks: list[Block] = field(default_factory=list)
    markdown: str = ""
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    counts: dict[str, int] = field(default_factory=dict)  # the engine's counts (retries, ...)
    transient: bool = False  # failed for want of a resource of its worker, not for its file

    @classmethod
    def failed(
        cls,
        kind: ErrorKind,
        stage: Stage,
        message: str,
        seconds: float,
        status: Status = Status.FAILED,
        transient: bool = False,
    ) -> PageOutcome:
        return cls(status, ErrorInfo(kind, stage, message), timings={"total": seconds}, transient=transient)


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs to start: the engine it builds, its threads, the cache."""

    engine: EngineSpec
    threads: int
    spinning: bool
    env: dict[str, str]  # thread-count variables, set before numpy / onnxruntime load
    fingerprints: dict[FileKind, str]  # of a page, by the kind of its file (config.page_fingerprints)
    load: LoadOptions
    cache: CacheSpec | None
    page_batch: int
    batch_wait_ms: int


@dataclass(frozen=True)
class PageTask:
    """A page to parse. solo: the pool retries a lost batch's pages alone this way, so one
    poison page costs only itself."""

    task_id: int
    source: Any  # inputs.SourceFile
    index: int
    solo: bool = False


@dataclass(frozen=True)
class Finish:
    """Answer the pages you hold, then exit."""


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Fatal:
    message: str


@dataclass(frozen=True)
class StageEntered:
    """The page enters `stage`; for the engine stage, `batch` pages share the engine call
    (the message is sent for each of them, just before the call)."""

    task_id: int
    stage: Stage
    batch: int = 1


@dataclass(frozen=True)
class Notice:
    message: str


@dataclass(frozen=True)
class Done:
    """A page's outcome, the worker's RSS after it, and the pages that shared its engine call
    (0: not parsed by the engine, e.g. a cache hit)."""

    task_id: int
    outcome: PageOutcome
    rss: int
    batch: int


ToWorker = Union[PageTask, Finish]
FromWorker = Union[Ready, Fatal, StageEntered, Notice, Done]
