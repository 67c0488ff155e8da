"""Bias correction of INT8 weights, measured on rendered calibration pages.

Rounding a weight matrix W (in x out) to per-channel INT8 (W_q) moves each output's mean by
E[x] (W_q - W), where E[x] is the mean input of that product. We measure E[x] by running the
fp32 graphs on a few rendered pages and subtract the shift from the product's output: folded
into its bias where a constant vector is added right after it, else by a new Add. On the
full-size model this brought the INT8 logits' cosine to fp32 from 0.9966 to 0.9988 (README).

    means = calibration_means(fp32_dir, embed_tokens, inputs, ...)   # {"vision": ..., "decoder": ...}
    correct(fp32_dir / "vision.onnx", int8_dir / "vision.onnx", means["vision"])

Plain onnx + onnxruntime (no torch). Works on the graphs onnxruntime's quantize_dynamic writes
(weight W becomes W_quantized, W_scale, W_zero_point; the product keeps its output name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..vlm.processor import vision_position_ids
from ..vlm.tokenizer import VlmInput

CALIBRATION_SIZES = ((448, 448), (336, 672), (560, 420))   # crop-like: 1,024 / 1,152 / 1,200 patches
TEXT_TOKENS = 24   # random text after the image where the tokenizer has no chat template


def weight_matmuls(graph) -> list[tuple[str, str, str]]:
    """(activation input, weight initializer, output) of every MatMul whose weight is constant."""
    inits = {t.name for t in graph.initializer}
    return [(n.input[0], n.input[1], n.output[0]) for n in graph.node
            if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in inits]


def calibration_inputs(model_dir: Path, vision_ids: tuple[int, int, int], samples: int = 6) -> list[VlmInput]:
    """Rendered pages (prose, an invoice, a slide) at crop-like sizes with MinerU's prompts; a
    model whose tokenizer has no chat tokens (the bench's random model) gets the image tokens
    and TEXT_TOKENS random text tokens, as the bench's inputs do. vision_ids: (vision start,
    image pad, vision end) token ids."""
    from PIL import Image

    from ..cache.synthetic import invoice, slide, text_page
    from ..errors import SetupError
    from ..vlm import protocol as P
    from ..vlm.processor import ImageProcessor, ImageProcessorConfig, rope_index
    from ..vlm.tokenizer import ChatTokenizer, build_input

    proc = ImageProcessor(ImageProcessorConfig.from_file(model_dir / "preprocessor_config.json"))
    pages = [text_page(7), invoice("1,284.50"), slide("Quarterly results")]
    prompts = [P.TEXT_PROMPT, P.TABLE_PROMPT, P.LAYOUT_PROMPT]
    try:
        tok = ChatTokenizer.from_dir(model_dir)
    except SetupError:
        tok = None
    out = []
    rng = np.random.default_rng(0)
    for i in range(samples):
        image = pages[i % len(pages)].resize(CALIBRATION_SIZES[i % len(CALIBRATION_SIZES)], Image.BICUBIC)
        if tok is not None:
            out.append(build_input(tok, proc, image, prompts[i % len(prompts)]))
            continue
        pixels, grid = proc(image)
        merge = proc.config.merge_size
        start, pad, end = vision_ids
        text = rng.integers(0, min(vision_ids), TEXT_TOKENS)   # ids below the special tokens
        ids = np.asarray([start] + [pad] * (int(np.prod(grid[0])) // merge ** 2) + [end] + list(text),
                         dtype=np.int64)
        positions, delta = rope_index(ids, grid, pad, merge)
        out.append(VlmInput(ids, pixels.astype(np.float32, copy=False), grid, positions, delta))
    return out


class MeanInputs:
    """Runs a graph with the inputs of its weight products added to its outputs and keeps the
    mean of each over every token (every row of its last axis) of every run.

        m = MeanInputs(path, threads); m.run(["logits"], feed) ...; m.means() -> {input name: mean}
    """

    def __init__(self, graph_path: Path, threads: int):
        import onnx
        import onnxruntime as ort
        from onnx import helper

        model = onnx.load(str(graph_path), load_external_data=False)
        self.names = sorted({a for a, _, _ in weight_matmuls(model.graph)})
        known = {o.name for o in model.graph.output}
        model.graph.output.extend(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                                  for n in self.names if n not in known)
        tmp = graph_path.with_name(graph_path.stem + ".means.onnx")   # beside it: its data resolves
        onnx.save(model, str(tmp))
        try:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = max(1, int(threads))
            opts.log_severity_level = 3
            self.session = ort.InferenceSession(str(tmp), opts, providers=["CPUExecutionProvider"])
        finally:
            tmp.unlink(missing_ok=True)
        self.sums = {n: 0.0 for n in self.names}
        self.rows = {n: 0 for n in self.names}

    def run(self, wanted: list[str], feed: dict) -> list[np.ndarray]:
        values = self.session.run(wanted + self.names, feed)
        for name, value in zip(self.names, values[len(wanted):]):
            rows = value.reshape(-1, value.shape[-1])
            self.sums[name] = self.sums[name] + rows.sum(0, dtype=np.float64)
            self.rows[name] += rows.shape[0]
        return values[:len(wanted)]

    def means(self) -> dict[str, np.ndarray]:
        return {n: self.sums[n] / max(1, self.rows[n]) for n in self.names}


def calibration_means(fp32_dir: Path, graphs: dict, embed_tokens: np.ndarray, inputs: Sequence[VlmInput],
                      image_token_id: int, merge_size: int, num_layers: int, num_kv_heads: int,
                      head_dim: int, threads: int = 1, decoder: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Mean input of every weight product of the fp32 vision and decoder graphs over the
    calibration inputs: each image through the vision graph, then its whole prompt (image
    features in place) through the decoder in one call (decoder=False: vision only)."""
    vision = MeanInputs(fp32_dir / graphs["vision"], threads)
    prompts = []
    for x in inputs:
        feats, = vision.run(["image_embeds"], {
            "pixel_values": np.ascontiguousarray(x.pixel_values, dtype=np.float32),
            "vision_position_ids": vision_position_ids(x.image_grid_thw, merge_size)})
        embeds = np.asarray(embed_tokens[x.input_ids], dtype=np.float32)
        embeds[x.input_ids == image_token_id] = feats
        prompts.append((embeds, x.position_ids))
    means = {"vision": vision.means()}
    del vision
    if not decoder:
        return means
    lm = MeanInputs(fp32_dir / graphs["decoder"], threads)
    for embeds, positions in prompts:
        n = len(embeds)
        feed = {"inputs_embeds": embeds[None], "position_ids": np.ascontiguousarray(positions[:, None]),
                "seqlens_k": np.asarray([n - 1], dtype=np.int32),
                "total_sequence_length": np.asarray(n, dtype=np.int32)}
        for i in range(num_layers):
            for kv in ("key", "value"):
                feed[f"past_{kv}_{i}"] = np.zeros((1, num_kv_heads, n, head_dim), dtype=np.float32)
        lm.run(["logits"], feed)
    means["decoder"] = lm.means()
    return means


def correct(fp32_path: Path, quant_path: Path, means: dict[str, np.ndarray]) -> dict:
    """Rewrites the quantized graph at quant_path (and its external data) with each INT8
    product's output shifted by -E[x] (W_q - W); products left in float are not touched.
    Returns counts and the size of the shifts."""
    import onnx
    from onnx import helper, numpy_helper

    fp32 = onnx.load(str(fp32_path), load_external_data=False)
    fp32_inits = {t.name: t for t in fp32.graph.initializer}
    model = onnx.load(str(quant_path))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    uses: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    folded = added = 0
    shift_rms = []
    new_adds: dict[str, object] = {}   # product output -> the Add that now produces it
    replaced: set[str] = set()          # biases given corrected copies
    for a, w, out in weight_matmuls(fp32.graph):
        if w + "_quantized" not in inits:
            continue   # left in float
        weight = numpy_helper.to_array(fp32_inits[w], base_dir=str(fp32_path.parent)).astype(np.float64)
        q = numpy_helper.to_array(inits[w + "_quantized"]).astype(np.float64)
        scale = numpy_helper.to_array(inits[w + "_scale"]).astype(np.float64)
        zero = numpy_helper.to_array(inits[w + "_zero_point"]).astype(np.float64)
        dequant = (q - zero) * scale   # per output channel (the last axis) or one scale
        if dequant.shape != weight.shape or np.abs(dequant - weight).max() > 0.501 * scale.max() + 1e-7:
            raise ValueError(f"{quant_path.name}: the quantized {w} does not match the float weight")
        shift = -(means[a] @ (dequant - weight))
        shift_rms.append(float(np.sqrt(np.mean(shift ** 2))))
        reader, bias = _bias_after(out, uses, inits)
        if bias is not None and tuple(bias.dims) == shift.shape:
            # a bias of its own (exporters share equal constants between layers)
            value = numpy_helper.to_array(bias).astype(np.float64) + shift
            name = out + "_corrected_bias"
            graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), name))
            reader.input[list(reader.input).index(bias.name)] = name
            replaced.add(bias.name)
            folded += 1
        else:
            name = out + "_bias_correction"
            graph.initializer.append(numpy_helper.from_array(shift.astype(np.float32), name))
            new_adds[out] = helper.make_node("Add", [out + "_uncorrected", name], [out], name=name)
            added += 1
    nodes = []
    for node in graph.node:   # each new Add right after its product's last node: order holds
        after = [new_adds[o] for o in node.output if o in new_adds]
        for add in after:
            node.output[list(node.output).index(add.output[0])] = add.input[0]
        nodes += [node, *after]
    del graph.node[:]
    graph.node.extend(nodes)
    still_read = _read_names(graph)
    kept = [t for t in graph.initializer if t.name not in replaced or t.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    data = quant_path.name + ".data"
    (quant_path.parent / data).unlink(missing_ok=True)   # loaded above; rewritten whole
    onnx.save(model, str(quant_path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=data, size_threshold=1024)
    return {"folded_into_bias": folded, "added": added,
            "shift_rms_median": float(np.median(shift_rms)) if shift_rms else 0.0,
            "shift_rms_max": float(np.max(shift_rms)) if shift_rms else 0.0}


def _bias_after(out: str, uses: dict, inits: dict):
    """(the Add, its constant) when `out` is read only by an Add of a constant: its bias."""
    readers = uses.get(out, [])
    if len(readers) != 1 or readers[0].op_type != "Add":
        return None, None
    other = [i for i in readers[0].input if i != out]
    if len(other) != 1 or other[0] not in inits:
        return None, None
    return readers[0], inits[other[0]]


def _read_names(graph) -> set[str]:
    """Every name a node of the graph or of its subgraphs (If branches) reads."""
    names = set()
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                names |= _read_names(sub)
    return names
