"""Streams: paths that name one, and the `mineru` command's standard streams when what is behind
them takes no more.

A device, pipe or socket given as a file to write (`--html /dev/stdout`, `cache export
/dev/full`) is written into as it is, never replaced by a file through a rename, which as root
would take the system's /dev/stdout or /dev/full away from every program (is_stream).

The standard streams take no more where they lead to a log on a full disk (`2>>
/var/log/mineru.log`: ENOSPC, a quota, a file-size limit), a pipe whose reader is gone (EPIPE),
or a disk that fails (EIO).

stderr carries what a command says (progress, warnings, failures, the summary). A write there
that fails does not stop the work it reports on: a cron job's full log disk would otherwise end
a parse with a traceback before its first page, or mid-run, and turn its exit code into 1. The
write is dropped, and so is everything said after it; the exit code still says how the run went.

stdout carries what a command answers (`mineru schema`, `cache stats --json`, merge's count). A
write there that fails ends the command with `error: standard output: <why>` on stderr, exit 3
(EXIT_OUTPUT), as any output that cannot be written does; a pipe whose reader is gone (`mineru
schema | head -1`) ends it without a word, exit 141, as a shell reports a program SIGPIPE ended
(the reader took what it wanted; `set -o pipefail` still sees the cut). It is raised as StdoutFailed, not as
an OSError, so a command's own handlers of OSError (which say which cache folder or export
folder failed) do not take a full stdout for their folder's disk.

Either way the stream's descriptor is then pointed at /dev/null, as Python's documentation
advises for a closed pipe: the interpreter flushes the stream again at exit, and a second
failure there would print "Exception ignored" and exit 120.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, TextIO


def is_stream(path: Path) -> bool:
    """Whether `path` is a device, pipe or socket, or a link under /dev or /proc: /dev/stdout is a
    link to /proc/self/fd/1, whose target may be a pipe no path reaches, or the file a shell's
    `> page.html` opened, to be written into, not replaced. A file under /dev that is no link
    (/dev/shm/report.html, on a tmpfs) is a file."""
    under = path.absolute().parts[1:2] in (("dev",), ("proc",))
    return (path.exists() and not path.is_file()) or (under and path.is_symlink())


class StdoutFailed(Exception):
    """A write to stdout failed; `why` in words (No space left on device, Broken pipe)."""

    def __init__(self, exc: OSError):
        super().__init__(exc.strerror or str(exc))
        self.why = exc.strerror or str(exc)
        self.errno = exc.errno


def _to_devnull(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # no descriptor (a test's StringIO): nothing flushes it at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


class _Guarded:
    """`stream` with its writes and flushes guarded; everything else is the stream's own."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.failed: OSError | None = None

    def _failed(self, exc: OSError) -> None:
        if self.failed is None:
            self.failed = exc
            _to_devnull(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Said(_Guarded):
    """stderr: a write that fails is dropped, and so is every one after it."""

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._failed(exc)


class Answered(_Guarded):
    """stdout: a write that fails raises StdoutFailed, and so does every write after it (the
    descriptor is /dev/null then: an answer written there would be lost without a word). A
    flush after that is quiet: it is the interpreter's at exit."""

    def write(self, text: str) -> int:
        if self.failed is not None:
            raise StdoutFailed(self.failed)
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._failed(exc)
            raise StdoutFailed(exc) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.failed is not None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            self._failed(exc)
            raise StdoutFailed(exc) from None


def guard_standard_streams() -> None:
    """Put the guards on this process's stdout and stderr (once; a missing stream stays so)."""
    if sys.stderr is not None and not isinstance(sys.stderr, Said):
        sys.stderr = Said(sys.stderr)
    if sys.stdout is not None and not isinstance(sys.stdout, Answered):
        sys.stdout = Answered(sys.stdout)
