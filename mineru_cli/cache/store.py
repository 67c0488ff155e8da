"""The local tier: one SQLite file per cache directory.

WAL mode with a busy timeout lets many worker processes read and write at once
(each opens its own connection).  Rows hold JSON text and a zlib-packed YCbCr
thumbnail (none for pages with no near-duplicate search), never pickles; a
digest of the payload catches bit rot SQLite itself would not notice.  A file that is not a database, or one SQLite
reports as malformed, is moved aside to ``*.corrupt`` and rebuilt empty; an
earlier schema version drops and recreates the tables, a later one (a newer
mineru-cli's cache) is left untouched and not used (NewerCache). A cache folder or file that is
a link that loops or points at nothing, and a damaged file that cannot be moved aside, make a
cache that cannot be used (UnusableCache, said in words).

A cache that cannot be written (a read-only mount, files of another user) but holds entries is
opened read-only: hits are served, nothing is stored or touched, and a damaged file is never
moved aside (it is only a miss). Writing is tried again now and then, for a folder that is
read-only only for a while. A cache folder on a network filesystem is warned about: SQLite's
WAL mode needs the byte-range locks and shared memory of a local filesystem.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import shlex
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import numpy as np

from ..core.errors import in_words

SCHEMA_VERSION = 2  # 2: YCbCr thumbnails sized by the short side (1: grayscale, long side 1024)
FILENAME = "results.sqlite3"
TOUCH_EVERY_S = 3600  # refresh last_used at most hourly: hits stay read-only
OPEN_RETRY_S = 5.0  # how long to retry setting up the file while other processes create it
WRITE_RETRY_S = 60.0  # a read-only cache: how often a store tries to open it for writing again
BUSY_TIMEOUT_S = 30.0  # how long a statement waits for another process's write to end
# A write that waited BUSY_TIMEOUT_S in vain (another process holds the file: a `mineru cache
# prune` vacuuming a large cache, a stopped process mid-write): stores and last-use updates are
# skipped this long, so each new page does not wait the busy timeout again.
LOCKED_PAUSE_S = 60.0
# Filesystems where SQLite's WAL locking (fcntl byte ranges + a shared-memory -shm file) is not
# reliable between machines (mountinfo's type field; FUSE ones as "fuse.<name>").
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "glusterfs", "lustre", "gpfs", "beegfs"}
    | {"fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "fuse.glusterfs", "fuse.cephfs", "fuse.juicefs"}
)

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


class UnusableCache(Exception):
    """A cache the store cannot use, in words that name its folder or file and why: the folder,
    one above it or the cache file is a link that loops or points at nothing (broken_link), it
    is no folder or may not be searched (folder_problem, file_problem), it cannot be made, or a
    damaged file (found so when it opens or later) cannot be moved aside (a folder this process
    may not write in)."""


class NewerCache(Exception):
    """The file holds a later schema than this version reads: a newer mineru-cli's cache, which
    this one neither reads nor empties (both versions may run on one machine, alternately)."""


@dataclass
class Entry:
    id: int
    page_id: str
    width: int
    height: int
    payload: str


# An OSError's number in words a user can act on; the others keep the system's words
class Problem(NamedTuple):
    """Why a path can be no cache's, and what to do: printed as "DETAIL; FIX" (doctor shows them
    apart, and a path may hold "; " itself)."""

    detail: str
    fix: str

    def __str__(self) -> str:
        return f"{self.detail}; {self.fix}"


_ANOTHER = "give --cache-dir (or MINERU_CACHE_DIR) another folder"
_A_FOLDER = "give --cache-dir (or MINERU_CACHE_DIR) a folder"


def broken_link(directory: Path) -> Problem | None:
    """Where the cache folder `directory`, a folder above it or its cache file is a symbolic
    link that loops or points at a missing path: which, and what, in words; else None. Such a
    path reads as missing: a cache there would read as none made yet, and making the folder
    fails with "[Errno 17] File exists"."""
    file = Path(directory) / FILENAME
    for path in (file, *file.parents):
        if os.path.exists(path):
            return None  # it, and every link above it, leads somewhere
        if not os.path.islink(path):
            continue
        try:
            os.stat(path)
            continue  # raced: it leads somewhere now
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR):
                return None  # it leads where this process may not look: opening it says why
            loops = exc.errno == errno.ELOOP
        what = "a link that loops" if loops else f"a link to {os.path.realpath(path)}, which does not exist"
        if path == file:
            return Problem(f"cache file {file} is {what}", f"remove it, or {_ANOTHER}")
        where = f" is {what}" if path == Path(directory) else f": {path} (on its path) is {what}"
        return Problem(f"cache folder {directory}{where}", _A_FOLDER)
    return None


def folder_problem(directory: Path) -> Problem | None:
    """Why `directory` can be no cache folder, or None: it, or a folder above it, is a file or a
    device, or this process may not search it or a folder on its path. Said in words, where making the
    folder would fail with "[Errno 17] File exists" or "[Errno 20] Not a directory", a folder
    under a file would read as a cache not made yet, and one it may not search raised."""
    for path in (directory, *directory.parents):
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                continue  # not there (yet), under a file, or a link broken_link names
            # a folder above it that this process may not search, a name too long, ...
            searched = " (a folder on its path may not be searched)" if exc.errno in (errno.EACCES, errno.EPERM) else ""
            return Problem(f"cache folder {directory}: {in_words(exc)}{searched}", _ANOTHER)
        if stat.S_ISDIR(mode):
            if path == directory and _unsearchable(directory):
                return Problem(
                    f"cache folder {directory} may not be searched (permission denied)",
                    f"{own_fix(directory, 'u+x')}{_ANOTHER}",
                )
            return None
        what = "is a file, not a folder" if stat.S_ISREG(mode) else "is not a folder"
        where = f" {what}" if path == directory else f": {path} (on its path) {what}"
        return Problem(f"cache folder {directory}{where}", _A_FOLDER)
    return None


def _unsearchable(directory: Path) -> bool:
    """Whether this process may not look up a name in `directory` (its mode allows listing at
    most): asked of the system by a stat() inside it, as this process's capabilities decide,
    which os.access (real ids, permitted capabilities) does not always say alike."""
    try:
        os.lstat(directory / FILENAME)  # the name itself: where a link leads is the link's problem
    except PermissionError:
        return True
    except OSError:
        pass
    return False


# SQLite's side files beside the cache file: a journal it opens to check for a hot one (a pipe
# there blocks every open for good), the WAL and its shared-memory index
SIDE_FILES = ("-journal", "-wal", "-shm")
CACHE_FILES = (FILENAME, *(FILENAME + side for side in SIDE_FILES))  # the cache file and its side files


def file_problem(directory: Path) -> Problem | None:
    """Why the cache file in `directory`, or one of SQLite's side files beside it, can be no
    cache's, or None: it is, or links to, a device, a pipe or a socket (a side file: a folder
    too). SQLite read such a file as a "disk I/O error" of the cache folder, as a read-only folder,
    or blocked on a pipe. A file that is missing, a cache file that is a folder, a link broken_link
    names or a file not ours to look at: None (opening it says why)."""
    for name in CACHE_FILES:
        file = Path(directory) / name
        try:
            mode = os.stat(file).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and name == FILENAME):
            continue
        what = {stat.S_IFIFO: "a pipe", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}.get(
            stat.S_IFMT(mode), "a device"
        )
        return Problem(f"cache file {file} {is_what(file, what)}, not a file", f"remove it, or {_ANOTHER}")
    return None


def own_fix(path: Path, mode: str) -> str:
    """ "chmod MODE PATH, or " where this process owns `path` (only its owner may change its
    mode), else ""."""
    try:
        mine = os.stat(path).st_uid == os.geteuid()
    except OSError:
        mine = False
    return f"chmod {mode} {shlex.quote(str(path))}, or " if mine else ""


def files_bytes(directory: Path) -> int:
    """Bytes of the cache file and SQLite's side files in `directory`, found by name: a folder
    may allow a lookup and not a listing (mode 300)."""
    total = 0
    for name in CACHE_FILES:
        try:
            st = os.stat(Path(directory) / name)
        except OSError:  # not there, or a link to where this process may not look: opening it says why
            continue
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def is_what(path: Path, what: str) -> str:
    """ "is WHAT" of a path that is one, "is a link to WHAT (its target)" of a link that leads to one."""
    return f"is a link to {what} ({os.path.realpath(path)})" if os.path.islink(path) else f"is {what}"


def unusable_folder(directory: Path) -> Problem | None:
    """Why `directory` can hold no cache, in words (broken_link, folder_problem, file_problem), or
    None: the store refuses such a folder, and the cache commands and doctor say it before opening
    one."""
    return broken_link(directory) or folder_problem(directory) or file_problem(directory)


def with_side_files(path: Path) -> list[Path]:
    """The cache file and its -wal and -shm files."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def may_write(path: Path) -> bool:
    """Whether this process may open `path` for writing, found by opening it so: False where the
    system refuses (permission, a read-only filesystem); True where it is not there, or fails
    otherwise (SQLite then says why)."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError as exc:
        return exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS)
    return True


def _is_corruption(e: sqlite3.DatabaseError) -> bool:
    # SQLITE_NOTADB / SQLITE_CORRUPT surface as plain DatabaseError; busy/locked are
    # OperationalError and Integrity/ProgrammingError are bugs, not damage.
    return type(e) is sqlite3.DatabaseError or "malformed" in str(e)


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the filesystem holding `path` (its longest mount point prefix in
    /proc/self/mountinfo, or in the `mountinfo` text given); None where that is unknown."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def network_filesystem_warning(directory: Path, mountinfo: str | None = None) -> str | None:
    kind = filesystem_type(directory, mountinfo)
    if kind not in NETWORK_FILESYSTEMS:
        return None
    return (
        f"cache folder {directory} is on a network filesystem ({kind}): SQLite's WAL mode needs local "
        "file locking, and processes on several machines sharing it can corrupt it or read stale rows; "
        "give a local --cache-dir (share results between machines with --cache-url redis://...)"
    )


def refuse_newer(conn: sqlite3.Connection) -> None:
    """NewerCache where the file's schema version is later than SCHEMA_VERSION."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is not None and str(row[0]).isdigit() and int(row[0]) > SCHEMA_VERSION:
        raise NewerCache(
            f"it was written by a newer mineru-cli (cache schema {row[0]}; this version reads {SCHEMA_VERSION}) "
            "and is left as it is: give this version a --cache-dir of its own"
        )


def _read_only_error(e: sqlite3.OperationalError) -> bool:
    text = str(e)
    return "unable to open" in text or "readonly" in text or "read-only" in text


# Free space under which a cache folder's disk counts as full: SQLite needs room for its
# shared-memory index (32 KiB), the WAL's frames and the rows themselves
FULL_BELOW_BYTES = 1 << 20
FREE_SPACE_FIX = "free space on that disk, or give --cache-dir (or MINERU_CACHE_DIR) another folder"


def nearest_existing(folder: Path) -> Path:
    """`folder` (absolute), or the nearest path above it that exists (a link counts): where a
    folder parse would create is made, and on which disk."""
    path = Path(folder).absolute()
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def free_bytes(folder: Path) -> int | None:
    """Free space on the disk holding `folder` (or its nearest existing folder above) for this
    process (the root user may also fill the blocks a filesystem keeps for it); None where it
    cannot be asked."""
    try:
        st = os.statvfs(nearest_existing(folder))
    except OSError:
        return None
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def is_full(free: int | None) -> bool:
    """Whether `free` bytes (free_bytes; None: not known) count as a full disk."""
    return free is not None and free < FULL_BELOW_BYTES


def disk_full(folder: Path) -> bool:
    return is_full(free_bytes(folder))


def _full_disk_error(e: sqlite3.OperationalError, folder: Path) -> bool:
    """Whether SQLite failed for want of space: "database or disk is full", or "disk I/O error"
    where its shared-memory index could not be made, on a disk that is full."""
    text = str(e)
    return ("disk is full" in text or "disk I/O error" in text) and disk_full(folder)


class SqliteStore:
    def __init__(self, directory: Path, warn: Callable[[str], None] = print):
        self.dir = Path(directory)
        self.path = self.dir / FILENAME
        self._warn = warn
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        self.readonly = False  # opened read-only: hits served, nothing written
        self.full_disk = False  # read-only for want of space on its disk (else for permissions)
        self._write_tried = 0.0  # monotonic time of the last attempt to open for writing
        self._locked_until = 0.0  # monotonic time until which writes are skipped (LOCKED_PAUSE_S)
        self._blocked: Path | None = None  # the file that made the cache read-only, where one did
        # in-memory pHash index per fingerprint: (ids, phashes, widths, heights, last id)
        self._index: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = {}
        if (problem := unusable_folder(self.dir)) is not None:
            raise UnusableCache(str(problem))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # the folder above it may not be written in (or its disk is full)
            where = f" in {Path(exc.filename).parent}" if exc.filename else ""
            made = Problem(f"cache folder {self.dir} cannot be made ({in_words(exc)}{where})", _ANOTHER)
            raise UnusableCache(str(made)) from None
        if (why := network_filesystem_warning(self.dir)) is not None:
            warn(why)
        self._run(lambda conn: None)  # opens, rebuilding a damaged file

    # -- connection and recovery ---------------------------------------------
    def _open(self) -> None:
        """Open for writing; a cache that exists but cannot be written is opened read-only."""
        self._write_tried = time.monotonic()
        full = False
        try:
            self._open_rw()
            if self.readonly:
                self.readonly = False
                self._warn(f"cache folder {self.dir} is writable again: new results are stored")
            return
        except sqlite3.OperationalError as e:
            full = _full_disk_error(e, self.dir)
            if not ((full or _read_only_error(e)) and self.path.is_file()):
                if full:  # no file to read: nothing a cache could do here
                    raise UnusableCache(self._no_space()) from None
                raise
            first_error: Exception = e
        except (PermissionError, UnusableCache) as e:
            if not self.path.is_file():
                raise
            first_error = e
        try:
            self._open_ro()
        except sqlite3.DatabaseError as e:
            if full and not _is_corruption(e):  # a file the full disk left without its tables
                raise UnusableCache(self._no_space()) from None
            if isinstance(first_error, UnusableCache):
                raise first_error from None  # damaged, and in a folder it cannot be moved out of
            if isinstance(first_error, OSError):  # a file this process may not read
                raise UnusableCache(f"cache file {self.path} cannot be read: {in_words(first_error)}") from None
            if _is_corruption(e):  # damaged: _run moves it aside where its folder allows, in these words
                raise sqlite3.DatabaseError(str(e)) from None
            raise sqlite3.OperationalError(f"{first_error}; read-only: {e}") from None
        if not self.readonly:
            self._read_only(full)

    def _no_space(self) -> str:
        return str(Problem(f"cache folder {self.dir} has no space left on its disk", FREE_SPACE_FIX))

    def _read_only(self, full: bool) -> None:
        """Serve hits, store nothing (put tries to write again every WRITE_RETRY_S); said in the
        same words from every worker (not SQLite's, which differ by what it could not open or
        write), so the run shows it once."""
        self.readonly = True
        self.full_disk = full
        self._write_tried = time.monotonic()
        used = "its results are used, new results are not stored"
        if not full and self._blocked is not None and self._blocked != self.path:
            self._warn(
                f"cache file {self._blocked} may not be written by this user (another user's run made it): {used}; "
                "remove it (as its owner) while no run uses the cache"
            )
            return
        why = "has no space left on its disk" if full else "is read-only"
        self._warn(f"cache folder {self.dir} {why}: {used}")

    def _open_ro(self) -> None:
        """Read-only, without creating the -wal/-shm files: through those of a writer where they
        exist, else `immutable` (nothing can write a file nobody may write). A plain read-only
        connection makes them where the folder allows, as this user: files another user, the
        cache's owner, may then not write."""
        uri = self.path.absolute().as_uri() + "?mode=ro"
        writer = all(os.path.lexists(f) for f in with_side_files(self.path)[1:])
        for attempt in (uri, uri + "&immutable=1") if writer else (uri + "&immutable=1",):
            conn = sqlite3.connect(
                attempt, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            try:
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            except sqlite3.OperationalError:
                conn.close()
                if attempt != uri:
                    raise
                continue
            except sqlite3.DatabaseError:
                conn.close()
                raise
            if row is None or row[0] != str(SCHEMA_VERSION):
                conn.close()
                raise sqlite3.DatabaseError(f"read-only cache of another schema version ({row and row[0]})")
            self._conn = conn
            self._inode = self.path.stat().st_ino
            self._index.clear()
            return

    def _open_rw(self) -> None:
        # SQLite opens a file it may not write read-only without a word, and makes its -wal and
        # -shm files as this user where the folder allows: a reader of another user's cache in a
        # shared folder left files its owner may not write, which made the owner's cache
        # read-only. So each file is opened for writing first, as SQLite would (os.access
        # answers for the real user id, without this process's capabilities).
        self._blocked = next((f for f in with_side_files(self.path) if not may_write(f)), None)
        if self._blocked is not None:
            raise sqlite3.OperationalError("attempt to write a readonly database")
        if self.path.exists() and self.path.stat().st_size >= 16:
            with open(self.path, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    self._move_aside("not an SQLite file")
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
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
        except (sqlite3.DatabaseError, NewerCache):
            conn.close()
            raise
        self._conn = conn
        self._inode = self.path.stat().st_ino
        self._index.clear()

    @staticmethod
    def _setup(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        refuse_newer(conn)  # before _SCHEMA, whose indexes a later layout may not fit
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
        try:
            os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
        except OSError as exc:  # a folder this process may not write in: its words, not "[Errno 13] ..."
            raise UnusableCache(
                f"cache file {self.path} is damaged ({why}) and cannot be moved aside ({in_words(exc)}): "
                "remove it, or make its folder writable"
            ) from None
        # said once moved: where the move fails the error says why instead
        self._warn(f"cache file {self.path} is corrupt ({why}); moved to {self.path.name}.corrupt and rebuilt")
        for suffix in ("-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    def _close_quietly(self) -> None:
        """Close the connection, whatever state its file is in."""
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    def _rebuild(self, why: str) -> None:
        self._close_quietly()
        self._move_aside(why)
        self._inode = None
        self._open()

    def _run(self, fn):
        """Run fn(conn); on corruption rebuild once and retry (the retry sees an empty cache). A
        read-only cache is opened afresh first: an immutable reader's file may have changed under
        it (another process may write it), which reads as damage. Damage that stays is moved aside
        and rebuilt where the folder allows, else said in words (UnusableCache)."""
        with self._lock:
            reopened = rebuilt = False
            while True:
                try:
                    if self._conn is None:
                        self._open()
                    return fn(self._conn)
                except (sqlite3.DatabaseError, CorruptCache) as e:
                    if isinstance(e, sqlite3.DatabaseError) and not _is_corruption(e):
                        raise
                    if self.readonly and not reopened:
                        reopened = True
                        self._close_quietly()
                        continue
                    if rebuilt:
                        raise
                    rebuilt = True
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
            if self.readonly:  # the file may not be written: the row stays, a miss each time
                self._warn(f"cache entry {page_id} failed its checksum; ignored (the read-only cache keeps it)")
            else:
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
            if row[6] < time.time() - TOUCH_EVERY_S and self._may_write():
                self._write_or_pause(conn, "UPDATE entries SET last_used=? WHERE id=?", (time.time(), row[0]))
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
        if self.readonly and not self._writable_again():
            return
        if not self._may_write():
            return
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
            lambda conn: self._write_or_pause(
                conn,
                f"INSERT INTO entries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
                "ON CONFLICT (fingerprint, pixel_sha256) DO UPDATE SET page_id=excluded.page_id, "
                "width=excluded.width, height=excluded.height, phash=excluded.phash, digest=excluded.digest, "
                "payload=excluded.payload, last_used=excluded.last_used, thumb_w=excluded.thumb_w, "
                "thumb_h=excluded.thumb_h, coarse=excluded.coarse, thumb=excluded.thumb",
                row,
            )
        )

    def _may_write(self) -> bool:
        return not self.readonly and time.monotonic() >= self._locked_until

    def _write_or_pause(self, conn: sqlite3.Connection, sql: str, params: tuple) -> None:
        """One write of a parse (a store, a last-use update). Another process holding the file
        past the busy timeout skips it, and the writes of the next LOCKED_PAUSE_S (said once):
        the page is served or parsed all the same."""
        try:
            conn.execute(sql, params)
        except sqlite3.OperationalError as e:
            if _full_disk_error(e, self.dir):  # its rows stay readable
                self._read_only(full=True)
                return
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            self._locked_until = time.monotonic() + LOCKED_PAUSE_S
            self._warn(
                f"cache file {self.path} is held by another process ({e}); "
                f"new results are not stored for {LOCKED_PAUSE_S:.0f} s at a time while it is"
            )

    def _writable_again(self) -> bool:
        """A read-only cache: reopen it for writing at most every WRITE_RETRY_S."""
        with self._lock:
            if time.monotonic() - self._write_tried < WRITE_RETRY_S:
                return False
            if self.full_disk and disk_full(self.dir):  # opening could succeed; the writes would not
                self._write_tried = time.monotonic()
                return False
            self.close()
            self._open()
            return not self.readonly

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
        out["file_bytes"] = files_bytes(self.dir)
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
