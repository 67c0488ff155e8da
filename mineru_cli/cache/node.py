"""`{node}` in a cache folder: the machine's own name, so one --cache-dir serves a cluster.

The SQLite tier must stay on each machine's local disk (WAL needs local locking; a folder on a
network filesystem is warned about, store.network_filesystem_warning). On a cluster every
worker gets the driver's --cache-dir; `--cache-dir /var/cache/mineru/{node}` gives each
machine its own folder under the same path (share results between machines with --cache-url).
"""

from __future__ import annotations

import socket
from pathlib import Path

NODE = "{node}"


def node_local_dir(directory: Path) -> Path:
    """`directory` as this machine uses it: every `{node}` replaced by its host name and a
    leading `~` by the user's home (`MINERU_CACHE_DIR=~/cache` in a cron or systemd
    environment arrives unexpanded, and parse, doctor and `mineru cache` must name one folder)."""
    text = str(directory)
    if NODE in text:
        text = text.replace(NODE, socket.gethostname() or "localhost")
    return Path(text).expanduser()
