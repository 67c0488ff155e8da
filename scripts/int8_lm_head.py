"""The output layer's INT8 weight kind on a CPU without VNNI: an export's lm_head re-quantized to
signed 7-bit weights (onnxruntime's reduce_range; its u8 x s8 kernel, exact here), the rest of
the export unchanged, then decoding steps timed against the original.

    python scripts/int8_lm_head.py SRC_EXPORT DST_EXPORT          # writes DST (hard links + new decoder)
    python scripts/int8_lm_head.py --time A B [C ...] [--rounds 6] [--steps 16] [--ref FP32_EXPORT]

The lm_head of MinerU2.5 is tied to the embedding table, so its float weights are the export's
embed_tokens.npy (checked against the dequantized INT8 weights before anything is written).
--time runs decode steps at batch 1 and 8 (bench_runtimes' decode rows: ~520-token prompts)
alternately over the exports, medians of the rounds; with --ref, each export's step logits are
compared (cosine min / mean, max abs diff) with that export's over the same tokens (teacher
forced): a decoder-only parity figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

QMAX = 64  # reduce_range signed weights: -64..64


def requantize(src: Path, dst: Path) -> None:
    import onnx
    from onnx import numpy_helper

    from mineru_cli.vlm.export_format import read_manifest, write_manifest

    manifest = read_manifest(src)
    vocab = int(manifest["model"]["vocab_size"])
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file() and not p.name.startswith("decoder.onnx") and p.name != "manifest.json":
            os.link(p, dst / p.name)
    model = onnx.load(str(src / "decoder.onnx"))
    inits = {t.name: t for t in model.graph.initializer}
    node = next(
        n
        for n in model.graph.node
        if n.op_type == "MatMulInteger" and n.input[1] in inits and tuple(inits[n.input[1]].dims)[-1] == vocab
    )
    n_w, n_z = node.input[1], node.input[3]
    scale_name = n_w.removesuffix("_quantized") + "_scale"
    q_old = numpy_helper.to_array(inits[n_w]).astype(np.float32)
    z_old = numpy_helper.to_array(inits[n_z]).astype(np.float32)
    s_old = numpy_helper.to_array(inits[scale_name]).astype(np.float32)
    w = np.load(src / "embed_tokens.npy", mmap_mode="r").T.astype(np.float32)  # (hidden, vocab)
    err = np.abs((q_old - z_old) * s_old - w).max(axis=0) / s_old
    if err.max() > 0.51:
        raise SystemExit(f"the output layer is not the embedding table's transpose (error {err.max():.2f} steps)")
    scale = (np.abs(w).max(axis=0) / QMAX).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -QMAX, QMAX).astype(np.int8)
    for name, array in ((n_w, q), (n_z, np.zeros(vocab, dtype=np.int8)), (scale_name, scale)):
        inits[name].CopyFrom(numpy_helper.from_array(array, name))
    onnx.save(model, str(dst / "decoder.onnx"), save_as_external_data=True, location="decoder.onnx.data")
    manifest["quantization"]["decoder"]["lm_head"] = {"weight_type": "QInt8", "reduce_range": True}
    write_manifest(dst, manifest)
    print(f"wrote {dst}: lm_head {node.name} with signed 7-bit weights")


def time_exports(exports: list[Path], rounds: int, steps: int, threads: int, ref: Path | None) -> dict:
    from mineru_cli.export.bench import mineru25_config, synthetic_input
    from mineru_cli.export.onnx_export import compare_logits
    from mineru_cli.vlm.int8_target import cpu_summary
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    config = mineru25_config()
    rows = [synthetic_input(config, (56, 56), 520 + 3 * i, seed=10 + i) for i in range(8)]
    runtimes = {p.name: OnnxRuntime(p, threads=threads) for p in exports}
    report: dict = {"cpu": cpu_summary(), "threads": threads, "rounds": rounds, "steps": steps, "ms": {}}
    print(json.dumps(report["cpu"]), flush=True)
    times: dict[str, dict[int, list[float]]] = {n: {1: [], 8: []} for n in runtimes}
    for r in range(rounds):
        for name, rt in runtimes.items():
            for b in (1, 8):
                tokens = rt.prefill(rows[:b]).argmax(-1).astype(np.int64)
                t0 = time.perf_counter()
                for _ in range(steps):
                    tokens = rt.step(tokens).argmax(-1).astype(np.int64)
                times[name][b].append(1000 * (time.perf_counter() - t0) / steps)
        print(f"round {r}:", {n: {b: round(t[b][-1], 1) for b in t} for n, t in times.items()}, flush=True)
    for name, t in times.items():
        b1, b8 = statistics.median(t[1]), statistics.median(t[8])
        report["ms"][name] = {"b1": b1, "b8": b8, "b8_over_b1": b8 / b1, "rounds": t}
        print(f"{name}: b1 {b1:.1f} ms, b8 {b8:.1f} ms, b8/b1 {b8 / b1:.2f}", flush=True)
    if ref is not None:
        ref_rt = OnnxRuntime(ref, threads=threads)
        # teacher forced over the reference's greedy tokens, batch 8
        logits, tokens_seq = [ref_rt.prefill(rows)], []
        for _ in range(steps):
            tokens_seq.append(logits[-1].argmax(-1).astype(np.int64))
            logits.append(ref_rt.step(tokens_seq[-1]))
        reference = np.stack(logits)  # (steps + 1, batch, vocab)
        report["parity_vs"] = ref.name
        for name, rt in runtimes.items():
            cand = [rt.prefill(rows)] + [rt.step(t) for t in tokens_seq]
            figures = compare_logits(reference, np.stack(cand))
            report.setdefault("parity", {})[name] = figures
            print(name, "vs", ref.name, json.dumps({k: round(v, 5) for k, v in figures.items()}), flush=True)
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", type=Path, nargs="+")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ref", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not args.time:
        src, dst = args.paths
        requantize(src, dst)
        return
    report = time_exports(args.paths, args.rounds, args.steps, args.threads, args.ref)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
