"""Model profiles: what differs between MinerU2.5 generations (block types, prompts, sampling,
skipped types, the Pro post-processing switches), and the per-request SamplingParams.

Facts were read from mineru-vl-utils: 0.1.22 (the release paired with MinerU2.5-2509-1.2B) for
PROFILE_2509, and 2.0.7 (the release MinerU 4.0.x runs) for PROFILE_PRO (see the note after
it). The block types are core.blocks.BlockType values, the one vocabulary of every engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from ...core.blocks import BlockType as T
from .chat import FORMULA_PROMPT, IMAGE_ANALYSIS_PROMPT, LAYOUT_PROMPT, TABLE_PROMPT, TEXT_PROMPT


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings for one request, with vLLM's meaning (greedy decoding only).

    presence/frequency penalties act on the tokens generated so far, not on the prompt;
    no_repeat_ngram_size bans a token that would repeat an n-gram of the generated tokens
    (0 disables); max_new_tokens caps the answer (None: the caller's safety cap).
    """

    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    no_repeat_ngram_size: int = 100
    max_new_tokens: int | None = None


BLOCK_TYPES_2509 = frozenset(
    {
        T.TEXT,
        T.TITLE,
        T.TABLE,
        T.IMAGE,
        T.CODE,
        T.ALGORITHM,
        T.HEADER,
        T.FOOTER,
        T.PAGE_NUMBER,
        T.PAGE_FOOTNOTE,
        T.ASIDE_TEXT,
        T.EQUATION,
        T.EQUATION_BLOCK,
        T.REF_TEXT,
        T.LIST,
        T.PHONETIC,
        T.TABLE_CAPTION,
        T.IMAGE_CAPTION,
        T.CODE_CAPTION,
        T.TABLE_FOOTNOTE,
        T.IMAGE_FOOTNOTE,
        T.UNKNOWN,
    }
)

BLOCK_TYPES_PRO = frozenset(
    {
        T.TEXT,
        T.TITLE,
        T.DOC_TITLE,
        T.PARAGRAPH_TITLE,
        T.TABLE,
        T.EQUATION,
        T.FORMULA_NUMBER,
        T.CODE,
        T.ALGORITHM,
        T.ASIDE_TEXT,
        T.REF_TEXT,
        T.INDEX,
        T.PHONETIC,
        T.LIST_ITEM,
        T.CAPTION,
        T.TABLE_CAPTION,
        T.IMAGE_CAPTION,
        T.CODE_CAPTION,
        T.FOOTNOTE,
        T.TABLE_FOOTNOTE,
        T.IMAGE_FOOTNOTE,
        T.HEADER,
        T.FOOTER,
        T.PAGE_NUMBER,
        T.PAGE_FOOTNOTE,
        T.IMAGE,
        T.CHART,
        T.LIST,
        T.IMAGE_BLOCK,
        T.EQUATION_BLOCK,
        T.UNKNOWN,
    }
)

_TEXT_PARAMS = SamplingParams(presence_penalty=1.0, frequency_penalty=0.05)


@dataclass(frozen=True)
class Profile:
    """Everything that differs between model generations.

    prompts/sampling are keyed by block type, with "[default]" for other types and "[layout]"
    for step 1.
    """

    name: str
    block_types: frozenset[str]
    prompts: Mapping[str, str]
    sampling: Mapping[str, SamplingParams]
    skip_types: frozenset[str]
    layout_size: tuple[int, int] = (1036, 1036)
    min_edge: int = 28
    max_aspect: float = 50.0
    # Pro-only behaviour (mineru-vl-utils 2.x)
    layout_rename: Mapping[str, str] = field(default_factory=dict)
    layout_ignore: frozenset[str] = frozenset()
    layout_dedup_iou: float | None = None
    drop_inside_tables: frozenset[str] = frozenset()
    strip_equation_delimiters: bool = False
    tolerate_bad_arrays: bool = False
    content_rename: Mapping[str, str] = field(default_factory=dict)
    non_text_cleanup: bool = False
    drop_figure_captions: bool = False  # an image_caption inside an image/chart/image_block
    table_images: bool = False  # images inside a table masked in its crop, put back as <img>
    text_fixes: bool = False  # display->inline formulas, macro spacing, blanks out of formulas
    table_formula_tags: bool = False  # \\( \\) and \\[ \\] in a table -> <eq> </eq> (MinerU 4)
    # image and chart crops read with the Image Analysis prompt, the answer classified
    # (protocol.figures); off: they are skipped like 2509's images
    image_analysis: bool = False

    def prompt_for(self, block_type: str) -> str:
        return self.prompts.get(block_type) or self.prompts["[default]"]

    def sampling_for(self, block_type: str) -> SamplingParams:
        return self.sampling.get(block_type) or self.sampling["[default]"]

    @property
    def layout_prompt(self) -> str:
        return self.prompts["[layout]"]

    @property
    def layout_sampling(self) -> SamplingParams:
        return self.sampling["[layout]"]


PROFILE_2509 = Profile(
    name="MinerU2.5-2509-1.2B",
    block_types=BLOCK_TYPES_2509,
    prompts={"table": TABLE_PROMPT, "equation": FORMULA_PROMPT, "[default]": TEXT_PROMPT, "[layout]": LAYOUT_PROMPT},
    sampling={
        "table": SamplingParams(presence_penalty=1.0, frequency_penalty=0.005),
        "equation": _TEXT_PARAMS,
        "[default]": _TEXT_PARAMS,
        "[layout]": SamplingParams(),
    },
    skip_types=frozenset({"image", "list", "equation_block"}),
)

PROFILE_PRO = Profile(
    name="MinerU2.5-Pro-2605-1.2B",
    block_types=BLOCK_TYPES_PRO,
    prompts={
        "table": TABLE_PROMPT,
        "equation": FORMULA_PROMPT,
        "image": IMAGE_ANALYSIS_PROMPT,
        "chart": IMAGE_ANALYSIS_PROMPT,
        "[default]": TEXT_PROMPT,
        "[layout]": LAYOUT_PROMPT,
    },
    sampling={
        "table": SamplingParams(presence_penalty=1.0, frequency_penalty=0.005),
        "equation": _TEXT_PARAMS,
        "image": _TEXT_PARAMS,
        "chart": _TEXT_PARAMS,
        "[default]": _TEXT_PARAMS,
        "[layout]": SamplingParams(),
    },
    skip_types=frozenset({"list", "equation_block", "image_block"}),
    layout_rename={"unknown": "image"},
    layout_ignore=frozenset({"inline_formula"}),
    layout_dedup_iou=0.9,
    drop_inside_tables=frozenset({"text", "equation", "equation_block"}),
    strip_equation_delimiters=True,
    tolerate_bad_arrays=True,
    content_rename={"list_item": "text"},
    non_text_cleanup=True,
    drop_figure_captions=True,
    table_images=True,
    text_fixes=True,
    table_formula_tags=True,
    image_analysis=True,
)
# PROFILE_PRO is the client MinerU 4.0.x runs (mineru-vl-utils 2.0.7, `>=2.0.5,<3` in MinerU
# 4.0.12), configured as MinerU configures it (mineru/model/vlm/runtime.py), and conformance-tested
# against it (tests/vlm/test_pro_conformance.py); not yet checked against the real Pro weights.
#
# Done: block types, prompts, sampling, skip list; the layout grammar (several elements on one
# line, rotate token right after <|ref_end|>), unknown->image, inline_formula boxes dropped,
# duplicate boxes (IoU > 0.9, same type and angle) dropped, text/equation boxes inside tables
# dropped, the text block's merge_prev flag (<|txt_contd_tgt|>); image captions inside figures
# dropped, images inside tables masked in the table's crop and put back as <img> (protocol.
# table_images); list_item->text, [Non-Text] placeholders; equation \[ \] stripping; a text
# block's Markdown fixes and a table's <eq> formula tags (protocol.pro).
# Image analysis: image and chart blocks that stand alone (not inside an image_block) and are
# big enough are read with "\nImage Analysis:" (protocol.pro.analysed_figures) and the answer
# classified (protocol.figures). MinerU 4.0.12 runs this two-step path (the VLM's own layout) at
# its xhigh effort only, the "advanced" tier, and asks for image analysis there unless the caller
# turns it off (MinerUParser(image_analysis=True), backend/analysis/pdf/window.py): on by default
# here too (--no-image-analysis: without_image_analysis).
# Not done: cross-page table merging (off in MinerU 4 too).
# Differs on purpose: an equation_block over two or more equations of which one was not read
# (its crop is under a pixel) makes the client's post-processing raise, and it falls back to the
# blocks as they stood (equation_block kept, no \[ \], [Non-Text] text kept); ours merges the
# equations, the unread one as empty, as it does for 2509, whose client falls back alike
# (tests/vlm/test_pro_review.py).

PROFILES = {"2509": PROFILE_2509, "pro": PROFILE_PRO}
FIGURE_TYPES = frozenset({"image", "chart"})  # the types image analysis reads


def without_image_analysis(profile: Profile) -> Profile:
    """The profile with image analysis off: image and chart blocks skipped, as the client's
    image_analysis=False skips them. A profile without it (2509) is returned as it is."""
    if not profile.image_analysis:
        return profile
    return replace(profile, image_analysis=False, skip_types=profile.skip_types | FIGURE_TYPES)
