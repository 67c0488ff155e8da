"""The streaming planner: discover -> hash + count pages, as a stream beside the parsing.

A large dump must not wait for its last file to be hashed before its first page starts, and the
driver's memory must not grow with it. So planning is two bounded stages in threads of the
driver process, and the driver takes their results as it needs them:

* discovery (one thread) walks the inputs in their stable order (inputs.discover is a
  generator), drops our own output folder and other shards' files, and hands the files on;
* planning (a small thread pool) hashes each file and counts its pages (pypdfium2 / Pillow
  headers; nothing is rendered). File reads and sha256 release the GIL, so hashing overlaps the
  driver's own loop; PDFium is not thread-safe, so page counting holds one lock.

Results come out in discovery order (the journal's compaction order and the resume decisions do
not depend on which thread finished first), at most `ahead` files beyond what the driver has
taken, and no file more once those hold `ahead_pages` pages: the planner blocks when the driver
is behind, so a million-file dump costs the driver only that window. A planned file holds its
page indices as a range, never as a list: a 335-byte PDF may claim a million pages (its page
tree's /Count), so a window of such files costs the same as one of single-page files. `done`
turns true when the last file has been taken.

The progress total: a census thread walks the inputs once more, counting the files it finds and
holding none, so the total grows as files are found, long before they are planned; `total()` is
the pages of the files planned so far plus one per file found and not planned yet (a PDF's
pages are known once it is opened), exact when the last file is planned.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, overload

from .config import FileKind, LoadOptions
from .core.errors import PageError
from .core.words import ErrorKind
from .hashing import HashStopped
from .inputs import SourceFile, file_sha256, iter_sources, named_kind, open_document

PLAN_AHEAD = 256  # files planned (hashed, counted) beyond what the driver has taken
PLAN_AHEAD_PAGES = 100_000  # and no file more once the files planned ahead hold this many pages
PLAN_THREADS = 4  # hashing threads: I/O and sha256 release the GIL; more buys nothing on a disk
_PDFIUM = threading.Lock()  # PDFium is not thread-safe: one document open at a time in the planner
_END = object()  # the discovery thread's last item


@dataclass
class Planned:
    """A source file after planning: hashed and counted, or failed."""

    src: SourceFile
    sha256: str | None = None
    page_count: int | None = None
    indices: Sequence[int] = ()  # the selected 0-based pages: a range or PageSelection, never a list
    error: PageError | None = None
    stat: tuple[int, int] | None = None  # (size, mtime_ns) when it was hashed
    fixed_count: bool = False  # page_count is the file's own, by its content (Document.fixed_page_count)
    # which load options make its pages (what their fingerprint hashes): by its content once it
    # opened (Document.kind), else by its name
    kind: FileKind = FileKind.IMAGE

    def __post_init__(self) -> None:
        if self.error is not None:
            self.kind = named_kind(self.src)

    def changed_since_planned(self) -> bool:
        """Whether the file is no longer what was hashed (removed, rewritten) mid-run."""
        try:
            st = os.stat(self.src.path)
        except OSError:
            return True
        return (st.st_size, st.st_mtime_ns) != self.stat

    @property
    def pages(self) -> Sequence[int]:
        """The page indices this run settles: the selected ones, or page 0 (the file's one record)
        for a file that failed or has no selected page."""
        return self.indices or range(1)

    @property
    def unselected(self) -> bool:
        """Whether the file opened but --pages selects none of its pages (a warning says so)."""
        return self.error is None and bool(self.page_count) and not self.indices

    @property
    def records(self) -> int:
        """How many records this run writes for the file: none where --pages selects no page of
        it, else one per page it settles."""
        return 0 if self.unselected else len(self.pages)


class PageSelection(Sequence[int]):
    """The 0-based indices of a file's `count` pages that `select` (1-based, --pages) keeps,
    without holding them: the count a PDF claims is not bounded by its size."""

    def __init__(self, count: int, select: Callable[[int], bool]):
        self.pages, self.select = count, select
        self._len = sum(1 for n in range(1, count + 1) if select(n))

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        return (i for i in range(self.pages) if self.select(i + 1))

    def __contains__(self, i: object) -> bool:
        return isinstance(i, int) and 0 <= i < self.pages and self.select(i + 1)

    @overload
    def __getitem__(self, k: int) -> int: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[int]: ...

    def __getitem__(self, k: int | slice) -> int | Sequence[int]:
        if isinstance(k, slice):
            return list(self)[k]
        if k < 0:
            k += self._len
        for n, i in enumerate(self):
            if n == k:
                return i
        raise IndexError(k)


# what a file that fails to open is by its bytes alone (not a limit of this process, a file
# system's error or PDFium failing to read it), so that its record may stand until it changes
_CONTENT_KINDS = frozenset(
    {ErrorKind.CORRUPT, ErrorKind.EMPTY, ErrorKind.ENCRYPTED, ErrorKind.UNSUPPORTED, ErrorKind.TOO_LARGE}
)


def _of_the_content(exc: PageError) -> bool:
    return exc.kind in _CONTENT_KINDS and not exc.transient


def plan_file(
    src: SourceFile, select: Callable[[int], bool] | None, load: LoadOptions, stop: threading.Event | None = None
) -> Planned:
    """Hash a file and count its pages; a problem is the file's error, never an exception.
    `stop` set: the run is ending, the hash is dropped half-way (nobody takes the result)."""
    if src.error is not None:
        return Planned(src, error=src.error)
    # a file read whole that its content keeps from opening keeps its hash, so that its record is
    # retried once the file changes; a failure of this process (a limit, an I/O error) keeps none
    sha = None
    try:
        st = os.stat(src.path)
        if not stat.S_ISREG(st.st_mode):  # made a FIFO since discovery: reading it would block for ever
            return Planned(src, error=PageError("not_a_file", "open", "not a regular file (changed since found)"))
        sha = file_sha256(src.path, stop)
        with _PDFIUM, open_document(src, load) as doc:  # counts pages (GIF frames per --gif-frames)
            count, fixed, kind = doc.page_count, doc.fixed_page_count, doc.kind
    except PageError as exc:
        return Planned(src, sha256=sha if _of_the_content(exc) else None, error=exc)
    except HashStopped:
        return Planned(src, error=PageError("unreadable", "open", "not hashed: the run stopped"))
    except OSError as exc:
        return Planned(src, error=PageError("unreadable", "open", f"{type(exc).__name__}: {exc}"))
    indices = range(count) if select is None else PageSelection(count, select)
    return Planned(
        src,
        sha256=sha,
        page_count=count,
        indices=indices,
        stat=(st.st_size, st.st_mtime_ns),
        fixed_count=fixed,
        kind=kind,
    )


class Planner:
    """Plans the files of `inputs` in threads; `take()` gives them in discovery order.

    `keep(src)`: whether a discovered file is this run's (not our own output, this shard's)."""

    def __init__(
        self,
        inputs: Iterable[Path],
        include: Iterable[str],
        exclude: Iterable[str],
        select: Callable[[int], bool] | None,
        load: LoadOptions,
        keep: Callable[[SourceFile], bool] = lambda src: True,
        root: Path | None = None,
        ahead: int = PLAN_AHEAD,
        threads: int = PLAN_THREADS,
        ahead_pages: int = PLAN_AHEAD_PAGES,
    ):
        paths, inc, exc = list(inputs), list(include), list(exclude)
        self.listed: set[str] = set()  # the folders the walk listed (iter_sources)
        self._walk = lambda: iter_sources(paths, inc, exc, root, self.listed)
        self._select, self._load, self._keep = select, load, keep
        # futures in discovery order; bounded: discovery blocks while the driver is behind
        self._planned: queue.Queue[object] = queue.Queue(maxsize=max(1, ahead))
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="mineru-plan")
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._discover, name="mineru-discover", daemon=True)
        self._census = threading.Thread(target=self._count, name="mineru-census", daemon=True)
        self._counts = threading.Condition()  # guards the counts below; notified as they change
        self.found = 0  # files the census has found so far
        self.counted = False  # the census has walked everything
        self._planned_files = 0  # files planned (by the threads) so far, and their pages
        self._planned_pages = 0
        self._taken_pages = 0  # pages of the files handed out (the window is the rest)
        self._ahead_pages = max(1, ahead_pages)
        self._threads = max(1, threads)
        self._submitted = 0  # files handed to the planning threads
        self._head: object | None = None  # the next result, taken from the queue, not yet ready
        self._error: BaseException | None = None
        self.done = False  # every file found has been handed out
        self.files = 0  # files handed out so far

    def __enter__(self) -> Planner:
        self._thread.start()
        self._census.start()
        return self

    def total(self) -> int:
        """Pages known so far: those of the files planned, plus one per file found and not
        planned yet; exact once every file is planned."""
        with self._counts:
            return self._planned_pages + max(0, self.found - self._planned_files)

    @property
    def exact(self) -> bool:
        """Whether total() is exact: the census has walked everything and every file found is
        planned (after a stop it may be neither: total() is then a floor)."""
        with self._counts:
            return self.counted and self._planned_files >= self.found

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop discovering and planning (a stop request, the end of the run)."""
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:  # unblock a discovery thread waiting for room
            while True:
                self._planned.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=5)
        self._census.join(timeout=5)

    def _count(self) -> None:
        try:
            for src in self._walk():
                if self._closed.is_set():
                    return
                if self._keep(src):
                    with self._counts:
                        self.found += 1
        except Exception:  # noqa: BLE001 - only the progress total; discovery reports the error
            return
        self.counted = True

    def _plan(self, src: SourceFile) -> Planned:
        # the executor's threads are joined at exit: a stop must not wait for a huge file's hash
        planned = plan_file(src, self._select, self._load, self._closed)
        with self._counts:
            self._planned_files += 1
            self._planned_pages += planned.records
            self._counts.notify_all()
        return planned

    def _discover(self) -> None:
        try:
            for src in self._walk():
                if self._closed.is_set():
                    return
                if self._keep(src):
                    self._wait_for_room()
                    with self._counts:
                        self._submitted += 1
                    self._put(self._pool.submit(self._plan, src))
        except BaseException as exc:  # noqa: BLE001 - a bug in discovery: the driver raises it
            self._error = exc
        finally:
            self._put(_END)

    def _wait_for_room(self) -> None:
        """Submit the next file only when a planning thread is free (a file's page count is
        known only once it is planned) and the files planned and not taken hold fewer than
        `ahead_pages` pages: the window is then at most that plus one file per thread."""

        def room() -> bool:
            busy = self._submitted - self._planned_files
            return busy < self._threads and self._planned_pages - self._taken_pages < self._ahead_pages

        with self._counts:
            while not self._closed.is_set() and not room():
                self._counts.wait(0.2)  # notified as files are planned and taken; close() sets _closed

    def _put(self, item: object) -> None:
        while not self._closed.is_set():
            try:
                self._planned.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def take(self, timeout: float = 0.0) -> Planned | None:
        """The next planned file in discovery order, or None: not planned yet (wait up to
        `timeout` seconds for it) or none left (`done`)."""
        if self.done:
            return None
        if self._head is None:
            try:
                self._head = self._planned.get(timeout=timeout) if timeout > 0 else self._planned.get_nowait()
            except queue.Empty:
                return None
        head = self._head
        if head is _END:
            self._head = None
            self.done = True
            if self._error is not None:
                raise self._error
            return None
        assert isinstance(head, Future)
        try:
            planned: Planned = head.result(timeout=timeout if timeout > 0 else 0)
        except FutureTimeout:
            return None
        self._head = None
        self.files += 1
        with self._counts:
            self._taken_pages += planned.records
            self._counts.notify_all()
        return planned

    def __iter__(self) -> Iterator[Planned]:
        """Every planned file, blocking for each (for callers without a loop of their own)."""
        while not self.done:
            planned = self.take(timeout=0.2)
            if planned is not None:
                yield planned
