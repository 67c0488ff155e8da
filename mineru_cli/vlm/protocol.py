"""The MinerU2.5 two-step protocol, without any model runtime.

Step 1 (layout): the page, resized to 1036x1036, is sent with the layout prompt; the model
answers one element per line::

    <|box_start|>x1 y1 x2 y2<|box_end|><|ref_start|>type<|ref_end|><|rotate_up|>

Step 2 (content): every block that is not skipped is cropped from the full-resolution page,
rotated upright, padded and upscaled where needed, and sent with its type's prompt.
Post-processing turns OTSL tables into HTML, repairs equation LaTeX the way MinerU does, merges
multi-equation blocks and wraps display equations.

Facts were read from mineru-vl-utils: 0.1.22 (the release paired with MinerU2.5-2509-1.2B) for
PROFILE_2509, and 2.0.7 for the parts of PROFILE_PRO that are implemented (see its docstring).
Where MinerU's behaviour is odd but observable in its output, it is reproduced on purpose and
said so; users compare our output with MinerU's.
"""

from __future__ import annotations

import html
import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from PIL import Image

SYSTEM_PROMPT = "You are a helpful assistant."

LAYOUT_PROMPT = "\nLayout Detection:"
TEXT_PROMPT = "\nText Recognition:"
TABLE_PROMPT = "\nTable Recognition:"
FORMULA_PROMPT = "\nFormula Recognition:"
IMAGE_ANALYSIS_PROMPT = "\nImage Analysis:"  # Pro models only

IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
IMAGE_PAD = "<|image_pad|>"

ANGLES = {"<|rotate_up|>": 0, "<|rotate_right|>": 90, "<|rotate_down|>": 180, "<|rotate_left|>": 270}


# --------------------------------------------------------------------------- chat format


def chat_prompt(prompt: str, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The Qwen2 chat text for one image followed by `prompt`, ending with the assistant turn.

    The single <|image_pad|> must be expanded to the image's token count before tokenising
    (see `expand_image_pads`).
    """
    parts = []
    if system_prompt:
        parts.append(f"<|im_start|>system\n{system_prompt}<|im_end|>\n")
    parts.append(f"<|im_start|>user\n{IMAGE_PLACEHOLDER}{prompt}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def expand_image_pads(text: str, token_counts: Sequence[int]) -> str:
    """Replace the n-th <|image_pad|> by token_counts[n] copies (t*h*w / merge_size**2)."""
    pieces = text.split(IMAGE_PAD)
    if len(pieces) - 1 != len(token_counts):
        raise ValueError(f"{len(pieces) - 1} image placeholders for {len(token_counts)} images")
    out = [pieces[0]]
    for count, piece in zip(token_counts, pieces[1:]):
        out.append(IMAGE_PAD * int(count))
        out.append(piece)
    return "".join(out)


# --------------------------------------------------------------------------- profiles


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


BLOCK_TYPES_2509 = frozenset({
    "text", "title", "table", "image", "code", "algorithm", "header", "footer", "page_number",
    "page_footnote", "aside_text", "equation", "equation_block", "ref_text", "list", "phonetic",
    "table_caption", "image_caption", "code_caption", "table_footnote", "image_footnote", "unknown",
})

BLOCK_TYPES_PRO = frozenset({
    "text", "title", "doc_title", "paragraph_title", "table", "equation", "formula_number", "code",
    "algorithm", "aside_text", "ref_text", "index", "phonetic", "list_item", "caption",
    "table_caption", "image_caption", "code_caption", "footnote", "table_footnote",
    "image_footnote", "header", "footer", "page_number", "page_footnote", "image", "chart", "list",
    "image_block", "equation_block", "unknown",
})

PARATEXT_TYPES = frozenset({"header", "footer", "page_number", "aside_text", "page_footnote", "unknown"})

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
    prompts={"table": TABLE_PROMPT, "equation": FORMULA_PROMPT, "[default]": TEXT_PROMPT,
             "[layout]": LAYOUT_PROMPT},
    sampling={"table": SamplingParams(presence_penalty=1.0, frequency_penalty=0.005),
              "equation": _TEXT_PARAMS, "[default]": _TEXT_PARAMS, "[layout]": SamplingParams()},
    skip_types=frozenset({"image", "list", "equation_block"}),
)

PROFILE_PRO = Profile(
    name="MinerU2.5-Pro-2605-1.2B",
    block_types=BLOCK_TYPES_PRO,
    prompts={"table": TABLE_PROMPT, "equation": FORMULA_PROMPT, "image": IMAGE_ANALYSIS_PROMPT,
             "chart": IMAGE_ANALYSIS_PROMPT, "[default]": TEXT_PROMPT, "[layout]": LAYOUT_PROMPT},
    sampling={"table": SamplingParams(presence_penalty=1.0, frequency_penalty=0.005),
              "equation": _TEXT_PARAMS, "image": _TEXT_PARAMS, "chart": _TEXT_PARAMS,
              "[default]": _TEXT_PARAMS, "[layout]": SamplingParams()},
    # image analysis is off by default in mineru-vl-utils 2.x, so image/chart are skipped too
    skip_types=frozenset({"list", "equation_block", "image_block", "image", "chart"}),
    layout_rename={"unknown": "image"},
    layout_ignore=frozenset({"inline_formula"}),
    layout_dedup_iou=0.9,
    drop_inside_tables=frozenset({"text", "equation", "equation_block"}),
    strip_equation_delimiters=True,
    tolerate_bad_arrays=True,
    content_rename={"list_item": "text"},
    non_text_cleanup=True,
)
# PROFILE_PRO is PARTIAL: read from mineru-vl-utils 2.0.7, not checked against the Pro model.
#
# Implemented: block types, prompts, sampling, skip list, the layout grammar (several elements on
# one line, rotate token right after <|ref_end|>), unknown->image, inline_formula dropped,
# duplicate-box suppression (IoU > 0.9, same type and angle), text/equation blocks inside tables
# dropped, the text block's merge_prev flag (<|txt_contd_tgt|>), list_item->text, [Non-Text]
# placeholders, equation \[ \] delimiter stripping.
# Not implemented: image/chart analysis post-processing, masking images inside table crops,
# captions inside image blocks, the Markdown text fixes (display->inline, macro spacing,
# underscores), cross-page table merging.
#

PROFILES = {"2509": PROFILE_2509, "pro": PROFILE_PRO}


# --------------------------------------------------------------------------- step 1: layout


@dataclass
class LayoutBlock:
    """One layout element: bbox is (x1, y1, x2, y2) as fractions 0..1 of the page."""

    type: str
    bbox: tuple[float, float, float, float]
    angle: int | None = None  # 0/90/180/270, None when the model gave no rotate token
    content: str | None = None
    merge_prev: bool = False  # Pro: text continues the previous block

    def as_dict(self) -> dict:
        return {"type": self.type, "bbox": list(self.bbox), "angle": self.angle,
                "content": self.content}


@dataclass
class LayoutParse:
    blocks: list[LayoutBlock]
    malformed: int = 0  # lines that are not a layout element
    bad_boxes: int = 0  # coordinates outside 0..1000 or zero width/height
    unknown_types: int = 0

    @property
    def skipped(self) -> int:
        return self.malformed + self.bad_boxes + self.unknown_types


_LINE_2509 = re.compile(
    r"^<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|>"
    r"<\|ref_start\|>(\w+?)<\|ref_end\|>(.*)$")
_ELEMENT_PRO = re.compile(
    r"<\|box_start\|>(\d+)\s+(\d+)\s+(\d+)\s+(\d+)<\|box_end\|><\|ref_start\|>(\w+?)<\|ref_end\|>"
    r"(<\|rotate_(?:up|right|down|left)\|>)?(.*?)(?=<\|box_start\|>|$)", re.DOTALL)


def normalize_box(x1: int, y1: int, x2: int, y2: int) -> tuple[float, float, float, float] | None:
    """0..1000 corners -> 0..1 box with x1<x2, y1<y2; None when outside the range or empty."""
    if any(v < 0 or v > 1000 for v in (x1, y1, x2, y2)):
        return None
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    if x1 == x2 or y1 == y2:
        return None
    return (x1 / 1000.0, y1 / 1000.0, x2 / 1000.0, y2 / 1000.0)


def _angle_in(tail: str) -> int | None:
    # MinerU looks for the tokens in this fixed order, not in the order they appear
    for token, angle in ANGLES.items():
        if token in tail:
            return angle
    return None


def _box(m: re.Match) -> tuple[float, float, float, float] | None:
    """The normalised box of a layout match (groups 1-4), None if it is not a box; a number of
    thousands of digits (past Python's int conversion limit) is not one either."""
    try:
        return normalize_box(*(int(v) for v in m.group(1, 2, 3, 4)))
    except ValueError:
        return None


def parse_layout(output: str, profile: Profile = PROFILE_2509) -> LayoutParse:
    """Blocks from the layout answer, in the model's (reading) order. Never raises."""
    if profile.layout_dedup_iou is not None:
        return _parse_layout_pro(output, profile)
    result = LayoutParse(blocks=[])
    for line in output.split("\n"):
        m = _LINE_2509.match(line)
        if m is None:
            if line.strip():
                result.malformed += 1
            continue
        box = _box(m)
        if box is None:
            result.bad_boxes += 1
            continue
        block_type = m.group(5).lower()
        if block_type not in profile.block_types:
            result.unknown_types += 1
            continue
        result.blocks.append(LayoutBlock(block_type, box, angle=_angle_in(m.group(6))))
    return result


def _parse_layout_pro(output: str, profile: Profile) -> LayoutParse:
    result = LayoutParse(blocks=[])
    for line in output.split("\n"):
        if line.strip() and "<|box_start|>" not in line:
            result.malformed += 1
    elements = list(_ELEMENT_PRO.finditer(output))
    # an element cut short or with a broken box matches no element: counted, as 2509 counts it
    result.malformed += max(0, output.count("<|box_start|>") - len(elements))
    for m in elements:
        box = _box(m)
        if box is None:
            result.bad_boxes += 1
            continue
        block_type = m.group(5).lower()
        block_type = profile.layout_rename.get(block_type, block_type)
        if block_type in profile.layout_ignore:
            continue
        if block_type not in profile.block_types:
            result.unknown_types += 1
            continue
        rotate, tail = m.group(6), m.group(7)
        angle = ANGLES[rotate] if rotate else None
        merge_prev = block_type == "text" and "txt_contd_tgt" in tail
        result.blocks.append(LayoutBlock(block_type, box, angle=angle, merge_prev=merge_prev))
    blocks = _drop_duplicates(result.blocks, profile.layout_dedup_iou)
    result.blocks = _drop_inside(blocks, profile.drop_inside_tables, {"table"})
    return result


def _area(b: Sequence[float]) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _intersection(a: Sequence[float], b: Sequence[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _covered(inner: Sequence[float], outer: Sequence[float]) -> float:
    """The share of `inner`'s area that lies inside `outer`."""
    area = _area(inner)
    return _intersection(inner, outer) / area if area else 0.0


def _drop_duplicates(blocks: list[LayoutBlock], iou: float) -> list[LayoutBlock]:
    kept: list[LayoutBlock] = []
    for block in blocks:
        area = _area(block.bbox)
        for other in kept:
            if other.type != block.type or other.angle != block.angle:
                continue
            inter = _intersection(block.bbox, other.bbox)
            union = math.fsum((area, _area(other.bbox), -inter))
            if union > 0 and inter / union > iou:
                break
        else:
            kept.append(block)
    return kept


def _drop_inside(blocks: list[LayoutBlock], types: Iterable[str], containers: set[str],
                 threshold: float = 0.9) -> list[LayoutBlock]:
    types = set(types)
    holders = [b for b in blocks if b.type in containers]
    return [b for b in blocks
            if b.type not in types
            or not any(h is not b and _covered(b.bbox, h.bbox) >= threshold for h in holders)]


# --------------------------------------------------------------------------- step 2: crops


@dataclass
class Crop:
    index: int  # position of the block in the layout list
    image: Image.Image
    prompt: str
    sampling: SamplingParams


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB as MinerU makes it: palette via RGBA, alpha dropped (not composited)."""
    if image.mode == "P":
        image = image.convert("RGBA")
    return image if image.mode == "RGB" else image.convert("RGB")


def fit_crop(image: Image.Image, min_edge: int = 28, max_aspect: float = 50.0) -> Image.Image:
    """Pad with white (centred) to aspect <= max_aspect, then upscale so the short side >= min_edge."""
    w, h = image.size
    if max(w, h) / min(w, h) > max_aspect:
        if w > h:
            new_w, new_h = w, math.ceil(w / max_aspect)
        else:
            new_w, new_h = math.ceil(h / max_aspect), h
        canvas = Image.new(image.mode, (new_w, new_h), (255, 255, 255))
        canvas.paste(image, (int((new_w - w) / 2), int((new_h - h) / 2)))
        image = canvas
    if min(image.size) < min_edge:
        scale = min_edge / min(image.size)
        size = (math.ceil(image.width * scale), math.ceil(image.height * scale))
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image


def layout_image(page: Image.Image, profile: Profile = PROFILE_2509) -> Image.Image:
    """The step-1 input: the page stretched to the profile's fixed size (aspect not kept)."""
    return to_rgb(page).resize(profile.layout_size, Image.Resampling.BICUBIC)


def prepare_crops(page: Image.Image, blocks: Sequence[LayoutBlock],
                  profile: Profile = PROFILE_2509,
                  skip_types: Iterable[str] = ()) -> list[Crop]:
    """Step-2 inputs for every block that is read (not skipped), in layout order."""
    page = to_rgb(page)
    width, height = page.size
    skip = set(profile.skip_types) | {t for t in skip_types if t in profile.block_types}
    crops = []
    for index, block in enumerate(blocks):
        if block.type in skip:
            continue
        x1, y1, x2, y2 = block.bbox
        # PIL rounds a float box half-to-even, as Python's round() does
        box = (round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height))
        if box[2] - box[0] < 1 or box[3] - box[1] < 1:
            continue
        image = page.crop(box)
        if block.angle in (90, 180, 270):
            image = image.rotate(block.angle, expand=True)
        image = fit_crop(image, profile.min_edge, profile.max_aspect)
        crops.append(Crop(index, image, profile.prompt_for(block.type),
                          profile.sampling_for(block.type)))
    return crops


# --------------------------------------------------------------------------- tables: OTSL


OTSL_TOKENS = ("<fcel>", "<ecel>", "<lcel>", "<ucel>", "<xcel>", "<nl>")
_OTSL_SPLIT = re.compile("(" + "|".join(OTSL_TOKENS) + ")")


def otsl_to_html(otsl: str) -> str:
    """An OTSL table as an HTML <table> with rowspan/colspan, as MinerU writes it.

    <fcel> opens a cell with text, <ecel> an empty one, <lcel> continues the cell on the left,
    <ucel> the one above, <xcel> both; <nl> ends a row. Short rows are padded with empty cells.
    Returns "" when there is no cell. Text that is not right after a cell token, and anything
    after text that appears before the first token, is dropped (MinerU's alignment rule).
    """
    if otsl.startswith("<table") and otsl.endswith("</table>"):
        return otsl
    parts = [p for p in _OTSL_SPLIT.split(otsl) if p.strip()]
    tokens = [p for p in parts if p in OTSL_TOKENS]
    rows = [list(g) for is_nl, g in itertools.groupby(tokens, lambda t: t == "<nl>") if not is_nl]
    if not rows:
        return ""
    ncols = max(len(r) for r in rows)
    for r in rows:
        r.extend(["<ecel>"] * (ncols - len(r)))

    # attach each piece of text to the token right before it, walking the original parts in
    # step with the padded grid; once they disagree, no more text is attached
    texts: dict[tuple[int, int], str] = {}
    p = 0
    for r, row in enumerate(rows):
        for c, token in enumerate(row):
            if p < len(parts) and parts[p] == token:
                p += 1
                if p < len(parts) and parts[p] not in OTSL_TOKENS:
                    texts[(r, c)] = parts[p]
                    p += 1
        if p < len(parts) and parts[p] == "<nl>":
            p += 1

    nrows = len(rows)
    grid: list[list[tuple | None]] = [[None] * ncols for _ in range(nrows)]
    for r, row in enumerate(rows):
        for c, token in enumerate(row):
            if token not in ("<fcel>", "<ecel>"):
                continue
            colspan = rowspan = 1
            # an <ecel> followed by text hides a span to its right (MinerU)
            if not (token == "<ecel>" and (r, c) in texts):
                while c + colspan < ncols and row[c + colspan] in ("<lcel>", "<xcel>"):
                    colspan += 1
            while r + rowspan < nrows and rows[r + rowspan][c] in ("<ucel>", "<xcel>"):
                rowspan += 1
            text = texts.get((r, c), "").strip() if token == "<fcel>" else ""
            cell = (r, c, rowspan, colspan, text)
            for i in range(r, r + rowspan):
                for j in range(c, c + colspan):
                    grid[i][j] = cell  # later cells overwrite earlier ones, as in MinerU

    if not any(token in ("<fcel>", "<ecel>") for row in rows for token in row):
        return ""
    out = ["<table>"]
    for i in range(nrows):
        out.append("<tr>")
        for j in range(ncols):
            cell = grid[i][j] or (i, j, 1, 1, "")
            r, c, rowspan, colspan, text = cell
            if (r, c) != (i, j):
                continue
            attrs = (f' rowspan="{rowspan}"' if rowspan > 1 else "") + \
                    (f' colspan="{colspan}"' if colspan > 1 else "")
            out.append(f"<td{attrs}>{html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


# --------------------------------------------------------------------------- equations


class _BadArrays(ValueError):
    """\\end{array} before its \\begin{array}: MinerU leaves such LaTeX alone."""


def strip_equation_delimiters(latex: str) -> str:
    """Pro: drop a leading \\[ and a trailing \\] the model wrote itself."""
    s = latex.strip()
    if s[:2] == "\\[":
        s = s[2:]
    if s[-2:] == "\\]":
        s = s[:-2]
    return s.strip()


# \left / \right tokens as MinerU counts them. Note "\right." matches \right + any character
# (so \rightarrow counts as a \right): kept, because it decides which equations are rewritten.
_LEFT_PATTERNS = [r"\\left\\lbrace", r"\\left\\lVert", r"\\left\\lvert", r"\\left\\rvert",
                  r"\\left\\rVert", r"\\left\\vert", r"\\left\\Vert", r"\\left\\lfloor",
                  r"\\left\\lbrack", r"\\left\\langle", r"\\left\|", r"\\left\\\|", r"\\left\[",
                  r"\\left\]", r"\\left\(", r"\\left\\{", r"\\left\\}", r"\\left\."]
_RIGHT_PATTERNS = [r"\\right\\rbrace", r"\\right\\lVert", r"\\right\\lvert", r"\\right\\rvert",
                   r"\\right\\rVert", r"\\right\\vert", r"\\right\\Vert", r"\\right\\rfloor",
                   r"\\right\\rbrack", r"\\right\\rangle", r"\\right\|", r"\\right\\\|",
                   r"\\right\]", r"\\right\[", r"\\right\)", r"\\right\\}", r"\\right\\{",
                   r"\\right."]
_LEFT_RE = re.compile("|".join(_LEFT_PATTERNS))
_RIGHT_RE = re.compile("|".join(_RIGHT_PATTERNS))
_LEFT_RIGHT_SPLIT = re.compile("(" + "|".join(_LEFT_PATTERNS + _RIGHT_PATTERNS) + ")")
_ARRAY_SPLIT = re.compile(r"(\&|\\\\|\\begin{array}\s*{[a-zA-Z\s]*}|\\end{array})")
_BEGIN, _END = "\\begin{array}", "\\end{array}"

# the delimiters that pair up; "\left." and "\right." pair with anything on the other side
_PAIRS = {"\\left\\lbrace": "\\right\\rbrace", "\\left\\lVert": "\\right\\lVert",
          "\\left\\lvert": "\\right\\lvert", "\\left\\vert": "\\right\\vert",
          "\\left\\Vert": "\\right\\Vert", "\\left\\lfloor": "\\right\\rfloor",
          "\\left\\lbrack": "\\right\\rbrack", "\\left\\langle": "\\right\\rangle",
          "\\left|": "\\right|", "\\left\\|": "\\right\\|", "\\left[": "\\right]",
          "\\left]": "\\right[", "\\left(": "\\right)", "\\left)": "\\right(",
          "\\left\\{": "\\right\\}", "\\left\\}": "\\right\\{", "\\left/": "\\right/"}
_LEFTS = set(_PAIRS) | {"\\left\\rvert", "\\left\\rVert", "\\left."}
_RIGHTS = set(_PAIRS.values()) | {"\\right\\rvert", "\\right\\rVert", "\\right."}


def _pairs(left: str, right: str) -> bool:
    if not (left == "\\left." or left in _PAIRS):
        return False
    if not (right == "\\right." or right in _PAIRS.values()):
        return False
    return left == "\\left." or right == "\\right." or _PAIRS[left] == right


def _cell_keys(nodes: list[str]) -> list:
    """For each node, the (array, cell) it belongs to, innermost array first.

    Reproduces MinerU's numbering: the counter restarts from the number of the array just
    closed, so two arrays can share a number and their cells are then balanced together.
    With no array at all only the first node gets a key (MinerU's behaviour).
    """
    arrays, stack, counter = [], [], 0
    for i, node in enumerate(nodes):
        if _BEGIN in node:
            counter += 1
            stack.append((counter, i))
        elif node == _END:
            if not stack:
                raise _BadArrays(nodes)
            counter, start = stack.pop()
            arrays.append((counter, start, i))
    if stack:
        raise _BadArrays(nodes)
    if not arrays:
        return [None]
    nested = [[b[0] for b in arrays if a[1] < b[1] and a[2] > b[2]] for a in arrays]
    order = sorted(range(len(arrays)), key=lambda k: len(nested[k]), reverse=True)
    by_number = {arrays[k][0]: arrays[k] for k in order}
    keys: list = [None] * len(nodes)
    for k in order:
        number, start, end = arrays[k]
        hidden = set()
        for inner in nested[k]:
            _, s, e = by_number[inner]
            hidden.update(range(s, e + 1))
        cell = 0
        for i in range(start, end + 1):
            if i in hidden:
                continue
            if nodes[i] in ("&", "\\\\"):
                cell += 1
            elif keys[i] is None:
                keys[i] = (number, cell)
    return keys


def _balance(pieces_per_node: list[list[str]]) -> None:
    stack: list[tuple[str, int, int]] = []
    for n, pieces in enumerate(pieces_per_node):
        for k, piece in enumerate(pieces):
            if piece not in _LEFTS and piece not in _RIGHTS:
                continue
            if stack and _pairs(stack[-1][0], piece):
                stack.pop()
            else:
                stack.append((piece, n, k))
    for piece, n, k in stack:
        if "\\left" in piece:
            pieces_per_node[n][k] = piece + " \\right."
        elif "\\right" in piece:
            pieces_per_node[n][k] = "\\left. " + piece


def fix_left_right(latex: str) -> str:
    """Close unmatched \\left/\\right with \\right./\\left., cell by cell inside arrays.

    Only applies when the counts differ and \\begin{array}/\\end{array} counts agree. Like
    MinerU, it also removes the whitespace around & and \\\\ when it rewrites.
    Raises _BadArrays when arrays close before they open.
    """
    if len(_LEFT_RE.findall(latex)) == len(_RIGHT_RE.findall(latex)):
        return latex
    if latex.count(_BEGIN) != latex.count(_END):
        return latex
    nodes = [n.strip() for n in _ARRAY_SPLIT.split(latex.strip()) if n]
    keys = _cell_keys(nodes)
    groups: dict = {}
    for i, key in enumerate(keys):
        node = nodes[i]
        if node in ("&", "\\\\") or _BEGIN in node or _END in node:
            continue
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        lefts = sum(len(_LEFT_RE.findall(nodes[i])) for i in members)
        rights = sum(len(_RIGHT_RE.findall(nodes[i])) for i in members)
        if lefts == rights:
            continue
        pieces = [[p for p in _LEFT_RIGHT_SPLIT.split(nodes[i]) if p.strip()] for i in members]
        _balance(pieces)
        for i, node_pieces in zip(members, pieces):
            nodes[i] = "".join(node_pieces)
    return "".join(nodes)


_DOUBLE_SUBSCRIPT = re.compile(r"_\s*\{([^{}]|\{[^{}]*\})*\}\s*_\s*\{([^{}]|\{[^{}]*\})*\}")


def fix_double_subscript(latex: str) -> str:
    """MinerU removes both groups of a doubled subscript `_{a}_{b}` (invalid LaTeX)."""
    return _DOUBLE_SUBSCRIPT.sub("", latex)


def fix_colon_equals(latex: str) -> str:
    return latex.replace("\\eqqcolon", "=:").replace("\\coloneqq", ":=")


_BIG = ["big", "bigr", "bigm", "bigl", "bigg", "biggr", "biggm", "biggl"]
_BIG_ALL = _BIG + [b.capitalize() for b in _BIG]


def _big_rules() -> list[tuple[str, str]]:
    """`\\big{)}` -> `\\big)` and friends, in MinerU's order, with its quirks:
    \\biggm/\\biggl (and capitals) turn {[} / {]} into `\\[` / `\\]`, and \\Biggm{\\rangle}
    and \\Biggm{\\}} are left alone."""
    rules = []

    def add(cmds, delims, out=lambda cmd, d: d):
        for cmd in cmds:
            for spaced in ("", " "):
                for d in delims:
                    rules.append((f"\\{cmd}{spaced}{{{d}}}", f"\\{cmd}{out(cmd, d)}"))

    add(_BIG_ALL, [")", "("])
    add([c for c in _BIG_ALL if c != "Biggm"], ["\\}", "\\{"])
    add(_BIG_ALL, ["|"])
    add(_BIG_ALL, ["\\|"])
    add(_BIG_ALL, ["]", "["], lambda cmd, d: ("\\" + d) if cmd.lower() in ("biggm", "biggl") else d)
    add([c for c in _BIG_ALL if c != "Biggm"], ["\\rangle", "\\langle"], lambda cmd, d: d + " ")
    rules.append(("\\bigtimes", "\\times"))
    return rules


BIG_RULES = _big_rules()


def fix_big_delimiters(latex: str) -> str:
    for old, new in BIG_RULES:
        if old in latex:
            latex = latex.replace(old, new)
    return latex


def fix_less_than(latex: str) -> str:
    return latex.replace("<", "< ")


def fix_unbalanced_braces(latex: str) -> str:
    """Delete `{` and `}` that have no partner; braces after an odd run of backslashes are escaped."""
    open_at: list[int] = []
    drop: set[int] = set()
    backslashes = 0
    for i, ch in enumerate(latex):
        if ch in "{}" and backslashes % 2 == 0:
            if ch == "{":
                open_at.append(i)
            elif open_at:
                open_at.pop()
            else:
                drop.add(i)
        backslashes = backslashes + 1 if ch == "\\" else 0
    drop.update(open_at)
    return "".join(ch for i, ch in enumerate(latex) if i not in drop)


def fix_equation(latex: str, profile: Profile = PROFILE_2509) -> str:
    """MinerU's LaTeX repairs for an `equation` block, in its order.

    With the 2509 profile a malformed array order leaves the equation untouched (MinerU aborts
    the whole chain); the Pro profile only skips the \\left/\\right step.
    """
    original = latex
    if profile.strip_equation_delimiters:
        latex = strip_equation_delimiters(latex)
    try:
        latex = fix_left_right(latex)
    except _BadArrays:
        if not profile.tolerate_bad_arrays:
            return original
    latex = fix_double_subscript(latex)
    latex = fix_colon_equals(latex)
    latex = fix_big_delimiters(latex)
    latex = fix_less_than(latex)
    return fix_unbalanced_braces(latex)


def wrap_display_equation(latex: str) -> str:
    """`\\[\\n ... \\n\\]` unless already delimited."""
    latex = latex.strip()
    if not latex.startswith("\\["):
        latex = "\\[\n" + latex
    if not latex.endswith("\\]"):
        latex = latex + "\n\\]"
    return latex


_TAG = re.compile(r"\\tag\s*\{([^}]*)\}")


def combine_equations(contents: Sequence[str]) -> str:
    """Several equations as one `array`; with more than one \\tag, tags become `(n)`."""
    if sum(len(_TAG.findall(c)) for c in contents) > 1:
        contents = [_TAG.sub(r"(\1)", c) for c in contents]
    return "\\begin{array}{l} " + "".join(c + " \\\\ " for c in contents) + "\\end{array}"


def merge_equation_blocks(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    """An equation_block covering (>90% of each) two or more equations becomes one equation
    holding them as an array, in place of the block; equation_blocks are dropped otherwise."""
    equations = [i for i, b in enumerate(blocks) if b.type == "equation"]
    merged: dict[int, list[int]] = {}
    for i, block in enumerate(blocks):
        if block.type != "equation_block":
            continue
        inside = [j for j in equations if _covered(blocks[j].bbox, block.bbox) > 0.9]
        if len(inside) > 1:
            merged[i] = inside
    used = {j for inside in merged.values() for j in inside}
    out = []
    for i, block in enumerate(blocks):
        if i in used:
            continue
        if i in merged:
            content = combine_equations([blocks[j].content or "" for j in merged[i]])
            out.append(replace(block, type="equation", content=content))
        elif block.type != "equation_block":
            out.append(block)
    return out


NON_TEXT = "[Non-Text]"


def _drop_non_text(blocks: list[LayoutBlock]) -> list[LayoutBlock]:
    keep_empty = {"header", "footer"}
    protected = {"image", "chart", "table", "equation", "list", "image_block", "equation_block"}
    out = []
    for block in blocks:
        if block.content is None or block.content.strip() != NON_TEXT:
            out.append(block)
        elif block.type in keep_empty:
            out.append(replace(block, content=""))
        elif block.type in protected:
            out.append(block)
    return out


def post_process(blocks: Sequence[LayoutBlock], profile: Profile = PROFILE_2509,
                 drop_list: bool = False, drop_paratext: bool = False,
                 on_error: Callable[[str, str, Exception], None] | None = None,
                 ) -> list[LayoutBlock]:
    """Tables to HTML, equation repairs, equation_block merging and \\[ \\] wrapping.

    Returns new blocks; the input is not modified. A step that fails on one block leaves that
    block's content as it was and is reported to on_error(step, content, error).
    """
    def failed(step: str, content: str, error: Exception) -> None:
        if on_error is not None:
            on_error(step, content, error)

    out = []
    for block in blocks:
        block = replace(block)
        if block.type == "table" and block.content:
            try:
                block.content = otsl_to_html(block.content)
            except Exception as error:  # never lose a page to a malformed table
                failed("otsl_to_html", block.content, error)
        block.type = profile.content_rename.get(block.type, block.type)
        out.append(block)
    if profile.non_text_cleanup:
        out = _drop_non_text(out)
    for block in out:
        if block.type == "equation" and block.content:
            try:
                block.content = fix_equation(block.content, profile)
            except Exception as error:
                failed("fix_equation", block.content, error)
    out = merge_equation_blocks(out)
    for block in out:
        if block.type == "equation" and block.content:
            block.content = wrap_display_equation(block.content)
    return [b for b in out
            if not (drop_list and b.type == "list")
            and not (drop_paratext and b.type in PARATEXT_TYPES)]
