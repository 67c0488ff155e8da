"""`mineru bench`'s roofline and phase fractions for ONNX exports alone (no torch reference, no
export step): for a quick look at how close one export runs to this machine's kernels.

    python scripts/bench_roofline.py EXPORT [EXPORT ...] [--threads 2] [--repeats 1] [--crops 2000]
        [--no-layout] [--json OUT]

The exports are of the full-size random MinerU2.5-shaped model (`mineru bench --work-dir`'s
onnx-* folders). The roofline is measured first (export.roofline.measure_roofline), then the
exports run alternately as in `mineru bench` (export.bench.bench_runtimes: the layout image, the
crops named by --crops, a 1,400-token prefill, decode steps at batch 1 and 8 over ~520-token
prompts), then the roofline again (the faster of the two taken), then each phase's fraction of
the roofline and the modelled page at it (the fastest page the machine's kernels allow each
export's weight kinds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from mineru_cli.export.bench import (
    CROP_IMAGES,
    CROPS,
    PAGE_KEYS,
    bench_runtimes,
    fractions_for,
    mineru25_config,
    page_modes,
    roofline_for,
    roofline_page,
    roofline_table,
)
from mineru_cli.vlm import openvino_vision
from mineru_cli.vlm.int8_target import cpu_summary
from mineru_cli.vlm.runtime_onnx import OnnxRuntime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("exports", type=Path, nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--crops", type=int, nargs="*", default=[2000], help=f"crop sizes of {sorted(CROP_IMAGES)}")
    ap.add_argument("--no-layout", action="store_true", help="leave out the 1036x1036 layout image")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    config = mineru25_config()
    cpu = cpu_summary()
    print(f"CPU: {cpu['model']} ({cpu['machine']}; {' '.join(cpu['isa'])}); INT8 target {cpu['int8_target']}")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    bench_kw: dict = {"crop_sizes": {n: CROP_IMAGES[n] for n in args.crops}}
    if args.no_layout:
        bench_kw["image_hw"] = None
    report: dict = {"cpu": cpu, "threads": args.threads}
    report["roofline"] = roofline_for(config, args.threads, None, bench_kw, print)
    runtimes = {p.name: OnnxRuntime(p, threads=args.threads) for p in args.exports}
    report.update(bench_runtimes(runtimes, config, repeats=args.repeats, log=print, **bench_kw))
    report["roofline"] = roofline_for(config, args.threads, None, bench_kw, print, report["roofline"])
    exports = {p.name: (p, openvino_vision.ONNXRUNTIME) for p in args.exports}
    report["roofline_fraction"] = {
        name: fractions_for(name, report["median"][name], report["roofline"], config, exports, bench_kw)
        for name in report["median"]
    }
    report["roofline_page_s"] = {name: roofline_page(name, report["roofline"], config, exports) for name in exports}
    # the measured page only where every phase of the page at the roofline was measured (the
    # layout image and all three crop sizes): a crop scaled from the layout image is not comparable
    measured = PAGE_KEYS | {f"vision_s_{p}" for _, p, _ in CROPS}
    report["page_s"] = {name: page_modes(m) for name, m in report["median"].items() if measured <= set(m)}
    title, cols, rows = roofline_table(report)
    print(title)
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(row))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
