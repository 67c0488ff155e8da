"""Bias correction of INT8 weights, measured on rendered calibration pages.

Rounding a weight matrix W (in x out) to per-channel INT8 (W_q) moves each output's mean by
E[x] (W_q - W), where E[x] is the mean input of that product. We measure E[x] by running the
fp32 graphs on a few rendered pages and subtract the shift from the product's output: folded
into a copy of its bias where a constant vector is added right after it, else by a new Add
(which onnxruntime fuses into the INT8 product). `mineru export --int8 --bias-correction`:
opt-in, since it brought the full-size random model's INT8 logits closer to fp32 (minimum
cosine 0.9966 -> 0.9984) but not the trained tiny model's (docs/benchmarks.md).

    means = calibration_means(fp32_dir, graphs, embed_tokens, inputs, ...)   # per graph: {input: E[x]}
    correct(fp32_dir / "vision.onnx", int8_dir / "vision.onnx", means["vision"])

Plain onnx + onnxruntime (no torch). Works on the graphs onnxruntime's quantize_dynamic writes
(weight W becomes W_quantized, W_scale, W_zero_point; the product keeps its output name).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ..vlm.processor import ImageProcessor, ImageProcessorConfig, rope_index
from ..vlm.runtime_onnx import prompt_embeddings, vision_feed
from ..vlm.tokenizer import VlmInput
from .calibration import calibration_pages

SAMPLES = 6  # calibration pages (a full-size model: ~50 s on 2 cores)
TEXT_TOKENS = 24  # random text after the image where the tokenizer has no chat tokens
# a mean over fewer rows is too noisy to correct with: the output layer sees one row per prompt
# (the decoder returns last-token logits only), so it stays uncorrected
MIN_ROWS = 64


def weight_matmuls(graph) -> list[tuple[str, str, str]]:
    """(activation input, weight initializer, output) of every MatMul whose weight is constant."""
    inits = {t.name for t in graph.initializer}
    return [
        (n.input[0], n.input[1], n.output[0])
        for n in graph.node
        if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in inits
    ]


def calibration_inputs(model_dir: Path, vision_ids: tuple[int, int, int], samples: int = SAMPLES) -> list[VlmInput]:
    """calibration_pages as model inputs through the model's chat template; a model whose
    tokenizer has no chat tokens (the bench's random model) gets the image tokens and
    TEXT_TOKENS random text tokens, as the bench's inputs do. vision_ids: (vision start, image
    pad, vision end) token ids."""
    from ..core.errors import SetupError
    from ..vlm.tokenizer import ChatTokenizer, build_input

    proc = ImageProcessor(ImageProcessorConfig.from_file(model_dir / "preprocessor_config.json"))
    try:
        tok = ChatTokenizer.from_dir(model_dir)
    except SetupError:
        tok = None
    rng = np.random.default_rng(0)
    out = []
    for image, prompt in calibration_pages(samples):
        if tok is not None:
            out.append(build_input(tok, proc, image, prompt))
            continue
        pixels, grid = proc(image)
        merge = proc.config.merge_size
        start, pad, end = vision_ids
        text = rng.integers(0, min(vision_ids), TEXT_TOKENS)  # ids below the special tokens
        ids = np.asarray([start] + [pad] * (int(np.prod(grid[0])) // merge**2) + [end] + list(text), dtype=np.int64)
        positions, delta = rope_index(ids, grid, pad, merge)
        out.append(VlmInput(ids, pixels.astype(np.float32, copy=False), grid, positions, delta))
    return out


class MeanInputs:
    """Runs a graph with, for the input of each of its weight products, the sum over its rows
    (every axis but the last) and the row count added to its outputs, and keeps the mean of
    each over every run; only those small sums leave the session.

        m = MeanInputs(path, threads); m.run(["logits"], feed) ...; m.means() -> {input name: mean}
    """

    def __init__(self, graph_path: Path, threads: int):
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        model = onnx.load(str(graph_path), load_external_data=False)
        self.names = sorted({a for a, _, _ in weight_matmuls(model.graph)})
        graph = model.graph
        graph.initializer.extend(
            [
                numpy_helper.from_array(np.asarray([-1], np.int64), "_mean_rows_dim"),
                numpy_helper.from_array(np.asarray([0], np.int64), "_mean_axis"),
            ]
        )
        self.outputs = []
        for i, name in enumerate(self.names):
            p = f"_mean{i}_"
            graph.node.extend(
                [
                    helper.make_node("Shape", [name], [p + "last"], start=-1),
                    helper.make_node("Concat", ["_mean_rows_dim", p + "last"], [p + "shape"], axis=0),
                    helper.make_node("Reshape", [name, p + "shape"], [p + "rows"]),
                    helper.make_node("ReduceSum", [p + "rows", "_mean_axis"], [p + "sum"], keepdims=0),
                    helper.make_node("Shape", [p + "rows"], [p + "count"], start=0, end=1),
                ]
            )
            graph.output.extend(
                [
                    helper.make_tensor_value_info(p + "sum", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info(p + "count", TensorProto.INT64, None),
                ]
            )
            self.outputs += [p + "sum", p + "count"]
        # written beside the graph so that its external data resolves; a private name
        fd, tmp = tempfile.mkstemp(suffix=".onnx", prefix=".means-", dir=graph_path.parent)
        os.close(fd)
        try:
            onnx.save(model, tmp)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = max(1, int(threads))
            opts.log_severity_level = 3
            self.session = ort.InferenceSession(tmp, opts, providers=["CPUExecutionProvider"])
        finally:
            os.unlink(tmp)
        # each input's running sum of rows (float64) and count of rows
        self.sums: dict[str, np.ndarray] = {n: np.zeros((), np.float64) for n in self.names}
        self.rows = {n: 0 for n in self.names}

    def run(self, wanted: list[str], feed: dict) -> list[np.ndarray]:
        values = self.session.run(wanted + self.outputs, feed)
        sums = values[len(wanted) :]
        for i, name in enumerate(self.names):
            self.sums[name] = self.sums[name] + sums[2 * i].astype(np.float64)
            self.rows[name] += int(sums[2 * i + 1][0])
        return values[: len(wanted)]

    def means(self, min_rows: int = MIN_ROWS) -> dict[str, np.ndarray]:
        """{input name: mean row} of the inputs seen in at least min_rows rows."""
        return {n: self.sums[n] / self.rows[n] for n in self.names if self.rows[n] >= max(1, min_rows)}


def calibration_means(
    fp32_dir: Path,
    graphs: dict,
    embed_tokens: np.ndarray,
    inputs: Sequence[VlmInput],
    image_token_id: int,
    merge_size: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    threads: int = 1,
    decoder: bool = True,
) -> dict[str, dict[str, np.ndarray]]:
    """Mean input of the weight products of the fp32 vision and decoder graphs over the
    calibration inputs (MeanInputs.means): each image through the vision graph, then its whole
    prompt (image features in place) through the decoder in one call, as the runtime prefills a
    row (decoder=False: vision only)."""
    vision = MeanInputs(fp32_dir / graphs["vision"], threads)
    prompts = []
    for x in inputs:
        (feats,) = vision.run(["image_embeds"], vision_feed(x, merge_size))
        prompts.append((prompt_embeddings(embed_tokens, x.input_ids, image_token_id, feats), x.position_ids))
    means = {"vision": vision.means()}
    del vision
    if not decoder:
        return means
    lm = MeanInputs(fp32_dir / graphs["decoder"], threads)
    for embeds, positions in prompts:
        lm.run(["logits"], prompt_feed(embeds, positions, num_layers, num_kv_heads, head_dim))
    means["decoder"] = lm.means()
    return means


def prompt_feed(embeds: np.ndarray, positions: np.ndarray, num_layers: int, num_kv_heads: int, head_dim: int) -> dict:
    """The decoder's feed for one whole prompt into empty KV buffers that fit it exactly."""
    n = len(embeds)
    feed = {
        "inputs_embeds": np.ascontiguousarray(embeds[None]),
        "position_ids": np.ascontiguousarray(positions[:, None]),
        "seqlens_k": np.asarray([n - 1], dtype=np.int32),
        "total_sequence_length": np.asarray(n, dtype=np.int32),
    }
    for i in range(num_layers):
        for kv in ("key", "value"):
            feed[f"past_{kv}_{i}"] = np.zeros((1, num_kv_heads, n, head_dim), dtype=np.float32)
    return feed


def correct(fp32_path: Path, quant_path: Path, means: dict[str, np.ndarray]) -> dict:
    """Rewrites the quantized graph at quant_path (and its external data) with each INT8
    product's output shifted by -E[x] (W_q - W). Products left in float, and those whose input
    has no mean (too few calibration rows), are not touched. Returns counts and the size of the
    shifts."""
    import onnx
    from onnx import numpy_helper

    fp32 = onnx.load(str(fp32_path), load_external_data=False)
    fp32_inits = {t.name: t for t in fp32.graph.initializer}
    model = onnx.load(str(quant_path))
    inits = {t.name: t for t in model.graph.initializer}
    if any(name.endswith(("_corrected_bias", "_bias_correction")) for name in inits):
        raise ValueError(f"{quant_path.name} is already bias-corrected")
    shifts: dict[str, np.ndarray] = {}  # product output -> its shift
    uncorrected = 0
    for a, w, out in weight_matmuls(fp32.graph):
        if w + "_quantized" not in inits:
            continue  # left in float
        if a not in means:
            uncorrected += 1
            continue
        weight = numpy_helper.to_array(fp32_inits[w], base_dir=str(fp32_path.parent))
        q, scale, zero = (numpy_helper.to_array(inits[w + s]) for s in ("_quantized", "_scale", "_zero_point"))
        shifts[out] = _shift(weight, q, scale, zero, means[a], w)
    stats = _apply(model.graph, shifts)
    data = quant_path.name + ".data"
    (quant_path.parent / data).unlink(missing_ok=True)  # all loaded above; onnx.save would append
    onnx.save(
        model,
        str(quant_path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data,
        size_threshold=1024,
    )
    rms = [float(np.sqrt(np.mean(s.astype(np.float64) ** 2))) for s in shifts.values()]
    return {
        **stats,
        "uncorrected_few_rows": uncorrected,
        "shift_rms_median": float(np.median(rms)) if rms else 0.0,
        "shift_rms_max": float(np.max(rms)) if rms else 0.0,
    }


def _shift(
    weight: np.ndarray, q: np.ndarray, scale: np.ndarray, zero: np.ndarray, mean: np.ndarray, name: str
) -> np.ndarray:
    """-E[x] (W_q - W) for one product (float32, one value per output)."""
    scale = scale.astype(np.float32)
    # the rounding error: per output channel (scale along the weight's last axis) or one scale
    error = (q.astype(np.float32) - zero.astype(np.float32)) * scale
    error -= weight
    if error.shape != weight.shape or not (np.abs(error) <= 0.501 * scale + 1e-7).all():
        raise ValueError(f"the quantized {name} does not match the float weight")
    return -(mean.astype(np.float32) @ error)


def _apply(graph, shifts: dict[str, np.ndarray]) -> dict:
    """Adds shifts[out] to each product output `out`: into a copy of the bias an Add adds right
    after it, else through a new Add right after the node that makes it (topological order
    holds). The product's value itself is never read uncorrected afterwards."""
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in graph.initializer}
    uses: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    kept_names = {o.name for o in graph.output} | _read_in_subgraphs(graph)
    folded, replaced, new_adds = 0, set(), {}
    for out, shift in shifts.items():
        reader, bias = _bias_after(out, uses, inits)
        if bias is not None and tuple(bias.dims) == shift.shape and out not in kept_names:
            # a corrected copy for this reader: exporters share equal constants between layers
            value = numpy_helper.to_array(bias).astype(np.float32) + shift
            name = out + "_corrected_bias"
            graph.initializer.append(numpy_helper.from_array(value, name))
            reader.input[list(reader.input).index(bias.name)] = name
            replaced.add(bias.name)
            folded += 1
        else:
            name = out + "_bias_correction"
            graph.initializer.append(numpy_helper.from_array(shift, name))
            new_adds[out] = helper.make_node("Add", [out + "_uncorrected", name], [out], name=name)
    nodes = []
    for node in graph.node:
        after = [new_adds.pop(o) for o in list(node.output) if o in new_adds]
        for add in after:
            node.output[list(node.output).index(add.output[0])] = add.input[0]
        nodes += [node, *after]
    if new_adds:
        raise ValueError(f"no node makes {sorted(new_adds)[:3]}")
    del graph.node[:]
    graph.node.extend(nodes)
    still_read = {i for n in graph.node for i in n.input} | kept_names | {i.name for i in graph.input}
    kept = [t for t in graph.initializer if t.name not in replaced or t.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return {"folded_into_bias": folded, "added": len(shifts) - folded}


def _bias_after(out: str, uses: dict, inits: dict):
    """(the Add, its constant) when `out` is read only by an Add of a constant: its bias."""
    readers = uses.get(out, [])
    if len(readers) != 1 or readers[0].op_type != "Add":
        return None, None
    other = [i for i in readers[0].input if i != out]
    if len(other) != 1 or other[0] not in inits:
        return None, None
    return readers[0], inits[other[0]]


def _read_in_subgraphs(graph) -> set[str]:
    """Every name read by a node of the graph's subgraphs (If branches), at any depth. The export
    corrects before the step path adds its Ifs; this is for a graph that already has them."""
    names = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                names |= {i for n in sub.node for i in n.input} | _read_in_subgraphs(sub)
    return names
