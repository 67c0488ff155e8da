"""mineru-cli: batch document parsing on plain CPUs. `mineru_cli.parse()` is the Python API."""

import os
from typing import TYPE_CHECKING

from .version import __version__

# onnxruntime (1.32 on Linux too) records usage events in ~/.cache/Microsoft/DeveloperTools and
# sends them to Microsoft unless this is set when it is imported; mineru-cli never uses the
# network at run time. Set here, before anything imports onnxruntime; worker processes inherit it.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

if TYPE_CHECKING:  # what type checkers see of the names loaded on first use below
    from .api import PageRecord, Parser, RunConfig, parse

__all__ = ["Parser", "PageRecord", "RunConfig", "parse", "__version__"]


def __getattr__(name: str) -> object:
    # Loaded on first use: worker processes import this package before they set their thread
    # environment, and the API pulls in numpy and the PDF renderer.
    if name in ("parse", "Parser", "PageRecord", "RunConfig"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'mineru_cli' has no attribute {name!r}")
