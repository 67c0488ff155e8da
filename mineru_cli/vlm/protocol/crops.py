"""The images sent to the model: the step-1 page and the step-2 crops.

Step 2 reads every block that is not skipped: it is cropped from the full-resolution page,
rotated upright, padded and upscaled where needed, and sent with its type's prompt and sampling.
Colour conversion and resampling follow MinerU's, so a crop is the image MinerU would send.
Pro: the page's blocks first go through pro.select_blocks; a table's crop has the images inside
it masked with tokens (table_images), which the crop carries for post-processing; with image
analysis on, an image or chart is read (Image Analysis prompt) unless pro.figures_not_analysed
leaves it out.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from PIL import Image

from .layout import LayoutBlock
from .pro import figures_not_analysed, table_images
from .profiles import FIGURE_TYPES, PROFILE_2509, Profile, SamplingParams
from .table_images import mask_table_images


@dataclass
class Crop:
    index: int  # position of the block in the layout list
    image: Image.Image
    prompt: str
    sampling: SamplingParams
    image_tokens: dict[str, str] = field(default_factory=dict)  # Pro tables: token -> image


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB as MinerU makes it: palette via RGBA, alpha dropped (not composited)."""
    if image.mode == "P":
        image = image.convert("RGBA")
    return image if image.mode == "RGB" else image.convert("RGB")


def fit_crop(image: Image.Image, min_edge: int = 28, max_aspect: float = 50.0) -> Image.Image:
    """Pad with white (centred) to aspect <= max_aspect, then upscale so the short side >= min_edge."""
    w, h = image.size
    if max(w, h) / min(w, h) > max_aspect:
        if w > h:
            new_w, new_h = w, math.ceil(w / max_aspect)
        else:
            new_w, new_h = math.ceil(h / max_aspect), h
        canvas = Image.new(image.mode, (new_w, new_h), (255, 255, 255))
        canvas.paste(image, (int((new_w - w) / 2), int((new_h - h) / 2)))
        image = canvas
    if min(image.size) < min_edge:
        scale = min_edge / min(image.size)
        size = (math.ceil(image.width * scale), math.ceil(image.height * scale))
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image


def layout_image(page: Image.Image, profile: Profile = PROFILE_2509) -> Image.Image:
    """The step-1 input: the page stretched to the profile's fixed size (aspect not kept)."""
    return to_rgb(page).resize(profile.layout_size, Image.Resampling.BICUBIC)


def prepare_crops(
    page: Image.Image,
    blocks: Sequence[LayoutBlock],
    profile: Profile = PROFILE_2509,
    skip_types: Iterable[str] = (),
    seed: int = 0,
) -> list[Crop]:
    """Step-2 inputs for every block that is read (not skipped), in layout order. `seed` draws the
    tokens of the images masked in the page's tables (Pro)."""
    page = to_rgb(page)
    width, height = page.size
    skip = set(profile.skip_types) | {t for t in skip_types if t in profile.block_types}
    held = table_images(blocks, skip) if profile.table_images else {}
    unread = figures_not_analysed(blocks, FIGURE_TYPES) if profile.image_analysis else set()
    rng = random.Random(seed)
    crops = []
    for index, block in enumerate(blocks):
        if block.type in skip or block.absorbed or index in unread:
            continue
        x1, y1, x2, y2 = block.bbox
        # PIL rounds a float box half-to-even, as Python's round() does
        box = (round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height))
        if box[2] - box[0] < 1 or box[3] - box[1] < 1:
            continue
        image = page.crop(box)
        tokens: dict[str, str] = {}
        if index in held:
            image, tokens = mask_table_images(page, block, [blocks[i] for i in held[index]], image, rng)
        elif block.angle in (90, 180, 270):
            image = image.rotate(block.angle, expand=True)
        image = fit_crop(image, profile.min_edge, profile.max_aspect)
        crops.append(Crop(index, image, profile.prompt_for(block.type), profile.sampling_for(block.type), tokens))
    return crops
