"""`mineru doctor` on this machine, and with a tampered export, an unwritable cache folder and an
unreachable Redis URL: what it prints, its JSON and its exit code."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from fshelpers import read_only
from helpers import mineru

from mineru_cli.vlm.export_format import FORMAT, FORMAT_VERSION, GRAPHS, write_manifest


@pytest.fixture
def env(tmp_path):
    """No model anywhere but where a test puts one; the cache and export stamps under tmp_path."""
    return {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": "", "MINERU_CACHE_DIR": str(tmp_path / "cache")}


def doctor(tmp_path, env, *args):
    r = mineru("doctor", "--json", *args, cwd=tmp_path, env=env, timeout=60)
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


def test_an_unwritable_cache_folder_fails_with_the_fix(tmp_path, env):
    (tmp_path / "a-file").write_text("")
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / "a-file" / "cache"))
    assert code == 1 and checks["cache"]["status"] == "fail"
    assert "not writable" in checks["cache"]["detail"] and "--no-cache" in checks["cache"]["fix"]
    code, _, checks = doctor(tmp_path, env, "--cache-dir", str(tmp_path / "a-file" / "cache"), "--no-cache")
    assert code == 0 and checks["cache"]["status"] == "info"


def test_a_read_only_cache_folder_fails_with_the_fix(tmp_path, env):
    folder = tmp_path / "ro-cache"
    folder.mkdir()
    with read_only(folder):
        code, _, checks = doctor(tmp_path, env, "--cache-dir", str(folder))
    assert code == 1 and checks["cache"]["status"] == "fail" and str(folder) in checks["cache"]["fix"]


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
