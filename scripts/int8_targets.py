"""The INT8 weight settings of each CPU target, side by side on the full-size random model: the
measurement behind mineru_cli/vlm/int8_target.py's choice for plain AVX2.

    python scripts/int8_targets.py WORK_DIR [--threads 2] [--repeats 3]

WORK_DIR is `mineru bench --work-dir`'s folder: its random model/ and fp32 export onnx-fp32/ are
built if missing. The script quantizes the fp32 graphs once per variant into WORK_DIR/onnx-int8-NAME
(as `mineru export --int8` does: every constant-weight MatMul, per channel, the step path added
after), then times the variants alternately in one process (`mineru bench`'s vision, prefill and
decode figures, ratios to the first) and prints the CPU it ran on. Variants:

    avx2        what `--target avx2` writes (int8_target.int8_settings: 7-bit weights in both graphs,
                the vision graph bias-corrected as int8_target.corrected_graphs says)
    avx2_u8_vision   what it wrote before: unsigned vision weights (u8 x u8 kernel), 7-bit decoder
    s7          signed 7-bit weights (reduce_range) in both graphs, uncorrected; s7_bc: vision corrected
    s7_vision_u8_decoder   signed 7-bit vision weights, unsigned decoder weights
    vnni        signed 8-bit weights in both graphs (`--target avx512-vnni` / `amx`)
    previous    unsigned vision, signed 8-bit decoder: what an export made on plain AVX2 had before
                targets existed

Every variant runs on the fast kernels (exact_int8=False: on a CPU without VNNI the saturating
ones' speed is real, their results are not); on such a CPU "vnni_exact" is the vnni export the
way the runtime runs it there, on onnxruntime's exact u8 x u8 kernels. Parity with torch:
`python scripts/parity_full_size.py WORK_DIR --exports onnx-int8-avx2 ...` (--fast for the
fast kernels whatever the CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

U8 = {"weight_type": "QUInt8", "reduce_range": False}


def variants() -> dict[str, dict[str, dict]]:
    from mineru_cli.vlm.int8_target import corrected_graphs, int8_settings

    vnni = int8_settings("avx512-vnni")
    s7 = {"weight_type": "QInt8", "reduce_range": True}
    avx2 = int8_settings("avx2")
    for role in corrected_graphs("avx2"):
        avx2[role] = {**avx2[role], "bias_correction": True}
    return {
        "avx2": avx2,
        # what `--target avx2` wrote before its vision graph became 7-bit and bias-corrected
        "avx2_u8_vision": {"vision": U8, "decoder": int8_settings("avx2")["decoder"]},
        "s7_bc": {"vision": {**s7, "bias_correction": True}, "decoder": s7},
        "s7": {"vision": s7, "decoder": s7},
        "s7_vision_u8_decoder": {"vision": s7, "decoder": U8},
        "vnni": vnni,
        "previous": {"vision": U8, "decoder": vnni["decoder"]},
        # issue 22: signed 7-bit weights for some kinds of product only (weight_kind), the
        # rest unsigned; "lm_head_s7" is what `--target avx2` wrote before
        "lm_head_s7": {"vision": U8, "decoder": {**U8, "kinds": {"lm_head": s7}}},
        "s7_decoder": {"vision": U8, "decoder": s7},
        "s7_decoder_mlp": {"vision": U8, "decoder": {**U8, "kinds": {"mlp": s7, "lm_head": s7}}},
        "s7_vision_mlp": {"vision": {**U8, "kinds": {"mlp": s7}}, "decoder": s7},
        "s7_vision_attention": {"vision": {**U8, "kinds": {"attention": s7}}, "decoder": s7},
        "s7_vision_mlp_merger": {"vision": {**U8, "kinds": {"mlp": s7, "merger": s7}}, "decoder": s7},
    }


def build(work: Path, threads: int) -> None:
    from mineru_cli.export.bench import mineru25_config, random_model, write_model_folder
    from mineru_cli.export.onnx_export import export_model
    from mineru_cli.vlm.export_format import is_export_dir

    if not (work / "model" / "config.json").is_file():
        write_model_folder(random_model(mineru25_config()), work / "model")
    if not is_export_dir(work / "onnx-fp32"):
        export_model(work / "model", work / "onnx-fp32", verify=False, threads=threads, log=print)


def _settings_of(table: dict) -> dict:
    """The settings a variant asked for, from the manifest's table of a graph made by it."""
    out = {k: table[k] for k in ("weight_type", "reduce_range")}
    own = dict(table.get("kinds", {}))
    if "lm_head" in table:  # as scripts/int8_lm_head.py and dd961b8's export recorded it
        own["lm_head"] = table["lm_head"]
    kinds = {k: {f: v[f] for f in ("weight_type", "reduce_range")} for k, v in own.items()}
    if kinds:
        out["kinds"] = kinds
    if "bias_correction" in table:
        out["bias_correction"] = True
    return out


def calibration_means(work: Path, role: str) -> dict:
    """The mean inputs of the fp32 export's `role` graph on the calibration pages, as `mineru
    export` measures them (onnx_export.calibration_means; kept in WORK_DIR)."""
    from mineru_cli.export import onnx_export
    from mineru_cli.vlm.export_format import read_manifest

    cached = work / f"calibration-means-{role}.npz"
    if cached.is_file():
        return dict(np.load(cached))
    fp32 = work / "onnx-fp32"
    config = json.loads((work / "model" / "config.json").read_text())
    ids = tuple(int(config[k]) for k in ("vision_start_token_id", "image_token_id", "vision_end_token_id"))
    means = onnx_export.calibration_means(
        work / "model",
        ids,
        fp32,
        fp32 / onnx_export.GRAPHS["embed_tokens"],
        read_manifest(fp32)["model"],
        2,
        decoder=role == "decoder",
    )[role]
    np.savez(cached, **means)
    return means


def _made_with(work: Path, role: str, settings: dict, but: Path) -> Path | None:
    """Another variant's export under `work` whose `role` graph has these settings."""
    from mineru_cli.vlm.export_format import is_export_dir, read_manifest

    for other in sorted(work.glob("onnx-int8-*")):
        if other != but and is_export_dir(other) and not other.name.endswith(".partial"):
            made = read_manifest(other).get("quantization") or {}
            if isinstance(made.get(role), dict) and _settings_of(made[role]) == settings:
                return other
    return None


def quantize_variant(work: Path, name: str, settings: dict[str, dict]) -> Path:
    from static_int8 import plain_graph

    from mineru_cli.export import step_path
    from mineru_cli.export.bias_correction import correct
    from mineru_cli.export.onnx_export import quantize_int8_by_kind
    from mineru_cli.vlm.export_format import is_export_dir, read_manifest, write_manifest
    from mineru_cli.vlm.int8_target import cpu_summary

    fp32, out = work / "onnx-fp32", work / f"onnx-int8-{name}"
    if is_export_dir(out):
        made = read_manifest(out)["quantization"]
        if {r: _settings_of(made[r]) for r in settings} == settings:
            return out
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(fp32, partial, ignore=shutil.ignore_patterns("vision.onnx*", "decoder.onnx*", "manifest.json"))
    manifest = read_manifest(fp32)
    quantization = {"scheme": "int8", "target": name, "made_on": cpu_summary()}
    for role in ("vision", "decoder"):
        print(f"{name}: quantizing {role} {settings[role]}", flush=True)
        # the same vision graph already made for another variant: linked (the decoder is
        # rewritten below, which must not touch another export's file)
        same = _made_with(work, role, settings[role], out) if role == "vision" else None
        if same is not None:
            for f in same.glob(f"{role}.onnx*"):
                os.link(f, partial / f.name)
            quantization[role] = read_manifest(same)["quantization"][role]
            continue
        own = dict(settings[role])
        kinds = own.pop("kinds", {})
        corrected = own.pop("bias_correction", False)
        with plain_graph(fp32, role) as src:
            quantization[role] = quantize_int8_by_kind(
                src, partial / f"{role}.onnx", own, kinds, role, manifest["model"], partial / f".{role}-passes"
            )
            if corrected:
                quantization[role]["bias_correction"] = correct(
                    src, partial / f"{role}.onnx", calibration_means(work, role)
                )
    step_path.rewrite(partial / "decoder.onnx", manifest["model"]["head_dim"])
    manifest.update(quantization=quantization, parity=None)
    write_manifest(partial, manifest)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def time_vision(runtimes: dict, image_hw: tuple[int, int], repeats: int) -> dict:
    """The vision phase alone, the variants alternating within each round: seconds per image."""
    import statistics
    import time

    from mineru_cli.export.bench import mineru25_config, synthetic_input
    from mineru_cli.vlm.int8_target import cpu_summary

    x = synthetic_input(mineru25_config(), image_hw, 8, seed=1)
    patches = int(np.prod(x.image_grid_thw[0]))
    times: dict[str, list[float]] = {n: [] for n in runtimes}
    for r in range(repeats):
        for name, rt in runtimes.items():
            t0 = time.perf_counter()
            rt.image_embeds([x])
            times[name].append(time.perf_counter() - t0)
        print(f"round {r}:", {n: round(t[-1], 2) for n, t in times.items()}, flush=True)
    return {
        "cpu": cpu_summary(),
        "image_hw": list(image_hw),
        "patches": patches,
        "vision_s": {n: statistics.median(t) for n, t in times.items()},
        "rounds": times,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work_dir", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    ap.add_argument("--build-only", action="store_true", help="make the exports, time nothing")
    ap.add_argument("--no-crops", action="store_true", help="time the layout image only, not the crop sizes")
    ap.add_argument(
        "--vision-only",
        type=int,
        nargs=2,
        metavar=("H", "W"),
        help="time only the vision phase, on one synthetic image of H x W px (alternating, medians)",
    )
    args = ap.parse_args()

    import torch

    from mineru_cli.export.bench import PAGE_KEYS, bench_runtimes, mineru25_config, page_seconds
    from mineru_cli.vlm.export_format import read_manifest
    from mineru_cli.vlm.int8_target import cpu_summary, graphs_needing_exact_kernels
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    torch.set_num_threads(args.threads)
    build(args.work_dir, args.threads)
    chosen = {n: s for n, s in variants().items() if not args.only or n in args.only}
    exports = {n: quantize_variant(args.work_dir, n, s) for n, s in chosen.items()}
    if args.build_only:
        return
    runtimes = {n: OnnxRuntime(p, threads=args.threads, exact_int8=False) for n, p in exports.items()}
    if args.vision_only:
        print(json.dumps(time_vision(runtimes, tuple(args.vision_only), args.repeats), indent=1))
        return
    if "vnni" in exports and graphs_needing_exact_kernels(read_manifest(exports["vnni"])):
        # what `mineru parse` runs on this CPU for an export made for VNNI/AMX
        runtimes["vnni_exact"] = OnnxRuntime(exports["vnni"], threads=args.threads)
    report = {
        "cpu": cpu_summary(),
        "threads": args.threads,
        "variants": chosen,
        **bench_runtimes(
            runtimes,
            mineru25_config(),
            repeats=args.repeats,
            crop_sizes={} if args.no_crops else None,
            log=lambda m: print(m, flush=True),
        ),
    }
    report["page_s"] = {n: page_seconds(m) for n, m in report["median"].items() if PAGE_KEYS <= set(m)}
    (args.work_dir / "int8_targets.json").write_text(json.dumps(report, indent=2))
    print(
        json.dumps(
            {k: report[k] for k in ("cpu", "median", next(k for k in report if k.startswith("speedup")), "page_s")},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
