"""The decoder's step path (mineru_cli.export.step_path) against onnxruntime's GroupQueryAttention
kernel it stands in for, on a one-node graph: no torch, no export."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mineru_cli.export.step_path import PREFIX, add_step_path, strip_step_path

HEADS, KV, D = 6, 2, 8


def _attention_model(**extra) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    inputs = [
        vi("q", TensorProto.FLOAT, ["b", "s", HEADS * D]),
        vi("k", TensorProto.FLOAT, ["b", "s", KV * D]),
        vi("v", TensorProto.FLOAT, ["b", "s", KV * D]),
        vi("past_key", TensorProto.FLOAT, ["b", KV, "c", D]),
        vi("past_value", TensorProto.FLOAT, ["b", KV, "c", D]),
        vi("seqlens_k", TensorProto.INT32, ["b"]),
        vi("total", TensorProto.INT32, []),
    ]
    outputs = [
        vi("out", TensorProto.FLOAT, ["b", "s", HEADS * D]),
        vi("present_key", TensorProto.FLOAT, ["b", KV, "c", D]),
        vi("present_value", TensorProto.FLOAT, ["b", KV, "c", D]),
    ]
    node = helper.make_node(
        "GroupQueryAttention",
        [i.name for i in inputs],
        [o.name for o in outputs],
        name="attention",
        domain="com.microsoft",
        num_heads=HEADS,
        kv_num_heads=KV,
        **extra,
    )
    return helper.make_model(
        helper.make_graph([node], "attention", inputs, outputs),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
    )


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _feeds(rng, lengths: list[int], capacity: int, new: int = 1) -> dict:
    """Rows holding `lengths` tokens after this call (the last `new` of them in this call);
    random numbers in the buffers past each row's tokens, which neither may read."""
    b = len(lengths)
    return {
        "q": rng.standard_normal((b, new, HEADS * D), dtype=np.float32),
        "k": rng.standard_normal((b, new, KV * D), dtype=np.float32),
        "v": rng.standard_normal((b, new, KV * D), dtype=np.float32),
        "past_key": rng.standard_normal((b, KV, capacity, D), dtype=np.float32),
        "past_value": rng.standard_normal((b, KV, capacity, D), dtype=np.float32),
        "seqlens_k": np.asarray(lengths, dtype=np.int32) - 1,
        "total": np.asarray(max(lengths), dtype=np.int32),
    }


@pytest.mark.parametrize(
    "lengths,capacity,new",
    [
        ([5, 17, 1], 24, 1),  # a step over rows of different lengths, one of them a first token
        ([24], 24, 1),  # the buffer's last column
        ([20], 32, 6),  # a prompt chunk over a filled cache: the kernel's branch
    ],
)
def test_step_path_computes_what_the_kernel_computes(lengths, capacity, new):
    rng = np.random.default_rng(0)
    kernel, ours = _session(_attention_model()), _session(add_step_path(_attention_model(), D))
    feeds = _feeds(rng, lengths, capacity, new)
    want, got = kernel.run(None, feeds), ours.run(None, feeds)
    np.testing.assert_allclose(got[0], want[0], atol=1e-5)
    for row, n in enumerate(lengths):  # the buffers agree over each row's tokens
        for w, g in zip(want[1:], got[1:]):
            np.testing.assert_allclose(g[row, :, :n], w[row, :, :n], atol=0)


def test_step_path_graph_is_valid_and_strips_back():
    model = add_step_path(_attention_model(), D)
    onnx.checker.check_model(model)
    branches = [n for n in model.graph.node if n.op_type == "If"]
    assert len(branches) == 1 and branches[0].name.startswith(PREFIX)
    with pytest.raises(ValueError, match="already has the step path"):
        add_step_path(model, D)
    stripped = strip_step_path(model)
    assert [n.SerializeToString() for n in stripped.graph.node] == [
        n.SerializeToString() for n in _attention_model().graph.node
    ]


def test_a_kernel_option_the_step_path_lacks_is_refused():
    with pytest.raises(ValueError, match="does not reproduce GroupQueryAttention's \\['scale'\\]"):
        add_step_path(_attention_model(scale=0.5), D)
