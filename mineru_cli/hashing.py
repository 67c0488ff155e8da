"""Content hashes of files (inputs, model weights)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path


class HashStopped(Exception):
    """file_sha256 gave up: its `stop` event was set (the run is stopping)."""


def file_sha256(path: str | Path, stop: threading.Event | None = None) -> str:
    """`stop`: checked between 1 MiB reads, so a thread hashing a huge file lets its run end."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            if stop is not None and stop.is_set():
                raise HashStopped(path)
            h.update(chunk)
    return h.hexdigest()
