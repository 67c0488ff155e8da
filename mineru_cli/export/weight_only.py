"""Weight-only INT8: a float graph's weight products with INT8 weights behind a DequantizeLinear.

The OpenVINO vision graph (vlm.openvino_vision.VISION_GRAPH) is written this way: OpenVINO
compiles such products with INT8 weights (runtime precision i8); with the float graph a process
peaked at 5.6 GB on one 2,000-patch image, with this one at 1.7 GB. onnxruntime runs the same
graph too (the tests compare its image features with the float graph's there).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _inputs(graph):
    """Every node input of the graph and of its nodes' subgraphs (If / Loop bodies)."""
    for node in graph.node:
        yield from node.input
        for attr in node.attribute:
            for sub in [attr.g] * attr.HasField("g") + list(attr.graphs):
                yield from _inputs(sub)


def weight_only_int8(src: Path, dst: Path) -> int:
    """Write a copy of the float graph `src` to `dst` (its weights in `dst`.data) in which every
    MatMul by a constant 2-D weight takes that weight as INT8 per output channel (symmetric,
    scale = max |w| / 127) through a DequantizeLinear; returns how many weights were converted
    (a weight also read elsewhere stays float)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    # a weight read by anything but a MatMul's second input (another node, a subgraph, the graph's
    # outputs) keeps its float initializer, and so is left alone
    readers: dict[str, int] = {}
    for name in [*_inputs(graph), *(out.name for out in graph.output)]:
        readers[name] = readers.get(name, 0) + 1
    products = [n.input[1] for n in graph.node if n.op_type == "MatMul" and len(n.input) == 2]
    only_products = {w for w in set(products) if readers.get(w, 0) == products.count(w)}
    nodes, done = [], set()
    for node in graph.node:
        w = weights.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is None or len(w.dims) != 2 or w.name not in only_products:
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
    dst.with_name(dst.name + ".data").unlink(missing_ok=True)  # onnx.save appends to it
    onnx.save(model, str(dst), save_as_external_data=True, location=dst.name + ".data")
    return len(done)
