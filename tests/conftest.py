"""Shared fixtures (helpers for the tests are in helpers.py)."""

from __future__ import annotations

import mineru_cli  # noqa: F401 - before any test module imports onnxruntime: it turns its telemetry off

# isort: split
import pytest


@pytest.fixture(scope="session")
def record_validator():
    jsonschema = pytest.importorskip("jsonschema")
    from mineru_cli.core.record import load_schema

    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# Fixtures that train or export the tiny MinerU2.5-architecture model (minutes on a fresh
# machine): a test that uses one runs the VLM path end to end.
_MODEL_FIXTURES = {"tiny_vlm", "tiny_case", "tiny_onnx", "tiny_onnx_int8", "tiny_onnx_report", "tiny_onnx_int8_report"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
