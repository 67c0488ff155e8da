"""Weight-only INT8: a float graph's weight products with INT8 weights behind a DequantizeLinear.

The OpenVINO vision graph (vlm.openvino_vision.VISION_GRAPH) is written this way: OpenVINO
compiles such products with INT8 weights (runtime precision i8), where the float graph left it
fp32 weights and a bf16 copy. onnxruntime runs the same graph too (the tests compare its image
features with the float graph's there).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def weight_only_int8(src: Path, dst: Path) -> int:
    """Write a copy of the float graph `src` to `dst` (its weights in `dst`.data) in which every
    MatMul by a constant 2-D weight takes that weight as INT8 per output channel (symmetric,
    scale = max |w| / 127) through a DequantizeLinear; returns how many weights were converted."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    nodes, done = [], set()
    for node in graph.node:
        w = weights.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or len(w.dims) != 2:
            nodes.append(node)
            continue
        base = f"{w.name}_wint8"
        if w.name in done:  # a weight shared by two products is converted once
            nodes.append(helper.make_node("MatMul", [node.input[0], base + "_dq"], list(node.output), name=node.name))
            continue
        arr = numpy_helper.to_array(w).astype(np.float32)
        scale = np.maximum(np.abs(arr).max(axis=0), 1e-12) / 127.0
        q = np.clip(np.rint(arr / scale), -127, 127).astype(np.int8)
        graph.initializer.extend(
            [numpy_helper.from_array(q, base), numpy_helper.from_array(scale.astype(np.float32), base + "_scale")]
        )
        nodes.append(helper.make_node("DequantizeLinear", [base, base + "_scale"], [base + "_dq"], axis=1))
        nodes.append(helper.make_node("MatMul", [node.input[0], base + "_dq"], list(node.output), name=node.name))
        graph.initializer.remove(w)
        done.add(w.name)
    del graph.node[:]
    graph.node.extend(nodes)
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dst), save_as_external_data=True, location=dst.name + ".data")
    return len(done)
