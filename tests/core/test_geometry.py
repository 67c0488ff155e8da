from hypothesis import given
from hypothesis import strategies as st

from mineru_cli.core.geometry import area, best_holder, clip, covered, intersection, iou

coord = st.floats(min_value=-50, max_value=1050, allow_nan=False)
boxes = st.tuples(coord, coord, coord, coord).map(
    lambda b: (min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3]))
)


def test_the_basic_measures():
    a, b = (0, 0, 10, 10), (5, 5, 15, 20)
    assert (area(a), area(b), intersection(a, b)) == (100, 150, 25)
    assert iou(a, b) == 25 / 225 and covered(a, b) == 0.25
    assert intersection((0, 0, 1, 1), (1, 0, 2, 1)) == 0  # touching is not overlapping
    assert area((5, 5, 1, 1)) == 0 and covered((5, 5, 1, 1), a) == 0 and iou((1, 1, 1, 1), (1, 1, 1, 1)) == 0
    assert clip((-3, 2, 120, 40.5), (100, 30)) == (0.0, 2.0, 100.0, 30.0)


@given(boxes, boxes)
def test_overlap_is_symmetric_and_bounded(a, b):
    assert intersection(a, b) == intersection(b, a)
    assert 0 <= intersection(a, b) <= min(area(a), area(b)) + 1e-6
    assert 0 <= iou(a, b) <= 1 + 1e-9 and 0 <= covered(a, b) <= 1 + 1e-9


def test_best_holder_takes_the_biggest_share_and_ties_go_to_the_smaller_holder():
    line = (10, 10, 20, 12)
    big, small, half = (0, 0, 100, 100), (5, 5, 25, 15), (15, 0, 40, 40)
    assert best_holder(line, [big, small], 0.5) == 1
    assert best_holder(line, [half], 0.5) == 0 and best_holder(line, [half], 0.6) is None
    assert best_holder(line, [], 0.5) is None
