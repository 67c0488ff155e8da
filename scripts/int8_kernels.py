"""ONNX Runtime's INT8 MatMul kernels at MinerU2.5's shapes, one MatMul per graph: the kernel-level
figures behind mineru_cli/vlm/int8_target.py (which weights each CPU family gets).

    python scripts/int8_kernels.py [--threads 2] [--json OUT] [--shapes NAME ...] [--variants NAME ...]

Each shape is quantized as `mineru export --int8` quantizes (dynamic, per-channel weights) with
each weight setting, and the variants are timed alternately (medians of 5, or 3 for the largest;
their thread pools do not spin, see `session`),
with the max abs error against a float64 product. The activations have a few large channels, as
a trained model's do: that is what overflows the u8 x s8 kernel's 16-bit pair sums on x86 CPUs
without VNNI. Variants: fp32; QInt8 (full 8-bit signed weights); QInt8 7-bit (reduce_range);
QUInt8; QInt8 exact (full 8-bit signed weights with session.x64quantprecision, onnxruntime's
u8 x u8 kernels, as the runtime runs an export made for VNNI/AMX on a CPU without them); on
request (--variants) "MatMulNBits 8-bit b32" / "b128" (8-bit block-wise weights, activations
quantized per block: accuracy level 4) and "OpenVINO INT8 weights" (another library's kernels for
comparison: the same product compiled by OpenVINO's own API, weights per-channel symmetric INT8,
activations as OpenVINO's CPU plugin decides; it needs `openvino` importable, e.g.
PYTHONPATH=<a venv with openvino>/lib/python3.11/site-packages). --shapes defaults to every shape but the test-sized
"256 rows" one; --rows runs each shape at the given row counts (a decoding step's products at
batch 1 to 16, say). On a CPU with VNNI or AMX, `python scripts/avx2_only.py -- python
scripts/int8_kernels.py ...` measures the plain AVX2 kernels (this CPU running them).
"""

from __future__ import annotations

import mineru_cli  # noqa: F401 - first: it turns onnxruntime's telemetry off, which must precede importing it

# isort: split
import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

from mineru_cli.vlm.int8_target import EXACT_KERNELS_OPTION, cpu_summary

SHAPES = {  # (M, K, N)
    "vision MLP fc1": (5476, 1280, 5120),
    "vision MLP fc2": (5476, 5120, 1280),
    "decoder prefill MLP": (1400, 896, 4864),
    "decoder step b8 MLP": (8, 896, 4864),
    "decoder step b1 MLP": (1, 896, 4864),
    "decoder step b8 down": (8, 4864, 896),
    "lm_head b8": (8, 896, 151936),
    "lm_head b1": (1, 896, 151936),
    "vision MLP fc1, 256 rows": (256, 1280, 5120),  # seconds: tests/vlm/test_plain_avx2.py
}
# name: (weight type, reduce_range, exact kernels); None: fp32; ("MatMulNBits", block): 8-bit
# block-wise weights with activations quantized per block (accuracy level 4), the other INT8
# product onnxruntime has (not the default set: slower than fp32 on every CPU measured)
VARIANTS = {
    "fp32": None,
    "QInt8": (QuantType.QInt8, False, False),
    "QInt8 7-bit": (QuantType.QInt8, True, False),
    "QUInt8": (QuantType.QUInt8, False, False),
    "QInt8 exact": (QuantType.QInt8, False, True),
    "MatMulNBits 8-bit b32": ("MatMulNBits", 32),
    "MatMulNBits 8-bit b128": ("MatMulNBits", 128),
    "OpenVINO INT8 weights": ("OpenVINO", 0),
}
DEFAULT_VARIANTS = ("fp32", "QInt8", "QInt8 7-bit", "QUInt8", "QInt8 exact")


def session(path: Path, threads: int, exact: bool):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # no spinning: the variants' sessions take turns, and a session's pool threads spin on after
    # its call, taking the cores the next session's call needs (an 8-row output layer measured
    # 8.5-13.7 ms that way against 4.4-4.8 ms in one session alone, Zen 5 EPYC): each call gets
    # the cores to itself
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if exact:
        opts.add_session_config_entry(EXACT_KERNELS_OPTION, "1")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class OpenVinoProduct:
    """x @ w compiled by OpenVINO with INT8 weights (per output channel, symmetric), run like an
    onnxruntime session. The weights are a Convert and a Multiply on an i8 constant: the pattern
    OpenVINO's CPU plugin keeps compressed (and, on CPUs with VNNI or AMX, multiplies with
    dynamically quantized activations, the plugin's DYNAMIC_QUANTIZATION_GROUP_SIZE)."""

    def __init__(self, w: np.ndarray, threads: int):
        import openvino as ov
        import openvino.opset13 as ops

        scale = np.abs(w).max(0) / 127
        wq = np.clip(np.round(w / scale), -127, 127).astype(np.int8).T.copy()  # (n, k)
        x = ops.parameter([-1, w.shape[0]], np.float32, name="x")
        weights = ops.multiply(ops.convert(ops.constant(wq), "f32"), ops.constant(scale[:, None].astype(np.float32)))
        model = ov.Model([ops.matmul(x, weights, False, True)], [x])
        config = {"INFERENCE_NUM_THREADS": str(threads), "NUM_STREAMS": "1"}
        self._request = ov.Core().compile_model(model, "CPU", config).create_infer_request()
        self.version = ov.__version__

    def run(self, _outputs, feeds: dict) -> list:
        return [self._request.infer({0: feeds["x"]})[0]]


def main(tmp: Path) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--shapes", nargs="*", help="names of SHAPES to run (default: all but the test-sized one)")
    ap.add_argument("--variants", nargs="*", help="names of VARIANTS to run (default: DEFAULT_VARIANTS)")
    ap.add_argument("--rounds", type=int, help="rounds per shape (default: 5, 3 for the largest)")
    ap.add_argument("--rows", type=int, nargs="*", help="run each shape at these row counts instead of its own")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    report = {"cpu": cpu_summary(), "threads": args.threads, "onnxruntime": ort.__version__, "shapes": {}}
    print(json.dumps(report["cpu"]), flush=True)
    variants = {v: q for v, q in VARIANTS.items() if v in (args.variants or DEFAULT_VARIANTS)}
    for name, (m, k, n) in SHAPES.items():
        if name not in args.shapes if args.shapes else name.endswith("256 rows"):
            continue
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
            [numpy_helper.from_array(w, "w")],
        )
        src = tmp / "fp32.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(src))
        sessions = {}
        for variant, q in variants.items():
            if q is None:
                sessions[variant] = session(src, args.threads, False)
                continue
            if q[0] == "OpenVINO":
                sessions[variant] = OpenVinoProduct(w, args.threads)
                report["openvino"] = sessions[variant].version
                continue
            if q[0] == "MatMulNBits":
                dst = tmp / f"{m}x{k}x{n}-nbits8-{q[1]}.onnx"
                nbits = MatMulNBitsQuantizer(
                    onnx.load(str(src)), bits=8, block_size=q[1], is_symmetric=True, accuracy_level=4
                )
                nbits.process()
                nbits.model.save_model_to_file(str(dst))
                sessions[variant] = session(dst, args.threads, False)
                continue
            dst = tmp / f"{m}x{k}x{n}-{q[0].name}-{q[1]}.onnx"  # "QInt8 exact" reuses QInt8's
            if not dst.is_file():
                quantize_dynamic(
                    str(src),
                    str(dst),
                    weight_type=q[0],
                    reduce_range=q[1],
                    per_channel=True,
                    op_types_to_quantize=["MatMul"],
                    extra_options={"MatMulConstBOnly": True},
                )
            sessions[variant] = session(dst, args.threads, q[2])
        for rows in args.rows or [m]:  # the graphs take any number of rows
            label = name if rows == m else f"{rows}x{k}x{n} ({name}'s weights)"
            x = rng.standard_normal((rows, k)).astype(np.float32)
            x[:, rng.choice(k, 8, replace=False)] *= 30
            ref = x.astype(np.float64) @ w.astype(np.float64)
            errors = {v: float(np.abs(s.run(None, {"x": x})[0] - ref).max()) for v, s in sessions.items()}
            rounds, inner = args.rounds or (3 if rows * k * n > 3e10 else 5), max(1, int(2e9 // (rows * k * n)))
            times: dict[str, list[float]] = {v: [] for v in sessions}
            for _ in range(rounds):
                for v, s in sessions.items():
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        s.run(None, {"x": x})
                    times[v].append(1000 * (time.perf_counter() - t0) / inner)
            report["shapes"][label] = {
                "mkn": [rows, k, n],
                **{v: {"ms": statistics.median(times[v]), "max_abs_err": errors[v]} for v in sessions},
            }
            print(
                label,
                (rows, k, n),
                {v: f"{statistics.median(times[v]):.2f} ms, err {errors[v]:.2f}" for v in sessions},
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as models:  # the quantized models: ~40 MB a shape
        main(Path(models))
