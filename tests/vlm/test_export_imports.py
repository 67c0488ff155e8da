"""The exporter stands apart from the cache: its calibration pages are its own (export.calibration)."""

from __future__ import annotations

import subprocess
import sys


def test_the_exporter_imports_nothing_of_the_cache():
    code = ("import sys\nimport mineru_cli.export.bias_correction, mineru_cli.export.calibration\n"
            "import mineru_cli.export.onnx_export, mineru_cli.export.bench\n"
            "print('\\n'.join(m for m in sys.modules if m.startswith('mineru_cli.cache')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []
