"""The vlm engine and the torch runtime end to end on the tiny trained MinerU2.5-shaped model."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers import mineru  # noqa: E402  (tests/helpers.py: runs the real CLI)
from tiny_fixtures import Recorder, tiny_case, tiny_vlm  # noqa: F401,E402  (fixtures)

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.engines import make_engine  # noqa: E402
from mineru_cli.engines.vlm import VlmEngine, pick_profile  # noqa: E402
from mineru_cli.vlm.generate import generate  # noqa: E402
from mineru_cli.vlm.processor import rope_index  # noqa: E402
from mineru_cli.vlm.protocol.chat import TABLE_PROMPT  # noqa: E402
from mineru_cli.vlm.protocol.crops import prepare_crops  # noqa: E402
from mineru_cli.vlm.protocol.layout import parse_layout  # noqa: E402
from mineru_cli.vlm.protocol.profiles import PROFILE_2509, PROFILE_PRO  # noqa: E402
from mineru_cli.vlm.tokenizer import build_input  # noqa: E402

TABLE_HTML = '<table><tr><td colspan="2">Name</td></tr><tr><td>x</td><td>y</td></tr></table>'
EXPECTED_BLOCKS = [  # page 448x336; boxes are round(fraction * size)
    {"type": "title", "bbox": [134, 10, 314, 37], "text": "Tiny Report", "score": None, "angle": 0, "source": "vlm"},
    {
        "type": "text",
        "bbox": [45, 50, 403, 111],
        "text": "Small pages make fast tests.",
        "score": None,
        "angle": 0,
        "source": "vlm",
    },
    {
        "type": "table",
        "bbox": [45, 128, 287, 215],
        "text": "Name\nx\ty",
        "score": None,
        "angle": 0,
        "html": TABLE_HTML,
        "source": "vlm",
    },
    {"type": "image", "bbox": [314, 128, 403, 215], "text": "", "score": None, "angle": 0, "source": "vlm"},
    {
        "type": "equation",
        "bbox": [112, 242, 336, 289],
        "text": "\\[\nE=mc^{2}\n\\]",
        "score": None,
        "angle": 0,
        "latex": "E=mc^{2}",
        "source": "vlm",
    },
]
EXPECTED_MARKDOWN = f"# Tiny Report\n\nSmall pages make fast tests.\n\n{TABLE_HTML}\n\n$$\nE=mc^{{2}}\n$$\n"


@pytest.fixture(scope="module")
def engine(tiny_vlm):
    return VlmEngine(tiny_vlm / "model", threads=1)


@pytest.fixture(scope="module")
def page(tiny_vlm):
    return Image.open(tiny_vlm / "page.png").convert("RGB")


def _crop_inputs(engine, page, tiny_case):
    blocks = parse_layout(tiny_case["layout"]).blocks
    crops = prepare_crops(page, blocks)
    return crops, [build_input(engine.tokenizer, engine.processor, c.image, c.prompt) for c in crops]


def test_tiny_page_end_to_end(engine, page):
    result = engine.parse(page)
    assert [b.as_dict() for b in result.blocks] == EXPECTED_BLOCKS
    assert result.markdown == EXPECTED_MARKDOWN
    assert result.warnings == []
    assert {"layout", "content", "post", "ocr", "ocr_wait"} <= set(result.timings)


def test_layout_step_stops_on_im_end(engine, page, tiny_case):
    text, parsed, gen = engine.layout(page)
    assert text == tiny_case["layout"]
    assert gen.finish_reason == "stop" and gen.stop_token == engine.tokenizer.token_id("<|im_end|>")
    assert [b.type for b in parsed.blocks] == ["title", "text", "table", "image", "equation"]
    assert parsed.skipped == 0


def test_batched_crops_decode_like_one_at_a_time(engine, page, tiny_case):
    crops, inputs = _crop_inputs(engine, page, tiny_case)
    assert len({len(x) for x in inputs}) == len(inputs)  # different lengths: left padding is exercised
    rt = engine.runtime
    batched = Recorder(rt)
    together = generate(batched, inputs, [c.sampling for c in crops], engine.tokenizer.stop_ids)
    for i, (crop, x) in enumerate(zip(crops, inputs)):
        single = Recorder(rt)
        alone = generate(single, [x], crop.sampling, engine.tokenizer.stop_ids)[0]
        assert alone.tokens == together[i].tokens and alone.stop_token == together[i].stop_token
        np.testing.assert_allclose(np.stack(single.logits[0]), np.stack(batched.logits[i]), atol=2e-4)
    texts = [engine.tokenizer.decode(g.tokens) for g in together]
    assert texts == [
        "Tiny Report",
        "Small pages make fast tests.",
        "<fcel>Name<lcel><nl><fcel>x<fcel>y<nl>",
        "E=mc^{2}",
    ]
    e1 = VlmEngine(engine.model_dir, threads=1, batch_size=1)
    e1._runtime = rt
    assert [t for t, _ in e1.read_crops(crops)] == [t for t, _ in engine.read_crops(crops)] == texts


def test_kv_cache_decoding_matches_a_full_forward(engine, page, tiny_case):
    """Every cached step's logits equal a no-cache forward over prompt + answer, with the
    M-RoPE positions of the whole sequence (so decode positions k + delta are right)."""
    crops, inputs = _crop_inputs(engine, page, tiny_case)
    x, crop = inputs[2], crops[2]  # the table: the longest answer
    rec = Recorder(engine.runtime)
    gen = generate(rec, [x], crop.sampling, engine.tokenizer.stop_ids)[0]
    ids = np.concatenate([x.input_ids, np.asarray(gen.tokens, dtype=np.int64)])
    pos, _ = rope_index(ids, x.image_grid_thw, engine.tokenizer.image_pad_id)
    model = engine.runtime.model
    with torch.inference_mode():
        full = (
            model(
                input_ids=torch.from_numpy(ids)[None],
                position_ids=torch.from_numpy(pos)[:, None],
                pixel_values=torch.from_numpy(x.pixel_values),
                image_grid_thw=torch.from_numpy(x.image_grid_thw),
            )
            .logits[0]
            .numpy()
        )
    n = len(gen.tokens) + 1
    np.testing.assert_allclose(np.stack(rec.logits[0]), full[len(x) - 1 : len(x) - 1 + n], atol=2e-4)


def test_our_inputs_match_transformers_own_positions(engine, page, tiny_case):
    """transformers computing its own rope index and vision position ids gives our logits."""
    _, inputs = _crop_inputs(engine, page, tiny_case)
    x = inputs[1]
    ours = engine.runtime.prefill([x])
    ids = torch.from_numpy(x.input_ids)[None]
    with torch.inference_mode():
        theirs = (
            engine.runtime.model(
                input_ids=ids,
                pixel_values=torch.from_numpy(x.pixel_values),
                image_grid_thw=torch.from_numpy(x.image_grid_thw),
                mm_token_type_ids=(ids == engine.tokenizer.image_pad_id).int(),
            )
            .logits[0, -1]
            .numpy()
        )
    np.testing.assert_allclose(ours[0], theirs, atol=2e-4)


def test_identity_and_options(engine, tiny_vlm):
    ident = engine.identity()
    weights = tiny_vlm / "model" / "model.safetensors"
    assert ident["weights"] == {"model.safetensors": hashlib.sha256(weights.read_bytes()).hexdigest()}
    assert ident["config"]["architectures"] == ["Qwen2VLForConditionalGeneration"]
    assert ident["config"]["text_config"]["hidden_size"] == 64
    assert engine.identity() is ident  # hashed once
    opts = engine.options()
    assert opts["profile"] == "MinerU2.5-2509-1.2B" and opts["runtime"] == "torch"
    assert opts["prompts"]["table"] == TABLE_PROMPT
    assert opts["sampling"]["table"]["frequency_penalty"] == 0.005
    # answers may run to the context (the tiny config's max_position_embeddings) minus the prompt
    assert opts["max_new_tokens"] == "context" and opts["context_length"] == 4096
    assert VlmEngine(tiny_vlm / "model", max_new_tokens=100).options()["max_new_tokens"] == 100
    json.dumps(opts)


def test_profile_choice(tiny_vlm, tmp_path):
    """From the files, never the folder's name (tests/vlm/test_model_identity.py: the Pro shape)."""
    assert pick_profile(tiny_vlm / "model") is PROFILE_2509
    named = tmp_path / "MinerU2.5-Pro-2605-1.2B"
    shutil.copytree(tiny_vlm / "model", named)
    assert pick_profile(named) is PROFILE_2509
    assert pick_profile(named, "pro") is PROFILE_PRO
    with pytest.raises(SetupError, match="unknown model profile"):
        pick_profile(named, "2507")


def test_make_engine_picks_vlm_when_a_model_is_found(tiny_vlm, monkeypatch):
    monkeypatch.setenv("MINERU_MODEL_PATH", str(tiny_vlm / "model"))
    said = []
    engine = make_engine("auto", threads=1, say=said.append)
    assert engine.name == "vlm" and said and said[0].startswith("engine: vlm")
    assert make_engine("vlm", threads=1, model=str(tiny_vlm / "model"), model_profile="2509").name == "vlm"


def test_cli_parse_with_the_vlm_engine(tiny_vlm, tmp_path, record_validator):
    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    proc = mineru(
        "parse",
        "page.png",
        "--engine",
        "vlm",
        "--model",
        str(tiny_vlm / "model"),
        "--out",
        "x.jsonl",
        "--no-cache",
        "--cpus",
        "1",
        "--format",
        "content-list",
        "--out-dir",
        "docs",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    record_validator.validate(rec)
    assert rec["status"] == "ok" and rec["engine"]["name"] == "vlm"
    assert rec["blocks"] == EXPECTED_BLOCKS
    assert rec["markdown"] == EXPECTED_MARKDOWN
    items = json.loads((tmp_path / "docs" / "page_png" / "page_content_list.json").read_text())
    assert [it["type"] for it in items] == ["text", "text", "table", "image", "equation"]
    assert items[0]["text_level"] == 1 and items[2]["table_body"] == TABLE_HTML
    assert items[4]["text"] == "$$\nE=mc^{2}\n$$"
    assert (tmp_path / "docs" / "page_png" / items[3]["img_path"]).is_file()
    # the document's Markdown links the image's crop, as MinerU's does (the record's has no crop)
    image_link = f"\n\n![]({items[3]['img_path']})\n\n$$"
    assert (tmp_path / "docs" / "page_png" / "page.md").read_text() == EXPECTED_MARKDOWN.replace("\n\n$$", image_link)

    # --engine auto finds the model through $MINERU_MODEL_PATH and says that it chose vlm.
    auto = mineru(
        "parse",
        "page.png",
        "--out",
        "y.jsonl",
        "--no-cache",
        "--cpus",
        "1",
        cwd=tmp_path,
        env={"MINERU_MODEL_PATH": str(tiny_vlm / "model")},
    )
    assert auto.returncode == 0 and "engine: vlm" in auto.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "y.jsonl").read_text().splitlines()]
    assert rec["blocks"] == EXPECTED_BLOCKS


@pytest.mark.slow
def test_make_tiny_vlm_script_converges_with_another_seed(tmp_path):
    import subprocess
    import sys

    from tiny_fixtures import HERE

    script = HERE.parents[1] / "scripts" / "make_tiny_vlm.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "tiny"), "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    case = json.loads((tmp_path / "tiny" / "case.json").read_text())
    engine = VlmEngine(tmp_path / "tiny" / "model", threads=1)
    result = engine.parse(Image.open(tmp_path / "tiny" / "page.png"))
    assert [b.as_dict() for b in result.blocks] == EXPECTED_BLOCKS, case


def test_cli_max_new_tokens_caps_every_answer(tiny_vlm, tmp_path):
    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    args = ["parse", "page.png", "--engine", "vlm", "--model", str(tiny_vlm / "model"), "--no-cache", "--cpus", "1"]
    proc = mineru(*args, "--max-new-tokens", "12", "--out", "x.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rec,) = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert rec["engine"]["options"]["max_new_tokens"] == 12
    assert "layout answer cut at 12 tokens" in rec["warnings"]  # the layout takes ~20 tokens a block
    assert len(rec["blocks"]) < len(EXPECTED_BLOCKS)
    proc = mineru(*args, "--max-new-tokens", "0", "--out", "y.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "--max-new-tokens" in proc.stderr


def test_an_edited_preprocessor_config_is_parsed_again_not_resumed_or_served(tiny_vlm, tmp_path):
    # The torch runtime reads preprocessor_config.json (max_pixels sizes the layout image), so a
    # re-run after it changed must parse the page again: the journal and the cache held the
    # result of the old setting under the same fingerprint.
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    args = ["parse", "page.png", "--engine", "vlm", "--model", str(model), "--runtime", "torch", "--cpus", "1"]
    assert mineru(*args, "--out", "r.jsonl", cwd=tmp_path).returncode == 0
    (before,) = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert before["blocks"] == EXPECTED_BLOCKS
    config = json.loads((model / "preprocessor_config.json").read_text())
    config["max_pixels"] = 100_352  # the layout image shrinks to a fifth: the tiny model finds no block
    (model / "preprocessor_config.json").write_text(json.dumps(config))
    # a new journal over the same cache: no hit of the old result; then the old journal: not
    # resumed (its new result may come from the cache, stored by the run before)
    for out, cache in (("fresh.jsonl", {"miss"}), ("r.jsonl", {"miss", "hit"})):
        proc = mineru(*args, "--out", out, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (rec,) = [json.loads(line) for line in (tmp_path / out).read_text().splitlines()]
        assert rec["cache"]["status"] in cache and rec["fingerprint"] != before["fingerprint"]
        assert rec["blocks"] != EXPECTED_BLOCKS
