"""One recognised text line (the OCR's, or a text layer's) and what is done to lines wherever they
are grouped: pieces of text joined (`join_text`), a block's line boxes levelled on a page scanned
askew (`level_boxes`), look-alike kana and ideographs fitted to their neighbours' script
(`fit_twins`). Shared by the OCR engine (engines.ocr), its block assembly (engines.assembly,
engines.joining, engines.cuts, engines.table_text) and its code blocks (engines.code_blocks)."""

from __future__ import annotations

import re
from typing import Mapping

from mineru_cli.core.geometry import Box
from mineru_cli.engines import deskew

# CJK characters, kana, hangul and their full-width punctuation: no space between them and the
# text beside them.
CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")


class Line:
    """One recognised text line: axis-aligned box, text, confidence, the slope of its baseline
    (dy / dx: 0 for a level line, about 0.05 for one on a page scanned 3 degrees askew), and
    whether a text layer sets it all in a monospaced font (pixels never tell: False). A text
    layer's line also has its pieces: the line cut at its gaps of a table's cells (text_layer's
    CELL_GAP), which a table takes in its place; the OCR's lines have none (the detector cuts
    there itself)."""

    __slots__ = ("box", "text", "score", "slope", "mono", "pieces")

    def __init__(
        self,
        box: tuple[int, int, int, int],
        text: str,
        score: float,
        slope: float = 0.0,
        mono: bool = False,
        pieces: tuple[Line, ...] = (),
    ):
        self.box, self.text, self.score, self.slope, self.mono = box, text.strip(), score, slope, mono
        self.pieces = pieces

    @property
    def height(self) -> int:
        return max(1, self.box[3] - self.box[1])

    def moved(self, dx: int, dy: int) -> Line:
        """The line in the pixels of the page that holds its piece at (dx, dy)."""
        if not dx and not dy:
            return self
        x1, y1, x2, y2 = self.box
        pieces = tuple(piece.moved(dx, dy) for piece in self.pieces)
        return Line((x1 + dx, y1 + dy, x2 + dx, y2 + dy), self.text, self.score, self.slope, self.mono, pieces)

    def as_dict(self) -> dict:
        return {"bbox": list(self.box), "text": self.text, "score": round(self.score, 4)}


def join_text(parts: list[str]) -> str:
    """Join pieces with a space, except around CJK text and after a hyphen."""
    out = ""
    for part in parts:
        if out and not (out.endswith("-") or CJK.match(out[-1]) or CJK.match(part[0])):
            out += " "
        out += part
    return out


# Kana and ideographs drawn alike, which the recogniser mixes up: hiragana and katakana be, pe
# and ri; katakana ka, ni, ro, e, to, ta and ha and the ideographs for power, two, mouth, work,
# divination, evening and eight (he is left out: the particle へ follows katakana words)
_TWINS = dict(zip("べベぺペりリカ力ニ二ロ口エ工ト卜タ夕ハ八", "ベべペぺリり力カ二ニ口ロ工エ卜ト夕タ八ハ"))


def _script(ch: str) -> str:
    if "\u3041" <= ch <= "\u309f":
        return "hiragana"
    if "\u30a0" <= ch <= "\u30ff":
        return "katakana"
    return "ideograph" if "\u4e00" <= ch <= "\u9fff" else ""


def fit_twins(text: str) -> str:
    """Each character of a look-alike pair in the script of its neighbours: a kana between two
    letters of the other kana is its twin ("ラべル" is ラベル, "よリも" is よりも), and a lone
    katakana beside an ideograph is the ideograph ("出カする" is 出力する): a word is written
    in one script, and a katakana word has more than one letter. An ideograph after a katakana
    word stays (コミュニケーション力: a suffix), as does a character at a line's end or beside
    Latin, digits or punctuation. A katakana that is a mark of its own is katakana (_marks): the
    recogniser reads 三カ月 as 三力月 and ハ長調 as 八長調, no words."""
    chars = list(text)
    marks = _marks(text)
    for k in range(1, len(chars) - 1):
        twin = _TWINS.get(chars[k])
        if twin is None or k in marks:
            continue
        around = (_script_at(chars, marks, k - 1), _script_at(chars, marks, k + 1))
        if _fits_better(_script(chars[k]), _script(twin), around):
            chars[k] = twin
    for k, mark in marks.items():
        chars[k] = mark
    return "".join(chars)


# Lone katakana that Japanese sets among ideographs as marks: カ counting months, places,
# countries, years or articles after a numeral (数カ月, 十カ所, 二カ国), a letter naming a musical
# key (ハ長調, ニ短調)
_COUNTER = re.compile(r"(?<=[〇一二三四五六七八九十百千万数何幾0-9０-９])[カ力](?=[月所国年条])")
_KEY = re.compile(r"[イロ口ハ八ニ二ホヘト卜](?=[長短]調)")
_KATAKANA_KEY = {"口": "ロ", "八": "ハ", "二": "ニ", "卜": "ト"}


def _marks(text: str) -> dict[int, str]:
    """The marks' places in `text`, each with its katakana (the two patterns match different
    characters, so no place is both)."""
    marks = {m.start(): "カ" for m in _COUNTER.finditer(text)}
    marks.update((m.start(), _KATAKANA_KEY.get(m.group(), m.group())) for m in _KEY.finditer(text))
    return marks


def _script_at(chars: list[str], marks: Mapping[int, str], k: int) -> str:
    """The script of chars[k] as a word's letter: a mark belongs to none."""
    return "" if k in marks else _script(chars[k])


def _fits_better(script: str, twin: str, around: tuple[str, str]) -> bool:
    if "" in around or script in around:
        return False
    return around == (twin, twin) or (twin == "ideograph" and twin in around)


# A block's lines are levelled (see level_boxes) when their baselines slope at least this much
# (0.3 degrees): below it a line's box is as tall as its text.
LEVEL_FROM_SLOPE = 0.005


def level_boxes(lines: list[Line]) -> list[Box]:
    """The lines' boxes for grouping them into rows, on a page scanned askew seen as if it were
    level. A slanted line's axis-aligned box is taller than its text by its width times its slope
    (3 degrees on a 700 px line: 37 px, more than the gap to the next line), so the boxes of a
    paragraph's lines overlap and would make one row read left to right (an indented first line
    read after the lines below it). Each box is sheared by the block's median slope (its long
    lines': a short one's slope is noise) and cut to the height of its text."""
    slopes = deskew.long_line_slopes([(ln.box, ln.slope) for ln in lines])
    slope = slopes[len(slopes) // 2] if slopes else 0.0
    if abs(slope) < LEVEL_FROM_SLOPE:
        return [ln.box for ln in lines]
    boxes: list[Box] = []
    for ln in lines:
        x1, y1, x2, y2 = ln.box
        centre = (y1 + y2) / 2 - slope * (x1 + x2) / 2
        half = max(1.0, (y2 - y1) - abs(slope) * (x2 - x1)) / 2
        boxes.append((x1, round(centre - half), x2, round(centre + half)))
    return boxes
