"""torch -> ONNX export of MinerU2.5 (vision + decoder with KV cache), INT8/INT4, manifest.

onnx_export  export_model(model_dir, out_dir, int8, int4, verify) -> report; parity measures
graphs       the torch wrappers that are exported (VisionGraph, DecoderGraph)
Everything here imports torch; the runtime that reads an export (vlm.runtime_onnx) does not.
"""

from __future__ import annotations


def export_model(*args, **kwargs):
    """See mineru_cli.export.onnx_export.export_model (imported lazily: it needs torch)."""
    from .onnx_export import export_model as _export_model

    return _export_model(*args, **kwargs)
