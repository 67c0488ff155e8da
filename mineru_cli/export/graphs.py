"""The two graphs we export, written as small torch modules over the HF model's own layers.

Both wrappers reuse the loaded `Qwen2VLForConditionalGeneration`'s submodules (linear layers,
norms, MLPs) and spell out only what the exporter cannot take from transformers as it is:

VisionGraph (one image per call; MinerU sends every crop on its own)
    pixel_values (N, 3*T*p*p) float32, vision_position_ids (N, 2) int64 (row, col of each patch,
    processor.vision_position_ids) -> image_embeds (N / merge^2, hidden) float32.
    The Conv3d patch embedding (kernel == stride) is exactly a MatMul with the flattened kernel;
    attention is full over the image (the HF cu_seqlens split is one segment for one image) and
    exports as one com.microsoft.MultiHeadAttention node (`vision_attention`): onnxruntime's CPU
    kernel never materialises the (heads, N, N) score matrix, which for a 1036x1036 layout image
    (N = 5476) made the unfused graph's attention 1.8x slower (measured per layer: 1068 vs 597 ms).

DecoderGraph (prefill and decode in one graph)
    inputs_embeds (B, S, hidden) float32, position_ids (3, B, S) int64 (M-RoPE;
    processor.rope_index), seqlens_k (B,) int32 (each row's token count after this call, minus
    one), total_sequence_length () int32 (the largest of those counts), past_key_i /
    past_value_i (B, kv_heads, C, head_dim) float32 per layer -> logits (B, vocab) float32 of the
    last position, present_key_i / present_value_i: the same buffers with the new tokens' keys
    and values written at each row's offset (seqlens_k + 1 - S). Every row must fit in the
    buffer (C > seqlens_k): the runtime grows it before a call.
    Attention is one com.microsoft.GroupQueryAttention node per layer (`decoder_attention`).
    The runtime binds each present output to its past input's memory, so the kernel writes the
    new columns in place (only a capacity growth copies the cache); for prompts, rows need no
    padding and no mask (each row's length is its seqlens_k + 1), and no (heads, S, S) score
    tensor passes through the graph: the unfused attention's elementwise passes over those
    scores were ~85 % of a 1,400-token prefill (measured, INT8 export).
    The kernel's limits shape the runtime: a call with S > 1 after an earlier call must have
    batch 1 (so prompts are prefilled row by row), and every row's new tokens end its sequence
    (right-aligned: no padding after them).
    After export, step_path puts each GroupQueryAttention node in an If: calls of one token per
    row (decoding steps) take a scatter and grouped matrix products over the whole buffer, masked
    past each row's length, with the kernel's inputs and outputs (the kernel computes each query
    head apart, which at batch 8 cost 1.7x batch 1).

Imports torch: used by the exporter and the tests only, never by the ONNX runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers.models.qwen2_vl.modeling_qwen2_vl import (
        Qwen2VisionTransformerPretrainedModel,
        Qwen2VLForConditionalGeneration,
        Qwen2VLRMSNorm,
        Qwen2VLVisionBlock,
    )

# ---------------------------------------------------------------- fused ops
# Torch custom ops, so that both exporters emit one onnxruntime contrib node for each: eager they
# compute what the node computes; dynamo maps them through `custom_translation_table`,
# TorchScript through registered symbolics.


@torch.library.custom_op("mineru::vision_attention", mutates_args=())
def vision_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """q, k, v (1, N, E) -> (1, N, E): full multi-head attention, scale head_dim ** -0.5."""
    n, e = q.shape[1], q.shape[2]
    qh, kh, vh = (t.reshape(n, num_heads, e // num_heads).transpose(0, 1) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh)  # (heads, N, d)
    return out.transpose(0, 1).reshape(1, n, e)


@vision_attention.register_fake
def _(q, k, v, num_heads):
    return torch.empty_like(q)


@torch.library.custom_op("mineru::decoder_attention", mutates_args=())
def decoder_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    past_k: torch.Tensor,
    past_v: torch.Tensor,
    seqlens_k: torch.Tensor,
    total: torch.Tensor,
    num_heads: int,
    kv_heads: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """onnxruntime's GroupQueryAttention, as our decoder uses it: q (B, S, heads*d), k, v
    (B, S, kv*d) are the S newest tokens of each row, whose tokens so far number seqlens_k + 1
    (so the row's past is seqlens_k + 1 - S tokens long); their k/v go into a copy of the
    buffers past_k/past_v (B, kv, C, d) at that offset, and each query attends causally over its
    row's tokens. Returns (B, S, heads*d) and the filled buffers. `total` (the longest row) only
    sizes the kernel's work."""
    b, s, _ = q.shape
    d = past_k.shape[-1]
    present_k, present_v = past_k.clone(), past_v.clone()
    q = q.view(b, s, num_heads, d).transpose(1, 2)
    k = k.view(b, s, kv_heads, d).transpose(1, 2)
    v = v.view(b, s, kv_heads, d).transpose(1, 2)
    out = torch.empty_like(q)
    for row in range(b):
        end = int(seqlens_k[row]) + 1
        start = end - s
        if start < 0:  # the kernel would take this as a right-padded first prompt; we never send one
            raise ValueError(f"row {row} has {end} tokens, fewer than the {s} new ones")
        present_k[row, :, start:end] = k[row]
        present_v[row, :, start:end] = v[row]
        keys = present_k[row, :, :end].repeat_interleave(num_heads // kv_heads, dim=0)
        values = present_v[row, :, :end].repeat_interleave(num_heads // kv_heads, dim=0)
        seen = torch.arange(end)[None, :] <= torch.arange(start, end)[:, None]  # (S, end)
        out[row] = torch.nn.functional.scaled_dot_product_attention(q[row], keys, values, attn_mask=seen)
    return out.transpose(1, 2).reshape(b, s, num_heads * d), present_k, present_v


@decoder_attention.register_fake
def _(q, k, v, past_k, past_v, seqlens_k, total, num_heads, kv_heads):
    return torch.empty_like(q), torch.empty_like(past_k), torch.empty_like(past_v)


@torch.library.custom_op("mineru::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen2's RMSNorm (float32 throughout): x / sqrt(mean(x^2) + eps) * weight, over the last
    axis. Exported as one onnxruntime SimplifiedLayerNormalization node (onnxruntime registers it
    in the ONNX domain, where its own fusions put it): the plain graph was seven elementwise nodes
    (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul) that onnxruntime did not fuse, run three
    times per layer."""
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


@rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op("mineru::rotary", mutates_args=())
def rotary(
    x: torch.Tensor, position_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, num_heads: int
) -> torch.Tensor:
    """Rotary position embedding over whole heads, halves not interleaved (Qwen2-VL's
    rotate_half form): x (B, S, heads*d); cos, sin (P, d/2) tables; position_ids (B, S) int64,
    the table row of each token. Exported as one onnxruntime RotaryEmbedding node: the plain
    graph was Split, Neg, Concat, Mul, Mul, Add per tensor (measured on a 2,000-patch crop's
    queries: 6.2 ms against 1.0-1.9 ms)."""
    b, s, e = x.shape
    d = e // num_heads
    c, sn = cos[position_ids][:, :, None], sin[position_ids][:, :, None]  # (B, S, 1, d/2)
    x1, x2 = x.view(b, s, num_heads, d).split(d // 2, dim=-1)
    return torch.cat((x1 * c - x2 * sn, x2 * c + x1 * sn), dim=-1).reshape(b, s, e)


@rotary.register_fake
def _(x, position_ids, cos, sin, num_heads):
    return torch.empty_like(x)


def _contrib_op(
    name: str,
    inputs: dict[str, str],
    outputs: list[str],
    attributes: dict[str, str],
    types: dict[str, list[str]],
    domain: str = "com.microsoft",
):
    """An onnxscript Op for an onnxruntime contrib op. onnx registers no schemas for them, so we
    describe the part we use: input names -> type variable, outputs (of type T), attributes."""
    import onnxscript
    from onnx.defs import OpSchema

    kinds = {"int": OpSchema.AttrType.INT, "float": OpSchema.AttrType.FLOAT}
    schema = OpSchema(
        name,
        domain,
        1,
        inputs=[OpSchema.FormalParameter(n, t) for n, t in inputs.items()],
        outputs=[OpSchema.FormalParameter(n, "T") for n in outputs],
        type_constraints=[(t, allowed, t) for t, allowed in types.items()],
        attributes=[OpSchema.Attribute(a, kinds[k], a) for a, k in attributes.items()],
    )
    return onnxscript.values.Op(onnxscript.values.Opset(domain, 1), name, schema)


def translation_table() -> dict:
    """The dynamo exporter's custom_translation_table for our custom ops."""
    floats = {"T": ["tensor(float)"]}
    mha_op = _contrib_op(
        "MultiHeadAttention", dict.fromkeys(("query", "key", "value"), "T"), ["output"], {"num_heads": "int"}, floats
    )
    gqa_op = _contrib_op(
        "GroupQueryAttention",
        {
            **dict.fromkeys(("query", "key", "value", "past_key", "past_value"), "T"),
            "seqlens_k": "M",
            "total_sequence_length": "M",
        },
        ["output", "present_key", "present_value"],
        {"num_heads": "int", "kv_num_heads": "int"},
        {**floats, "M": ["tensor(int32)"]},
    )
    norm_op = _contrib_op(
        "SimplifiedLayerNormalization",
        {"X": "T", "scale": "T"},
        ["Y"],
        {"axis": "int", "epsilon": "float"},
        floats,
        domain="",
    )
    rotary_op = _contrib_op(
        "RotaryEmbedding",
        {"input": "T", "position_ids": "M", "cos_cache": "T", "sin_cache": "T"},
        ["output"],
        {"num_heads": "int", "interleaved": "int"},
        {**floats, "M": ["tensor(int64)"]},
    )

    def mha(q, k, v, num_heads: int):
        return mha_op(q, k, v, num_heads=num_heads)

    def gqa(q, k, v, past_k, past_v, seqlens_k, total, num_heads: int, kv_heads: int):
        return gqa_op(q, k, v, past_k, past_v, seqlens_k, total, num_heads=num_heads, kv_num_heads=kv_heads)

    def norm(x, weight, eps: float):
        return norm_op(x, weight, axis=-1, epsilon=eps)

    def rope(x, position_ids, cos, sin, num_heads: int):
        return rotary_op(x, position_ids, cos, sin, num_heads=num_heads, interleaved=0)

    return {
        torch.ops.mineru.vision_attention.default: mha,
        torch.ops.mineru.decoder_attention.default: gqa,
        torch.ops.mineru.rms_norm.default: norm,
        torch.ops.mineru.rotary.default: rope,
    }


def register_torchscript_symbolics(opset: int) -> None:
    from torch.onnx import register_custom_op_symbolic
    from torch.onnx.symbolic_helper import parse_args

    @parse_args("v", "v", "v", "i")
    def mha(g, q, k, v, num_heads):
        return g.op("com.microsoft::MultiHeadAttention", q, k, v, num_heads_i=num_heads)

    @parse_args("v", "v", "v", "v", "v", "v", "v", "i", "i")
    def gqa(g, q, k, v, past_k, past_v, seqlens_k, total, num_heads, kv_heads):
        return g.op(
            "com.microsoft::GroupQueryAttention",
            q,
            k,
            v,
            past_k,
            past_v,
            seqlens_k,
            total,
            num_heads_i=num_heads,
            kv_num_heads_i=kv_heads,
            outputs=3,
        )

    @parse_args("v", "v", "f")
    def norm(g, x, weight, eps):
        return g.op("SimplifiedLayerNormalization", x, weight, axis_i=-1, epsilon_f=eps)

    @parse_args("v", "v", "v", "v", "i")
    def rope(g, x, position_ids, cos, sin, num_heads):
        return g.op("com.microsoft::RotaryEmbedding", x, position_ids, cos, sin, num_heads_i=num_heads, interleaved_i=0)

    register_custom_op_symbolic("mineru::vision_attention", mha, opset)
    register_custom_op_symbolic("mineru::decoder_attention", gqa, opset)
    register_custom_op_symbolic("mineru::rms_norm", norm, opset)
    register_custom_op_symbolic("mineru::rotary", rope, opset)


def _norm(module: Qwen2VLRMSNorm, x: torch.Tensor) -> torch.Tensor:
    """A Qwen2RMSNorm module's computation, as the fused op."""
    return rms_norm(x, module.weight, float(module.variance_epsilon))


class VisionGraph(nn.Module):
    inv_freq: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, visual: Qwen2VisionTransformerPretrainedModel):
        super().__init__()
        cfg = visual.config
        self.blocks = visual.blocks
        self.merger = visual.merger
        self.num_heads = int(cfg.num_heads)
        self.embed_dim = int(cfg.embed_dim)
        self.merge_unit = int(cfg.spatial_merge_size) ** 2
        weight = visual.patch_embed.proj.weight.detach()  # (E, C, T, p, p)
        self.patch_weight = nn.Parameter(weight.reshape(weight.shape[0], -1).t().contiguous(), requires_grad=False)
        self.register_buffer("inv_freq", visual.rotary_pos_emb.inv_freq.detach().float().clone(), persistent=False)

    def forward(self, pixel_values: torch.Tensor, vision_position_ids: torch.Tensor) -> torch.Tensor:
        # 3-D activations throughout, so every linear layer exports as MatMul (not Gemm),
        # which onnxruntime's dynamic quantizer handles
        x = (pixel_values @ self.patch_weight)[None]  # (1, N, E)
        freqs = vision_position_ids[..., None].float() * self.inv_freq  # (N, 2, d/4)
        freqs = freqs.reshape(freqs.shape[0], -1)  # (N, d/2): h then w
        cos, sin = freqs.cos(), freqs.sin()  # a table row per patch
        n = x.shape[1]
        rows = torch.arange(n, device=x.device)[None]  # (1, N)
        # nn.ModuleList is not generic (its items are typed Module): these are the tower's blocks
        for blk in cast("Iterable[Qwen2VLVisionBlock]", self.blocks):
            h = blk.norm1(x)
            q, k, v = (t.reshape(1, n, self.embed_dim) for t in blk.attn.qkv(h).reshape(n, 3, -1).unbind(1))
            q = rotary(q, rows, cos, sin, self.num_heads)
            k = rotary(k, rows, cos, sin, self.num_heads)
            out = vision_attention(q, k, v, self.num_heads)
            x = x + blk.attn.proj(out)
            x = x + blk.mlp(blk.norm2(x))
        m = self.merger
        x = m.ln_q(x).reshape(1, -1, self.merge_unit * self.embed_dim)
        return m.mlp(x)[0]


class DecoderGraph(nn.Module):
    inv_freq: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, model: Qwen2VLForConditionalGeneration):
        super().__init__()
        lm = model.model.language_model
        cfg = lm.config
        self.layers = lm.layers
        self.norm = lm.norm
        self.lm_head = model.lm_head
        self.num_heads = int(cfg.num_attention_heads)
        self.num_kv_heads = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        self.mrope_section = [int(s) for s in lm.rotary_emb.mrope_section]
        self.attention_scaling = float(lm.rotary_emb.attention_scaling)
        self.register_buffer("inv_freq", lm.rotary_emb.inv_freq.detach().float().clone(), persistent=False)

    def _rotary(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """M-RoPE as `rotary` tables: returns (rows, cos, sin), each token's table row (B, S)
        and the tables (B*S, d/2), one row per token."""
        freqs = position_ids[..., None].float() * self.inv_freq  # (3, B, S, d/2)
        parts = freqs.split(self.mrope_section, dim=-1)
        freqs = torch.cat([p[i % 3] for i, p in enumerate(parts)], dim=-1)  # (B, S, d/2)
        b, s, half = freqs.shape
        freqs = freqs.reshape(b * s, half)
        rows = torch.arange(b * s, device=freqs.device).reshape(b, s)
        return rows, freqs.cos() * self.attention_scaling, freqs.sin() * self.attention_scaling

    def forward(self, inputs_embeds, position_ids, seqlens_k, total_sequence_length, *past):
        b, s, _ = inputs_embeds.shape
        rows, cos, sin = self._rotary(position_ids)
        x = inputs_embeds
        present = []
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = _norm(layer.input_layernorm, x)
            q = rotary(attn.q_proj(h), rows, cos, sin, self.num_heads)
            k = rotary(attn.k_proj(h), rows, cos, sin, self.num_kv_heads)
            out, key, value = decoder_attention(
                q,
                k,
                attn.v_proj(h),
                past[2 * i],
                past[2 * i + 1],
                seqlens_k,
                total_sequence_length,
                self.num_heads,
                self.num_kv_heads,
            )
            present += [key, value]
            x = x + attn.o_proj(out)
            x = x + layer.mlp(_norm(layer.post_attention_layernorm, x))
        logits = self.lm_head(_norm(self.norm, x[:, -1:, :]))[:, 0]  # (B, 1, H) keeps it a MatMul
        return (logits, *present)
