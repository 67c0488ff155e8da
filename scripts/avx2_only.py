"""Run a command as if this x86-64 CPU were a plain AVX2 one (no AVX-512, VNNI, BF16 or AMX):
onnxruntime then picks its AVX2 kernels (the u8 x s8 one that saturates, the u8 x u8 one) and
mineru-cli's CPU detection (/proc/cpuinfo) agrees with it. For measuring and testing the plain
AVX2 code paths on an AVX-512 or AMX machine; timings are this CPU running AVX2 code, not a
plain-AVX2 CPU's (say which when reporting them).

    python scripts/avx2_only.py [--build-dir DIR] -- COMMAND [ARGS ...]
    python scripts/avx2_only.py --check        # exit 0 if it works here, else say why (exit 2)

It compiles scripts/avx2_only.c (gcc) into DIR (default ~/.cache/mineru-cli) and runs COMMAND
with the library in LD_PRELOAD. It needs Linux's CPUID faulting (`cpuid_fault` in
/proc/cpuinfo's flags): the library makes each CPUID instruction trap and answers it with the
masked feature bits. A program with a SIGSEGV handler of its own takes the trap's signal and
fails: Python's faulthandler (run pytest with `-p no:faulthandler`, leave PYTHONFAULTHANDLER
unset; the launcher unsets it) and gcc's cc1 among them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("avx2_only.c")
NO_FAULTING = 97  # the library's exit status where CPUID faulting is not available


def unavailable() -> str | None:
    """Why the library cannot work on this machine, or None."""
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return f"needs x86-64 Linux (this is {sys.platform} {platform.machine()})"
    if shutil.which("gcc") is None:
        return "needs gcc to build scripts/avx2_only.c"
    try:
        flags = next((ln for ln in open("/proc/cpuinfo", encoding="utf-8") if ln.startswith("flags")), "")
    except OSError:
        flags = ""
    if "cpuid_fault" not in flags.split():
        return "this CPU or hypervisor offers no CPUID faulting (no cpuid_fault in /proc/cpuinfo)"
    return None


def build(build_dir: Path | None = None) -> Path:
    """The compiled library (built once per version of the source)."""
    source = SOURCE.read_bytes()
    build_dir = build_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mineru-cli"
    lib = build_dir / f"avx2_only-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if not lib.is_file():
        build_dir.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_name(f"{lib.name}.{os.getpid()}.tmp")
        # gcc's cc1 has a SIGSEGV handler of its own, so it cannot run under the library itself
        # (a session already under it builds a new version of it)
        env = dict(os.environ, LD_PRELOAD=" ".join(_not_ours(os.environ.get("LD_PRELOAD", ""))))
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE), "-ldl"], check=True, env=env)
        os.replace(tmp, lib)
    return lib


def _not_ours(preload: str) -> list[str]:
    return [p for p in preload.replace(":", " ").split() if not Path(p).name.startswith("avx2_only")]


def environ(lib: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) with the library preloaded (last, so that it sets up before any
    other preloaded library's constructor runs: they run in reverse order) and Python's
    faulthandler off (PYTHONDEVMODE turns it on too)."""
    lib = lib.resolve()
    if any(c.isspace() or c == ":" for c in str(lib)):  # LD_PRELOAD's separators
        raise ValueError(f"{lib}: LD_PRELOAD cannot name a path with spaces or ':'; use --build-dir")
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = " ".join([*_not_ours(env.get("LD_PRELOAD", "")), str(lib)])
    env.pop("PYTHONFAULTHANDLER", None)
    env.pop("PYTHONDEVMODE", None)
    return env


MARK = "[avx2_only.so:"  # what the library adds to /proc/cpuinfo's model name


def probe(lib: Path) -> str | None:
    """Why the library does not take effect here (None: it does): a child process under it must
    read the marked /proc/cpuinfo."""
    done = subprocess.run(
        ["grep", "-m1", "model name", "/proc/cpuinfo"], env=environ(lib), capture_output=True, text=True
    )
    if done.returncode == NO_FAULTING:
        return "the kernel refused CPUID faulting (arch_prctl ARCH_SET_CPUID)"
    if MARK not in done.stdout:
        return f"{lib} was not preloaded: {done.stderr.strip() or done.stdout.strip()}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path)
    ap.add_argument("--check", action="store_true", help="say whether it works here, run nothing else")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    why = unavailable()
    if why:
        print(f"avx2_only: {why}", file=sys.stderr)
        return 2
    lib = build(args.build_dir)
    try:
        why = probe(lib)
    except ValueError as exc:  # a path LD_PRELOAD cannot hold
        why = str(exc)
    if why:
        print(f"avx2_only: {why}", file=sys.stderr)
        return 2
    if args.check:
        print(f"avx2_only: {lib} works here")
        return 0
    if not command:
        ap.error("no command given")
    os.execvpe(command[0], command, environ(lib))


if __name__ == "__main__":
    sys.exit(main())
