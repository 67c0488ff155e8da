"""Chat ids through `tokenizers` against the model folder's chat template and transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_fixtures import tiny_case, tiny_vlm  # noqa: F401  (fixtures)

from mineru_cli.vlm.processor import ImageProcessor, rope_index
from mineru_cli.vlm.protocol.chat import (
    FORMULA_PROMPT,
    LAYOUT_PROMPT,
    SYSTEM_PROMPT,
    TABLE_PROMPT,
    TEXT_PROMPT,
    chat_prompt,
    expand_image_pads,
)
from mineru_cli.vlm.tokenizer import ChatTokenizer, build_input

REAL_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|image_pad|>": 151655,
    "<|box_start|>": 151648,
    "<|ref_start|>": 151657,
}


@pytest.fixture(scope="module")
def tok(tiny_vlm):
    return ChatTokenizer.from_dir(tiny_vlm / "model")


def test_special_ids_come_from_the_tokenizer(tiny_vlm, tok):
    for token, real in REAL_IDS.items():
        assert tok.token_id(token) != real  # the fixture's ids are deliberately not the real ones
    assert tok.stop_ids == (tok.token_id("<|im_end|>"), tok.token_id("<|endoftext|>"))
    config = json.loads((tiny_vlm / "model" / "config.json").read_text())
    assert tok.image_pad_id == config["image_token_id"]
    with pytest.raises(Exception, match="no <\\|nope\\|> token"):
        tok.token_id("<|nope|>")


@pytest.mark.parametrize("prompt", [LAYOUT_PROMPT, TEXT_PROMPT, TABLE_PROMPT, FORMULA_PROMPT])
def test_chat_ids_match_the_chat_template_and_transformers(tiny_vlm, tok, prompt):
    jinja2 = pytest.importorskip("jinja2")
    from transformers import PreTrainedTokenizerFast

    template = json.loads((tiny_vlm / "model" / "chat_template.json").read_text())["chat_template"]
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]},
    ]
    rendered = jinja2.Environment().from_string(template).render(messages=messages, add_generation_prompt=True)
    assert rendered == chat_prompt(prompt)

    hf = PreTrainedTokenizerFast(tokenizer_file=str(tiny_vlm / "model" / "tokenizer.json"))
    expanded = expand_image_pads(rendered, [1369])
    ids = tok.chat_ids(prompt, 1369)
    assert ids == hf(expanded, add_special_tokens=False)["input_ids"]
    assert ids.count(tok.image_pad_id) == 1369
    start = ids.index(tok.token_id("<|vision_start|>"))
    assert ids[start + 1 : start + 1 + 1369] == [tok.image_pad_id] * 1369
    assert ids[start + 1370] == tok.token_id("<|vision_end|>")
    assert tok.decode(ids) == expanded


def test_decode_keeps_special_tokens(tok, tiny_case):
    for text in [tiny_case["layout"], "<fcel>Name<lcel><nl><fcel>x<fcel>y<nl>", "E=mc^{2}"]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
    ids = tok.encode(tiny_case["layout"])
    assert tok.token_id("<|box_start|>") in ids and tok.token_id("<|rotate_up|>") in ids


def test_build_input_positions(tiny_vlm, tok):
    from PIL import Image

    from mineru_cli.vlm.processor import ImageProcessorConfig

    proc = ImageProcessor(ImageProcessorConfig.from_file(tiny_vlm / "model" / "preprocessor_config.json"))
    x = build_input(tok, proc, Image.new("RGB", (300, 90), "white"), TEXT_PROMPT)
    assert x.image_grid_thw.tolist() == [[1, 6, 22]]
    assert int((x.input_ids == tok.image_pad_id).sum()) == 6 * 22 // 4
    assert x.pixel_values.shape == (6 * 22, 1176)
    pos, delta = rope_index(x.input_ids, x.image_grid_thw, tok.image_pad_id)
    assert np.array_equal(pos, x.position_ids) and delta == x.rope_delta
    assert delta == (x.position_ids.max() + 1) - len(x)
