"""`mineru cache stats | clear | prune | export | import` (mounted by the main CLI)."""

from __future__ import annotations

import base64
import errno
import functools
import json
import os
import sqlite3
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, TextIO

import typer

from ..config import user_cache_dir
from ..core.errors import EXIT_SETUP
from ..streams import is_stream
from ..units import human_bytes, parse_duration, parse_size
from .node import node_local_dir
from .result_cache import page_result
from .similarity import unpack_thumb
from .store import FILENAME, NewerCache, SqliteStore, UnusableCache, digest, in_words, is_what, unusable_folder

cache_app = typer.Typer(help="Inspect and maintain the result cache.", no_args_is_help=True)

CacheDir = typer.Option(
    None,
    "--cache-dir",
    envvar="MINERU_CACHE_DIR",
    readable=False,  # a folder it may not read is said in the commands' words, not click's
    help="Cache directory (default: the user cache dir); {node} in it is this machine's host name, as in parse.",
)


def _folder(cache_dir: Optional[Path]) -> Path:
    """The cache folder parse uses with this --cache-dir: `{node}` is this machine's name."""
    return node_local_dir(cache_dir or user_cache_dir())


def _open(cache_dir: Optional[Path]) -> SqliteStore:
    return SqliteStore(_folder(cache_dir), warn=lambda m: typer.echo(m, err=True))


# `stats --json` where there is no cache file: the keys a cache's stats have, so a monitoring
# script reads zeros on a machine that never parsed
NO_CACHE_STATS = {
    "entries": 0,
    "fingerprints": 0,
    "data_bytes": 0,
    "oldest_created": None,
    "newest_used": None,
    "integrity": None,
    "file_bytes": 0,
}


def _absent(cache_dir: Optional[Path]) -> Optional[Path]:
    """The cache file's path where there is none yet (a machine that never parsed, or a
    mistyped --cache-dir): stats, clear, prune and export say so and create nothing, where
    opening the store would make an empty cache there and report it as fine. A --cache-dir
    that is a file, or under one, was refused before (store.unusable_folder), and so was a folder or
    cache file that is a link that loops or points at nothing."""
    path = _folder(cache_dir) / FILENAME
    return None if path.exists() else path


def _os_error(exc: OSError, folder: Path, file: Optional[Path], role: str) -> str:
    """An OSError of a cache command in one line that says what and where: the cache folder,
    its file, or the export's or import's FILE (`role`), and why, without "[Errno 13]"."""
    name = Path(exc.filename) if exc.filename else None
    why = in_words(exc)
    if file is not None and name is not None and name == file:
        if exc.errno == errno.ENOENT:  # a FILE to read is not there; one to write has no folder
            why = "no such file" if role == "import file" else f"its folder {file.parent} does not exist"
        return f"{role} {file}: {why}"
    if name is None or name == folder:
        return f"cache folder {folder}: {why}"
    if name.parent == folder:
        return f"cache file {name}: {why}"
    return f"cache folder {folder}: {name}: {why}"


def _nothing_to_remove(cache_dir: Optional[Path]) -> bool:
    """True, said, where there is no cache file to clear or prune."""
    absent = _absent(cache_dir)
    if absent is not None:
        typer.echo(f"removed 0 entries (no cache file at {absent})")
    return absent is not None


def _open_for_writing(cache_dir: Optional[Path], action: str) -> SqliteStore:
    """The store, opened for writing, or a clear refusal: a read-only cache serves reads (a
    parse, `stats`, `export`) but cannot be cleared, pruned or imported into, and saying
    "removed 0 entries" or "imported 5 entries" there would be false."""
    directory = _folder(cache_dir)
    held: list[str] = []  # what the store says while opening, said once it is known to be writable
    opening = True

    def warn(message: str) -> None:
        if opening:
            held.append(message)
        else:
            typer.echo(message, err=True)

    store = SqliteStore(directory, warn=warn)
    if store.readonly:
        store.close()
        why = "has no space left on its disk; free space on it first" if store.full_disk else "is read-only"
        typer.echo(f"error: cannot {action}: cache folder {directory} {why}", err=True)  # not its warning
        raise typer.Exit(EXIT_SETUP)
    for message in held:  # a damaged file moved aside and rebuilt: said, as stats and export say it
        typer.echo(message, err=True)
    opening = False
    return store


def _cache_errors(file_role: str = "file"):
    """A cache that cannot be used (its folder a file, under a file, missing a part or not ours,
    it or its cache file a link that loops or points at nothing, a damaged file it cannot move
    aside, a full disk, a newer mineru-cli's cache, a file another process holds locked past the
    busy timeout) or a FILE to export to or import from that cannot be opened (`file_role` names it)
    ends the command with one line that says what, where and why, and exit 2 (EXIT_SETUP), not
    a traceback or the system's "[Errno 13] ..."."""

    def decorate(command):
        @functools.wraps(command)
        def run(*args, **kwargs):
            folder = _folder(kwargs.get("cache_dir"))
            try:
                if (problem := unusable_folder(folder)) is not None:
                    typer.echo(f"error: {problem}", err=True)
                    raise typer.Exit(EXIT_SETUP)
                return command(*args, **kwargs)
            except UnusableCache as e:  # its words name the folder or file
                typer.echo(f"error: {e}", err=True)
                raise typer.Exit(EXIT_SETUP) from None
            except OSError as e:
                typer.echo(f"error: {_os_error(e, folder, kwargs.get('file'), file_role)}", err=True)
                raise typer.Exit(EXIT_SETUP) from None
            except (sqlite3.Error, NewerCache) as e:
                why = f"{e}; another process is writing it, try again later" if "locked" in str(e) else str(e)
                typer.echo(f"error: cache folder {folder}: {why}", err=True)
                raise typer.Exit(EXIT_SETUP) from None

        return run

    return decorate


@cache_app.command()
@_cache_errors()
def stats(
    cache_dir: Optional[Path] = CacheDir, json_out: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """Entries, size on disk and integrity of the cache."""
    absent = _absent(cache_dir)
    if absent is not None:
        if json_out:
            typer.echo(json.dumps({"path": str(absent), "exists": False, **NO_CACHE_STATS}))
        else:
            typer.echo(f"path:         {absent}\nentries:      0 (no cache file there yet)")
        return
    s = {**_open(cache_dir).stats(), "exists": True}
    if json_out:
        typer.echo(json.dumps(s))
        return
    typer.echo(
        f"path:         {s['path']}\nentries:      {s['entries']} ({s['fingerprints']} fingerprints)\n"
        f"data:         {human_bytes(s['data_bytes'])}\nfile:         {human_bytes(s['file_bytes'])}\n"
        f"integrity:    {s['integrity']}"
    )


@cache_app.command()
@_cache_errors()
def clear(cache_dir: Optional[Path] = CacheDir) -> None:
    """Remove every entry."""
    if _nothing_to_remove(cache_dir):
        return
    typer.echo(f"removed {_open_for_writing(cache_dir, 'clear the cache').clear()} entries")


@cache_app.command()
@_cache_errors()
def prune(
    cache_dir: Optional[Path] = CacheDir,
    older_than: Optional[str] = typer.Option(None, help="Drop entries unused for this long, e.g. 30d."),
    max_size: Optional[str] = typer.Option(None, help="Then drop least recently used down to e.g. 2GB."),
) -> None:
    """Drop old entries and/or shrink the cache to a size."""
    try:
        age = parse_duration(older_than) if older_than else None
        size = parse_size(max_size) if max_size else None
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if _nothing_to_remove(cache_dir):
        return
    typer.echo(f"removed {_open_for_writing(cache_dir, 'prune the cache').prune(age, size)} entries")


@cache_app.command("export")
@_cache_errors("export file")
def export_(
    file: Path = typer.Argument(..., help="JSONL file to write."), cache_dir: Optional[Path] = CacheDir
) -> None:
    """Write every entry as one JSON line (thumbnail base64-encoded)."""
    n, absent, folder = 0, _absent(cache_dir), _folder(cache_dir)
    try:
        resolved = file.resolve()
    except RuntimeError:  # a link on its path loops (Python 3.12 and earlier; 3.13 raises OSError)
        raise OSError(errno.ELOOP, "a link loops", str(file)) from None
    except OSError as exc:  # said of FILE
        raise OSError(exc.errno, exc.strerror, str(file)) from None
    if resolved.parent == folder.resolve() and resolved.name.startswith(FILENAME):
        typer.echo(f"error: export file {file} is the cache's own file; give another FILE", err=True)
        raise typer.Exit(EXIT_SETUP)
    if file.is_dir():  # the rename below would say so of the partial file's name, not FILE's
        raise IsADirectoryError(errno.EISDIR, "is a folder", str(file))
    said: list[str] = []

    def warn(message: str) -> None:
        said.append(message)
        typer.echo(message, err=True)

    # before FILE: a cache it cannot use leaves FILE as it was
    store = SqliteStore(folder, warn=warn) if absent is None else None
    opened = len(said)  # a damaged file moved aside while opening: an empty cache, said so
    # FILE is replaced only by a whole export: a cache whose damage shows part-way through (the
    # store moves it aside and goes on empty) leaves FILE as it was, and the command fails. A
    # link is followed; a device or pipe (/dev/stdout, whatever it points to) is written as the
    # rows come.
    stream = is_stream(file)
    target = resolved if file.is_symlink() and not stream else file
    partial = target if stream else target.with_name(f".{target.name}.partial")
    if target is not file and not target.parent.is_dir():
        typer.echo(f"error: export file {file}: it links to {target}, whose folder does not exist", err=True)
        raise typer.Exit(EXIT_SETUP)
    try:
        try:
            f = open(partial, "w", encoding="utf-8")
        except OSError as exc:  # said of FILE, whose folder it is
            raise OSError(exc.errno, exc.strerror, str(file)) from None
        with f:
            for row in store.iter_rows() if store is not None else ():
                row["thumb"] = base64.b64encode(row["thumb"]).decode()
                row["coarse"] = base64.b64encode(row["coarse"]).decode()
                _write(f, json.dumps(row, ensure_ascii=False) + "\n", file)
                n += 1
            _write(f, "", file)  # the buffer's last rows: a full disk says so here, of FILE
        if len(said) > opened:
            typer.echo(
                f"error: cache file {folder / FILENAME} turned out damaged after {n} entries; "
                + (f"{file} holds those entries only" if stream else f"{file} is left as it was"),
                err=True,
            )
            raise typer.Exit(EXIT_SETUP)
        if not stream:
            partial.replace(target)
    finally:
        if not stream:
            try:
                partial.unlink(missing_ok=True)
            except OSError:  # there is none where FILE's folder is a file: the error above says so
                pass
    # to stderr where FILE is a stream: on /dev/stdout it would be a line of the export
    # (`export /dev/stdout | import /dev/stdin` counted it as a damaged line)
    said_of = f"exported {n} entries to {file}" + (f" (no cache file at {absent})" if absent else "")
    typer.echo(said_of, err=stream)


# An export line is one entry (a page result and two small thumbnails), megabytes at most; a
# longer one (a file with no newlines) is damaged, skipped in pieces of this size, never held whole
# (a piece costs up to four bytes a character in memory).
MAX_LINE_CHARS = 16 * 2**20


def _write(f: TextIO, text: str, file: Path) -> None:
    """`text` onto the export FILE (`f`, buffered; "" flushes it). A write that fails (FILE's
    disk full, a file-size limit, /dev/full) carries no file name: it is said of FILE, not of
    the cache folder, which the command's errors name when no other path is given."""
    try:
        if text:
            f.write(text)
        else:
            f.flush()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(file)) from None


def export_lines(f: TextIO, limit: int = MAX_LINE_CHARS) -> Iterator[Optional[str]]:
    """FILE's lines, None for each line of `limit` characters or more (its newline counted)."""
    while line := f.readline(limit):
        if len(line) < limit or line.endswith("\n"):
            yield line
            continue
        while (rest := f.readline(limit)) and not rest.endswith("\n"):
            pass
        yield None


def _is_device(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def _refuse_device(file: Path) -> None:
    typer.echo(f"error: import file {file}: {is_what(file, 'a device')}, not a file", err=True)
    raise typer.Exit(EXIT_SETUP)


@cache_app.command("import")
@_cache_errors("import file")
def import_(
    file: Path = typer.Argument(..., help="JSONL file from `mineru cache export`."),
    cache_dir: Optional[Path] = CacheDir,
) -> None:
    """Add the entries of an export; damaged lines (their payload no longer matches its
    checksum, unreadable, or longer than any entry) are skipped and counted; a device (/dev/zero)
    is refused, a pipe read as it comes. An entry whose thumbnail does not decode
    (damaged, or from an older mineru-cli) is kept for exact hits only."""
    n, bad, exact_only = 0, 0, 0
    # a device is no export: /dev/zero or /dev/urandom never ends, a disk is no JSONL, and opening
    # some blocks or acts (a terminal, a watchdog): refused before it is opened, and once more
    # after (it may have been swapped in between). A pipe (`mineru cache export /dev/stdout | ssh
    # host mineru cache import /dev/stdin`) is read as it comes and ends with its writer.
    if _is_device(os.stat(file).st_mode):
        _refuse_device(file)
    # before the store: a FILE that is not there makes no cache; bytes that are no UTF-8 (a binary
    # file) make damaged lines, skipped and counted, where they ended in a UnicodeDecodeError
    with open(file, encoding="utf-8", errors="replace") as f:
        if _is_device(os.fstat(f.fileno()).st_mode):
            _refuse_device(file)
        store = _open_for_writing(cache_dir, f"import {file}")
        for line in export_lines(f):
            if line is None:
                bad += 1
                continue
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                if digest(r["payload"]) != r["digest"]:
                    raise ValueError("payload checksum mismatch")
                if page_result(r["payload"]) is None:
                    raise ValueError("payload is not a page result")
                tw, th, ph = int(r["thumb_w"]), int(r["thumb_h"]), int(r["phash"])
                thumb, coarse = base64.b64decode(r["thumb"]), base64.b64decode(r["coarse"])
                try:
                    if tw:
                        unpack_thumb(thumb, tw, th)  # must decode to its size
                except (ValueError, zlib.error):
                    tw = th = ph = 0
                    thumb = coarse = b""
                    exact_only += 1
                store.put(
                    r["fingerprint"],
                    r["pixel_sha256"],
                    r["page_id"],
                    int(r["width"]),
                    int(r["height"]),
                    ph,
                    r["payload"],
                    tw,
                    th,
                    coarse,
                    thumb,
                    created=float(r["created"]),
                )
                n += 1
            except (ValueError, KeyError, TypeError, AttributeError, zlib.error):  # AttributeError:
                bad += 1  # a payload not text
    typer.echo(
        f"imported {n} entries"
        + (f" ({exact_only} for exact hits only)" if exact_only else "")
        + (f", skipped {bad} damaged lines" if bad else "")
    )
