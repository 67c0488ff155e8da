"""The bench's kernel roofline (mineru_cli/export/roofline.py): measured on small shapes, and the
model's work per phase counted from its config."""

from __future__ import annotations

import pytest
from model_shapes import small_random_config

from mineru_cli.export.bench import PAGE_MODES, mineru25_config, page_seconds, roofline_page
from mineru_cli.export.roofline import (
    best_of,
    decoder_weights,
    measure_roofline,
    phase_fractions,
    phase_seconds,
    prefill_flops,
    step_bytes,
    step_flops,
    vision_flops,
)
from mineru_cli.vlm import int8_target

pytest.importorskip("onnxruntime")


def test_roofline_measures_fp32_int8_and_bandwidth_with_this_cpus_weight_kind():
    roof = measure_roofline(threads=1, m=256, e=64, mlp=256, bandwidth_bytes=32 << 20, runs=2)
    assert roof["fp32_gflops"] > 0.1 and roof["int8_gops"] > 0.1 and roof["bandwidth_gbs"] > 0.1
    assert roof["int8_weights"] == int8_target.int8_settings(int8_target.detect_target())["vision"]
    assert roof["shapes"] == [[256, 64, 256]] and roof["threads"] == 1
    # two bandwidth probes over the same 32 MiB (rows shared by the threads, and one axis): the
    # faster one is the roofline's
    probes = roof["bandwidth_probes_gbs"]
    assert set(probes) == {"rows", "one_axis"} and min(probes.values()) > 0.1
    assert roof["bandwidth_gbs"] == max(probes.values()) and roof["bandwidth_bytes"] == 32 << 20
    # another target's weight kind, on request
    amx = measure_roofline(threads=1, m=64, e=32, mlp=64, target="amx", bandwidth_bytes=1 << 20, runs=1)
    assert amx["int8_weights"]["weight_type"] == "QInt8"


def test_the_full_size_models_work_per_phase_matches_its_parameter_count():
    import torch

    from mineru_cli.export.bench import random_model

    small = small_random_config(vision_depth=2)
    model = random_model(small)
    lm = model.model.language_model
    # every weight matrix of the decoder's layers and the output layer (no biases, norms, embeddings)
    layer_weights = sum(p.numel() for n, p in lm.layers.named_parameters() if n.endswith("weight") and p.dim() == 2)
    assert decoder_weights(small) == layer_weights + model.lm_head.weight.numel()
    vis = model.model.visual
    vision_weights = sum(p.numel() for n, p in vis.named_parameters() if n.endswith("weight") and p.dim() >= 2)
    # one patch per weight: 2 FLOPs per weight per patch, the merger's products on a quarter of them
    merger = sum(p.numel() for n, p in vis.merger.named_parameters() if n.endswith("weight") and p.dim() == 2)
    products, attention = vision_flops(small, 100)
    assert products == pytest.approx(2 * 100 * (vision_weights - merger) + 2 * 25 * merger)
    assert attention == 2 * 4 * 100 * 100 * 32  # depth x (QK^T + PV) over the embed width
    products, attention = prefill_flops(small, 10)
    assert products == 2 * 10 * layer_weights + 2 * model.lm_head.weight.numel()
    assert attention == 2 * 4 * 4 * 16 * 10 * 10 / 2
    # a step reads the weights once and each row's keys and values in every layer
    assert step_bytes(small, 8, 100, 1e6) == 1e6 + 8 * 2 * 2 * 2 * 100 * 16 * 4
    del torch


def test_phase_fractions_put_each_phase_against_its_roofline():
    config = mineru25_config()
    roof = {"fp32_gflops": 100.0, "int8_gops": 200.0, "bandwidth_gbs": 10.0}
    products, attention = vision_flops(config, 5476)
    at_roof = products / 200e9 + attention / 100e9
    weights = 4.9e8
    step = step_bytes(config, 1, 520 + 8, weights)
    medians = {"vision_s": 2 * at_roof, "decode_ms_b1": 1000 * step / 10e9 * 4}
    int8 = phase_fractions(medians, roof, config, {"vision", "decoder"}, weights, {"vision_s": 5476}, 0, 520, 16)
    assert int8 == pytest.approx({"vision_s": 0.5, "decode_ms_b1": 0.25})
    # the same times from fp32 products: further from the roofline of fp32 work
    fp32 = phase_fractions(medians, roof, config, set(), weights, {"vision_s": 5476}, 0, 520, 16)
    assert fp32["vision_s"] == pytest.approx((products / 100e9 + attention / 100e9) / (2 * at_roof))


def test_a_decoding_step_at_the_roofline_is_the_longer_of_its_read_and_its_compute():
    config = mineru25_config()
    weights = 4.9e8
    roof = {"fp32_gflops": 100.0, "int8_gops": 1000.0, "bandwidth_gbs": 10.0}
    args = (config, {"decoder"}, weights, {}, 0, 520, 16)
    read = phase_seconds(roof, *args)
    context = 520 + 3 * 7 // 2 + 8
    assert read["decode_ms_b8"] == pytest.approx(1000 * step_bytes(config, 8, context, weights) / 10e9)
    # eight rows' products on a slow INT8 kernel (a CPU without dot-product instructions) take
    # longer than the read: the step's roofline is their compute
    slow = phase_seconds({**roof, "int8_gops": 20.0}, *args)
    assert slow["decode_ms_b8"] == pytest.approx(1000 * step_flops(config, 8, context) / 20e9)
    assert slow["decode_ms_b8"] > read["decode_ms_b8"] and slow["decode_ms_b1"] > read["decode_ms_b1"]
    # one row's products: 2 FLOPs a weight, plus its attention over its keys
    assert step_flops(config, 1, 100) > 2 * decoder_weights(config)
    assert step_flops(config, 8, 100) == 8 * step_flops(config, 1, 100)
    # the fraction of a measured step is its roofline time over the measured time
    fractions = phase_fractions({"decode_ms_b8": 4 * slow["decode_ms_b8"]}, {**roof, "int8_gops": 20.0}, *args)
    assert fractions == pytest.approx({"decode_ms_b8": 0.25})


def test_the_page_at_the_roofline_is_the_page_model_over_each_phases_roofline_time():
    config = mineru25_config()
    roof = {"fp32_gflops": 100.0, "int8_gops": 200.0, "bandwidth_gbs": 10.0}
    page = roofline_page("torch_fp32", roof, config, {})
    assert page is not None and set(page) == set(PAGE_MODES)
    # torch computes in fp32 with fp32 weights: every phase at the fp32 rate and 4-byte weights
    patches = {"vision_s": 5476, "vision_s_400": 400, "vision_s_2000": 2000, "vision_s_4800": 4800}
    ideal = phase_seconds(roof, config, set(), 4 * decoder_weights(config), patches, 1400, 520, 16)
    assert page == pytest.approx({mode: page_seconds(ideal, mode) for mode in PAGE_MODES})
    # crops at their own sizes: attention grows with the square of the patches, so a 400-patch
    # crop costs less than its share of the layout image
    assert ideal["vision_s_400"] < ideal["vision_s"] * 400 / 5476
    # a machine twice as fast everywhere: half the page
    fast = roofline_page("torch_fp32", {k: 2 * v for k, v in roof.items()}, config, {})
    assert fast == pytest.approx({mode: s / 2 for mode, s in page.items()})
    assert page["standard"] < page["hybrid"] < page["vlm"]


def test_two_measurements_of_a_runs_roofline_give_each_rates_faster():
    before = {
        "fp32_gflops": 100.0,
        "int8_gops": 90.0,
        "bandwidth_gbs": 12.0,
        "bandwidth_probes_gbs": {"rows": 12.0, "one_axis": 9.0},
        "per_shape": {"fp32_gflops": [100.0], "int8_gops": [90.0]},
        "seconds": 4.0,
        "threads": 2,
    }
    after = {
        "fp32_gflops": 80.0,
        "int8_gops": 280.0,
        "bandwidth_gbs": 14.0,
        "bandwidth_probes_gbs": {"rows": 8.0, "one_axis": 14.0},
        "per_shape": {"fp32_gflops": [80.0], "int8_gops": [280.0]},
        "seconds": 5.0,
        "threads": 2,
    }
    best = best_of(before, after)
    assert (best["fp32_gflops"], best["int8_gops"], best["bandwidth_gbs"]) == (100.0, 280.0, 14.0)
    # the report's details agree with its rates: each probe and shape at its faster measurement
    assert best["bandwidth_probes_gbs"] == {"rows": 12.0, "one_axis": 14.0}
    assert best["per_shape"] == {"fp32_gflops": [100.0], "int8_gops": [280.0]}
    assert best["measurements"] == [before, after]
    assert best["seconds"] == 9.0 and best["threads"] == 2
    # merged again (a third measurement): the list stays flat
    assert best_of(best, after)["measurements"][0] == {k: v for k, v in best.items() if k != "measurements"}


def test_phase_fractions_leave_out_medians_that_are_not_a_batch_of_rows():
    config = mineru25_config()
    roof = {"fp32_gflops": 100.0, "int8_gops": 200.0, "bandwidth_gbs": 10.0}
    medians = {"decode_ms_b1": 50.0, "decode_ms_b4_slots": 80.0, "layout_prompt_tokens": 1401.0}
    fractions = phase_fractions(medians, roof, config, {"decoder"}, 4.9e8, {}, 0, 520, 16)
    assert set(fractions) == {"decode_ms_b1"}
