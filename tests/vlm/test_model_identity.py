"""Which release a model folder holds, read from its files (never its name), and safe loading:
the tiny trained model in the 2509 shape and rewritten in the Pro shape (tests/vlm/model_shapes.py)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from model_shapes import COMMIT, copy_model, named_pro_2509, pro_shaped  # noqa: E402
from test_vlm_engine import EXPECTED_BLOCKS  # noqa: E402
from tiny_fixtures import tiny_vlm  # noqa: F401,E402  (fixture)

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.engines.vlm import VlmEngine, pick_profile  # noqa: E402
from mineru_cli.vlm.model_identity import detect  # noqa: E402
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO  # noqa: E402


def _blocks(result):
    return [(b.type, list(b.bbox), b.text) for b in result.blocks]


EXPECTED = [(b["type"], b["bbox"], b["text"]) for b in EXPECTED_BLOCKS]


@pytest.fixture(scope="module")
def shapes(tiny_vlm, tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    src = tiny_vlm / "model"
    return {
        "pro": pro_shaped(src, root / "hub" / "snapshots" / COMMIT),
        "named_pro": named_pro_2509(src, root / "MinerU2.5-Pro-2605-1.2B"),
        "root": root,
    }


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_pro_shape_is_detected_from_its_files(shapes, tiny_vlm):
    ident = detect(shapes["pro"])
    assert ident.profile == "pro" and ident.release == "MinerU2.5-Pro-2605-1.2B"
    assert ident.signals["config"] == "pro" and ident.signals["preprocessor"] == "pro" and ident.signals["tied"]
    assert ident.signals["pro_tokenizer_files"] == [
        "chat_template.jinja",
        "added_tokens.json",
        "special_tokens_map.json",
    ]
    assert pick_profile(shapes["pro"]) is PROFILE_PRO
    assert pick_profile(shapes["pro"], "2509") is PROFILE_2509  # --model-profile still overrides
    assert pick_profile(tiny_vlm / "model") is PROFILE_2509


def test_a_2509_model_named_pro_stays_2509(shapes):
    assert json.loads((shapes["named_pro"] / "config.json").read_text())["_name_or_path"].endswith("Pro-2605-1.2B")
    assert detect(shapes["named_pro"]).profile == "2509"
    assert pick_profile(shapes["named_pro"]) is PROFILE_2509


def test_files_that_disagree_are_refused_unless_the_profile_is_given(shapes, tmp_path):
    mixed = copy_model(shapes["pro"], tmp_path / "mixed")
    _edit(mixed / "preprocessor_config.json", lambda p: p.update(min_pixels=3136))
    with pytest.raises(SetupError, match="--model-profile"):
        pick_profile(mixed)
    assert pick_profile(mixed, "pro") is PROFILE_PRO


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: _edit(d / "config.json", lambda c: c.update(model_type="llava")), "holds no MinerU2.5 model"),
        (
            lambda d: _edit(d / "config.json", lambda c: c.update(architectures=["LlavaForConditionalGeneration"])),
            "holds no MinerU2.5 model",
        ),
        (lambda d: _edit(d / "config.json", lambda c: c.update(auto_map={"AutoModel": "x.Y"})), "remote code"),
        (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json"),
    ],
    ids=["model_type", "architecture", "remote_code", "no_tokenizer"],
)
def test_a_folder_that_is_no_mineru_model_is_refused(tiny_vlm, tmp_path, change, message):
    folder = copy_model(tiny_vlm / "model", tmp_path / COMMIT)
    change(folder)
    with pytest.raises(SetupError, match=message):
        pick_profile(folder)
    with pytest.raises(SetupError, match=message):
        pick_profile(folder, "2509")  # an explicit profile does not make it one


def test_pro_shape_parses_end_to_end_through_torch(shapes, tiny_vlm, tmp_path):
    page = Image.open(tiny_vlm / "page.png").convert("RGB")
    engine = VlmEngine(shapes["pro"], threads=1)
    assert engine.profile is PROFILE_PRO and engine.processor.config.min_pixels == 50176
    result = engine.parse(page)
    # the layout step does not depend on min_pixels: the same blocks in the same order
    assert [(t, b) for t, b, _ in _blocks(result)] == [(t, b) for t, b, _ in EXPECTED]
    # the crops went in at Pro's larger minimum (the tiny model was trained on 2509's sizes, so
    # it reads them worse: the content is compared below with 2509's preprocessor)
    w, h = engine.processor.target_size(180, 27)  # the title's crop
    assert w * h >= 50176 and engine.processor.num_image_tokens(180, 27) == w * h // 784
    # the same Pro-shaped files with 2509's preprocessor (the profile then has to be named):
    # the Pro protocol reads these block types as 2509 does, to the same blocks
    same = copy_model(shapes["pro"], tmp_path / COMMIT)
    _edit(same / "preprocessor_config.json", lambda p: p.update(min_pixels=3136))
    engine = VlmEngine(same, threads=1, profile="pro")
    assert engine.profile is PROFILE_PRO and engine.processor.target_size(180, 27)[0] < w
    assert _blocks(engine.parse(page)) == EXPECTED


def test_the_export_records_the_profile_and_the_onnx_runtime_uses_it(shapes, tiny_vlm, tmp_path):
    pytest.importorskip("onnx")
    from mineru_cli.export.onnx_export import export_model
    from mineru_cli.vlm.export_format import read_manifest, write_manifest

    out = tmp_path / "my-export"
    report = export_model(shapes["pro"], out, verify=False, exporter="torchscript", threads=1)
    ident = report["source"]["identity"]
    assert ident["profile"] == "pro" and ident["release"] == "MinerU2.5-Pro-2605-1.2B"
    assert ident["config_sha256"] == report["files"]["config.json"]["sha256"]
    assert "sha256" in report["source"] and report["source"]["files"]
    # the manifest decides, not the copied files: record 2509 and the runtime takes 2509
    manifest = read_manifest(out)
    assert pick_profile(out) is PROFILE_PRO
    manifest["source"]["identity"]["profile"] = "2509"
    write_manifest(out, manifest)
    assert pick_profile(out) is PROFILE_2509
    assert VlmEngine(out, runtime="onnx", threads=1).profile is PROFILE_2509
    # a config.json that is not the one the manifest hashed is refused
    _edit(out / "config.json", lambda c: c.update(_name_or_path="x"))
    with pytest.raises(SetupError, match="not the source model's config"):
        pick_profile(out)
