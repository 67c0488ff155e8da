"""ONNX exports of the tiny trained model, made once per test session.

Test modules import these fixtures (`from onnx_fixtures import tiny_onnx, tiny_onnx_int8`).
The fp32 export goes through the default (dynamo) exporter, so the suite exercises the path
users run; the INT8 one through the legacy TorchScript exporter (a fraction of a second), so
both exporters are covered and the session stays short.
"""

from __future__ import annotations

import pytest
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)

_EXPORTS: dict[str, dict] = {}


def _export(tiny_vlm, tmp_path_factory, name: str, **kw):
    """Once per process: every test module that imports a fixture gets its own FixtureDef,
    so the session scope alone would export once per module."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from mineru_cli.export.onnx_export import export_model

    if name not in _EXPORTS:
        out = tmp_path_factory.mktemp("onnx") / name
        _EXPORTS[name] = export_model(tiny_vlm / "model", out, threads=1, **kw)
    return _EXPORTS[name]


@pytest.fixture(scope="session")
def tiny_onnx_report(tiny_vlm, tmp_path_factory) -> dict:
    pytest.importorskip("onnxscript")
    return _export(tiny_vlm, tmp_path_factory, "fp32")


@pytest.fixture(scope="session")
def tiny_onnx(tiny_onnx_report):
    from pathlib import Path

    return Path(tiny_onnx_report["out_dir"])


@pytest.fixture(scope="session")
def tiny_onnx_int8_report(tiny_vlm, tmp_path_factory) -> dict:
    return _export(tiny_vlm, tmp_path_factory, "int8", int8=True, exporter="torchscript")


@pytest.fixture(scope="session")
def tiny_onnx_int8(tiny_onnx_int8_report):
    from pathlib import Path

    return Path(tiny_onnx_int8_report["out_dir"])
