"""Test helpers: run the real CLI, read a journal and check it against the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def oracle_missing(what: str, available: bool) -> None:
    """A conformance oracle (a test-only reference implementation) that is not installed skips
    its tests on a developer's machine; under .ci/run (MINERU_REQUIRE_ORACLES=1), where `make dev`
    has installed them, it is a failure, so the conformance suites can never pass by skipping."""
    if available:
        return
    import pytest

    if os.environ.get("MINERU_REQUIRE_ORACLES") == "1":
        pytest.fail(f"{what} is not installed (make dev)", pytrace=False)
    pytest.skip(f"{what} is not installed (make dev)", allow_module_level=True)


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


def wait_for_event(proc: subprocess.Popen, lines: list[str], pred, limit: float = 120) -> None:
    """Read a --log-json run's stderr into `lines` until pred(event) holds for one of its JSON
    events; AssertionError (with the last lines) if it ends or `limit` seconds pass first."""
    import time

    assert proc.stderr is not None
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("{") and pred(json.loads(line)):
            return
    raise AssertionError("condition not reached: " + "".join(lines[-5:]))


def start_parse(
    src: Path, out: Path, *extra: str, env: dict | None = None, new_session: bool = False
) -> subprocess.Popen:
    """`mineru parse SRC --out OUT --no-cache --engine ocr --log-json EXTRA` started, not waited
    for (heartbeats every 0.2 s): the test reads its stderr events as they come (wait_for_event).
    `new_session`: the run leads its own process group (os.killpg(proc.pid, ...) signals it and
    its workers, as `timeout` or a service manager does)."""
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(src), "--out", str(out), "--no-cache", "--engine", "ocr"]
    return subprocess.Popen(
        [*cmd, "--log-json", *extra],
        cwd=out.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MINERU_HEARTBEAT_S": "0.2", **(env or {})},
        start_new_session=new_session,
    )
