"""The closed vocabularies of a page record: status, error kind, stage, cache status.

Each is a `str` enum, so a member is its own JSON value and compares equal to it
("ok" == Status.OK); the record schema lists exactly these values (tested).
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A str-valued enum whose str() is its value (as in a record), on every Python we support."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def values(cls) -> list[str]:
        return [m.value for m in cls]


class Status(Word):
    """What happened to a page."""

    OK = "ok"
    FAILED = "failed"  # the page's error says why; the batch went on
    TIMEOUT = "timeout"  # past --page-timeout; its worker was killed and replaced
    SKIPPED = "skipped"  # not a page to parse (e.g. a symlink loop); not a failure


class Stage(Word):
    """Where in the pipeline a page's problem happened, in pipeline order."""

    DISCOVER = "discover"  # walking the input folders
    OPEN = "open"  # opening the file
    RENDER = "render"  # rendering a PDF page / decoding an image frame
    NORMALISE = "normalise"  # converting to the 8-bit RGB page the engines see
    CACHE = "cache"  # looking the page up in the result cache
    ENGINE = "engine"  # the engine parsing the page
    STORE = "store"  # storing the result in the cache


class ErrorKind(Word):
    """A page error's machine-readable kind."""

    CORRUPT = "corrupt"  # the content cannot be decoded
    EMPTY = "empty"  # nothing to parse: a 0-byte file, a PDF without pages
    ENCRYPTED = "encrypted"  # a PDF that needs a password
    NOT_FOUND = "not_found"  # removed, or a dangling link
    NOT_A_FILE = "not_a_file"  # a folder, FIFO, socket or device named like a document
    SYMLINK_LOOP = "symlink_loop"  # a link to one of its own ancestor folders
    TOO_LARGE = "too_large"  # past the pixel caps, or out of memory decoding it
    UNREADABLE = "unreadable"  # permission denied, I/O error
    UNSUPPORTED = "unsupported"  # an image mode that has no RGB conversion
    CACHE_ERROR = "cache_error"  # the result cache failed on this page
    ENGINE_ERROR = "engine_error"  # the engine raised on this page
    CRASH = "crash"  # the worker process died on this page
    TIMEOUT = "timeout"  # the page ran past its deadline


class CacheStatus(Word):
    """How the result cache answered for a page."""

    HIT = "hit"  # same pixels, same fingerprint
    NEAR_HIT = "near-hit"  # a verified near-duplicate page's result
    MISS = "miss"  # parsed, then stored
    OFF = "off"  # no cache in this run


# The engine's count (EngineResult.counts, the summary's counts) of a page's blocks it could not
# read: the page is ok with a warning per block, and its result is not cached.
FAILED_BLOCKS = "failed_blocks"
# Each such block carries this key (true) in its record: `--retry-failed` parses its page again.
FAILED_BLOCK = "failed"
