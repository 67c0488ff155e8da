"""The decoder's step path: each layer's GroupQueryAttention node is put in an `If`, so that calls
of one new token per row (decoding steps) take grouped matrix products instead.

onnxruntime's CPU GroupQueryAttention computes one query head of one row at a time: at batch 8
that is 112 products of a single query vector with its row's keys per layer, and the 7 query
heads that share a KV head each read those keys again. Measured on the full-size INT8 export
(2 cores, 8 rows of ~530 tokens, alternating runs): a batch-8 step 60.3 ms with the kernel, 52.4
with the step path (batch 1: 33.9 and 32.9). Prompts keep the kernel: against the unfused
products of export format 2 it took a 1,400-token prefill from 3.5 to 2.2 s.

The step branch (S == 1) does, per layer, with the kernel's inputs and outputs:
    ScatterND       the new key and value go into the KV buffers at column seqlens_k (each row's
                    token count minus one); the runtime binds the outputs to the buffers, so
                    onnxruntime writes them in place and nothing is copied
    FusedMatMul     queries grouped by KV head, (B, kv, heads/kv, d) x keys^T -> (B, kv, g, C):
                    each key is read once for all the query heads that share it
    Add, Softmax    columns past each row's length are masked (the buffer's capacity C is a
                    little larger than the longest row, see runtime_onnx.KV_GROWTH)
    MatMul          probabilities x values -> (B, kv, g, d) -> (B, 1, heads * d)
It needs every row to fit in the buffer (C > seqlens_k; the runtime grows the buffer first): the
kernel, given separate past and present buffers, would instead return a longer present, and the
step path ignores total_sequence_length. The mask, the scatter indices and the branch condition
are computed once, before the first layer's attention.

Pure onnx (no torch). `rewrite` adds the path to a saved decoder after export and quantization;
`strip` takes it out again (the quantizers re-sort a graph's nodes without seeing the values the
branches read from outside, which breaks the graph's topological order: quantize a stripped graph).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PREFIX = "step_path/"
_KERNEL_ATTRIBUTES = {"num_heads", "kv_num_heads"}  # what the step branch reproduces


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _shared(seqlens_k: str, query: str, past_key: str, num_heads: int, kv_heads: int, head_dim: int) -> list:
    """Nodes computed once per call: `multi` (bool: more than one new token per row), `idx`
    (B, kv, 3) scatter indices [row, kv head, seqlens_k[row]], `bias` (B, 1, 1, C): 0 over a
    row's tokens and float32's lowest value past them; and the branches' reshape targets."""
    p, n = PREFIX, helper.make_node
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    return [
        _const(p + "one", i64([1])),
        _const(p + "zero_scalar", i64(0)),
        _const(p + "one_scalar", i64(1)),
        _const(p + "column", i64([-1, 1])),
        _const(p + "last_axis", i64([-1])),
        _const(p + "kv_heads", i64(np.arange(kv_heads)[None, :])),  # (1, kv)
        _const(p + "kv_1d", i64([kv_heads])),
        _const(p + "kv_shape", i64([0, kv_heads, head_dim])),
        _const(p + "q_shape", i64([0, kv_heads, num_heads // kv_heads, head_dim])),
        _const(p + "out_shape", i64([0, 1, num_heads * head_dim])),
        n("Shape", [query], [p + "new_tokens"], start=1, end=2),
        n("Greater", [p + "new_tokens", p + "one"], [p + "multi_1d"]),
        n("Squeeze", [p + "multi_1d"], [p + "multi"]),
        # scatter indices: row, head and column, each broadcast to (B, kv), stacked on a last axis
        n("Cast", [seqlens_k], [p + "last_column"], to=TensorProto.INT64),
        n("Reshape", [p + "last_column", p + "column"], [p + "last_column_b1"]),  # (B, 1)
        n("Shape", [seqlens_k], [p + "batch_1d"]),
        n("Squeeze", [p + "batch_1d"], [p + "batch"]),
        n("Range", [p + "zero_scalar", p + "batch", p + "one_scalar"], [p + "row"]),
        n("Reshape", [p + "row", p + "column"], [p + "row_b1"]),  # (B, 1)
        n("Concat", [p + "batch_1d", p + "kv_1d"], [p + "b_kv"], axis=0),  # [B, kv]
        n("Expand", [p + "row_b1", p + "b_kv"], [p + "row_ix"]),
        n("Expand", [p + "kv_heads", p + "b_kv"], [p + "head_ix"]),
        n("Expand", [p + "last_column_b1", p + "b_kv"], [p + "column_ix"]),
        *(n("Unsqueeze", [p + f"{x}_ix", p + "last_axis"], [p + f"{x}_ix3"]) for x in ("row", "head", "column")),
        n("Concat", [p + "row_ix3", p + "head_ix3", p + "column_ix3"], [p + "idx"], axis=-1),
        # the mask over the buffer's columns
        n("Shape", [past_key], [p + "capacity_1d"], start=2, end=3),
        n("Squeeze", [p + "capacity_1d"], [p + "capacity"]),
        n("Range", [p + "zero_scalar", p + "capacity", p + "one_scalar"], [p + "columns"]),
        n("LessOrEqual", [p + "columns", p + "last_column_b1"], [p + "seen"]),  # (B, C)
        _const(p + "zero_f", np.float32(0)),
        _const(p + "lowest", np.float32(np.finfo(np.float32).min)),
        n("Where", [p + "seen", p + "zero_f", p + "lowest"], [p + "bias_2d"]),
        _const(p + "axes_1_2", i64([1, 2])),
        n("Unsqueeze", [p + "bias_2d", p + "axes_1_2"], [p + "bias"]),  # (B, 1, 1, C)
    ]


def _step_branch(layer: int, inputs: list[str], head_dim: int) -> onnx.GraphProto:
    q, k, v, past_k, past_v = inputs[:5]
    p, n = PREFIX, helper.make_node
    lp = f"{p}{layer}/"
    nodes = [
        n("Reshape", [k, p + "kv_shape"], [lp + "k"]),  # (B, kv, d)
        n("Reshape", [v, p + "kv_shape"], [lp + "v"]),
        n("ScatterND", [past_k, p + "idx", lp + "k"], [lp + "present_key"]),
        n("ScatterND", [past_v, p + "idx", lp + "v"], [lp + "present_value"]),
        n("Reshape", [q, p + "q_shape"], [lp + "q"]),  # (B, kv, g, d)
        n(
            "FusedMatMul",
            [lp + "q", lp + "present_key"],
            [lp + "scores"],
            domain="com.microsoft",
            transA=0,
            transB=1,
            alpha=float(head_dim) ** -0.5,
        ),
        n("Add", [lp + "scores", p + "bias"], [lp + "masked"]),
        n("Softmax", [lp + "masked"], [lp + "probs"], axis=-1),
        n("MatMul", [lp + "probs", lp + "present_value"], [lp + "out_g"]),
        n("Reshape", [lp + "out_g", p + "out_shape"], [lp + "out"]),  # (B, 1, heads*d)
    ]
    outs = [
        helper.make_tensor_value_info(lp + x, TensorProto.FLOAT, None) for x in ("out", "present_key", "present_value")
    ]
    return helper.make_graph(nodes, lp + "step", [], outs)


def _attributes(node: onnx.NodeProto) -> dict:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    extra = set(attrs) - _KERNEL_ATTRIBUTES
    if extra:  # scale, softcap, local windows, rotary: the step branch would silently differ
        raise ValueError(f"{node.name}: the step path does not reproduce GroupQueryAttention's {sorted(extra)}")
    return attrs


def add_step_path(model: onnx.ModelProto, head_dim: int) -> onnx.ModelProto:
    """Rewrite a decoder ModelProto in place (see the module docstring); returns it."""
    graph = model.graph
    if any(node.name.startswith(PREFIX) for node in graph.node):
        raise ValueError("the decoder already has the step path")
    layers = [i for i, node in enumerate(graph.node) if node.op_type == "GroupQueryAttention"]
    if not layers:
        raise ValueError("the decoder has no GroupQueryAttention node")
    first = graph.node[layers[0]]
    attrs = _attributes(first)
    # the shared nodes read the first layer's inputs: they go right before its attention
    nodes = list(graph.node[: layers[0]]) + _shared(
        first.input[5], first.input[0], first.input[3], attrs["num_heads"], attrs["kv_num_heads"], head_dim
    )
    layer = 0
    for i in range(layers[0], len(graph.node)):
        node = graph.node[i]
        if node.op_type != "GroupQueryAttention":
            nodes.append(node)
            continue
        lp = f"{PREFIX}{layer}/"
        prompt = helper.make_node(
            "GroupQueryAttention",
            list(node.input),
            [lp + x for x in ("prompt_out", "prompt_key", "prompt_value")],
            name=node.name,
            domain=node.domain,
            **_attributes(node),
        )
        then_branch = helper.make_graph(
            [prompt],
            lp + "prompt",
            [],
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, None) for x in prompt.output],
        )
        nodes.append(
            helper.make_node(
                "If",
                [PREFIX + "multi"],
                list(node.output),
                name=lp + "if",
                then_branch=then_branch,
                else_branch=_step_branch(layer, list(node.input), head_dim),
            )
        )
        layer += 1
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def strip_step_path(model: onnx.ModelProto) -> onnx.ModelProto:
    """The inverse of add_step_path, in place: each If back to its GroupQueryAttention node."""
    nodes = []
    for node in model.graph.node:
        if node.op_type == "If" and node.name.startswith(PREFIX):
            (kernel,) = {a.name: a.g for a in node.attribute}["then_branch"].node
            restored = onnx.NodeProto()
            restored.CopyFrom(kernel)
            del restored.output[:]
            restored.output.extend(node.output)
            nodes.append(restored)
        elif not node.name.startswith(PREFIX) and not node.output[0].startswith(PREFIX):
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def rewrite(path: str | Path, head_dim: int) -> None:
    """add_step_path on a saved decoder; its external weight data stays where it is."""
    path = Path(path)
    model = onnx.load(str(path), load_external_data=False)
    onnx.save(add_step_path(model, head_dim), str(path))
