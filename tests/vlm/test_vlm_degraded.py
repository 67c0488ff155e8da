"""The vlm engine's degraded paths on the tiny trained MinerU2.5-shaped model: a block the VLM
cannot read costs only that block (hybrid, vlm, standard), and a hybrid page whose layout holds
no text block keeps its text layer's text."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pdfs import COLUMN_PARAGRAPHS, TITLE, first_page, table_pdf, two_column_pdf
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.engines.vlm import VlmEngine, standard_vlm_blocks
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.tokenizer import build_input


class Wrapped:
    """The real runtime; a subclass makes some of its prefills raise."""

    def __init__(self, runtime):
        self.runtime = runtime

    def prefill(self, inputs):
        return self.runtime.prefill(inputs)

    def step(self, ids):
        return self.runtime.step(ids)

    def retain(self, rows):
        self.runtime.retain(rows)


class Refusing(Wrapped):
    """The real runtime, except that a prefill holding one of the `refused` prompts raises, as
    an allocation failure for one big crop does; every other row decodes as usual."""

    def __init__(self, runtime, refused):
        super().__init__(runtime)
        self.refused = [np.asarray(ids) for ids in refused]

    def prefill(self, inputs):
        if any(any(np.array_equal(x.input_ids, r) for r in self.refused) for x in inputs):
            raise RuntimeError("cannot allocate 9 GiB for this crop")
        return self.runtime.prefill(inputs)


@pytest.fixture(scope="module")
def shared_runtime(tiny_vlm):
    return VlmEngine(tiny_vlm / "model", threads=1).runtime


@pytest.fixture(scope="module")
def page(tiny_vlm):
    return Image.open(tiny_vlm / "page.png").convert("RGB")


def _table_prompt(engine: VlmEngine, page: Image.Image):
    """The token ids the engine sends for the tiny page's table crop."""
    _, layout, _ = engine.layout(page)
    (crop,) = [c for c in prepare_crops(page, layout.blocks, engine.profile) if layout.blocks[c.index].type == "table"]
    return build_input(engine.tokenizer, engine.processor, crop.image, crop.prompt).input_ids


@pytest.mark.parametrize("mode", ["hybrid", "vlm"])
def test_a_crop_the_vlm_cannot_read_costs_only_its_block(tiny_vlm, shared_runtime, page, mode):
    clean = VlmEngine(tiny_vlm / "model", threads=1, mode=mode)
    clean._runtime = shared_runtime
    expected = clean.parse(page)
    engine = VlmEngine(tiny_vlm / "model", threads=1, mode=mode, batch_size=8)
    engine._runtime = Refusing(shared_runtime, [_table_prompt(clean, page)])

    results = engine.parse_batch([page, page.copy()])  # the bad crop in every batch of crops
    for result in results:
        assert not isinstance(result, Exception), result
        assert [b.type for b in result.blocks] == [b.type for b in expected.blocks]
        for mine, theirs in zip(result.blocks, expected.blocks):
            if mine.type == "table":
                assert mine.text == "" and mine.extra["failed"] is True and "html" not in mine.extra
            else:  # every other block as in the clean run, the crops batched with the bad one too
                assert mine.as_dict() == theirs.as_dict()
        (warning,) = [w for w in result.warnings if "could not read" in w]
        assert warning.startswith("block 2 (table):") and "cannot allocate" in warning
        assert result.counts["failed_blocks"] == 1


def test_standard_mode_keeps_the_embedded_table_when_the_vlm_cannot_read_it(tiny_vlm, shared_runtime, tmp_path):
    page = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100)
    embedded = OcrEngine(threads=1).parse(page.image, page.text_layer)
    index = [b.type for b in embedded.blocks].index("table")
    _, layout = standard_vlm_blocks(embedded.blocks, page.image.size)
    engine = VlmEngine(tiny_vlm / "model", threads=1, mode="standard")
    (table,) = prepare_crops(page.image, layout, engine.profile)
    prompt = build_input(engine.tokenizer, engine.processor, table.image, table.prompt).input_ids
    engine._runtime = Refusing(shared_runtime, [prompt])

    (result,) = engine.parse_batch([page.image], [page.text_layer])
    assert not isinstance(result, Exception), result
    # the page is the embedded engine's, its table included (the text layer's cells)
    # (its block marked, so that --retry-failed parses the page again)
    assert [b.as_dict() for b in result.blocks] == [
        {**b.as_dict(), **({"failed": True} if i == index else {})} for i, b in enumerate(embedded.blocks)
    ]
    assert any(w.startswith(f"block {index} (table): the VLM could not read it") for w in result.warnings)
    assert result.counts["failed_blocks"] == 1


def test_hybrid_keeps_the_text_layer_of_a_page_whose_layout_found_no_text(tiny_vlm, shared_runtime, tmp_path):
    page = first_page(two_column_pdf(tmp_path / "cols.pdf"), dpi=100)
    assert page.text_layer.trusted
    engine = VlmEngine(tiny_vlm / "model", threads=1, mode="hybrid")
    engine._runtime = shared_runtime
    _, layout, _ = engine.layout(page.image)
    assert layout.blocks == [] and layout.malformed  # the tiny model knows only its own page

    result = engine.parse(page.image, page.text_layer)
    # every word of the page, in reading order: the title, then the left column, then the right
    words = " ".join(b.text for b in result.blocks).split()
    assert words == " ".join([TITLE, *COLUMN_PARAGRAPHS]).split()
    assert {b.extra["source"] for b in result.blocks} == {"text_layer"}
    assert result.counts["text_layer_blocks"] == len(result.blocks) > 1
    assert any("no text block" in w for w in result.warnings)


class FailingFrom(Wrapped):
    """The real runtime, except that every prefill from the `first`-th on raises."""

    def __init__(self, runtime, first: int):
        super().__init__(runtime)
        self.first, self.calls = first, 0

    def prefill(self, inputs):
        self.calls += 1
        if self.calls >= self.first:
            raise RuntimeError("cannot allocate memory for the retry")
        return self.runtime.prefill(inputs)


def test_a_runaway_whose_retry_raises_is_a_failed_block_so_its_page_is_not_cached(tiny_vlm, shared_runtime, page):
    """Text answers capped at 3 tokens run away; their one retry raises. The page keeps the cut
    answer (or the OCR text) with a warning, and counted no failed block, so the worker stored
    it in the result cache and every later run (--force too) got the cut answer back."""
    import dataclasses

    engine = VlmEngine(tiny_vlm / "model", threads=1, mode="vlm")
    capped = dataclasses.replace(engine.profile.sampling["[default]"], max_new_tokens=3)
    engine.profile = dataclasses.replace(engine.profile, sampling={**engine.profile.sampling, "[default]": capped})
    engine._runtime = FailingFrom(shared_runtime, 3)  # the layout, the crops, then the retries

    result = engine.parse(page)
    failed = [w for w in result.warnings if "runaway answer" in w and "the retry failed" in w]
    assert len(failed) == 2, result.warnings
    assert result.counts["failed_blocks"] == 2
    assert sum(bool(b.extra.get("failed")) for b in result.blocks) == 2
