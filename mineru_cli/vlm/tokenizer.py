"""The model's tokenizer through `tokenizers` (no torch, no transformers) and the chat inputs.

Every special token id is read from the model's tokenizer.json; none is hard-coded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from ..core.errors import SetupError
from .processor import ImageProcessor, rope_index
from .protocol.chat import IMAGE_PAD, SYSTEM_PROMPT, chat_prompt, expand_image_pads

IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
STOP_TOKENS = (IM_END, END_OF_TEXT)


class ChatTokenizer:
    """Chat prompt -> token ids (with <|image_pad|> expanded) and ids -> text."""

    def __init__(self, tokenizer):
        self._tok = tokenizer
        self.image_pad_id = self.token_id(IMAGE_PAD)
        self.stop_ids = tuple(self.token_id(t) for t in STOP_TOKENS)

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "ChatTokenizer":
        from tokenizers import Tokenizer

        path = Path(model_dir) / "tokenizer.json"
        try:
            return cls(Tokenizer.from_file(str(path)))
        except SetupError:
            raise
        except Exception as exc:
            raise SetupError(f"cannot load the tokenizer {path}: {exc}") from exc

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str) -> int:
        tid = self._tok.token_to_id(token)
        if tid is None:
            raise SetupError(f"the model's tokenizer has no {token} token")
        return int(tid)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def chat_ids(self, prompt: str, image_tokens: int, system_prompt: str = SYSTEM_PROMPT) -> list[int]:
        """The ids of one image (`image_tokens` <|image_pad|> tokens) followed by `prompt`."""
        ids = self.encode(expand_image_pads(chat_prompt(prompt, system_prompt), [image_tokens]))
        found = sum(1 for t in ids if t == self.image_pad_id)
        if found != image_tokens:  # a tokenizer that does not keep <|image_pad|> whole
            raise SetupError(f"tokenizer turned {image_tokens} image tokens into {found}")
        return ids

    def decode(self, ids) -> str:
        """Text of `ids`, keeping special tokens (the layout answer is made of them)."""
        return self._tok.decode([int(t) for t in ids], skip_special_tokens=False)


@dataclass
class VlmInput:
    """One request as every runtime takes it."""

    input_ids: np.ndarray  # (L,) int64, image pads expanded
    pixel_values: np.ndarray  # (N, patch_dim) float32
    image_grid_thw: np.ndarray  # (1, 3) int64
    position_ids: np.ndarray  # (3, L) int64 M-RoPE positions
    rope_delta: int  # a token at cache position k has position k + rope_delta

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def left_pad(inputs: Sequence[VlmInput]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch left-padded to its longest prompt: ids (B, L), attention mask (B, L) and M-RoPE
    positions (3, B, L); padding has id 0, mask 0 and position 0, so every row computes what it
    would alone. Used by the torch runtime (the ONNX runtime needs no padding)."""
    batch, length = len(inputs), max(len(x) for x in inputs)
    ids = np.zeros((batch, length), dtype=np.int64)
    mask = np.zeros((batch, length), dtype=np.int64)
    positions = np.zeros((3, batch, length), dtype=np.int64)
    for row, x in enumerate(inputs):
        pad = length - len(x)
        ids[row, pad:] = x.input_ids
        mask[row, pad:] = 1
        positions[:, row, pad:] = x.position_ids
    return ids, mask, positions


def build_input(
    tokenizer: ChatTokenizer,
    processor: ImageProcessor,
    image: Image.Image,
    prompt: str,
    system_prompt: str = SYSTEM_PROMPT,
) -> VlmInput:
    pixel_values, grid = processor(image)
    merge = processor.config.merge_size
    n_tokens = int(np.prod(grid[0])) // (merge * merge)
    ids = np.asarray(tokenizer.chat_ids(prompt, n_tokens, system_prompt), dtype=np.int64)
    positions, delta = rope_index(ids, grid, tokenizer.image_pad_id, merge)
    return VlmInput(ids, pixel_values.astype(np.float32, copy=False), grid, positions, delta)
