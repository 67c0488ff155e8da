"""The output file as a journal: append a record per finished page, resume from what is there.

Records are appended, flushed and fsynced as pages finish, so a killed run loses only the pages
in flight. A torn last line (a kill mid-write) is cut off when the journal is opened. At the end
of a run `compact()` rewrites the file atomically with exactly one record per page id (the
latest), so retries and re-runs never leave duplicates. An exclusive lock keeps two runs from
writing the same file at once.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from .errors import SetupError


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.records: dict[str, dict] = {}   # page id -> latest record, in file order
        self.repaired_bytes = 0               # size of a torn tail cut off at open
        self.bad_lines = 0                    # complete lines that were not records (dropped at compaction)
        self._fh = None
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
            self._read_and_repair()
        self._fh = open(self.path, "a", encoding="utf-8")
        return self

    def _read_and_repair(self) -> None:
        data = self.path.read_bytes()
        good = data.rfind(b"\n") + 1          # everything after the last newline is a torn write
        lines = data[:good].splitlines()
        # A complete but unparsable last line is a torn write too (never propagate it).
        while lines and _parse(lines[-1]) is None:
            good -= len(lines.pop()) + 1
        if good < len(data):
            self.repaired_bytes = len(data) - good
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())
        for line in lines:
            rec = _parse(line)
            if rec is None:
                self.bad_lines += 1
            else:
                self.records[rec["id"]] = rec

    # -- resume --------------------------------------------------------------------------
    def finished(self, pid: str, source_sha256: str | None, fingerprint: str, retry_failed: bool) -> dict | None:
        """The earlier record that makes redoing this page unnecessary, if any.

        Same page id, same file content, same fingerprint, and either ok or (failed and the
        user did not ask for --retry-failed)."""
        rec = self.records.get(pid)
        if rec is None or rec.get("source_sha256") != source_sha256 or rec.get("fingerprint") != fingerprint:
            return None
        if rec["status"] == "ok" or (rec["status"] in ("failed", "timeout") and not retry_failed):
            return rec
        return None

    # -- writing -------------------------------------------------------------------------
    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.records.pop(record["id"], None)   # re-insert so file order follows the latest write
        self.records[record["id"]] = record

    def compact(self, order: list[str]) -> None:
        """Rewrite with one record per page id: this run's pages in input order, then records
        of pages not in this run (other inputs written to the same file) as they were."""
        ordered = [self.records[i] for i in dict.fromkeys(order) if i in self.records]
        seen = set(order)
        ordered += [r for i, r in self.records.items() if i not in seen]
        tmp = self.path.with_name("." + self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in ordered:
                fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._fh.close()
        os.replace(tmp, self.path)            # atomic: a kill here leaves the old, valid journal
        self._fh = open(self.path, "a", encoding="utf-8")

    def close(self) -> None:
        if self._fh:
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
