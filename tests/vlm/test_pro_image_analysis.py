"""The Pro profile's image analysis against the Pro client MinerU 4.0.x runs (mineru-vl-utils
2.x, tests/vlm/pro_oracle.py) with its image_analysis switch on, as MinerU 4 turns it on:

- which image/chart blocks get a crop (standalone, big enough; not inside an image_block, not
  held by a table), with which prompt, sampling and pixels: the client's prepare_for_extract;
- what an Image Analysis answer makes of the block (a table, an equation, a chart or an image
  with its sub_type and description): the client's post_process, on whole pages;
- the switch off: the same as the client's image_analysis=False (no figure crops at all).

Pages are random noise with flat pictures (tests/vlm/test_pro_conformance.py) and real pages
(examples/), the answers hand-written and generated.
"""

from __future__ import annotations

from pathlib import Path

import pro_oracle
import pytest
from helpers import oracle_missing
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from test_pro_conformance import SETTINGS, el, layout_answer, page_image, run_both

from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.layout import parse_layout
from mineru_cli.vlm.protocol.pro import select_blocks
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, without_image_analysis
from mineru_cli.vlm.protocol.profiles import PROFILE_PRO as PRO

oracle_missing("the Pro oracle, mineru-vl-utils 2.x in .venv/pro-oracle,", pro_oracle.available())

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OFF = without_image_analysis(PRO)


@pytest.fixture(scope="module")
def oracle():
    o = pro_oracle.ProOracle()
    yield o
    o.close()


def answer(kind="", sub="", caption="", content=None):
    """An Image Analysis answer as the Pro model writes it (content None: no content field)."""
    out = f"<|class_start|>{kind}<|class_end|>\n<|sub_class_start|>{sub}<|sub_class_end|>\n"
    out += f"<|caption_start|>{caption}<|caption_end|>\n"
    return out + ("" if content is None else f"<|content_start|>\n{content}\n<|content_end|>")


BAR_TABLE = "| Year | Sales |\n| --- | --- |\n| 2020 | 5 |\n| 2021 | 7 |"
ANSWERS = {
    "natural image": answer("natural_image", "photo", "A cat asleep on a red mat", ""),
    "natural image with content": answer("natural_image", "photo", "A street", "ignored text"),
    "chart": answer("chart", "bar_chart", "Sales by year", BAR_TABLE),
    "chart, malformed table": answer("chart", "line_chart", "Growth", "| a | b |\n| --- |\n| 1 | 2 | 3 |"),
    "chart, no sub-class": answer("chart", "", "A pie", "| k | v |\n| --- | --- |\n| x | 1 |"),
    "pure table, markdown": answer("pure_table", "", "", "| \\( x \\) | y |\n| --- | --- |\n| 1 | 2 |"),
    "pure table, OTSL": answer("pure_table", "", "", "<fcel>a<fcel>\\( b \\)<nl><fcel>1<fcel>2<nl>"),
    "pure table, HTML": answer("pure_table", "", "", "<table><tr><td>a</td></tr></table>"),
    "pure table, none": answer("pure_table", "", "a caption", "just words"),
    "pure formula": answer("pure_formula", "", "", "\\frac{a}{b} \\leq c"),
    "pure formula, display": answer("pure_formula", "", "", "\\[ E = mc^2 \\]"),
    "flowchart": answer("flowchart", "flowchart", "A loop", "```mermaid\ngraph TD\n    A[start] --> B[end]\n```"),
    "flowchart, bare": answer("flowchart", "flowchart", "Steps", "graph TD\n    A[x] --> B[y]\n    B --> C[z]"),
    "chemical": answer("chemical", "molecule", "Benzene", "C1=CC=CC=C1"),
    "diagram, empty content": answer("diagram", "schematic", "A circuit", ""),
    "class in capitals": answer(" Natural_Image ", " Photo ", "Hills", ""),
    "content never closed": "<|class_start|>diagram<|class_end|><|content_start|>half a diagram",
    "no tags": "a picture of two dogs",
    "empty": "",
    "Non-Text placeholder": "[Non-Text]",
}

FIGURES_PAGE = "\n".join(
    [
        el("title", 100, 40, 900, 80),
        el("image", 100, 100, 500, 400),  # standalone, big: analysed
        el("image_caption", 120, 350, 480, 390),  # inside the image: dropped
        el("image_block", 520, 100, 950, 500),  # a figure made of parts: not read
        el("chart", 540, 120, 930, 300),  # inside the image_block: not analysed
        el("image", 540, 320, 930, 480),  # inside the image_block: not analysed
        el("image", 500, 150, 750, 250),  # 92% inside the image_block: not analysed
        el("image", 480, 320, 700, 480),  # 82% inside it: analysed
        el("chart", 100, 420, 400, 700, rotate="<|rotate_left|>"),  # standalone, turned: analysed
        el("image", 420, 520, 470, 560),  # too small (0.05 x 0.04): not analysed
        el("image", 420, 580, 470, 900),  # narrow but area 0.016 > 0.01: analysed
        el("table", 500, 600, 950, 950),
        el("image", 600, 700, 800, 900),  # held by the table: masked in its crop
        el("text", 100, 920, 480, 980),
    ]
)
FIGURES_PICTURES = (
    ((100, 100, 500, 400), (200, 40, 40)),
    ((100, 420, 400, 700), (40, 200, 40)),
    ((600, 700, 800, 900), (40, 40, 200)),
)


def _analysed(profile, layout, page):
    blocks = select_blocks(parse_layout(layout, profile).blocks, profile)
    crops = prepare_crops(page, blocks, profile)
    return [(blocks[c.index].type, c.prompt) for c in crops if c.prompt.startswith("\nImage")]


def test_which_figures_are_read(oracle):
    """The crops (indices, prompts, sampling, pixels) are the client's: run_both checks them."""
    page = page_image(3, pictures=FIGURES_PICTURES)
    texts = {"image": ANSWERS["natural image"], "chart": ANSWERS["chart"], "table": "<fcel>x<nl>"}
    run_both(oracle, FIGURES_PAGE, page, texts)
    analysed = _analysed(PRO, FIGURES_PAGE, page)
    assert [kind for kind, _ in analysed] == ["image", "image", "chart", "image"]
    assert {prompt for _, prompt in analysed} == {"\nImage Analysis:"}
    assert _analysed(OFF, FIGURES_PAGE, page) == [] and _analysed(PROFILE_2509, FIGURES_PAGE, page) == []


def test_the_switch_off_is_the_clients_off(oracle):
    page = page_image(4, pictures=FIGURES_PICTURES)
    ours, _ = run_both(oracle, FIGURES_PAGE, page, {"image": ANSWERS["chart"]}, profile=OFF)
    assert all(b.content is None for b in ours if b.type in ("image", "chart"))


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_an_answer_makes_the_clients_block(oracle, name):
    page = page_image(5, pictures=FIGURES_PICTURES)
    ours, _ = run_both(oracle, FIGURES_PAGE, page, {"image": ANSWERS[name], "chart": ANSWERS[name]})
    assert len(ours) >= 5


def test_what_the_answers_become(oracle):
    """A few outcomes spelled out (run_both has checked them against the client)."""
    layout = "\n".join([el("image", 100, 100, 500, 400), el("text", 100, 500, 900, 600)])
    page = page_image(6)

    def first(name):
        return run_both(oracle, layout, page, {"image": ANSWERS[name]})[0][0]

    table = first("pure table, markdown")
    assert table.type == "table" and table.content.startswith("<table>") and "<eq>x</eq>" in table.content
    formula = first("pure formula")
    assert formula.type == "equation" and formula.content.startswith("\\[") and "\\frac{a}{b}" in formula.content
    chart = first("chart")
    assert (chart.type, chart.sub_type) == ("chart", "bar_chart") and "| 2021 | 7 |" in chart.content
    photo = first("natural image")
    assert (photo.type, photo.sub_type, photo.content) == ("image", "natural_image", "A cat asleep on a red mat")
    flow = first("flowchart, bare")
    assert (flow.type, flow.sub_type) == ("image", "flowchart")
    assert flow.content.startswith("```mermaid\ngraph TD") and 'A["x"] --> B["y"]' in flow.content


@pytest.mark.parametrize("name, dpi", [("report.pdf", 200), ("slide.png", None), ("two_column.png", None)])
def test_real_pages(oracle, name, dpi):
    """Figures laid over real pages: the crops of the client's prepare_for_extract, pixel for pixel."""
    path = EXAMPLES / name
    if dpi:
        from pdfs import first_page

        page = first_page(path, dpi).image
    else:
        page = Image.open(path)
    ours, _ = run_both(oracle, FIGURES_PAGE, page, {"image": ANSWERS["flowchart"], "chart": ANSWERS["chart"]})
    assert [b.type for b in ours].count("chart") >= 1


FRAGMENTS = [
    "<|class_start|>",
    "<|class_end|>",
    "<|sub_class_start|>",
    "<|sub_class_end|>",
    "<|caption_start|>",
    "<|caption_end|>",
    "<|content_start|>",
    "<|content_end|>",
    "chart",
    "pure_table",
    "pure_formula",
    "natural_image",
    "flowchart",
    "chemical",
    "bar",
    " ",
    "\n",
    "| a | b |\n",
    "| --- | --- |\n",
    "| 1 |\n",
    "graph TD\n",
    "A --> B\n",
    "<fcel>x<nl>",
    "\\( y \\)",
    "[Non-Text]",
]
ANALYSIS = st.lists(st.sampled_from(FRAGMENTS), max_size=16).map("".join)


@st.composite
def tagged(draw):
    """A well-formed answer with generated fields."""
    kind = draw(st.sampled_from(["chart", "pure_table", "pure_formula", "natural_image", "flowchart", "x", ""]))
    content = draw(st.one_of(st.none(), ANALYSIS))
    return answer(kind, draw(st.sampled_from(["", "bar", "Photo"])), draw(ANALYSIS), content)


@st.composite
def figure_layout(draw):
    """Pages whose layout holds figures often, inside image_blocks and tables too."""
    parts = draw(st.lists(st.sampled_from(["image", "chart", "image_block", "table"]), min_size=1, max_size=4))
    out = [draw(layout_answer())]
    for kind in parts:
        x1, y1 = draw(st.integers(0, 80)) * 10, draw(st.integers(0, 80)) * 10
        w, h = draw(st.integers(2, 40)) * 10, draw(st.integers(2, 40)) * 10
        out.append(el(kind, x1, y1, min(x1 + w, 1000), min(y1 + h, 1000)))
    return "\n".join(out)


@SETTINGS
@given(figure_layout(), tagged() | ANALYSIS, tagged() | ANALYSIS, st.integers(0, 3))
def test_figure_pages_generated(oracle, layout, image_answer, chart_answer, seed):
    page = page_image(seed, size=(300 + 50 * seed, 400))
    run_both(oracle, layout, page, {"image": image_answer, "chart": chart_answer, "table": "<fcel>t<nl>"}, seed=seed)


def test_analysed_blocks_keep_their_extras():
    """The engine finds each post-processed block's layout block (its angle, OCR lines, retry
    marks) although image analysis changed its type."""
    from mineru_cli.engines.vlm import _match_blocks
    from mineru_cli.vlm.protocol.layout import LayoutBlock
    from mineru_cli.vlm.protocol.postprocess import post_process

    blocks = [
        LayoutBlock("image", (0.1, 0.1, 0.5, 0.4), 0, content=ANSWERS["pure table, markdown"]),
        LayoutBlock("chart", (0.5, 0.1, 0.9, 0.4), 90, content=ANSWERS["natural image"]),
        LayoutBlock("image", (0.1, 0.5, 0.5, 0.8), 0, content=ANSWERS["pure formula"]),
        LayoutBlock("text", (0.1, 0.85, 0.9, 0.95), 0, content="words"),
    ]
    done = post_process(blocks, PRO)
    assert [(b.type, b.sub_type) for b in done] == [
        ("table", None),
        ("image", "natural_image"),
        ("equation", None),
        ("text", None),
    ]
    assert _match_blocks(done, blocks, PRO.content_rename) == [0, 1, 2, 3]
