"""The tiny trained MinerU2.5-shaped model, built once and kept in the pytest cache.

Test modules import these fixtures (`from tiny_fixtures import tiny_case, tiny_vlm`): a
tests/vlm/conftest.py would shadow tests/conftest.py, which other tests import as `conftest`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUILDER = HERE.parents[1] / "scripts" / "make_tiny_vlm.py"
PACKAGE = HERE.parents[1] / "mineru_cli"


# The model is trained on the inputs these make (pixels, crops, prompts, token ids, the layout's
# boxes) and through the torch runtime and the decoding loop: it must be trained again when they
# change.
TRAINED_ON = (
    "vlm/processor.py",
    "vlm/tokenizer.py",
    "vlm/generate.py",
    "vlm/runtime_torch.py",
    *(f"vlm/protocol/{name}.py" for name in ("chat", "crops", "layout", "profiles", "table_images", "pro")),
)


def _key() -> str:
    """Changes when the builder, the code that makes its training inputs (TRAINED_ON) or the
    libraries that train and save the model change."""
    import PIL
    import tokenizers
    import torch
    import transformers

    h = hashlib.sha256((HERE / "tiny_vlm.py").read_bytes() + BUILDER.read_bytes())
    for name in TRAINED_ON:
        h.update((PACKAGE / name).read_bytes())
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
    root = Path(request.config.cache.mkdir("tiny-vlm")) / _key()
    if not (root / "case.json").is_file():
        tmp = root.with_name(root.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        # a process of its own: the code paths that make the model the same on every CPU are
        # chosen when torch loads (tiny_vlm.PORTABLE_ENV, which the builder sets over any
        # inherited values)
        try:
            subprocess.run(
                [sys.executable, str(BUILDER), str(tmp)],
                check=True,
                timeout=900,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        except subprocess.CalledProcessError as exc:
            pytest.fail(f"{BUILDER} {tmp} failed (exit {exc.returncode}): {exc.stderr[-3000:]}")
        except subprocess.TimeoutExpired:
            pytest.fail(f"{BUILDER} {tmp} did not finish in 900 s")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    return root


@pytest.fixture(scope="session")
def tiny_case(tiny_vlm) -> dict:
    return json.loads((tiny_vlm / "case.json").read_text())


class Recorder:
    """A runtime wrapper that keeps every logits row it returns, per input."""

    def __init__(self, runtime):
        self.runtime, self.logits, self.live = runtime, [], []

    def prefill(self, inputs):
        out = self.runtime.prefill(inputs)
        self.logits = [[row] for row in out]
        self.live = list(range(len(inputs)))
        return out

    def step(self, ids):
        out = self.runtime.step(ids)
        for i, row in zip(self.live, out):
            self.logits[i].append(row)
        return out

    def retain(self, rows):
        self.live = [self.live[r] for r in rows]
        self.runtime.retain(rows)


class Counting:
    """A runtime wrapper that counts the sequences of every prefill (one per decoded request);
    `batches` holds each prefill's prompt lengths."""

    def __init__(self, runtime):
        self.runtime, self.batches = runtime, []

    def prefill(self, inputs):
        self.batches.append([len(x) for x in inputs])
        return self.runtime.prefill(inputs)

    def step(self, ids):
        return self.runtime.step(ids)

    def retain(self, rows):
        self.runtime.retain(rows)

    @property
    def sequences(self) -> int:
        return sum(len(b) for b in self.batches)
