"""What the model is sent as text: the Qwen2 chat template, the system prompt, the task prompts.

A request is one image and one task prompt. The chat text holds a single <|image_pad|> that is
expanded to the image's token count before tokenising.
"""

from __future__ import annotations

from typing import Sequence

SYSTEM_PROMPT = "You are a helpful assistant."

LAYOUT_PROMPT = "\nLayout Detection:"
TEXT_PROMPT = "\nText Recognition:"
TABLE_PROMPT = "\nTable Recognition:"
FORMULA_PROMPT = "\nFormula Recognition:"
IMAGE_ANALYSIS_PROMPT = "\nImage Analysis:"  # Pro models only

IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
IMAGE_PAD = "<|image_pad|>"


def chat_prompt(prompt: str, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The Qwen2 chat text for one image followed by `prompt`, ending with the assistant turn.

    The single <|image_pad|> must be expanded to the image's token count before tokenising
    (see `expand_image_pads`).
    """
    parts = []
    if system_prompt:
        parts.append(f"<|im_start|>system\n{system_prompt}<|im_end|>\n")
    parts.append(f"<|im_start|>user\n{IMAGE_PLACEHOLDER}{prompt}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def expand_image_pads(text: str, token_counts: Sequence[int]) -> str:
    """Replace the n-th <|image_pad|> by token_counts[n] copies (t*h*w / merge_size**2)."""
    pieces = text.split(IMAGE_PAD)
    if len(pieces) - 1 != len(token_counts):
        raise ValueError(f"{len(pieces) - 1} image placeholders for {len(token_counts)} images")
    out = [pieces[0]]
    for count, piece in zip(token_counts, pieces[1:]):
        out.append(IMAGE_PAD * int(count))
        out.append(piece)
    return "".join(out)
