"""The tiny trained MinerU2.5-shaped model, built once and kept in the pytest cache.

Test modules import these fixtures (`from tiny_fixtures import tiny_case, tiny_vlm`): a
tests/vlm/conftest.py would shadow tests/conftest.py, which other tests import as `conftest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _key() -> str:
    """Changes when the builder or the libraries that train and save the model change."""
    import PIL
    import tokenizers
    import torch
    import transformers

    h = hashlib.sha256((HERE / "tiny_vlm.py").read_bytes())
    h.update(f"{torch.__version__} {transformers.__version__} {tokenizers.__version__} {PIL.__version__}".encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def tiny_vlm(request):
    """Path of the fixture folder: model/ (the HF model folder), page.png, case.json.

    $MINERU_TINY_VLM names a prebuilt folder (e.g. from scripts/make_tiny_vlm.py) instead.
    """
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if os.environ.get("MINERU_TINY_VLM"):
        return Path(os.environ["MINERU_TINY_VLM"])
    sys.path.insert(0, str(HERE))
    import tiny_vlm as builder

    root = Path(request.config.cache.mkdir("tiny-vlm")) / _key()
    if not (root / "case.json").is_file():
        tmp = root.with_name(root.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        builder.build(tmp)
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    return root


@pytest.fixture(scope="session")
def tiny_case(tiny_vlm) -> dict:
    return json.loads((tiny_vlm / "case.json").read_text())
