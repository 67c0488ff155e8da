"""The Pro profile against the Pro client MinerU 4.0.x runs (mineru-vl-utils 2.x, in a subprocess:
tests/vlm/pro_oracle.py), on the same model outputs: hand-written hostile and realistic ones for
each step, and generated ones.

Each case feeds a layout answer, a page image and the per-block answers to our protocol
(parse_layout -> select_blocks -> prepare_crops -> post_process) and to the client's own
(parse_layout_output -> prepare_for_extract -> post_process), and asserts the same crops (pixels,
prompts, sampling) and the same final blocks.
"""

from __future__ import annotations

import os

import numpy as np
import pro_oracle
import pytest
from helpers import oracle_missing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from mineru_cli.vlm.protocol.chat import SYSTEM_PROMPT
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.latex import fix_equation
from mineru_cli.vlm.protocol.layout import ANGLES, LayoutBlock, parse_layout
from mineru_cli.vlm.protocol.postprocess import post_process
from mineru_cli.vlm.protocol.pro import fix_text, select_blocks, tag_table_formulas
from mineru_cli.vlm.protocol.profiles import PROFILE_PRO as PRO
from mineru_cli.vlm.protocol.table_images import put_back_images

oracle_missing("the Pro oracle, mineru-vl-utils 2.x in .venv/pro-oracle,", pro_oracle.available())
# $MINERU_PRO_EXAMPLES raises the generated cases per test for a longer run (docs/benchmarks.md)
SETTINGS = settings(
    max_examples=int(os.environ.get("MINERU_PRO_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def oracle():
    o = pro_oracle.ProOracle()
    yield o
    o.close()


# --------------------------------------------------------------------------- helpers


def _box(x1, y1, x2, y2):
    return f"<|box_start|>{x1} {y1} {x2} {y2}<|box_end|>"


def el(kind, x1, y1, x2, y2, rotate="<|rotate_up|>", tail=""):
    """One layout element as the Pro model writes it."""
    return _box(x1, y1, x2, y2) + f"<|ref_start|>{kind}<|ref_end|>" + rotate + tail


def _ours(blocks):
    return [(b.type, [round(v, 12) for v in b.bbox], b.angle, b.content, b.merge_prev, b.sub_type) for b in blocks]


def _theirs(blocks):
    return [
        (
            b["type"],
            [round(v, 12) for v in b["bbox"]],
            b["angle"],
            b["content"],
            b.get("merge_prev", False),
            b.get("sub_type"),
        )
        for b in blocks
    ]


def page_image(seed=0, size=(600, 800), pictures=()):
    """A page: random noise (every pixel of a crop matters), with flat-coloured pictures."""
    rng = np.random.default_rng(seed)
    page = Image.fromarray(rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8), "RGB")
    draw = ImageDraw.Draw(page)
    for (x1, y1, x2, y2), colour in pictures:
        draw.rectangle((x1 * size[0] / 1000, y1 * size[1] / 1000, x2 * size[0] / 1000, y2 * size[1] / 1000), colour)
    return page


def answer_for(block: LayoutBlock, i: int, answers: dict, tokens=()) -> str:
    """The answer for the i-th crop; "{tokens}" in it stands for the tokens drawn on the crop."""
    answer = answers.get(block.type, "plain text {i}").replace("{i}", str(i))
    return answer.replace("{tokens}", "".join(f"<fcel>{t}" for t in tokens))


def run_both(oracle, layout: str, page: Image.Image, answers: dict | None = None, seed: int = 0, profile=PRO):
    """Both protocols on one page; returns (ours, theirs) after checking the crops agree. The
    client's image analysis is on when the profile's is (PRO: on, as MinerU 4 runs it)."""
    answers = answers or {}
    blocks = select_blocks(parse_layout(layout, profile).blocks, profile)
    crops = prepare_crops(page, blocks, profile, seed=seed)
    texts = [answer_for(blocks[c.index], k, answers, c.image_tokens) for k, c in enumerate(crops)]
    for crop, text in zip(crops, texts):
        blocks[crop.index].content = text
        blocks[crop.index].image_tokens = crop.image_tokens or None
    ours = post_process(blocks, profile)

    theirs = oracle.call(
        "two_step",
        page=pro_oracle.png(page),
        layout=layout,
        answers=texts,
        seed=seed,
        image_analysis=profile.image_analysis,
    )
    assert [c.index for c in crops] == theirs["indices"]
    assert [c.prompt for c in crops] == theirs["prompts"]
    assert [[c.sampling.presence_penalty, c.sampling.frequency_penalty] for c in crops] == [
        p[:2] for p in theirs["params"]
    ]
    for crop, their_crop in zip(crops, theirs["crops"]):
        image = pro_oracle.crop_image(their_crop)
        assert (crop.image.size, crop.image.mode) == (image.size, image.mode)
        assert crop.image.tobytes() == image.tobytes()
    assert _ours(ours) == _theirs(theirs["final"])
    return ours, theirs["final"]


# --------------------------------------------------------------------------- facts


def test_facts_match(oracle):
    facts = oracle.facts
    assert facts["version"].split(".")[0] == "2"
    assert SYSTEM_PROMPT == facts["system_prompt"]
    for key, prompt in facts["prompts"].items():
        if key.startswith("[") and key not in ("[default]", "[layout]"):
            continue  # cross-page table merging: off in MinerU 4, not done
        assert PRO.prompts[key] == prompt, key
        presence, frequency, ngram, temperature, top_k, repetition = facts["sampling"][key]
        ours = PRO.sampling[key]
        assert (ours.presence_penalty, ours.frequency_penalty, ours.no_repeat_ngram_size) == (
            presence,
            frequency,
            ngram,
        )
        assert (temperature, top_k, repetition) == (0.0, 1, 1.0)  # greedy
    assert sorted(PRO.block_types) == facts["block_types"]
    assert ANGLES == facts["angles"]
    assert PRO.layout_dedup_iou == facts["dedup_iou"]


# --------------------------------------------------------------------------- hand-written pages

# Each case: (what it exercises, layout answer, pictures drawn on the page, answers by type)
CASES = [
    (
        "txt_contd: a paragraph continued from the previous page and the previous block",
        "\n".join(
            [
                el("header", 50, 20, 950, 50),
                el("text", 50, 60, 950, 200, tail="<|txt_contd_tgt|>"),
                el("paragraph_title", 50, 210, 500, 240),
                el("text", 50, 250, 480, 600),
                el("text", 520, 250, 950, 600, tail="<|txt_contd_tgt|>"),
                el("title", 50, 610, 950, 640, tail="<|txt_contd_tgt|>"),  # only text blocks merge
            ]
        ),
        (),
        {},
    ),
    (
        "several elements on one line, rotate tokens missing or doubled, junk between",
        el("text", 10, 10, 500, 100)
        + el("text", 10, 110, 500, 200, rotate="", tail=" junk <|txt_contd_tgt|>")
        + el("equation", 10, 210, 500, 300, rotate="<|rotate_left|>")
        + "\ngarbage line\n"
        + el("Table", 10, 310, 990, 700, rotate="<|rotate_up|><|rotate_down|>"),
        (),
        {"equation": "\\[ x^2 \\]", "table": "<fcel>a<fcel>b<nl>"},
    ),
    (
        "[Non-Text] placeholders: dropped, kept empty (header/footer) or kept (tables, equations)",
        "\n".join(
            [
                el("header", 50, 10, 950, 40),
                el("text", 50, 50, 950, 100),
                el("list_item", 50, 110, 950, 140),
                el("table", 50, 150, 950, 400),
                el("equation", 50, 410, 950, 450),
                el("footer", 50, 960, 950, 990),
                el("page_number", 450, 930, 550, 955),
            ]
        ),
        (),
        {
            "header": "[Non-Text]",
            "text": " [Non-Text] ",
            "list_item": "[Non-Text]",
            "table": "[Non-Text]",
            "equation": "[Non-Text]",
            "footer": "[Non-Text]",
            "page_number": "[Non-Text]",
        },
    ),
    (
        "duplicates by IoU: same type and angle dropped, another type or angle kept, the first wins",
        "\n".join(
            [
                el("text", 100, 100, 500, 300),
                el("text", 101, 101, 500, 300),  # IoU > 0.9: dropped
                el("text", 100, 100, 500, 300, rotate="<|rotate_right|>"),  # another angle: kept
                el("title", 100, 100, 500, 300),  # another type: kept
                el("text", 100, 100, 500, 340),  # IoU 0.833: kept
                el("table", 100, 400, 900, 800),
                el("table", 100, 400, 900, 801),
            ]
        ),
        (),
        {"table": "<fcel>x<nl>"},
    ),
    (
        "blocks inside a table dropped (text, equation, equation_block), others kept",
        "\n".join(
            [
                el("table", 100, 100, 900, 600),
                el("text", 150, 150, 400, 200),
                el("equation", 150, 250, 400, 300),
                el("equation_block", 150, 250, 400, 350),
                el("table_caption", 150, 350, 400, 400),
                el("text", 850, 500, 950, 650),  # partly outside
            ]
        ),
        (),
        {"table": "<fcel>\\( a+b \\)<fcel>\\[ c \\]<nl><fcel><eq>d</eq><ecel><nl>"},
    ),
    (
        "images inside a table: masked with tokens in the crop, put back as <img>, dropped as blocks",
        "\n".join(
            [
                el("table", 100, 100, 900, 700),
                el("image", 150, 150, 300, 300),
                el("image", 500, 400, 700, 600),
                el("image", 850, 650, 990, 800),  # mostly outside: a figure of its own
                el("text", 100, 750, 900, 800),
            ]
        ),
        (((150, 150, 300, 300), (200, 30, 30)), ((500, 400, 700, 600), (20, 20, 20))),
        {"table": "<fcel>logo<fcel>[{tok0}]<nl><fcel>[ {tok1} ]<fcel>x<nl>"},
    ),
    (
        "image captions inside a figure or image_block dropped; outside kept",
        "\n".join(
            [
                el("image_block", 100, 100, 900, 500),
                el("image", 120, 120, 480, 400),
                el("chart", 520, 120, 880, 400),
                el("image_caption", 150, 420, 850, 480),
                el("image_caption", 150, 520, 850, 560),
                el("unknown", 100, 600, 400, 800),  # unknown -> image
            ]
        ),
        (),
        {},
    ),
    (
        "inline formulas: inline_formula boxes dropped, text Markdown fixes",
        "\n".join(
            [
                el("text", 50, 50, 950, 200),
                el("inline_formula", 100, 60, 200, 90),
                el("text", 50, 210, 950, 300),
                el("text", 50, 310, 950, 400),
                el("list_item", 50, 410, 950, 450),
            ]
        ),
        (),
        {
            "text": "We have \\[ a \\timesX b \\] and \\[ 1-3 \\] and \\( \\toy \\top \\intx \\) then \\( x = ___ \\).",
            "list_item": "- \\( a\\inA \\) and \\( ____ \\)",
        },
    ),
    (
        "equations: delimiters stripped, bad arrays tolerated, equation_block of two merged",
        "\n".join(
            [
                el("equation_block", 100, 100, 900, 400),
                el("equation", 100, 100, 900, 250),
                el("equation", 100, 250, 900, 400),
                el("equation", 100, 500, 900, 600),
            ]
        ),
        (),
        {"equation": "\\[ \\end{array} \\left( x \\tag{1} \\]"},
    ),
    (
        "an image in two overlapping tables goes to the smaller; one at a table's edge; an unknown token",
        "\n".join(
            [
                el("table", 50, 50, 950, 600),
                el("table", 100, 100, 600, 500),
                el("image", 150, 150, 400, 400),  # inside both: the smaller table holds it
                el("image", 880, 480, 960, 590),  # 87.5% inside the big table: not held
                el("image", 860, 60, 950, 120),  # at the big table's right edge: held
            ]
        ),
        (((150, 150, 400, 400), (10, 200, 10)), ((860, 60, 950, 120), (255, 255, 255))),
        {"table": "<fcel>[{tok0}]<fcel>[ZZZZ]<fcel>[{tok1}][{tok0}]<nl>"},
    ),
    (
        "tables upside down and turned left, each with images",
        "\n".join(
            [
                el("table", 50, 50, 950, 450, rotate="<|rotate_down|>"),
                el("image", 100, 100, 300, 200),
                el("image", 500, 300, 900, 440),
                el("table", 50, 500, 950, 950, rotate="<|rotate_left|>"),
                el("image", 600, 600, 900, 900),
            ]
        ),
        (((100, 100, 300, 200), (0, 0, 255)), ((500, 300, 900, 440), (90, 90, 90)), ((600, 600, 900, 900), (0, 0, 0))),
        {"table": "<fcel>[{tok0}] [{tok1}] [{tok2}]<nl>"},
    ),
    (
        "a table turned on its side with an image in it",
        "\n".join([el("table", 100, 100, 700, 900, rotate="<|rotate_right|>"), el("image", 200, 200, 400, 500)]),
        (((200, 200, 400, 500), (250, 250, 250)),),
        {"table": "<fcel>[{tok0}]<nl>"},
    ),
]


def _with_tokens(answers: dict, layout: str, page: Image.Image, seed: int = 0) -> dict:
    """Answers that name the tokens our crops drew (the model reads them off the crop)."""
    blocks = select_blocks(parse_layout(layout, PRO).blocks, PRO)
    tokens = [t[1:-1] for c in prepare_crops(page, blocks, PRO, seed=seed) for t in c.image_tokens]
    out = {}
    for kind, answer in answers.items():
        for i, token in enumerate(tokens):
            answer = answer.replace(f"{{tok{i}}}", token)
        out[kind] = answer
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pro_page(oracle, case):
    _, layout, pictures, answers = case
    page = page_image(len(layout), pictures=pictures)
    ours, _ = run_both(oracle, layout, page, _with_tokens(answers, layout, page))
    assert ours  # every case keeps blocks


def test_table_images_end_to_end(oracle):
    """The masked crop differs from the plain one, and the answer's tokens become the pictures."""
    _, layout, pictures, answers = next(c for c in CASES if c[0].startswith("images inside a table"))
    page = page_image(7, pictures=pictures)
    ours, _ = run_both(oracle, layout, page, _with_tokens(answers, layout, page))
    table = next(b for b in ours if b.type == "table")
    assert table.content.count('<img src="data:image/jpeg;base64,') == 2
    assert [b.type for b in ours] == ["table", "image", "text"]  # the two held images are gone
    blocks = select_blocks(parse_layout(layout, PRO).blocks, PRO)
    masked = prepare_crops(page, blocks, PRO)[0].image
    plain = prepare_crops(page, [LayoutBlock("table", blocks[0].bbox, 0)], PRO)[0].image
    assert masked.size == plain.size and masked.tobytes() != plain.tobytes()


def test_merge_prev_reaches_the_record(oracle):
    layout = CASES[0][1]
    ours, theirs = run_both(oracle, layout, page_image(1))
    assert [b.merge_prev for b in ours] == [False, True, False, False, True, False]


# --------------------------------------------------------------------------- generated

TYPES = sorted(map(str, PRO.block_types)) + ["inline_formula", "Text", "bogus"]
ROTATES = ["<|rotate_up|>", "<|rotate_right|>", "<|rotate_down|>", "<|rotate_left|>", ""]
TAILS = ["", "<|txt_contd_tgt|>", " x", "<|rotate_up|>", "\n"]


@st.composite
def element(draw):
    # boxes on a coarse grid so that duplicates, nesting and containment happen often
    x1, x2 = sorted(draw(st.lists(st.integers(0, 10), min_size=2, max_size=2, unique=True)))
    y1, y2 = sorted(draw(st.lists(st.integers(0, 10), min_size=2, max_size=2, unique=True)))
    jitter = draw(st.integers(0, 12))
    coords = [x1 * 100, y1 * 100, min(1000, x2 * 100 - jitter), y2 * 100]
    if draw(st.integers(0, 9)) == 0:
        coords[draw(st.integers(0, 3))] = draw(st.integers(990, 1100))
    kind = draw(st.sampled_from(TYPES + ["table", "image", "text", "image_caption", "equation", "list_item"] * 4))
    return el(kind, *coords, rotate=draw(st.sampled_from(ROTATES)), tail=draw(st.sampled_from(TAILS)))


@st.composite
def table_with_images(draw):
    """A table and images mostly inside it (some held, some not), angles mixed."""
    x1, y1 = draw(st.integers(0, 50)) * 10, draw(st.integers(0, 50)) * 10
    x2, y2 = x1 + draw(st.integers(10, 50)) * 10, y1 + draw(st.integers(10, 50)) * 10
    out = [el("table", x1, y1, x2, y2, rotate=draw(st.sampled_from(ROTATES)))]
    for _ in range(draw(st.integers(1, 3))):
        ix1 = draw(st.integers(x1 - 20, x2 - 20))
        iy1 = draw(st.integers(y1 - 20, y2 - 20))
        ix2 = ix1 + draw(st.integers(5, 200))
        iy2 = iy1 + draw(st.integers(5, 200))
        out.append(el("image", max(ix1, 0), max(iy1, 0), min(ix2, 1000), min(iy2, 1000)))
    return "\n".join(out)


@st.composite
def layout_answer(draw):
    elements = draw(st.lists(element() | table_with_images(), max_size=14))
    return draw(st.sampled_from(["\n", ""])).join(elements)


FORMULAS = ["x", "\\[ a \\]", "\\( b \\)", "\\(\\timesX\\)", "___", "\\[ 1-2 \\]", "\\left( y", "{", "<", "\\eqqcolon"]
TEXT = st.lists(st.sampled_from(FORMULAS + [" ", "word", "[Non-Text]", "\n"]), max_size=8).map("".join)
OTSL = st.lists(
    st.sampled_from(["<fcel>", "<ecel>", "<lcel>", "<ucel>", "<nl>", "a", "\\( c \\)", "[AAAA]", "{tokens}"]),
    max_size=12,
)


@st.composite
def answers(draw):
    return {
        "text": draw(TEXT),
        "list_item": draw(TEXT),
        "header": draw(st.sampled_from(["H", "[Non-Text]"])),
        "equation": draw(TEXT),
        "table": "".join(draw(OTSL)),
        "title": draw(TEXT),
    }


@SETTINGS
@given(layout_answer(), answers(), st.integers(0, 3))
def test_pro_pages_generated(oracle, layout, texts, seed):
    page = page_image(seed, size=(300 + 50 * seed, 400))
    # no exception is let through: the client raises on none of these inputs, and a swallowed
    # OracleError would let the test pass without a reference (an oracle that fails every call)
    run_both(oracle, layout, page, texts, seed=seed)


@SETTINGS
@given(layout_answer())
def test_pro_layout_generated(oracle, layout):
    ours = parse_layout(layout, PRO).blocks
    assert _ours(ours) == _theirs(oracle.call("layout", output=layout))


# --------------------------------------------------------------------------- single steps

TEXTS = [
    "",
    "plain",
    "\\[ x \\]",
    "\\[ 12, 3–4 \\]",
    "a \\[ b \\] c \\[ d",
    "\\( a \\timesb \\to c \\toq \\top \\inA \\inf \\)",
    "\\( a ___ b ____ \\)",
    "\\( ___ \\)",
    "\\(\\) \\( \\)",
    "\\[ \\subsetX \\] ___",
]


@pytest.mark.parametrize("text", TEXTS)
def test_text_fixes_hand_written(oracle, text):
    assert fix_text(text) == oracle.call("text", s=text)


@SETTINGS
@given(TEXT)
def test_text_fixes_generated(oracle, text):
    assert fix_text(text) == oracle.call("text", s=text)


@SETTINGS
@given(
    st.lists(st.sampled_from(["\\(", "\\)", "\\[", "\\]", "<eq>", "</eq>", "x", " ", "\n"]), max_size=10).map("".join)
)
def test_table_formula_tags_generated(oracle, content):
    assert tag_table_formulas(content) == oracle.call("table_formulas", s=content)


@SETTINGS
@given(TEXT)
def test_equations_generated(oracle, latex):
    assert fix_equation(latex, PRO) == oracle.call("equation", s=latex)


TOKEN_TEXT = st.lists(
    st.sampled_from(["[AC2D]", "[ AC2D ]", "[\tXY34 ]", "[AC2]", "[[AC2D]]", "AC2D", "x", " "]), max_size=8
)


@SETTINGS
@given(TOKEN_TEXT.map("".join), st.sampled_from([{}, {"[AC2D]": "data:A"}, {"[AC2D]": "data:A", "[XY34]": "data:B"}]))
def test_put_back_images_generated(oracle, content, tokens):
    assert put_back_images(content, tokens) == oracle.call("put_back", s=content, tokens=tokens)
