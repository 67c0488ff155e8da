"""Which INT8 weights suit which CPU: the target an export is quantized for, and what a runtime
does with one made for another CPU.

onnxruntime runs a dynamically quantized MatMul as u8 activations times 8-bit weights. On x86
CPUs without VNNI (plain AVX2, and AVX-512 without VNNI) its u8 x s8 kernel multiplies with
`vpmaddubsw`, which adds each pair of u8 x s8 products into a saturating 16-bit sum: signed
weights over the full -128..127 range overflow it whenever large activations meet large
weights (255 * 127 * 2 = 64,770 > 32,767), as a trained model's activations do. With VNNI
(`vpdpbusd`) or AMX the products go straight into 32-bit sums. Two kinds of weights are exact on
every kernel: signed 7-bit ones (onnxruntime's `reduce_range`, -64..64: pair sums within
255 * 64 * 2 = 32,640), and unsigned ones with a zero point per channel, which take the u8 x u8
kernel (widened to 16 bits before multiplying) and keep all 8 bits of precision. Plain AVX2 gets
7-bit weights in both graphs, its vision products bias-corrected (_SETTINGS says why). onnxruntime also runs
signed 8-bit weights on the u8 x u8 kernel on request (EXACT_KERNELS_OPTION): that is how an
export made for VNNI/AMX runs exactly on a CPU without them.

    target = detect_target()             # "avx2" | "avx-vnni" | "avx512-vnni" | "amx"
    int8_settings(target)                # {"vision": {"weight_type", "reduce_range"}, "decoder": ...}
    corrected_graphs(target)             # graphs always bias-corrected: ("vision",) for avx2
    graphs_needing_exact_kernels(manifest)   # graphs whose weights would saturate on this CPU

Plain Python: the runtime imports this without torch or onnx.
"""

from __future__ import annotations

import platform
from pathlib import Path

from ..core.errors import SetupError
from .export_format import export_command

# The targets `mineru export --target` takes, and the CPU flag (Linux /proc/cpuinfo) that makes
# a CPU one of them; "avx2" is every other x86-64 CPU.
TARGETS = ("avx2", "avx-vnni", "avx512-vnni", "amx")
TARGET_FLAGS = {"amx": "amx_int8", "avx512-vnni": "avx512_vnni", "avx-vnni": "avx_vnni"}
# The flags printed beside speed figures and recorded in an export's manifest.
ISA_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
# onnxruntime's session option for u8 x u8 products in place of u8 x s8 ones on x86 without VNNI
# (onnxruntime_session_options_config_keys.h): exact for any 8-bit weights, slower.
EXACT_KERNELS_OPTION = "session.x64quantprecision"
# The weight settings of each target's graphs, chosen by measurement (full-size random model,
# 2 threads, logit cosine min against torch; docs/benchmarks.md). Plain AVX2 has the fast u8 x s8
# kernel only for weights that cannot overflow its 16-bit pair sums: signed 7-bit ones
# (reduce_range: pair sums within 255 * 64 * 2 < 32,767). Decoder: 7-bit in every product
# (batch-8 steps faster than with unsigned weights in every alternating round on a plain-AVX2
# EPYC; a later run there swung too much to tell them apart; cosine min 0.9965). Vision: 7-bit
# too, with its products bias-corrected (CORRECTED): the layout image's vision graph runs 1.11-1.17x
# faster with 7-bit weights than with unsigned ones, which take the u8 x u8 kernel, on a
# plain-AVX2 EPYC (Zen 3) as on AVX2 kernels emulated on an AMX Xeon (scripts/avx2_only.py:
# 1.16x, the modelled page 1.10x), and on the full-size random model the
# correction more than pays for the lost bit (cosine min 0.9931 uncorrected, 0.9973 corrected,
# against 0.9965 for the unsigned vision the target had before; the trained tiny model: 0.99921
# against 0.99927, within the bar either way). Where the kernel has 32-bit sums, signed 8-bit
# weights are both fast and exact.
S7 = {"weight_type": "QInt8", "reduce_range": True}
S8 = {"weight_type": "QInt8", "reduce_range": False}
_SETTINGS = {"avx2": {"vision": S7, "decoder": S7}, "vnni": {"vision": S8, "decoder": S8}}
# The graphs each target's export always bias-corrects (export.bias_correction; `mineru export
# --bias-correction` adds the rest): the 7-bit vision weights of plain AVX2.
CORRECTED = {"avx2": ("vision",)}
# Kinds of weight product (export.onnx_export.weight_kind) that take other settings than their
# graph's, by target and graph, recorded in the graph's table under "kinds" (dd961b8's avx2
# exports recorded their output layer's 7-bit weights as "lm_head", beside an unsigned decoder).
# None at present: the avx2 decoder's products are all 7-bit.
_KINDS: dict[str, dict[str, dict[str, dict]]] = {}
ROLES = ("vision", "decoder")


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (empty where /proc/cpuinfo is not there)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_summary(flags: set[str] | None = None) -> dict:
    """{"model", "machine", "isa": the ISA_FLAGS this CPU has, "int8_target"}: printed with speed
    figures and written into an export's manifest."""
    flags = cpu_flags() if flags is None else flags
    return {
        "model": cpu_model(),
        "machine": platform.machine(),
        "isa": [f for f in ISA_FLAGS if f in flags],
        "int8_target": detect_target(flags),
    }


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def detect_target(flags: set[str] | None = None) -> str:
    """The target of this CPU (or of `flags`): the best one whose flag it has, else "avx2"."""
    flags = cpu_flags() if flags is None else flags
    for target in ("amx", "avx512-vnni", "avx-vnni"):
        if TARGET_FLAGS[target] in flags:
            return target
    return "avx2"


def resolve_target(target: str | None) -> str:
    """ "auto" (or None) becomes this CPU's target; anything else must be one of TARGETS."""
    if target in (None, "auto"):
        return detect_target()
    if target not in TARGETS:
        raise SetupError(f"--target {target!r}: choose auto or one of {', '.join(TARGETS)}")
    return target


def int8_settings(target: str) -> dict[str, dict]:
    """The dynamic quantizer's weight settings for each graph of an export for `target`."""
    settings = _SETTINGS["avx2" if target == "avx2" else "vnni"]
    return {role: dict(settings[role]) for role in ROLES}


def corrected_graphs(target: str) -> tuple[str, ...]:
    """The graphs an INT8 export for `target` bias-corrects whether or not it is asked to."""
    return CORRECTED.get(target, ())


def kind_settings(target: str) -> dict[str, dict[str, dict]]:
    """{graph: {kind: settings}}: the kinds of product of an export for `target` that take their
    own weight settings (the rest take int8_settings')."""
    kinds = _KINDS.get(target, {})
    return {role: {k: dict(v) for k, v in kinds.get(role, {}).items()} for role in ROLES}


def made_for(quantization, target: str) -> bool:
    """Whether an export's quantization table (its manifest's) holds the INT8 weights an export
    for `target` gets now: each graph's settings and those of its kinds, and the bias correction
    of the graphs corrected_graphs names (an INT4 decoder is not compared). An export that passes
    is current; one that does not was made by an earlier rule or for another target."""
    if not isinstance(quantization, dict):
        return False
    settings, kinds = int8_settings(target), kind_settings(target)
    for role in ROLES:
        table = quantization.get(role)
        if not isinstance(table, dict):
            return False
        if role == "decoder" and table.get("bits") == 4:
            continue
        if any(table.get(k) != v for k, v in settings[role].items()):
            return False
        own = table.get("kinds", {})
        if (
            not isinstance(own, dict)
            or {k: {f: v.get(f) for f in settings[role]} for k, v in own.items()} != kinds[role]
        ):
            return False
        if role in corrected_graphs(target) and "bias_correction" not in table:
            return False
    return True


def lm_head_settings(target: str) -> dict | None:
    """The output layer's own weight settings for `target` (None: the decoder's)."""
    return kind_settings(target)["decoder"].get("lm_head")


def saturates(settings) -> bool:
    """Whether weights quantized with these settings (a graph's quantization table as the
    manifest records it) can overflow a u8 x s8 kernel without VNNI. Only 7-bit signed weights
    (reduce_range true), unsigned 8-bit weights and INT4's MatMulNBits (4-bit weights, float
    products) are known not to; anything else, a table with missing or odd fields included,
    counts as saturating, since the exact kernels cost only speed."""
    if not isinstance(settings, dict):
        return settings is not None
    if settings.get("bits") == 4:
        return False
    if "lm_head" in settings and saturates(settings["lm_head"]):  # the output layer's own weights
        return True
    kinds = settings.get("kinds", {})
    if not isinstance(kinds, dict) or any(saturates(own) for own in kinds.values()):  # kinds with their own
        return True
    weight_type = settings.get("weight_type")
    return not (weight_type == "QUInt8" or (weight_type == "QInt8" and settings.get("reduce_range") is True))


def saturating_graphs(quantization) -> list[str]:
    """The graphs of an export (its manifest's quantization table: None for fp32) whose weights
    can saturate."""
    if quantization is None:
        return []
    if not isinstance(quantization, dict):
        return list(ROLES)
    return [role for role in ROLES if saturates(quantization.get(role))]


def has_int8_sums(flags: set[str] | None = None) -> bool:
    """Whether u8 x s8 products go into 32-bit sums on this CPU (or on a CPU with `flags`, taken
    as an x86 one): VNNI or AMX, or not x86 at all (onnxruntime's ARM kernels do not build on
    vpmaddubsw). A CPU whose flags cannot be read counts as one without them."""
    if flags is None:
        if not is_x86():
            return True
        flags = cpu_flags()
    return any(flag in flags for flag in TARGET_FLAGS.values())


def graphs_needing_exact_kernels(manifest: dict, flags: set[str] | None = None) -> list[str]:
    """The graphs of an export whose INT8 weights would saturate on this CPU (or on `flags`):
    signed 8-bit weights (an export for VNNI/AMX, or one of an earlier mineru-cli) on an x86 CPU
    without VNNI or AMX. The runtime runs them on onnxruntime's exact u8 x u8 kernels
    (EXACT_KERNELS_OPTION); exports for "avx2", fp32 and INT4 decoders need nothing."""
    graphs = saturating_graphs(manifest.get("quantization"))
    return [] if has_int8_sums(flags) else graphs


def exact_kernels_note(manifest: dict, where: str, graphs: list[str]) -> str:
    """What a user is told when an export runs on the slower exact kernels."""
    quantization = manifest.get("quantization")
    if not isinstance(quantization, dict):
        quantization = {}
    target = quantization.get("target")
    made_on = quantization.get("made_on")
    made_on = made_on.get("model") if isinstance(made_on, dict) else None
    origin = (
        f"was quantized for {target}" + (f" (on {made_on})" if made_on else "")
        if target
        else "was made by a mineru-cli without INT8 targets"
    )
    flags = cpu_flags()
    seen = "no VNNI or AMX" if flags else "its flags unreadable, so taken as having no VNNI or AMX"
    plural = len(graphs) > 1
    return (
        f"the ONNX export {where} {origin}: its {' and '.join(graphs)} graph{'s' if plural else ''} "
        f"hold{'' if plural else 's'} signed 8-bit weights, which this CPU ({cpu_model()}, {seen}) would add "
        f"in saturating 16-bit sums, so they run on onnxruntime's exact but slower u8 x u8 kernels; an "
        f"export for this CPU is faster: {export_command(Path(where), manifest, target='avx2')} (an avx2 "
        f"export is right on every CPU)"
    )
