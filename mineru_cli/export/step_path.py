"""The decoder's step path: each layer's GroupQueryAttention node is put in an `If`, so that calls
of one new token per row (decoding steps) take grouped matrix products instead.

onnxruntime's CPU GroupQueryAttention computes one query head of one row at a time: at batch 8
that is 112 products of a single query vector with its row's keys per layer, and the 7 query
heads that share a KV head each read those keys again. Measured on the full-size INT8 export
(2 cores, 8 rows of ~540 tokens): the kernel was ~22 ms of a decoding step, and a step at batch 8
cost 1.73x one at batch 1. Prompts keep the kernel, which was 1.6x faster than matrix products
there (see graphs.DecoderGraph).

The step branch (S == 1) does, per layer, with the same inputs and outputs as the kernel:
    ScatterND       the new key and value go into the KV buffers at column seqlens_k (each row's
                    token count minus one); the runtime binds the outputs to the buffers, so
                    onnxruntime writes them in place and nothing is copied
    FusedMatMul     queries grouped by KV head, (B, kv, heads/kv, d) x keys^T -> (B, kv, g, C):
                    each key is read once for all the query heads that share it
    Add, Softmax    columns past each row's length are masked (the buffer's capacity C is a
                    little larger than the longest row, see runtime_onnx.KV_GROWTH)
    MatMul          probabilities x values -> (B, kv, g, d) -> (B, 1, heads * d)
The mask, the scatter indices and the branch condition are computed once, before the first
layer's attention.

Pure onnx (no torch): it rewrites a saved decoder (fp32 or quantized) after export.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PREFIX = "step_path/"


def _const(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _shared(seqlens_k: str, query: str, past_key: str, kv_heads: int) -> list:
    """Nodes computed once: `multi` (bool: more than one new token per row), `idx` (B, kv, 3)
    scatter indices [row, kv head, seqlens_k[row]] and `bias` (B, 1, 1, C), 0 for a row's columns
    and float32's lowest value past them."""
    p, n = PREFIX, helper.make_node
    i64 = lambda v: np.array(v, np.int64)   # noqa: E731
    return [
        _const(p + "one", i64([1])), _const(p + "zero0", i64(0)), _const(p + "one0", i64(1)),
        _const(p + "col", i64([-1, 1])), _const(p + "last", i64([-1])),
        _const(p + "heads", i64(np.arange(kv_heads)[None, :])),                       # (1, kv)
        n("Shape", [query], [p + "s"], start=1, end=2),
        n("Greater", [p + "s", p + "one"], [p + "multi1"]),
        n("Squeeze", [p + "multi1"], [p + "multi"]),
        n("Cast", [seqlens_k], [p + "pos"], to=TensorProto.INT64),
        n("Reshape", [p + "pos", p + "col"], [p + "pos_col"]),                         # (B, 1)
        n("Shape", [seqlens_k], [p + "b1"]),
        n("Squeeze", [p + "b1"], [p + "b"]),
        n("Range", [p + "zero0", p + "b", p + "one0"], [p + "rows"]),
        n("Reshape", [p + "rows", p + "col"], [p + "rows_col"]),                       # (B, 1)
        # broadcast row, head and position to (B, kv): x + heads - heads, heads + rows - rows
        n("Add", [p + "rows_col", p + "heads"], [p + "rh"]),
        n("Sub", [p + "rh", p + "heads"], [p + "row_ix"]),
        n("Sub", [p + "rh", p + "rows_col"], [p + "head_ix"]),
        n("Add", [p + "pos_col", p + "heads"], [p + "ph"]),
        n("Sub", [p + "ph", p + "heads"], [p + "pos_ix"]),
        *(n("Unsqueeze", [p + f"{x}_ix", p + "last"], [p + f"{x}_ix3"]) for x in ("row", "head", "pos")),
        n("Concat", [p + "row_ix3", p + "head_ix3", p + "pos_ix3"], [p + "idx"], axis=-1),
        # the mask over the buffer's columns
        n("Shape", [past_key], [p + "cap1"], start=2, end=3),
        n("Squeeze", [p + "cap1"], [p + "cap"]),
        n("Range", [p + "zero0", p + "cap", p + "one0"], [p + "cols"]),
        n("LessOrEqual", [p + "cols", p + "pos_col"], [p + "seen"]),                   # (B, C)
        _const(p + "zero_f", np.float32(0)), _const(p + "lowest", np.float32(np.finfo(np.float32).min)),
        n("Where", [p + "seen", p + "zero_f", p + "lowest"], [p + "bias2"]),
        _const(p + "ax12", i64([1, 2])),
        n("Unsqueeze", [p + "bias2", p + "ax12"], [p + "bias"]),                       # (B, 1, 1, C)
    ]


def _step_branch(layer: int, inputs: list[str], num_heads: int, kv_heads: int, head_dim: int):
    q, k, v, past_k, past_v = inputs[:5]
    p, n = PREFIX, helper.make_node
    lp = f"{p}{layer}/"
    nodes = [
        n("Reshape", [k, p + "kv_shape"], [lp + "k"]),                                 # (B, kv, d)
        n("Reshape", [v, p + "kv_shape"], [lp + "v"]),
        n("ScatterND", [past_k, p + "idx", lp + "k"], [lp + "present_key"]),
        n("ScatterND", [past_v, p + "idx", lp + "v"], [lp + "present_value"]),
        n("Reshape", [q, p + "q_shape"], [lp + "q"]),                                  # (B, kv, g, d)
        n("FusedMatMul", [lp + "q", lp + "present_key"], [lp + "scores"], domain="com.microsoft",
          transA=0, transB=1, alpha=float(head_dim) ** -0.5),
        n("Add", [lp + "scores", p + "bias"], [lp + "masked"]),
        n("Softmax", [lp + "masked"], [lp + "probs"], axis=-1),
        n("MatMul", [lp + "probs", lp + "present_value"], [lp + "out_g"]),
        n("Reshape", [lp + "out_g", p + "out_shape"], [lp + "out"]),                   # (B, 1, heads*d)
    ]
    outs = [helper.make_tensor_value_info(lp + x, TensorProto.FLOAT, None)
            for x in ("out", "present_key", "present_value")]
    return helper.make_graph(nodes, lp + "step", [], outs)


def add_step_path(model, head_dim: int):
    """Rewrite a decoder ModelProto in place (see the module docstring); returns it."""
    graph = model.graph
    gqa = [node for node in graph.node if node.op_type == "GroupQueryAttention"]
    if not gqa:
        raise ValueError("the decoder has no GroupQueryAttention node")
    attrs = {a.name: helper.get_attribute_value(a) for a in gqa[0].attribute}
    num_heads, kv_heads = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
    p = PREFIX
    shared = _shared(gqa[0].input[5], gqa[0].input[0], gqa[0].input[3], kv_heads)
    shared += [_const(p + "kv_shape", np.array([0, kv_heads, head_dim], np.int64)),
               _const(p + "q_shape", np.array([0, kv_heads, num_heads // kv_heads, head_dim], np.int64)),
               _const(p + "out_shape", np.array([0, 1, num_heads * head_dim], np.int64))]
    replaced = {}
    for layer, node in enumerate(gqa):
        lp = f"{p}{layer}/"
        prompt = helper.make_node("GroupQueryAttention", list(node.input),
                                  [lp + x for x in ("prompt_out", "prompt_key", "prompt_value")],
                                  name=node.name, domain=node.domain, **attrs)
        then_branch = helper.make_graph(
            [prompt], lp + "prompt", [],
            [helper.make_tensor_value_info(x, TensorProto.FLOAT, None) for x in prompt.output])
        replaced[id(node)] = helper.make_node(
            "If", [p + "multi"], list(node.output), name=lp + "if", then_branch=then_branch,
            else_branch=_step_branch(layer, list(node.input), num_heads, kv_heads, head_dim))
    nodes = list(graph.node)
    first = nodes.index(gqa[0])   # the shared nodes read the first layer's inputs: after those
    nodes = nodes[:first] + shared + [replaced.get(id(node), node) for node in nodes[first:]]
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def rewrite(path: str | Path, head_dim: int) -> None:
    """add_step_path on a saved decoder; its external weight data stays where it is."""
    path = Path(path)
    model = onnx.load(str(path), load_external_data=False)
    onnx.save(add_step_path(model, head_dim), str(path))
