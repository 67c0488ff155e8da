"""`{node}` in --cache-dir: each machine's own SQLite folder under one path (cache/node.py)."""

from __future__ import annotations

import socket

from mineru_cli.cache import ResultCache
from mineru_cli.cache.node import node_local_dir


def test_node_placeholder_is_this_machine_s_name(tmp_path):
    host = socket.gethostname()
    assert node_local_dir(tmp_path / "{node}" / "c") == tmp_path / host / "c"
    assert node_local_dir(tmp_path / "plain") == tmp_path / "plain"


def test_the_cache_opens_its_sqlite_file_in_the_node_s_folder(tmp_path):
    warned: list[str] = []
    cache = ResultCache(path=tmp_path / "cache-{node}", warn=warned.append)
    try:
        assert (tmp_path / f"cache-{socket.gethostname()}" / "results.sqlite3").exists(), warned
        assert not (tmp_path / "cache-{node}").exists()
    finally:
        cache.close()
