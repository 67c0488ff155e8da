"""The ONNX runtime: MinerU2.5 through onnxruntime only (numpy, no torch, no transformers).

It implements generate.Runtime over an export folder written by mineru_cli.export
(`mineru export`; the folder's files and manifest: export_format): vision.onnx turns one image's
patches into merged image embeddings, decoder.onnx takes input embeddings, M-RoPE ids, row
lengths and the KV buffer and returns the last logits, and embed_tokens.npy is memory-mapped
(only looked-up rows are read).

Inputs are the same VlmInput the torch runtime takes. The KV cache is a preallocated buffer per
layer (B, kv, C, d) that the decoder reads and writes in place (bound as both its past input and
its present output through IO binding): prompts go through GroupQueryAttention, decoding steps
through the step path's scatter and grouped products (export.step_path). Capacity grows in chunks
of KV_GROWTH tokens, and only a growth copies the cache (see export.graphs.DecoderGraph). Rows are
not padded: each row's length is told to the decoder (seqlens_k), so a row computes what it would
alone. Prompts are prefilled row by row (the kernel takes a multi-token call after the first only
at batch 1), in chunks of PREFILL_CHUNK_TOKENS; decoding steps all live rows together. retain()
gathers the live rows once when sequences finish.

The folder is verified against its manifest when the runtime loads (export_format.verify_export).
INT8 weights that would saturate on this CPU (an export made for VNNI/AMX, run without them:
int8_target) run on onnxruntime's exact u8 x u8 kernels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..core.errors import SetupError
from . import openvino_vision
from .export_format import MANIFEST, decoder_io, read_manifest, verify_export
from .int8_target import EXACT_KERNELS_OPTION, graphs_needing_exact_kernels
from .processor import vision_position_ids
from .tokenizer import VlmInput

# Tokens of KV capacity added at a time. A decoding step reads every column of the buffer (the
# ones past a row's length are masked), so spare capacity costs every step; a growth copies the
# buffers once. Measured at batch 8, 64 steps from ~540 tokens (INT8): 52.8 ms per step with 128,
# 50.7 with 64, 49.4 with 32.
KV_GROWTH = 32
# A prompt is prefilled in chunks of at most PREFILL_CHUNK_TOKENS tokens (each chunk attends to
# the buffer filled by the ones before): a call's activations and the kernel's (heads, S, C) score
# buffer grow with the chunk, and a 1,400-token layout prompt in one call was a worker's
# memory peak.
PREFILL_CHUNK_TOKENS = 1024


# --------------------------------------------------------------------------- runtime

_ARENA_REGISTERED = False


def _register_tight_arena(ort) -> None:
    """A process-wide CPU arena that grows by what is asked, not in powers of two (the
    default): a layout image's vision activations and a prompt's attention scores are large, and
    the default arena rounded a worker's peak up from 2.7 to 3.0 GB (measured, INT8 export).
    Registered once per process; our sessions opt in with session.use_env_allocators."""
    global _ARENA_REGISTERED
    if _ARENA_REGISTERED:
        return
    try:
        memory = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(memory, ort.OrtArenaCfg(0, 1, -1, -1))  # 1: kSameAsRequested
    except Exception:  # noqa: BLE001 - an older onnxruntime: the sessions use their own arenas
        pass
    _ARENA_REGISTERED = True


def vision_feed(x: VlmInput, merge_size: int) -> dict:
    """The vision graph's inputs for one image: its patches and their 2D rotary ids."""
    return {
        "pixel_values": np.ascontiguousarray(x.pixel_values, dtype=np.float32),
        "vision_position_ids": vision_position_ids(x.image_grid_thw, merge_size),
    }


def prompt_embeddings(table: np.ndarray, ids: np.ndarray, image_token_id: int, feats: np.ndarray) -> np.ndarray:
    """A prompt's input embeddings (L, hidden), float32: rows of the embedding table, with the
    image features (the vision graph's image_embeds) in the image tokens' places."""
    ids = np.asarray(ids, dtype=np.int64)
    embeds = np.asarray(table[ids], dtype=np.float32)
    where = ids == image_token_id
    if int(where.sum()) != feats.shape[0]:
        raise ValueError(f"{int(where.sum())} image tokens for {feats.shape[0]} image features")
    embeds[where] = feats
    return embeds


class OnnxRuntime:
    name = "onnx"

    def __init__(
        self,
        export_dir: str | Path,
        threads: int = 1,
        image_token_id: int | None = None,
        verify: bool = True,
        exact_int8: bool = True,
        vision_backend: str = openvino_vision.ONNXRUNTIME,
    ):
        """exact_int8=False runs INT8 weights that saturate on this CPU on the fast kernels all
        the same (int8_target): only to measure what the exact kernels cost and prevent.
        vision_backend: openvino_vision.ONNXRUNTIME, or OPENVINO to measure the vision encoder in
        bf16 on OpenVINO (`mineru bench`; a SetupError where it cannot run)."""
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise SetupError("the onnx vlm runtime needs onnxruntime: pip install onnxruntime") from exc
        self._ort = ort
        self.export_dir = Path(export_dir)
        self.manifest = verify_export(self.export_dir) if verify else read_manifest(self.export_dir)
        # graphs whose weights would saturate here (an export made for VNNI/AMX) take the exact
        # u8 x u8 kernels
        self.exact_kernels = graphs_needing_exact_kernels(self.manifest) if exact_int8 else []
        m = self.manifest["model"]
        try:
            self.num_layers = int(m["num_layers"])
            self.num_kv_heads = int(m["num_kv_heads"])
            self.head_dim = int(m["head_dim"])
            self.hidden_size = int(m["hidden_size"])
            self.vocab_size = int(m["vocab_size"])
            self.merge_size = int(m["merge_size"])
            self.image_token_id = int(m["image_token_id"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SetupError(f"{self.export_dir / MANIFEST}: bad model table ({exc})") from exc
        if image_token_id is not None and int(image_token_id) != self.image_token_id:
            raise SetupError(
                f"the export's image_token_id {self.image_token_id} is not the tokenizer's "
                f"<|image_pad|> id {image_token_id}"
            )

        _register_tight_arena(ort)
        # vision and prompt calls hand back what they no longer hold when they end: without this
        # a worker's memory was the sum of its phases' peaks (vision 0.74 GB of activations, then
        # a prompt's 0.29 GB, then decoding's 0.21 GB, none reusing the others' freed blocks)
        self._release = ort.RunOptions()
        self._release.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        graphs = self.manifest["graphs"]
        self.vision_backend = vision_backend
        vision_opts = self._session_options(threads, "vision")
        if self.vision_backend == openvino_vision.OPENVINO:
            if why := openvino_vision.unavailable(self.manifest, ort):
                raise SetupError(f"the vision encoder cannot run on OpenVINO here: {why}")
            vision_graph = graphs[openvino_vision.GRAPH_ROLE]
            try:
                openvino_vision.add_provider(ort, vision_opts, threads)  # the session's providers come from here
            except Exception as exc:  # onnxruntime raises its own exception types
                raise SetupError(f"the vision encoder cannot run on OpenVINO here: {exc}") from exc
            vision_providers = None
        elif self.vision_backend == openvino_vision.ONNXRUNTIME:
            vision_graph = graphs["vision"]
            vision_providers = ["CPUExecutionProvider"]
        else:
            raise SetupError(f"unknown vision backend {self.vision_backend!r}")
        try:
            self._vision = ort.InferenceSession(str(self.export_dir / vision_graph), vision_opts, vision_providers)
            self._decoder = ort.InferenceSession(
                str(self.export_dir / graphs["decoder"]),
                self._session_options(threads, "decoder"),
                providers=["CPUExecutionProvider"],
            )
            self._embed = np.load(self.export_dir / graphs["embed_tokens"], mmap_mode="r")
        except Exception as exc:  # onnxruntime raises its own exception types
            raise SetupError(f"cannot load the ONNX export {self.export_dir}: {exc}") from exc
        if self._embed.shape != (self.vocab_size, self.hidden_size):
            raise SetupError(
                f"embed_tokens has shape {self._embed.shape}, expected {(self.vocab_size, self.hidden_size)}"
            )
        wanted_inputs, wanted_outputs = decoder_io(self.num_layers)
        self._past_names, self._present_names = wanted_inputs[4:], wanted_outputs[1:]
        inputs = {i.name for i in self._decoder.get_inputs()}
        outputs = {o.name for o in self._decoder.get_outputs()}
        missing = (set(wanted_inputs) - inputs) | (set(wanted_outputs) - outputs)
        if missing:
            raise SetupError(f"decoder.onnx lacks the inputs/outputs {sorted(missing)}")
        self._kv: list[np.ndarray] = []  # per layer key, value, key, ...: (B, kv, capacity, d)
        # per row (B,), no rows before the first prefill: the tokens held, and the M-RoPE
        # position of the row's next token
        self._lengths: np.ndarray = np.zeros(0, dtype=np.int64)
        self._next_pos: np.ndarray = np.zeros(0, dtype=np.int64)
        self._step_binding = None  # see _kv_binding

    # ------------------------------------------------------------------ pieces

    def _session_options(self, threads: int, role: str):
        ort = self._ort
        opts = ort.SessionOptions()
        opts.add_session_config_entry("session.use_env_allocators", "1")
        if role in self.exact_kernels:
            opts.add_session_config_entry(EXACT_KERNELS_OPTION, "1")
        # memory patterns are cached per input shape, and every prompt and step has new shapes:
        # off, a worker's peak fell from 3.07 to 2.77 GB with no measurable change in speed
        opts.enable_mem_pattern = False
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        return opts

    def _ortvalue(self, array: np.ndarray):
        """An OrtValue sharing the memory of the array (a copy only if it is not C-contiguous;
        0-d arrays stay 0-d)."""
        return self._ort.OrtValue.ortvalue_from_numpy(np.require(array, requirements="C"))

    def image_embeds(self, inputs: Sequence[VlmInput]) -> list[np.ndarray]:
        """Merged image features per input, (tokens_i, hidden): one vision call per image."""
        out = []
        for x in inputs:
            (feats,) = self._vision.run(["image_embeds"], vision_feed(x, self.merge_size), self._release)
            out.append(feats)
        return out

    def prompt_embeds(self, x: VlmInput, feats: np.ndarray) -> np.ndarray:
        """The prompt's input embeddings (L, hidden): see prompt_embeddings."""
        return prompt_embeddings(self._embed, x.input_ids, self.image_token_id, feats)

    def embed(self, ids: np.ndarray) -> np.ndarray:
        """Rows of the embedding table, float32, shaped like ids + (hidden,)."""
        return np.asarray(self._embed[np.asarray(ids, dtype=np.int64).reshape(-1)], dtype=np.float32).reshape(
            *np.shape(ids), self.hidden_size
        )

    def _run(self, embeds: np.ndarray, positions: np.ndarray, rows: slice | None = None) -> np.ndarray:
        """One decoder call: the S new tokens of each row (all rows, or the rows of `rows`) go
        after its self._lengths tokens, written into the KV buffers in place; returns the logits
        of each row's last new token."""
        s = embeds.shape[1]
        held = slice(None) if rows is None else rows
        lengths = self._lengths[held] + s
        if int(lengths.max()) > self._kv[0].shape[2]:
            self._grow(int(lengths.max()))
        io = self._kv_binding(rows)
        # held here until the run ends: some onnxruntime versions' bindings keep only the C value,
        # not the Python OrtValue that keeps the numpy memory alive
        feeds = {
            "inputs_embeds": self._ortvalue(embeds.astype(np.float32, copy=False)),
            "position_ids": self._ortvalue(positions),
            "seqlens_k": self._ortvalue((lengths - 1).astype(np.int32)),
            "total_sequence_length": self._ortvalue(np.asarray(lengths.max(), dtype=np.int32)),
        }
        for name, value in feeds.items():
            io.bind_ortvalue_input(name, value)
        io.bind_output("logits")
        # prompts hand their memory back (see self._release); a decoding step's buffers are the
        # same size every step and stay for the next one
        self._decoder.run_with_iobinding(io, self._release if rows is not None else None)
        self._lengths[held] = lengths
        return io.get_outputs()[0].numpy()

    def _kv_binding(self, rows: slice | None):
        """An IO binding with each layer's KV buffer (all rows, or `rows`: a view) bound as both
        its past input and its present output, so the decoder writes the new columns into our
        memory. The all-rows binding is kept for the decoding steps until the buffers change
        (_grow, retain, prefill): binding 2 x layers buffers per step cost ~5 ms at batch 8."""
        if rows is None and self._step_binding is not None:
            return self._step_binding
        io = self._decoder.io_binding()
        io.bind_output("logits")  # first: get_outputs() follows the binding order
        for past, present, buf in zip(self._past_names, self._present_names, self._kv):
            view = buf if rows is None else buf[rows]
            if not view.flags.c_contiguous:  # a copy would take the decoder's writes
                raise RuntimeError("KV buffer views must be C-contiguous")
            value = self._ortvalue(view)
            io.bind_ortvalue_input(past, value)
            io.bind_ortvalue_output(present, value)
        if rows is None:
            self._step_binding = io
        return io

    def _grow(self, needed: int) -> None:
        """Room for `needed` tokens plus KV_GROWTH: new buffers holding the filled columns
        (zeroed beyond them: decoding steps read every column and mask those past a row's length,
        which must hold finite numbers for that)."""
        capacity = needed + KV_GROWTH
        filled = int(self._lengths.max()) if len(self._lengths) else 0
        grown = []
        for buf in self._kv:
            new = np.zeros((buf.shape[0], self.num_kv_heads, capacity, self.head_dim), dtype=np.float32)
            new[:, :, :filled] = buf[:, :, :filled]
            grown.append(new)
        self._kv = grown
        self._step_binding = None

    # ------------------------------------------------------------------ Runtime protocol

    def prefill(self, inputs: Sequence[VlmInput]) -> np.ndarray:
        batch = len(inputs)
        capacity = max(len(x) for x in inputs) + KV_GROWTH
        self._kv = [
            np.zeros((batch, self.num_kv_heads, capacity, self.head_dim), dtype=np.float32) for _ in self._past_names
        ]
        self._lengths = np.zeros(batch, dtype=np.int64)
        self._step_binding = None
        self._next_pos = np.asarray([len(x) + x.rope_delta for x in inputs], dtype=np.int64)
        logits = np.zeros((batch, self.vocab_size), dtype=np.float32)
        for row, (x, feats) in enumerate(zip(inputs, self.image_embeds(inputs))):
            embeds = self.prompt_embeds(x, feats)
            for start in range(0, len(x), PREFILL_CHUNK_TOKENS):  # see PREFILL_CHUNK_TOKENS
                end = min(len(x), start + PREFILL_CHUNK_TOKENS)
                logits[row] = self._run(
                    np.ascontiguousarray(embeds[None, start:end]),
                    np.ascontiguousarray(x.position_ids[:, None, start:end]),
                    rows=slice(row, row + 1),
                )[0]
        return logits

    def step(self, token_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1, 1)
        positions = np.ascontiguousarray(np.broadcast_to(self._next_pos.reshape(1, -1, 1), (3, ids.shape[0], 1)))
        logits = self._run(self.embed(ids), positions)
        self._next_pos = self._next_pos + 1
        return logits

    def retain(self, rows: Sequence[int]) -> None:
        index = np.asarray(list(rows), dtype=np.int64)
        self._kv = [buf[index] for buf in self._kv]
        self._step_binding = None
        self._lengths = self._lengths[index]
        self._next_pos = self._next_pos[index]
