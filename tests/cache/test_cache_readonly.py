"""A cache that cannot be written: a read-only folder serves its hits with writes off and one
warning, never a failed run. A cache on a network filesystem is warned about."""

from __future__ import annotations

import json
import os
import sqlite3

import numpy as np
import pytest
from fshelpers import read_only
from helpers import mineru, read_journal
from PIL import Image, ImageDraw, ImageFont

from mineru_cli.cache import ResultCache
from mineru_cli.cache.similarity import pixel_sha256
from mineru_cli.cache.store import FILENAME, SqliteStore, filesystem_type, network_filesystem_warning

FP = "engine=test;v=1"


def noise_page(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8), "RGB")


def put(cache: ResultCache, seed: int) -> Image.Image:
    img = noise_page(seed)
    cache.store(img, pixel_sha256(img), FP, f"p{seed}", {"blocks": [], "markdown": f"page {seed}"})
    return img


def rows(folder) -> int:
    con = sqlite3.connect(f"file:{folder / FILENAME}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM entries").fetchone()[0])
    finally:
        con.close()


@pytest.mark.parametrize("writer_open", [False, True], ids=["closed", "writer-open"])
def test_a_read_only_cache_serves_hits_stores_nothing_and_warns_once(tmp_path, writer_open):
    """Closed: no -wal/-shm files exist and none can be made. Writer open: another process
    (allowed to write) holds the file, so its -wal holds rows the main file does not yet."""
    writer = ResultCache(tmp_path)
    stored = [put(writer, s) for s in (1, 2)]
    if not writer_open:
        writer.close()
    warnings: list[str] = []
    try:
        with read_only(tmp_path):
            with ResultCache(tmp_path, warn=warnings.append) as cache:
                for seed, img in zip((1, 2), stored):
                    hit = cache.lookup(img, pixel_sha256(img), FP)
                    assert hit is not None and hit.kind == "hit" and hit.payload["markdown"] == f"page {seed}"
                fresh = put(cache, 3)  # no error, nothing written
                put(cache, 4)
                assert cache.lookup(fresh, pixel_sha256(fresh), FP) is None
                assert cache.lookup(noise_page(9), pixel_sha256(noise_page(9)), FP) is None
    finally:
        writer.close()
    assert len(warnings) == 1 and "is read-only" in warnings[0] and "not stored" in warnings[0], warnings
    assert rows(tmp_path) == 2


def test_a_read_only_cache_is_written_again_once_it_is_writable(tmp_path, monkeypatch):
    with ResultCache(tmp_path) as c:
        put(c, 1)
    monkeypatch.setattr("mineru_cli.cache.store.WRITE_RETRY_S", 0.0)  # retry at the next store
    warnings: list[str] = []
    with read_only(tmp_path):
        store = SqliteStore(tmp_path, warn=warnings.append)
        assert store.readonly
        cache = ResultCache(None)
        cache._store = store
        put(cache, 2)  # refused again: still read-only
    put(cache, 3)  # writable now: stored
    cache.close()
    assert not store.readonly and rows(tmp_path) == 2
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"cache folder {tmp_path} is read-only") and "writable again" in warnings[1]


def test_a_read_only_folder_without_a_cache_runs_without_one(tmp_path):
    warnings: list[str] = []
    with read_only(tmp_path):
        with ResultCache(tmp_path, warn=warnings.append) as cache:
            put(cache, 1)
            assert cache.lookup(noise_page(1), pixel_sha256(noise_page(1)), FP) is None
    assert len(warnings) == 1 and "unavailable" in warnings[0], warnings
    assert not (tmp_path / FILENAME).exists()


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 27 0:45 / /mnt/shared rw,relatime - nfs4 filer:/export rw,vers=4.2
41 40 0:46 / /mnt/shared/local\\040disk rw,relatime - xfs /dev/sdb1 rw
42 27 0:47 / /home/u/remote rw - fuse.sshfs u@host:/ rw
"""


def test_the_filesystem_of_a_folder_is_its_longest_mount_point():
    assert filesystem_type("/mnt/shared/cache", MOUNTINFO) == "nfs4"
    assert filesystem_type("/mnt/shared", MOUNTINFO) == "nfs4"
    assert filesystem_type("/mnt/shared/local disk/c", MOUNTINFO) == "xfs"
    assert filesystem_type("/mnt/sharedother", MOUNTINFO) == "ext4"
    assert "fuse.sshfs" in network_filesystem_warning("/home/u/remote/c", MOUNTINFO)
    assert "nfs4" in network_filesystem_warning("/mnt/shared/c", MOUNTINFO)
    assert network_filesystem_warning("/mnt/shared/local disk", MOUNTINFO) is None
    assert network_filesystem_warning("/var/cache", MOUNTINFO) is None


def test_a_local_cache_folder_is_not_warned_about(tmp_path):
    assert filesystem_type(tmp_path) is not None  # this machine's own mount table is read
    assert network_filesystem_warning(tmp_path) is None


def _page(path, text):
    img = Image.new("RGB", (640, 200), "white")
    ImageDraw.Draw(img).text((20, 70), text, fill="black", font=ImageFont.load_default(size=36))
    img.save(path)


@pytest.mark.e2e
def test_parse_with_a_read_only_cache_uses_its_hits(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "a").mkdir()
    _page(tmp_path / "a" / "one.png", "Cached page one")
    args = ["--cache-dir", str(cache), "--engine", "ocr", "--workers", "2"]
    assert mineru("parse", "a", "--out", "a.jsonl", *args, cwd=tmp_path).returncode == 0
    first = read_journal(tmp_path / "a.jsonl")[0]
    (tmp_path / "b").mkdir()
    for name in ("one.png", "copy.png"):
        (tmp_path / "b" / name).write_bytes((tmp_path / "a" / "one.png").read_bytes())
    _page(tmp_path / "b" / "two.png", "A new page two")
    with read_only(cache):
        r = mineru("parse", "b", "--out", "b.jsonl", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = {x["id"]: x for x in read_journal(tmp_path / "b.jsonl")}
    for pid in ("one.png#0", "copy.png#0"):
        assert recs[pid]["cache"] == {"status": "hit"} and recs[pid]["blocks"] == first["blocks"]
    assert recs["two.png#0"]["status"] == "ok" and recs["two.png#0"]["cache"] == {"status": "miss"}
    assert r.stderr.count("is read-only") == 1, r.stderr
    assert "local cache" not in r.stderr, r.stderr  # neither "unavailable" nor a per-page error
    assert os.access(cache / FILENAME, os.W_OK)


def test_cache_commands_that_write_refuse_a_read_only_cache_and_those_that_read_work(tmp_path):
    """`clear`, `prune` and `import` cannot do their job on a read-only cache: a clear error and
    exit 2, never a traceback or a count of entries that were not removed or added; `stats` and
    `export` read it."""
    cache = tmp_path / "cache"
    with ResultCache(cache) as c:
        put(c, 1)
        put(c, 2)
    args = ["--cache-dir", str(cache)]
    dump = tmp_path / "dump.jsonl"
    assert mineru("cache", "export", str(dump), *args, cwd=tmp_path).returncode == 0
    with read_only(cache):
        for command in (["clear"], ["prune", "--older-than", "0s"], ["import", str(dump)]):
            r = mineru("cache", *command, *args, cwd=tmp_path)
            assert r.returncode == 2, (command, r.stdout, r.stderr)
            assert f"cache folder {cache} is read-only" in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert "removed" not in r.stdout and "imported" not in r.stdout, r.stdout
        r = mineru("cache", "stats", "--json", *args, cwd=tmp_path)
        assert r.returncode == 0 and json.loads(r.stdout)["entries"] == 2, r.stderr
        r = mineru("cache", "export", str(tmp_path / "again.jsonl"), *args, cwd=tmp_path)
        assert r.returncode == 0 and "exported 2 entries" in r.stdout, r.stderr
    assert rows(cache) == 2
    r = mineru("cache", "clear", *args, cwd=tmp_path)  # writable again
    assert r.returncode == 0 and "removed 2 entries" in r.stdout, r.stderr
    assert rows(cache) == 0
