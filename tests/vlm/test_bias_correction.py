"""INT8 bias correction (mineru_cli.export.bias_correction) on a small two-layer graph quantized
by onnxruntime's dynamic quantizer, as `mineru export --int8` quantizes: no torch, no export."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from mineru_cli.export.bias_correction import MeanInputs, correct, weight_matmuls
from mineru_cli.export.onnx_export import quantize_int8


def _two_layers(path, rng) -> None:
    """x (n, 16) -> MatMul w1 + b -> Relu -> MatMul w2 + b (the same bias constant: exporters
    share equal constants) -> MatMul w3 (no bias) -> y (n, 32)."""
    inits = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32) / 4, "w2"),
             numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32) / 4, "w3"),
             numpy_helper.from_array(np.full(32, 0.5, np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
             helper.make_node("Add", ["h1", "b"], ["a1"], name="add1"),
             helper.make_node("Relu", ["a1"], ["r1"], name="relu"),
             helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
             helper.make_node("Add", ["b", "h2"], ["a2"], name="add2"),
             helper.make_node("MatMul", ["a2", "w3"], ["y"], name="mm3")]
    graph = helper.make_graph(nodes, "two_layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _run(path, x) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]


def test_bias_correction_removes_the_mean_shift_of_int8_weights(tmp_path):
    rng = np.random.default_rng(0)
    fp32, int8 = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    _two_layers(fp32, rng)
    quantize_int8(fp32, int8)
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

    ref, before = _run(fp32, held_out), _run(int8, held_out)
    stats = correct(fp32, int8, m)
    after = _run(int8, held_out)
    assert stats["folded_into_bias"] == 2 and stats["added"] == 1   # w1, w2 fold; w3 gets an Add
    shift_before = np.abs((before - ref).mean(0)).mean()
    shift_after = np.abs((after - ref).mean(0)).mean()
    assert shift_after < shift_before / 4, (shift_before, shift_after)
    assert np.sqrt(((after - ref) ** 2).mean()) < np.sqrt(((before - ref) ** 2).mean())

    graph = onnx.load(str(int8)).graph
    assert "b" not in {t.name for t in graph.initializer}   # both readers got corrected copies
    onnx.checker.check_model(onnx.load(str(int8)))
    # a graph whose products are not quantized is left as it is
    plain = tmp_path / "plain.onnx"
    _two_layers(plain, np.random.default_rng(1))
    assert correct(plain, plain, m)["folded_into_bias"] == 0
