"""INT8 bias correction (mineru_cli.export.bias_correction) on a small graph of three products quantized
by onnxruntime's dynamic quantizer, as `mineru export --int8` quantizes: no torch, no export."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mineru_cli.export.bias_correction import MeanInputs, correct, weight_matmuls
from mineru_cli.export.onnx_export import quantize_int8
from mineru_cli.vlm.int8_target import TARGETS, has_int8_sums, int8_settings, saturates


def _three_products(path, rng) -> None:
    """x (n, 16) -> MatMul w1 + b -> Relu -> MatMul w2 + b (the same bias constant: exporters
    share equal constants) -> MatMul w3 (no bias) -> y (n, 32); also z = y + b (b is read by
    something that is not a product's bias)."""
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32) / 4, "w2"),
        numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32) / 4, "w3"),
        numpy_helper.from_array(np.full(32, 0.5, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Add", ["h1", "b"], ["a1"], name="add1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
        helper.make_node("Add", ["b", "h2"], ["a2"], name="add2"),
        helper.make_node("MatMul", ["a2", "w3"], ["y"], name="mm3"),
        helper.make_node("Add", ["y", "b"], ["z"], name="add3"),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "two_layers",
        [vi("x", TensorProto.FLOAT, ["n", 16])],
        [vi("y", TensorProto.FLOAT, ["n", 32]), vi("z", TensorProto.FLOAT, ["n", 32])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _run(path, x) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["y", "z"], {"x": x})


# The weight settings of every export target this CPU runs on its fast kernels (int8_target:
# unsigned weights with a zero point per channel everywhere, full 8-bit signed ones with
# VNNI/AMX), and signed 7-bit ones (the other saturation-free kind)
_CANDIDATES = [int8_settings(target)["decoder"] for target in TARGETS] + [
    {"weight_type": "QInt8", "reduce_range": True}
]
SETTINGS = [s for i, s in enumerate(_CANDIDATES) if s not in _CANDIDATES[:i] and (has_int8_sums() or not saturates(s))]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: s["weight_type"] + ("-7bit" if s["reduce_range"] else ""))
def test_bias_correction_removes_the_mean_shift_of_int8_weights(tmp_path, settings):
    rng = np.random.default_rng(0)
    fp32, int8 = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    _three_products(fp32, rng)
    quantize_int8(fp32, int8, **settings)
    # inputs with large channel means: what a weight's rounding error turns into an output shift
    offset = rng.uniform(-4, 4, 16).astype(np.float32)
    calibration = [rng.standard_normal((64, 16)).astype(np.float32) + offset for _ in range(3)]
    held_out = rng.standard_normal((256, 16)).astype(np.float32) + offset

    means = MeanInputs(fp32, threads=1)
    for x in calibration:
        means.run(["y"], {"x": x})
    m = means.means()
    assert set(m) == {a for a, _, _ in weight_matmuls(onnx.load(str(fp32)).graph)} == {"x", "r1", "a2"}
    np.testing.assert_allclose(m["x"], np.concatenate(calibration).mean(0), rtol=1e-5, atol=1e-5)
    assert means.means(min_rows=3 * 64 + 1) == {}  # too few rows: no mean to correct with

    (ref, _), (before, _) = _run(fp32, held_out), _run(int8, held_out)
    stats = correct(fp32, int8, m)
    after, z = _run(int8, held_out)
    # w1 and w2 fold into copies of their shared bias; w3 feeds a graph output: an Add
    assert (stats["folded_into_bias"], stats["added"], stats["uncorrected_few_rows"]) == (2, 1, 0)
    shift_before = np.abs((before - ref).mean(0)).mean()
    shift_after = np.abs((after - ref).mean(0)).mean()
    assert shift_after < shift_before / 4, (shift_before, shift_after)
    assert np.sqrt(((after - ref) ** 2).mean()) < np.sqrt(((before - ref) ** 2).mean())
    np.testing.assert_allclose(z, after + 0.5, rtol=1e-6, atol=1e-6)  # z reads the corrected y, and b

    graph = onnx.load(str(int8)).graph
    assert "b" in {t.name for t in graph.initializer}  # still read by add3
    onnx.checker.check_model(onnx.load(str(int8)))
    with pytest.raises(ValueError, match="already bias-corrected"):
        correct(fp32, int8, m)


def test_products_without_enough_calibration_rows_stay_as_quantized(tmp_path):
    rng = np.random.default_rng(0)
    fp32, int8 = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    _three_products(fp32, rng)
    quantize_int8(fp32, int8)
    means = MeanInputs(fp32, threads=1)
    means.run(["y"], {"x": rng.standard_normal((8, 16)).astype(np.float32)})
    x = rng.standard_normal((32, 16)).astype(np.float32)
    before = _run(int8, x)[0]
    stats = correct(fp32, int8, means.means())  # 8 rows < MIN_ROWS: nothing to correct with
    assert (stats["folded_into_bias"], stats["added"], stats["uncorrected_few_rows"]) == (0, 0, 3)
    np.testing.assert_array_equal(_run(int8, x)[0], before)
