"""Copies of the tiny trained model's folder in the shapes the real releases are written in.

The tiny model is saved by transformers 5 (nested text_config with rope_parameters, the tie flag
at the root, min_pixels 3136, chat_template.json): what mineru-cli reads as the 2509 shape.
pro_shaped() rewrites a copy as MinerU2.5-Pro-2605-1.2B's files are (DESIGN.md section 1): the tie
flag only inside text_config, min_pixels 50176, chat_template.jinja, added_tokens.json and
special_tokens_map.json. Neither changes a weight.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

COMMIT = "3b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"  # a Hugging Face snapshot folder's name


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def pro_shaped(src: Path, dst: Path) -> Path:
    copy_model(src, dst)

    def config(c):
        c["text_config"]["tie_word_embeddings"] = c.pop("tie_word_embeddings")
        c["_name_or_path"] = "/models/some-folder"

    _edit(dst / "config.json", config)
    _edit(dst / "preprocessor_config.json", lambda p: p.update(min_pixels=50176))
    template = json.loads((dst / "chat_template.json").read_text())["chat_template"]
    (dst / "chat_template.json").unlink()
    (dst / "chat_template.jinja").write_text(template)
    tok = json.loads((dst / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    (dst / "added_tokens.json").write_text(json.dumps(added, indent=2))
    (dst / "special_tokens_map.json").write_text(
        json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, indent=2)
    )
    return dst


def named_pro_2509(src: Path, dst: Path) -> Path:
    """The 2509 shape whose _name_or_path (and folder) say pro: still 2509."""
    copy_model(src, dst)
    _edit(dst / "config.json", lambda c: c.update(_name_or_path="opendatalab/MinerU2.5-Pro-2605-1.2B"))
    return dst


def small_random_config(vision_depth: int):
    """A MinerU2.5-shaped config small enough to build, export and run in seconds (random
    weights: the bench's and the roofline's tests), its token ids inside the 1,000-token vocab."""
    from mineru_cli.export.bench import mineru25_config

    config = mineru25_config(
        text=dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            bos_token_id=0,
            eos_token_id=1,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        ),
        vision=dict(depth=vision_depth, embed_dim=32, hidden_size=64, num_heads=2),
    )
    config.image_token_id, config.vision_start_token_id, config.vision_end_token_id = 900, 901, 902
    return config
