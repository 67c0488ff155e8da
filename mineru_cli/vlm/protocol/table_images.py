"""Images inside a table (Pro): masked in the table's crop and put back in its HTML.

The Pro client covers each image a table holds (pro.table_images) with a box of the colour
around it and writes a token such as `[K7XA]` on it; the model reads the token as cell text,
and the token in the answer is replaced by the image, as `<img src="data:image/jpeg;base64,..."/>`.
MinerU draws the tokens from the process's random generator; ours come from a generator seeded
per page (`seed`), so a page gives the same crop every run. The font is MinerU's: the first of
its candidate files that exists, else Pillow's own.
"""

from __future__ import annotations

import base64
import random
import re
from functools import lru_cache
from io import BytesIO
from typing import Mapping, Sequence

from PIL import Image, ImageDraw, ImageFont

from .layout import LayoutBlock

FONT_CANDIDATES = (
    "C:/Windows/Fonts/arial.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
)
TOKEN_CHARS = "ACDGHKTWXYZ" + "2345678"  # no look-alikes (B/8, O/0, I/1, S/5, ...)
TOKEN_LENGTH = 4
FILL_RATIO = 0.7  # the token's share of the box, at most, in width and height

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@lru_cache(maxsize=None)
def font_file() -> str | None:
    """The font MinerU would use on this machine (None: Pillow's own)."""
    for path in FONT_CANDIDATES:
        try:
            ImageFont.truetype(path, size=10)
        except OSError:
            continue
        return path
    return None


@lru_cache(maxsize=512)
def _font(size: int) -> Font:
    path = font_file()
    if path is not None:
        return ImageFont.truetype(path, size=size)
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType: one fixed size
        return ImageFont.load_default()


def _text_size(font: Font, text: str) -> tuple[float, float]:
    left, top, right, bottom = font.getbbox(text)
    return right - left, bottom - top


def _fitting_font(text: str, box_w: int, box_h: int, max_size: int) -> tuple[Font, float, float]:
    """The largest size (binary search over 4..max_size, 30 steps at most) whose text fits
    FILL_RATIO of the box; the smallest size when none fits."""
    low, high = 4, max_size
    best, best_w, best_h = _font(low), 0.0, 0.0
    for _ in range(30):
        if low > high:
            break
        mid = (low + high) // 2
        font = _font(mid)
        w, h = _text_size(font, text)
        if w <= box_w * FILL_RATIO and h <= box_h * FILL_RATIO:
            best, best_w, best_h = font, w, h
            low = mid + 1
        else:
            high = mid - 1
    return best, best_w, best_h


def _rotate(image: Image.Image, angle: int | None) -> Image.Image:
    return image.rotate(angle, expand=True) if angle in (90, 180, 270) else image


def _rotate_box(box: tuple[int, int, int, int], size: tuple[int, int], angle: int | None) -> tuple[int, int, int, int]:
    """A box in the unrotated crop, in the crop rotated by `angle` (counter-clockwise, expand)."""
    x1, y1, x2, y2 = box
    width, height = size
    if angle == 90:
        return (y1, width - x2, y2, width - x1)
    if angle == 180:
        return (width - x2, height - y2, width - x1, height - y1)
    if angle == 270:
        return (height - y2, x1, height - y1, x2)
    return box


def _surrounding_colour(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[int, int, int]:
    """The mean of 8 pixels 2 px outside the box (corners and edge middles), clamped to the image."""
    left, top, right, bottom = box
    width, height = image.size
    mid_x, mid_y = (left + right) // 2, (top + bottom) // 2
    points = [
        (left - 2, top - 2),
        (mid_x, top - 2),
        (right + 2, top - 2),
        (right + 2, mid_y),
        (right + 2, bottom + 2),
        (mid_x, bottom + 2),
        (left - 2, bottom + 2),
        (left - 2, mid_y),
    ]
    pixels = []
    for x, y in points:
        pixel = image.getpixel((max(0, min(int(x), width - 1)), max(0, min(int(y), height - 1))))
        pixels.append((pixel, pixel, pixel) if isinstance(pixel, int) else tuple(pixel[:3]))  # type: ignore[index]
    return (
        sum(p[0] for p in pixels) // len(pixels),
        sum(p[1] for p in pixels) // len(pixels),
        sum(p[2] for p in pixels) // len(pixels),
    )


def _jpeg_data_uri(image: Image.Image) -> str:
    with BytesIO() as buffer:
        image.save(buffer, format="JPEG")
        return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def mask_table_images(
    page: Image.Image, table: LayoutBlock, images: Sequence[LayoutBlock], crop: Image.Image, rng: random.Random
) -> tuple[Image.Image, dict[str, str]]:
    """The table's crop, turned upright, with each image covered and labelled by a token; and the
    tokens' images as JPEG data URIs. `crop` is the table cut from `page` (not yet turned)."""
    width, height = page.size
    # MinerU places the boxes from the table's corner truncated, not rounded as the crop is
    left, top = int(table.bbox[0] * width), int(table.bbox[1] * height)
    crop_size = crop.size
    masked = _rotate(crop.copy(), table.angle)
    draw = ImageDraw.Draw(masked)
    tokens: dict[str, str] = {}
    fonts: dict[tuple[int, int], tuple[Font, float, float]] = {}
    for image in images:
        x1, y1, x2, y2 = (image.bbox[0] * width, image.bbox[1] * height, image.bbox[2] * width, image.bbox[3] * height)
        rel = (
            int(max(0, x1 - left)),
            int(max(0, y1 - top)),
            int(min(crop_size[0], x2 - left)),
            int(min(crop_size[1], y2 - top)),
        )
        if rel[2] <= rel[0] or rel[3] <= rel[1]:
            continue
        picture = page.crop((int(x1), int(y1), int(x2), int(y2)))
        if picture.width < 1 or picture.height < 1:
            continue
        if len(tokens) >= len(TOKEN_CHARS) ** TOKEN_LENGTH:
            raise RuntimeError("more images in one table than table image tokens")
        while True:
            token = "[" + "".join(rng.choices(TOKEN_CHARS, k=TOKEN_LENGTH)) + "]"
            if token not in tokens:
                break
        tokens[token] = _jpeg_data_uri(_rotate(picture, table.angle))

        box = _rotate_box(rel, crop_size, table.angle)
        colour = _surrounding_colour(masked, box)
        draw.rectangle(box, fill=colour, outline=None)
        box_w, box_h = box[2] - box[0], box[3] - box[1]
        # fonts are kept per (height bucket, token length), as MinerU keeps them
        key = (box_h // 16, len(token))
        cached = fonts.get(key)
        if cached is not None and cached[1] <= box_w and cached[2] <= box_h:
            font, text_w, text_h = cached
        else:
            font, text_w, text_h = _fitting_font(token, box_w, box_h, max(100, int(box_h * 0.7)))
            fonts[key] = (font, text_w, text_h)
        if text_w <= box_w and text_h <= box_h:
            luminance = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
            ink = (255, 255, 255) if luminance < 128 else (0, 0, 0)
            position = (box[0] + box_w / 2 - text_w / 2, box[1] + box_h / 2 - text_h / 2)
            draw.text(position, token, fill=ink, font=font)
    return masked, tokens


def put_back_images(content: str, tokens: Mapping[str, str]) -> str:
    """Each token in the table's answer (spaces inside the brackets allowed) -> its <img>."""
    for token, uri in tokens.items():
        content = re.sub(r"\[\s*" + re.escape(token[1:-1]) + r"\s*\]", f'<img src="{uri}"/>', content)
    return content
