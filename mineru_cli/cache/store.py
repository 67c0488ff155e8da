"""The local tier: one SQLite file per cache directory.

WAL mode with a busy timeout lets many worker processes read and write at once
(each opens its own connection).  Rows hold JSON text and a zlib-packed YCbCr
thumbnail (none for pages with no near-duplicate search), never pickles; a
digest of the payload catches bit rot SQLite itself would not notice.  A file that is not a database, or one SQLite
reports as malformed, is moved aside to ``*.corrupt`` and rebuilt empty; a
schema version mismatch drops and recreates the tables.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

SCHEMA_VERSION = 2  # 2: YCbCr thumbnails sized by the short side (1: grayscale, long side 1024)
FILENAME = "results.sqlite3"
TOUCH_EVERY_S = 3600  # refresh last_used at most hourly: hits stay read-only
OPEN_RETRY_S = 5.0  # how long to retry setting up the file while other processes create it

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- monotonic: new rows are id > last seen
    fingerprint  TEXT NOT NULL,
    pixel_sha256 TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    width        INTEGER NOT NULL,
    height       INTEGER NOT NULL,
    phash        INTEGER NOT NULL,
    digest       TEXT NOT NULL,                       -- sha256 of payload
    payload      TEXT NOT NULL,                       -- JSON
    created      REAL NOT NULL,
    last_used    REAL NOT NULL,
    thumb_w      INTEGER NOT NULL,                    -- 0: no thumbnail, exact hits only
    thumb_h      INTEGER NOT NULL,
    coarse       BLOB NOT NULL,                       -- 32x32 signature (similarity.py)
    thumb        BLOB NOT NULL,                       -- last: exact hits never read it
    UNIQUE (fingerprint, pixel_sha256)
);
CREATE INDEX IF NOT EXISTS entries_fp_id ON entries (fingerprint, id);
CREATE INDEX IF NOT EXISTS entries_last_used ON entries (last_used);
"""

COLUMNS = (
    "fingerprint",
    "pixel_sha256",
    "page_id",
    "width",
    "height",
    "phash",
    "digest",
    "payload",
    "created",
    "last_used",
    "thumb_w",
    "thumb_h",
    "coarse",
    "thumb",
)


def digest(payload_json: str) -> str:
    return hashlib.sha256(payload_json.encode()).hexdigest()


class CorruptCache(Exception):
    """The SQLite file is damaged (raised internally, handled by rebuilding)."""


@dataclass
class Entry:
    id: int
    page_id: str
    width: int
    height: int
    payload: str


def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    # SQLITE_NOTADB / SQLITE_CORRUPT surface as plain DatabaseError; busy/locked are
    # OperationalError and Integrity/ProgrammingError are bugs, not damage.
    return type(e) is sqlite3.DatabaseError or "malformed" in str(e)


class SqliteStore:
    def __init__(self, directory: Path, warn: Callable[[str], None] = print):
        self.dir = Path(directory)
        self.path = self.dir / FILENAME
        self._warn = warn
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        # in-memory pHash index per fingerprint: (ids, phashes, widths, heights, last id)
        self._index: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = {}
        self.dir.mkdir(parents=True, exist_ok=True)
        self._run(lambda conn: None)  # opens, rebuilding a damaged file

    # -- connection and recovery ---------------------------------------------
    def _open(self) -> None:
        if self.path.exists() and self.path.stat().st_size >= 16:
            with open(self.path, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    self._move_aside("not an SQLite file")
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            deadline = time.monotonic() + OPEN_RETRY_S
            for attempt in itertools.count(1):
                try:
                    self._setup(conn)
                    break
                except sqlite3.OperationalError as e:
                    # processes creating a new file at once: switching it to WAL can report
                    # "database is locked" without waiting for the busy timeout
                    if "locked" not in str(e) or time.monotonic() > deadline:
                        raise
                    time.sleep(min(0.05 * attempt, 0.5))
        except sqlite3.DatabaseError:
            conn.close()
            raise
        self._conn = conn
        self._inode = self.path.stat().st_ino
        self._index.clear()

    @staticmethod
    def _setup(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            # An older/newer layout: its rows cannot be trusted here, start over.
            conn.executescript("DROP TABLE IF EXISTS entries; DELETE FROM meta;")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _move_aside(self, why: str) -> None:
        # Another process may already have rebuilt the file: only move the one we opened.
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        if self._inode is not None and st.st_ino != self._inode:
            return
        self._warn(f"cache file {self.path} is corrupt ({why}); moved to {self.path.name}.corrupt and rebuilt")
        os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
        for suffix in ("-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    def _rebuild(self, why: str) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None
        self._move_aside(why)
        self._inode = None
        self._open()

    def _run(self, fn):
        """Run fn(conn); on corruption rebuild once and retry (the retry sees an empty cache)."""
        with self._lock:
            for attempt in (0, 1):
                try:
                    if self._conn is None:
                        self._open()
                    return fn(self._conn)
                except (sqlite3.DatabaseError, CorruptCache) as e:
                    if isinstance(e, sqlite3.DatabaseError) and not _is_corruption(e):
                        raise
                    if attempt:
                        raise
                    self._rebuild(str(e))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- lookups -------------------------------------------------------------
    def _checked(self, conn, row) -> Entry | None:
        id_, page_id, w, h, payload, dig = row
        if digest(payload) != dig:
            # Bit rot inside a row: never serve it; drop the row.
            self._warn(f"cache entry {page_id} failed its checksum; ignored and removed")
            conn.execute("DELETE FROM entries WHERE id=?", (id_,))
            return None
        return Entry(id_, page_id, w, h, payload)

    def get(self, fingerprint: str, pixel_sha256: str) -> Entry | None:
        def q(conn):
            row = conn.execute(
                "SELECT id, page_id, width, height, payload, digest, last_used FROM entries "
                "WHERE fingerprint=? AND pixel_sha256=?",
                (fingerprint, pixel_sha256),
            ).fetchone()
            if row is None:
                return None
            if row[6] < time.time() - TOUCH_EVERY_S:
                conn.execute("UPDATE entries SET last_used=? WHERE id=?", (time.time(), row[0]))
            return self._checked(conn, row[:6])

        return self._run(q)

    def get_by_id(self, id_: int) -> tuple[Entry, int, int, bytes] | None:
        """Entry plus its thumbnail (w, h, packed bytes)."""

        def q(conn):
            row = conn.execute(
                "SELECT id, page_id, width, height, payload, digest, thumb_w, thumb_h, thumb FROM entries WHERE id=?",
                (id_,),
            ).fetchone()
            if row is None:
                return None
            e = self._checked(conn, row[:6])
            return None if e is None else (e, row[6], row[7], row[8])

        return self._run(q)

    def candidates(self, fingerprint: str, phash: int, radius: int) -> list[tuple[int, int, int, int]]:
        """(hamming distance, id, width, height) of rows within radius, nearest first."""
        from .similarity import hamming

        def q(conn):
            ids, hashes, ws, hs, last = self._index.get(fingerprint, (np.empty(0, np.int64),) * 4 + (0,))
            new = conn.execute(
                "SELECT id, phash, width, height FROM entries WHERE fingerprint=? AND id>? ORDER BY id",
                (fingerprint, last),
            ).fetchall()
            if new:
                arr = np.array(new, dtype=np.int64)
                ids, hashes = np.concatenate([ids, arr[:, 0]]), np.concatenate([hashes, arr[:, 1]])
                ws, hs = np.concatenate([ws, arr[:, 2]]), np.concatenate([hs, arr[:, 3]])
                last = int(arr[-1, 0])
            self._index[fingerprint] = (ids, hashes, ws, hs, last)
            return ids, hashes, ws, hs

        ids, hashes, ws, hs = self._run(q)
        if len(ids) == 0:
            return []
        d = hamming(hashes, phash)
        sel = np.nonzero(d <= radius)[0]
        return sorted((int(d[i]), int(ids[i]), int(ws[i]), int(hs[i])) for i in sel)

    def coarse_of(self, ids: list[int]) -> dict[int, bytes]:
        if not ids:
            return {}
        return dict(
            self._run(
                lambda conn: conn.execute(
                    f"SELECT id, coarse FROM entries WHERE id IN ({', '.join('?' * len(ids))})", ids
                ).fetchall()
            )
        )

    # -- writes --------------------------------------------------------------
    def put(
        self,
        fingerprint: str,
        pixel_sha256: str,
        page_id: str,
        width: int,
        height: int,
        phash: int,
        payload_json: str,
        thumb_w: int,
        thumb_h: int,
        coarse: bytes,
        thumb: bytes,
        created: float | None = None,
    ) -> None:
        now = time.time()
        row = (
            fingerprint,
            pixel_sha256,
            page_id,
            width,
            height,
            phash,
            digest(payload_json),
            payload_json,
            created or now,
            now,
            thumb_w,
            thumb_h,
            coarse,
            thumb,
        )
        self._run(
            lambda conn: conn.execute(
                f"INSERT INTO entries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
                "ON CONFLICT (fingerprint, pixel_sha256) DO UPDATE SET page_id=excluded.page_id, "
                "width=excluded.width, height=excluded.height, phash=excluded.phash, digest=excluded.digest, "
                "payload=excluded.payload, last_used=excluded.last_used, thumb_w=excluded.thumb_w, "
                "thumb_h=excluded.thumb_h, coarse=excluded.coarse, thumb=excluded.thumb",
                row,
            )
        )

    # -- maintenance (mineru cache ...) --------------------------------------
    def stats(self) -> dict:
        def q(conn):
            n, fps, size, oldest, newest = conn.execute(
                "SELECT count(*), count(DISTINCT fingerprint), coalesce(sum(length(payload)+length(thumb)), 0), "
                "min(created), max(last_used) FROM entries"
            ).fetchone()
            check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            return {
                "entries": n,
                "fingerprints": fps,
                "data_bytes": size,
                "oldest_created": oldest,
                "newest_used": newest,
                "integrity": check,
            }

        out = self._run(q)
        out["path"] = str(self.path)
        out["file_bytes"] = sum(p.stat().st_size for p in self.dir.glob(FILENAME + "*") if p.is_file())
        return out

    def clear(self) -> int:
        n = self._run(lambda conn: conn.execute("DELETE FROM entries").rowcount)
        self._compact()
        self._index.clear()
        return n

    def prune(self, older_than_s: float | None = None, max_bytes: int | None = None) -> int:
        """Drop rows unused for older_than_s, then least recently used ones until under max_bytes."""

        def q(conn):
            removed = 0
            if older_than_s is not None:
                removed += conn.execute(
                    "DELETE FROM entries WHERE last_used < ?", (time.time() - older_than_s,)
                ).rowcount
            if max_bytes is not None:
                total = conn.execute("SELECT coalesce(sum(length(payload)+length(thumb)), 0) FROM entries").fetchone()[
                    0
                ]
                doomed = []
                for id_, size in conn.execute(
                    "SELECT id, length(payload)+length(thumb) FROM entries ORDER BY last_used, id"
                ):
                    if total <= max_bytes:
                        break
                    doomed.append((id_,))
                    total -= size
                conn.executemany("DELETE FROM entries WHERE id=?", doomed)
                removed += len(doomed)
            return removed

        n = self._run(q)
        self._compact()
        self._index.clear()
        return n

    def _compact(self) -> None:
        def q(conn):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")

        try:
            self._run(q)
        except sqlite3.OperationalError:
            pass  # another process is using the file; space is reused later anyway

    def iter_rows(self, batch: int = 256) -> Iterator[dict]:
        last = 0
        while True:
            rows = self._run(
                lambda conn, last=last: conn.execute(
                    f"SELECT id, {', '.join(COLUMNS)} FROM entries WHERE id>? ORDER BY id LIMIT ?", (last, batch)
                ).fetchall()
            )
            if not rows:
                return
            for r in rows:
                yield dict(zip(COLUMNS, r[1:]))
            last = rows[-1][0]
