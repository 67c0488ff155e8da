"""The output file as a journal: append a record per finished page, resume from what is there.

Records are appended and flushed as pages finish (fsynced at least every second), so a killed
run loses only the pages in flight. A torn last line (a kill mid-write: an unfinished fragment
without its newline) is cut off when the journal is opened; nothing else is ever cut, and a file
that is not a journal (its first line is not a record) is refused, never rewritten. At the end
of a run `compact()` rewrites the file atomically with exactly one record per page id (the
latest), so retries and re-runs never leave duplicates; a file that already is so is left as
it is. An exclusive lock keeps two runs from writing the same file at once; it is taken on the
resolved path, so a symlink and its target are one journal (and compaction replaces the target,
never the link).

A write that fails (a full disk: ENOSPC, a file-size limit: EFBIG, EIO) is cut back to the end
of the last whole record and raised as an OutputError: the journal stays valid, no later record
is written, compaction is skipped (it needs room for a copy), and a re-run resumes from it.

Memory stays flat on large dumps: only a small index entry per page (where its latest record
is in the file, its status and keys) is kept; records are read back from the file on demand,
and compaction copies lines, it never holds the whole file.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Literal

from .core.errors import OutputError, SetupError
from .core.places import missing_folders, remove_empty
from .core.record import page_id, split_page_id
from .core.words import FAILED_BLOCK

FSYNC_EVERY = 1.0  # seconds between fsyncs of the journal while pages are being appended
# opening the lock file again after it was removed under this run (a failed run's discard); each
# try means another run removed it in between, so a few are plenty
LOCK_TRIES = 5
# How our first record starts (PageRecord.as_dict's first key): a torn first write is a prefix of it.
RECORD_START = b'{"schema_version":'
_JSON_OBJECT_START = re.compile(rb"\s*\{")


@dataclass(frozen=True)
class Entry:
    """Where the latest record of a page is in the file, and what resume needs of it."""

    offset: int
    length: int
    status: str
    source_sha256: str | None
    fingerprint: str | None
    failed_blocks: bool = False  # an ok page holding a block the engine could not read


# errors of a write that found no room: the disk (or the user's quota) full, a file-size limit
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class Journal:
    def __init__(self, path: Path):
        self.given = Path(path)  # as the user wrote it (for messages)
        self.path = Path(path)  # resolved at open()
        self.index: dict[str, Entry] = {}  # page id -> latest record, in file order
        self.repaired_bytes = 0  # size of a torn tail cut off at open
        self.bad_lines = 0  # complete lines that were not records (dropped at compaction)
        self._fh: IO[bytes] | None = None  # appending
        self._size = 0
        self._opened_size = 0  # its size once opened: a discard removes nothing once it grew
        self._synced = 0.0  # monotonic time of the last fsync
        self._lock: IO[str] | None = None
        self.broken: OSError | None = None  # a write failed: nothing more is written
        self._file_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
        # what open() made that was not there: the file, its lock file, the folders on its path
        # (nearest first); a set-up error before any record removes them (discard)
        self._made: list[Path] = []
        self._made_folders: list[Path] = []

    # -- opening -------------------------------------------------------------------------
    def open(self) -> "Journal":
        """Lock, check and index the file. Any problem with the location (a folder, a parent
        that is a file, no permission) or a file that is not a journal is a SetupError."""
        try:
            self._open()
        except SetupError:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise SetupError(f"--out {self.given}: {exc.strerror or exc}") from None
        return self

    def _open(self) -> None:
        # Resolve symlinks first: the lock, the writes and compaction's rename must all act on
        # the real file, or a run via a link and one via its target would not exclude each other.
        # It is checked before anything is made: a refused --out leaves no lock file behind.
        self.path = check_out(self.given)
        self._made_folders = missing_folders(self.path.parent)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise _no_folder(self.given) from None  # a file put on the path since the check
        self._lock_file(_lock_path(self.path))
        # a compaction's copy left by a run killed while making it (this run holds the lock: no
        # other is making one); the next compaction would replace it, but a journal in order is
        # never copied again, and the copy is as large as the journal
        try:
            self._tmp().unlink(missing_ok=True)
        except OSError:
            pass  # a folder it may not write in: opening says so, or the run only reads
        if self.path.exists():
            self._index_and_repair()
        else:
            self._made.append(self.path)
        # unbuffered: a record is one write() call, and a failed one leaves no bytes in a buffer
        # for a later flush to add after the cut; readable too: compaction reads the records
        # back through this descriptor, which still holds them if the name is removed mid-run
        self._fh = fh = open(self.path, "a+b", buffering=0)
        self._size = self._opened_size = fh.tell()
        st = os.fstat(fh.fileno())
        self._file_id = (st.st_dev, st.st_ino)

    def _lock_file(self, lock_path: Path) -> None:
        """Take the lock file's lock, or refuse the run: another holds it."""
        for _ in range(LOCK_TRIES):
            made = not lock_path.exists()
            self._lock = lock = open(lock_path, "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SetupError(another_run_writes(self.path)) from None
            if _same_file(lock.fileno(), lock_path):
                if made:
                    self._made.append(lock_path)
                return
            # a run whose set-up failed removed it (discard) after this one opened it and let its
            # lock go: a lock on the removed file excludes no run that opens the name afresh, so
            # the name is opened again
            self._lock = None
            lock.close()
        raise SetupError(another_run_writes(self.path))

    def is_file(self, path: str | Path) -> bool:
        """Whether `path` names the file this journal opened, by any name (a link, a folder link,
        `--out docs/out.pdf` inside the folder being parsed): never an input. Safe from the
        planner's thread."""
        if self._file_id is None:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False  # what it is, the planner says
        return (st.st_dev, st.st_ino) == self._file_id

    def _index_and_repair(self) -> None:
        good = 0  # end of the last complete line
        with open(self.path, "rb") as fh:
            if not _journal_head(fh):  # someone else's file (put there since check_out): never cut or rewrite it
                raise _not_a_journal(self.given)
            fh.seek(0)
            offset = 0
            for line in fh:
                complete = line.endswith(b"\n")
                rec = _parse(line) if complete else None
                if rec is not None:
                    self._remember(rec, offset, len(line))
                elif complete:
                    self.bad_lines += 1  # not a record: kept until compaction drops it
                if complete:
                    good = offset + len(line)
                offset += len(line)
        # A last fragment without its newline is a torn write (our lines never contain a raw
        # newline before their end): cut it off, never propagate it.
        if good < offset:
            self.repaired_bytes = offset - good
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())

    def _remember(self, rec: dict[str, Any], offset: int, length: int) -> None:
        self.index.pop(rec["id"], None)  # re-insert: index order follows the latest write
        failed_blocks = any(block.get(FAILED_BLOCK) for block in rec.get("blocks") or ())
        self.index[rec["id"]] = Entry(
            offset, length, rec["status"], rec.get("source_sha256"), rec.get("fingerprint"), failed_blocks
        )

    # -- reading -------------------------------------------------------------------------
    def get(self, pid: str) -> dict[str, Any] | None:
        """The latest record of a page, read back from the file."""
        entry = self.index.get(pid)
        if entry is None:
            return None
        record: dict[str, Any] = json.loads(os.pread(self._out.fileno(), entry.length, entry.offset))
        return record

    def records(self, ids: Iterable[str]) -> Iterator[dict[str, Any]]:
        for pid in ids:
            rec = self.get(pid)
            if rec is not None:
                yield rec

    # -- resume --------------------------------------------------------------------------
    def finished(
        self, pid: str, source_sha256: str | None, fingerprint: str, retry_failed: bool
    ) -> dict[str, Any] | None:
        """The earlier record that makes redoing this page unnecessary, if any.

        Same page id, same file content, same fingerprint, and either ok or (failed and the
        user did not ask for --retry-failed). An ok page with a block the engine could not read
        counts as failed for --retry-failed."""
        e = self.index.get(pid)
        if e is None or e.source_sha256 != source_sha256 or e.fingerprint != fingerprint:
            return None
        if retry_failed and (e.status in ("failed", "timeout") or e.failed_blocks):
            return None
        if e.status in ("ok", "failed", "timeout"):
            return self.get(pid)
        return None

    # -- writing -------------------------------------------------------------------------
    def append(self, record: dict[str, Any]) -> None:
        """Write one record. It is flushed to the OS at once, so a killed process loses nothing
        written; fsync (against a power cut) runs at most every FSYNC_EVERY seconds and at
        compaction/close, because an fsync per record would cost more than a cache hit."""
        if self.broken is not None:
            raise self._output_error(self.broken, record)
        line = _line(record)
        try:
            view = memoryview(line)
            while view:  # a short write (the disk filling up) leaves the rest to the next call
                view = view[self._out.write(view) or 0 :]
            if time.monotonic() - self._synced >= FSYNC_EVERY:
                os.fsync(self._out.fileno())
                self._synced = time.monotonic()
        except OSError as exc:
            self._cut_back(exc)
            raise self._output_error(exc, record) from None
        self._remember(record, self._size, len(line))
        self._size += len(line)

    def _cut_back(self, exc: OSError) -> None:
        """Drop the part of a record that got out before a write failed; nothing more is written."""
        self.broken = exc
        try:
            os.ftruncate(self._out.fileno(), self._size)
        except OSError:
            pass  # the file keeps a torn last line, which the next open() cuts off

    def _output_error(self, exc: OSError, record: dict[str, Any]) -> OutputError:
        return OutputError(
            f"--out {self.given}: {exc.strerror or exc} while writing the record of {record.get('id')}; "
            f"the run stopped. The journal holds every record written before it ({len(self.index)} "
            "page(s)), whole: free space (or fix the cause) and run the same command again to resume"
        )

    def compact(self, order: list[str], drop: Iterable[str] = ()) -> str | None:
        """Rewrite with one record per page id: this run's pages in input order, then records
        of pages not in this run (other inputs written to the same file) as they were. Ids in
        `drop` (pages that no longer exist, e.g. past the end of a PDF that shrank) go. Returns
        a warning where the copy had no room but only the order was to change (the file holds
        one record per page, whole: the run did its work, and failing it would fail every later
        run on that disk too); any other failure is an OutputError."""
        if self.broken is not None:
            return None  # the disk is full: the journal is valid as it is, the next run compacts it
        drop = set(drop)
        ids = [i for i in dict.fromkeys(order) if i in self.index and i not in drop]
        seen = set(ids)
        ids += [i for i in self.index if i not in seen and i not in drop]
        self._out.flush()
        name = self._name()
        if name == "other":
            self.broken = OSError(errno.EEXIST, "replaced by another file during the run")
            raise OutputError(
                f"--out {self.given} was replaced by another file during the run: that file is left as it "
                f"is, without this run's records ({len(self.index)} page(s) indexed); run again to parse "
                "what it lacks"
            )
        if os.fstat(self._out.fileno()).st_size != self._size:
            # cut or written to in place by someone else (`: > results.jsonl`): our offsets no
            # longer name our records, and a copy made through them would be torn lines
            self.broken = OSError(errno.EIO, "changed in place during the run")
            raise OutputError(
                f"--out {self.given} was cut or written to by something else during the run: it is left "
                f"as it is, without a compaction; this run's records may not all be in it: run again to "
                "parse what it lacks"
            )
        if name == "ours" and self._compact_already(ids):
            # nothing to drop or reorder: a copy would be the same bytes, and it needs room for a
            # whole second journal (a re-run with nothing new would stop with an output error)
            return None
        tmp = self._tmp()
        new_index: dict[str, Entry] = {}
        offset = 0
        src = self._out.fileno()  # our own descriptor: a journal removed mid-run is written back whole
        try:
            if name == "gone":
                self.path.parent.mkdir(parents=True, exist_ok=True)  # `rm -rf` of its folder, say
            with open(tmp, "wb") as dst:
                for pid in ids:
                    e = self.index[pid]
                    dst.write(os.pread(src, e.length, e.offset))
                    new_index[pid] = replace(e, offset=offset)
                    offset += e.length
                dst.flush()
                os.fsync(dst.fileno())
        except OSError as exc:
            try:
                tmp.unlink(missing_ok=True)  # the journal itself is untouched and valid
            except OSError:
                pass  # its folder is gone or is a file now: no copy was made there
            if name == "ours" and exc.errno in _NO_ROOM and self._one_each(ids):
                return (
                    f"--out {self.given}: no room to rewrite it in input order ({exc.strerror or exc}); it "
                    "holds one whole record per page, in the order they finished: free space and the next "
                    "run puts them in order"
                )
            self.broken = exc
            if name == "gone":
                raise OutputError(
                    f"--out {self.given} was removed during the run and could not be written back "
                    f"({exc.strerror or exc}): this run's {len(self.index)} record(s) are not in it; "
                    "run again to parse them"
                ) from None
            raise OutputError(
                f"--out {self.given}: {exc.strerror or exc} while compacting it; it is valid as it is "
                "(a later record of a page overrides an earlier one): free space and run again to compact it"
            ) from None
        self._out.close()
        os.replace(tmp, self.path)  # atomic: a kill here leaves the old, valid journal
        self.index, self.bad_lines = new_index, 0
        self._fh = open(self.path, "a+b", buffering=0)
        self._size = offset
        return None

    def _tmp(self) -> Path:
        return self.path.with_name("." + self.path.name + ".tmp")

    def _name(self) -> Literal["ours", "gone", "other"]:
        """What the journal's name holds now: the file this run has open, nothing (removed, or
        its folder with it: written back at compaction) or another file (left to it)."""
        try:
            ours, there = os.fstat(self._out.fileno()), os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return "gone"
        return "ours" if (there.st_ino, there.st_dev) == (ours.st_ino, ours.st_dev) else "other"

    def _one_each(self, ids: list[str]) -> bool:
        """Whether the file holds exactly the records of `ids`, one each, in any order."""
        if self.bad_lines or len(ids) != len(self.index):
            return False
        return sum(self.index[i].length for i in ids) == self._size

    def _compact_already(self, ids: list[str]) -> bool:
        """Whether the file holds exactly the records of `ids`, one each, in that order."""
        if not self._one_each(ids):
            return False
        offset = 0
        for pid in ids:
            e = self.index[pid]
            if e.offset != offset:
                return False
            offset += e.length
        return True

    def close(self) -> None:
        if self._fh:
            try:
                os.fsync(self._fh.fileno())
            except OSError:
                if self.broken is None:
                    raise
            self._fh.close()
            self._fh = None
        if self._lock:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    @property
    def _out(self) -> IO[bytes]:
        if self._fh is None:
            raise RuntimeError("the journal is not open")
        return self._fh

    def discard(self) -> None:
        """Remove what open() made, for a run whose set-up failed after it (a model that fails
        to load in the workers): the file, its lock file and the folders made for them, so the
        failed command leaves nothing new behind. Nothing is removed once a record is written,
        and a file that was there before is kept as it is."""
        if self._fh is None or self._size != self._opened_size:
            return
        # the journal's name only while it still holds this file (not one put in its place);
        # the journal before the lock file, the lock still held: a run that opens the name once
        # the lock file is gone makes a new one and finds no journal of this run to append to
        made = [p for p in self._made if p != self.path or _same_file(self._out.fileno(), p)]
        made.sort(key=lambda p: p != self.path)
        try:
            for path in made:
                path.unlink(missing_ok=True)
            self.close()
        except OSError:
            return  # what cannot be removed stays: an empty journal resumes as none
        remove_empty(self._made_folders)

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is not None and issubclass(kind, SetupError):
            self.discard()
        self.close()


def check_out(given: Path) -> Path:
    """The file --out `given` names (symlinks resolved), or the SetupError a run's open() gives
    it: a folder, a path through an existing file, a file that is not a journal. Nothing is
    created, written or locked, and of an existing file only its head is read (_journal_head):
    the run checks with it before it makes anything, and --explain-plan does."""
    try:
        path = Path(os.path.realpath(given))
        if path.is_dir():
            raise SetupError(f"--out {given} is a folder; give a file name (e.g. {given}/results.jsonl)")
        # a FIFO's open waits for a writer forever, a device takes the lock file beside it (in
        # /dev) and gives no records back: a journal is read back, compacted and renamed
        special = not_a_regular_file(given)
        if special:
            raise SetupError(
                f"--out {given} is {special}, not a regular file: the journal is read back, compacted and "
                "renamed in place; give the name of a file (e.g. results.jsonl): each record is appended to it whole, "
                "to read as the run goes or after it"
            )
        if not next(folder for folder in path.parents if folder.exists()).is_dir():
            raise _no_folder(given)
        if path.is_file():  # not a FIFO or a device, whose read would wait or never end
            with open(path, "rb") as fh:
                if not _journal_head(fh):
                    raise _not_a_journal(given)
    except OSError as exc:
        raise SetupError(f"--out {given}: {exc.strerror or exc}") from None
    return path


def not_a_regular_file(path: Path) -> str | None:
    """What `path` is in words where it exists and is neither a regular file nor a folder (a
    named pipe, a device, a socket), following links (/dev/stdout as its pipe); None otherwise.
    Only stat() is asked: nothing is opened, so a FIFO is not waited on."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # not there (or not to be looked at): what the run makes of it, it says
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def lock_held(path: Path) -> str | None:
    """The words of a run refused because another run holds the lock of the journal `path` (as
    check_out resolves it); None where /proc/locks lists no such lock (or there is none to read:
    not Linux). It is read, never taken: --explain-plan says so without excluding a run that
    starts meanwhile."""
    try:
        st = os.stat(_lock_path(path))
        with open("/proc/locks") as fh:
            listed = fh.read().split()
    except OSError:
        return None  # no lock file: no run has opened this journal; no /proc/locks: not told
    # each lock is listed as MAJOR:MINOR:INODE of its file (major and minor in hex)
    ours = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return another_run_writes(path) if ours in listed else None


def another_run_writes(path: Path) -> str:
    """What a run says that finds the lock of the journal `path` held."""
    return f"another run is writing to {path} (lock held); wait for it to finish"


def _lock_path(path: Path) -> Path:
    """The lock file of the journal `path`: a hidden file beside it."""
    return path.with_name("." + path.name + ".lock")


def _no_folder(given: Path) -> SetupError:
    return SetupError(f"--out {given}: cannot create its folder {given.parent}: part of that path is an existing file")


def _not_a_journal(given: Path) -> SetupError:
    return SetupError(
        f"--out {given} exists and is not a mineru journal (its first line is not a "
        "page record); it was left untouched: choose another --out or remove it"
    )


def _journal_head(fh: IO[bytes]) -> bool:
    """Whether the open file `fh` starts as a journal: a JSON object in its first 64 bytes (a
    binary is refused without reading a line of it), then a first line that can start a journal
    (_starts_a_journal). Reads no further than the first line."""
    if not _JSON_OBJECT_START.match(fh.read(64) or b"{"):
        return False
    fh.seek(0)
    return _starts_a_journal(fh.readline())


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` names the open file `fd`."""
    try:
        there = os.stat(path)
    except OSError:
        return False
    here = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


class NoJournal:
    """The journal of a run without an output file (the Python API with out=None): nothing is
    written, nothing is resumed."""

    index: dict[str, Entry] = {}
    repaired_bytes = 0
    bad_lines = 0

    def finished(
        self, pid: str, source_sha256: str | None, fingerprint: str, retry_failed: bool
    ) -> dict[str, Any] | None:
        return None

    def append(self, record: dict[str, Any]) -> None:
        pass

    def is_file(self, path: str | Path) -> bool:
        return False

    def compact(self, order: list[str], drop: Iterable[str] = ()) -> str | None:
        return None

    def records(self, ids: Iterable[str]) -> Iterator[dict[str, Any]]:
        return iter(())

    def __enter__(self) -> NoJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _line(record: dict[str, Any]) -> bytes:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A file name that is not valid UTF-8 arrives as lone surrogates (os.fsdecode's
        # surrogateescape). Written as \udcXX escapes the line stays valid UTF-8 JSON and reads
        # back to the very same str, so resume still matches the page id.
        return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def _starts_a_journal(first: bytes) -> bool:
    """Whether a file's first line (with its newline, if it has one) can start a journal: a page
    record, or our first record cut short by a kill during the run's first write (nothing else
    was ever written: a torn tail, cut off by the journal's next open, skipped by a merge).
    Anything else is someone else's file, never read as records, cut or rewritten."""
    if first.endswith(b"\n"):
        return _parse(first) is not None
    return _torn_record(first)


def _torn_record(fragment: bytes) -> bool:
    """Whether a fragment without its newline can be our first record cut short by a kill."""
    return fragment.startswith(RECORD_START) or RECORD_START.startswith(fragment)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("id"), str) and "status" in rec else None


def read_records(path: Path) -> list[dict[str, Any]]:
    """All complete records of a journal file (for tests and `mineru` sub-commands)."""
    out: list[dict[str, Any]] = []
    with open(path, "rb") as fh:
        for line in fh:
            if line.endswith(b"\n") and (rec := _parse(line)) is not None:
                out.append(rec)
    return out


def _better(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Which of two records of one page a merge keeps: an ok one over any other, then the later."""
    if old is None:
        return True
    if (new["status"] == "ok") != (old["status"] == "ok"):
        return bool(new["status"] == "ok")
    return str(new.get("created", "")) >= str(old.get("created", ""))


def renamed_pages(
    ids: Iterable[str], sha256: Callable[[str], str | None], apart: Callable[[str, str], bool]
) -> list[tuple[str, str]]:
    """Pairs (longer, shorter) of page ids among `ids` that name one page of one file under two
    roots: the same content (`sha256`: a page id's file's, None for an id not among them) and
    page, one source a path inside the other (`dump/a/x.pdf#0` and `a/x.pdf#0`), and
    `apart(longer, shorter)`: no journal holds both (merge), or one was written by this run and
    the other before it (parse), which is what journals made with different --root (or from
    different folders) hold. Identical copies of a file at unrelated paths are no such pair, nor
    copies one journal holds both of (`x.pdf` and `old/x.pdf` of one folder: one run has one
    root). Each id's shorter paths are looked up by id: a logo copied into 40,000 folders is no
    40,000-squared search, and nothing is held but the pairs."""
    pairs = []
    for longer in ids:
        sha = sha256(longer)
        source, page = split_page_id(longer)
        if sha is None or page is None:
            continue
        parts = source.split("/")
        for k in range(1, len(parts)):
            shorter = page_id("/".join(parts[k:]), page)
            if sha256(shorter) == sha and apart(longer, shorter):
                pairs.append((longer, shorter))
    return sorted(pairs)


def check_journal(path: Path) -> None:
    """SetupError unless `path` is a journal to read: a file whose first line (if any) is a page
    record."""
    special = not_a_regular_file(path)
    if special:  # never opened: a FIFO would wait for a writer
        raise SetupError(f"{path} is {special}, not a journal: give the journal's file")
    if not path.is_file():
        raise SetupError(f"{path}: " + ("is a folder, not a journal" if path.is_dir() else "no such journal"))
    with open(path, "rb") as fh:
        first = fh.readline()
    if first and not _starts_a_journal(first):
        raise SetupError(f"{path} is not a mineru journal (its first line is not a page record)")


def _lines(path: Path) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(offset, length, record) of each complete record of a journal file, read as it goes."""
    offset = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.endswith(b"\n") and (rec := _parse(line)) is not None:
                yield offset, len(line), rec
            offset += len(line)


@dataclass(frozen=True)
class _Kept:
    """What a merge keeps of the record it chose for a page while it reads on: where the record
    is (journal `n`, -1 for OUT; its bytes), how it compares (_better) and what renamed_pages
    reads; never the record itself (a million pages' records would not fit in memory)."""

    n: int
    offset: int
    length: int
    status: str
    created: str
    source_sha256: str | None

    @classmethod
    def of(cls, n: int, offset: int, length: int, rec: dict[str, Any]) -> _Kept:
        sha = rec.get("source_sha256")
        return cls(
            n, offset, length, str(rec["status"]), str(rec.get("created", "")), sha if isinstance(sha, str) else None
        )


@dataclass(frozen=True)
class Merged:
    """What a merge did: `pages` in OUT now, from `journals` journals (OUT among them where it
    held records before: they compete with the inputs' as any journal's do), `duplicates` of
    them found in more than one journal, and `renamed`: pages kept under two ids (renamed_pages)."""

    pages: int
    journals: int
    out_held: bool
    duplicates: int
    renamed: list[tuple[str, str]]


def merge(out: Path, journals: Iterable[Path], warn: Callable[[str], None] | None = None) -> Merged:
    """Join journals (one per --shard machine, say) into `out`, which may exist: one record per
    page, an ok record over a failed one, then the later one. An input that is missing or no
    journal is a SetupError, and nothing is written then. `warn` hears what Journal.compact says
    (no room to put the pages in order). Memory holds a few fields a page (_Kept), not the
    records: chosen records are read back from their files when written."""
    chosen: dict[str, _Kept] = {}
    holders: dict[str, set[int]] = {}  # page id -> the journals that hold it (-1: out)
    sources = [Path(p) for p in journals]
    for path in sources:
        check_journal(path)
    with Journal(out) as journal:
        for pid in journal.index:
            rec = journal.get(pid)
            if rec is not None:
                e = journal.index[pid]
                chosen[pid] = _Kept.of(-1, e.offset, e.length, rec)
                holders[pid] = {-1}
        for n, path in enumerate(sources):
            for offset, length, rec in _lines(path):
                pid = rec["id"]
                holders.setdefault(pid, set()).add(n)
                old = chosen.get(pid)
                if old is None or _better(rec, {"status": old.status, "created": old.created}):
                    chosen[pid] = _Kept.of(n, offset, length, rec)
        files = [open(path, "rb") for path in sources]
        try:
            for pid, kept in chosen.items():
                if kept.n >= 0:
                    line = os.pread(files[kept.n].fileno(), kept.length, kept.offset)
                    rec = _parse(line)
                    if rec is None or rec.get("id") != pid:  # changed under us: a setup problem, said so
                        raise SetupError(f"{sources[kept.n]} changed while it was merged; merge again")
                    if journal.get(pid) != rec:
                        journal.append(rec)
        finally:
            for fh in files:
                fh.close()
        note = journal.compact(list(chosen))
        if note and warn is not None:
            warn(note)
    renamed = renamed_pages(
        chosen,
        lambda pid: kept.source_sha256 if (kept := chosen.get(pid)) is not None else None,
        lambda longer, shorter: not holders[longer] & holders[shorter],
    )
    out_held = any(-1 in held for held in holders.values())
    duplicates = sum(len(held) > 1 for held in holders.values())
    return Merged(len(chosen), len(sources) + out_held, out_held, duplicates, renamed)
