"""The torch runtime refuses a checkpoint transformers would load incompletely (missing or
unexpected weights, an output layer not tied when config.json says tied): the tiny trained model
in the Pro shape (tests/vlm/model_shapes.py), its weights edited."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from model_shapes import COMMIT, copy_model, pro_shaped  # noqa: E402
from tiny_fixtures import tiny_vlm  # noqa: F401,E402  (fixture)

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.vlm.runtime_torch import TorchRuntime  # noqa: E402


@pytest.fixture(scope="module")
def pro(tiny_vlm, tmp_path_factory):
    return pro_shaped(tiny_vlm / "model", tmp_path_factory.mktemp("pro") / COMMIT)


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _save_without(folder, drop=None, add=None):
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    for key in drop or ():
        del weights[key]
    weights.update(add or {})
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


def test_safe_loading_refuses_missing_unexpected_and_untied_weights(pro, tmp_path):
    TorchRuntime(pro)  # the Pro shape's nested tie flag loads tied
    missing = copy_model(pro, tmp_path / "missing")
    _save_without(missing, drop=["model.norm.weight"])
    with pytest.raises(SetupError, match="missing keys: .*norm.weight"):
        TorchRuntime(missing)
    unexpected = copy_model(pro, tmp_path / "unexpected")
    _save_without(unexpected, add={"model.extra.weight": torch.zeros(3)})
    with pytest.raises(SetupError, match="unexpected keys: .*extra.weight"):
        TorchRuntime(unexpected)
    # config says untied but no lm_head is stored: it would be random
    untied = copy_model(pro, tmp_path / "untied")
    _edit(untied / "config.json", lambda c: c["text_config"].update(tie_word_embeddings=False))
    with pytest.raises(SetupError, match="missing keys: lm_head.weight"):
        TorchRuntime(untied)
    # config says tied (inside text_config only) but the checkpoint holds another lm_head:
    # transformers then unties them silently
    other = copy_model(pro, tmp_path / "other_head")
    from safetensors.torch import load_file

    embed = load_file(other / "model.safetensors")["model.embed_tokens.weight"]
    _save_without(other, add={"lm_head.weight": embed + 1.0})
    with pytest.raises(SetupError, match="lm_head is not tied"):
        TorchRuntime(other)
