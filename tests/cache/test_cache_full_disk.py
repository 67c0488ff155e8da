"""A cache whose disk is full: its results are served and nothing is stored, said in words (not
SQLite's "disk I/O error"), never taken for damage; writes resume once there is room. On a real
small filesystem (a tmpfs, where this machine allows mounting one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fshelpers import fill, small_filesystem
from helpers import mineru, read_journal
from PIL import Image

from mineru_cli.cache import ResultCache
from mineru_cli.cache import store as store_module
from mineru_cli.cache.similarity import pixel_sha256
from mineru_cli.cache.store import FILENAME

FP = "engine=test;v=1"
NO_SPACE = "has no space left on its disk: its results are used, new results are not stored"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def disk(tmp_path):
    with small_filesystem(tmp_path / "disk", "4m") as mounted:
        if mounted is None:
            pytest.skip("cannot mount a small filesystem here (not root, or no mount rights)")
        yield mounted


def page(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8), "RGB")


def put(cache: ResultCache, seed: int) -> None:
    img = page(seed)
    cache.store(img, pixel_sha256(img), FP, f"p{seed}", {"blocks": [], "markdown": f"page {seed}"})


def hit(cache: ResultCache, seed: int) -> bool:
    img = page(seed)
    return cache.lookup(img, pixel_sha256(img), FP) is not None


def test_a_cache_on_a_full_disk_serves_its_hits_and_stores_nothing(disk):
    folder = disk / "cache"
    with ResultCache(folder) as cache:
        put(cache, 1)
    fill(disk)
    warnings: list[str] = []
    with ResultCache(folder, warn=warnings.append) as cache:
        assert hit(cache, 1)
        put(cache, 2)
        assert not hit(cache, 2)
    assert warnings == [f"cache folder {folder} {NO_SPACE}"]
    assert (folder / FILENAME).is_file() and not (folder / (FILENAME + ".corrupt")).exists()


def test_a_disk_that_fills_during_a_run_stops_the_stores_and_they_resume_with_room(disk, monkeypatch):
    monkeypatch.setattr(store_module, "WRITE_RETRY_S", 0.0)  # try writing again at the next store
    folder = disk / "cache"
    warnings: list[str] = []
    with ResultCache(folder, warn=warnings.append) as cache:
        put(cache, 1)
        filler = fill(disk)
        put(cache, 2)  # the write fails: the cache turns read-only, the page is not lost
        assert hit(cache, 1) and not hit(cache, 2)
        put(cache, 3)  # still full: not tried again
        assert warnings == [f"cache folder {folder} {NO_SPACE}"]
        filler.unlink()
        put(cache, 4)
        assert hit(cache, 4) and hit(cache, 1)
    assert warnings[1:] == [f"cache folder {folder} is writable again: new results are stored"]


def test_no_cache_can_be_made_on_a_full_disk_and_the_run_goes_on_without_one(disk):
    folder = disk / "cache"
    fill(disk)
    warnings: list[str] = []
    with ResultCache(folder, warn=warnings.append) as cache:
        put(cache, 1)
        assert not hit(cache, 1)
    assert warnings == [
        f"local cache {folder} unavailable (cache folder {folder} has no space left on its disk; free space on "
        "that disk, or give --cache-dir (or MINERU_CACHE_DIR) another folder); running without it"
    ]
    # what a failed first try left (an empty file) is still no cache: said the same way
    warnings.clear()
    ResultCache(folder, warn=warnings.append).close()
    assert len(warnings) == 1 and "has no space left on its disk" in warnings[0]


def test_doctor_says_a_full_disk_for_what_it_is(disk):
    folder = disk / "cache"
    with ResultCache(folder) as cache:
        put(cache, 1)
    filler = fill(disk)
    r = mineru("doctor", "--cache-dir", str(folder))
    line = next(x for x in r.stdout.splitlines() if "cache:" in x)
    assert line.startswith("[warn] cache:"), line
    assert "no space left on its disk (0 B free): parse uses its 1 entries" in line
    assert "but stores no new results -> fix: free space on that disk" in line
    filler.unlink()
    (folder / FILENAME).unlink()
    for side in ("-wal", "-shm"):
        (folder / (FILENAME + side)).unlink(missing_ok=True)
    fill(disk)
    r = mineru("doctor", "--cache-dir", str(folder))
    line = next(x for x in r.stdout.splitlines() if "cache:" in x)
    assert line.startswith("[fail] cache:") and "no space left on its disk" in line, line
    assert r.returncode != 0


def test_doctor_warns_of_little_space_where_parse_can_still_make_a_cache(disk):
    """Under 1 MiB free is where SQLite's failing writes are taken for a full disk; with 500 KB
    free parse still makes its cache and stores a few results: a warning, not a failure."""
    fill(disk, 500 * 1024)
    r = mineru("doctor", "--cache-dir", str(disk / "cache"))
    line = next(x for x in r.stdout.splitlines() if "cache:" in x)
    assert line.startswith("[warn] cache:") and "little space left on its disk" in line, line
    assert r.returncode == 0, r.stdout
    with ResultCache(disk / "cache") as cache:
        put(cache, 1)
        assert hit(cache, 1)


@pytest.mark.e2e
def test_parse_with_its_cache_on_a_full_disk_serves_hits_and_says_so_once(disk, tmp_path):
    folder = disk / "cache"
    out = tmp_path / "first.jsonl"
    mineru("parse", str(EXAMPLES / "prose.png"), "--out", str(out), "--cache-dir", str(folder), check=True)
    fill(disk)
    out2 = tmp_path / "second.jsonl"
    r = mineru("parse", str(EXAMPLES / "prose.png"), "--out", str(out2), "--cache-dir", str(folder))
    assert r.returncode == 0, r.stderr
    said = [x for x in (r.stdout + r.stderr).splitlines() if "no space left" in x]
    assert said == [f"warning: cache folder {folder} {NO_SPACE}"]
    (record,) = read_journal(out2)
    assert record["status"] == "ok" and record["cache"]["status"] == "hit"
    assert "disk I/O error" not in r.stdout + r.stderr


def test_cache_commands_that_write_say_the_disk_is_full_and_those_that_read_work(disk):
    folder = disk / "cache"
    with ResultCache(folder) as cache:
        put(cache, 1)
    fill(disk)
    for action, args in (("clear", ()), ("prune", ("--max-size", "1KB"))):
        r = mineru("cache", action, *args, "--cache-dir", str(folder))
        assert r.returncode == 2
        said = f"error: cannot {action} the cache: cache folder {folder} has no space left on its disk"
        assert r.stderr.strip().splitlines()[-1] == f"{said}; free space on it first"
    r = mineru("cache", "stats", "--cache-dir", str(folder))
    assert r.returncode == 0 and "entries:      1" in r.stdout, r.stdout + r.stderr
