"""The PyTorch reference runtime: transformers' Qwen2VLForConditionalGeneration, fp32, CPU.

It implements generate.Runtime. Inputs come from our own numpy pieces: pixel values and grids
from processor.ImageProcessor, vision (row, col) ids and attention segments from
processor.vision_position_ids / vision_cu_seqlens, and the language model's M-RoPE positions
from processor.rope_index; transformers only supplies the layers.

Batching: a batch is left-padded to its longest prompt; padding is masked out of attention and
its position ids are 0, so every row computes what it would alone (up to float rounding). The
KV cache is transformers' DynamicCache; finished rows are dropped from it (retain).

Import this module only when the torch runtime is wanted: it imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import torch

from ..core.errors import SetupError
from .model_identity import read_json, tie_flag
from .processor import vision_cu_seqlens, vision_position_ids
from .tokenizer import VlmInput, left_pad

if TYPE_CHECKING:
    from transformers import DynamicCache


def check_loaded(model, info: dict, config: dict, model_dir: str | Path) -> None:
    """Refuse a model transformers loaded incompletely: a weight the checkpoint lacks (left
    randomly initialised), one it has that the model does not use, a shape mismatch, or an
    output layer not tied to the input embeddings when config.json says tied (root flag, else
    text_config's: a transformers release that does not carry Pro's nested flag up would leave
    a random lm_head, and the ONNX export's parity check compares against that same model)."""
    problems = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        keys = sorted(str(k) for k in (info.get(kind) or ()))
        if keys:
            shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
            problems.append(f"{kind.replace('_', ' ')}: {shown}")
    if info.get("error_msgs"):
        problems.append("; ".join(str(m) for m in info["error_msgs"]))
    if tie_flag(config):
        out, embed = model.get_output_embeddings().weight, model.get_input_embeddings().weight
        if out.data_ptr() != embed.data_ptr() and not torch.equal(out, embed):
            import transformers

            problems.append(
                "config.json ties the output layer to the input embeddings, but the loaded lm_head is not tied "
                f"(transformers {transformers.__version__}; one that does not read text_config's tie flag "
                "leaves it random: install the version pyproject.toml pins)"
            )
    if problems:
        raise SetupError(
            f"the model in {model_dir} did not load whole ({'; '.join(problems)}): a damaged or foreign checkpoint"
        )


def load_model(model_dir: str | Path):
    """The model in fp32 from its safetensors, never remote code, checked whole (check_loaded)."""
    from transformers import Qwen2VLForConditionalGeneration
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bar in a batch job's output
    try:
        loaded: Any = Qwen2VLForConditionalGeneration.from_pretrained(
            str(model_dir),
            dtype=torch.float32,
            local_files_only=True,
            attn_implementation="sdpa",
            use_safetensors=True,
            trust_remote_code=False,
            output_loading_info=True,
        )
        model, info = loaded  # (model, {missing_keys, unexpected_keys, mismatched_keys, error_msgs})
    except Exception as exc:
        raise SetupError(f"cannot load the model from {model_dir}: {exc}") from exc
    check_loaded(model, info, read_json(Path(model_dir) / "config.json"), model_dir)
    return model.eval()


class TorchRuntime:
    name = "torch"

    def __init__(self, model_dir: str | Path, threads: int = 1, image_token_id: int | None = None):
        torch.set_num_threads(max(1, int(threads)))
        self._setup(load_model(model_dir), image_token_id)

    @classmethod
    def from_model(cls, model, image_token_id: int | None = None) -> "TorchRuntime":
        """A runtime over an already loaded model (e.g. one being trained in a test)."""
        self = cls.__new__(cls)
        self._setup(model, image_token_id)
        return self

    def _setup(self, model, image_token_id: int | None) -> None:
        from transformers import DynamicCache

        self._cache_cls = DynamicCache
        self.model = model.eval()
        config = self.model.config
        if image_token_id is not None and int(config.image_token_id) != int(image_token_id):
            raise SetupError(
                f"config.json image_token_id {config.image_token_id} is not the "
                f"tokenizer's <|image_pad|> id {image_token_id}"
            )
        self.merge_size = int(config.vision_config.spatial_merge_size)
        self.vocab_size = int(config.text_config.vocab_size)
        self._visual = self.model.model.visual
        self._embed = self.model.get_input_embeddings()
        self.image_token_id = int(config.image_token_id)
        # the batch prefill started (None before the first prefill): its KV cache, attention
        # mask (B, tokens) and the M-RoPE position of each row's next token (B,)
        self._cache: DynamicCache | None = None
        self._mask: torch.Tensor | None = None
        self._next_pos: torch.Tensor | None = None

    def _decoding(self) -> tuple[DynamicCache, torch.Tensor, torch.Tensor]:
        """The cache, mask and next positions of the batch being decoded."""
        if self._cache is None or self._mask is None or self._next_pos is None:
            raise RuntimeError("step or retain before prefill")
        return self._cache, self._mask, self._next_pos

    # ------------------------------------------------------------------ vision

    def image_embeds(self, inputs: Sequence[VlmInput]) -> list[torch.Tensor]:
        """Merged image features per input, (tokens_i, hidden), from one vision call."""
        grid = np.concatenate([x.image_grid_thw for x in inputs], axis=0)
        pixels = torch.from_numpy(np.concatenate([x.pixel_values for x in inputs], axis=0))
        out = self._visual(
            pixels,
            grid_thw=torch.from_numpy(grid),
            position_ids=torch.from_numpy(vision_position_ids(grid, self.merge_size)),
            cu_seqlens=torch.from_numpy(vision_cu_seqlens(grid)),
        )
        features = out.pooler_output if hasattr(out, "pooler_output") else out
        sizes = (grid.prod(axis=1) // (self.merge_size**2)).tolist()
        return list(torch.split(features, sizes))

    # ------------------------------------------------------------------ Runtime protocol

    @torch.inference_mode()
    def prefill(self, inputs: Sequence[VlmInput]) -> np.ndarray:
        ids, mask, positions = (torch.from_numpy(a) for a in left_pad(inputs))
        embeds = self._embed(ids)
        for row, feats in enumerate(self.image_embeds(inputs)):
            where = (ids[row] == self.image_token_id) & (mask[row] == 1)
            if int(where.sum()) != feats.shape[0]:
                raise ValueError(f"{int(where.sum())} image tokens for {feats.shape[0]} image features")
            embeds[row, where] = feats.to(embeds.dtype)
        self._cache = self._cache_cls(config=self.model.config.text_config)
        out = self.model(
            inputs_embeds=embeds,
            attention_mask=mask,
            position_ids=positions,
            cache=self._cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self._mask = mask
        self._next_pos = torch.tensor([len(x) + x.rope_delta for x in inputs], dtype=torch.long)
        return out.logits[:, -1, :].float().numpy()

    @torch.inference_mode()
    def step(self, token_ids: np.ndarray) -> np.ndarray:
        cache, mask, next_pos = self._decoding()
        ids = torch.from_numpy(np.asarray(token_ids, dtype=np.int64)).view(-1, 1)
        self._mask = torch.cat([mask, torch.ones((ids.shape[0], 1), dtype=torch.long)], dim=1)
        positions = next_pos.view(1, -1, 1).expand(3, -1, 1)
        out = self.model(input_ids=ids, attention_mask=self._mask, position_ids=positions, cache=cache, use_cache=True)
        self._next_pos = next_pos + 1
        return out.logits[:, -1, :].float().numpy()

    def retain(self, rows: Sequence[int]) -> None:
        cache, mask, next_pos = self._decoding()
        index = torch.as_tensor(list(rows), dtype=torch.long)
        cache.batch_select_indices(index)
        self._mask = mask[index]
        self._next_pos = next_pos[index]
