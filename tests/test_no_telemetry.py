"""No network at run time: onnxruntime's usage telemetry (on by default in its Linux builds since
1.32: a device id and an event store under ~/.cache/Microsoft, uploaded to Microsoft) stays off
in every mineru-cli process, the embedded engine's workers included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STORE = Path(".cache") / "Microsoft"

SESSION = """
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
ort.InferenceSession(helper.make_model(graph).SerializeToString()).run(None, {"x": np.ones(1, np.float32)})
"""


def _run(home: Path, *argv: str) -> subprocess.CompletedProcess:
    """`argv` in a fresh process whose home is `home`, without ORT_DISABLE_TELEMETRY (which this
    test process has: importing mineru_cli set it) and without CI (onnxruntime keeps no store where
    CI is set, as on a CI machine; a user's machine has no such variable)."""
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME", "CI")}
    return subprocess.run(argv, env={**env, "HOME": str(home)}, cwd=home, capture_output=True, text=True, timeout=300)


@pytest.mark.e2e
def test_no_onnxruntime_telemetry_in_a_parse_run_or_the_api(tmp_path):
    bare = _run(tmp_path / "bare", sys.executable, "-c", SESSION)
    assert bare.returncode == 0, bare.stderr
    if not (tmp_path / "bare" / STORE).is_dir():
        pytest.skip("this onnxruntime keeps no telemetry store: nothing here to keep off")
    api = _run(tmp_path / "api", sys.executable, "-c", "import mineru_cli\n" + SESSION)
    assert api.returncode == 0, api.stderr
    assert not (tmp_path / "api" / STORE).exists()
    out = tmp_path / "r.jsonl"
    cli = [sys.executable, "-m", "mineru_cli", "parse", str(EXAMPLES / "prose.png"), "--out", str(out), "--no-cache"]
    parse = _run(tmp_path / "parse", *cli)
    assert parse.returncode == 0, parse.stderr
    assert not (tmp_path / "parse" / STORE).exists()
