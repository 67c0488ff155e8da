"""The output file as a journal: append a record per finished page, resume from what is there.

Records are appended and flushed as pages finish (fsynced at least every second), so a killed
run loses only the pages in flight. A torn last line (a kill mid-write) is cut off when the journal is opened. At the end
of a run `compact()` rewrites the file atomically with exactly one record per page id (the
latest), so retries and re-runs never leave duplicates. An exclusive lock keeps two runs from
writing the same file at once.

Memory stays flat on large dumps: only a small index entry per page (where its latest record
is in the file, its status and keys) is kept; records are read back from the file on demand,
and compaction copies lines, it never holds the whole file.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from .errors import SetupError

FSYNC_EVERY = 1.0   # seconds between fsyncs of the journal while pages are being appended


@dataclass(frozen=True)
class Entry:
    """Where the latest record of a page is in the file, and what resume needs of it."""
    offset: int
    length: int
    status: str
    source_sha256: str | None
    fingerprint: str | None


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.index: dict[str, Entry] = {}   # page id -> latest record, in file order
        self.repaired_bytes = 0             # size of a torn tail cut off at open
        self.bad_lines = 0                  # complete lines that were not records (dropped at compaction)
        self._fh = None                     # binary, appending
        self._size = 0
        self._synced = 0.0                  # monotonic time of the last fsync
        self._lock = None

    # -- opening -------------------------------------------------------------------------
    def open(self) -> "Journal":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.with_name("." + self.path.name + ".lock"), "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise SetupError(f"another run is writing to {self.path} (lock held); wait for it to finish")
        if self.path.exists():
            self._index_and_repair()
        self._fh = open(self.path, "ab")
        self._size = self._fh.tell()
        return self

    def _index_and_repair(self) -> None:
        good = 0                            # end of the last complete, parsable line
        bad: list[int] = []                 # offsets of complete lines that are not records
        with open(self.path, "rb") as fh:
            offset = 0
            for line in fh:
                rec = _parse(line) if line.endswith(b"\n") else None
                if rec is not None:
                    self._remember(rec, offset, len(line))
                    good = offset + len(line)
                elif line.endswith(b"\n"):
                    bad.append(offset)
                offset += len(line)
        # Whatever follows the last record is a torn write (bytes without a newline, or a line
        # that does not parse): cut it off, never propagate it. Bad lines before it are left
        # alone until compaction drops them.
        self.bad_lines = sum(1 for o in bad if o < good)
        if good < offset:
            self.repaired_bytes = offset - good
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())

    def _remember(self, rec: dict, offset: int, length: int) -> None:
        self.index.pop(rec["id"], None)     # re-insert: index order follows the latest write
        self.index[rec["id"]] = Entry(offset, length, rec["status"], rec.get("source_sha256"),
                                      rec.get("fingerprint"))

    # -- reading -------------------------------------------------------------------------
    def get(self, pid: str) -> dict | None:
        """The latest record of a page, read back from the file."""
        entry = self.index.get(pid)
        if entry is None:
            return None
        self._fh.flush()
        with open(self.path, "rb") as fh:
            fh.seek(entry.offset)
            return json.loads(fh.read(entry.length))

    def records(self, ids: Iterable[str]) -> Iterator[dict]:
        for pid in ids:
            rec = self.get(pid)
            if rec is not None:
                yield rec

    # -- resume --------------------------------------------------------------------------
    def finished(self, pid: str, source_sha256: str | None, fingerprint: str, retry_failed: bool) -> dict | None:
        """The earlier record that makes redoing this page unnecessary, if any.

        Same page id, same file content, same fingerprint, and either ok or (failed and the
        user did not ask for --retry-failed)."""
        e = self.index.get(pid)
        if e is None or e.source_sha256 != source_sha256 or e.fingerprint != fingerprint:
            return None
        if e.status == "ok" or (e.status in ("failed", "timeout") and not retry_failed):
            return self.get(pid)
        return None

    # -- writing -------------------------------------------------------------------------
    def append(self, record: dict) -> None:
        """Write one record. It is flushed to the OS at once, so a killed process loses nothing
        written; fsync (against a power cut) runs at most every FSYNC_EVERY seconds and at
        compaction/close, because an fsync per record would cost more than a cache hit."""
        line = _line(record)
        self._fh.write(line)
        self._fh.flush()
        if time.monotonic() - self._synced >= FSYNC_EVERY:
            os.fsync(self._fh.fileno())
            self._synced = time.monotonic()
        self._remember(record, self._size, len(line))
        self._size += len(line)

    def compact(self, order: list[str]) -> None:
        """Rewrite with one record per page id: this run's pages in input order, then records
        of pages not in this run (other inputs written to the same file) as they were."""
        ids = [i for i in dict.fromkeys(order) if i in self.index]
        seen = set(ids)
        ids += [i for i in self.index if i not in seen]
        self._fh.flush()
        tmp = self.path.with_name("." + self.path.name + ".tmp")
        new_index: dict[str, Entry] = {}
        offset = 0
        with open(self.path, "rb") as src, open(tmp, "wb") as dst:
            for pid in ids:
                e = self.index[pid]
                src.seek(e.offset)
                dst.write(src.read(e.length))
                new_index[pid] = Entry(offset, e.length, e.status, e.source_sha256, e.fingerprint)
                offset += e.length
            dst.flush()
            os.fsync(dst.fileno())
        self._fh.close()
        os.replace(tmp, self.path)          # atomic: a kill here leaves the old, valid journal
        self.index, self.bad_lines = new_index, 0
        self._fh = open(self.path, "ab")
        self._size = offset

    def close(self) -> None:
        if self._fh:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None
        if self._lock:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()


def _line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _parse(line: bytes) -> dict | None:
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("id"), str) and "status" in rec else None


def read_records(path: Path) -> list[dict]:
    """All complete records of a journal file (for tests and `mineru` sub-commands)."""
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            if line.endswith(b"\n") and (rec := _parse(line)) is not None:
                out.append(rec)
    return out
