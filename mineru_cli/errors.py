"""Errors that become a page's `failed` record instead of stopping the batch."""

from __future__ import annotations


class PageError(Exception):
    """A problem with one page (or one file): recorded as {kind, stage, message}.

    kind:  a short machine-readable word (corrupt, empty, unsupported, not_found,
           unreadable, too_large, not_a_file, symlink_loop, engine_error, ...)
    stage: where it happened (discover, open, render, normalise, engine, write)
    """

    def __init__(self, kind: str, stage: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.stage = stage
        self.message = message

    def as_dict(self) -> dict:
        return {"kind": self.kind, "stage": self.stage, "message": self.message}


class SetupError(Exception):
    """A usage or set-up problem (bad option, missing model): exit code 2, no pages run."""
