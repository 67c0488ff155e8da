"""The one-way import flow (pyproject.toml's [tool.importlinter] contracts) holds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    found = str(exe) if exe.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return found


def test_every_import_contract_is_kept():
    r = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout and "KEPT" in r.stdout


def test_a_forbidden_import_breaks_its_contract(tmp_path):
    """The contracts can fail: a copy of the package whose core imports the runner is refused."""
    shutil.copytree(ROOT / "mineru_cli", tmp_path / "mineru_cli")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    words = tmp_path / "mineru_cli" / "core" / "words.py"
    words.write_text(words.read_text() + "\nfrom .. import runner  # noqa\n")
    r = subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode != 0 and "core imports nothing else of mineru_cli BROKEN" in r.stdout, r.stdout + r.stderr
