"""The numpy image processor and position ids against transformers' Qwen2-VL code."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mineru_cli.vlm.processor import (
    ImageProcessor,
    ImageProcessorConfig,
    resize_bicubic,
    rope_index,
    smart_resize,
    vision_cu_seqlens,
    vision_position_ids,
)

torch = pytest.importorskip("torch")
DATA = Path(__file__).resolve().parents[1] / "data"
pytest.importorskip("transformers")

MAX_PIXELS = 28 * 28 * 2048  # MinerU2.5's preprocessor_config.json
IMAGE_TOKEN = 151655

SIZES = [  # (width, height)
    (1, 1),
    (5, 3),
    (28, 28),
    (27, 29),
    (56, 56),
    (57, 55),
    (100, 30),
    (30, 100),
    (224, 224),
    (1036, 1036),
    (640, 480),
    (480, 640),
    (1000, 21),
    (21, 1000),
    (3000, 20),
    (20, 3000),
    (1240, 1754),
    (1754, 1240),
    (2480, 3508),
    (3500, 2475),
    (4000, 4000),
    (1401, 99),
    (333, 777),
    (2048, 28),
    (5600, 29),
]


def _image(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    # smooth structure plus noise: bicubic overshoot and clipping both get exercised
    y, x = np.mgrid[0:height, 0:width]
    base = (127 + 120 * np.sin(x / 7.0)[..., None] * np.cos(y / 11.0)[..., None]) * np.ones(3)
    noise = rng.integers(-40, 40, size=(height, width, 3))
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8), "RGB")


def _torch_resize(image: Image.Image, width: int, height: int) -> Image.Image:
    """The resize of transformers' torchvision backend (the one MinerU runs: transformers 5 picks
    it when torchvision is installed): torchvision hands a uint8 image on the CPU to torch's own
    uint8 antialiased bicubic. torchvision itself does not import beside this torch build."""
    if image.size == (width, height):
        return image
    x = torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1)[None].contiguous()
    x = torch.nn.functional.interpolate(x, size=[height, width], mode="bicubic", antialias=True, align_corners=False)
    return Image.fromarray(x[0].permute(1, 2, 0).numpy(), "RGB")


@pytest.fixture(scope="module")
def reference():
    """transformers' Qwen2-VL image processor with torch's resize: its own smart_resize picks
    the size, its PIL backend (resize off) does the rest."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as ref_smart_resize

    rest = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=MAX_PIXELS, do_resize=False)

    def run(images, return_tensors="np"):
        resized = []
        for image in images:
            rgb = image if image.mode == "RGB" else _composited(image)
            height, width = ref_smart_resize(rgb.height, rgb.width, 28, 56 * 56, MAX_PIXELS)
            resized.append(_torch_resize(rgb, width, height))
        return rest(images=resized, return_tensors=return_tensors)

    return run


def _composited(image: Image.Image) -> Image.Image:
    from transformers.image_transforms import convert_to_rgb

    return convert_to_rgb(image)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_matches_transformers(reference, size):
    image = _image(*size, seed=size[0] * 7919 + size[1])
    ours = ImageProcessor(ImageProcessorConfig(max_pixels=MAX_PIXELS))
    pixel_values, grid = ours(image)
    ref = reference(images=[image], return_tensors="np")
    np.testing.assert_array_equal(grid, np.asarray(ref["image_grid_thw"]))
    assert pixel_values.shape == ref["pixel_values"].shape
    assert pixel_values.dtype == np.float32
    assert np.abs(pixel_values - ref["pixel_values"]).max() <= 1e-5
    assert ours.num_image_tokens(*size) == int(np.prod(grid[0])) // 4


def test_real_text_crop_resized_as_mineru_resizes_it(reference):
    # a paragraph cut from a 200 DPI page; smart_resize makes it wider and less tall, where PIL's
    # bicubic (height first) moves some values by over ten levels from torch's (width first)
    crop = Image.open(DATA / "vlm_crop_text_ragged2e_p2.png").convert("RGB")
    ours = ImageProcessor(ImageProcessorConfig(max_pixels=MAX_PIXELS))
    assert ours.target_size(*crop.size) == (476, 168)
    pixel_values, grid = ours(crop)
    ref = reference(images=[crop], return_tensors="np")
    np.testing.assert_array_equal(grid, np.asarray(ref["image_grid_thw"]))
    assert np.abs(pixel_values - ref["pixel_values"]).max() <= 1e-5


def test_resize_matches_torch_on_every_kind_of_scale():
    rng = np.random.default_rng(7)
    for width, height, new_width, new_height in [
        (300, 200, 308, 196),  # wider, less tall
        (300, 200, 296, 204),  # narrower, taller
        (300, 200, 600, 400),  # both grown
        (2480, 3508, 1064, 1512),  # both shrunk (a 300 DPI page over max_pixels)
        (80, 4000, 84, 4004),  # a padded 1 x 4000 crop
        (5600, 29, 5600, 28),  # one side only
    ]:
        image = Image.fromarray(rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8), "RGB")
        expected = np.asarray(_torch_resize(image, new_width, new_height))
        np.testing.assert_array_equal(resize_bicubic(image, (new_width, new_height)), expected)


def test_several_images_concatenate_in_order(reference):
    images = [_image(300, 90, 1), _image(64, 640, 2), _image(1036, 1036, 3)]
    ours = ImageProcessor(ImageProcessorConfig(max_pixels=MAX_PIXELS))
    pixel_values, grid = ours(images)
    ref = reference(images=images, return_tensors="np")
    np.testing.assert_array_equal(grid, np.asarray(ref["image_grid_thw"]))
    assert np.abs(pixel_values - ref["pixel_values"]).max() <= 1e-5


def test_rgba_is_composited_on_white_like_transformers(reference):
    rgba = np.zeros((60, 90, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = np.linspace(0, 255, 90).astype(np.uint8)
    image = Image.fromarray(rgba, "RGBA")
    pixel_values, _ = ImageProcessor(ImageProcessorConfig(max_pixels=MAX_PIXELS))(image)
    ref = reference(images=[image], return_tensors="np")
    assert np.abs(pixel_values - ref["pixel_values"]).max() <= 1e-5


def test_layout_image_is_1369_tokens():
    processor = ImageProcessor(ImageProcessorConfig(max_pixels=MAX_PIXELS))
    assert processor.grid_thw(1036, 1036) == (1, 74, 74)
    assert processor.num_image_tokens(1036, 1036) == 1369


def test_smart_resize_matches_transformers():
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as ref

    rng = np.random.default_rng(0)
    for _ in range(2000):
        h, w = (int(v) for v in rng.integers(1, 6000, size=2))
        if max(h, w) / min(h, w) > 200:
            continue
        assert smart_resize(h, w, 28, 3136, MAX_PIXELS) == ref(h, w, 28, 3136, MAX_PIXELS)


def test_config_from_preprocessor_json(tmp_path):
    cfg = tmp_path / "preprocessor_config.json"
    cfg.write_text(
        '{"min_pixels": 3136, "max_pixels": 1605632, "patch_size": 14,'
        ' "temporal_patch_size": 2, "merge_size": 2,'
        ' "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}'
    )
    c = ImageProcessorConfig.from_file(cfg)
    assert (c.min_pixels, c.max_pixels, c.image_mean) == (3136, 1605632, (0.5, 0.5, 0.5))
    c = ImageProcessorConfig.from_dict({"size": {"shortest_edge": 100, "longest_edge": 2000}})
    assert (c.min_pixels, c.max_pixels) == (100, 2000)


# --------------------------------------------------------------------------- positions


def _reference_rope_index(input_ids, grids, attention_mask=None):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=2)),
        get_vision_position_ids=lambda *a, **k: Qwen2VLModel.get_vision_position_ids(None, *a, **k),
    )
    ids = torch.tensor([input_ids])
    mm = (ids == IMAGE_TOKEN).int()
    pos, delta = Qwen2VLModel.get_rope_index(fake, ids, mm, image_grid_thw=torch.tensor(grids))
    return pos[:, 0].numpy(), int(delta[0, 0])


def _sequence(grids, rng):
    """system text, then per image: vision_start, pads, vision_end, some text."""
    ids = list(rng.integers(0, 151000, size=int(rng.integers(1, 30))))
    for t, h, w in grids:
        ids += [151652] + [IMAGE_TOKEN] * (t * h * w // 4) + [151653]
        ids += list(rng.integers(0, 151000, size=int(rng.integers(0, 12))))
    return [int(v) for v in ids]


GRID_SETS = [
    [(1, 74, 74)],
    [(1, 2, 2)],
    [(1, 4, 148)],
    [(1, 148, 4)],
    [(1, 10, 36)],
    [(1, 10, 36), (1, 74, 74)],
    [(1, 2, 8), (1, 30, 4)],
    [(2, 6, 4)],
    [(1, 4, 4), (2, 2, 6)],
]


@pytest.mark.parametrize("grids", GRID_SETS, ids=[str(g) for g in GRID_SETS])
def test_rope_index_matches_transformers(grids):
    rng = np.random.default_rng(len(str(grids)))
    ids = _sequence(grids, rng)
    ours, delta = rope_index(ids, grids, IMAGE_TOKEN)
    ref, ref_delta = _reference_rope_index(ids, grids)
    np.testing.assert_array_equal(ours, ref)
    assert ours.dtype == np.int64 and delta == ref_delta


def test_rope_index_image_first_and_text_only():
    ids = [IMAGE_TOKEN] * 4 + [7, 8]
    ours, delta = rope_index(ids, [(1, 4, 4)], IMAGE_TOKEN)
    ref, ref_delta = _reference_rope_index(ids, [(1, 4, 4)])
    np.testing.assert_array_equal(ours, ref)
    assert delta == ref_delta
    pos, delta = rope_index([1, 2, 3], np.zeros((0, 3)), IMAGE_TOKEN)
    np.testing.assert_array_equal(pos, np.tile(np.arange(3), (3, 1)))
    assert delta == 0


def test_rope_index_rejects_wrong_counts():
    with pytest.raises(ValueError):
        rope_index([1] + [IMAGE_TOKEN] * 5 + [2], [(1, 4, 4)], IMAGE_TOKEN)
    with pytest.raises(ValueError):
        rope_index([1] + [IMAGE_TOKEN] * 4 + [2], [], IMAGE_TOKEN)


@pytest.mark.parametrize("grids", GRID_SETS, ids=[str(g) for g in GRID_SETS])
def test_vision_positions_match_transformers(grids):
    from transformers.vision_utils import get_vision_cu_seqlens, get_vision_position_ids

    g = torch.tensor(grids)
    np.testing.assert_array_equal(vision_position_ids(grids, 2), get_vision_position_ids(g, 2).numpy())
    np.testing.assert_array_equal(vision_cu_seqlens(grids), get_vision_cu_seqlens(g).numpy())
