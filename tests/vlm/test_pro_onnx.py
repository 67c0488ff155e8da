"""The Pro-shaped and the pro-named 2509-shaped fixtures (tests/vlm/model_shapes.py) through ONNX
end to end, as a user runs them: `mineru export`, then `mineru parse --engine vlm` on the export.
The release comes from the export's manifest, so each export folder is named after the other
release: a name that lied and was read would flip the profile."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from helpers import mineru
from model_shapes import COMMIT, named_pro_2509, pro_shaped
from test_vlm_engine import EXPECTED_BLOCKS
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.vlm.export_format import read_manifest
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO

PRO_STEPS = {"drop_figure_captions", "table_images", "text_fixes", "table_formula_tags"}


def _parse(cwd, model, out, *extra):
    proc = mineru(
        "parse", "page.png", "--engine", "vlm", "--model", str(model), "--out", out, "--no-cache", "--cpus", "1",
        *extra, cwd=cwd,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads((cwd / out).read_text())


def _layout(record):
    return [(b["type"], b["bbox"]) for b in record["blocks"]]


@pytest.fixture(scope="module")
def pro(tiny_vlm, tmp_path_factory):
    """The Pro shape in a Hugging Face snapshot folder (named by commit), exported by `mineru export`
    (fp32, the default dynamo exporter: about a minute) into a folder named after 2509."""
    root = tmp_path_factory.mktemp("pro-onnx")
    shutil.copy(tiny_vlm / "page.png", root / "page.png")
    model = pro_shaped(tiny_vlm / "model", root / "hub" / "snapshots" / COMMIT)
    export = root / "exports" / "MinerU2.5-2509-1.2B"
    proc = mineru("export", "--model", str(model), "--out", str(export), "--no-verify", "--threads", "1", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return {"root": root, "model": model, "export": export}


def test_the_pro_export_records_the_pro_identity(pro):
    ident = read_manifest(pro["export"])["source"]["identity"]
    assert (ident["profile"], ident["release"], ident["from"]) == ("pro", "MinerU2.5-Pro-2605-1.2B", "files")
    assert ident["signals"]["min_pixels"] == 50176 and ident["signals"]["tied"]
    assert ident["config_sha256"] == read_manifest(pro["export"])["files"]["config.json"]["sha256"]


def test_the_pro_shape_parses_through_onnx_to_the_torch_blocks(pro, record_validator):
    root = pro["root"]
    onnx = _parse(root, pro["export"], "onnx.jsonl")
    torch_run = _parse(root, pro["model"], "torch.jsonl", "--runtime", "torch")
    record_validator.validate(onnx)
    assert onnx["engine"]["options"]["runtime"] == "onnx" and torch_run["engine"]["options"]["runtime"] == "torch"
    assert onnx["engine"]["model"]["export"]["quantization"] == "fp32"
    # the Pro profile, read from the manifest (the export's folder says 2509)
    for record in (onnx, torch_run):
        assert record["engine"]["options"]["profile"] == record["engine"]["model"]["profile"] == PROFILE_PRO.name
        assert set(record["engine"]["options"]["post_process"]) >= PRO_STEPS
    # the layout step does not depend on min_pixels: the tiny page's boxes in their order; the
    # content is read from crops at Pro's larger minimum (tests/vlm/test_model_identity.py), and
    # the two runtimes read it alike, down to the Markdown
    assert _layout(onnx) == [(b["type"], b["bbox"]) for b in EXPECTED_BLOCKS]
    assert onnx["blocks"] == torch_run["blocks"] and onnx["markdown"] == torch_run["markdown"]


def test_a_2509_model_named_pro_stays_2509_through_onnx(tiny_vlm, tmp_path):
    """A 2509-shaped folder whose name and `_name_or_path` say Pro, exported into a folder named
    Pro: the manifest says 2509 and the parse gives the tiny page's exact blocks."""
    from mineru_cli.export.onnx_export import export_model

    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    model = named_pro_2509(tiny_vlm / "model", tmp_path / "MinerU2.5-Pro-2605-1.2B")
    export = tmp_path / "MinerU2.5-Pro-2605-1.2B-onnx"
    # the legacy exporter (seconds): `mineru export` itself is run on the Pro shape above
    export_model(model, export, verify=False, exporter="torchscript", threads=1)
    assert read_manifest(export)["source"]["identity"]["profile"] == "2509"
    record = _parse(tmp_path, export, "x.jsonl")
    assert record["engine"]["options"]["runtime"] == "onnx"
    assert record["engine"]["options"]["profile"] == record["engine"]["model"]["profile"] == PROFILE_2509.name
    assert "post_process" not in record["engine"]["options"]
    keys = ("type", "bbox", "text", "html", "latex")
    assert [{k: b.get(k) for k in keys} for b in record["blocks"]] == [
        {k: b.get(k) for k in keys} for b in EXPECTED_BLOCKS
    ]
