"""The steps that find pairs of regions, lines or blocks through a grid of boxes (BoxGrid) or
sorted edges give what testing every pair gives, on random pages: the pair-by-pair versions
below are the references (each the rule as the step's docstring states it, over all pairs)."""

from __future__ import annotations

import random

from mineru_cli.core.blocks import PAGE_BOTTOM, Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.geometry import (
    LARGEST_SIDE,
    BoxGrid,
    area,
    best_holder,
    best_holders,
    covered,
    held,
    iou,
    shares_rows,
)
from mineru_cli.engines import assembly, cuts, fusion, page_roles
from mineru_cli.engines.lines import Line
from mineru_cli.engines.regions import GROUPING, REGION_TYPES
from mineru_cli.reading_order import _corner_first, _narrow, group_rows, level

ROUNDS = 100  # each test's random pages (3,000 each were compared once, outside the suite)
CLASSES = [
    "text",
    "title",
    "table",
    "figure",
    "figure_caption",
    "header",
    "ref_text",
    assembly._FIGURE_TEXT,
    "page_number",
]


def _box(rnd: random.Random) -> tuple[float, float, float, float]:
    x, y = (
        rnd.choice([rnd.uniform(0, 1000), rnd.randint(0, 1000)]),
        rnd.choice([rnd.uniform(0, 1300), rnd.randint(0, 1300)]),
    )
    w, h = (rnd.choice([rnd.randint(0, 40), rnd.randint(0, 400), rnd.uniform(0, 900)]) for _ in range(2))
    return (x, y, x - w, y + h) if rnd.random() < 0.03 else (x, y, x + w, y + h)  # now and then turned inside out


def _regions(rnd: random.Random) -> list[tuple[tuple[float, ...], str, float]]:
    """Random regions, many of them near twins of one another or inside one another."""
    out: list[tuple[tuple[float, ...], str, float]] = []
    for _ in range(rnd.randint(0, 40)):
        roll = rnd.random()
        if out and roll < 0.3:
            d = rnd.choice([1, 5, 20])
            box = tuple(v + rnd.uniform(-d, d) for v in rnd.choice(out)[0])
        elif out and roll < 0.55:
            b = rnd.choice(out)[0]
            x1, x2 = sorted(rnd.uniform(b[0], b[2]) for _ in range(2))
            y1, y2 = sorted(rnd.uniform(b[1], b[3]) for _ in range(2))
            box = (x1, y1, x2, y2)
        else:
            box = _box(rnd)
        out.append((box, rnd.choice(CLASSES), rnd.choice([0.5, 0.9, rnd.random()])))
    return out


def _lines(rnd: random.Random) -> list[Line]:
    """Random lines: a long row of words, a grid of cells, scattered lines."""
    out = []
    if rnd.random() < 0.4:
        x, y = 0, rnd.randint(0, 1000)
        for _ in range(rnd.randint(1, 80)):
            w, h = rnd.randint(1, 60), rnd.choice([10, 12, rnd.randint(1, 30)])
            x += rnd.randint(-5, 30)
            out.append(Line((x, y + rnd.randint(-4, 4), x + w, y + h), "w", 0.9))
            x += w
    if rnd.random() < 0.4:
        ox, oy, dx, dy = rnd.randint(0, 300), rnd.randint(0, 500), rnd.randint(10, 80), rnd.randint(8, 30)
        for i in range(rnd.randint(1, 10)):
            for j in range(rnd.randint(1, 8)):
                x, y = ox + j * dx, oy + i * dy
                out.append(Line((x, y, x + rnd.randint(1, dx), y + rnd.choice([10, 12, rnd.randint(1, 25)])), "1", 0.9))
    for _ in range(rnd.randint(0, 40)):
        x, y, h = rnd.randint(0, 900), rnd.randint(0, 1200), rnd.choice([8, 12, 20, rnd.randint(1, 30)])
        out.append(Line((x, y, x + rnd.choice([5, 40, 300, rnd.randint(1, 500)]), y + h), "x", 0.9))
    rnd.shuffle(out)
    return out


def _every_pair_without_duplicates(regions):
    kept: list = []
    for region in sorted(regions, key=lambda r: -r[2]):
        twin = next((i for i, o in enumerate(kept) if iou(region[0], o[0]) >= GROUPING["duplicate_region"]), None)
        if twin is None:
            kept.append(region)
        elif region[1] == "table" and kept[twin][1] == "figure":
            kept[twin] = region
    return kept


def _every_pair_without_envelopes(regions):
    nested = GROUPING["nested_region"]
    text_like = [i for i, r in enumerate(regions) if REGION_TYPES.get(r[1], T.TEXT) in assembly._NESTING]
    dropped: set[int] = set()
    for i in sorted(text_like, key=lambda i: -area(regions[i][0])):
        if i in dropped:
            continue
        inner = [
            j for j in text_like if j != i and j not in dropped and covered(regions[j][0], regions[i][0]) >= nested
        ]
        if len(inner) >= 2 or assembly._round_a_title(regions[i], regions):
            dropped.add(i)
        elif inner:
            dropped.add(inner[0])
    return [r for i, r in enumerate(regions) if i not in dropped]


def _every_pair_paragraphs(lines):
    parent = list(range(len(lines)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(lines)):
        for j in range(i + 1, len(lines)):
            if assembly._linked(lines[i], lines[j]):
                parent[root(i)] = root(j)
    return sorted(sorted(i for i in range(len(lines)) if root(i) == r) for r in set(map(root, range(len(lines)))))


def _every_pair_foot_numbers(blocks, page_h):
    for block in blocks:
        if (
            block.type not in (T.TEXT, T.TITLE)
            or block.bbox[1] < (1 - page_roles.FOOT_MARGIN) * page_h
            or not page_roles._PAGE_NUMBER.match(block.text)
        ):
            continue
        others = [b.bbox for b in blocks if b is not block and b.type not in PAGE_BOTTOM]
        below = any(box[3] > block.bbox[3] for box in others)
        if not below and not any(len(group_rows([block.bbox, box])) == 1 for box in others):
            block.type = T.PAGE_NUMBER


def _every_pair_corner_first(boxes, columns):
    narrow = _narrow(boxes, columns)
    tops = [min(boxes[i][1] for i in c) for c in columns]
    for n, piece in enumerate(columns[1:], 1):
        middle = (tops[n] + max(boxes[i][3] for i in piece)) / 2
        if narrow[n] and middle < min(t for m, t in enumerate(tops) if m != n):
            return [piece, *columns[:n], *columns[n + 1 :]]
    return columns


def test_region_steps_match_every_pair():
    rnd = random.Random(0)
    for _ in range(ROUNDS):
        regions = _regions(rnd)
        assert assembly._without_duplicates(regions) == _every_pair_without_duplicates(regions)
        assert assembly._without_envelopes(regions) == _every_pair_without_envelopes(regions)
        boxes = [ln.box for ln in _lines(rnd)] + [_box(rnd) for _ in range(rnd.randint(0, 20))]
        holders = [box for box, _, _ in regions]
        assert best_holders(boxes, holders, 0.5) == [best_holder(b, holders, 0.5) for b in boxes]


def test_paragraphs_match_every_pair():
    rnd = random.Random(0)
    for _ in range(ROUNDS):
        lines = _lines(rnd)
        index = {id(ln): i for i, ln in enumerate(lines)}
        found = sorted(sorted(index[id(ln)] for ln in group) for group in assembly._paragraphs(lines))
        assert found == _every_pair_paragraphs(lines)


def test_foot_numbers_match_every_pair():
    rnd = random.Random(0)
    for _ in range(ROUNDS):
        specs = []
        for _ in range(rnd.randint(1, 40)):
            x, y = rnd.randint(0, 900), rnd.choice([rnd.randint(0, 1300), rnd.randint(1000, 1300)])
            box = (x, y, x + rnd.randint(1, 300), y + rnd.choice([0, rnd.randint(1, 30)]))
            kind = rnd.choice([T.TEXT, T.TEXT, T.TITLE, T.FOOTER, T.PAGE_NUMBER, T.IMAGE])
            specs.append((kind, box, rnd.choice(["12", "iv", "- 3 -", "word", str(rnd.randint(1, 999))])))
        fast, slow = ([Block(kind, box, text, 0.9) for kind, box, text in specs] for _ in range(2))
        page_roles.foot_numbers(fast, 1300)
        _every_pair_foot_numbers(slow, 1300)
        assert [b.type for b in fast] == [b.type for b in slow]


def test_corner_first_matches_every_pair():
    rnd = random.Random(0)
    for _ in range(ROUNDS):
        boxes, columns, x = [], [], 0
        for _ in range(rnd.randint(2, 30)):
            column = []
            for _ in range(rnd.randint(1, 3)):
                w, y = rnd.randint(5, 300), rnd.choice([0, 10, rnd.randint(0, 500)])
                column.append(len(boxes))
                boxes.append((x, y, x + w, y + rnd.randint(1, 200)))
            x += 320
            columns.append(column)
        assert _corner_first(boxes, columns) == _every_pair_corner_first(boxes, columns)


def _proper(b) -> bool:
    return b[0] <= b[2] and b[1] <= b[3]


def _meet(a, b) -> bool:
    """Whether two closed boxes have a point in common."""
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def test_a_grid_finds_every_box_in_reach():
    """BoxGrid.near gives each box within reach of the box asked about, touching included."""
    rnd = random.Random(7)
    for _ in range(ROUNDS):
        boxes = [_box(rnd) for _ in range(rnd.randint(0, 50))]
        grid = BoxGrid(boxes)
        for b in [b for b in boxes[:10] + [_box(rnd)] if _proper(b)]:
            rx, ry = rnd.choice([0, 5, 50]), rnd.choice([0, 5, 50])
            grown = (b[0] - rx, b[1] - ry, b[2] + rx, b[3] + ry)
            within = [i for i, o in enumerate(boxes) if _proper(o) and _meet(o, grown)]
            near = grid.near(b, rx, ry)
            assert near == sorted(near) and set(within) <= set(near)


def test_a_grid_of_thin_boxes_stays_small():
    """Boxes of no width (or no height) beside one across the page make a grid of at most
    CELLS_PER_BOX cells a box, however wide the page: grown alike both ways, the cells of a
    median box of no width over a page's width numbered about a hundred thousand for four boxes."""
    for n, width in [(4, 1000), (4, 100_000), (40, 3000)]:
        column = [(5, 5 + 30 * k, 5, 25 + 30 * k) for k in range(n - 1)]  # empty lines: no width
        for boxes in (
            column + [(0, 5, width, 25)],
            [(y1, x1, y2, x2) for x1, y1, x2, y2 in column + [(0, 5, width, 25)]],
        ):
            grid = BoxGrid(boxes)
            assert len(grid.cells) <= BoxGrid.CELLS_PER_BOX * n
            assert grid.near((0, 0, width, width)) == list(range(n))


def test_a_grid_files_no_reversed_box():
    """A box with y2 < y1 within one row of cells touches none, however wide: filed along its
    width in cells sized by the proper boxes, a reversed title a million pixels wide took 285,000
    cells."""
    boxes = [(-3, 20, 0.5, 999.9), (10, 0.5, 1_000_000, 0)]
    grid = BoxGrid(boxes)
    assert len(grid.cells) <= BoxGrid.CELLS_PER_BOX * len(boxes)
    assert grid.near((0, 0, 1_000_000, 1000)) == [0]


def test_lines_held_match_every_line():
    """held (the lines a figure or a table region holds) gives each line of which the region
    covers enough, in order, as a pass over every line does."""
    rnd = random.Random(1)
    for _ in range(ROUNDS):
        boxes = [ln.box for ln in _lines(rnd)] + [_box(rnd) for _ in range(rnd.randint(0, 5))]
        grid = BoxGrid(boxes)
        for holder, _, _ in _regions(rnd):
            assert held(boxes, grid, holder, 0.5) == [i for i, b in enumerate(boxes) if covered(b, holder) >= 0.5]


def test_assigned_lines_match_every_pair():
    """fusion.assign_lines: each line to the block best_holder picks among all of them."""
    rnd = random.Random(4)
    for _ in range(ROUNDS):
        lines, boxes = _lines(rnd), [box for box, _, _ in _regions(rnd)]
        expected: list[list[Line]] = [[] for _ in boxes]
        for line in lines:
            best = best_holder(line.box, boxes, fusion.LINE_IN_BLOCK)
            if best is not None:
                expected[best].append(line)
        assert fusion.assign_lines(lines, boxes) == expected


def test_lines_beside_match_every_pair():
    """cut_at_gutters' lines of other regions in each region's rows: as testing every line."""
    rnd = random.Random(2)
    for _ in range(ROUNDS):
        lines, boxes = _lines(rnd), [box for box, _, _ in _regions(rnd)]
        if not boxes:
            continue
        in_flow = [(ln, rnd.randrange(len(boxes))) for ln in lines]
        expected = {
            home: [o for o, h in in_flow if h != home and shares_rows(o.box, boxes[home])]
            for home in {h for _, h in in_flow}
        }
        assert cuts._beside(in_flow, boxes) == expected


def _every_line_row_home(line, regions, members):
    x1, _, x2, _ = line.box
    reach = GROUPING["row_gap"] * line.height
    for n, (box, cls, _score) in enumerate(regions):
        if REGION_TYPES.get(cls, T.TEXT) not in assembly.FLOWING or not members[n]:
            continue
        if box[0] < x1 <= box[2] + reach and x2 > box[2]:
            side = "right"
        elif box[0] - reach <= x2 < box[2] and x1 < box[0]:
            side = "left"
        else:
            continue
        if any(level(m.box, line.box) and assembly._inward(line, m, side) for m in members[n]):
            return n, side
    return None


def test_row_homes_match_every_line():
    """A loose line's row home (the region whose row it ends), found among the region's lines
    level with it, is the one a pass over all of the region's lines finds."""
    rnd = random.Random(3)
    for _ in range(ROUNDS):
        lines, regions = _lines(rnd), _regions(rnd)
        members: list[list[Line]] = [[] for _ in regions]
        loose = []
        for line in lines:
            (members[rnd.randrange(len(regions))] if regions and rnd.random() < 0.7 else loose).append(line)
        by_middle = [assembly._LinesByMiddle(group) for group in members]
        for line in loose:
            assert assembly._row_home(line, regions, by_middle) == _every_line_row_home(line, regions, members)


def test_a_grid_takes_boxes_with_a_nan_or_infinite_side():
    """A box with a NaN or infinite side is filed nowhere and, asked about, is near nothing
    (math.floor of NaN raised, of infinity overflowed). No page gives one so far: a line's box is
    whole pixels and a region is clipped to the page, which turns such a side into the page's
    edge."""
    nan = float("nan")
    boxes = [(0, 0, 10, 10), (nan, 0, 10, 10), (0, 0, 10, nan), (20, 20, 30, 30)]
    grid = BoxGrid(boxes)
    assert grid.near((0, 0, 30, 30)) == [0, 3]
    assert grid.near((nan, 0, 30, 30)) == []
    assert best_holders([(1, 1, 9, 9), (nan, 1, 9, 9)], boxes, 0.5) == [0, None]
    inf = float("inf")
    grid = BoxGrid([(0, 0, inf, 1), (-inf, 0, 1, 1), (0, 0, 1, 1)])
    assert grid.near((0, 0, 1, 1)) == [2] and grid.near((0, 0, inf, 1)) == []


def test_a_grid_takes_boxes_with_a_huge_finite_side():
    """Made-up boxes (no page gives one: a line's box is whole pixels and a region is clipped to
    the page): a finite side of about 1e200 beside page-sized boxes overflowed to infinity in the
    grid's cell sizing, which divided by zero (a whole number past a float's range overflowed in
    math.isfinite). Such a box is filed nowhere and, asked about, is near nothing, as a box with an
    infinite side; a box at LARGEST_SIDE is still filed."""
    page = [(0, 0, 10, 10), (20, 0, 30, 10)]
    for huge in [(0, 0, 1e200, 10), (0, 1e200, 10, 1e200 + 10), (-1e200, -1e200, 1e200, 1e200), (0, 0, 10**400, 10)]:
        boxes = [*page, huge]
        grid = BoxGrid(boxes)
        assert grid.near((0, 0, 30, 10)) == [0, 1] and grid.near(huge) == [], huge
        assert held(boxes, grid, (0, 0, 30, 10), 0.5) == [0, 1] and held(boxes, grid, huge, 0.5) == []
        assert best_holders([(1, 1, 9, 9), huge], boxes, 0.5) == [0, None]
    grid = BoxGrid([*page, (0, 0, LARGEST_SIDE, 10)])
    assert 2 in grid.near((0, 0, 10, 10)) and len(grid.cells) <= BoxGrid.CELLS_PER_BOX * 3  # a superset
