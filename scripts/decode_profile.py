"""Where a decoding step's time goes, at batch 1 against batch 8: onnxruntime's profiler.

    python scripts/decode_profile.py EXPORT_DIR [--threads 2] [--steps 16] [--context 520] [--json OUT]

Loads the export as `mineru parse` does (OnnxRuntime) with the decoder's profiling on, prefills
rows of `context` tokens (bench.synthetic_input on the export's own config shape) and runs
`steps` decoding steps at batch 1, then the same at batch 8; the profile's node events that fall
inside each step's run are summed per op type and per node, in ms per step. The output layer is
the MatMul whose weight has the vocabulary's width (named here "lm_head").
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from mineru_cli.vlm.int8_target import cpu_summary
from mineru_cli.vlm.runtime_onnx import OnnxRuntime


class ProfiledRuntime(OnnxRuntime):
    def _session_options(self, threads: int, role: str):
        opts = super()._session_options(threads, role)
        if role == "decoder":
            opts.enable_profiling = True
            opts.profile_file_prefix = str(self._prefix)
        return opts

    def __init__(self, export_dir, prefix: Path, **kw):
        self._prefix = prefix
        super().__init__(export_dir, **kw)


def _config(export_dir: Path):
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig.from_pretrained(str(export_dir))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--context", type=int, default=520)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from mineru_cli.export.bench import synthetic_input

    config = _config(args.export_dir)
    prefix = Path("/tmp") / "mineru_decode_profile"
    rt = ProfiledRuntime(args.export_dir, prefix, threads=args.threads)
    vocab = rt.vocab_size
    rows = [synthetic_input(config, (56, 56), args.context + 3 * i, seed=10 + i) for i in range(max(args.batches))]
    plan = []  # (batch, "prefill" | "step") per decoder run, in order
    for b in args.batches:
        logits = rt.prefill(rows[:b])
        plan += [(b, "prefill")] * b  # one decoder call per row (prompts under the chunk size)
        tokens = logits.argmax(-1).astype(np.int64)
        for _ in range(args.steps):
            tokens = rt.step(tokens).argmax(-1).astype(np.int64)
        plan += [(b, "step")] * args.steps
    path = rt._decoder.end_profiling()
    events = json.loads(Path(path).read_text())
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    if len(runs) != len(plan):
        raise SystemExit(f"{len(runs)} decoder runs profiled, {len(plan)} expected")
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    # the output layer: the node whose output has the vocabulary's width
    per: dict[int, dict] = {
        b: {"op": defaultdict(float), "node": defaultdict(float), "run_ms": []} for b in args.batches
    }
    starts = [r["ts"] for r in runs]

    for r, (b, kind) in zip(runs, plan):
        if kind == "step":
            per[b]["run_ms"].append(r["dur"] / 1000)
    for e in nodes:
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < 0 or e["ts"] > runs[i]["ts"] + runs[i]["dur"]:
            continue
        b, kind = plan[i]
        if kind != "step":
            continue
        name = e["name"].removesuffix("_kernel_time")
        op = e.get("args", {}).get("op_name", "?")
        shapes = json.dumps(e.get("args", {}).get("output_type_shape", []))
        if str(vocab) in shapes and op in ("MatMulInteger", "MatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"):
            op = f"{op} (lm_head)"
        per[b]["op"][op] += e["dur"] / 1000 / args.steps
        per[b]["node"][name] += e["dur"] / 1000 / args.steps
    report = {"cpu": cpu_summary(), "threads": args.threads, "export": str(args.export_dir), "batches": {}}
    print(json.dumps(report["cpu"]))
    for b in args.batches:
        ops = dict(sorted(per[b]["op"].items(), key=lambda kv: -kv[1]))
        report["batches"][b] = {
            "step_ms_median": statistics.median(per[b]["run_ms"]),
            "node_ms_per_step": sum(ops.values()),
            "op_ms_per_step": ops,
            "top_nodes": dict(sorted(per[b]["node"].items(), key=lambda kv: -kv[1])[:12]),
        }
        print(
            f"batch {b}: step {report['batches'][b]['step_ms_median']:.1f} ms (model_run), nodes "
            f"{report['batches'][b]['node_ms_per_step']:.1f} ms"
        )
        for op, ms in ops.items():
            print(f"   {op:40s} {ms:7.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
