"""A tiny MinerU2.5-shaped model, trained on one page so greedy decoding gives known answers.

The model is a real `Qwen2VLForConditionalGeneration` (vision tower, 2x2 merger, M-RoPE
language model, tied embeddings) with tiny sizes, saved as a Hugging Face model folder with a
byte-level BPE tokenizer built here. The tokenizer carries MinerU's special tokens as added
tokens, in a shuffled order at small ids, so any hard-coded id would fail.

Training uses the same inputs the engine builds (our processor, chat ids, rope_index, crops
from protocol.prepare_crops) and stops once decoding through the real generate loop, with
MinerU's penalties, reproduces every answer.

`build(out_dir)` writes out_dir/model (the model folder), out_dir/page.png and
out_dir/case.json. scripts/make_tiny_vlm.py is its command line.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

PAGE_SIZE = (448, 336)  # (width, height)
# Training adds in a different order on each CPU family (torch's vectorised kernels, MKL's and
# oneDNN's dispatch by ISA), so a model trained with each CPU's native kernels differs per CPU, and
# so do figures measured on it: its INT4 logit cosine was 0.973 when built on a plain-AVX2 EPYC,
# 0.990 on a Xeon with AVX-512. The tests build it with every library held to a baseline x86 code
# path (set before torch loads: scripts/make_tiny_vlm.py), meant to be the same model on every
# x86 CPU. Checked on that EPYC only: capping MKL's ISA further left it bit-identical (other
# libraries, libm among them, may still pick code paths by CPU).
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}
SEED = 1234

# (type, 0..1000 box, answer or None when the block is skipped)
ELEMENTS = [
    ("title", (300, 30, 700, 110), "Tiny Report"),
    ("text", (100, 150, 900, 330), "Small pages make fast tests."),
    ("table", (100, 380, 640, 640), "<fcel>Name<lcel><nl><fcel>x<fcel>y<nl>"),
    ("image", (700, 380, 900, 640), None),
    ("equation", (250, 720, 750, 860), "E=mc^{2}"),
]

SPECIAL_TOKENS = [  # (content, special)
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<|ref_start|>", True),
    ("<|ref_end|>", True),
    ("<|md_start|>", True),
    ("<|md_end|>", True),
    ("<ched>", False),
    ("<ecel>", False),
    ("<fcel>", False),
    ("<lcel>", False),
    ("<ucel>", False),
    ("<xcel>", False),
    ("<nl>", False),
    ("<|rotate_up|>", True),
    ("<|rotate_down|>", True),
    ("<|rotate_left|>", True),
    ("<|rotate_right|>", True),
    ("<|txt_contd|>", True),
    ("<|paratext|>", True),
]

# Qwen2's pre-tokenizer split (digits one by one), as in its tokenizer.json
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2-VL's chat template (chat_template.json of Qwen/Qwen2-VL-2B-Instruct)
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

PREPROCESSOR_CONFIG = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
    "resample": 3,
    "rescale_factor": 1 / 255,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "min_pixels": 3136,
    "max_pixels": 1605632,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


def layout_answer() -> str:
    return "\n".join(
        f"<|box_start|>{x1} {y1} {x2} {y2}<|box_end|><|ref_start|>{kind}<|ref_end|><|rotate_up|>"
        for kind, (x1, y1, x2, y2), _ in ELEMENTS
    )


def draw_page() -> Image.Image:
    """A small page with a title, a paragraph, a ruled table, a picture and an equation."""
    from PIL import ImageFont

    width, height = PAGE_SIZE
    page = Image.new("RGB", PAGE_SIZE, "white")
    d = ImageDraw.Draw(page)
    font = ImageFont.load_default()

    def px(box):
        x1, y1, x2, y2 = box
        return (x1 * width // 1000, y1 * height // 1000, x2 * width // 1000, y2 * height // 1000)

    boxes = {kind: px(box) for kind, box, _ in ELEMENTS}
    x1, y1, x2, y2 = boxes["title"]
    d.text((x1 + 20, y1 + 6), "TINY REPORT", fill="black", font=font)
    d.rectangle((x1 + 18, y2 - 6, x2 - 18, y2 - 4), fill="black")
    x1, y1, x2, y2 = boxes["text"]
    for i, line in enumerate(["Small pages make", "fast tests."]):
        d.text((x1 + 4, y1 + 6 + 16 * i), line, fill="black", font=font)
    x1, y1, x2, y2 = boxes["table"]
    d.rectangle((x1, y1, x2, y2), outline="black", width=2)
    mid_y, mid_x = (y1 + y2) // 2, (x1 + x2) // 2
    d.line((x1, mid_y, x2, mid_y), fill="black", width=2)
    d.line((mid_x, mid_y, mid_x, y2), fill="black", width=2)
    d.text((mid_x - 14, y1 + 12), "Name", fill="black", font=font)
    d.text((x1 + 50, mid_y + 12), "x", fill="black", font=font)
    d.text((mid_x + 50, mid_y + 12), "y", fill="black", font=font)
    x1, y1, x2, y2 = boxes["image"]
    for i in range(y2 - y1):
        shade = int(60 + 150 * i / (y2 - y1))
        d.line((x1, y1 + i, x2, y1 + i), fill=(shade, 90, 200 - shade // 2))
    x1, y1, x2, y2 = boxes["equation"]
    d.text((x1 + 60, y1 + 12), "E = mc", fill="black", font=font)
    d.text((x1 + 100, y1 + 6), "2", fill="black", font=font)
    return page


# --------------------------------------------------------------------------- tokenizer


def make_tokenizer(corpus: list[str], seed: int = SEED):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, min_frequency=1, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    specials = list(SPECIAL_TOKENS)
    random.Random(seed).shuffle(specials)  # ids unlike the real ones, and not in their order
    tok.add_tokens([AddedToken(c, special=s, normalized=False) for c, s in specials if not s])
    tok.add_special_tokens([AddedToken(c, special=True, normalized=False) for c, s in specials if s])
    return tok


# --------------------------------------------------------------------------- model


def make_config(tok):
    from transformers import Qwen2VLConfig

    ids = {
        name: tok.token_to_id(name)
        for name in (
            "<|image_pad|>",
            "<|video_pad|>",
            "<|vision_start|>",
            "<|vision_end|>",
            "<|endoftext|>",
            "<|im_end|>",
        )
    }
    vocab = tok.get_vocab_size(with_added_tokens=True)
    text = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
    )
    vision = dict(
        depth=1,
        embed_dim=32,
        hidden_size=64,
        num_heads=2,
        mlp_ratio=2,
        patch_size=14,
        temporal_patch_size=2,
        spatial_merge_size=2,
        in_channels=3,
    )
    return Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
        architectures=["Qwen2VLForConditionalGeneration"],
    )


def _examples(tok, page):
    """(VlmInput, answer ids incl. <|im_end|>, SamplingParams, answer text) for every request."""
    from mineru_cli.vlm.processor import ImageProcessor, ImageProcessorConfig
    from mineru_cli.vlm.protocol.chat import LAYOUT_PROMPT
    from mineru_cli.vlm.protocol.crops import layout_image, prepare_crops
    from mineru_cli.vlm.protocol.layout import parse_layout
    from mineru_cli.vlm.protocol.profiles import PROFILE_2509
    from mineru_cli.vlm.tokenizer import ChatTokenizer, build_input

    chat = ChatTokenizer(tok)
    proc = ImageProcessor(ImageProcessorConfig.from_dict(PREPROCESSOR_CONFIG))
    im_end = chat.token_id("<|im_end|>")
    layout = layout_answer()
    out = [(build_input(chat, proc, layout_image(page), LAYOUT_PROMPT), layout, PROFILE_2509.layout_sampling)]
    blocks = parse_layout(layout).blocks
    assert [b.type for b in blocks] == [e[0] for e in ELEMENTS]
    for crop in prepare_crops(page, blocks):
        answer = ELEMENTS[crop.index][2]
        out.append((build_input(chat, proc, crop.image, crop.prompt), answer, crop.sampling))
    return [(x, chat.encode(a) + [im_end], sp, a) for x, a, sp in out], chat


def _check(model, chat, examples) -> bool:
    from mineru_cli.vlm.generate import generate
    from mineru_cli.vlm.runtime_torch import TorchRuntime

    runtime = TorchRuntime.from_model(model)
    for x, target, sp, _ in examples:
        gen = generate(runtime, [x], sp, chat.stop_ids, max_new_tokens=len(target) + 4)[0]
        if gen.tokens + [gen.stop_token] != target:
            return False
    return True


def train(model, chat, examples, max_steps: int = 1500, lr: float = 5e-3, log=None) -> int:
    """Adam on the answer tokens until generation reproduces every answer; returns the steps.

    The forward pass is the runtime's (our vision position ids and M-RoPE positions). The
    layout image's features carry no gradient: its answer is told apart by its prompt, and the
    5476-patch vision backward would dominate the time.
    """
    import torch

    from mineru_cli.vlm.processor import rope_index
    from mineru_cli.vlm.runtime_torch import TorchRuntime

    runtime = TorchRuntime.from_model(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    rows = []
    for n, (x, target, _, _) in enumerate(examples):
        ids = np.concatenate([x.input_ids, np.asarray(target, dtype=np.int64)])
        pos, _ = rope_index(ids, x.image_grid_thw, chat.image_pad_id, runtime.merge_size)
        rows.append(
            (
                x,
                torch.from_numpy(ids)[None],
                torch.from_numpy(pos)[:, None, :],
                torch.from_numpy(ids == chat.image_pad_id),
                len(x),
                torch.tensor(target),
                n == 0,
            )
        )
    embed = model.get_input_embeddings()
    frozen: dict[int, torch.Tensor] = {}
    for step in range(1, max_steps + 1):
        model.train()
        opt.zero_grad()
        worst = 0.0
        for n, (x, ids, pos, is_image, start, target, frozen_image) in enumerate(rows):
            if not frozen_image:
                feats = runtime.image_embeds([x])[0]
            else:  # refreshed now and then: the vision tower keeps learning from the crops
                if n not in frozen or step % 10 == 0:
                    with torch.no_grad():
                        frozen[n] = runtime.image_embeds([x])[0]
                feats = frozen[n]
            embeds = embed(ids)
            embeds = embeds.masked_scatter(is_image[None, :, None], feats)
            logits = model(inputs_embeds=embeds, position_ids=pos).logits[0]
            loss = torch.nn.functional.cross_entropy(logits[start - 1 : -1], target)
            loss.backward()
            worst = max(worst, loss.item())
        opt.step()
        if log and step % 10 == 0:
            log(f"step {step}: worst loss {worst:.4f}")
        if worst < 0.02 and step % 10 == 0:
            model.eval()
            if _check(model, chat, examples):
                return step
    raise RuntimeError(f"tiny model did not converge in {max_steps} steps")


def build(out_dir: str | Path, seed: int = SEED, log=None) -> dict:
    import torch

    from mineru_cli.vlm.protocol.chat import FORMULA_PROMPT, LAYOUT_PROMPT, TABLE_PROMPT, TEXT_PROMPT, chat_prompt

    t0 = time.monotonic()
    out_dir = Path(out_dir)
    model_dir = out_dir / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    page = draw_page()
    corpus = [chat_prompt(p) for p in (LAYOUT_PROMPT, TEXT_PROMPT, TABLE_PROMPT, FORMULA_PROMPT)]
    corpus += [layout_answer()] + [a for _, _, a in ELEMENTS if a] + ["0123456789 " * 3]
    tok = make_tokenizer(corpus, seed)

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is as fast and shares the CPU better
    from transformers import Qwen2VLForConditionalGeneration

    config = make_config(tok)
    model = Qwen2VLForConditionalGeneration(config).float()
    examples, chat = _examples(tok, page)
    try:
        steps = train(model, chat, examples, log=log)
    finally:
        torch.set_num_threads(threads)

    model.save_pretrained(str(model_dir))
    tok.save(str(model_dir / "tokenizer.json"))
    (model_dir / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))
    (model_dir / "chat_template.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}, indent=2))
    (model_dir / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "model_max_length": 4096,
                "chat_template": CHAT_TEMPLATE,
            },
            indent=2,
        )
    )
    page.save(out_dir / "page.png")
    case = {
        "layout": layout_answer(),
        "elements": [list(e) for e in ELEMENTS],
        "steps": steps,
        "seconds": round(time.monotonic() - t0, 1),
        "seed": seed,
    }
    (out_dir / "case.json").write_text(json.dumps(case, indent=2))
    return case
