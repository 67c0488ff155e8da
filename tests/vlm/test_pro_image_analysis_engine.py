"""Image analysis end to end through the tiny trained model in Pro's shape (torch runtime): the
page's picture is read with the Image Analysis prompt and its answer made into the block the Pro
client makes of it; --no-image-analysis reads no picture, and names itself in the record (its
fingerprint differs, so a cached result of the other setting is never served)."""

from __future__ import annotations

import json
import shutil

import pro_oracle
import pytest
from helpers import mineru, oracle_missing
from model_shapes import COMMIT, pro_shaped
from PIL import Image
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.engines.vlm import VlmEngine, _pixel_box
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.pro import select_blocks
from mineru_cli.vlm.protocol.profiles import PROFILE_PRO

pytest.importorskip("torch")
pytest.importorskip("transformers")
oracle_missing("the Pro oracle, mineru-vl-utils 2.x in .venv/pro-oracle,", pro_oracle.available())


@pytest.fixture(scope="module")
def pro(tiny_vlm, tmp_path_factory):
    root = tmp_path_factory.mktemp("pro-ia")
    shutil.copy(tiny_vlm / "page.png", root / "page.png")
    return {"root": root, "model": pro_shaped(tiny_vlm / "model", root / "hub" / "snapshots" / COMMIT)}


def test_the_picture_is_analysed_as_the_client_would(pro):
    page = Image.open(pro["root"] / "page.png").convert("RGB")
    engine = VlmEngine(pro["model"], runtime="torch")
    assert engine.profile is PROFILE_PRO
    result = engine.parse(page)
    assert result.counts["analysed_figures"] == 1
    # the picture's raw answer, read again through the engine's own steps
    _, layout, _ = engine.layout(page)
    blocks = select_blocks(layout.blocks, engine.profile)
    crops = [c for c in prepare_crops(page, blocks, engine.profile) if blocks[c.index].type == "image"]
    assert [c.prompt for c in crops] == ["\nImage Analysis:"]
    ((raw, _),) = engine.read_crops(crops)
    # what the client makes of that answer (process_image_or_chart)
    oracle = pro_oracle.ProOracle()
    try:
        (theirs,) = pro_oracle.image_analysis(oracle, "analyse", [raw])
    finally:
        oracle.close()
    assert "ok" in theirs, theirs
    kind = theirs["ok"]["class"]
    (picture,) = [b for b in result.blocks if b.bbox == _pixel_box(blocks[crops[0].index].bbox, *page.size)]
    assert kind not in ("pure_table", "pure_formula", "chart")  # what this model answers (else: say so here)
    content = theirs["ok"]["content"]
    content = theirs["ok"]["caption"] if kind == "natural_image" or not content else content
    # sub_type is the class even when the answer names none (""): it marks the text as analysed
    assert (picture.type, picture.text, picture.extra.get("sub_type")) == ("image", content, kind)


def test_no_image_analysis_reads_no_picture(pro):
    root = pro["root"]
    runs = {}
    for name, flag in (("on", "--image-analysis"), ("off", "--no-image-analysis")):
        out = root / f"{name}.jsonl"
        proc = mineru(
            "parse", "page.png", "--engine", "vlm", "--runtime", "torch", "--model", str(pro["model"]), "--out",
            str(out), "--no-cache", "--cpus", "1", flag, cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        runs[name] = json.loads(out.read_text())
    on, off = runs["on"], runs["off"]
    assert on["engine"]["options"]["post_process"]["image_analysis"] is True
    assert "image_analysis" not in off["engine"]["options"]["post_process"]
    assert "image" in off["engine"]["options"]["skip_types"] and "image" not in on["engine"]["options"]["skip_types"]
    assert on["fingerprint"] != off["fingerprint"]
    picture = [b for b in off["blocks"] if b["type"] == "image"]
    assert len(picture) == 1 and picture[0]["text"] == "" and "sub_type" not in picture[0]
    # the other blocks are read alike
    assert [b for b in on["blocks"] if b["type"] != "image"] == [b for b in off["blocks"] if b["type"] != "image"]
