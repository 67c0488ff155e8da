from mineru_cli.core.blocks import Block
from mineru_cli.reading_order import (
    column_bands,
    column_stretches,
    group_rows,
    reading_order,
    sort_blocks,
    text_columns,
    xy_cut,
)

# A two-column page: full-width title, two paragraphs per column whose gaps
# line up (plain XY-cut would interleave them), full-width figure below.
TITLE = (100, 50, 1100, 100)
L1, L2 = (100, 150, 580, 400), (100, 430, 580, 700)
R1, R2 = (620, 150, 1100, 400), (620, 430, 1100, 700)
FIGURE = (100, 750, 1100, 1000)


def test_columns_are_read_one_after_the_other():
    boxes = [R2, FIGURE, L1, TITLE, R1, L2]
    order = [boxes[i] for i in xy_cut(boxes)]
    assert order == [TITLE, L1, L2, R1, R2, FIGURE]


def test_short_left_column_tail_stays_in_its_column():
    tail = (100, 730, 580, 800)  # left column runs on below the right one
    boxes = [tail, R1, L1, R2, L2]
    assert [boxes[i] for i in xy_cut(boxes)] == [L1, L2, tail, R1, R2]


def test_a_title_under_a_navigation_bar_does_not_make_the_bar_a_column():
    """A slide's navigation bar (four entries) over a title and a body: the bar's rightmost entry
    lies right of everything below it, but the title runs across the bar's gutters, so the
    bands stay apart (merged, the entry was read as a column of its own after the slide)."""
    bar = [(14, 0, 173, 15), (190, 0, 341, 15), (409, 0, 611, 15), (677, 0, 742, 19)]
    title, body = (13, 55, 544, 85), (67, 168, 652, 292)
    boxes = [body, bar[3], title, bar[1], bar[0], bar[2]]
    assert [boxes[i] for i in xy_cut(boxes)] == [*bar, title, body]


def test_single_column_lines_stay_top_to_bottom():
    date = (800, 50, 1100, 80)  # right-aligned line above...
    greeting = (100, 120, 400, 150)  # ...a left-aligned one: not two columns
    body = (100, 170, 1100, 400)
    boxes = [body, greeting, date]
    assert [boxes[i] for i in xy_cut(boxes)] == [date, greeting, body]


def test_headers_first_and_footers_last():
    boxes = [(500, 1600, 540, 1630), L1, (100, 10, 600, 40), R1, (100, 1650, 1100, 1700)]
    types = ["page_number", "text", "header", "text", "footer"]
    assert [types[i] for i in reading_order(boxes, types)] == ["header", "text", "text", "page_number", "footer"]


def test_overlapping_boxes_fall_back_to_top_left_order():
    boxes = [(50, 60, 300, 200), (0, 0, 200, 100), (100, 50, 400, 150)]
    assert xy_cut(boxes) == [1, 2, 0]


def test_sort_blocks_and_empty_input():
    blocks = [Block("text", R1, "right"), Block("text", L1, "left"), Block("title", TITLE, "t")]
    assert [b.text for b in sort_blocks(blocks)] == ["t", "left", "right"]
    assert reading_order([]) == [] and xy_cut([]) == []


def test_group_rows_orders_lines_top_down_then_left_right():
    boxes = [(300, 102, 400, 130), (0, 100, 200, 128), (0, 140, 250, 170), (10, 60, 90, 90)]
    assert group_rows(boxes) == [[3], [1, 0], [2]]


def test_column_bands_merge_overlapping_spans():
    assert column_bands([(0, 0, 50, 10), (40, 20, 90, 30), (200, 0, 260, 10)]) == [(0, 90), (200, 260)]


def _lines(x1, x2, top, n, pitch=30, height=20):
    return [(x1, top + k * pitch, x2, top + k * pitch + height) for k in range(n)]


def test_text_columns_split_lines_at_a_gutter_through_all_of_them():
    left, right = _lines(100, 560, 100, 5), _lines(620, 1080, 100, 4)
    boxes = [b for pair in zip(left, right) for b in pair] + [left[-1]]  # row by row, as OCR gives them
    columns = text_columns(boxes)
    assert [[boxes[i] for i in c] for c in columns] == [sorted(left), sorted(right)]


def test_text_columns_keep_one_column_paragraphs_and_narrow_side_pieces_whole():
    ragged = [(100, 100, 900, 120), (100, 130, 700, 150), (100, 160, 950, 180), (100, 190, 400, 210)]
    assert text_columns(ragged) == [[0, 1, 2, 3]]
    # a table of contents: titles and their page numbers, a narrow column, read row by row
    toc = [
        b for k in range(4) for b in ((100, 100 + 30 * k, 700, 120 + 30 * k), (1000, 100 + 30 * k, 1040, 120 + 30 * k))
    ]
    assert text_columns(toc) == [list(range(8))]
    # a small table with no table region: its columns are a few characters wide, so it reads
    # row by row (Star Mass Luminosity / tau Cet 0.78 0.52 ...), not column by column
    table = [
        b
        for k in range(4)
        for b in (
            (100, 100 + 30 * k, 150, 120 + 30 * k),
            (170, 100 + 30 * k, 215, 120 + 30 * k),
            (230, 100 + 30 * k, 310, 120 + 30 * k),
        )
    ]
    assert text_columns(table) == [list(range(12))]
    assert len(text_columns(table, min_heights=2)) == 3  # what it was before the width rule
    # a single line beside a column is no column either
    assert len(text_columns(_lines(100, 560, 100, 5) + [(620, 100, 1080, 120)])) == 1


def test_text_columns_keep_a_side_panel_in_smaller_print_apart():
    # a slide's list (20 px print) beside a beamer sidebar (13 px print, 12 % of the width): the
    # sidebar is too narrow for a column of text, and its smaller print makes it a column all the same
    body, sidebar = _lines(100, 800, 100, 6, pitch=40), _lines(900, 1000, 95, 8, pitch=30, height=13)
    boxes = body + sidebar
    assert text_columns(boxes) == [list(range(6)), list(range(6, 14))]
    # the same strip in the body's print is a narrow column of the body's own (a table's): it joins
    same_print = _lines(900, 1000, 95, 8, pitch=30)
    assert len(text_columns(body + same_print)) == 1
    # three lines in small print are too few, and a column of small list numbers too narrow
    assert len(text_columns(body + sidebar[:3])) == 1
    assert len(text_columns(_lines(40, 60, 100, 6, pitch=40, height=13) + body)) == 1


def test_column_stretches_split_only_the_rows_a_gutter_runs_through():
    """Two boxes side by side (an example's source and its output), then a paragraph under both
    (below the boxes' frames): the boxes are columns, the paragraph's rows stay one group after
    them; a column's last line just below the other's end stays in its column."""
    source, output = _lines(100, 560, 100, 3), _lines(620, 1080, 100, 2)
    paragraph = _lines(100, 1080, 200, 3)
    boxes = [b for pair in zip(source, output) for b in pair] + [source[-1], *paragraph]  # row by row
    pieces = column_stretches(boxes)
    assert [[boxes[i] for i in p] for p in pieces] == [source, output, paragraph]
    assert text_columns(boxes) == [list(range(len(boxes)))]  # no gutter through all of them
    # with nothing beside anything, or a gutter through all, it splits as text_columns does
    assert column_stretches(paragraph) == [[0, 1, 2]]
    two = source + _lines(620, 1080, 100, 3)
    assert column_stretches(two) == text_columns(two)


def test_a_narrow_corner_block_level_with_the_title_is_read_first():
    """A real form at 72 DPI (SF-424 page 2): the layout model boxes the OMB number, the expiry
    date and "Version 02" top right, level with a block holding the form's title and its first
    field. The corner block is narrower than a column, and it starts above: it comes first (read
    as a right-hand column it came after the title and the field)."""
    title_and_field, corner = (32, 40, 231, 76), (472, 8, 575, 54)
    below = [(32, 95, 186, 108), (32, 125, 186, 139)]
    boxes = [title_and_field, corner, *below]
    assert [boxes[i] for i in xy_cut(boxes)] == [corner, title_and_field, *below]


def test_a_narrow_piece_level_with_its_neighbour_keeps_left_to_right_order():
    """Pieces that start level (a label and a narrow value beside it) stay left to right, and
    two real columns stay column after column whichever starts higher."""
    label, value = (100, 100, 700, 140), (900, 102, 1000, 138)
    assert xy_cut([value, label]) == [1, 0]
    left, right = (100, 200, 580, 900), (620, 150, 1100, 900)
    assert xy_cut([right, left]) == [1, 0]


def test_a_narrow_strip_beside_two_columns_never_reorders_the_columns():
    """A review's cases (72 DPI page points): an arXiv-style stamp in the left margin beside two
    columns whose tops differ by 1 px, and a newsletter's narrow "inside this issue" sidebar
    beside two columns, the left one under a headline: the columns stay left, then right."""
    stamp = (12, 230, 36, 570)
    left = [(150, 180, 200, 192), (80, 198, 290, 420), (72, 436, 180, 448), (72, 456, 297, 700)]
    right = (315, 179, 540, 700)
    boxes = [right, stamp, *left]
    assert [boxes[i] for i in xy_cut(boxes)] == [stamp, *left, right]
    side = [(36, 150, 130, 164), (36, 170, 130, 400)]
    headline, left_text, right_text = (150, 160, 360, 176), (150, 182, 360, 700), (380, 148, 576, 700)
    boxes = [right_text, left_text, *side, headline]
    assert [boxes[i] for i in xy_cut(boxes)] == [*side, headline, left_text, right_text]


def test_a_label_beside_a_taller_value_and_a_sidebar_starting_a_little_higher_stay_in_place():
    """A form label centred beside a taller two-line value, a narrow value in a taller cell right
    of its label, and a margin sidebar that starts 10 px above a section heading: left to right."""
    label, value = (72, 215, 160, 227), (180, 200, 560, 242)
    assert xy_cut([value, label]) == [1, 0]
    label, value = (72, 110, 440, 122), (470, 102, 560, 130)
    assert xy_cut([value, label]) == [1, 0]
    body = [(72, 100, 300, 114), (72, 120, 440, 300), (72, 312, 440, 500), (72, 512, 440, 700)]
    sidebar = (470, 90, 560, 690)
    boxes = [sidebar, *body]
    assert [boxes[i] for i in xy_cut(boxes)] == [*body, sidebar]


def test_margin_notes_are_read_beside_the_blocks_they_annotate():
    """A manual's key names in the left margin (exam-zh p29 at 150 DPI, tests/engines/
    test_real_pages.py reads the page): each note beside the description it names, read along
    that row, never as a column before the whole body; notes right of the body come after the
    block beside them."""
    body = [(259, 1153, 523, 1219), (263, 1241, 427, 1266), (260, 1292, 500, 1359), (259, 1379, 1122, 1442)]
    notes = [(19, 1155, 255, 1214), (45, 1295, 253, 1353)]
    boxes = [*notes, *body]
    assert [boxes[i] for i in xy_cut(boxes)] == [notes[0], body[0], body[1], notes[1], body[2], body[3]]
    mirrored = [(1200 - x2, y1, 1200 - x1, y2) for x1, y1, x2, y2 in boxes]
    order = [mirrored[i] for i in xy_cut(mirrored)]
    assert order.index(mirrored[0]) == order.index(mirrored[2]) + 1
    assert order.index(mirrored[1]) == order.index(mirrored[4]) + 1


def test_a_slides_navigation_bar_reads_piece_after_piece():
    """A beamer headline lists the talk's sections in short pieces side by side, two rows each
    (a section's name, then its subsection or its frames' dots). The outermost piece is narrow
    and sparse like margin notes, but nothing beside it is a denser body: it is read after the
    others, not moved in beside the first piece's rows."""
    left = [(43, 20, 417, 60), (43, 62, 417, 110)]
    middle = [(842, 30, 1216, 70), (842, 75, 1216, 120)]
    right = [(1641, 20, 1760, 55), (1641, 90, 1680, 118)]
    boxes = [*left, *middle, *right]
    assert [boxes[i] for i in xy_cut(boxes)] == boxes
