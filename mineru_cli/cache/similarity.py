"""Page hashing and near-duplicate verification.

A near-duplicate may reuse a cached result only after two stages:

1. **Candidates (pHash, then a coarse signature).**  ``imagehash.phash``
   (64-bit DCT hash of the verification thumbnail) nominates cached pages within ``PHASH_RADIUS`` bits
   whose aspect ratio matches within ``ASPECT_TOL``.  pHash never decides: two
   invoices that differ in one amount have the *same* pHash (the tests assert
   it).  A second global hash (dHash, wHash) is equally blind to a changed
   digit, so none is used to accept anything.  Pages of prose in one layout
   are often within 6-10 bits of each other, so a second filter keeps the
   cost of a miss down: a 32x32 luma "coarse signature" must match
   within a mean |difference| of ``COARSE_MAX`` (re-encodings measure <= 1.2,
   distinct prose pages >= 3.0).  It only prunes; it never accepts.

2. **Pixel verification.**  Both pages are reduced to one thumbnail size in
   YCbCr (triangle-filtered; the cached page's thumbnail is stored, the query
   is resized to exactly that size).  The thumbnail keeps text large: it is
   scaled so that the page's *short* side becomes ``THUMB_SHORT`` = 1024 px,
   never by more than ``THUMB_SCALE_MAX`` = 0.8 (an A4 page at 200 DPI keeps
   62 % of its size, so 6 pt type is ~10 px tall; a long side of 1024 px
   kept 44 %).  A page whose thumbnail would be longer than
   ``THUMB_LONG_MAX`` (a long screenshot) gets no near-duplicate search at
   all: exact hits only.  Then, per pixel:

   * luma, blurred with sigma ``BLUR_SIGMA`` = 0.7 px: max |difference|
     <= ``PIXEL_DIFF`` and mean <= ``GLOBAL_MEAN_MAX`` (a faint change all
     over, e.g. another background or a shifted layout).  Where the page
     has little contrast, less is allowed: at each pixel at most
     ``CONTRAST_SHARE`` x the local contrast (the largest range of Y, Cb or
     Cr over ``CONTRAST_WINDOW`` px in either thumbnail, at least
     ``CONTRAST_FLOOR``).  A re-encoding's error scales with the edges it
     blurs; a fixed threshold let a changed total in light-gray (#AAA) or
     dark-mode secondary text through at 36-42 (found in a review);
   * chroma (Cb and Cr), blurred with sigma ``CHROMA_BLUR_SIGMA`` = 1.5 px
     (JPEG stores chroma at half resolution, so its re-encodings smear
     colour edges): max |difference| <= ``CHROMA_DIFF``.  Without it, text
     whose colour differs from its background more than its brightness does
     (red on blue, orange on mid-gray) was invisible to the check.

   Why this separates the two cases: the triangle filter and the blur both
   conserve ink locally, so re-encoding moves ink by a fraction of a pixel
   (rescale), or adds zero-mean ringing (JPEG), and after the blur that is
   small everywhere.  A changed digit or word *adds or removes* a stroke,
   i.e. ink where the other page has paper, which the blur cannot cancel.
   (A plain box/area downscale in Pillow is not area-exact at fractional
   factors and made a 95 % rescale look like a changed glyph; it is not used.)

   Measured (``python scripts/bench_cache.py --margins``; the look-alike
   pairs of ``tests/synthetic.lookalike_pairs``, each raw / JPEG q70 / 95 % rescale
   + JPEG, and pages x 4 re-encodings; figures in docs/benchmarks.md): the thresholds
   sit at least 1.3x from both groups, which the tests assert.  pHash
   distances are 0-2 for the look-alikes, i.e. pHash cannot tell them apart
   (re-encodings: 0-4, but up to 31 for a page whose text differs from its
   background in colour only, whose luma pHash is noise: such pages are
   seldom nominated at all).

   Verification runs at the cached page's thumbnail size, so a candidate
   whose thumbnail is smaller than ``MIN_DETAIL`` x the query's own (a
   low-resolution copy cached first) is not verified: at its coarser scale
   the query's small print may not show.

3. **Type large enough to verify.**  The pixel check separates a changed
   digit from a re-encoding only while the type keeps some pixels: a 500x650
   invoice image (its total ~6 px tall in the 0.8 thumbnail) whose total
   reads 6,906.50 against 5,605.50 measures 40, under ``PIXEL_DIFF``, and was
   once served as a near-hit (the 2,077-page chaos soak).  So a page gets a
   near-duplicate search (and stores a thumbnail) only when the median height
   of its glyph-like ink blobs in the thumbnail is at least ``GLYPH_MIN`` px
   (``glyph_height``); smaller type gets exact hits only.  Measured on the
   synthetic invoice at widths 500-900 px (7 total pairs, each raw / JPEG q70
   / 95 % rescale + JPEG): glyph median 6 -> look-alikes from 0.90x the
   threshold (wrong verdicts), 7 -> from 1.21x, 8 -> from 1.48x, 9 -> from
   1.93x; their re-encodings at most 0.67x.
   Real pages rendered from PDFs mostly measure 8-12 at 150-300 DPI (a 10 pt
   body text), 5-8 at 100 DPI and 4-6 at 72 DPI: low-resolution renders of
   text pages hit exactly only.

4. **Every line the engine read tall enough.**  The median follows the body
   type, so a line of small print among larger content (a price in 8 px type
   under a chart, a footnote) passes stage 3 at the page's scale, where a
   changed digit in it can measure under ``PIXEL_DIFF`` (a slide of large
   shapes with one price line in 8 px type: 21).  The cached result knows
   where its text is: a near-hit is refused when any line box of the cached
   payload is less than ``LINE_MIN`` px tall in the thumbnail
   (``lines_tall_enough``).  Measured with the OCR engine's line boxes
   (a footnote or price line in Pillow's font, sizes 8-18, on a prose page
   and on slides; a changed total, raw / JPEG q70 / rescale + JPEG, against
   the luma threshold): boxes of 10.4-11.2 px in the thumbnail measured
   0.53-1.40x (under 1: accepted), of 12.8-13.6 px 1.02-1.98x, of 16 px and
   more 1.71x or more.
   Each line box must also span ``LINE_LUMA_MIN`` levels of luma in the
   cached thumbnail (``lines_contrasted``): text told from its background by
   colour more than by brightness (gold on white, white on amber, dark red
   or blue on a dark screen) changes a digit by 13-22 levels of luma, within
   what its colour contrast allows, and by 11-17 of chroma after the chroma
   blur (JPEG keeps colour at half resolution, so thin coloured strokes
   cannot be checked in colour); a review served such pages each other's
   totals.  Their lines measure 27-55 levels; gray #AAA text 71 (rejected by
   the contrast rule at >= 1.36x); the lines of the 26 real pages above 91
   or more, but for one title slide over a photo (37-45).
   A block that holds text but no line boxes (one the VLM read whole) cannot
   be checked this way, so a result with one is never reused near: the VLM
   engine's results hit exactly only, as do hybrid results with VLM-read
   tables or formulas.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import cv2
import imagehash
import numpy as np
from PIL import Image, ImageFilter

# --- tuning (see the docstring) -------------------------------------------
PHASH_RADIUS = 12  # Hamming bits; only nominates candidates
ASPECT_TOL = 0.02  # relative aspect-ratio difference allowed
THUMB_SHORT = 1024  # short side of the verification thumbnail, px ...
THUMB_SCALE_MAX = 0.8  # ... but always at least this much smaller than the page
THUMB_LONG_MAX = 2048  # longer thumbnails: no near-duplicate search (exact hits only)
BLUR_SIGMA = 0.7  # Gaussian blur of the luma before differencing, thumbnail px
PIXEL_DIFF = 42  # max luma |difference| allowed anywhere, levels
CONTRAST_SHARE = 0.26  # ... and at most this share of the local contrast
CONTRAST_WINDOW = 9  # px: the neighbourhood whose range is the local contrast
CONTRAST_FLOOR = 48  # levels: the contrast assumed where there is less (flat paper)
GLOBAL_MEAN_MAX = 4.0  # mean luma |difference| allowed, levels
CHROMA_BLUR_SIGMA = 1.5  # Gaussian blur of Cb and Cr
CHROMA_DIFF = 28  # max Cb or Cr |difference| allowed anywhere, levels
COARSE_SIDE = 32  # coarse signature: 32x32 luma of the thumbnail
COARSE_MAX = 2.0  # mean |difference| of coarse signatures to be verified at all
MAX_PHASH_CANDIDATES = 64
MAX_CANDIDATES = 4  # nearest candidates fully verified per lookup
MIN_DETAIL = 0.9  # a candidate's thumbnail must be >= this x the query's own (width)
GLYPH_MIN = 8  # median glyph height in the thumbnail, px, below which a page hits exactly only
LINE_MIN = 15  # every text line of the cached result at least this tall in the thumbnail, px
LINE_LUMA_MIN = 64  # ... and with at least this luma range (2nd-98th percentile) in its box, levels
INK_LUMA = 48  # luma levels from the local background that count as ink
INK_CHROMA = 24  # the same for Cb and Cr (coloured text on a background of its brightness)


def pixel_sha256(image: Image.Image) -> str:
    """sha256 of mode + size + raw pixels (what the loader computes)."""
    h = hashlib.sha256()
    h.update(f"{image.mode}:{image.width}x{image.height}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def phash64(thumb: np.ndarray) -> int:
    """pHash of a verification thumbnail's luma as a signed 64-bit int (an SQLite INTEGER)."""
    v = int(str(imagehash.phash(Image.fromarray(thumb[..., 0]))), 16)
    return v - (1 << 64) if v >= (1 << 63) else v


def hamming(a: np.ndarray, b: int) -> np.ndarray:
    """Hamming distances between an int64 array of hashes and one hash."""
    x = np.bitwise_xor(a.view(np.uint64), np.uint64(b & ((1 << 64) - 1)))
    return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)


def thumb_size(width: int, height: int) -> tuple[int, int]:
    s = min(THUMB_SCALE_MAX, THUMB_SHORT / min(width, height))
    return max(1, round(width * s)), max(1, round(height * s))


def near_eligible(width: int, height: int) -> bool:
    """Whether a page of this size gets a thumbnail short enough to verify a near-duplicate
    (its type is then checked by verification_thumb)."""
    return max(thumb_size(width, height)) <= THUMB_LONG_MAX


def glyph_height(thumb: np.ndarray) -> float:
    """Median height (thumbnail px) of the page's glyph-like ink blobs; 0 where it has none.

    Ink is whatever differs from a local background estimate (a median over
    ~20 px) by ``INK_LUMA`` in luma or ``INK_CHROMA`` in a chroma channel;
    blobs under 3 px (specks, the dot of an i) or more than 4x wider than tall
    (rules, underlines) are not glyphs.  The median follows the body type, so
    one large title does not make a page of small print look safe."""
    ink = np.zeros(thumb.shape[:2], dtype=bool)
    h, w = thumb.shape[:2]
    for c, level in ((0, INK_LUMA), (1, INK_CHROMA), (2, INK_CHROMA)):
        channel = np.ascontiguousarray(thumb[..., c])
        coarse = cv2.resize(channel, (max(1, w // 4), max(1, h // 4)), interpolation=cv2.INTER_AREA)
        background = cv2.resize(cv2.medianBlur(coarse, 5), (w, h), interpolation=cv2.INTER_LINEAR)
        ink |= np.abs(channel.astype(np.int16) - background) > level
    _, _, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    bh, bw = stats[1:, cv2.CC_STAT_HEIGHT], stats[1:, cv2.CC_STAT_WIDTH]
    glyphs = bh[(bh >= 3) & (bw <= 4 * bh)]
    return float(np.median(glyphs)) if glyphs.size else 0.0


def verification_thumb(image: Image.Image) -> np.ndarray | None:
    """The page's verification thumbnail, or None where a near-duplicate cannot be verified
    safely (a thumbnail too long, or type too small in it): such a page hits exactly only."""
    if not near_eligible(image.width, image.height):
        return None
    thumb = make_thumb(image)
    return thumb if glyph_height(thumb) >= GLYPH_MIN else None


def _line_boxes(payload: dict) -> list[tuple[float, float, float, float]] | None:
    """Every line box of a cached result, in page px; None where its lines cannot be known: a
    block holding text without line boxes (one the VLM read whole), or a box that is not four
    numbers. Blocks without text (a figure) have none."""
    blocks = payload.get("blocks") if isinstance(payload, dict) else None
    if not isinstance(blocks, (list, type(None))):
        return None
    boxes = []
    for block in blocks or []:
        lines = block.get("lines") if isinstance(block, dict) else None
        if not isinstance(lines, (list, type(None))):
            return None
        if not lines and isinstance(block, dict) and str(block.get("text") or "").strip():
            return None
        for line in lines or []:
            box = line.get("bbox") if isinstance(line, dict) else None
            try:
                x1, y1, x2, y2 = (float(v) for v in box or ())
            except (TypeError, ValueError):
                return None
            boxes.append((x1, y1, x2, y2))
    return boxes


def lines_tall_enough(payload: dict, scale: float) -> bool:
    """Whether every line box of a cached result is at least LINE_MIN px tall at the thumbnail's
    `scale` (thumbnail px per page px); a result whose lines cannot be known fails (_line_boxes).
    A line box more than twice as tall as wide is vertical text: its type size is its width."""
    boxes = _line_boxes(payload)
    if boxes is None:
        return False
    for x1, y1, x2, y2 in boxes:
        w, h = x2 - x1, y2 - y1
        size = w if h > 2 * w else h
        if not size * scale >= LINE_MIN:  # written so that NaN fails too
            return False
    return True


def lines_contrasted(payload: dict, thumb: np.ndarray, scale: float) -> bool:
    """Whether every line box of a cached result spans at least LINE_LUMA_MIN levels of luma in
    the cached page's thumbnail (2nd to 98th percentile); boxes are in page px, `scale` maps
    them to the thumbnail's. Text told from its background by colour more than by brightness
    fails: JPEG halves colour resolution, so a changed thin coloured stroke does not show in
    the colour check, and its luma step is small (see the docstring)."""
    boxes = _line_boxes(payload)
    if boxes is None:
        return False
    luma = thumb[..., 0]
    for x1, y1, x2, y2 in boxes:
        crop = luma[
            max(0, int(y1 * scale)) : int(np.ceil(y2 * scale)), max(0, int(x1 * scale)) : int(np.ceil(x2 * scale))
        ]
        if crop.size == 0 or np.percentile(crop, 98) - np.percentile(crop, 2) < LINE_LUMA_MIN:
            return False
    return True


def make_thumb(image: Image.Image, size: tuple[int, int] | None = None) -> np.ndarray:
    """YCbCr verification thumbnail (uint8, HxWx3).  The triangle filter
    conserves ink at any scale factor; BOX in Pillow does not (see docstring)."""
    size = size or thumb_size(image.width, image.height)
    return np.asarray(image.convert("RGB").resize(size, Image.Resampling.BILINEAR).convert("YCbCr"), dtype=np.uint8)


def coarse_sig(thumb: np.ndarray) -> bytes:
    im = Image.fromarray(thumb[..., 0]).resize((COARSE_SIDE, COARSE_SIDE), Image.Resampling.BILINEAR)
    return im.tobytes()


def coarse_dist(a: bytes, b: bytes) -> float:
    return float(np.abs(np.frombuffer(a, np.uint8).astype(np.int16) - np.frombuffer(b, np.uint8)).mean())


def pack_thumb(t: np.ndarray) -> bytes:
    return zlib.compress(t.tobytes(), 6)


def unpack_thumb(blob: bytes, w: int, h: int) -> np.ndarray:
    return np.frombuffer(zlib.decompress(blob), dtype=np.uint8).reshape(h, w, 3)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    max_diff: int  # largest blurred luma |difference|, levels
    luma_over: float  # largest luma |difference| / what its local contrast allows: > 1 rejects
    mean_diff: float  # mean blurred luma |difference|
    chroma_diff: int  # largest blurred Cb or Cr |difference|


def _blurred_diff(a: np.ndarray, b: np.ndarray, sigma: float) -> np.ndarray:
    blur = ImageFilter.GaussianBlur(sigma)
    return np.abs(
        np.asarray(Image.fromarray(a).filter(blur), dtype=np.int16)
        - np.asarray(Image.fromarray(b).filter(blur), dtype=np.int16)
    )


def _local_contrast(t: np.ndarray) -> np.ndarray:
    """Per pixel, the largest range of Y, Cb or Cr over CONTRAST_WINDOW px around it."""
    k = np.ones((CONTRAST_WINDOW, CONTRAST_WINDOW), np.uint8)
    ranges = []
    for c in range(3):
        channel = np.ascontiguousarray(t[..., c])
        ranges.append(cv2.dilate(channel, k).astype(np.int16) - cv2.erode(channel, k))
    return np.max(ranges, axis=0)


def compare(a: np.ndarray, b: np.ndarray) -> Verdict:
    """Verify two same-size thumbnails (see the module docstring)."""
    d = _blurred_diff(a[..., 0], b[..., 0], BLUR_SIGMA)
    chroma = max(int(_blurred_diff(a[..., c], b[..., c], CHROMA_BLUR_SIGMA).max()) for c in (1, 2))
    contrast = np.maximum(_local_contrast(a), _local_contrast(b))
    allowed = np.minimum(PIXEL_DIFF, CONTRAST_SHARE * np.maximum(contrast, CONTRAST_FLOOR))
    over, mean = float((d / allowed).max()), float(d.mean())
    return Verdict(over <= 1 and mean <= GLOBAL_MEAN_MAX and chroma <= CHROMA_DIFF, int(d.max()), over, mean, chroma)


def aspect_close(w1: int, h1: int, w2: int, h2: int) -> bool:
    r1, r2 = w1 / h1, w2 / h2
    return abs(r1 - r2) <= ASPECT_TOL * r1


def rescale_payload(payload: dict, sx: float, sy: float, width: int, height: int) -> dict:
    """Copy of payload with every block/line bbox scaled to the query page."""

    def box(b):
        x1, y1, x2, y2 = b
        return [
            min(width, max(0, round(x1 * sx))),
            min(height, max(0, round(y1 * sy))),
            min(width, max(0, round(x2 * sx))),
            min(height, max(0, round(y2 * sy))),
        ]

    out = dict(payload)
    blocks = []
    for blk in payload.get("blocks") or []:
        blk = dict(blk)
        if isinstance(blk.get("bbox"), (list, tuple)) and len(blk["bbox"]) == 4:
            blk["bbox"] = box(blk["bbox"])
        if isinstance(blk.get("lines"), list):
            lines = []
            for ln in blk["lines"]:
                if isinstance(ln, dict) and isinstance(ln.get("bbox"), (list, tuple)) and len(ln["bbox"]) == 4:
                    ln = {**ln, "bbox": box(ln["bbox"])}
                lines.append(ln)
            blk["lines"] = lines
        blocks.append(blk)
    if "blocks" in payload:
        out["blocks"] = blocks
    return out
