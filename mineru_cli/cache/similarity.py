"""Page hashing and near-duplicate verification.

A near-duplicate may only reuse a cached result after two stages:

1. **Candidate search (pHash).**  ``imagehash.phash`` (64 bits, DCT of a 32x32
   grayscale) finds cached pages within ``PHASH_RADIUS`` bits that also have the
   same aspect ratio (within ``ASPECT_TOL``).  pHash only *nominates*: two
   invoices that differ in one amount have identical or near-identical pHashes
   (the tests assert this), so it can never decide alone.  A second perceptual
   hash would not help for the same reason — every global hash is blind to a
   changed digit — so the budget goes into verification instead.

2. **Pixel verification.**  Both pages are reduced to the same grayscale
   "verification thumbnail" (area-averaged, long side ``THUMB_SIDE`` px; the
   cached page's thumbnail is stored, the query is resized to exactly that
   size).  Then, per pixel, a *shift-tolerant* difference is taken::

       d(p) = max( min_{|s|<=1} |A(p) - B(p+s)|,  min_{|s|<=1} |B(p) - A(p+s)| )

   i.e. a pixel only counts as different if nothing within one thumbnail pixel
   on the other page has about the same gray level.  Resampling (a 95 %
   rescale), JPEG ringing and PNG re-saves move edges by a fraction of a pixel
   and perturb levels a little, so ``d`` stays small everywhere.  A changed
   digit or word puts ink where the other page has paper (or the reverse) over
   a few whole thumbnail pixels, and ``d`` there is close to full contrast.

   The page is accepted only if **both** hold:

   * local: no ``TILE`` x ``TILE`` tile has more than ``TILE_MAX_PIXELS``
     pixels with ``d > PIXEL_DIFF``  (a changed digit concentrates in one tile;
     re-encoding noise is spread thin and mostly below ``PIXEL_DIFF``);
   * global: mean(d) <= ``GLOBAL_MEAN_MAX`` (catches a page that differs
     faintly everywhere, e.g. another background or a shifted layout).

   Margins measured on the test set (``tests/test_cache_similarity.py`` and
   ``python -m mineru_cli.cache.bench --margins``) are written in
   ``MARGINS`` below and in the report.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import imagehash
import numpy as np
from PIL import Image

# --- tuning (see the docstring and MARGINS) ---------------------------------
PHASH_RADIUS = 10        # Hamming bits; candidates only, verification decides
ASPECT_TOL = 0.02        # relative aspect-ratio difference allowed
THUMB_SIDE = 1024        # long side of the verification thumbnail, px
TILE = 16                # tile edge for the local test, thumbnail px
PIXEL_DIFF = 64          # gray levels: a pixel "differs" above this
TILE_MAX_PIXELS = 2      # differing pixels tolerated in any one tile
GLOBAL_MEAN_MAX = 3.0    # mean shift-tolerant difference, gray levels
EDGE_SLACK = 1.0        # edge-aware widening of the neighbourhood range
MAX_CANDIDATES = 8       # nearest candidates verified per lookup

MARGINS = "filled in after measurement"


def pixel_sha256(image: Image.Image) -> str:
    """sha256 of mode + size + raw pixels (what the loader computes)."""
    h = hashlib.sha256()
    h.update(f"{image.mode}:{image.width}x{image.height}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def phash64(image: Image.Image) -> int:
    """pHash as a signed 64-bit int (fits an SQLite INTEGER)."""
    v = int(str(imagehash.phash(image)), 16)
    return v - (1 << 64) if v >= (1 << 63) else v


def hamming(a: np.ndarray, b: int) -> np.ndarray:
    """Hamming distances between an int64 array of hashes and one hash."""
    x = np.bitwise_xor(a.view(np.uint64), np.uint64(b & ((1 << 64) - 1)))
    return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)


def thumb_size(width: int, height: int) -> tuple[int, int]:
    s = THUMB_SIDE / max(width, height)
    return max(1, round(width * s)), max(1, round(height * s))


def make_thumb(image: Image.Image, size: tuple[int, int] | None = None) -> np.ndarray:
    """Grayscale, area-averaged verification thumbnail (uint8, HxW)."""
    size = size or thumb_size(image.width, image.height)
    return np.asarray(image.convert("L").resize(size, Image.Resampling.BOX), dtype=np.uint8)


def pack_thumb(t: np.ndarray) -> bytes:
    return zlib.compress(t.tobytes(), 6)


def unpack_thumb(blob: bytes, w: int, h: int) -> np.ndarray:
    return np.frombuffer(zlib.decompress(blob), dtype=np.uint8).reshape(h, w)


def _outside_range(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How far each pixel of `a` lies outside the 3x3 range of `b` around it,
    the range widened by EDGE_SLACK times its own width (see the docstring)."""
    h, w = a.shape
    bp = np.pad(b, 1, mode="edge")
    lo, hi = b.copy(), b.copy()
    for dy in range(3):
        for dx in range(3):
            win = bp[dy:dy + h, dx:dx + w]
            np.minimum(lo, win, out=lo)
            np.maximum(hi, win, out=hi)
    slack = (hi - lo) * EDGE_SLACK
    return np.maximum(np.maximum(lo - slack - a, a - hi - slack), 0)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    tile_max: int        # most differing pixels in one tile
    global_mean: float   # mean shift-tolerant difference


def compare(a: np.ndarray, b: np.ndarray) -> Verdict:
    """Verify two same-size thumbnails (see the module docstring)."""
    a16, b16 = a.astype(np.int16), b.astype(np.int16)
    d = np.maximum(_outside_range(a16, b16), _outside_range(b16, a16))
    h, w = d.shape
    ph, pw = -h % TILE, -w % TILE
    bad = np.pad(d > PIXEL_DIFF, ((0, ph), (0, pw)))
    tiles = bad.reshape((h + ph) // TILE, TILE, (w + pw) // TILE, TILE).sum(axis=(1, 3))
    tile_max, mean = int(tiles.max()), float(d.mean())
    return Verdict(tile_max <= TILE_MAX_PIXELS and mean <= GLOBAL_MEAN_MAX, tile_max, mean)


def aspect_close(w1: int, h1: int, w2: int, h2: int) -> bool:
    r1, r2 = w1 / h1, w2 / h2
    return abs(r1 - r2) <= ASPECT_TOL * r1


def rescale_payload(payload: dict, sx: float, sy: float, width: int, height: int) -> dict:
    """Copy of payload with every block/line bbox scaled to the query page."""
    def box(b):
        x1, y1, x2, y2 = b
        return [min(width, max(0, round(x1 * sx))), min(height, max(0, round(y1 * sy))),
                min(width, max(0, round(x2 * sx))), min(height, max(0, round(y2 * sy)))]

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
