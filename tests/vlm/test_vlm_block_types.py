"""The VLM's block types are the core vocabulary (core.blocks), and the fingerprint's copy of
them stays a list of plain strings."""

from __future__ import annotations

import pytest

from mineru_cli.core.blocks import LINE_TEXT, PARATEXT, BlockType
from mineru_cli.engines import fusion
from mineru_cli.vlm.protocol.profiles import PROFILES


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_type_is_a_block_type(name):
    profile = PROFILES[name]
    values = set(BlockType.values())
    assert set(profile.block_types) <= values
    assert all(isinstance(t, BlockType) for t in profile.block_types)
    # every type a profile names elsewhere is one of its block types
    named = (
        set(profile.skip_types)
        | set(profile.drop_inside_tables)
        | set(profile.layout_rename.values())
        | set(profile.content_rename.values())
        | {k for k in [*profile.prompts, *profile.sampling] if not k.startswith("[")}
    )
    assert named <= set(profile.block_types)
    # what post-processing drops as paratext is a type the profile can produce
    assert PARATEXT <= set(profile.block_types)


def test_fusion_text_types_are_the_line_text_types():
    assert fusion.TEXT_TYPES == LINE_TEXT
    listed = fusion.settings()["text_types"]
    assert listed == sorted(t.value for t in LINE_TEXT)
    assert all(type(t) is str for t in listed)  # the engine fingerprint serialises this list
