"""One recognised text line (the OCR's, or a text layer's) and how pieces of text join: shared by
the OCR engine's block assembly (engines.ocr) and its code blocks (engines.code_blocks)."""

from __future__ import annotations

import re

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
