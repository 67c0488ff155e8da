"""bf16 vision (issue 22 item 3): the vision graph under OpenVINO, which computes in bf16 where the
CPU has it (AMX, AVX-512 BF16), against ONNX Runtime's INT8 vision graph, alternating in one run.

    python scripts/bench_bf16_vision.py --export /work/bench/onnx-int8 \
        --ov /work/bench/onnx-fp32/vision.onnx /work/bench/vision-wint8/vision.onnx \
        --ov-python /work/ov-venv/bin/python [--sizes layout 2000 4800] [--rounds 3] \
        [--reference /work/bench/onnx-fp32] [--rss] [--json out.json]
    python scripts/bench_bf16_vision.py --weight-only-int8 /work/bench/onnx-fp32/vision.onnx \
        /work/bench/vision-wint8/vision.onnx

OpenVINO is not a dependency of this project: it lives in its own virtual environment (PyPI
`openvino`, and `onnxruntime-ep-openvino` if present), and this script starts itself there as one
worker process per `--ov` graph (`--worker`), which compiles the graph on OpenVINO's CPU device with
its default precision hint and answers one request a line: an .npz of the vision graph's inputs
in, the seconds one inference took out. Each worker reports at start the precision OpenVINO
compiled for (INFERENCE_PRECISION_HINT read back from the compiled model, and the runtime
precisions of its MatMul / FullyConnected nodes), and whether the OpenVINO execution provider
plugin for ONNX Runtime offers this CPU (its factory offers only Intel devices; on others the
timing is through OpenVINO itself, the same CPU plugin). At the end each worker's peak RSS
(VmHWM) is the peak of a fresh process that compiled the graph and ran every size.

The ONNX Runtime side runs here: `OnnxRuntime(--export).image_embeds`, as `mineru parse` runs it.
Per round every variant runs each size in turn (`mineru bench`'s synthetic images: the layout
image 1036x1036 = 5,476 patches and its crop images by patch count); medians are reported, and
each variant's ratio to ONNX Runtime's time. --reference EXPORT: each variant's image features
against that export's (fp32) features for the same image, relative RMS error (run once per size,
not timed). --rss: the peak RSS of a fresh process that loads --export and runs its vision graph
on the largest size (the ONNX Runtime figure beside the workers').

--weight-only-int8 SRC DST writes a copy of a float vision graph whose MatMul weights are INT8
(symmetric, per output channel) behind a DequantizeLinear: OpenVINO keeps such weights compressed
and decompresses them inside its products (weight-only INT8; the activations stay bf16).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"layout": (1036, 1036), "400": (280, 280), "2000": (560, 700), "4800": (840, 1120)}  # = bench.CROP_IMAGES


def vm_hwm() -> int:
    """This process's peak RSS in bytes (VmHWM: ru_maxrss carries over fork and exec)."""
    with open("/proc/self/status", encoding="utf-8") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM"))


# --- the worker: runs under the OpenVINO virtual environment (numpy, openvino) ---


def plugin_ep_devices() -> str:
    """Whether the OpenVINO execution provider plugin for ONNX Runtime offers a device here."""
    try:
        import onnxruntime as ort
        import onnxruntime_ep_openvino as ov_ep
    except ImportError as e:
        return f"not installed ({e})"
    try:
        ort.register_execution_provider_library("openvino_ep", ov_ep.get_library_path())
        devices = [d for d in ort.get_ep_devices() if d.ep_name == ov_ep.get_ep_name()]
        cpus = [d.device for d in ort.get_ep_devices() if d.device.type == ort.OrtHardwareDeviceType.CPU]
        vendor = f"{cpus[0].vendor} (0x{cpus[0].vendor_id:04x})" if cpus else "?"
        offered = [dict(d.ep_metadata).get("ov_device", "?") for d in devices]
        return f"onnxruntime {ort.__version__}: OpenVINO devices offered {offered} for a CPU of vendor {vendor}"
    except Exception as e:  # noqa: BLE001 - a plugin's own errors
        return f"failed: {type(e).__name__}: {e}"


def worker(args: argparse.Namespace) -> None:
    import numpy as np
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": args.threads, "PERFORMANCE_HINT": "LATENCY"}
    if args.precision:
        config["INFERENCE_PRECISION_HINT"] = args.precision
    t0 = time.perf_counter()
    compiled = core.compile_model(core.read_model(args.model), "CPU", config)
    compile_s = time.perf_counter() - t0
    precisions: dict[str, int] = {}
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        if "layerType" in info and info["layerType"].astype(str) in ("FullyConnected", "MatMul"):
            p = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else "?"
            precisions[p] = precisions.get(p, 0) + 1
    request = compiled.create_infer_request()
    out = sys.stdout
    ready = {
        "ready": True,
        "openvino": ov.get_version(),
        "device": core.get_property("CPU", "FULL_DEVICE_NAME"),
        "capabilities": list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
        "precision_hint": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "products_by_runtime_precision": precisions,
        "threads": int(compiled.get_property("INFERENCE_NUM_THREADS")),
        "compile_s": compile_s,
        "plugin_ep": plugin_ep_devices(),
    }
    out.write(json.dumps(ready) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        feed = dict(np.load(req["inputs"]))
        t0 = time.perf_counter()
        result = request.infer(feed)
        seconds = time.perf_counter() - t0
        if req.get("save"):
            np.save(req["save"], np.asarray(next(iter(result.values())), dtype=np.float32))
        out.write(json.dumps({"s": seconds, "peak_rss": vm_hwm()}) + "\n")
        out.flush()


# --- the driver: this project's environment ---


class OvWorker:
    def __init__(self, python: str, model: Path, threads: int, precision: str | None, log: Path):
        cmd = [python, __file__, "--worker", "--model", str(model), "--threads", str(threads)]
        if precision:
            cmd += ["--precision", precision]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"OpenVINO worker for {model} did not start: see {log}")
        self.ready = json.loads(line)
        self.peak_rss = 0

    def ask(self, inputs: Path, save: Path | None = None) -> dict:
        self.proc.stdin.write(json.dumps({"inputs": str(inputs), "save": str(save) if save else None}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("OpenVINO worker died")
        answer = json.loads(line)
        self.peak_rss = answer["peak_rss"]
        return answer

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


def fresh_vision_peak(export: Path, hw: tuple[int, int], threads: int) -> int:
    """Peak RSS of a fresh process that loads `export` and runs its vision graph on one image."""
    code = (
        "from mineru_cli.export.bench import mineru25_config, synthetic_input\n"
        "from mineru_cli.vlm.runtime_onnx import OnnxRuntime\n"
        f"rt = OnnxRuntime({str(export)!r}, threads={threads})\n"
        f"rt.image_embeds([synthetic_input(mineru25_config(), {tuple(hw)!r}, 8, seed=1)])\n"
        "print([int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmHWM')][0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def rel_rms(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b**2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--weight-only-int8", nargs=2, type=Path, metavar=("SRC", "DST"))
    ap.add_argument("--export", type=Path, default=Path("/work/bench/onnx-int8"), help="the ONNX Runtime export")
    ap.add_argument("--ov", type=Path, nargs="*", default=[], help="vision graphs to run under OpenVINO")
    ap.add_argument("--ov-python", default="/work/ov-venv/bin/python")
    ap.add_argument("--precision", help="OpenVINO INFERENCE_PRECISION_HINT (default: OpenVINO's own)")
    ap.add_argument("--sizes", nargs="+", default=["layout", "2000", "4800"], choices=list(SIZES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reference", type=Path, help="an export whose vision features are the reference")
    ap.add_argument("--rss", action="store_true", help="peak RSS of a fresh ONNX Runtime vision process")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.weight_only_int8:
        from mineru_cli.export.weight_only import weight_only_int8

        n = weight_only_int8(*args.weight_only_int8)
        print(f"{n} MatMul weights INT8 in {args.weight_only_int8[1]}")
        return

    import numpy as np

    from mineru_cli.export.bench import mineru25_config, synthetic_input
    from mineru_cli.vlm.int8_target import cpu_summary
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime, vision_feed

    log = lambda s: print(s, flush=True)  # noqa: E731
    report: dict = {"cpu": cpu_summary(), "threads": args.threads, "load_before": os.getloadavg()}
    log(f"CPU: {report['cpu']}")
    config = mineru25_config()
    tmp = Path(tempfile.mkdtemp(prefix="bf16-vision-"))
    inputs, images = {}, {}
    for size in ["400", *args.sizes]:
        images[size] = synthetic_input(config, SIZES[size], 8, seed=1)
        inputs[size] = tmp / f"{size}.npz"
        np.savez(inputs[size], **vision_feed(images[size], int(config.vision_config.spatial_merge_size)))
    rt = OnnxRuntime(args.export, threads=args.threads)
    ort_name = f"onnxruntime {args.export.name}"
    workers = {}
    for i, model in enumerate(args.ov):
        name = f"openvino {model.parent.name}/{model.name}"
        workers[name] = OvWorker(args.ov_python, model, args.threads, args.precision, tmp / f"worker{i}.log")
        log(f"{name}: {json.dumps(workers[name].ready)}")
    report["openvino"] = {n: w.ready for n, w in workers.items()}
    run = {ort_name: lambda size, save=None: _ort_run(rt, images[size], save)}
    for n, w in workers.items():
        run[n] = lambda size, save=None, w=w: w.ask(inputs[size], save)["s"]
    for f in run.values():  # warm-up: a small crop, untimed
        f("400")
    times: dict[str, dict[str, list[float]]] = {n: {s: [] for s in args.sizes} for n in run}
    for r in range(args.rounds):
        for size in args.sizes:
            for n, f in run.items():
                save = tmp / f"{list(run).index(n)}-{size}.npy" if r == 0 and args.reference else None
                times[n][size].append(f(size, save))
                log(f"round {r} {size}: {n} {times[n][size][-1]:.2f} s")
    med = {n: {s: statistics.median(v) for s, v in t.items()} for n, t in times.items()}
    report.update(sizes=args.sizes, rounds=args.rounds, seconds=times, median=med)
    report["over_onnxruntime"] = {n: {s: v / med[ort_name][s] for s, v in m.items()} for n, m in med.items()}
    report["peak_rss"] = {n: w.peak_rss for n, w in workers.items()}
    for w in workers.values():
        w.close()
    if args.reference:
        ref = OnnxRuntime(args.reference, threads=args.threads)
        report["rel_rms_vs_reference"] = {n: {} for n in run}
        for size in args.sizes:
            (want,) = ref.image_embeds([images[size]])
            for i, n in enumerate(run):
                report["rel_rms_vs_reference"][n][size] = rel_rms(np.load(tmp / f"{i}-{size}.npy"), want)
        del ref
    if args.rss:
        biggest = max(args.sizes, key=lambda s: SIZES[s][0] * SIZES[s][1])
        report["peak_rss"][ort_name] = fresh_vision_peak(args.export, SIZES[biggest], args.threads)
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


def _ort_run(rt, image, save: Path | None) -> float:
    import numpy as np

    t0 = time.perf_counter()
    (feats,) = rt.image_embeds([image])
    seconds = time.perf_counter() - t0
    if save:
        np.save(save, feats)
    return seconds


if __name__ == "__main__":
    main()
