"""The Pro profile against its client (mineru-vl-utils 2.x, tests/vlm/pro_oracle.py) on the input
shapes test_pro_conformance.py's generator does not make: pages tiny, huge, very wide and in
other colour modes; tables holding many images, nested tables, equation_blocks over equations;
Unicode answers. And what the suite relies on: the oracle is the pinned release, and a page's
masked crops are the same in every process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pro_oracle
import pytest
from helpers import oracle_missing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pro_conformance import ROTATES, el, page_image, run_both

from mineru_cli.core.geometry import covered
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.layout import LayoutBlock, parse_layout
from mineru_cli.vlm.protocol.postprocess import post_process
from mineru_cli.vlm.protocol.pro import select_blocks
from mineru_cli.vlm.protocol.profiles import PROFILE_PRO as PRO

oracle_missing("the Pro oracle, mineru-vl-utils 2.x in .venv/pro-oracle,", pro_oracle.available())
SETTINGS = settings(
    max_examples=int(os.environ.get("MINERU_PRO_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def oracle():
    o = pro_oracle.ProOracle()
    yield o
    o.close()


def test_oracle_is_the_pinned_release(oracle):
    """The oracle answering is the release the Makefile installs (not 0.1.22, not another 2.x)."""
    pinned = re.search(r"^PRO_ORACLE := mineru-vl-utils==(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned is not None
    assert oracle.facts["version"] == pinned.group(1)


# --------------------------------------------------------------------------- generated

SIZES = [(1, 1), (3, 500), (17, 23), (50, 50), (2000, 60), (60, 2000), (1700, 2200), (999, 1001)]
MODES = ["RGB", "L", "RGBA", "P", "LA", "1"]
KINDS = ["text", "title", "table", "image", "chart", "unknown", "image_caption", "list_item", "equation", "header"]


@st.composite
def coord(draw):
    return draw(st.sampled_from([0, 1, 999, 1000]) | st.integers(0, 1000))


@st.composite
def any_element(draw):
    x1, y1 = draw(coord()), draw(coord())
    # tiny boxes (a crop of 0 or 1 pixel) as often as ordinary ones; reversed corners too
    x2 = draw(st.sampled_from([x1 + 1, x1 - 1, x1 + 2]) | coord())
    y2 = draw(st.sampled_from([y1 + 1, y1 - 1, y1 + 3]) | coord())
    x2, y2 = min(max(x2, 0), 1000), min(max(y2, 0), 1000)
    tail = draw(st.sampled_from(["", "<|txt_contd_tgt|>", "<|txt_contd_tgt|><|txt_contd_tgt|>", "ü", " <|box_end|>"]))
    return el(draw(st.sampled_from(KINDS)), x1, y1, x2, y2, rotate=draw(st.sampled_from(ROTATES)), tail=tail)


@st.composite
def crowded_table(draw):
    """A table holding up to 20 images (some in a nested table, some at or past its edges)."""
    x1, y1 = draw(st.integers(0, 600)), draw(st.integers(0, 600))
    x2, y2 = min(1000, x1 + draw(st.integers(5, 400))), min(1000, y1 + draw(st.integers(5, 400)))
    out = [el("table", x1, y1, x2, y2, rotate=draw(st.sampled_from(ROTATES)))]
    if draw(st.booleans()):
        out.append(el("table", x1 + 5, y1 + 5, max(x1 + 6, x2 - 5), max(y1 + 6, y2 - 5)))
    for _ in range(draw(st.sampled_from([0, 1, 3, 8, 20]))):
        ix1, iy1 = draw(st.integers(max(0, x1 - 10), x2)), draw(st.integers(max(0, y1 - 10), y2))
        ix2, iy2 = min(1000, ix1 + draw(st.integers(1, 120))), min(1000, iy1 + draw(st.integers(1, 120)))
        out.append(el(draw(st.sampled_from(["image", "unknown", "chart"])), ix1, iy1, ix2, iy2))
    return out


@st.composite
def equation_group(draw):
    """An equation_block over equations big enough to be read (each gets a crop)."""
    x1, y1 = draw(st.integers(0, 700)), draw(st.integers(0, 700))
    out = [el("equation_block", x1, y1, x1 + 200, y1 + 200)]
    for k in range(draw(st.integers(1, 3))):
        out.append(el("equation", x1, y1 + 60 * k, x1 + 200, y1 + 60 * k + 60))
    return out


@st.composite
def odd_layout(draw):
    groups = draw(st.lists(any_element().map(lambda e: [e]) | crowded_table() | equation_group(), max_size=10))
    return draw(st.sampled_from(["\n", "", " "])).join(e for g in groups for e in g)


ANSWER_PARTS = st.sampled_from(
    ["", " ", "[Non-Text]", "ü€\u200b漢字", "\\( a \\)", "\\[ 1-2 \\]", "___", "<eq>x</eq>", "{tokens}"]
    + ["<fcel>{tokens}<nl>", "\\(\\timesX\\)", "\\tag{1}", "\\begin{array}", "<fcel>\\[ y \\]<nl>"]
)
ANSWER = st.lists(ANSWER_PARTS, max_size=4).map("".join)


@st.composite
def odd_answers(draw):
    return {k: draw(ANSWER) for k in ("text", "list_item", "header", "equation", "table", "title", "image_caption")}


@SETTINGS
@given(odd_layout(), odd_answers(), st.sampled_from(SIZES), st.sampled_from(MODES), st.integers(0, 3))
def test_pro_odd_pages_generated(oracle, layout, answers, size, mode, seed):
    page = page_image(seed, size=size).convert(mode)
    if _unread_equation_in_a_block(layout, page):
        return  # the client's post-processing falls back here: see test_unread_equation_in_an_equation_block
    run_both(oracle, layout, page, answers, seed=seed)


def _unread_equation_in_a_block(layout: str, page) -> bool:
    """Whether an equation_block covers two or more equations of which one gets no crop."""
    blocks = select_blocks(parse_layout(layout, PRO).blocks, PRO)
    read = {c.index for c in prepare_crops(page, blocks, PRO)}
    equations = [i for i, b in enumerate(blocks) if b.type == "equation"]
    for block in blocks:
        if block.type == "equation_block":
            inside = [i for i in equations if covered(blocks[i].bbox, block.bbox) > 0.9]
            if len(inside) > 1 and not set(inside) <= read:
                return True
    return False


# --------------------------------------------------------------------------- deviations kept on purpose


def test_unread_equation_in_an_equation_block(oracle):
    """An equation_block over two equations, one not read (its crop is under a pixel): the client's
    post-processing raises on the missing content and falls back to the blocks as they stood
    (equation_block kept, no \\[ \\]); ours merges the equations, the unread one as empty, as
    2509 does. Kept on purpose: the fallback's blocks are not MinerU's real output."""
    layout = "\n".join(
        [
            el("equation_block", 100, 100, 600, 300),
            el("equation", 100, 100, 600, 200),
            el("equation", 100, 200, 600, 201),  # 1/1000 of a 400-px page: no pixel row
        ]
    )
    page = page_image(0, size=(400, 400))
    blocks = select_blocks(parse_layout(layout, PRO).blocks, PRO)
    crops = prepare_crops(page, blocks, PRO)
    assert [c.index for c in crops] == [1]
    blocks[1].content = "x=1"
    ours = post_process(blocks, PRO)
    merged = "\\[\n\\begin{array}{l} x=1 \\\\  \\\\ \\end{array}\n\\]"
    assert [(b.type, b.content) for b in ours] == [("equation", merged)]
    theirs = oracle.call("two_step", page=pro_oracle.png(page), layout=layout, answers=["x=1"])
    assert [(b["type"], b["content"]) for b in theirs["final"]] == [
        ("equation_block", None),
        ("equation", "x=1"),
        ("equation", None),
    ]


# --------------------------------------------------------------------------- determinism

_CROPS = r"""
import hashlib, json, sys
sys.path[:0] = sys.argv[1:]
from test_pro_conformance import el, page_image
from mineru_cli.core.geometry import covered
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.layout import parse_layout
from mineru_cli.vlm.protocol.pro import select_blocks
from mineru_cli.vlm.protocol.profiles import PROFILE_PRO as PRO
layout = "\n".join([el("table", 50, 50, 950, 600), el("table", 100, 100, 600, 500)]
                   + [el("image", 120 + 40 * i, 120 + 30 * i, 150 + 40 * i, 150 + 30 * i) for i in range(9)]
                   + [el("table", 50, 650, 950, 950, rotate="<|rotate_left|>"), el("image", 600, 700, 900, 900)])
blocks = select_blocks(parse_layout(layout, PRO).blocks, PRO)
crops = prepare_crops(page_image(3), blocks, PRO)
print(json.dumps([[c.index, hashlib.sha256(c.image.tobytes()).hexdigest(), c.image_tokens] for c in crops]))
"""


def test_masked_crops_are_the_same_in_every_process():
    """Same page -> same tokens, same crops, whatever the hash seed (sets and dicts of strings
    change order with it) in separate processes."""
    runs = []
    for hash_seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _CROPS, str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "vlm")],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        runs.append(json.loads(out.stdout))
    assert runs[0] == runs[1] == runs[2]
    assert sum(len(tokens) for _, _, tokens in runs[0]) == 10  # every image masked, with a token
    assert [i for i, _, _ in runs[0]] == [0, 1, 11]


def test_prepare_crops_leaves_blocks_alone():
    """Masking reads the blocks only: a second call on the same blocks gives the same crops."""
    blocks = [LayoutBlock("table", (0.1, 0.1, 0.9, 0.9), 0), LayoutBlock("image", (0.2, 0.2, 0.4, 0.4), 0)]
    blocks = select_blocks(blocks, PRO)
    page = page_image(5)
    first, second = prepare_crops(page, blocks, PRO), prepare_crops(page, blocks, PRO)
    assert [c.image.tobytes() for c in first] == [c.image.tobytes() for c in second]
    assert [c.image_tokens for c in first] == [c.image_tokens for c in second]
