"""Engines turn a normalised page image into blocks + markdown.

`ocr` is the embedded offline engine (RapidOCR + rapid-layout, models inside their wheels).
`vlm` (MinerU2.5) is being built; `auto` picks the best engine available.
"""

from __future__ import annotations

from typing import Callable

from ..errors import SetupError
from .base import Block, Engine, EngineResult

ENGINES = ("auto", "ocr", "vlm")


def make_engine(name: str, threads: int, lang: str = "en", say: Callable[[str], None] = print) -> Engine:
    if name not in ENGINES:
        raise SetupError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name == "vlm":
        raise SetupError("the MinerU2.5 (vlm) engine is not in this build yet; "
                         "use --engine ocr (the embedded engine) or --engine auto")
    if name == "auto":
        say("engine: ocr (embedded RapidOCR + layout; the MinerU2.5 vlm engine is not in this build yet)")
    from .ocr import OcrEngine  # deferred: loads ONNX sessions

    return OcrEngine(threads=threads, lang=lang)


__all__ = ["Block", "Engine", "EngineResult", "make_engine", "ENGINES"]
