"""Vision attention at MinerU2.5's sizes: onnxruntime's variants against torch's SDPA.

    python scripts/vision_attention.py [--threads 2] [--rounds 3] [--sizes 5476 2000 4800] [--json OUT]

Full (non-causal) attention over one image, 16 heads of 80 (embed 1280), q/k/v as the vision
graph has them: (1, N, 1280). Variants, timed alternately (medians of the rounds), each checked
against a float64 reference (max abs error):
- ort_mha: com.microsoft.MultiHeadAttention, what the export writes today;
- ort_attention23: ONNX opset-23 Attention (4-D inputs: (1, heads, N, d));
- ort_chunked_<c>: MatMul + Softmax + MatMul over query chunks of c rows (all heads at once),
  so a chunk's score block is heads x c x N floats instead of heads x N x N;
- torch_sdpa: torch.nn.functional.scaled_dot_product_attention on (1, heads, N, d), as the
  HF vision blocks call it (on 3-D (heads, N, d) it took 3.4x as long: 14.9 s at 5476).
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
from onnx import TensorProto, helper

from mineru_cli.vlm.int8_target import cpu_summary

HEADS, HEAD_DIM = 16, 80
E = HEADS * HEAD_DIM
SIZES = (5476, 2000, 4800)  # layout image, 2000- and 4800-patch crops


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(graph, path: Path, opset: int = 18) -> Path:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def mha_graph(path: Path) -> Path:
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o"], domain="com.microsoft", num_heads=HEADS)
    return _save(helper.make_graph([node], "g", [_vi(n, [1, None, E]) for n in "qkv"], [_vi("o", [1, None, E])]), path)


def attention23_graph(path: Path) -> Path:
    node = helper.make_node("Attention", ["q", "k", "v"], ["o"])
    shape = [1, HEADS, None, HEAD_DIM]
    return _save(helper.make_graph([node], "g", [_vi(n, shape) for n in "qkv"], [_vi("o", shape)]), path, opset=23)


def chunked_graph(path: Path, n: int, chunk: int) -> Path:
    """q (heads, N, d) pre-scaled, kt (heads, d, N), v (heads, N, d) -> (heads, N, d)."""
    nodes, outs = [], []
    starts = list(range(0, n, chunk))
    split = helper.make_tensor("split", TensorProto.INT64, [len(starts)], [min(chunk, n - s) for s in starts])
    nodes.append(helper.make_node("Split", ["q", "split"], [f"q{i}" for i in range(len(starts))], axis=1))
    for i in range(len(starts)):
        nodes += [
            helper.make_node("MatMul", [f"q{i}", "kt"], [f"s{i}"]),
            helper.make_node("Softmax", [f"s{i}"], [f"p{i}"], axis=-1),
            helper.make_node("MatMul", [f"p{i}", "v"], [f"o{i}"]),
        ]
        outs.append(f"o{i}")
    nodes.append(helper.make_node("Concat", outs, ["o"], axis=1))
    graph = helper.make_graph(
        nodes,
        "g",
        [_vi("q", [HEADS, n, HEAD_DIM]), _vi("kt", [HEADS, HEAD_DIM, n]), _vi("v", [HEADS, n, HEAD_DIM])],
        [_vi("o", [HEADS, n, HEAD_DIM])],
        [split],
    )
    return _save(graph, path)


def session(path: Path, threads: int):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--chunks", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp())
    report = {
        "cpu": cpu_summary(),
        "threads": args.threads,
        "onnxruntime": ort.__version__,
        "torch": torch.__version__,
        "sizes": {},
    }
    print(json.dumps(report["cpu"]), flush=True)
    rng = np.random.default_rng(0)
    for n in args.sizes:
        q, k, v = (rng.standard_normal((1, n, E)).astype(np.float32) for _ in range(3))
        qh, kh, vh = (t.reshape(n, HEADS, HEAD_DIM).transpose(1, 0, 2).copy() for t in (q, k, v))  # (H, N, d)
        scale = HEAD_DIM**-0.5
        # float64 reference, one head at a time
        ref = np.empty((HEADS, n, HEAD_DIM))
        for h in range(HEADS):
            s = (qh[h].astype(np.float64) * scale) @ kh[h].T.astype(np.float64)
            s = np.exp(s - s.max(-1, keepdims=True))
            ref[h] = (s / s.sum(-1, keepdims=True)) @ vh[h]
        ref_flat = ref.transpose(1, 0, 2).reshape(1, n, E)
        runs = {}
        s_mha = session(mha_graph(tmp / "mha.onnx"), args.threads)
        runs["ort_mha"] = (lambda s=s_mha, f={"q": q, "k": k, "v": v}: s.run(None, f)[0], ref_flat)
        try:
            s23 = session(attention23_graph(tmp / "att23.onnx"), args.threads)
            q4, k4, v4 = qh[None], kh[None], vh[None]
            runs["ort_attention23"] = (lambda s=s23, f={"q": q4, "k": k4, "v": v4}: s.run(None, f)[0][0], ref)
        except Exception as exc:  # noqa: BLE001 - reported, the others still run
            report.setdefault("unavailable", {})["ort_attention23"] = str(exc)[:300]
        qs, kt = (qh * scale).astype(np.float32), kh.transpose(0, 2, 1).copy()
        for c in args.chunks:
            s_c = session(chunked_graph(tmp / f"chunk{c}_{n}.onnx", n, c), args.threads)
            runs[f"ort_chunked_{c}"] = (lambda s=s_c, f={"q": qs, "kt": kt, "v": vh}: s.run(None, f)[0], ref)
        tq, tk, tv = (torch.from_numpy(t)[None] for t in (qh, kh, vh))  # (1, H, N, d), as HF calls it

        def sdpa(tq=tq, tk=tk, tv=tv):
            with torch.inference_mode():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)[0].numpy()

        runs["torch_sdpa"] = (sdpa, ref)
        errors = {name: float(np.abs(fn() - r).max()) for name, (fn, r) in runs.items()}  # also a warm-up
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, (fn, _r) in runs.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        flops = 4 * HEADS * n * n * HEAD_DIM  # QK^T and PV
        report["sizes"][n] = {
            name: {
                "ms": 1000 * statistics.median(t),
                "gflops": flops / statistics.median(t) / 1e9,
                "max_abs_err": errors[name],
                "rounds_ms": [1000 * x for x in t],
            }
            for name, t in times.items()
        }
        print(
            n,
            {
                name: f"{r['ms']:.0f} ms ({r['gflops']:.0f} GFLOP/s, err {r['max_abs_err']:.1e})"
                for name, r in report["sizes"][n].items()
            },
            flush=True,
        )
        del runs, s_mha
    if "unavailable" in report:
        print("unavailable:", report["unavailable"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
