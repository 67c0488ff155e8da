"""Shared fixtures (helpers for the tests are in helpers.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def record_validator():
    jsonschema = pytest.importorskip("jsonschema")
    from mineru_cli.core.record import load_schema

    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


