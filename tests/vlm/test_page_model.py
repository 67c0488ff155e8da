"""The modelled page of `mineru bench`: what each mode sends through the VLM."""

import pytest

from mineru_cli.export.bench import CROPS, LAYOUT_TOKENS, PAGE_MODES, page_seconds, report_table

MEDIANS = {  # one variant's medians, of the size of an AVX2 ORT INT8 run (the crop figures illustrative)
    "vision_s": 89.2,
    "vision_s_400": 4.1,
    "vision_s_2000": 18.0,
    "vision_s_4800": 61.0,
    "prefill_s": 5.62,
    "decode_ms_b1": 23.0,
    "decode_ms_b8": 47.0,
}


def test_standard_is_hybrid_without_the_layout_step_and_hybrid_is_vlm_without_text_crops():
    layout = MEDIANS["vision_s"] + MEDIANS["prefill_s"] + LAYOUT_TOKENS * MEDIANS["decode_ms_b1"] / 1000
    vlm, hybrid, standard = (page_seconds(MEDIANS, mode) for mode in PAGE_MODES)
    assert standard == pytest.approx(hybrid - layout)
    tables = [c for c in CROPS if c[0] != "text"]
    vision = sum(MEDIANS[f"vision_s_{p}"] for _, p, _ in tables)
    assert standard > vision and vlm > hybrid > standard
    text_vision = sum(MEDIANS[f"vision_s_{p}"] for kind, p, _ in CROPS if kind == "text")
    assert vlm - hybrid > text_vision  # the text crops' vision, prefill and decode steps


def test_the_bench_table_has_a_standard_column():
    report = {
        "median": {"onnx_int8": MEDIANS},
        "page_s": {"onnx_int8": {m: page_seconds(MEDIANS, m) for m in PAGE_MODES}},
    }
    cols, rows = report_table(report)
    assert rows[0][cols.index("standard page s")] == f"{page_seconds(MEDIANS, 'standard'):.0f}"
