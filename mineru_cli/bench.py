"""`mineru bench`: the speed of the VLM runtimes on a full-size random-weight MinerU2.5 model.

Cost does not depend on weight values, so a model of MinerU2.5's shape with random weights
measures speed honestly; token counts are fixed (below) instead of generated. Variants are run
alternately, `--repeat` times, and the medians are reported with their ratio to the first
variant (the torch fp32 reference), because this machine's absolute times drift.

A two-step page is modelled as MinerU runs it: the layout step (a 1036x1036 image = 1369 image
tokens, ~1400-token prompt, LAYOUT_TOKENS generated) and then the content step over CROPS
(crops decode together in batches of 8 with per-sequence stopping, so a batch costs as many
steps as its longest crop).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

# MinerU2.5-2509-1.2B's shapes (config.json of the released model, as DESIGN.md lists them).
MINERU25_TEXT = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                     rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645,
                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                      "mrope_section": [8, 12, 12]})
MINERU25_VISION = dict(depth=32, embed_dim=1280, hidden_size=896, num_heads=16, mlp_ratio=4,
                       patch_size=14, temporal_patch_size=2, spatial_merge_size=2, in_channels=3)
IMAGE_TOKEN_ID = 151655

LAYOUT_SIZE = (1036, 1036)
LAYOUT_TOKENS = 360                 # ~18 blocks x 20 tokens of layout output
# A typical page's crops to read: (width, height) in pixels at 200 DPI, tokens generated.
CROPS = [((1400, 60), 30)] * 4 + [((1400, 300), 150)] * 6 + [((1400, 700), 400)] * 2 + [((700, 120), 40)] * 2
CROP_BATCH = 8


def build_model(seed: int = 0):
    """A full-size Qwen2VLForConditionalGeneration with random weights (fp32, ~4.6 GB)."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(seed)
    config = Qwen2VLConfig(text_config=MINERU25_TEXT, vision_config=MINERU25_VISION,
                           image_token_id=IMAGE_TOKEN_ID, video_token_id=151656,
                           vision_start_token_id=151652, vision_end_token_id=151653,
                           tie_word_embeddings=True, architectures=["Qwen2VLForConditionalGeneration"])
    return Qwen2VLForConditionalGeneration(config).float().eval()


def synthetic_input(size: tuple[int, int], prompt_tokens: int = 30, seed: int = 0):
    """A VlmInput for an image of `size` with random pixels and text ids (shape is what matters)."""
    from .vlm.processor import ImageProcessor, rope_index
    from .vlm.tokenizer import VlmInput
    from PIL import Image

    rng = np.random.default_rng(seed)
    image = Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))
    proc = ImageProcessor()
    pixels, grid = proc(image)
    n_image = int(np.prod(grid[0])) // 4
    text = rng.integers(0, 150000, prompt_tokens)
    ids = np.concatenate([text[:prompt_tokens // 2], np.full(n_image, IMAGE_TOKEN_ID), text[prompt_tokens // 2:]])
    ids = ids.astype(np.int64)
    positions, delta = rope_index(ids, grid, IMAGE_TOKEN_ID, 2)
    return VlmInput(ids, pixels.astype(np.float32), grid, positions, delta)


@dataclass
class Figures:
    vision_layout_s: list[float] = field(default_factory=list)
    prefill_layout_s: list[float] = field(default_factory=list)
    decode_b1_ms: list[float] = field(default_factory=list)
    decode_b8_ms: list[float] = field(default_factory=list)
    crops_prefill_s: list[float] = field(default_factory=list)   # vision + prefill of every crop

    def median(self, name: str) -> float:
        return statistics.median(getattr(self, name))

    def page_s(self) -> float:
        """Seconds for the modelled two-step page (see the module docstring)."""
        layout = self.median("prefill_layout_s") + LAYOUT_TOKENS * self.median("decode_b1_ms") / 1000
        tokens = sorted((t for _, t in CROPS), reverse=True)
        steps = sum(max(tokens[i:i + CROP_BATCH]) for i in range(0, len(tokens), CROP_BATCH))
        crops = self.median("crops_prefill_s") + steps * self.median("decode_b8_ms") / 1000
        return layout + crops   # prefill includes the layout image's vision encoding


def measure_once(runtime, figures: Figures, decode_steps: int = 16) -> None:
    """One round of every measurement on a runtime implementing generate.Runtime + image_embeds."""
    layout = synthetic_input(LAYOUT_SIZE)
    t = time.perf_counter()
    runtime.image_embeds([layout])
    figures.vision_layout_s.append(time.perf_counter() - t)

    t = time.perf_counter()
    logits = runtime.prefill([layout])
    figures.prefill_layout_s.append(time.perf_counter() - t)
    figures.decode_b1_ms.append(_decode_ms(runtime, logits, decode_steps))

    crops = [synthetic_input(size, seed=i) for i, (size, _) in enumerate(CROPS)]
    t = time.perf_counter()
    batches = [crops[i:i + CROP_BATCH] for i in range(0, len(crops), CROP_BATCH)]
    first = runtime.prefill(batches[0])
    for batch in batches[1:]:
        runtime.prefill(batch)
    figures.crops_prefill_s.append(time.perf_counter() - t)
    runtime.prefill(batches[0])          # decode at batch 8 continues the first batch
    figures.decode_b8_ms.append(_decode_ms(runtime, first, decode_steps))
    gc.collect()


def _decode_ms(runtime, logits: np.ndarray, steps: int) -> float:
    ids = logits.argmax(-1)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        ids = runtime.step(ids).argmax(-1)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def run_bench(variants: dict, repeat: int = 2, say=print) -> dict[str, Figures]:
    """variants: name -> runtime. Rounds alternate between variants (ABAB...), `repeat` rounds."""
    figures = {name: Figures() for name in variants}
    warm = synthetic_input((280, 56))
    for runtime in variants.values():   # first calls allocate and pick kernels: not measured
        runtime.step(runtime.prefill([warm]).argmax(-1))
    for r in range(repeat):
        for name, runtime in variants.items():
            say(f"round {r + 1}/{repeat}: {name}")
            measure_once(runtime, figures[name])
    return figures


def report(figures: dict[str, Figures]) -> list[tuple]:
    """Rows: (variant, vision 1036 s, LM prefill s, decode b1 ms, decode b8 ms, crops s, page s, x ref)."""
    ref = next(iter(figures.values())).page_s()
    rows = []
    for name, f in figures.items():
        vision = f.median("vision_layout_s")
        rows.append((name, vision, f.median("prefill_layout_s") - vision, f.median("decode_b1_ms"),
                     f.median("decode_b8_ms"), f.median("crops_prefill_s"), f.page_s(), ref / f.page_s()))
    return rows


VARIANTS = ("torch",)


def build_variants(names: list[str], threads: int, say=print) -> dict:
    """name -> runtime over one full-size random model (built once, shared by the variants)."""
    from .errors import SetupError

    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SetupError(f"unknown bench variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    try:
        import torch
    except ImportError:
        raise SetupError("mineru bench builds the model with torch: pip install 'mineru-cli[torch]'") from None
    from .vlm.runtime_torch import TorchRuntime

    torch.set_num_threads(threads)
    say(f"building a full-size random-weight MinerU2.5 model (fp32, {threads} threads) ...")
    model = build_model()
    return {"torch": TorchRuntime.from_model(model, IMAGE_TOKEN_ID)}
