"""The vision encoder in bf16 through ONNX Runtime's OpenVINO execution provider: measured by
`mineru bench`, not used for parsing.

On a CPU with bf16 products (AMX, AVX-512 BF16) OpenVINO's CPU plugin runs the vision encoder in
bf16, where onnxruntime's own kernels have INT8 products and fp32 attention. PyPI
`onnxruntime-ep-openvino` packages OpenVINO's libraries as an ONNX Runtime plugin (the runtime
stays ONNX Runtime; its factory offers Intel CPUs only). The graph it runs is VISION_GRAPH,
written by export_model(openvino=True): the vision encoder with weight-only INT8 products (each
weight INT8 per output channel behind a DequantizeLinear, which OpenVINO keeps in INT8); the
float graph would hold the weights in fp32 and bf16 at once (a 5.6 GB process).

Not adopted for `mineru parse`: on the AMX Xeon measured, the modelled page was 1.09x faster
but a worker peaked at 3.11 GiB against 2.05 GiB (the target is 2.5 GB, and the default
--max-worker-rss of 3GB would recycle such a worker after every page); docs/export.md and
docs/benchmarks.md have the figures. `mineru bench` keeps measuring it
(bench.OPENVINO_VARIANT) wherever the plugin runs, so a later OpenVINO that holds less memory
shows up there.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ..core.errors import SetupError
from .int8_target import cpu_flags

ONNXRUNTIME = "onnxruntime"  # vision.onnx on onnxruntime's CPU kernels (what parsing runs)
OPENVINO = "openvino-bf16"  # VISION_GRAPH on the OpenVINO execution provider, in bf16
VISION_GRAPH = "vision_openvino.onnx"  # manifest graphs["vision_openvino"]
GRAPH_ROLE = "vision_openvino"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
EP_NAME = "OpenVINOExecutionProvider"


def has_bf16(flags: set[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_FLAGS)


@functools.cache  # the plugin library is registered once per process
def plugin_device(ort) -> tuple[Any | None, str]:
    """The OpenVINO plugin's CPU device for ONNX Runtime, or None and why not. The plugin offers
    Intel CPUs only (its factory skips other vendors' devices)."""
    device, reason = None, ""
    try:
        import onnxruntime_ep_openvino as plugin
    except ImportError:
        reason = "the OpenVINO plugin is not installed (pip install onnxruntime-ep-openvino)"
    else:
        cpu = ort.OrtHardwareDeviceType.CPU
        try:
            if not any(d.ep_name == EP_NAME for d in ort.get_ep_devices()):  # not registered yet
                ort.register_execution_provider_library("openvino_ep", plugin.get_library_path())
            offered = [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME and d.device.type == cpu]
        except Exception as exc:  # noqa: BLE001 - the plugin's own errors
            reason = f"the OpenVINO plugin did not load: {exc}"
        else:
            if offered:
                device = offered[0]
            else:
                reason = "the OpenVINO plugin offers no device for this CPU (it takes Intel CPUs only)"
    return device, reason


def unavailable(manifest: dict, ort=None) -> str:
    """Why the export's OpenVINO vision graph cannot run here ("" when it can)."""
    if GRAPH_ROLE not in (manifest.get("graphs") or {}):
        return "the export has no OpenVINO vision graph (export_model(..., openvino=True))"
    return not_here(ort)


def not_here(ort=None) -> str:
    """Why this machine cannot run an OpenVINO vision graph ("" when it can)."""
    if not has_bf16():
        return "this CPU has no bf16 products (amx_bf16 or avx512_bf16)"
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    return plugin_device(ort)[1]


def add_provider(ort, options, threads: int) -> None:
    """Put the OpenVINO device first in a session's providers (onnxruntime's CPU kernels take
    any node it does not), computing in bf16 on `threads` threads. The plugin takes its settings
    as OpenVINO properties in load_config; its `precision` and `num_of_threads` options are
    ignored."""
    device, reason = plugin_device(ort)
    if device is None:
        raise SetupError(reason)
    config = {
        "INFERENCE_PRECISION_HINT": "bf16",
        "INFERENCE_NUM_THREADS": str(max(1, int(threads))),
        "PERFORMANCE_HINT": "LATENCY",
    }
    options.add_provider_for_devices([device], {"load_config": json.dumps({"CPU": config})})
    # every node on OpenVINO or the session fails: a node left to onnxruntime's CPU kernels would
    # be measured as OpenVINO's
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
