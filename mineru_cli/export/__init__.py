"""torch -> ONNX export of MinerU2.5 (vision + decoder with KV cache), INT8/INT4, manifest.

onnx_export  export_model(model_dir, out_dir, int8, int4, verify, bias_correction) -> report;
             parity measures
graphs       the torch wrappers that are exported (VisionGraph, DecoderGraph)
step_path    the decoder's one-token attention path, added to the saved graph (onnx only)
bias_correction
             opt-in INT8 mean-shift correction from rendered calibration pages (onnx, onnxruntime)
calibration  those calibration pages (PIL)
bench        the full-size random-model benchmark (`mineru bench`; torch inside its functions)
The folder's format (file names, manifest, version) is vlm.export_format, shared with the
runtime that reads an export (vlm.runtime_onnx). onnx_export and graphs import torch; the
runtime does not.
"""

from __future__ import annotations


def export_model(*args, **kwargs):
    """See mineru_cli.export.onnx_export.export_model (imported lazily: it needs torch)."""
    from .onnx_export import export_model as _export_model

    return _export_model(*args, **kwargs)
