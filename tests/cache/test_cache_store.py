"""SQLite tier: persistence, many processes at once, corruption recovery, CLI."""

import base64
import io
import json
import multiprocessing as mp
import os
import re
import resource
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
import zlib

import numpy as np
import pytest
from helpers import mineru
from PIL import Image
from typer.testing import CliRunner

from mineru_cli.cache import ResultCache
from mineru_cli.cache import similarity as sim
from mineru_cli.cache import store as store_module
from mineru_cli.cache.cli import MAX_LINE_CHARS, cache_app, export_lines
from mineru_cli.cache.similarity import pixel_sha256
from mineru_cli.cache.store import FILENAME, SCHEMA_VERSION, SqliteStore, digest
from mineru_cli.config import user_cache_dir
from mineru_cli.core.errors import EXIT_SETUP
from mineru_cli.units import parse_duration, parse_size

FP = "engine=test;v=1"


def noise_page(seed: int, size=(320, 240)) -> Image.Image:
    """Distinct random pages: never near-duplicates of each other."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8), "RGB")


def put(cache, seed, page_id=None):
    img = noise_page(seed)
    cache.store(img, pixel_sha256(img), FP, page_id or f"p{seed}", {"blocks": [], "markdown": f"page {seed}"})
    return img


def test_exact_hit_survives_reopen(tmp_path):
    with ResultCache(tmp_path) as c:
        img = put(c, 1)
    with ResultCache(tmp_path) as c:
        hit = c.lookup(img, pixel_sha256(img), FP)
    assert hit.kind == "hit" and hit.source == "p1" and hit.payload["markdown"] == "page 1"
    assert (tmp_path / FILENAME).exists()
    con = sqlite3.connect(tmp_path / FILENAME)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_the_cache_folder_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MINERU_CACHE_DIR", str(tmp_path / "x"))
    assert user_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("MINERU_CACHE_DIR")
    assert "mineru-cli" in str(user_cache_dir())


def _worker(args):
    directory, wid, n_own, shared = args
    errors, hits = [], 0
    with ResultCache(directory, warn=errors.append) as c:
        for i in range(n_own):
            put(c, 1000 * wid + i)
        for s in shared:  # every worker writes the same shared pages
            put(c, s, page_id=f"shared{s}")
        for other in range(4):
            for i in range(n_own):
                img = noise_page(1000 * other + i)
                hits += c.lookup(img, pixel_sha256(img), FP) is not None
    return errors, hits


def test_many_processes_share_one_cache(tmp_path):
    n_own, shared = 12, [501, 502, 503]
    with mp.get_context("spawn").Pool(4) as pool:
        results = pool.map(_worker, [(tmp_path, w, n_own, shared) for w in range(4)])
    assert all(errors == [] for errors, _ in results)
    assert all(hits >= n_own for _, hits in results)  # at least its own pages
    with ResultCache(tmp_path) as c:  # no lost writes
        for w in range(4):
            for i in range(n_own):
                img = noise_page(1000 * w + i)
                assert c.lookup(img, pixel_sha256(img), FP).source == f"p{1000 * w + i}"
    n = sqlite3.connect(tmp_path / FILENAME).execute("SELECT count(*) FROM entries").fetchone()[0]
    assert n == 4 * n_own + len(shared)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "overwritten-pages"])
def test_corrupted_file_is_rebuilt_not_fatal(tmp_path, damage):
    with ResultCache(tmp_path) as c:
        imgs = [put(c, s) for s in range(30)]
    db = tmp_path / FILENAME
    raw = bytearray(db.read_bytes())
    if damage == "garbage":
        db.write_bytes(b"this is not a database" * 100)
    elif damage == "truncated":
        db.write_bytes(raw[: len(raw) // 3])
    else:  # keep the header, smash every page after the first two
        for off in range(8192, len(raw), 4096):
            raw[off : off + 4096] = b"\xa5" * 4096
        db.write_bytes(raw)
    warnings = []
    with ResultCache(tmp_path, warn=warnings.append) as c:
        for img in imgs[:5]:
            hit = c.lookup(img, pixel_sha256(img), FP)
            assert hit is None or hit.payload["markdown"].startswith("page ")
        put(c, 999)  # the rebuilt cache works
        img = noise_page(999)
        assert c.lookup(img, pixel_sha256(img), FP).kind == "hit"
    assert any("corrupt" in w for w in warnings), warnings
    assert (tmp_path / (FILENAME + ".corrupt")).exists()


def test_checksum_mismatch_is_a_miss(tmp_path):
    with ResultCache(tmp_path) as c:
        img = put(c, 7)
    con = sqlite3.connect(tmp_path / FILENAME)
    con.execute("UPDATE entries SET payload = replace(payload, 'page 7', 'page 8')")
    con.commit()
    warnings = []
    with ResultCache(tmp_path, warn=warnings.append) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None
    assert any("checksum" in w for w in warnings)


def test_a_row_that_is_no_page_result_is_a_miss_then_replaced(tmp_path):
    """A row whose checksum holds but whose payload is no page result (a block without its
    box): it failed its page on every run; it is a miss, and the page's new result replaces it."""
    with ResultCache(tmp_path) as c:
        img = put(c, 9)
    payload = '{"blocks": [{"type": "text", "text": "x"}], "markdown": "x"}'
    con = sqlite3.connect(tmp_path / FILENAME)
    con.execute("UPDATE entries SET payload=?, digest=?", (payload, digest(payload)))
    con.commit()
    con.close()
    warnings = []
    with ResultCache(tmp_path, warn=warnings.append) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None
        assert warnings == ["local cache entry p9 is not a page result; ignored (the page is parsed again)"]
        put(c, 9)
        assert c.lookup(img, pixel_sha256(img), FP).payload["markdown"] == "page 9"


def test_schema_version_mismatch_starts_over(tmp_path):
    with ResultCache(tmp_path) as c:
        img = put(c, 3)
    con = sqlite3.connect(tmp_path / FILENAME)
    con.execute("UPDATE meta SET value='0' WHERE key='schema_version'")
    con.commit()
    with ResultCache(tmp_path) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None


def _newer(folder):
    con = sqlite3.connect(folder / FILENAME)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()


def test_a_cache_of_a_newer_schema_is_left_as_it_is_and_not_used(tmp_path):
    """A newer mineru-cli's cache on the same machine (the default folder is shared): this
    version emptied it without a word on every run, and the newer one emptied it back."""
    with ResultCache(tmp_path) as c:
        img = put(c, 3)
    _newer(tmp_path)
    warnings = []
    with ResultCache(tmp_path, warn=warnings.append) as c:
        assert c.lookup(img, pixel_sha256(img), FP) is None
        put(c, 4)
    assert len(warnings) == 1 and "newer mineru-cli" in warnings[0] and "running without it" in warnings[0]
    con = sqlite3.connect(tmp_path / FILENAME)
    assert con.execute("SELECT value FROM meta").fetchall() == [(str(SCHEMA_VERSION + 1),)]
    assert con.execute("SELECT page_id FROM entries").fetchall() == [("p3",)]


def test_cache_commands_on_a_cache_they_cannot_use_say_why(tmp_path):
    """A cache folder that is a file, or a newer mineru-cli's cache: every `mineru cache`
    command ended in a traceback (exit 1); it says why and exits 2."""
    (tmp_path / "file").write_text("not a folder")
    with ResultCache(tmp_path / "newer") as c:
        put(c, 1)
    _newer(tmp_path / "newer")
    run = CliRunner().invoke
    export = str(tmp_path / "out.jsonl")
    for folder, why in (("file", "is a file, not a folder"), ("newer", "newer mineru-cli")):
        for command in (["stats"], ["clear"], ["prune", "--older-than", "1d"], ["export", export]):
            r = run(cache_app, [*command, "--cache-dir", str(tmp_path / folder)])
            assert r.exit_code == 2 and isinstance(r.exception, SystemExit), (command, r.output)
            assert r.output.startswith("error: ") and why in r.output, r.output
    con = sqlite3.connect(tmp_path / "newer" / FILENAME)
    assert con.execute("SELECT count(*) FROM entries").fetchone() == (1,)  # not cleared


def _every_cache_command(tmp_path):
    """Each `mineru cache` subcommand (`mineru cache --help`), with an export to import."""
    dump = tmp_path / "dump.jsonl"
    with ResultCache(tmp_path / "src") as c:
        put(c, 1)
    assert CliRunner().invoke(cache_app, ["export", str(dump), "--cache-dir", str(tmp_path / "src")]).exit_code == 0
    return [
        ["stats"],
        ["stats", "--json"],
        ["clear"],
        ["prune", "--older-than", "1d"],
        ["export", str(tmp_path / "out.jsonl")],
        ["import", str(dump)],
    ]


def test_cache_commands_on_a_folder_they_cannot_use_say_what_and_where(tmp_path):
    """A --cache-dir that is a file, one under a file (ENOTDIR: a folder without permission does
    not stop root, who runs the tests) and a cache file that is a folder: every command printed
    the system's "[Errno 17] File exists: ...", "[Errno 20] Not a directory: ..." or "[Errno 21]
    ..." (and stats, clear, prune and export reported a folder under a file as a cache not made
    yet, exit 0); each prints one line saying which folder or file and why, and exits 2
    (EXIT_SETUP), leaving the export's file unmade."""
    commands = _every_cache_command(tmp_path)
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "holder" / FILENAME).mkdir(parents=True)
    cases = [
        (tmp_path / "file", f"cache folder {tmp_path / 'file'} is a file, not a folder; give --cache-dir"),
        (tmp_path / "file" / "sub" / "cache", f"{tmp_path / 'file'} (on its path) is a file, not a folder"),
        (tmp_path / "holder", f"cache file {tmp_path / 'holder' / FILENAME}: is a folder, not a file"),
    ]
    for folder, words in cases:
        for command in commands:
            r = CliRunner().invoke(cache_app, [*command, "--cache-dir", str(folder)])
            assert r.exit_code == EXIT_SETUP and isinstance(r.exception, SystemExit), (command, r.output)
            assert r.output.startswith("error: ") and words in r.output, (command, r.output)
            assert "Errno" not in r.output and r.output.count("\n") == 1, (command, r.output)
    assert not (tmp_path / "out.jsonl").exists()


def test_cache_commands_on_a_corrupt_cache_file_say_it_was_moved_aside(tmp_path):
    """A cache file of random bytes is moved aside and rebuilt (as parse does: it never fails a
    run), and every command says so in one line, the file's bytes kept beside it: clear, prune
    and import moved it without a word ("removed 0 entries")."""
    junk = bytes(np.random.default_rng(5).integers(0, 256, 8192, dtype=np.uint8))
    for n, command in enumerate(_every_cache_command(tmp_path)):
        folder = tmp_path / f"junk{n}"  # one each: a command's store, closed later, checkpoints into its file
        folder.mkdir()
        (folder / FILENAME).write_bytes(junk)
        r = CliRunner().invoke(cache_app, [*command, "--cache-dir", str(folder)])
        assert r.exit_code == 0, (command, r.output)
        moved = f"cache file {folder / FILENAME} is corrupt (not an SQLite file); moved to {FILENAME}.corrupt"
        assert moved in r.stderr and r.stderr.count("\n") == 1, (command, r.stderr)
        assert (folder / f"{FILENAME}.corrupt").read_bytes() == junk


def test_cache_commands_whose_file_cannot_be_opened_say_which_and_why(tmp_path):
    """`export FILE` into a folder that does not exist and `import FILE` of a file that is not
    there printed "[Errno 2] No such file or directory: ..."; import made the cache folder
    first. Each names its FILE and why, exits 2 and makes nothing. A FILE of bytes that are no
    UTF-8 is damaged lines, skipped and counted, as a line of bad JSON is."""
    run = CliRunner().invoke
    cache = tmp_path / "cache"
    r = run(cache_app, ["export", str(tmp_path / "nowhere" / "out.jsonl"), "--cache-dir", str(cache)])
    assert r.exit_code == EXIT_SETUP, r.output
    where = tmp_path / "nowhere"
    assert r.output == f"error: export file {where / 'out.jsonl'}: its folder {where} does not exist\n", r.output
    r = run(cache_app, ["import", str(tmp_path / "none.jsonl"), "--cache-dir", str(cache)])
    assert r.exit_code == EXIT_SETUP and r.output == f"error: import file {tmp_path / 'none.jsonl'}: no such file\n"
    r = run(cache_app, ["import", str(tmp_path), "--cache-dir", str(cache)])
    assert r.exit_code == EXIT_SETUP and r.output == f"error: import file {tmp_path}: is a folder, not a file\n"
    assert not cache.exists() and not (tmp_path / "nowhere").exists()
    (tmp_path / "binary.jsonl").write_bytes(b"\x00\xff\xfe\n\x89PNG\r\n")  # no UTF-8: a UnicodeDecodeError traceback
    r = run(cache_app, ["import", str(tmp_path / "binary.jsonl"), "--cache-dir", str(cache)])
    assert r.exit_code == 0 and r.output == "imported 0 entries, skipped 2 damaged lines\n", r.output


def test_cache_import_refuses_a_device_and_reads_a_pipe(tmp_path):
    """`import /dev/zero` read one endless line into memory and never ended: a device is
    refused, naming it, with exit 2 and no cache made. A pipe is an export's way between
    machines: `export /dev/stdout | import /dev/stdin` moves every entry, and export's summary
    goes to stderr there (on stdout it was a line of the export, imported as a damaged line)."""
    run = CliRunner().invoke
    cache = tmp_path / "cache"
    (tmp_path / "zero").symlink_to("/dev/zero")
    for device, what in (
        ("/dev/zero", "is a device"),
        ("/dev/null", "is a device"),
        (str(tmp_path / "zero"), "is a link to a device (/dev/zero)"),
    ):
        r = run(cache_app, ["import", device, "--cache-dir", str(cache)])
        assert r.exit_code == EXIT_SETUP and r.output == f"error: import file {device}: {what}, not a file\n"
    assert not cache.exists()
    with ResultCache(tmp_path / "src") as c:
        for i in range(3):
            put(c, i)
    cli = f"{shlex.quote(sys.executable)} -m mineru_cli cache"
    r = subprocess.run(
        f"{cli} export /dev/stdout --cache-dir {tmp_path / 'src'} | {cli} import /dev/stdin --cache-dir {cache}",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout == "imported 3 entries\n", (r.stdout, r.stderr)
    assert r.stderr == "exported 3 entries to /dev/stdout\n", r.stderr
    assert SqliteStore(cache).stats()["entries"] == 3


def test_cache_import_skips_a_line_longer_than_any_entry(tmp_path):
    """A file with no newlines was read whole into memory as one line: a line longer than any
    entry is a damaged line, read in pieces no longer than the limit and skipped, and the lines
    after it are imported."""

    class Reader(io.StringIO):
        longest = 0

        def readline(self, size=-1):
            line = super().readline(size)
            Reader.longest = max(Reader.longest, len(line))
            return line

    text = "short\n" + "y" * 30 + "\n" + "z" * 8 + "\n" + "next\n" + "w" * 20
    assert list(export_lines(Reader(text), limit=8)) == ["short\n", None, None, "next\n", None]
    assert Reader.longest == 8
    run = CliRunner().invoke
    dump = tmp_path / "dump.jsonl"
    with ResultCache(tmp_path / "src") as c:
        for i in range(2):
            put(c, i)
    assert run(cache_app, ["export", str(dump), "--cache-dir", str(tmp_path / "src")]).exit_code == 0
    first, second = dump.read_text().splitlines(keepends=True)
    dump.write_text(first + "x" * (MAX_LINE_CHARS + 5) + "\n" + second)
    r = run(cache_app, ["import", str(dump), "--cache-dir", str(tmp_path / "cache")])
    assert r.exit_code == 0 and r.output == "imported 2 entries, skipped 1 damaged lines\n", r.output


def _broken_links(tmp_path):
    """Cache folders that are, or hold, a link that loops or points at a missing path, each with
    the words a command says of it."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone" / "cache")
    for name, target in (("file-loop", FILENAME), ("file-dangling", "gone.sqlite3")):
        (tmp_path / name).mkdir()
        (tmp_path / name / FILENAME).symlink_to(target)
    missing = f"a link to {tmp_path / 'gone' / 'cache'}, which does not exist"
    return [
        (tmp_path / "loop", f"cache folder {tmp_path / 'loop'} is a link that loops; give --cache-dir"),
        (tmp_path / "dangling", f"cache folder {tmp_path / 'dangling'} is {missing}; give --cache-dir"),
        (tmp_path / "loop" / "sub", f"{tmp_path / 'loop'} (on its path) is a link that loops"),
        (tmp_path / "file-loop", f"cache file {tmp_path / 'file-loop' / FILENAME} is a link that loops; remove it"),
        (
            tmp_path / "file-dangling",
            f"cache file {tmp_path / 'file-dangling' / FILENAME} is a link to "
            f"{tmp_path / 'file-dangling' / 'gone.sqlite3'}, which does not exist; remove it",
        ),
    ]


def test_cache_commands_on_a_link_that_loops_or_points_nowhere_say_so(tmp_path):
    """A --cache-dir (or a folder above it, or the cache file in it) that is a link that loops
    or points at a missing path: stats, clear, prune and export said "no cache file there yet"
    with exit 0, import into a dangling link said "is a file, not a folder", into a looping
    cache file "unable to open database file", and one into a dangling cache file made the
    link's target. Each says what the path is in one line and exits 2 (EXIT_SETUP); nothing is
    made. The store refuses such a cache in the same words (parse runs without it, one warning)."""
    commands = _every_cache_command(tmp_path)
    for folder, words in _broken_links(tmp_path):
        for command in commands:
            r = CliRunner().invoke(cache_app, [*command, "--cache-dir", str(folder)])
            assert r.exit_code == EXIT_SETUP and isinstance(r.exception, SystemExit), (folder, command, r.output)
            assert r.output.startswith("error: ") and words in r.output, (folder, command, r.output)
            assert "Errno" not in r.output and r.output.count("\n") == 1, (folder, command, r.output)
        warnings: list[str] = []
        with pytest.raises(store_module.UnusableCache, match=re.escape(words)):
            SqliteStore(folder)
        with ResultCache(folder, warn=warnings.append) as c:
            put(c, 1)
        assert len(warnings) == 1 and words in warnings[0] and "running without it" in warnings[0], warnings
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "gone").exists()
    assert not (tmp_path / "file-dangling" / "gone.sqlite3").exists()
    # as a user runs it: a real process, for a looping and a dangling --cache-dir
    dump, real = tmp_path / "dump.jsonl", tmp_path / "real"
    real.mkdir()
    for folder, words in _broken_links(real)[:2]:
        for command in (["stats"], ["import", str(dump)]):
            r = mineru("cache", *command, "--cache-dir", str(folder), cwd=tmp_path)
            assert r.returncode == EXIT_SETUP and r.stdout == "", (command, r.stdout, r.stderr)
            assert r.stderr.startswith("error: ") and words in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_cache_folder_that_is_a_file_or_device_is_said_in_words_by_the_store_too(tmp_path):
    """A --cache-dir that is a file, under one, or a link to a device: `mineru cache` said so in
    words, but parse (the store, through ResultCache) warned "local cache ... unavailable
    (FileExistsError: [Errno 17] File exists: ...)". The store refuses it in the cache
    commands' words; the run goes on without it, one warning."""
    (tmp_path / "file").write_text("")
    (tmp_path / "device").symlink_to("/dev/null")
    cases = [
        (tmp_path / "file", f"cache folder {tmp_path / 'file'} is a file, not a folder"),
        (tmp_path / "file" / "sub", f"{tmp_path / 'file'} (on its path) is a file, not a folder"),
        (tmp_path / "device", f"cache folder {tmp_path / 'device'} is not a folder"),
    ]
    for folder, words in cases:
        with pytest.raises(store_module.UnusableCache, match=re.escape(words)):
            SqliteStore(folder)
        warnings: list[str] = []
        with ResultCache(folder, warn=warnings.append) as c:
            put(c, 1)
        assert len(warnings) == 1 and words in warnings[0] and "Errno" not in warnings[0], warnings
        assert "running without it" in warnings[0], warnings
    assert (tmp_path / "file").read_text() == ""


def test_a_cache_file_that_is_a_device_or_pipe_is_said_in_words(tmp_path):
    """A cache file, or a side file of SQLite's beside it, that is a device (or a link to one), a
    pipe or a socket: every `mineru cache` command and parse's warning said "cache folder ...:
    disk I/O error" or that a writable folder is read-only, and a pipe as the journal blocked
    every open for good. Each says which file and what it is in one line, exit 2; parse runs
    without the cache (one warning); the file is left as it was."""
    cases = []
    for name, side, what in [
        ("device", "", "device"),
        ("pipe", "", "pipe"),
        ("socket", "", "socket"),
        ("journal", "-journal", "pipe"),
        ("wal", "-wal", "device"),
        ("shm", "-shm", "folder"),
    ]:
        folder = tmp_path / name
        with ResultCache(folder) as c:  # a real cache beside the side file; replaced where it is the cache file
            put(c, 1)
        file = folder / (FILENAME + side)
        file.unlink(missing_ok=True)
        if what == "device":
            file.symlink_to("/dev/null")
        elif what == "pipe":
            os.mkfifo(file)
        elif what == "folder":
            file.mkdir()
        else:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(str(file))
        said = "is a link to a device (/dev/null)" if what == "device" else f"is a {what}"
        cases.append((folder, file, f"cache file {file} {said}, not a file; remove it"))
    commands = _every_cache_command(tmp_path)
    for folder, file, words in cases:
        for command in commands:
            r = CliRunner().invoke(cache_app, [*command, "--cache-dir", str(folder)])
            assert r.exit_code == EXIT_SETUP and r.output.startswith("error: "), (command, r.output)
            assert words in r.output and r.output.count("\n") == 1, (command, r.output)
        warnings: list[str] = []
        with ResultCache(folder, warn=warnings.append) as c:
            put(c, 1)
        assert len(warnings) == 1 and words in warnings[0] and "running without it" in warnings[0], warnings
        assert os.path.lexists(file) and not file.is_file(), file
    # as a user runs it: a pipe as the journal blocked `stats` for good
    r = mineru("cache", "stats", "--cache-dir", str(tmp_path / "journal"), cwd=tmp_path, timeout=120)
    assert r.returncode == EXIT_SETUP and cases[3][2] in r.stderr, r.stderr


def test_an_export_to_a_link_that_loops_says_so(tmp_path):
    """`mineru cache export FILE` where FILE, or a folder on its path, is a link that loops ended
    in a RuntimeError traceback (Path.resolve); import of such a FILE printed the system's
    words. Each names its FILE and why in one line, exit 2."""
    (tmp_path / "loop").symlink_to("loop")
    cache = tmp_path / "cache"
    with ResultCache(cache) as c:
        put(c, 1)
    for file in (tmp_path / "loop", tmp_path / "loop" / "out.jsonl"):
        for command, role in (("export", "export file"), ("import", "import file")):
            r = mineru("cache", command, str(file), "--cache-dir", str(cache), cwd=tmp_path)
            assert r.returncode == EXIT_SETUP and "Traceback" not in r.stderr, (command, r.stderr)
            assert r.stderr == f"error: {role} {file}: a link on its path loops\n", (command, r.stderr)


def test_an_export_under_a_file_says_so_of_its_file(tmp_path):
    """`mineru cache export FILE` where FILE's folder is a file: removing the partial file
    afterwards failed too, and its error replaced the one that says why, naming the cache folder
    and the partial file ("cache folder ...: a/.x.partial: a part of its path is a file")."""
    (tmp_path / "a").write_text("")
    cache = tmp_path / "cache"
    with ResultCache(cache) as c:
        put(c, 1)
    r = CliRunner().invoke(cache_app, ["export", str(tmp_path / "a" / "x"), "--cache-dir", str(cache)])
    assert r.exit_code == EXIT_SETUP and isinstance(r.exception, SystemExit), r.output
    words = "a part of its path is a file, not a folder"
    assert r.output == f"error: export file {tmp_path / 'a' / 'x'}: {words}\n", r.output


def test_an_export_of_a_cache_damaged_part_way_leaves_its_file_as_it_was(tmp_path):
    """A cache whose damage shows only while its rows are read (a sound header, damaged pages
    later on): the store moves it aside and goes on empty, and export wrote the rows it had read
    over FILE, said "exported N entries" and exited 0. FILE is now replaced only by a whole
    export; the command says where it stopped and exits 2. A link as FILE is followed (the
    link stays), and the cache's own file is refused as FILE."""
    folder = tmp_path / "cache"
    store = SqliteStore(folder, warn=lambda m: None)
    for i in range(600):
        payload = json.dumps({"blocks": [], "markdown": f"page {i} " + "x" * 2000, "warnings": []})
        store.put("fp", f"sha{i}", f"page{i}", 100, 100, 0, payload, 0, 0, b"", b"")
    store.close()
    run = CliRunner().invoke
    kept, link = tmp_path / "kept.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(kept.name)
    r = run(cache_app, ["export", str(link), "--cache-dir", str(folder)])
    assert r.exit_code == 0 and r.output == f"exported 600 entries to {link}\n", r.output
    assert link.is_symlink() and len(kept.read_text().splitlines()) == 600
    r = run(cache_app, ["export", str(folder / FILENAME), "--cache-dir", str(folder)])
    assert r.exit_code == EXIT_SETUP and "is the cache's own file" in r.output, r.output
    size = (folder / FILENAME).stat().st_size
    with open(folder / FILENAME, "r+b") as f:  # the first pages sound, later ones overwritten
        f.seek(size * 2 // 3)
        f.write(bytes(range(256)) * (size // 4 // 256))
    before = kept.read_bytes()
    r = run(cache_app, ["export", str(kept), "--cache-dir", str(folder)])
    assert r.exit_code == EXIT_SETUP, r.output
    assert f"error: cache file {folder / FILENAME} turned out damaged after" in r.output, r.output
    assert kept.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "kept.jsonl", "link.jsonl"]  # no partial file


def test_an_export_onto_a_full_disk_says_so_of_its_file_not_of_the_cache(tmp_path):
    """`mineru cache export FILE` where FILE's disk is full (here /dev/full, and a file-size limit,
    which fails the same way) said "cache folder CACHE: no space left on its disk": the write's
    error names no file, and the command took it for the cache's. It names FILE; a FILE already
    there is left as it was, and no partial file stays."""
    folder = tmp_path / "cache"
    store = SqliteStore(folder, warn=lambda m: None)
    for i in range(100):
        payload = json.dumps({"blocks": [], "markdown": f"page {i} " + "x" * 2000, "warnings": []})
        store.put("fp", f"sha{i}", f"page{i}", 100, 100, 0, payload, 0, 0, b"", b"")
    store.close()
    r = mineru("cache", "export", "/dev/full", "--cache-dir", str(folder), cwd=tmp_path)
    assert r.returncode == EXIT_SETUP and r.stderr == "error: export file /dev/full: no space left on its disk\n", (
        r.stderr
    )
    kept = tmp_path / "kept.jsonl"
    kept.write_text("an earlier export\n")

    def limit() -> None:  # FILE may hold 64 kB; the export is some 200 kB
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))

    r = mineru("cache", "export", str(kept), "--cache-dir", str(folder), cwd=tmp_path, preexec_fn=limit)
    assert r.returncode == EXIT_SETUP and r.stderr == f"error: export file {kept}: File too large\n", r.stderr
    assert kept.read_text() == "an earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "kept.jsonl"]  # no partial file


def test_import_into_a_missing_cache_folder_makes_it(tmp_path):
    """The one command that writes a cache where there is none: import makes the folder (and
    the folders above it), as parse does; stats, clear, prune and export make nothing there."""
    dump = tmp_path / "dump.jsonl"
    with ResultCache(tmp_path / "src") as c:
        put(c, 1)
    run = CliRunner().invoke
    assert run(cache_app, ["export", str(dump), "--cache-dir", str(tmp_path / "src")]).exit_code == 0
    r = run(cache_app, ["import", str(dump), "--cache-dir", str(tmp_path / "new" / "cache")])
    assert r.exit_code == 0 and r.output == "imported 1 entries\n", r.output
    assert (tmp_path / "new" / "cache" / FILENAME).is_file()


def test_cache_commands_where_no_cache_is_create_none(tmp_path, monkeypatch):
    """A machine that never parsed, or a mistyped --cache-dir: stats reported an empty cache
    as fine, and every command made the folder and an empty cache file there."""
    run = CliRunner().invoke
    missing = tmp_path / "typo" / "cache"
    export = tmp_path / "out.jsonl"
    r = run(cache_app, ["stats", "--cache-dir", str(missing), "--json"])
    with ResultCache(tmp_path / "real") as c:
        put(c, 1)
    real = json.loads(run(cache_app, ["stats", "--cache-dir", str(tmp_path / "real"), "--json"]).output)
    stats = json.loads(r.output)
    assert r.exit_code == 0 and stats.keys() == real.keys(), (stats, real)  # a script reads the same keys
    assert stats["path"] == str(missing / FILENAME) and not stats["exists"] and stats["entries"] == 0
    assert "no cache file there yet" in run(cache_app, ["stats", "--cache-dir", str(missing)]).output
    for command in (["clear"], ["prune", "--older-than", "1d"], ["export", str(export)]):
        r = run(cache_app, [*command, "--cache-dir", str(missing)])
        assert r.exit_code == 0 and f"no cache file at {missing / FILENAME}" in r.output, (command, r.output)
    assert export.read_text() == "" and not (tmp_path / "typo").exists()


def test_cache_commands_and_parse_name_one_folder_for_a_tilde(tmp_path, monkeypatch):
    """MINERU_CACHE_DIR=~/cache (a cron or systemd environment does not expand it): parse
    cached in the home's folder, `mineru cache` read and created a folder named "~" in the
    working directory and reported it empty."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MINERU_CACHE_DIR", "~/cache")
    monkeypatch.chdir(tmp_path)
    with ResultCache(user_cache_dir()) as c:  # where parse's workers store
        put(c, 1)
    assert (tmp_path / "home" / "cache" / FILENAME).exists()
    r = CliRunner().invoke(cache_app, ["stats", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["entries"] == 1, r.output
    assert not (tmp_path / "~").exists()


HOLD_LOCK = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
con.execute("UPDATE entries SET last_used = last_used")
print("holding", flush=True)
time.sleep(600)
"""


def test_a_cache_another_process_holds_costs_one_busy_wait_not_one_per_page(tmp_path, monkeypatch):
    """Another process holds the file's write lock (a `mineru cache prune` vacuuming a large
    cache, a stopped process mid-write): every store waited the whole busy timeout (30 s a
    page, for the rest of the run). One wait now pauses the writes; hits are served all along,
    and stores go on once the pause is over and the file is free."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 1.0, raising=False)
    monkeypatch.setattr(store_module, "LOCKED_PAUSE_S", 2.0, raising=False)
    with ResultCache(tmp_path) as c:
        first = put(c, 0)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / FILENAME)], stdout=subprocess.PIPE, text=True
    )
    warnings = []
    try:
        assert holder.stdout.readline().strip() == "holding"
        with ResultCache(tmp_path, warn=warnings.append) as c:
            t = time.perf_counter()
            for seed in range(1, 5):
                put(c, seed)  # each waited the busy timeout
            held = time.perf_counter() - t
            assert c.lookup(first, pixel_sha256(first), FP).kind == "hit"
            holder.kill()
            holder.wait()
            time.sleep(2.1)
            img = put(c, 9)
            assert c.lookup(img, pixel_sha256(img), FP).kind == "hit"
    finally:
        holder.kill()
        holder.wait()
    assert held < 2.5, held
    assert len(warnings) == 1 and "held by another process" in warnings[0], warnings


def test_units():
    assert parse_duration("30d") == 30 * 86400 and parse_duration("2h") == 7200 and parse_duration("90") == 90
    assert parse_size("2GB") == 2 * 10**9 and parse_size("1GiB") == 2**30
    with pytest.raises(ValueError):
        parse_size("lots")


def test_a_size_or_age_past_a_float_is_refused_in_one_short_line(tmp_path):
    """`mineru cache prune --max-size` (and parse's --max-worker-rss) of 400 digits ended in an
    OverflowError traceback (infinity has no whole number of bytes); a bad value was repeated
    whole. Each is a usage error, exit 2, showing the value's first 40 characters."""
    with ResultCache(tmp_path / "c") as c:
        put(c, 1)
    for option, value in (("--max-size", "9" * 400), ("--max-size", "x" * 5000), ("--older-than", "x" * 5000)):
        r = CliRunner().invoke(cache_app, ["prune", option, value, "--cache-dir", str(tmp_path / "c")])
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit), (option, r.output)
        assert repr(value)[:40] + "..." in r.output and value[:100] not in r.output, (option, r.output)
    stats = CliRunner().invoke(cache_app, ["stats", "--cache-dir", str(tmp_path / "c")])
    assert "entries:      1 " in stats.output, stats.output


def test_cli_stats_prune_export_import_clear(tmp_path, monkeypatch):
    # every row with a thumbnail, whatever the type rule makes of random pages (sizes are compared)
    monkeypatch.setattr(sim, "GLYPH_MIN", 0)
    src, dst = tmp_path / "src", tmp_path / "dst"
    with ResultCache(src) as c:
        imgs = [put(c, s) for s in range(6)]
    run = CliRunner().invoke
    r = run(cache_app, ["stats", "--cache-dir", str(src), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["entries"] == 6 and s["integrity"] == "ok"

    out = tmp_path / "dump.jsonl"
    assert run(cache_app, ["export", str(out), "--cache-dir", str(src)]).exit_code == 0
    assert len(out.read_text().splitlines()) == 6
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # a line still valid JSON whose payload was altered (its checksum no longer matches), and
    # one whose thumbnail does not decode to its size (as from an older mineru-cli)
    tampered = dict(rows[0], payload=rows[0]["payload"].replace("page 0", "page 9"), pixel_sha256="f" * 64)
    old_thumb = dict(rows[1], thumb=base64.b64encode(zlib.compress(b"\0" * 12)).decode(), pixel_sha256="e" * 64)
    with open(out, "a") as f:
        f.write(
            "{broken\n"
            + json.dumps(tampered)
            + "\n"
            + json.dumps(old_thumb)
            + "\n"
            + json.dumps(dict(rows[2], payload=5))
            + "\n"
            # a payload of another shape, its checksum right: no page result, never imported
            + json.dumps(dict(rows[3], payload="[]", digest=digest("[]"), pixel_sha256="d" * 64))
            + "\n"
        )
    r = run(cache_app, ["import", str(out), "--cache-dir", str(dst)])
    assert r.exit_code == 0, r.output
    assert "imported 7 entries (1 for exact hits only), skipped 4 damaged lines" in r.output
    with ResultCache(dst) as c:
        assert c.lookup(imgs[0], pixel_sha256(imgs[0]), FP).source == "p0"
        assert c.lookup(imgs[1], "e" * 64, FP).kind == "hit"  # kept for exact hits
    imported = SqliteStore(dst)
    assert imported.get(FP, "f" * 64) is None  # the tampered line
    assert imported.get(FP, "d" * 64) is None  # the payload of another shape
    assert imported._run(
        lambda conn: conn.execute(
            "SELECT thumb_w, length(thumb) FROM entries WHERE pixel_sha256=?", ("e" * 64,)
        ).fetchone()
    ) == (0, 0)

    # prune by age: make two entries old
    con = sqlite3.connect(src / FILENAME)
    con.execute("UPDATE entries SET last_used = last_used - 40*86400 WHERE page_id IN ('p0', 'p1')")
    con.commit()
    con.close()
    r = run(cache_app, ["prune", "--older-than", "30d", "--cache-dir", str(src)])
    assert r.exit_code == 0 and "removed 2" in r.output
    # prune by size: keep roughly one entry
    one = SqliteStore(src).stats()["data_bytes"] / 4
    r = run(cache_app, ["prune", "--max-size", f"{int(one * 1.5)}", "--cache-dir", str(src)])
    assert "removed 3" in r.output
    r = run(cache_app, ["clear", "--cache-dir", str(src)])
    assert "removed 1" in r.output
    assert SqliteStore(src).stats()["entries"] == 0


def test_a_new_file_reported_locked_while_others_create_it_is_retried(tmp_path, monkeypatch):
    """Processes creating a cache file at once: switching it to WAL can answer "database is
    locked" at once, without the busy timeout. It is retried, not turned into a run without cache."""
    calls = []
    setup = SqliteStore._setup

    def flaky(conn):
        calls.append(1)
        if len(calls) <= 2:
            raise sqlite3.OperationalError("database is locked")
        setup(conn)

    monkeypatch.setattr(SqliteStore, "_setup", staticmethod(flaky))
    store = SqliteStore(tmp_path)
    assert len(calls) == 3 and store.stats()["entries"] == 0


def test_a_cache_folder_name_too_long_is_not_said_to_be_unsearchable(tmp_path):
    """Every error of stat() on the cache folder's path was said with "(a folder on its path may
    not be searched)": a name too long for the filesystem too."""
    from mineru_cli.cache.store import folder_problem

    problem = folder_problem(tmp_path / ("x" * 300))
    assert problem is not None and problem.detail.endswith("File name too long"), problem
    assert "searched" not in str(problem), problem
