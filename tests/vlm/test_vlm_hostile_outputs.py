"""Model outputs no sane model writes, which must still cost no more than their own block: pure
functions, no model (found by an adversarial review)."""

from __future__ import annotations

import pytest

from mineru_cli.engines.vlm import _html_text, _match_blocks
from mineru_cli.vlm.protocol.layout import LayoutBlock, parse_layout
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO

GOOD = "<|box_start|>100 100 900 200<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>"


@pytest.mark.parametrize("profile", [PROFILE_2509, PROFILE_PRO])
def test_a_coordinate_of_thousands_of_digits_is_a_bad_box_not_an_error(profile):
    huge = "<|box_start|>1 2 " + "9" * 5000 + " 40<|box_end|><|ref_start|>text<|ref_end|><|rotate_up|>"
    out = parse_layout(GOOD + "\n" + huge, profile)
    assert [b.type for b in out.blocks] == ["text"] and out.bad_boxes == 1


def test_the_pro_profile_counts_an_element_cut_short():
    out = parse_layout(GOOD + "\n<|box_start|>100 200 300<|box_end|><|ref_start|>title<|ref_end|>", PROFILE_PRO)
    assert len(out.blocks) == 1 and out.malformed == 1 and out.skipped == 1


def test_table_html_to_cell_text():
    assert (
        _html_text('<table><tr><td>a</td><td colspan="2">b &amp; c</td></tr><tr><td>1</td><td></td></tr></table>')
        == "a\tb & c\n1\t"
    )
    assert _html_text("<table>no rows <b>bold</b></table>") == "no rows  bold"
    # unclosed rows and cells (a lazy regex over these was quadratic: minutes for 50,000)
    assert _html_text("<table>" + "<tr>" * 5000) == ""
    assert _html_text("<tr>" + "<td" * 5000 + "</tr>") == ""


def test_a_dropped_block_sharing_box_and_angle_does_not_take_the_next_ones_place():
    box = (0.1, 0.1, 0.5, 0.2)
    blocks = [
        LayoutBlock("equation_block", box, angle=0),
        LayoutBlock("text", box, angle=0),
        LayoutBlock("equation_block", (0.1, 0.3, 0.9, 0.6), angle=0),
    ]
    done = [
        LayoutBlock("text", box, angle=0),  # the first block dropped
        LayoutBlock("equation", (0.1, 0.3, 0.9, 0.6), angle=0),
    ]  # merged in its block's place
    assert _match_blocks(done, blocks) == [1, 2]
