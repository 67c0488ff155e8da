"""Real filesystem conditions for tests: a read-only folder, a small filesystem that fills up.

Root ignores permission bits, so as root a folder is made read-only with a read-only bind mount
(as a read-only volume would be); elsewhere with chmod. A small filesystem is a tmpfs of a given
size where mounting is allowed (root); `None` where it is not, and the test falls back to a
file-size limit (RLIMIT_FSIZE: writes past it fail with EFBIG, as a full disk fails with ENOSPC).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest


def _mount(*args: str) -> bool:
    if shutil.which("mount") is None:  # a minimal container
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    # lazily where a file opened through it is still open (the mount goes when that closes)
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def make_read_only(path: Path) -> bool:
    """Make `path` (a folder) read-only for this process and its children; False where this
    machine cannot (root without mount rights)."""
    if os.geteuid() == 0:
        if not _mount("--bind", str(path), str(path)):
            return False
        if not _mount("-o", "remount,ro,bind", str(path)):
            _umount(path)
            return False
        return True
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return True


def make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        _umount(path)
        return
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    if not make_read_only(path):
        pytest.skip("cannot make a folder read-only here (root without mount rights)")
    try:
        yield
    finally:
        make_writable(path)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path | None]:
    """A tmpfs of `size` (e.g. "2m") mounted on `path`, or None where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)):
        yield None
        return
    try:
        yield path
    finally:
        _umount(path)


def fill(fs: Path, leave: int = 0) -> Path:
    """A ballast file that leaves `leave` bytes free on the filesystem at `fs` (0: full)."""
    st = os.statvfs(fs)
    ballast = fs / "ballast"
    with open(ballast, "wb") as fh:
        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return ballast


def as_plain_user() -> Callable[[], None] | None:
    """A preexec_fn for subprocess: as root, the child loses CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH (dropped from the bounding set, so the exec'ed program lacks them), and
    permission bits apply to it as to any user; None for a user, to whom they apply already."""
    if os.geteuid() != 0:
        return None

    def drop() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


def skip_unless_bits_stop(code: str) -> None:
    """Skip the test where the Python `code`, run as a plain user (as_plain_user), is not refused
    by a permission bit: this process keeps a capability that overrides them."""
    import subprocess
    import sys

    import pytest

    r = subprocess.run([sys.executable, "-c", code], preexec_fn=as_plain_user(), capture_output=True)
    if r.returncode == 0:
        pytest.skip("permission bits do not stop a plain user's process here (it keeps a DAC capability)")


def with_capability(cap: str) -> list[str]:
    """The start of a command line that runs a program as another user (uid and gid 65534)
    holding the capability `cap` ("dac_override", "dac_read_search") as a service user given
    one does (systemd's AmbientCapabilities=): it may write, or read, files its user may not.
    os.access answers for the real user id without capabilities and says it may not. Skipped
    where this machine cannot start such a process (not root, no setpriv)."""
    import subprocess
    import sys

    import pytest

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("starting a process of another user with a capability needs root and setpriv")
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    argv += [f"--inh-caps=+{cap}", f"--ambient-caps=+{cap}", "--"]
    if subprocess.run([*argv, sys.executable, "-c", ""], capture_output=True).returncode != 0:
        pytest.skip(f"setpriv cannot give a process the ambient capability {cap} here")
    return argv
