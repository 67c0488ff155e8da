"""INT8 on plain AVX2 kernels, on whatever x86 CPU runs the suite.

The INT8 targets' promise (an `--target avx2` export is exact on the u8 x s8 kernel that adds
pairs in saturating 16-bit sums; a VNNI/AMX export runs exactly there on the u8 x u8 kernels)
only shows on a CPU without VNNI, and CI machines are often AVX-512 or AMX ones. Where Linux
offers CPUID faulting, scripts/avx2_only.py runs a process as if the CPU had AVX2 only: here it
runs onnxruntime's AVX2 kernels and the export tests' plain-AVX2 branches.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_fixtures import tiny_vlm  # noqa: F401

from mineru_cli.vlm import int8_target

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import avx2_only  # noqa: E402


@pytest.fixture(scope="module")
def avx2_env(tmp_path_factory):
    why = avx2_only.unavailable()
    if why:
        pytest.skip(f"scripts/avx2_only.py cannot run here: {why}")
    lib = avx2_only.build(tmp_path_factory.mktemp("avx2-only"))
    why = avx2_only.probe(lib)
    if why and "refused" in why:
        pytest.skip(f"scripts/avx2_only.py cannot run here: {why}")
    assert why is None, why  # built but not preloaded: a fault of the launcher
    return avx2_only.environ(lib)


def test_avx2_only_puts_onnxruntime_on_its_avx2_kernels(avx2_env, tmp_path):
    """Under scripts/avx2_only.py the CPU reads as plain AVX2 (to mineru-cli and onnxruntime
    alike), and onnxruntime's u8 x s8 kernel saturates on full-range signed weights as it does on
    a plain-AVX2 EPYC (docs/benchmarks.md: 3-8x the max error of the saturation-free kinds at full size), while
    signed 7-bit and unsigned weights stay exact."""
    out = tmp_path / "kernels.json"
    shape = "vision MLP fc1, 256 rows"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "int8_kernels.py"), "--shapes", shape, "--rounds", "1"]
        + ["--variants", "QInt8", "QInt8 7-bit", "QUInt8", "--json", str(out)],
        env=avx2_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    cpu = report["cpu"]
    errors = {
        v: report["shapes"][shape][k]["max_abs_err"]
        for v, k in (("s8", "QInt8"), ("s7", "QInt8 7-bit"), ("u8", "QUInt8"))
    }
    assert cpu["int8_target"] == "avx2" and "avx2" in cpu["isa"], cpu
    assert not set(cpu["isa"]) & {"avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"}, cpu
    assert "avx2_only.so" in cpu["model"], cpu  # every figure taken this way says so
    assert errors["s7"] < 2 * errors["u8"] and errors["u8"] < 2 * errors["s7"], errors
    assert errors["s8"] > 2 * errors["u8"], errors  # the 16-bit pair sums overflow


def test_int8_targets_on_plain_avx2_kernels(avx2_env, tiny_vlm):
    """The export tests' plain-AVX2 branches, on AVX2 kernels: an `--target avx2` export is right
    on the fast kernels; an `--target amx` one runs on the exact kernels (the CLI says so), and
    on the fast ones its parity falls apart."""
    if not int8_target.has_int8_sums():
        pytest.skip("this CPU is plain AVX2: the export tests take these branches natively")
    tests = [
        "test_an_avx2_export_is_saturation_free_and_right_on_any_cpu",
        "test_a_vnni_export_runs_exactly_where_it_would_saturate",
    ]
    env = {**avx2_env, "MINERU_TINY_VLM": str(tiny_vlm)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:faulthandler",
            "-p",
            "no:cacheprovider",
            "-k",
            " or ".join(tests),
            str(ROOT / "tests" / "vlm" / "test_onnx_export.py"),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0 and re.search(r"\b2 passed\b", done.stdout), done.stdout[-4000:] + done.stderr[-2000:]
