"""Elongated pages (a scrolling screenshot, a banner strip) cut into pieces for the embedded
engine's models, so that each model sees the text at the page's own size.

RapidOCR shrinks a page whose long side is over 2000 px to that size before it finds and reads
lines (its Global.max_side_len), and the layout model squeezes any page into 608 x 800. On a page
of ordinary shape that costs nothing: an A4 page at 300 DPI is read at ~170 DPI. On a 1080 x 11184
screenshot (eight manual pages stacked) the text went to a fifth of its size and 26 % of it was
read (character F1), against 99.6 % for the same pages one by one. Such a page is cut across its
long side into pieces of at most TILE_SIDE (or its short side, if longer) and each piece goes to
the models alone; the engine puts their lines and regions back in page pixels and assembles the
page as one.

The cuts fall in the page's blank bands (rows where no column changes: background, or a side bar
that runs on), in one wide enough nearest an even share of the page, so no text line is cut. A
page with no blank row there (a photograph) is cut where the fewest columns change.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import cv2
import numpy as np

# RapidOCR's own long-side limit (config.yaml Global.max_side_len): a piece within it is read as it is.
TILE_SIDE = 2000
# Only a page at least this many times longer than wide (or wider than long) is cut: a phone
# screenshot (1080 x 2400, 2.2) or a 300 DPI page keeps its one shrink, as before.
TILE_ASPECT = 2.5
# Nor a page thinner than this: it holds no line of text to read (the detector fails on it, or
# the check below stops it).
TILE_SHORT = 20
# The most pixels the text detector may be given (see detector_pixels). It enlarges a page's short
# side to det_limit_side_len (736), the long side alike, and takes ~140 bytes and ~4 us a pixel:
# a blank 1900 x 5 px strip became 11,400 x 2,850 (32.5 M: 4.7 GB, 134 s), a 24 x 1500 one
# 736 x 46,000 (33.9 M: 4.7 GB). A page of ordinary shape gets at most 4 M (2000 x 2000; an A4
# page at 300 DPI 2.8 M, a 1900 x 22 line of text 2.2 M). A thinner strip is cut into pieces
# within it; a page thinner than TILE_SHORT over it is refused.
DETECTOR_PIXELS = 6_000_000
# RapidOCR's preprocessing before the detector (its config.yaml Global): the short side brought up
# to min_side_len, and a strip wider than width_height_ratio to 1 (or no higher than min_height)
# padded above and below to twice max(width / ratio, min_height) high (use_vertical_padding).
_MIN_SIDE = 30
_PAD_RATIO = 8
# A cut keeps this many blank rows on either side where the blank band is wide enough.
_MARGIN = 16
# A pixel that differs from the one above it by more than this (of 255) is drawn: JPEG noise on a
# flat background stays below it.
_STEP = 24


class Piece(NamedTuple):
    x: int  # the piece's left edge in the page
    y: int  # its top edge
    pixels: np.ndarray  # its pixels (H x W or H x W x C), a contiguous copy


def pieces(page: np.ndarray, det_side: int) -> list[Piece]:
    """The page cut into pieces along its long side ([the whole page] when it needs no cut): an
    elongated page (see TILE_ASPECT), or a strip the detector would enlarge past DETECTOR_PIXELS
    (`det_side`: its det_limit_side_len)."""
    h, w = page.shape[:2]
    tall = h >= w
    long_side, short_side = (h, w) if tall else (w, h)
    elongated = long_side > TILE_SIDE and long_side >= TILE_ASPECT * short_side
    if short_side < TILE_SHORT or not (elongated or detector_pixels(w, h, det_side) > DETECTOR_PIXELS):
        return [Piece(0, 0, page)]
    side = max(short_side, TILE_SIDE)
    while side > short_side and detector_pixels(*((short_side, side) if tall else (side, short_side)), det_side) > (
        DETECTOR_PIXELS
    ):
        side = max(short_side, side * 4 // 5)
    gray = cv2.cvtColor(page, cv2.COLOR_BGR2GRAY) if page.ndim == 3 else page
    spans = cut(gray if tall else gray.T, side)
    if tall:
        return [Piece(0, a, np.ascontiguousarray(page[a:b])) for a, b in spans]
    return [Piece(a, 0, np.ascontiguousarray(page[:, a:b])) for a, b in spans]


def detector_pixels(width: int, height: int, det_side: int) -> float:
    """The pixels RapidOCR's detector is given for a page of this size: shrunk to TILE_SIDE on its
    long side, its short side brought up to _MIN_SIDE, a wide strip padded above and below to a
    height of a quarter of its width, then enlarged so its short side is det_side (limit_type
    "min"). A wide strip is padded, not enlarged: a 1900 x 22 line of text is read from
    ~2,900 x 736 pixels."""
    w, h = float(max(width, 1)), float(max(height, 1))
    scale = min(1.0, TILE_SIDE / max(w, h))
    scale *= max(1.0, _MIN_SIDE / (min(w, h) * scale))
    w, h = w * scale, h * scale
    if w / h > _PAD_RATIO or h <= _MIN_SIDE:
        h = max(h, 2 * max(w / _PAD_RATIO, _MIN_SIDE))
    return w * h * max(1.0, det_side / min(w, h)) ** 2


def cut(gray: np.ndarray, side: int) -> list[tuple[int, int]]:
    """Row ranges [a, b) of at most `side` rows covering the image, cut in its blank bands."""
    rows = gray.shape[0]
    # changed[r]: the columns where row r differs from row r - 1 (row 0 counts as a change)
    changed = np.empty(rows, dtype=np.int64)
    changed[0] = gray.shape[1]
    changed[1:] = (np.abs(np.diff(gray.astype(np.int16), axis=0)) > _STEP).sum(axis=1)
    # the rows to spread the cuts over evenly: n pieces of about rows / n
    target = rows / math.ceil(rows / side)
    spans, start = [], 0
    while rows - start > side:
        at = _best_cut(changed, start + max(1, round(target / 2)), start + side, start + target)
        spans.append((start, at))
        start = at
    spans.append((start, rows))
    return spans


def _best_cut(changed: np.ndarray, lo: int, hi: int, aim: float) -> int:
    """The row in [lo, hi] to start the next piece at: in a run of unchanged rows there, at least
    _MARGIN rows into it where it can (the widest run up to 2 x _MARGIN, of equals the one that
    comes nearest `aim`, as near it as it can); else the row nearest `aim` of those where the
    fewest columns change."""
    window = changed[lo : hi + 1]
    best: tuple[int, float, int] | None = None  # (run length up to 2 x _MARGIN, -distance to aim, cut row)
    run_start = None
    for i, count in enumerate(np.append(window, 1)):
        if count == 0 and run_start is None:
            run_start = i
        elif count != 0 and run_start is not None:
            margin = min(_MARGIN, (i - run_start - 1) // 2)
            row = lo + int(min(max(aim - lo, run_start + margin), i - 1 - margin))
            key = (min(i - run_start, 2 * _MARGIN), -abs(row - aim), row)
            best = key if best is None or key > best else best
            run_start = None
    if best is not None:
        return best[2]
    fewest = np.flatnonzero(window == window.min()) + lo
    return int(fewest[np.argmin(np.abs(fewest - aim))])
