"""The errors of a run: a page's (it becomes that page's record), a set-up one (exit 2) and an
output one (exit 3)."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any

from .words import ErrorKind, Stage

# The exit codes of every command: all pages ok; some pages failed; a usage or set-up problem
# (nothing run); the output could not be written; stopped by Ctrl-C / SIGTERM.
EXIT_OK, EXIT_FAILED, EXIT_SETUP, EXIT_OUTPUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# stdout's reader went away (`mineru schema | head -1`): 128 + SIGPIPE, as a shell reports a
# program the signal ended, without a word (the reader took what it wanted)
EXIT_BROKEN_PIPE = 141

# What each exit code of `mineru parse` means, in the words `mineru --help` prints; each row of
# docs/usage.md's exit code table starts with the same words (a test holds them together).
EXIT_CODES = (
    (EXIT_OK, "every input page is ok (or skipped), or no page was found (a warning says where it looked)"),
    (EXIT_FAILED, "some pages failed: see their records"),
    (EXIT_SETUP, "usage or set-up error: the message says what to change; nothing was parsed"),
    (EXIT_OUTPUT, "the output could not be written mid-run (disk full, a file-size limit, an I/O error)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM): the journal is valid, re-run to resume"),
    (EXIT_BROKEN_PIPE, "standard output's reader went away (a pipe into head): stopped there, without a word"),
)


@dataclass(frozen=True)
class ErrorInfo:
    """A record's `error`: what went wrong with the page, where."""

    kind: ErrorKind
    stage: Stage
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind.value, "stage": self.stage.value, "message": self.message}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ErrorInfo:
        return cls(ErrorKind(d["kind"]), Stage(d["stage"]), str(d["message"]))


class PageError(Exception):
    """A problem with one page (or one file): recorded as that page's `error`, never raised
    past the page. `kind` and `stage` take the enum or its value. `transient`: the process ran
    out of something (file descriptors, memory for a read), which says nothing about the file:
    the page is parsed again by the next run, and its worker is replaced."""

    def __init__(self, kind: ErrorKind | str, stage: Stage | str, message: str, transient: bool = False):
        super().__init__(message)
        self.kind = ErrorKind(kind)
        self.stage = Stage(stage)
        self.message = message
        self.transient = transient

    @property
    def info(self) -> ErrorInfo:
        return ErrorInfo(self.kind, self.stage, self.message)

    def as_dict(self) -> dict[str, str]:
        return self.info.as_dict()

    @classmethod
    def from_exception(cls, exc: BaseException, kind: ErrorKind, stage: Stage) -> PageError:
        """Any exception on a page, as that page's error (the message names its type)."""
        if isinstance(exc, PageError):
            return exc
        return cls(kind, stage, f"{type(exc).__name__}: {exc}")


# Why an OSError happened, in the words a message uses (the rest: the system's own words)
OS_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "does not exist",
    errno.ENOTDIR: "a part of its path is a file, not a folder",
    errno.EISDIR: "is a folder, not a file",
    errno.EEXIST: "is a file, not a folder",  # making a folder where a file is
    errno.EROFS: "on a read-only file system",
    errno.ENOSPC: "no space left on its disk",
    errno.ELOOP: "a link on its path loops",
}


def in_words(exc: OSError) -> str:
    """Why an OSError happened, without "[Errno 13]" and the path."""
    return OS_WHY.get(exc.errno or 0) or exc.strerror or str(exc)


def is_permission(exc: OSError) -> bool:
    """Whether `exc` is a permission refused (a fix is chmod or another user, never a new copy)."""
    return exc.errno in (errno.EACCES, errno.EPERM)


class SetupError(Exception):
    """A usage or set-up problem (bad option, missing model): exit code 2, no pages run.

    Said "DETAIL; FIX" where a `fix` is given: `detail` and `fix` keep the two parts for `mineru
    models` and `mineru doctor`, which show them apart (a path or a sentence may hold "; " itself,
    so the text is never split to find them). Without a fix, `detail` is the whole message."""

    def __init__(self, detail: str, fix: str = ""):
        self.detail, self.fix = detail, fix
        super().__init__(f"{detail}; {fix}" if fix else detail)


class OutputError(Exception):
    """The output could not be written mid-run (a full disk, a file-size limit, an I/O error):
    exit code 3. What was written before stays whole (a torn record is cut back), so a re-run
    once the cause is gone resumes."""
