"""Export a MinerU2.5 (Qwen2-VL) model folder to ONNX for the torch-free runtime.

    export_model(model_dir, out_dir, int8=False, int4=False, verify=True) -> report dict

writes out_dir/ as the export folder that vlm.export_format describes (vision.onnx,
decoder.onnx, embed_tokens.npy, the model folder's config and tokenizer files, manifest.json with
the source weights' sha256, every file's sha256, opset, versions, quantization and parity).

The graphs are mineru_cli.export.graphs' wrappers over the HF model's own layers, exported with
torch.onnx (the dynamo exporter by default; "torchscript" is the legacy one, much faster for
tiny test models). INT8 is onnxruntime's dynamic quantization of every MatMul with a constant
weight (per output channel), optionally bias-corrected with mean inputs measured on rendered
pages (bias_correction); INT4 is MatMulNBits (block-wise, weights only) for the decoder, with the
vision encoder in INT8.

The folder is written as OUT.partial, marked unfinished (export_format.UNFINISHED) until it is
renamed into place complete, so a crash never leaves a folder taken for an export: a SIGKILL
during verification leaves OUT.partial with a manifest, which `mineru models` and parse do not
take. An export already in OUT is set aside as OUT.replaced (marked too) and removed after.
OUT that is a symbolic link is followed: the export is written where it points, beside the real
folder, and the link stays. A lock ('.OUT.lock' beside it, as the journal's) is held for the
whole export: a second export to the same OUT would remove the first's OUT.partial as a
leftover, so it is refused at once.

Imports torch and transformers: export time only.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import logging
import os
import shutil
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..core.errors import SetupError
from ..hashing import file_sha256 as sha256_file
from ..vlm import int8_target, model_identity, openvino_vision
from ..vlm.export_format import (
    COPIED_FILES,
    FORMAT,
    FORMAT_VERSION,
    GRAPHS,
    MANIFEST,
    UNFINISHED,
    decoder_io,
    is_unfinished_export,
    read_manifest,
    write_manifest,
)
from . import bias_correction as bias_correction_mod
from . import step_path
from .weight_only import weight_only_int8

DEFAULT_OPSET = 18


# --------------------------------------------------------------------------- helpers


def _say(log: Callable[[str], None] | None, msg: str) -> None:
    if log:
        log(msg)


def _versions() -> dict:
    out: dict[str, str | None] = {"python": sys.version.split()[0]}  # None: absent or broken
    for name in ("torch", "transformers", "onnx", "onnxscript", "onnxruntime", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - absent or broken: just not reported
            out[name] = None
    try:
        from importlib.metadata import version

        out["mineru_cli"] = version("mineru-cli")
    except Exception:  # noqa: BLE001
        out["mineru_cli"] = None
    return out


def source_weights(model_dir: Path) -> dict:
    """{"files": {name: sha256}, "sha256": digest over the sorted (name, sha256) lines}."""
    files = {p.name: sha256_file(p) for p in sorted(model_dir.glob("*.safetensors"))}
    text = "\n".join(f"{n} {h}" for n, h in sorted(files.items()))
    return {"files": files, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _name_dims(path: Path, names: dict[str, dict[int, str]]) -> None:
    """Give the graph's dynamic input/output axes readable names (batch, seq, past, ...)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    for value in list(model.graph.input) + list(model.graph.output):
        for axis, label in names.get(value.name, {}).items():
            dim = value.type.tensor_type.shape.dim[axis]
            dim.ClearField("dim_value")
            dim.dim_param = label
    onnx.save(model, str(path))


class _quiet:
    """Silence the exporter's progress prints and warnings (stdout of a CLI command is ours)."""

    def __enter__(self):
        self._stdout = sys.stdout
        sys.stdout = open(os.devnull, "w")
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        self._level = logging.getLogger("torch").level
        logging.getLogger("torch").setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        sys.stdout.close()
        sys.stdout = self._stdout
        self._warnings.__exit__(*exc)
        logging.getLogger("torch").setLevel(self._level)
        return False


@contextlib.contextmanager
def _root_log_level(level: int):
    root = logging.getLogger()
    old = root.level
    root.setLevel(level)
    try:
        yield
    finally:
        root.setLevel(old)


# --------------------------------------------------------------------------- graphs


def _export(
    module,
    args: tuple,
    path: Path,
    input_names: list[str],
    output_names: list[str],
    axes: dict[str, dict[int, str]],
    exporter: str,
    opset: int,
    star_args: int = 0,
) -> None:
    """Export `module(*args)`; its last `star_args` inputs are one `*past` parameter, whose
    dynamo dynamic_shapes entry must be a tuple mirroring it."""
    import torch

    from .graphs import register_torchscript_symbolics, translation_table

    with _quiet(), torch.inference_mode():
        if exporter == "dynamo":
            from torch.export import Dim

            # every named axis dynamic; the exporter derives total = past + seq by itself
            shapes = [{a: Dim.DYNAMIC for a in axes.get(n, {})} for n in input_names]
            dynamic_shapes: tuple[dict[int, Any] | tuple[dict[int, Any], ...], ...] = tuple(shapes)
            if star_args:
                dynamic_shapes = (*shapes[:-star_args], tuple(shapes[-star_args:]))
            torch.onnx.export(
                module,
                args,
                str(path),
                dynamo=True,
                dynamic_shapes=dynamic_shapes,
                custom_translation_table=translation_table(),
                verbose=False,
                input_names=input_names,
                output_names=output_names,
                opset_version=opset,
                external_data=True,
            )
        elif exporter == "torchscript":
            register_torchscript_symbolics(opset)
            torch.onnx.export(
                module,
                args,
                str(path),
                dynamo=False,
                dynamic_axes=axes,
                custom_opsets={"com.microsoft": 1},
                input_names=input_names,
                output_names=output_names,
                opset_version=opset,
                external_data=True,
            )
        else:
            raise SetupError(f"unknown exporter {exporter!r}; choose dynamo or torchscript")
    _name_dims(path, axes)


def export_vision(model, path: Path, exporter: str = "dynamo", opset: int = DEFAULT_OPSET) -> None:
    import torch

    from .graphs import VisionGraph

    graph = VisionGraph(model.model.visual).eval()
    n = 4 * graph.merge_unit  # a 4x4 grid of patches
    dim = int(
        model.config.vision_config.in_channels
        * model.config.vision_config.temporal_patch_size
        * model.config.vision_config.patch_size**2
    )
    args = (torch.randn(n, dim), torch.randint(0, 4, (n, 2)))
    axes = {"pixel_values": {0: "patches"}, "vision_position_ids": {0: "patches"}, "image_embeds": {0: "tokens"}}
    _export(graph, args, path, ["pixel_values", "vision_position_ids"], ["image_embeds"], axes, exporter, opset)


def export_decoder(model, path: Path, exporter: str = "dynamo", opset: int = DEFAULT_OPSET) -> None:
    import torch

    from .graphs import DecoderGraph

    graph = DecoderGraph(model).eval()
    cfg = model.config.text_config
    layers = int(cfg.num_hidden_layers)
    b, s, c = 2, 3, 8  # distinct sizes > 1, so none is specialised to a constant
    args = (
        torch.randn(b, s, int(cfg.hidden_size)),
        torch.zeros(3, b, s, dtype=torch.long),
        torch.tensor([4, 5], dtype=torch.int32),
        torch.tensor(6, dtype=torch.int32),
        *[torch.randn(b, graph.num_kv_heads, c, graph.head_dim) for _ in range(2 * layers)],
    )
    inputs, outputs = decoder_io(layers)
    axes = {
        "inputs_embeds": {0: "batch", 1: "seq"},
        "position_ids": {1: "batch", 2: "seq"},
        "seqlens_k": {0: "batch"},
        "logits": {0: "batch"},
    }
    axes.update({n: {0: "batch", 2: "capacity"} for n in inputs[4:] + outputs[1:]})
    _export(graph, args, path, inputs, outputs, axes, exporter, opset, star_args=2 * layers)


# --------------------------------------------------------------------------- quantization


def _weight_matmuls(path: Path) -> list[tuple[str, tuple[int, ...]]]:
    """(node name, weight shape) of every MatMul whose B input is an initializer."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name: tuple(t.dims) for t in model.graph.initializer}
    return [
        (n.name, inits[n.input[1]])
        for n in model.graph.node
        if n.op_type == "MatMul" and len(n.input) > 1 and n.input[1] in inits
    ]


def quantize_int8(
    src: Path,
    dst: Path,
    weight_type: str = "QInt8",
    per_channel: bool = True,
    exclude: list[str] | None = None,
    reduce_range: bool = False,
    only: list[str] | None = None,
) -> dict:
    """onnxruntime's dynamic quantizer over every MatMul with a constant weight (or only the
    nodes named in `only`); reduce_range keeps weights in 7 bits (int8_target: what a CPU
    without VNNI needs for signed weights)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _root_log_level(logging.ERROR):  # "consider pre-processing" warnings on stderr
        quantize_dynamic(
            str(src),
            str(dst),
            op_types_to_quantize=["MatMul"],
            per_channel=per_channel,
            reduce_range=reduce_range,
            weight_type=getattr(QuantType, weight_type),
            nodes_to_exclude=list(exclude or []),
            nodes_to_quantize=list(only or []),
            use_external_data_format=True,
            # DefaultTensorType: onnx's shape inference gives no type past the
            # onnxruntime-only ops (SimplifiedLayerNormalization); all are float
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": 1},
        )
    return {
        "method": "onnxruntime.quantize_dynamic",
        "op_types": ["MatMul"],
        "weight_type": weight_type,
        "per_channel": per_channel,
        "reduce_range": reduce_range,
        "excluded_nodes": list(exclude or []),
    }


def weight_kind(role: str, shape: tuple[int, ...], table: dict) -> str:
    """What a constant-weight MatMul of a graph is, from its weight's (in, out) shape and the
    model table: decoder "attention" (q/k/v/o), "mlp" (gate/up/down) or "lm_head"; vision
    "patch_embed", "attention" (qkv, proj), "mlp" (fc1, fc2) or "merger"."""
    n_in, n_out = shape[0], shape[-1]
    if role == "decoder":
        if n_out == table["vocab_size"]:
            return "lm_head"
        return "mlp" if max(n_in, n_out) > table["num_heads"] * table["head_dim"] else "attention"
    embed = table["vision_embed_dim"]
    if n_in == table["patch_dim"]:
        return "patch_embed"
    if n_in == embed and n_out in (embed, 3 * embed):
        return "attention"
    if embed in (n_in, n_out):
        return "mlp"
    return "merger"


def weight_kinds(path: Path, role: str, table: dict) -> dict[str, list[str]]:
    """{kind: [node names]} of the constant-weight MatMuls of a graph (weight_kind)."""
    kinds: dict[str, list[str]] = {}
    for name, shape in _weight_matmuls(path):
        kinds.setdefault(weight_kind(role, shape, table), []).append(name)
    return kinds


def quantize_int8_by_kind(
    src: Path,
    dst: Path,
    settings: dict,
    kinds: dict[str, dict],
    role: str,
    table: dict,
    work: Path,
    exclude: list[str] | None = None,
) -> dict:
    """quantize_int8 with `settings` for every product but those of the kinds in `kinds`
    ({kind: settings}), which take their own (one more pass per distinct settings), and those
    in `exclude`, which stay float32. The table returned records each such kind's settings and
    nodes under "kinds"."""
    exclude = list(exclude or [])
    nodes = {k: [n for n in names if n not in exclude] for k, names in weight_kinds(src, role, table).items()}
    passes: list[tuple[dict, list[str], list[str]]] = []  # (settings, kinds, nodes)
    for kind, own in kinds.items():
        if not nodes.get(kind):
            continue
        same = next((p for p in passes if p[0] == own), None)
        if same is None:
            passes.append((dict(own), [kind], list(nodes[kind])))
        else:
            same[1].append(kind)
            same[2].extend(nodes[kind])
    special = [n for p in passes for n in p[2]]
    if not passes:
        return quantize_int8(src, dst, **settings, exclude=exclude)
    work.mkdir(parents=True, exist_ok=True)
    steps = [work / f"pass{i}" / src.name for i in range(len(passes))] + [dst]
    steps[0].parent.mkdir(exist_ok=True)
    table_out = quantize_int8(src, steps[0], **settings, exclude=special + exclude)
    table_out["excluded_nodes"] = exclude  # what is left in float32
    table_out["kinds"] = {}
    for i, (own, kind_names, only) in enumerate(passes):
        steps[i + 1].parent.mkdir(exist_ok=True)
        quantize_int8(steps[i], steps[i + 1], **own, only=only)
        for kind in kind_names:
            table_out["kinds"][kind] = {**own, "nodes": nodes[kind]}
    shutil.rmtree(work)
    return table_out


def quantize_int4(src: Path, dst: Path, block_size: int = 32, exclude: list[str] | None = None) -> dict:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = onnx.load(str(src))
    q = MatMulNBitsQuantizer(model, block_size=block_size, is_symmetric=True, nodes_to_exclude=list(exclude or []))
    with _root_log_level(logging.ERROR):
        q.process()
    q.model.save_model_to_file(str(dst), use_external_data_format=True)
    return {
        "method": "onnxruntime.MatMulNBitsQuantizer",
        "bits": 4,
        "block_size": block_size,
        "symmetric": True,
        "excluded_nodes": list(exclude or []),
    }


# --------------------------------------------------------------------------- parity


def parity_inputs(model_dir: Path):
    """Two small requests of different lengths (rows of unequal length are exercised): a noise
    image with the layout prompt and a wide one with the text prompt."""
    from PIL import Image

    from ..vlm.processor import ImageProcessor, ImageProcessorConfig
    from ..vlm.protocol.chat import LAYOUT_PROMPT, TEXT_PROMPT
    from ..vlm.tokenizer import ChatTokenizer, build_input

    tok = ChatTokenizer.from_dir(model_dir)
    proc = ImageProcessor(ImageProcessorConfig.from_file(model_dir / "preprocessor_config.json"))
    rng = np.random.default_rng(0)
    images = [
        Image.fromarray(rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)),
        Image.fromarray(rng.integers(0, 256, (84, 224, 3), dtype=np.uint8)),
    ]
    prompts = [LAYOUT_PROMPT, TEXT_PROMPT]
    return [build_input(tok, proc, im, pr) for im, pr in zip(images, prompts)]


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-30)


def teacher_forced(runtime, inputs, steps: int = 16, tokens: list | None = None):
    """(logits rows (steps+1, B, vocab), the tokens fed): the runtime's own greedy choice
    (plain argmax, no penalties) when `tokens` is None, else the given tokens."""
    rows = [runtime.prefill(inputs)]
    fed = []
    for i in range(steps):
        t = rows[-1].argmax(-1).astype(np.int64) if tokens is None else tokens[i]
        fed.append(t)
        rows.append(runtime.step(t))
    return np.stack(rows).astype(np.float32), fed


# A reference's choice of token is clear where its top logit leads the next by CLEAR_LEAD of the
# logits' scale or more. Quantization moves logits by about 1 % of it (INT8), so the choice at a
# nearer tie may flip whatever the export's quality (a trained tiny model had one position of 34
# with a lead of 0.14 on a scale of 13, and INT8 flipped it); a flipped clear choice is a fault.
CLEAR_LEAD = 0.02


def compare_logits(ref: np.ndarray, cand: np.ndarray) -> dict:
    """Over every (step, row) logits vector: the max absolute difference, the min and mean
    cosine, the share of steps whose argmax agrees, and that share over the positions where the
    reference's choice is clear (CLEAR_LEAD; None where none is) with their count."""
    cos = _cosine(ref, cand)
    scale = float(np.abs(ref).max())
    top_two = np.sort(ref, axis=-1)[..., -2:]
    clear = top_two[..., 1] - top_two[..., 0] >= CLEAR_LEAD * scale
    agree = ref.argmax(-1) == cand.argmax(-1)
    return {
        "max_abs_logit_diff": float(np.abs(ref - cand).max()),
        "logit_scale": scale,
        "cosine_min": float(cos.min()),
        "cosine_mean": float(cos.mean()),
        "top1_agreement": float(agree.mean()),
        # None (JSON's null) where no choice is clear: manifest.json stays strict JSON
        "top1_clear_agreement": float(agree[clear].mean()) if clear.any() else None,
        "clear_positions": int(clear.sum()),
        "positions": int(ref.shape[0] * ref.shape[1]),
        "batch": int(ref.shape[1]),
        "steps": int(ref.shape[0] - 1),
    }


def measure_parity(reference, candidate, inputs, steps: int = 16) -> dict:
    """Teacher-forced comparison of two runtimes over one batch: the reference decodes greedily
    for `steps` tokens and the candidate is fed the same tokens (compare_logits)."""
    ref, tokens = teacher_forced(reference, inputs, steps)
    cand, _ = teacher_forced(candidate, inputs, steps, tokens)
    return compare_logits(ref, cand)


# --------------------------------------------------------------------------- the export


def _load_model(model_dir: Path):
    from ..vlm.runtime_torch import load_model  # safetensors only, checked whole

    return load_model(model_dir)


def calibration_means(
    model_dir: Path,
    vision_ids: tuple[int, int, int],
    fp32_dir: Path,
    embed_tokens: Path,
    table: dict,
    threads: int | None,
    decoder: bool,
) -> dict:
    """bias_correction.calibration_means of the fp32 graphs in fp32_dir on the calibration pages
    (the embedding table at embed_tokens; vision_ids: the vision start, image pad and vision end
    token ids). `mineru export` and scripts/int8_targets.py measure the means here."""
    return bias_correction_mod.calibration_means(
        fp32_dir,
        GRAPHS,
        np.load(embed_tokens, mmap_mode="r"),
        bias_correction_mod.calibration_inputs(model_dir, vision_ids, bias_correction_mod.SAMPLES),
        table["image_token_id"],
        table["merge_size"],
        table["num_layers"],
        table["num_kv_heads"],
        table["head_dim"],
        threads or 1,
        decoder=decoder,
    )


def _model_table(model) -> dict:
    cfg = model.config
    text, vision = cfg.text_config, cfg.vision_config
    return {
        "architecture": "Qwen2VLForConditionalGeneration",
        "num_layers": int(text.num_hidden_layers),
        "num_kv_heads": int(text.num_key_value_heads),
        "num_heads": int(text.num_attention_heads),
        "head_dim": int(getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads),
        "hidden_size": int(text.hidden_size),
        "vocab_size": int(text.vocab_size),
        "merge_size": int(vision.spatial_merge_size),
        "image_token_id": int(cfg.image_token_id),
        "patch_dim": int(vision.in_channels * vision.temporal_patch_size * vision.patch_size**2),
        "vision_depth": int(vision.depth),
        "vision_embed_dim": int(vision.embed_dim),
    }


def _real_out(out_dir: Path) -> Path:
    """out_dir with its symbolic links followed: the export is written, set aside and renamed
    where a link points, so the link stays (a rename would replace the link itself, and its
    target would be set aside through it, never to be removed)."""
    real = Path(os.path.realpath(out_dir))
    if real.is_symlink():
        raise SetupError(f"{out_dir} is a link that loops; choose another folder")
    return real


@contextlib.contextmanager
def _export_lock(out_dir: Path, given: Path) -> Iterator[None]:
    """Hold out_dir's lock ('.NAME.lock' beside it, as the journal's) while the body runs: a
    second export to the same folder would remove the first's OUT.partial as a leftover. The
    lock file is removed before it is released, so no export leaves it behind; a run that
    opened it just before then finds it gone and takes the next one."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    path = out_dir.with_name(f".{out_dir.name}.lock")
    while True:
        try:
            lock = open(path, "w")
        except OSError as exc:  # said of the folder: the lock file is no name the user knows
            raise OSError(exc.errno, exc.strerror, str(out_dir.parent)) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise SetupError(f"another mineru export is writing {given} (lock held); wait for it to finish") from None
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(lock.fileno()), path.stat()):
                break
        lock.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        lock.close()


def _work_dirs(out_dir: Path) -> tuple[Path, Path]:
    """(where the export is written, where an export already in out_dir is set aside); a
    set-aside folder left by a cut-off run is removed, anything else there is in the way. A link
    there was left by an export through a link to OUT before links were followed: the link goes,
    never what it points to."""
    work = out_dir.with_name(out_dir.name + ".partial")
    old = out_dir.with_name(out_dir.name + ".replaced")
    if old.is_symlink():
        old.unlink()
    if old.exists():
        if not is_unfinished_export(old):
            raise SetupError(f"{old} is in the way of replacing {out_dir}: move it elsewhere")
        shutil.rmtree(old)
    return work, old


def _move_into_place(work: Path, out_dir: Path, old: Path) -> None:
    """Rename the finished work folder to out_dir. An export already there is marked unfinished
    and renamed aside first, then removed: out_dir is at every moment the old export whole, the
    new one whole, or absent (between two renames), never a half-removed folder."""
    (work / UNFINISHED).unlink()
    if out_dir.exists():
        (out_dir / UNFINISHED).touch()
        os.replace(out_dir, old)
    os.replace(work, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def export_model(
    model_dir: str | Path,
    out_dir: str | Path,
    int8: bool = False,
    int4: bool = False,
    verify: bool = True,
    *,
    exporter: str = "dynamo",
    opset: int = DEFAULT_OPSET,
    threads: int | None = None,
    quantize_lm_head: bool = True,
    parity_steps: int = 16,
    bias_correction: bool = False,
    force: bool = False,
    target: str | None = None,
    profile: str | None = None,
    openvino: bool = False,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Export `model_dir` to `out_dir` (fp32, or INT8 / INT4 weights); returns the report
    (the manifest plus timings). With verify, the export is loaded by the ONNX runtime and
    compared with the PyTorch model on two small requests (teacher-forced, see
    measure_parity); the figures go into the manifest. bias_correction (with int8 or int4):
    the INT8 graphs are bias-corrected (bias_correction.py). target: the CPU family the INT8
    weights are for (int8_target.TARGETS; None or "auto": this CPU's). An existing export in out_dir is
    replaced only with force=True; a folder that is not an export is never overwritten.
    profile ("2509" | "pro"): the release to record when the files cannot tell (None: from the
    files, vlm.model_identity); the manifest's source.identity is what the runtime reads.
    openvino: also write the vision encoder for OpenVINO's bf16 products (vlm.openvino_vision:
    weight-only INT8, from the float graph), which `mineru bench` measures.
    """
    from ..vlm.model_dir import missing_files

    t_start = time.monotonic()
    model_dir, out_dir = Path(model_dir).expanduser(), Path(out_dir).expanduser()
    missing = missing_files(model_dir)
    if missing:
        raise SetupError(f"{model_dir} is not a model folder (missing: {', '.join(missing)})")
    if int8 and int4:
        raise SetupError("choose one of --int8 and --int4")
    if bias_correction and not (int8 or int4):
        raise SetupError("--bias-correction corrects INT8 weights: add --int8 (or --int4)")
    if target is not None and not (int8 or int4):
        raise SetupError("--target chooses the INT8 weights for a CPU family: add --int8 (or --int4)")
    target = int8_target.resolve_target(target)
    if exporter not in ("dynamo", "torchscript"):
        raise SetupError(f"unknown exporter {exporter!r}; choose dynamo or torchscript")
    if profile is not None and profile not in model_identity.RELEASES:
        raise SetupError(f"unknown model profile {profile!r}; choose one of {', '.join(model_identity.RELEASES)}")
    given, out_dir = out_dir, _real_out(out_dir)
    with _export_lock(out_dir, given):
        if out_dir.exists():
            if not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file()):
                raise SetupError(f"{given} exists and is not an ONNX export; choose another folder")
            if (out_dir / MANIFEST).is_file() and not force:
                raise SetupError(f"{given} already holds an export; pass --force to replace it")

        import torch

        if threads:
            torch.set_num_threads(int(threads))
        timings: dict[str, float] = {}
        work, old = _work_dirs(out_dir)
        try:  # from its first step on: a stop (Ctrl-C, SIGTERM) while it is made removes it too
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            (work / UNFINISHED).touch()
            t0 = time.monotonic()
            _say(log, f"hashing the weights of {model_dir}")
            # which release it is, from its files: the runtime reads the profile from here
            identity = model_identity.detect(model_dir, strict=profile is None)
            if profile is not None:
                identity = replace(identity, profile=profile, source="--model-profile")
            source = {
                "model_dir": str(model_dir.resolve()),
                **source_weights(model_dir),
                "identity": identity.as_dict(),
            }
            timings["hash_source"] = time.monotonic() - t0

            t0 = time.monotonic()
            _say(log, "loading the model (fp32)")
            model = _load_model(model_dir)
            timings["load"] = time.monotonic() - t0
            table = _model_table(model)

            quantized = int8 or int4
            fp32_dir = work / ".fp32" if quantized else work
            fp32_dir.mkdir(exist_ok=True)
            t0 = time.monotonic()
            _say(log, f"exporting vision.onnx ({exporter}, opset {opset})")
            export_vision(model, fp32_dir / GRAPHS["vision"], exporter, opset)
            timings["export_vision"] = time.monotonic() - t0
            t0 = time.monotonic()
            _say(log, f"exporting decoder.onnx ({exporter}, opset {opset})")
            export_decoder(model, fp32_dir / GRAPHS["decoder"], exporter, opset)
            timings["export_decoder"] = time.monotonic() - t0
            np.save(work / GRAPHS["embed_tokens"], model.get_input_embeddings().weight.detach().float().numpy())
            graphs = dict(GRAPHS)
            if openvino:
                t0 = time.monotonic()
                _say(log, f"writing {openvino_vision.VISION_GRAPH} (weight-only INT8, for OpenVINO's bf16 products)")
                weight_only_int8(fp32_dir / GRAPHS["vision"], work / openvino_vision.VISION_GRAPH)
                graphs[openvino_vision.GRAPH_ROLE] = openvino_vision.VISION_GRAPH
                timings["openvino_vision"] = time.monotonic() - t0

            quantization: dict[str, Any] | None = None  # the manifest's table; None: fp32
            if quantized:
                t0 = time.monotonic()
                lm_head = [
                    name
                    for name, shape in _weight_matmuls(fp32_dir / GRAPHS["decoder"])
                    if shape and shape[-1] == table["vocab_size"]
                ]
                settings = int8_target.int8_settings(target)
                # kinds of product with their own weights (int8_target.kind_settings), quantized apart;
                # --float-lm-head leaves the output layer in float32 in every pass
                kinds = int8_target.kind_settings(target)
                if not int8:  # an INT4 decoder: MatMulNBits throughout
                    kinds["decoder"] = {}
                if not quantize_lm_head:
                    kinds["decoder"].pop("lm_head", None)
                exclude = lm_head if not quantize_lm_head else []
                quantization = {}
                means = None
                # the graphs bias-corrected: all INT8 ones on request, and those the target's weights
                # always need it for (int8_target.corrected_graphs)
                corrected = set(int8_target.corrected_graphs(target))
                if bias_correction:
                    corrected |= {"vision", "decoder"} if int8 else {"vision"}
                if corrected:
                    _say(log, "measuring the mean inputs of the weight products on calibration pages")
                    cfg = model.config
                    vision_ids = (int(cfg.vision_start_token_id), int(cfg.image_token_id), int(cfg.vision_end_token_id))
                    embed_tokens = work / GRAPHS["embed_tokens"]
                    means = calibration_means(
                        model_dir, vision_ids, fp32_dir, embed_tokens, table, threads, decoder="decoder" in corrected
                    )
                    timings["calibrate"] = time.monotonic() - t0
                    t0 = time.monotonic()
                for role in ("vision", "decoder"):
                    src, dst = fp32_dir / GRAPHS[role], work / GRAPHS[role]
                    _say(log, f"quantizing {dst.name} ({'INT4' if int4 and role == 'decoder' else 'INT8'})")
                    if int8 or role == "vision":
                        # INT4 keeps the vision encoder in INT8: MatMulNBits dequantizes to float for
                        # its thousands of rows (measured 1.8x slower than INT8 there, and less exact)
                        quantization[role] = quantize_int8_by_kind(
                            src,
                            dst,
                            settings[role],
                            kinds[role],
                            role,
                            table,
                            work / f".{role}-passes",
                            exclude=exclude if role == "decoder" else None,
                        )
                        if means is not None and role in corrected:
                            quantization[role]["bias_correction"] = {
                                "calibration": f"mean inputs over {bias_correction_mod.SAMPLES} rendered pages",
                                "min_rows": bias_correction_mod.MIN_ROWS,
                                **bias_correction_mod.correct(src, dst, means[role]),
                            }
                    else:
                        quantization[role] = quantize_int4(src, dst, exclude=exclude)
                # the runtime reads the weight settings to know what saturates on its CPU
                # (int8_target.graphs_needing_exact_kernels); where it was made is there for the user
                quantization.update(scheme="int8" if int8 else "int4", target=target, made_on=int8_target.cpu_summary())
                timings["quantize"] = time.monotonic() - t0
                shutil.rmtree(fp32_dir)

            # decoding steps leave the GroupQueryAttention kernel for grouped products (step_path).
            # Added last: the quantizers re-sort a graph's nodes without seeing what the If branches
            # read from outside them, which breaks the graph's topological order
            step_path.rewrite(work / GRAPHS["decoder"], table["head_dim"])

            for name in COPIED_FILES:
                if (model_dir / name).is_file():
                    shutil.copy2(model_dir / name, work / name)

            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "source": source,
                "model": table,
                "graphs": graphs,
                "io": {
                    "vision": {"inputs": ["pixel_values", "vision_position_ids"], "outputs": ["image_embeds"]},
                    "decoder": dict(zip(("inputs", "outputs"), decoder_io(table["num_layers"]))),
                },
                "exporter": exporter,
                "opset": opset,
                "versions": _versions(),
                "quantization": quantization,
                "parity": None,
            }
            write_manifest(work, manifest)

            if verify:
                t0 = time.monotonic()
                _say(log, "checking the export against the PyTorch model")
                manifest["parity"] = verify_parity(
                    model, model_dir, work, steps=parity_steps, threads=threads or torch.get_num_threads()
                )
                timings["verify"] = time.monotonic() - t0
                write_manifest(work, manifest)

            del model
            _move_into_place(work, out_dir, old)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        timings["total"] = time.monotonic() - t_start
        report = read_manifest(out_dir)
        report["out_dir"] = str(given)
        report["timings"] = {k: round(v, 2) for k, v in timings.items()}
        report["bytes"] = sum(f["bytes"] for f in report["files"].values())
        return report


def verify_parity(model, model_dir: Path, export_dir: Path, steps: int = 16, threads: int = 1) -> dict:
    import torch

    from ..vlm.runtime_onnx import OnnxRuntime
    from ..vlm.runtime_torch import TorchRuntime

    inputs = parity_inputs(Path(model_dir))
    onnx_rt = OnnxRuntime(export_dir, threads=threads)
    out = measure_parity(TorchRuntime.from_model(model), onnx_rt, inputs, steps)
    with torch.inference_mode():
        t = TorchRuntime.from_model(model).image_embeds(inputs[:1])[0].float().numpy()
    o = onnx_rt.image_embeds(inputs[:1])[0]
    out["vision_max_abs_diff"] = float(np.abs(t - o).max())
    out["vision_cosine_min"] = float(_cosine(t, o).min())
    out["reference"] = "transformers fp32 (TorchRuntime)"
    return out
