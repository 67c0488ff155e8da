"""The engine's Pro-only parts: the record's options name the Pro post-processing steps (2509's
stay as they were), and a block post-processing renamed (list_item -> text) keeps its extras."""

from __future__ import annotations

from mineru_cli.engines.vlm import _match_blocks, options, post_process_switches
from mineru_cli.vlm.protocol.layout import LayoutBlock
from mineru_cli.vlm.protocol.postprocess import post_process
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO


def test_options_name_the_pro_steps():
    pro = options(PROFILE_PRO, "vlm", "onnx")
    assert set(pro["post_process"]) >= {"drop_figure_captions", "table_images", "text_fixes", "table_formula_tags"}
    assert pro["post_process"]["table_image_font"]  # the machine's font changes the crops
    assert "post_process" not in options(PROFILE_2509, "vlm", "onnx")
    assert post_process_switches(PROFILE_2509) == {}


def test_renamed_blocks_are_matched():
    blocks = [
        LayoutBlock("list_item", (0.1, 0.1, 0.9, 0.2), 0, content="- a"),
        LayoutBlock("text", (0.1, 0.25, 0.9, 0.3), 0, content="[Non-Text]"),  # dropped
        LayoutBlock("text", (0.1, 0.3, 0.9, 0.4), 0, content="b"),
    ]
    done = post_process(blocks, PROFILE_PRO)
    assert [b.type for b in done] == ["text", "text"]
    assert _match_blocks(done, blocks, PROFILE_PRO.content_rename) == [0, 2]
    assert _match_blocks(done, blocks) == [None, 2]  # without the profile's renames: lost
