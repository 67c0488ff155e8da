"""OCR fusion for the VLM engine: the embedded OCR's lines set against the VLM's blocks.

Pure functions over OCR lines (engines.lines.Line, page pixels) and block boxes; no models.
The VLM engine uses them two ways (see engines/vlm.py):
  - hybrid mode: a text-like block whose OCR lines are confident takes the OCR text instead of
    a VLM crop decode (the crop decodes are most of a page's time on a CPU);
  - the cross-check: a text-like block the VLM read is a "runaway" when its answer hit the
    token cap, or is far longer than what OCR read in the same box, or loops on a substring
    the OCR text does not loop on. Such a block is decoded once more with raised penalties.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

from ..core.blocks import LINE_TEXT
from ..core.blocks import BlockType as T
from ..core.geometry import best_holders
from ..vlm.protocol.profiles import SamplingParams
from .assembly import make_block
from .lines import Line
from .ocr import OCR_MODELS, OCR_SETTINGS
from .regions import GROUPING

# The text-like block types: hybrid gives them the OCR text of their box, and the cross-check
# compares their VLM answer with it. core.blocks.LINE_TEXT says which types and why.
TEXT_TYPES = LINE_TEXT
# A line belongs to the block holding this share of its area (the ocr engine's own rule; the
# block with the biggest share wins, so a table's lines are never taken by a text block over it).
LINE_IN_BLOCK = GROUPING["line_in_region"]
# Hybrid takes the OCR text only when the lines' mean recognition score reaches this. PP-OCRv6
# scores clean printed lines >= 0.95; the misreads on the test pages (a lone "x" read from a
# table, a square glyph from a picture) scored 0.73-0.80.
OCR_MIN_SCORE = 0.9
# Runaway rules. Longer than LENGTH_FACTOR x the OCR characters + LENGTH_SLACK: the slack
# keeps short boxes (a title OCR read as 10 characters) from being flagged for a normal answer.
LENGTH_FACTOR = 3
LENGTH_SLACK = 50
# A unit of 2..50 characters holding a letter or digit, repeated REPEAT_MIN times in a row
# (dot leaders and rules are not letters, so they never count).
REPEAT_MIN = 10
_REPEAT = re.compile(r"(.{2,50}?)\1{%d,}" % (REPEAT_MIN - 1), re.DOTALL)
# The one retry of a runaway: penalties raised and a short n-gram ban. Presence +0.5 pushes the
# model off tokens it has used at all; frequency only +0.25 (0.05 -> 0.3) because it grows with
# every use and a long, honest paragraph repeats "the" dozens of times; a 20-token ban (MinerU:
# 100) stops a loop after its first few periods rather than after 100 tokens.
RETRY_PRESENCE = 0.5
RETRY_FREQUENCY = 0.25
RETRY_NO_REPEAT_NGRAM = 20


def settings() -> dict:
    """Everything here that changes the output, for the engine's options() (fingerprint)."""
    return {
        "models": {k: OCR_MODELS[k] for k in ("det", "cls", "rec")},
        "ocr": dict(OCR_SETTINGS),
        "text_types": sorted(str(t) for t in TEXT_TYPES),
        "line_in_block": LINE_IN_BLOCK,
        "min_score": OCR_MIN_SCORE,
        "runaway": {"length_factor": LENGTH_FACTOR, "length_slack": LENGTH_SLACK, "repeat_min": REPEAT_MIN},
        "retry": {
            "presence_penalty": f"+{RETRY_PRESENCE}",
            "frequency_penalty": f"+{RETRY_FREQUENCY}",
            "no_repeat_ngram_size": RETRY_NO_REPEAT_NGRAM,
        },
    }


def assign_lines(lines: Sequence[Line], boxes: Sequence[Sequence[float]]) -> list[list[Line]]:
    """The lines of each box (page pixels): each line to the box holding the biggest share
    (>= LINE_IN_BLOCK) of its area, ties to the smaller box; lines outside every box dropped.
    Each line is tested only against the boxes near it (best_holders)."""
    out: list[list[Line]] = [[] for _ in boxes]
    for line, best in zip(lines, best_holders([line.box for line in lines], boxes, LINE_IN_BLOCK)):
        if best is not None:
            out[best].append(line)
    return out


def read_lines(lines: Sequence[Line], kind: str = T.TEXT) -> tuple[str, list[dict], float]:
    """(text, line dicts in reading order, mean score) of one block's lines: rows top to
    bottom, pieces left to right, reflowed into one paragraph as the ocr engine does a block of
    the `kind` (one of TEXT_TYPES: a reference's rows that start with an author's initial, "B.",
    start no line, joining.block_text)."""
    block = make_block(kind, list(lines))
    assert block.score is not None  # make_block scores every block: its lines' mean
    return block.text, block.extra["lines"], block.score


def trusted(lines: Sequence[Line]) -> bool:
    return bool(lines) and sum(ln.score for ln in lines) / len(lines) >= OCR_MIN_SCORE


def repeated_unit(text: str) -> str | None:
    """The first unit (2..50 chars with a letter or digit) repeated REPEAT_MIN+ times in a row."""
    for m in _REPEAT.finditer(text):
        if any(ch.isalnum() for ch in m.group(1)):
            return m.group(1)
    return None


def runaway(answer: str, truncated: bool, ocr_text: str | None, tokens: int = 0) -> str | None:
    """Why a text block's VLM answer is a runaway, or None.

    truncated: the answer hit the token cap (always a runaway). ocr_text: what OCR read in the
    block's box, or None when it read nothing there (or the box is rotated, which line OCR does
    not read): then only the cap counts, as there is nothing to compare with.
    """
    if truncated:
        return f"cut at {tokens} tokens" if tokens else "cut at the token cap"
    if not ocr_text:
        return None
    if len(answer) > LENGTH_FACTOR * len(ocr_text) + LENGTH_SLACK:
        return f"{len(answer)} characters where OCR read {len(ocr_text)}"
    unit = repeated_unit(answer)
    if unit is not None and repeated_unit(ocr_text) is None:
        return f"repeats {unit!r} {REPEAT_MIN}+ times"
    return None


def retry_params(sp: SamplingParams) -> SamplingParams:
    """The sampling of a runaway's one retry (see RETRY_*)."""
    ngram = (
        RETRY_NO_REPEAT_NGRAM if sp.no_repeat_ngram_size <= 0 else min(sp.no_repeat_ngram_size, RETRY_NO_REPEAT_NGRAM)
    )
    return replace(
        sp,
        presence_penalty=sp.presence_penalty + RETRY_PRESENCE,
        frequency_penalty=sp.frequency_penalty + RETRY_FREQUENCY,
        no_repeat_ngram_size=ngram,
    )
