"""The machine's kernel roofline, measured in the bench's own run, and each phase's fraction of it.

A speed figure alone does not say whether a runtime is slow or the machine is: the roofline
measures what this CPU's kernels reach at the model's own shapes, with the bench's threads,
right before the variants run and again after them, the faster of the two taken (best_of: a
spell of other load during one probe of a few seconds would set the ceiling too low):

- fp32 MatMul and the INT8 product (dynamic per-channel quantization with the weight kind the
  export writes for this CPU: int8_target.int8_settings) at the vision MLP's first product for
  the largest image (N x E x 4E: 5476 x 1280 x 5120 for MinerU2.5's layout image), the best
  GFLOP/s (int8: GOP/s) of a few runs of onnxruntime (the second product, N x 4E x E, measured
  the same or slower, so one shape keeps the probe to a few seconds);
- read bandwidth: onnxruntime ReduceSum over a buffer far larger than the last-level cache
  (256 MiB), the best of a few runs, in GB/s: what streaming the decoder's weights each step can
  reach. Two probes, the faster taken: rows of STREAM_ROW floats summed along the row (the
  bench's threads share the rows) and the buffer summed as one axis (one thread). On the quiet
  AMX Xeon rows read 27.8 GB/s and one axis 17.5; a review on the same machine under load saw
  rows at 12-13 and one axis at 16-17.

phase_seconds gives each phase's time at the roofline: vision and prefill as the time their
FLOPs take (products at the fp32 or INT8 rate, as the variant's graph has them; attention at the
fp32 rate); a decoding step as the longer of reading its bytes (the decoder's weights and the
rows' keys and values) at the bandwidth and computing its FLOPs. phase_fractions puts that over
each measured time: a fraction near 1 is the machine's limit; the FLOP counts are the model's, so
work a runtime does beyond them shows as a lower fraction. The bench's page model over
phase_seconds is the fastest page this machine's kernels allow a variant (bench.roofline_page).

    roof = measure_roofline(threads=2, m=5476, e=1280, mlp=5120)
    fractions = phase_fractions(medians, roof, config, int8_graphs, weight_bytes, patches, ...)

Imports onnx and onnxruntime (the quantizer); never torch.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ..vlm.int8_target import detect_target, int8_settings

BANDWIDTH_BYTES = 256 << 20  # far past any last-level cache (an EPYC's L3 is 32 MiB per CCX)
STREAM_ROW = 4096  # floats per row of the bandwidth probe's buffer (16 KiB)
RUNS = 3


def _session(path: Path, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _best_seconds(session, feed: dict, runs: int) -> float:
    """The fastest of `runs` runs of session on feed, after a warm-up run (packing, allocation)."""
    session.run(None, feed)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(None, feed)
        best = min(best, time.perf_counter() - t0)
    return best


def _matmul_model(path: Path, k: int, n: int, rng) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
        [numpy_helper.from_array(w, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def _reduce_model(path: Path, flat: bool = False) -> Path:
    """ReduceSum of rows of STREAM_ROW floats along the row (flat: of one axis)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape, axis = ([None], 0) if flat else ([None, STREAM_ROW], 1)
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        "stream",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * (len(shape) - 1))],
        [numpy_helper.from_array(np.array([axis], dtype=np.int64), "axes")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def measure_roofline(
    threads: int,
    m: int,
    e: int,
    mlp: int,
    target: str | None = None,
    bandwidth_bytes: int = BANDWIDTH_BYTES,
    runs: int = RUNS,
) -> dict:
    """{"fp32_gflops", "int8_gops", "bandwidth_gbs", "int8_weights", "shapes", "seconds"}: the
    best rates of onnxruntime's fp32 and INT8 MatMul at (m x e x mlp) with `threads` threads,
    and its read bandwidth over `bandwidth_bytes`. target: the INT8 target whose weight kind is
    measured (default: this CPU's)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    t_start = time.perf_counter()
    settings = int8_settings(target or detect_target())["vision"]
    rng = np.random.default_rng(0)
    fp32: list[float] = []
    int8: list[float] = []
    shapes = [(m, e, mlp)]
    with tempfile.TemporaryDirectory(prefix="mineru-roofline-") as tmp:
        for i, (rows, k, n) in enumerate(shapes):
            src = _matmul_model(Path(tmp) / f"fp32_{i}.onnx", k, n, rng)
            dst = Path(tmp) / f"int8_{i}.onnx"
            muted = logging.root.manager.disable
            logging.disable(logging.WARNING)  # the quantizer's hint to pre-process the model
            try:
                quantize_dynamic(
                    str(src),
                    str(dst),
                    weight_type=QuantType[settings["weight_type"]],
                    reduce_range=bool(settings["reduce_range"]),
                    per_channel=True,
                    op_types_to_quantize=["MatMul"],
                    extra_options={"MatMulConstBOnly": True},
                )
            finally:
                logging.disable(muted)
            x = rng.standard_normal((rows, k)).astype(np.float32)
            flops = 2.0 * rows * k * n
            for path, rates in ((src, fp32), (dst, int8)):
                sess = _session(path, threads)
                rates.append(flops / _best_seconds(sess, {"x": x}, runs) / 1e9)
                del sess
        stream = _session(_reduce_model(Path(tmp) / "stream.onnx"), threads)
        buf = np.ones((max(1, bandwidth_bytes // (4 * STREAM_ROW)), STREAM_ROW), dtype=np.float32)
        bandwidth = buf.nbytes / _best_seconds(stream, {"x": buf}, runs) / 1e9
        flat = _session(_reduce_model(Path(tmp) / "flat.onnx", flat=True), threads)
        one_axis = buf.nbytes / _best_seconds(flat, {"x": buf.reshape(-1)}, runs) / 1e9
    return {
        "fp32_gflops": max(fp32),
        "int8_gops": max(int8),
        "bandwidth_gbs": max(bandwidth, one_axis),
        "bandwidth_probes_gbs": {"rows": bandwidth, "one_axis": one_axis},
        "int8_weights": settings,
        "shapes": [list(s) for s in shapes],
        "per_shape": {"fp32_gflops": fp32, "int8_gops": int8},
        "bandwidth_bytes": int(buf.nbytes),
        "threads": threads,
        "seconds": time.perf_counter() - t_start,
    }


RATES = ("fp32_gflops", "int8_gops", "bandwidth_gbs")


def best_of(*roofs: dict) -> dict:
    """Several measurements of one run's roofline (before and after its variants) as one: each
    rate, each bandwidth probe and each shape's rate the fastest measured; the measurements
    themselves under "measurements"."""
    out = {**roofs[-1], **{rate: max(r[rate] for r in roofs) for rate in RATES}}
    if all("bandwidth_probes_gbs" in r for r in roofs):
        probes = roofs[-1]["bandwidth_probes_gbs"]
        out["bandwidth_probes_gbs"] = {k: max(r["bandwidth_probes_gbs"][k] for r in roofs) for k in probes}
    if all("per_shape" in r for r in roofs):
        out["per_shape"] = {
            k: [max(rates) for rates in zip(*(r["per_shape"][k] for r in roofs))] for k in roofs[-1]["per_shape"]
        }
    out["measurements"] = [{k: v for k, v in r.items() if k != "measurements"} for r in roofs]
    out["seconds"] = sum(r["seconds"] for r in roofs)
    return out


# --------------------------------------------------------------- the model's work per phase


def vision_flops(config, patches: int) -> tuple[float, float]:
    """(products, attention) FLOPs of the vision encoder for one image of `patches` patches: the
    patch embedding, each block's qkv, projection and MLP products and the merger (products),
    and the blocks' full attention, QK^T and PV (attention)."""
    v = config.vision_config
    e, depth = int(v.embed_dim), int(v.depth)
    hidden_mlp = int(e * float(v.mlp_ratio))
    patch_dim = int(v.in_channels) * int(v.temporal_patch_size) * int(v.patch_size) ** 2
    merge = int(v.spatial_merge_size) ** 2
    n = float(patches)
    per_block = 2 * n * (3 * e * e + e * e + 2 * e * hidden_mlp)
    merger = 2 * (n / merge) * (merge * e * merge * e + merge * e * int(v.hidden_size))
    products = 2 * n * patch_dim * e + depth * per_block + merger
    attention = depth * 4 * n * n * e
    return products, attention


def _text(config):
    t = config.text_config
    hidden, heads = int(t.hidden_size), int(t.num_attention_heads)
    head_dim = int(getattr(t, "head_dim", None) or hidden // heads)
    return t, hidden, heads, int(t.num_key_value_heads), head_dim


def decoder_weights(config) -> int:
    """Weights a decoding step reads: every layer's products and the output layer (the
    embedding table is only looked up)."""
    t, hidden, heads, kv, d = _text(config)
    per_layer = hidden * heads * d * 2 + 2 * hidden * kv * d + 3 * hidden * int(t.intermediate_size)
    return int(t.num_hidden_layers) * per_layer + int(t.vocab_size) * hidden


def prefill_flops(config, tokens: int) -> tuple[float, float]:
    """(products, attention) FLOPs of one prompt of `tokens` tokens: every token through every
    layer's products, the output layer for the last token, causal attention (half of T^2)."""
    t, hidden, heads, kv, d = _text(config)
    vocab = int(t.vocab_size)
    layer_weights = decoder_weights(config) - vocab * hidden
    products = 2.0 * tokens * layer_weights + 2.0 * vocab * hidden
    attention = int(t.num_hidden_layers) * 4.0 * heads * d * tokens * tokens / 2
    return products, attention


def step_bytes(config, batch: int, context: int, weight_bytes: float) -> float:
    """Bytes one decoding step reads at `batch` rows of about `context` tokens: the decoder's
    weights once, and each row's keys and values (float32) in every layer."""
    t, _hidden, _heads, kv, d = _text(config)
    return weight_bytes + batch * int(t.num_hidden_layers) * 2 * kv * context * d * 4


def step_flops(config, batch: int, context: int) -> float:
    """FLOPs of one decoding step at `batch` rows of about `context` tokens: each row through
    every product of the decoder (the output layer included) and its attention over its keys."""
    t, _hidden, heads, _kv, d = _text(config)
    return batch * (2.0 * decoder_weights(config) + int(t.num_hidden_layers) * 4.0 * heads * d * context)


def phase_seconds(
    roof: dict,
    config,
    int8_graphs: set[str],
    decoder_weight_bytes: float,
    patches: dict[str, int],
    prefill_tokens: int,
    decode_context: int,
    decode_steps: int,
    batches: tuple[int, ...] = (1, 8),
) -> dict:
    """Each phase's time at the roofline, in the bench's units and keys: vision_s<...> (one key
    per entry of patches) and prefill_s in seconds, decode_ms_b<batch> in milliseconds.
    int8_graphs: which of "vision", "decoder" compute their products in INT8 (at the roofline's
    INT8 rate; the rest and all attention at its fp32 rate); decoder_weight_bytes: what the
    decoder's weights take. A decoding step takes the longer of reading its bytes at the read
    bandwidth and computing its FLOPs at the roofline's rates: a roofline, so the compute binds
    only where those rates are low against the bandwidth, whatever a kernel does at a few rows."""
    fp32 = roof["fp32_gflops"] * 1e9

    def rate(role: str) -> float:
        return roof["int8_gops"] * 1e9 if role in int8_graphs else fp32

    out: dict[str, float] = {}
    for key, n in patches.items():
        products, attention = vision_flops(config, n)
        out[key] = products / rate("vision") + attention / fp32
    if prefill_tokens:
        products, attention = prefill_flops(config, prefill_tokens)
        out["prefill_s"] = products / rate("decoder") + attention / fp32
    bandwidth = roof["bandwidth_gbs"] * 1e9
    for batch in batches:
        context = int(decode_context + 3 * (batch - 1) / 2 + decode_steps / 2)  # the rows' mean length
        read = step_bytes(config, batch, context, decoder_weight_bytes) / bandwidth
        out[f"decode_ms_b{batch}"] = 1000 * max(read, step_flops(config, batch, context) / rate("decoder"))
    return out


def phase_fractions(
    medians: dict,
    roof: dict,
    config,
    int8_graphs: set[str],
    decoder_weight_bytes: float,
    patches: dict[str, int],
    prefill_tokens: int,
    decode_context: int,
    decode_steps: int,
) -> dict:
    """One variant's achieved fraction of the roofline per measured phase, {key: fraction}: the
    phase's time at the roofline (phase_seconds) over its measured median. medians: its bench
    medians (vision_s, vision_s_<n>, prefill_s, decode_ms_b<b>); patches: the image size of each
    vision key; the rest as phase_seconds takes them."""
    steps = (k.removeprefix("decode_ms_b") for k in medians if k.startswith("decode_ms_b"))
    batches = tuple(int(b) for b in steps if b.isdigit())  # not llama.cpp's decode_ms_b4_slots
    measured = {k: n for k, n in patches.items() if medians.get(k)}
    tokens = prefill_tokens if medians.get("prefill_s") else 0
    ideal = phase_seconds(
        roof, config, int8_graphs, decoder_weight_bytes, measured, tokens, decode_context, decode_steps, batches
    )
    return {k: t / medians[k] for k, t in ideal.items() if medians.get(k)}
