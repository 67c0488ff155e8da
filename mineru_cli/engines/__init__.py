"""Engines turn a normalised page image into blocks + markdown.

`ocr` is the embedded offline engine (RapidOCR + rapid-layout, models inside their wheels).
`vlm` is MinerU2.5 (needs the model folder: --model, $MINERU_MODEL_PATH or the HF cache).
`auto` picks vlm when a model and its runtime are available, ocr otherwise.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

from ..errors import SetupError
from .base import Block, Engine, EngineResult

ENGINES = ("auto", "ocr", "vlm")


def _torch_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def make_engine(name: str, threads: int, lang: str = "en", say: Callable[[str], None] = print,
                model: str | None = None, model_profile: str | None = None,
                runtime: str = "torch") -> Engine:
    if name not in ENGINES:
        raise SetupError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name in ("vlm", "auto"):
        from ..vlm.model_dir import find_model

        model_dir = find_model(model)  # a --model or $MINERU_MODEL_PATH that is no model folder raises
        if name == "vlm" or (model_dir is not None and (runtime != "torch" or _torch_available())):
            from .vlm import VlmEngine

            engine = VlmEngine(model_dir, threads=threads, runtime=runtime, profile=model_profile)
            if name == "auto":
                say(f"engine: vlm ({engine.profile.name} from {engine.model_dir}, {runtime} runtime)")
            return engine
        reason = "no MinerU2.5 model found" if model_dir is None else "torch/transformers not installed"
        say(f"engine: ocr (embedded RapidOCR + layout; {reason} for the vlm engine)")
    from .ocr import OcrEngine  # deferred: loads ONNX sessions

    return OcrEngine(threads=threads, lang=lang)


__all__ = ["Block", "Engine", "EngineResult", "make_engine", "ENGINES"]
