"""Shared helpers: run the real CLI, read and schema-check its journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="session")
def record_validator():
    jsonschema = pytest.importorskip("jsonschema")
    from mineru_cli.core.record import load_schema

    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def read_journal(path: Path, validator=None) -> list[dict]:
    """Every line must be a complete record (and valid against the schema when asked)."""
    records = []
    with open(path, "rb") as fh:
        for line in fh:
            assert line.endswith(b"\n"), "journal line without newline"
            rec = json.loads(line)
            if validator is not None:
                validator.validate(rec)
            records.append(rec)
    return records


def mineru(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300,
           **kw) -> subprocess.CompletedProcess:
    """Run the real `mineru` entry point in a subprocess (as a user or cron would)."""
    full_env = {**os.environ, "MINERU_CACHE_DIR": str(Path(cwd or ".") / ".cache-test"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mineru_cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, **kw)
