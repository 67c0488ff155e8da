"""A cache that cannot be written: a read-only folder serves its hits with writes off and one
warning, never a failed run. A cache on a network filesystem is warned about."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from fshelpers import as_plain_user, read_only, skip_unless_bits_stop
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


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """`folder` without write permission (mode 555), for a process started with as_plain_user()
    (as root, without CAP_DAC_OVERRIDE, as `setpriv --bounding-set -dac_override` runs one):
    permission bits stop it as they stop any user. Skipped where this machine cannot drop the
    capability or the bits do not stop the process."""
    folder.chmod(0o555)
    try:
        probe = folder / "probe"
        try:
            r = subprocess.run(
                [sys.executable, "-c", f"open({str(probe)!r}, 'w')"], preexec_fn=as_plain_user(), capture_output=True
            )
        except subprocess.SubprocessError:
            pytest.skip("cannot drop root's CAP_DAC_OVERRIDE here (prctl PR_CAPBSET_DROP refused)")
        if r.returncode == 0:
            probe.unlink()
            pytest.skip("permission bits do not stop this process here (it keeps CAP_DAC_OVERRIDE)")
        yield
    finally:
        folder.chmod(0o755)


def _damaged(folder: Path, damage: str) -> bytes:
    """A cache file in `folder` damaged two ways: bytes that are no SQLite file, or an SQLite
    file whose pages after the first two are overwritten ("database disk image is malformed")."""
    with ResultCache(folder) as c:
        for seed in range(20):
            put(c, seed)
    db = folder / FILENAME
    raw = bytearray(db.read_bytes())
    if damage == "garbage":
        raw = bytearray(np.random.default_rng(5).integers(0, 256, 8192, dtype=np.uint8).tobytes())
    else:
        for off in range(8192, len(raw), 4096):
            raw[off : off + 4096] = b"\xa5" * 4096
    db.write_bytes(bytes(raw))
    return bytes(raw)


@pytest.mark.parametrize("damage", ["garbage", "malformed"])
def test_a_damaged_cache_in_a_folder_it_cannot_write_is_said_in_words(tmp_path, damage):
    """A damaged cache file that cannot be moved aside (its folder not writable): every `mineru
    cache` command printed "[Errno 13] Permission denied: '.../results.sqlite3' ->
    '.../results.sqlite3.corrupt'" in its error line. It says it in words, in one line, exit 2,
    and never that the file was moved aside and rebuilt: the file stays as it was, no .corrupt
    file is made."""
    cache = tmp_path / "cache"
    cache.mkdir()
    before = _damaged(cache, damage)
    why = "not an SQLite file" if damage == "garbage" else "database disk image is malformed"
    words = f"error: cache file {cache / FILENAME} is damaged ({why}) and cannot be moved aside (permission denied)"
    dump = tmp_path / "dump.jsonl"
    dump.write_text("")
    commands = [["stats"], ["clear"], ["prune", "--older-than", "1d"], ["export", str(tmp_path / "out.jsonl")]]
    with unwritable(cache):
        for command in [*commands, ["import", str(dump)]]:
            r = mineru("cache", *command, "--cache-dir", str(cache), cwd=tmp_path, preexec_fn=as_plain_user())
            assert r.returncode == 2 and r.stdout == "", (command, r.stdout, r.stderr)
            assert r.stderr.startswith(words) and r.stderr.count("\n") == 1, (command, r.stderr)
            assert "Errno" not in r.stderr and "moved to" not in r.stderr, (command, r.stderr)
    assert (cache / FILENAME).read_bytes() == before and not (cache / f"{FILENAME}.corrupt").exists()
    assert not (tmp_path / "out.jsonl").exists()


def test_the_moved_aside_line_comes_only_once_the_file_is_moved(tmp_path):
    """The line "cache file ... is corrupt ...; moved to results.sqlite3.corrupt and rebuilt" is said
    only once the move happened: not where it failed (a folder the process may not write in; the
    file is still there, in the error instead), and where it succeeded the .corrupt file holds
    the damaged bytes when the line is read."""
    cache = tmp_path / "cache"
    cache.mkdir()
    before = _damaged(cache, "garbage")
    moved = f"cache file {cache / FILENAME} is corrupt (not an SQLite file); moved to {FILENAME}.corrupt and rebuilt"
    with unwritable(cache):
        r = mineru("cache", "stats", "--cache-dir", str(cache), cwd=tmp_path, preexec_fn=as_plain_user())
    assert r.returncode == 2 and moved not in r.stderr and "cannot be moved aside" in r.stderr, r.stderr
    assert (cache / FILENAME).read_bytes() == before and not (cache / f"{FILENAME}.corrupt").exists()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mineru_cli", "cache", "stats", "--cache-dir", str(cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # read as it comes
    assert line.rstrip("\n") == moved, line
    assert (cache / f"{FILENAME}.corrupt").read_bytes() == before
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == "" and "entries:      0" in out, (out, err)


@pytest.mark.e2e
def test_parse_with_a_damaged_cache_it_cannot_move_aside_runs_without_it(tmp_path):
    """parse with a damaged cache file in a folder it may not write in: its one warning said
    "(OperationalError: [Errno 13] Permission denied: ... -> ...corrupt; read-only: file is not
    a database)". It says it in words; the run goes on without the cache, exit 0."""
    cache = tmp_path / "cache"
    cache.mkdir()
    before = _damaged(cache, "garbage")
    (tmp_path / "in").mkdir()
    _page(tmp_path / "in" / "one.png", "Page one")
    args = ["--cache-dir", str(cache), "--engine", "ocr"]
    with unwritable(cache):
        r = mineru("parse", "in", "--out", "o.jsonl", *args, cwd=tmp_path, preexec_fn=as_plain_user())
    assert r.returncode == 0, r.stderr
    assert read_journal(tmp_path / "o.jsonl")[0]["cache"] == {"status": "miss"}
    said = [line for line in r.stderr.splitlines() if "local cache" in line]
    assert len(said) == 1 and "running without it" in said[0], r.stderr
    assert f"cache file {cache / FILENAME} is damaged (not an SQLite file) and cannot be moved aside" in said[0]
    assert "Errno" not in r.stderr and "moved to" not in r.stderr, r.stderr
    assert (cache / FILENAME).read_bytes() == before


def test_a_link_to_a_folder_it_may_not_enter_is_not_said_to_point_at_nothing(tmp_path):
    """A --cache-dir that is a link to a cache in a folder the process may not search: stat
    fails with "permission denied", not "no such file", and the commands said "is a link to
    ..., which does not exist" of a cache that is there. They say permission denied, exit 2."""
    private = tmp_path / "private"
    (private / "cache").mkdir(parents=True)
    with ResultCache(private / "cache") as c:
        put(c, 1)
    (tmp_path / "link").symlink_to(private / "cache")
    private.chmod(0o600)  # no search: not even its owner may look inside
    try:
        skip_unless_bits_stop(f"import os; os.stat({str(private / 'cache')!r})")
        for command in (["stats"], ["clear"], ["export", str(tmp_path / "out.jsonl")]):
            args = [*command, "--cache-dir", str(tmp_path / "link")]
            r = mineru("cache", *args, cwd=tmp_path, preexec_fn=as_plain_user())
            assert r.returncode == 2 and r.stdout == "", (command, r.stdout, r.stderr)
            said = (
                f"error: cache folder {tmp_path / 'link'}: permission denied (a folder on its path may not be searched)"
            )
            assert r.stderr.startswith(said) and r.stderr.count("\n") == 1, (command, r.stderr)
    finally:
        private.chmod(0o755)
    assert not (tmp_path / "out.jsonl").exists()


def test_a_cache_folder_that_may_not_be_searched_is_said_so(tmp_path):
    """A cache folder with no search permission (mode 644 or 000): stat() of the file in it
    raised, and parse warned "(PermissionError: [Errno 13] Permission denied: '...')", doctor's
    fix began with a comma, and `--cache-dir` of a 000 folder was click's usage error (exit 2)
    where a cache the run cannot use costs one warning. parse, the cache commands and doctor now
    say the folder and the fix, a folder name holding "; " too; a folder that may be searched but
    not listed (300) is a cache like any; a folder it may not make is said in words."""
    page = tmp_path / "p.png"
    Image.new("RGB", (64, 64), "white").save(page)
    folders = {mode: tmp_path / f"c{mode:o}" for mode in (0o644, 0o000, 0o300)}
    folders["semicolon"] = tmp_path / "a; b"
    if os.geteuid() == 0:  # only root may give a folder to another user
        folders["theirs"] = tmp_path / "theirs"  # another user's: only its owner may chmod it
    for folder in folders.values():
        with ResultCache(folder) as c:
            put(c, 1)
    if "theirs" in folders:
        os.chown(folders["theirs"], 65534, 65534)
    (tmp_path / "linked").mkdir()  # a folder it may search, its cache file a link into one it may not
    (tmp_path / "linked" / FILENAME).symlink_to(folders[0o000] / FILENAME)
    locked = tmp_path / "locked"
    locked.mkdir()
    modes = {folders[0o644]: 0o644, folders[0o000]: 0o000, folders[0o300]: 0o300, folders["semicolon"]: 0o644}
    if "theirs" in folders:
        modes[folders["theirs"]] = 0o700
    for folder, mode in modes.items():
        folder.chmod(mode)
    locked.chmod(0o555)

    def as_user(*args: str):
        return mineru(*args, cwd=tmp_path, preexec_fn=as_plain_user())

    def parse(cache: Path):
        return as_user("parse", str(page), "--out", "o.jsonl", "--force", "--cache-dir", str(cache), "--engine", "ocr")

    try:
        skip_unless_bits_stop(f"import os; os.stat({str(folders[0o644] / FILENAME)!r})")
        for cache in (folders[0o644], folders[0o000], folders["semicolon"], folders.get("theirs")):
            if cache is None:
                continue
            detail = f"cache folder {cache} may not be searched (permission denied)"
            fix = "give --cache-dir (or MINERU_CACHE_DIR) another folder"
            if cache != folders.get("theirs"):
                fix = f"chmod u+x {shlex.quote(str(cache))}, or {fix}"
            r = parse(cache)
            assert r.returncode == 0, r.stderr
            assert f"warning: local cache {cache} unavailable ({detail}; {fix}); running without it" in r.stderr
            assert "Errno" not in r.stderr, r.stderr
            stats = as_user("cache", "stats", "--cache-dir", str(cache))
            assert stats.returncode == 2 and stats.stderr == f"error: {detail}; {fix}\n", stats.stderr
            doctor = as_user("doctor", "--cache-dir", str(cache))
            line = next(x for x in doctor.stdout.splitlines() if "cache:" in x)
            assert line == f"[fail] cache: {detail} -> fix: {fix}, or run with --no-cache", line
        r = parse(folders[0o300])
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        stats = as_user("cache", "stats", "--cache-dir", str(folders[0o300]), "--json")
        assert stats.returncode == 0 and json.loads(stats.stdout)["entries"] == 2, stats.stdout  # the page's stored
        assert json.loads(stats.stdout)["file_bytes"] >= (folders[0o300] / FILENAME).stat().st_size  # by name: was 0
        linked = as_user("cache", "stats", "--cache-dir", str(tmp_path / "linked"))
        assert "may not be searched" not in linked.stderr and "linked" in linked.stderr, linked.stderr
        doctor = as_user("doctor", "--cache-dir", str(tmp_path / "linked"))  # ended in a traceback
        line = next(x for x in doctor.stdout.splitlines() if "cache:" in x)
        assert line.startswith(f"[fail] cache: cache file {tmp_path / 'linked' / FILENAME} cannot be read"), line
        assert "Traceback" not in doctor.stderr, doctor.stderr
        r = parse(locked / "new")
        assert r.returncode == 0, r.stderr
        said = f"cache folder {locked / 'new'} cannot be made (permission denied in {locked}); give --cache-dir"
        assert said in r.stderr, r.stderr
    finally:
        for folder in (*modes, locked):
            folder.chmod(0o755)


def damage_tables(folder: Path) -> None:
    """Overwrite the pages of the entries table and two of its indexes: the header, the schema and
    `meta` stay whole, so the cache opens and the damage shows at the first lookup."""
    con = sqlite3.connect(folder / FILENAME)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    roots = [r for (r,) in con.execute("SELECT rootpage FROM sqlite_master WHERE name LIKE 'entries%'")]
    con.close()
    data = bytearray((folder / FILENAME).read_bytes())
    for root in roots:
        data[(root - 1) * page_size : root * page_size] = b"\xab" * page_size
    (folder / FILENAME).write_bytes(bytes(data))


def test_damage_found_after_a_read_only_cache_opened_is_said_in_words(tmp_path):
    """A read-only cache damaged past its header opens, and the damage shows at the first lookup:
    the warning said SQLite's "local cache error (DatabaseError: database disk image is
    malformed)". Opened afresh (a reader's file may have changed under it) and still damaged, it
    is said as damage found at opening is: the file, why it stays, what to do; every lookup is a
    miss, warned once."""
    with ResultCache(tmp_path) as c:
        stored = [put(c, seed) for seed in range(30)]
    damage_tables(tmp_path)
    warnings: list[str] = []
    with read_only(tmp_path):
        with ResultCache(tmp_path, warn=warnings.append) as cache:
            assert all(cache.lookup(img, pixel_sha256(img), FP) is None for img in stored[:3])
    damaged = f"cache file {tmp_path / FILENAME} is damaged (database disk image is malformed)"
    why = "on a read-only file system" if os.geteuid() == 0 else "permission denied"
    assert len(warnings) == 2 and warnings[0].startswith(f"cache folder {tmp_path} is read-only"), warnings
    assert warnings[1] == (
        # read_only: a read-only mount as root, the write bits taken away otherwise
        f"local cache error ({damaged} and cannot be moved aside ({why}): remove it, "
        "or make its folder writable); this page is treated as a miss"
    ), warnings


def test_damage_found_after_opening_a_read_only_file_in_a_writable_folder_is_moved_aside(tmp_path):
    """Only the file read-only (444), its folder writable: damage found at a lookup was said to be
    in "a read-only folder" and never repaired, where damage found at opening is moved aside and
    the cache rebuilt. Both are now."""
    with ResultCache(tmp_path) as c:
        for seed in range(1, 30):
            put(c, seed)
    damage_tables(tmp_path)
    (tmp_path / FILENAME).chmod(0o444)
    skip_unless_bits_stop(f"open({str(tmp_path / FILENAME)!r}, 'r+b')")
    code = (
        "import json, sys; sys.path[:0] = sys.argv[1:]\n"
        "from test_cache_readonly import FP, noise_page, put\n"
        "from mineru_cli.cache import ResultCache\n"
        "from mineru_cli.cache.similarity import pixel_sha256\n"
        "said = []\n"
        f"with ResultCache({str(tmp_path)!r}, warn=said.append) as c:\n"
        "    hit = c.lookup(noise_page(1), pixel_sha256(noise_page(1)), FP)\n"
        "    put(c, 99)\n"
        "print(json.dumps({'hit': hit is not None, 'said': said}))\n"
    )
    here = str(Path(__file__).parent)
    r = subprocess.run(
        [sys.executable, "-c", code, here, str(Path(here).parent)],
        preexec_fn=as_plain_user(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert not out["hit"] and any("moved to results.sqlite3.corrupt and rebuilt" in w for w in out["said"]), out
    assert not any("read-only folder" in w for w in out["said"]), out
    assert (tmp_path / (FILENAME + ".corrupt")).is_file() and rows(tmp_path) == 1


def test_an_entry_that_fails_its_checksum_in_a_read_only_cache_is_not_said_removed(tmp_path):
    """A row whose payload no longer matches its checksum is never served; the warning said
    "ignored and removed" where a read-only cache removes nothing."""
    with ResultCache(tmp_path) as c:
        img = put(c, 1)
    con = sqlite3.connect(tmp_path / FILENAME)
    con.execute("UPDATE entries SET payload = payload || ' '")  # bit rot inside the row
    con.commit()
    con.close()
    warnings: list[str] = []
    with read_only(tmp_path):
        with ResultCache(tmp_path, warn=warnings.append) as cache:
            assert cache.lookup(img, pixel_sha256(img), FP) is None
    assert warnings[1:] == ["cache entry p1 failed its checksum; ignored (the read-only cache keeps it)"], warnings
    assert rows(tmp_path) == 1
    with ResultCache(tmp_path, warn=warnings.append) as cache:  # writable: removed, and said so
        assert cache.lookup(img, pixel_sha256(img), FP) is None
    assert warnings[-1] == "cache entry p1 failed its checksum; ignored and removed" and rows(tmp_path) == 0


def _as_plain_user(folder: Path, seeds: tuple[int, ...], store: int) -> dict:
    """In a process of a plain user (as_plain_user): look up the pages of `seeds` in the cache in
    `folder`, then store the page of `store`; what it found and the warnings said."""
    code = (
        "import json, sys; sys.path[:0] = sys.argv[1:]\n"
        "from test_cache_readonly import FP, noise_page, put\n"
        "from mineru_cli.cache import ResultCache\n"
        "from mineru_cli.cache.similarity import pixel_sha256\n"
        "said = []\n"
        f"with ResultCache({str(folder)!r}, warn=said.append) as c:\n"
        f"    hits = [c.lookup(noise_page(s), pixel_sha256(noise_page(s)), FP) is not None for s in {seeds!r}]\n"
        f"    put(c, {store})\n"
        "print(json.dumps({'hits': hits, 'said': said}))\n"
    )
    here = str(Path(__file__).parent)
    r = subprocess.run(
        [sys.executable, "-c", code, here, str(Path(here).parent)],
        preexec_fn=as_plain_user(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_reader_of_a_cache_it_may_not_write_makes_no_files_beside_it(tmp_path):
    """A cache file this user may not write (another user's, 644) in a folder it may write in (a
    shared 1777 or group folder): SQLite made its -wal and -shm files there as this user, mode 644,
    so the cache's owner could no longer write its own cache ("attempt to write a readonly
    database" for every page). The reader serves the hits and makes nothing."""
    with ResultCache(tmp_path) as c:
        put(c, 1)
    (tmp_path / FILENAME).chmod(0o444)
    skip_unless_bits_stop(f"open({str(tmp_path / FILENAME)!r}, 'r+b')")
    try:
        out = _as_plain_user(tmp_path, (1,), store=2)
        assert out["hits"] == [True] and len(out["said"]) == 1 and "is read-only" in out["said"][0], out
        assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME]
    finally:
        (tmp_path / FILENAME).chmod(0o644)
    assert rows(tmp_path) == 1


def test_side_files_another_user_left_are_said_and_cost_no_page(tmp_path):
    """A -wal and -shm file this user may not write beside its own writable cache file (left by
    another user's reader): every store failed, each said "local cache error (OperationalError:
    attempt to write a readonly database); this page is treated as a miss". The cache is read,
    nothing is stored, and one warning names the file and what to do."""
    with ResultCache(tmp_path) as c:
        put(c, 1)
    reader = sqlite3.connect(f"file:{tmp_path / FILENAME}?mode=ro", uri=True)  # makes them, as a reader did
    reader.execute("SELECT count(*) FROM entries").fetchone()
    reader.close()
    sides = [tmp_path / f"{FILENAME}-wal", tmp_path / f"{FILENAME}-shm"]
    assert all(p.exists() for p in sides)
    for p in sides:
        p.chmod(0o444)
    skip_unless_bits_stop(f"open({str(sides[0])!r}, 'r+b')")
    try:
        out = _as_plain_user(tmp_path, (1,), store=2)
    finally:
        for p in sides:
            p.chmod(0o644)
    assert out["hits"] == [True], out
    assert out["said"] == [
        f"cache file {sides[0]} may not be written by this user (another user's run made it): its results are "
        "used, new results are not stored; remove it (as its owner) while no run uses the cache"
    ], out
    assert rows(tmp_path) == 1


def test_a_user_allowed_to_write_by_a_capability_stores_in_the_cache(tmp_path):
    """A service user given CAP_DAC_OVERRIDE (it may write files it does not own) found another
    user's cache read-only: os.access, which answers for the real user id without capabilities,
    said it could not write the file. Writing is tried as SQLite does it: the results are stored."""
    from fshelpers import with_capability

    with ResultCache(tmp_path) as c:
        put(c, 1)
    prefix = with_capability("dac_override")
    code = (
        "import json, sys; sys.path[:0] = sys.argv[1:]\n"
        "from test_cache_readonly import put\n"
        "from mineru_cli.cache import ResultCache\n"
        "said = []\n"
        f"with ResultCache({str(tmp_path)!r}, warn=said.append) as c:\n"
        "    put(c, 2)\n"
        "print(json.dumps(said))\n"
    )
    here = str(Path(__file__).parent)
    r = subprocess.run(
        [*prefix, sys.executable, "-c", code, here, str(Path(here).parent)], capture_output=True, text=True
    )
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout + r.stderr
    assert rows(tmp_path) == 2
