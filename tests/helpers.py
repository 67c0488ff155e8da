"""Test helpers: run the real CLI, read a journal and check it against the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


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


def mineru(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300, **kw
) -> subprocess.CompletedProcess:
    """Run the real `mineru` entry point in a subprocess (as a user or cron would)."""
    full_env = {**os.environ, "MINERU_CACHE_DIR": str(Path(cwd or ".") / ".cache-test"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mineru_cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )
