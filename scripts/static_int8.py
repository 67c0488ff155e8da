"""Static INT8 (calibrated activation scales) against the dynamic INT8 that `mineru export --int8`
writes: issue 5's "dynamic or static with a calibration set of rendered pages; measure both".

    python scripts/static_int8.py WORK_DIR [--samples 6] [--threads 2]

WORK_DIR is `mineru bench --work-dir`'s folder (model/, onnx-fp32/ and onnx-int8/). The script
writes WORK_DIR/onnx-int8-static/: onnx-int8/ with both graphs replaced by onnxruntime's
quantize_static of the fp32 graphs (QDQ, per-channel s8 weights, u8 activations, MinMax
calibration; the same MatMuls as the dynamic export). The calibration set is rendered pages:
each examples/*.png and examples/report.pdf page at crop-like sizes, with the fp32 export's own
image features in its decoder prompts. Then time it beside the dynamic export with
`mineru bench`-style measurements and compare both with torch by running
scripts/parity_full_size.py on WORK_DIR (it takes every onnx-* folder there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import onnx
from PIL import Image

from mineru_cli.export import step_path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def calibration_pages(samples: int) -> list[Image.Image]:
    from mineru_cli.inputs import LoadOptions, discover, open_document

    pages = []
    for src in discover([ROOT / "examples"]):
        with open_document(src, LoadOptions()) as doc:
            pages += [doc.page(i).image for i in range(doc.page_count)]
    sizes = [(448, 448), (336, 672), (560, 420)]  # crop-like: 1,024 / 1,152 / 1,200 patches
    return [pages[i % len(pages)].resize(sizes[i % len(sizes)], Image.BICUBIC) for i in range(samples)]


class Reader:
    """onnxruntime's CalibrationDataReader over a list of feeds."""

    def __init__(self, feeds: list[dict]):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def feeds(fp32_dir: Path, pages: list[Image.Image], threads: int) -> tuple[list[dict], list[dict]]:
    from parity_full_size import page_input

    from mineru_cli.export.bench import mineru25_config
    from mineru_cli.export.bias_correction import prompt_feed
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime, vision_feed

    cfg = mineru25_config()
    rt = OnnxRuntime(fp32_dir, threads=threads)
    vision, decoder = [], []
    for i, page in enumerate(pages):
        x = page_input(cfg, page, 24, seed=100 + i)
        vision.append(vision_feed(x, rt.merge_size))
        decoder.append(
            prompt_feed(
                rt.prompt_embeds(x, rt.image_embeds([x])[0]),
                x.position_ids,
                rt.num_layers,
                rt.num_kv_heads,
                rt.head_dim,
            )
        )
    return vision, decoder


@contextlib.contextmanager
def plain_graph(export_dir: Path, role: str):
    """The export's graph for the quantizer: the decoder without its step path (the quantizer's
    node sorting does not see what If branches read from outside them), in a temporary folder
    beside the export with a copy of its weight data (onnx refuses hard-linked data)."""
    if role != "decoder":
        yield export_dir / f"{role}.onnx"
        return
    with tempfile.TemporaryDirectory(dir=export_dir.parent) as tmp:
        for data in export_dir.glob("decoder.onnx?*"):
            shutil.copyfile(data, Path(tmp) / data.name)
        model = onnx.load(str(export_dir / "decoder.onnx"), load_external_data=False)
        onnx.save(step_path.strip_step_path(model), str(Path(tmp) / "decoder.onnx"))
        yield Path(tmp) / "decoder.onnx"


def quantize(src: Path, dst: Path, data: list[dict], weight_type: str, reduce_range: bool) -> dict:
    """reduce_range as the dynamic export's: the QDQ products run on the same u8 x s8 kernels,
    whose 16-bit sums saturate on full 8-bit signed weights without VNNI (int8_target)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    quantize_static(
        str(src),
        str(dst),
        Reader(data),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        reduce_range=reduce_range,
        activation_type=QuantType.QUInt8,
        weight_type=getattr(QuantType, weight_type),
        calibrate_method=CalibrationMethod.MinMax,
        use_external_data_format=True,
        extra_options={"MatMulConstBOnly": True, "DefaultTensorType": 1},
        calibration_providers=["CPUExecutionProvider"],
    )
    return {
        "method": "onnxruntime.quantize_static",
        "format": "QDQ",
        "op_types": ["MatMul"],
        "weight_type": weight_type,
        "reduce_range": reduce_range,
        "activation_type": "QUInt8",
        "per_channel": True,
        "calibration": f"MinMax over {len(data)} rendered pages",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work_dir")
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from mineru_cli.vlm.export_format import read_manifest, write_manifest
    from mineru_cli.vlm.int8_target import cpu_summary

    work = Path(args.work_dir)
    fp32, dynamic, out = work / "onnx-fp32", work / "onnx-int8", work / "onnx-int8-static"
    t0 = time.monotonic()
    vision_data, decoder_data = feeds(fp32, calibration_pages(args.samples), args.threads)
    print(f"calibration inputs: {time.monotonic() - t0:.1f} s", flush=True)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(dynamic, partial, ignore=shutil.ignore_patterns("vision.onnx*", "decoder.onnx*"))
    manifest = read_manifest(dynamic)
    quantization = dict(manifest["quantization"])
    for role, data in (("vision", vision_data), ("decoder", decoder_data)):
        t0 = time.monotonic()
        with plain_graph(fp32, role) as src:
            dynamic_role = manifest["quantization"][role]
            quantization[role] = quantize(
                src, partial / f"{role}.onnx", data, dynamic_role["weight_type"], bool(dynamic_role.get("reduce_range"))
            )
        if role == "decoder":  # as `mineru export` does: the step path goes in after quantization
            step_path.rewrite(partial / "decoder.onnx", manifest["model"]["head_dim"])
        print(f"{role}: quantize_static {time.monotonic() - t0:.1f} s", flush=True)
    quantization.update(scheme="int8-static", made_on=cpu_summary())
    manifest.update(quantization=quantization, parity=None)
    write_manifest(partial, manifest)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    print(json.dumps(quantization, indent=1))


if __name__ == "__main__":
    main()
