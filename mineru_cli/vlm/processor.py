"""Qwen2-VL image processing and position ids in numpy, matching transformers.

`ImageProcessor` reproduces transformers' Qwen2VLImageProcessor (smart resize to multiples of
28, bicubic, rescale, CLIP normalisation, each image repeated along time, 14x14 patches in 2x2
merge-window order) as MinerU runs it: its backend is torchvision's (transformers 5 picks it
whenever torchvision is installed, as MinerU's `torch` extra installs it), whose bicubic resize
differs from PIL's (see `resize_bicubic`). `rope_index`
reproduces Qwen2-VL's get_rope_index (the 3-axis M-RoPE positions of a mixed text/image
sequence) and `vision_position_ids` the (row, col) of each patch for the vision encoder's 2D
rotary embedding.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def smart_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56, max_pixels: int = 28 * 28 * 2048
) -> tuple[int, int]:
    """(height, width) rounded to multiples of `factor`, scaled into [min_pixels, max_pixels]
    with the aspect ratio kept as far as possible."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio must be below 200, got {height}x{width}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class ImageProcessorConfig:
    patch_size: int = 14
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = 56 * 56
    max_pixels: int = 28 * 28 * 2048  # 1,605,632: MinerU2.5's preprocessor_config.json
    image_mean: tuple[float, float, float] = CLIP_MEAN
    image_std: tuple[float, float, float] = CLIP_STD
    rescale_factor: float = 1 / 255

    @classmethod
    def from_dict(cls, cfg: dict) -> "ImageProcessorConfig":
        """From a preprocessor_config.json dict (min/max_pixels at top level or in `size`)."""
        size = cfg.get("size") or {}
        min_pixels = cfg.get("min_pixels", size.get("shortest_edge", size.get("min_pixels")))
        max_pixels = cfg.get("max_pixels", size.get("longest_edge", size.get("max_pixels")))
        d = cls()
        return cls(
            patch_size=int(cfg.get("patch_size", d.patch_size)),
            temporal_patch_size=int(cfg.get("temporal_patch_size", d.temporal_patch_size)),
            merge_size=int(cfg.get("merge_size", d.merge_size)),
            min_pixels=int(min_pixels if min_pixels is not None else d.min_pixels),
            max_pixels=int(max_pixels if max_pixels is not None else d.max_pixels),
            image_mean=tuple(cfg.get("image_mean", d.image_mean)),
            image_std=tuple(cfg.get("image_std", d.image_std)),
            rescale_factor=float(cfg.get("rescale_factor", d.rescale_factor)),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "ImageProcessorConfig":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    @property
    def patch_dim(self) -> int:
        return 3 * self.temporal_patch_size * self.patch_size * self.patch_size


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    """The bicubic kernel with a = -0.5 (PIL's and torch's antialiased bicubic)."""
    x = np.abs(x)
    near = ((1.5 * x - 2.5) * x) * x + 1
    far = (((x - 5) * x + 8) * x - 4) * -0.5
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _axis_weights(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Source indices (out, taps), fixed-point weights (out, taps) and their precision in bits,
    as torch computes them for its uint8 antialiased bicubic: the kernel widened by the scale
    when shrinking, each row normalised, then scaled to the most bits that keep the largest
    weight within int16."""
    scale = in_size / out_size
    support = 2.0 * scale if scale >= 1 else 2.0
    stretch = 1.0 / scale if scale >= 1 else 1.0
    taps = math.ceil(support) * 2 + 1
    centre = scale * (np.arange(out_size) + 0.5)
    first = np.maximum(np.trunc(centre - support + 0.5), 0).astype(np.int64)
    count = np.minimum(np.trunc(centre + support + 0.5).astype(np.int64), in_size) - first
    offset = np.arange(taps)
    used = offset[None, :] < count[:, None]
    weights = np.where(used, _keys_cubic((offset[None, :] + first[:, None] - centre[:, None] + 0.5) * stretch), 0.0)
    total = weights.sum(axis=1, keepdims=True)
    weights = np.divide(weights, total, out=np.zeros_like(weights), where=total != 0)
    largest = float(weights.max())
    bits = 0
    while bits < 22 and int(0.5 + largest * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    scaled = weights * (1 << bits)
    fixed = np.trunc(np.where(scaled < 0, scaled - 0.5, scaled + 0.5)).astype(np.int64)
    index = np.minimum(first[:, None] + offset[None, :], in_size - 1)
    return index, fixed, bits


def _resize_axis(pixels: np.ndarray, axis: int, out_size: int) -> np.ndarray:
    """One pass of the resize along `axis` of a uint8 array, rounded and clipped to uint8. The
    sums fit in int32 (as torch's do): the weights' positive parts add up to little more than
    2**bits, and bits <= 22."""
    index, weights, bits = _axis_weights(pixels.shape[axis], out_size)
    source = np.ascontiguousarray(np.moveaxis(pixels, axis, 0), dtype=np.int32)
    weights = weights.astype(np.int32).reshape(weights.shape + (1,) * (source.ndim - 1))
    total = np.full((out_size,) + source.shape[1:], 1 << (bits - 1), dtype=np.int32)
    for tap in range(index.shape[1]):
        total += source[index[:, tap]] * weights[:, tap]
    return np.moveaxis(np.clip(total >> bits, 0, 255).astype(np.uint8), 0, axis)


def resize_bicubic(image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """The RGB image resized to (width, height), (height, width, 3) uint8, as torch's uint8
    antialiased bicubic makes it (the torchvision backend's resize on the CPU).

    PIL's bicubic has the same kernel but differs in two ways that change the pixels: it may
    resize the height first (PIL 13 does when the width grows and the height shrinks, as
    smart_resize's rounding to multiples of 28 does to many crops), and its weights have 22
    bits; each pass rounds and clips to uint8, so on text crops a value can move by over ten
    levels. torch always resizes the width first, with int16 weights."""
    pixels = np.asarray(image, dtype=np.uint8)
    width, height = size
    if pixels.shape[1] != width:
        pixels = _resize_axis(pixels, 1, width)
    if pixels.shape[0] != height:
        pixels = _resize_axis(pixels, 0, height)
    return pixels


def _rgb(image: Image.Image) -> Image.Image:
    """RGB as transformers makes it: transparency composited onto white."""
    if image.mode == "RGB":
        return image
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        image = image.convert("RGBA")
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, image).convert("RGB")
    return image.convert("RGB")


class ImageProcessor:
    """Images -> (pixel_values (N, 1176) float32, image_grid_thw (n, 3) int64)."""

    def __init__(self, config: ImageProcessorConfig | None = None):
        self.config = config or ImageProcessorConfig()
        c = self.config
        self._mean = np.asarray(c.image_mean, dtype=np.float32).reshape(3, 1, 1)
        self._std = np.asarray(c.image_std, dtype=np.float32).reshape(3, 1, 1)

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) the image is resized to."""
        c = self.config
        h, w = smart_resize(height, width, c.factor, c.min_pixels, c.max_pixels)
        return w, h

    def grid_thw(self, width: int, height: int) -> tuple[int, int, int]:
        w, h = self.target_size(width, height)
        return 1, h // self.config.patch_size, w // self.config.patch_size

    def num_image_tokens(self, width: int, height: int) -> int:
        """How many <|image_pad|> tokens the image becomes after the 2x2 merge."""
        t, h, w = self.grid_thw(width, height)
        return t * h * w // (self.config.merge_size**2)

    def pixels(self, image: Image.Image) -> np.ndarray:
        """The resized, rescaled, normalised image, (3, H, W) float32."""
        image = _rgb(image)
        resized = resize_bicubic(image, self.target_size(*image.size))
        x = (resized.astype(np.float64) * self.config.rescale_factor).astype(np.float32)
        x = x.transpose(2, 0, 1)
        return (x - self._mean) / self._std

    def patchify(self, x: np.ndarray) -> np.ndarray:
        """(3, H, W) -> (h*w, 3*T*p*p), patches grouped by merge window, row-major windows."""
        c = self.config
        p, m, t = c.patch_size, c.merge_size, c.temporal_patch_size
        channels, height, width = x.shape
        gh, gw = height // p, width // p
        x = x.reshape(channels, gh // m, m, p, gw // m, m, p)
        x = x.transpose(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, p, p)
        x = np.broadcast_to(x[:, :, :, :, :, None], (*x.shape[:5], t, p, p))
        return x.reshape(gh * gw, channels * t * p * p)

    def __call__(self, images: Image.Image | Sequence[Image.Image]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(images, Image.Image):
            images = [images]
        patches, grids = [], []
        for image in images:
            x = self.pixels(image)
            patches.append(self.patchify(x))
            grids.append((1, x.shape[1] // self.config.patch_size, x.shape[2] // self.config.patch_size))
        return np.concatenate(patches, axis=0), np.asarray(grids, dtype=np.int64)


# --------------------------------------------------------------------------- positions


def rope_index(
    input_ids: Sequence[int] | np.ndarray,
    image_grid_thw: Sequence[Sequence[int]] | np.ndarray,
    image_token_id: int,
    spatial_merge_size: int = 2,
) -> tuple[np.ndarray, int]:
    """M-RoPE positions (3, seq) int64 of one sequence, and the delta for later tokens.

    Text tokens advance all three axes together; each run of image tokens takes the next
    grid and gets (t, row, col) positions offset by the running position, after which the
    running position advances by max(rows, cols) of the merged grid. A token generated at
    cache position k (0-based over the whole sequence) has position k + delta on all axes.
    """
    ids = np.asarray(input_ids).reshape(-1)
    grids = iter(np.asarray(image_grid_thw, dtype=np.int64).reshape(-1, 3).tolist())
    is_image = ids == image_token_id
    chunks = []
    pos = 0
    start = 0
    n = len(ids)
    while start < n:
        end = start
        while end < n and is_image[end] == is_image[start]:
            end += 1
        length = end - start
        if not is_image[start]:
            chunks.append(np.broadcast_to(np.arange(pos, pos + length), (3, length)))
            pos += length
        else:
            try:
                t, h, w = next(grids)
            except StopIteration:
                raise ValueError("more image token runs than image grids") from None
            gh, gw = h // spatial_merge_size, w // spatial_merge_size
            if t * gh * gw != length:
                raise ValueError(f"image run of {length} tokens for grid {(t, h, w)}")
            tt, hh, ww = np.meshgrid(np.arange(t), np.arange(gh), np.arange(gw), indexing="ij")
            chunks.append(np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + pos)
            pos += max(gh, gw)
        start = end
    if not chunks:
        return np.zeros((3, 0), dtype=np.int64), 0
    positions = np.concatenate(chunks, axis=1).astype(np.int64)
    return positions, int(positions.max()) + 1 - n


def decode_positions(cache_position: int, delta: int) -> np.ndarray:
    """(3, 1) positions of the token at `cache_position` during decoding."""
    return np.full((3, 1), cache_position + delta, dtype=np.int64)


def vision_position_ids(
    image_grid_thw: Sequence[Sequence[int]] | np.ndarray, spatial_merge_size: int = 2
) -> np.ndarray:
    """(N, 2) int64 (row, col) of every patch, in the processor's merge-window order."""
    out = []
    for t, h, w in np.asarray(image_grid_thw, dtype=np.int64).reshape(-1, 3).tolist():
        m = spatial_merge_size
        rows, cols = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        rows = rows.reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3).ravel()
        cols = cols.reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3).ravel()
        out.append(np.tile(np.stack([rows, cols], axis=-1), (t, 1)))
    return np.concatenate(out, axis=0).astype(np.int64)


def vision_cu_seqlens(image_grid_thw: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """Cumulative patch counts per frame, (frames + 1,) int32: the vision attention segments."""
    grid = np.asarray(image_grid_thw, dtype=np.int64).reshape(-1, 3)
    lengths = np.repeat(grid[:, 1] * grid[:, 2], grid[:, 0])
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
