"""The vision encoder on OpenVINO (bf16) through ONNX Runtime's plugin, as `mineru bench` measures
it: the export's weight-only INT8 graph, why it cannot run on a machine, and its image features
where it can (an Intel CPU with AMX or AVX-512 BF16 and the plugin installed)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from onnx_fixtures import _export, tiny_onnx_int8, tiny_onnx_int8_report  # noqa: E402,F401
from tiny_fixtures import tiny_vlm  # noqa: E402,F401

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.engines.vlm import VlmEngine  # noqa: E402
from mineru_cli.vlm import openvino_vision  # noqa: E402
from mineru_cli.vlm.export_format import read_manifest, verify_export  # noqa: E402
from mineru_cli.vlm.runtime_onnx import OnnxRuntime, vision_feed  # noqa: E402


@pytest.fixture
def openvino_here():
    """Skips where the plugin cannot run the vision graph (asked only by the tests that need it,
    so that collecting this module loads no OpenVINO library)."""
    why = openvino_vision.not_here(ort)
    if why:
        pytest.skip(f"OpenVINO vision cannot run here: {why}")


@pytest.fixture(scope="module")
def tiny_onnx_openvino(tiny_vlm, tmp_path_factory):
    from pathlib import Path

    report = _export(tiny_vlm, tmp_path_factory, "int8-openvino", int8=True, exporter="torchscript", openvino=True)
    return Path(report["out_dir"])


@pytest.fixture(scope="module")
def page(tiny_vlm):
    from PIL import Image

    return Image.open(tiny_vlm / "page.png").convert("RGB")


def test_export_writes_the_weight_only_int8_vision_graph(tiny_onnx_openvino, tiny_onnx_int8):
    import onnx

    manifest = verify_export(tiny_onnx_openvino)
    assert manifest["graphs"][openvino_vision.GRAPH_ROLE] == openvino_vision.VISION_GRAPH
    assert openvino_vision.VISION_GRAPH in manifest["files"]
    assert openvino_vision.GRAPH_ROLE not in read_manifest(tiny_onnx_int8)["graphs"]
    graph = onnx.load(str(tiny_onnx_openvino / openvino_vision.VISION_GRAPH), load_external_data=False).graph
    weights = {i.name: i for i in graph.initializer}
    dequantized = [n for n in graph.node if n.op_type == "DequantizeLinear"]
    assert dequantized and all(weights[n.input[0]].data_type == onnx.TensorProto.INT8 for n in dequantized)
    # every weight product reads its weight through a DequantizeLinear: no float weight is left
    products = [n for n in graph.node if n.op_type == "MatMul"]
    assert not [n.name for n in products if n.input[1] in weights]
    assert sum(n.input[1].endswith("_wint8_dq") for n in products) == len(dequantized)


def test_weight_only_graph_reads_images_as_the_float_graph_does(tiny_onnx_openvino, tiny_vlm, page, tmp_path):
    """On onnxruntime's own kernels the weight-only graph's features are within INT8 rounding of
    the float graph's (the tiny model's vision encoder exported beside it, the page's patches)."""
    from mineru_cli.export.onnx_export import _load_model, export_vision

    fp32 = tmp_path / "vision.onnx"
    export_vision(_load_model(tiny_vlm / "model"), fp32, "torchscript")
    engine = VlmEngine(tiny_onnx_openvino, threads=1, runtime="onnx")
    feed = vision_feed(_layout_input(engine, page), engine.runtime.merge_size)
    ref = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).run(["image_embeds"], feed)[0]
    ov_graph = tiny_onnx_openvino / openvino_vision.VISION_GRAPH
    got = ort.InferenceSession(str(ov_graph), providers=["CPUExecutionProvider"]).run(["image_embeds"], feed)[0]
    rel = float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean(ref**2)))
    assert got.shape == ref.shape and 1e-6 < rel < 0.03, rel


def test_a_weight_read_elsewhere_stays_float_and_a_rerun_rewrites_the_data(tmp_path):
    """The converter changes only weights that MatMuls alone read (here W also feeds an Add;
    V is converted), the result still runs, and writing it again replaces its external data
    rather than appending to it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from mineru_cli.export.weight_only import weight_only_int8

    rng = np.random.default_rng(0)
    w, v = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["m"]),
            helper.make_node("Add", ["m", "W"], ["a"]),
            helper.make_node("MatMul", ["a", "V"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(v, "V")],
    )
    src, dst = tmp_path / "src.onnx", tmp_path / "out" / "dst.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(src))
    sizes = []
    for _ in range(2):
        assert weight_only_int8(src, dst) == 1
        sizes.append(dst.with_name(dst.name + ".data").stat().st_size)
    assert sizes[0] == sizes[1]
    x = rng.standard_normal((64, 64)).astype(np.float32)
    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert 0 < float(np.abs(got - ref).max() / np.abs(ref).max()) < 0.02


def _layout_input(engine, page):
    from mineru_cli.vlm.protocol.chat import LAYOUT_PROMPT
    from mineru_cli.vlm.protocol.crops import layout_image
    from mineru_cli.vlm.tokenizer import build_input

    return build_input(engine.tokenizer, engine.processor, layout_image(page), LAYOUT_PROMPT)


def test_why_the_openvino_graph_cannot_run_is_said(tiny_onnx_int8, monkeypatch):
    plain = read_manifest(tiny_onnx_int8)
    assert "openvino=True" in openvino_vision.unavailable(plain, ort)
    with_graph = {"graphs": {openvino_vision.GRAPH_ROLE: openvino_vision.VISION_GRAPH}}
    monkeypatch.setattr(openvino_vision, "cpu_flags", lambda: {"avx2", "avx512_vnni"})
    assert "bf16" in openvino_vision.unavailable(with_graph, ort)


def test_a_required_openvino_backend_that_cannot_run_is_a_setup_error(tiny_onnx_int8):
    with pytest.raises(SetupError, match="openvino=True"):
        OnnxRuntime(tiny_onnx_int8, vision_backend=openvino_vision.OPENVINO)
    with pytest.raises(SetupError, match="unknown vision backend"):
        OnnxRuntime(tiny_onnx_int8, vision_backend="gpu")


def test_openvino_vision_computes_in_bf16_close_to_onnxruntime(openvino_here, tiny_onnx_openvino, page):
    """Where the plugin runs: the features differ from the same graph on onnxruntime's fp32
    kernels (bf16 products), but only by bf16 rounding."""
    engine = VlmEngine(tiny_onnx_openvino, threads=1, runtime="onnx")
    x = _layout_input(engine, page)
    (a,) = OnnxRuntime(tiny_onnx_openvino, vision_backend=openvino_vision.OPENVINO).image_embeds([x])
    (b,) = OnnxRuntime(tiny_onnx_openvino, vision_backend=openvino_vision.ONNXRUNTIME).image_embeds([x])
    ov_graph = str(tiny_onnx_openvino / openvino_vision.VISION_GRAPH)
    (c,) = ort.InferenceSession(ov_graph, providers=["CPUExecutionProvider"]).run(
        ["image_embeds"], vision_feed(x, engine.runtime.merge_size)
    )
    rel = float(np.sqrt(np.mean((a - c) ** 2)) / np.sqrt(np.mean(c**2)))
    assert 1e-5 < rel < 0.05, rel
    assert a.shape == b.shape
