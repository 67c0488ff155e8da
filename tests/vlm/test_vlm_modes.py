"""The vlm engine's modes (vlm with the OCR cross-check, hybrid) and parse_batch, on the tiny
trained MinerU2.5-shaped model and its page, whose rendered text RapidOCR really reads."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_fixtures import Counting, tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.core.errors import SetupError
from mineru_cli.core.record import fingerprint
from mineru_cli.engines import fusion, make_engine
from mineru_cli.engines.lines import Line
from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.engines.vlm import VlmEngine
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.layout import parse_layout
from mineru_cli.vlm.protocol.postprocess import post_process
from mineru_cli.vlm.protocol.profiles import SamplingParams
from mineru_cli.vlm.tokenizer import build_input

TABLE_HTML = '<table><tr><td colspan="2">Name</td></tr><tr><td>x</td><td>y</td></tr></table>'


@pytest.fixture(scope="module")
def shared_runtime(tiny_vlm):
    return VlmEngine(tiny_vlm / "model", threads=1).runtime


def _engine(tiny_vlm, shared_runtime, **kw) -> VlmEngine:
    engine = VlmEngine(tiny_vlm / "model", threads=1, **kw)
    engine._runtime = Counting(shared_runtime)
    return engine


@pytest.fixture(scope="module")
def page(tiny_vlm):
    return Image.open(tiny_vlm / "page.png").convert("RGB")


@pytest.fixture(scope="module")
def ocr_lines(page) -> list[Line]:
    return OcrEngine(threads=1).text_lines(page)[0]


def _inside(line: Line, bbox) -> bool:
    """At least half of the line's area inside bbox (computed here, independently)."""
    x1, y1, x2, y2 = line.box
    ix = max(0, min(x2, bbox[2]) - max(x1, bbox[0]))
    iy = max(0, min(y2, bbox[3]) - max(y1, bbox[1]))
    return ix * iy >= 0.5 * (x2 - x1) * (y2 - y1)


def _as_dicts(result):
    return [b.as_dict() for b in result.blocks], result.markdown, result.warnings


def test_hybrid_takes_confident_ocr_lines_for_text_blocks(tiny_vlm, shared_runtime, page, ocr_lines):
    vlm = _engine(tiny_vlm, shared_runtime)
    hybrid = _engine(tiny_vlm, shared_runtime, mode="hybrid")
    plain, mixed = vlm.parse(page), hybrid.parse(page)

    by_type = {b.type: b for b in mixed.blocks}
    assert [b.type for b in mixed.blocks] == ["title", "text", "table", "image", "equation"]
    for kind in ("title", "text"):
        block = by_type[kind]
        inside = sorted((ln for ln in ocr_lines if _inside(ln, block.bbox)), key=lambda ln: (ln.box[1], ln.box[0]))
        assert inside and block.extra["source"] == "ocr"
        assert block.text == " ".join(ln.text for ln in inside)  # what OCR reads in the box
        assert [d["text"] for d in block.extra["lines"]] == [ln.text for ln in inside]
        assert block.score == pytest.approx(np.mean([ln.score for ln in inside]), abs=1e-4)
    assert by_type["text"].text == "Small pages make fast tests."
    assert by_type["title"].text == "TINYREPORT"  # OCR's reading, not the VLM's "Tiny Report"
    # Tables, equations and pictures still come from the VLM, exactly as in vlm mode.
    assert by_type["table"].extra["source"] == "vlm" and by_type["table"].extra["html"] == TABLE_HTML
    assert by_type["equation"].extra["source"] == "vlm" and by_type["equation"].extra["latex"] == "E=mc^{2}"
    assert by_type["image"].extra["source"] == "vlm"
    assert [b.as_dict() for b in mixed.blocks][2:] == [b.as_dict() for b in plain.blocks[2:]]
    # Fewer VLM requests: layout + 4 crops in vlm mode, layout + table + equation in hybrid.
    assert vlm.runtime.sequences == 5 and hybrid.runtime.sequences == 3
    assert mixed.counts["ocr_blocks"] == 2 and mixed.counts["vlm_blocks"] == 3
    assert mixed.warnings == [] and plain.warnings == []
    assert [b.extra["source"] for b in plain.blocks] == ["vlm"] * 5  # every block says where it came from
    assert {"ocr", "layout", "content", "ocr_wait", "post"} <= set(mixed.timings)


def test_low_confidence_lines_leave_the_block_to_the_vlm(tiny_vlm, shared_runtime, page, monkeypatch):
    hybrid = _engine(tiny_vlm, shared_runtime, mode="hybrid")
    monkeypatch.setattr(fusion, "OCR_MIN_SCORE", 1.01)  # no line is ever confident enough
    result = hybrid.parse(page)
    assert [b.extra["source"] for b in result.blocks] == ["vlm"] * 5
    assert [b.text for b in result.blocks[:2]] == ["Tiny Report", "Small pages make fast tests."]
    assert hybrid.runtime.sequences == 5 and result.counts["ocr_blocks"] == 0


def test_mode_is_an_option_and_changes_the_fingerprint(tiny_vlm):
    model = str(tiny_vlm / "model")
    vlm = make_engine("vlm", threads=1, model=model, say=lambda m: None)
    hybrid = make_engine("vlm", threads=1, model=model, mode="hybrid", batch_size=3, say=lambda m: None)
    assert vlm.mode == "vlm" and vlm.options()["mode"] == "vlm"  # the default: the faithful one
    assert hybrid.mode == "hybrid" and hybrid.batch_size == 3 and hybrid.options()["mode"] == "hybrid"
    assert hybrid.options()["ocr"]["min_score"] == fusion.OCR_MIN_SCORE
    fps = {
        fingerprint({"name": e.name, "version": e.version, "identity": e.identity(), "options": e.options()}, {})
        for e in (vlm, hybrid)
    }
    assert len(fps) == 2
    # hybrid's text is the embedded engine's reading of its lines: its version is in hybrid's
    # fingerprint (a new reading re-reads hybrid pages), not in vlm's
    assert hybrid.options()["hybrid"] == {"embedded_version": OcrEngine.version}
    assert "hybrid" not in vlm.options()
    assert {m["role"] for m in vlm.identity()["ocr"]["models"]} == {"det", "cls", "rec"}
    said = []
    ocr = make_engine("vlm", threads=1, model=model, mode="ocr", say=said.append)
    assert isinstance(ocr, OcrEngine) and said and said[0].startswith("engine: ocr")
    with pytest.raises(SetupError, match="--mode .fast.: choose from vlm, hybrid, standard, ocr"):
        make_engine("vlm", threads=1, model=model, mode="fast")
    with pytest.raises(SetupError, match="unknown vlm mode"):
        VlmEngine(model, mode="ocr")


@pytest.mark.parametrize("mode", ["vlm", "hybrid"])
def test_parse_batch_equals_each_page_alone(tiny_vlm, shared_runtime, page, mode):
    """Two different pages (the page, and the page at 1.25x: other crop sizes, and the model
    runs away on its paragraph) in one batch give what each gives alone, at batch sizes 8 and 1."""
    other = page.resize((560, 420), Image.Resampling.BICUBIC)
    batched = _engine(tiny_vlm, shared_runtime, mode=mode)
    results = batched.parse_batch([page, other])
    # one layout request holding both pages, then the crops of both pages together
    assert len(batched.runtime.batches[0]) == 2
    assert len(batched.runtime.batches[1]) > 1 and all(r.counts["batch_pages"] == 2 for r in results)
    alone = _engine(tiny_vlm, shared_runtime, mode=mode, batch_size=1)
    singles = [alone.parse(page), alone.parse(other)]
    assert all(len(b) == 1 for b in alone.runtime.batches)
    assert [_as_dicts(r) for r in results] == [_as_dicts(r) for r in singles]
    assert results[0].blocks[1].text == "Small pages make fast tests."


def test_a_failing_page_costs_only_itself(tiny_vlm, shared_runtime, page, monkeypatch):
    """A page that breaks the batched runtime call fails alone (the batch is redone page by
    page); a page whose post-processing raises fails alone without a redo."""

    class Refusing(Counting):
        def prefill(self, inputs):
            if any(x.pixel_values.mean() < -1.5 for x in inputs):  # the black page
                raise ValueError("refused a black page")
            return super().prefill(inputs)

    engine = VlmEngine(tiny_vlm / "model", threads=1)
    engine._runtime = Refusing(shared_runtime)
    black = Image.new("RGB", page.size, "black")
    bad, good = engine.parse_batch([black, page])
    assert isinstance(bad, ValueError) and "black page" in str(bad)
    assert good.blocks[1].text == "Small pages make fast tests." and good.warnings == []
    with pytest.raises(ValueError, match="black page"):
        engine.parse(black)

    calls = []
    real = post_process

    def flaky(blocks, *a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("post-processing broke")
        return real(blocks, *a, **kw)

    engine._runtime = Counting(shared_runtime)
    monkeypatch.setattr("mineru_cli.engines.vlm.post_process", flaky)  # where the engine calls it
    broken, fine = engine.parse_batch([page, page])
    assert isinstance(broken, RuntimeError) and _as_dicts(fine) == _as_dicts(good)
    assert len(engine.runtime.batches[0]) == 2 and len(calls) == 2  # no page-by-page redo


def test_runaway_answer_is_retried_once_with_raised_penalties(tiny_vlm, shared_runtime, page):
    """The paragraph's first decode is forced into a loop until the token cap; the retry (not
    forced) reads it right and is kept."""
    engine = VlmEngine(tiny_vlm / "model", threads=1, max_new_tokens=400)
    layout_blocks = parse_layout(_layout_text(tiny_vlm), engine.profile).blocks
    crop = prepare_crops(page, layout_blocks, engine.profile)[1]
    target = len(build_input(engine.tokenizer, engine.processor, crop.image, crop.prompt))
    loop_token = engine.tokenizer.encode(" tests")[0]

    class Looping(Counting):
        """Pushes one token on the paragraph's row the first time that prompt is seen."""

        def __init__(self, runtime):
            super().__init__(runtime)
            self.forced_row, self.seen = None, 0

        def _force(self, logits):
            if self.forced_row is not None:
                logits = np.array(logits, copy=True)
                logits[self.forced_row, loop_token] += 1e4
            return logits

        def prefill(self, inputs):
            rows = [i for i, x in enumerate(inputs) if len(x) == target]
            self.seen += bool(rows)
            self.forced_row = rows[0] if rows and self.seen == 1 else None
            return self._force(super().prefill(inputs))

        def step(self, ids):
            return self._force(self.runtime.step(ids))

        def retain(self, rows):
            if self.forced_row is not None:
                self.forced_row = rows.index(self.forced_row) if self.forced_row in rows else None
            self.runtime.retain(rows)

    engine._runtime = Looping(shared_runtime)
    decodes = []
    real_decode = engine._decode
    engine._decode = lambda inputs, params: decodes.append((len(inputs), params)) or real_decode(inputs, params)
    result = engine.parse(page)

    text = result.blocks[1]
    assert text.text == "Small pages make fast tests." and text.extra["retried"] is True
    assert text.extra["source"] == "vlm"  # the retry, a VLM answer, was kept
    (warning,) = result.warnings
    assert "block 1 (text): runaway answer (cut at 400 tokens)" in warning and "kept the retry" in warning
    assert result.counts["retries"] == 1
    retried = [
        params
        for n, params in decodes
        if isinstance(params, list) and any(p.no_repeat_ngram_size == fusion.RETRY_NO_REPEAT_NGRAM for p in params)
    ]
    assert len(retried) == 1 and len(retried[0]) == 1  # exactly one retry, of one block
    (p,) = retried[0]
    base = engine.profile.sampling_for("text")
    assert p.presence_penalty == base.presence_penalty + fusion.RETRY_PRESENCE
    assert p.frequency_penalty == base.frequency_penalty + fusion.RETRY_FREQUENCY
    assert [b.text for b in result.blocks[2:]] == ["Name\nx\ty", "", "\\[\nE=mc^{2}\n\\]"]


def _layout_text(tiny_vlm) -> str:
    import json

    return json.loads((tiny_vlm / "case.json").read_text())["layout"]


def test_a_retry_that_runs_away_too_gives_the_ocr_text(tiny_vlm, shared_runtime, page, ocr_lines):
    """Text answers capped at 3 tokens: every text-like block is cut, retried once (both
    blocks in one decode), cut again, and ends with the OCR text of its box."""
    engine = _engine(tiny_vlm, shared_runtime)
    capped = dataclasses.replace(engine.profile.sampling["[default]"], max_new_tokens=3)
    engine.profile = dataclasses.replace(engine.profile, sampling={**engine.profile.sampling, "[default]": capped})
    result = engine.parse(page)
    title, text = result.blocks[:2]
    assert (title.text, text.text) == ("TINYREPORT", "Small pages make fast tests.")
    assert title.extra["source"] == text.extra["source"] == "ocr" and title.extra["retried"]
    runaway = result.warnings
    assert len(runaway) == 2 and all("cut at 3 tokens" in w and "kept the OCR text" in w for w in runaway)
    assert result.counts["retries"] == 2
    # layout, 4 crops, then one retry batch of the 2 text-like blocks; nothing more
    assert [len(b) for b in engine.runtime.batches] == [1, 4, 2]
    assert result.blocks[2].extra["html"] == TABLE_HTML  # the table is not text-like: untouched


def test_runaway_rules():
    ocr = "Small pages make fast tests."
    assert fusion.runaway(ocr, False, ocr) is None
    prose = " ".join(str(n) for n in range(100, 200))  # long, but no loop
    assert fusion.runaway(prose[:134], False, ocr) is None  # 3 x 28 + 50 = 134
    assert "135 characters" in fusion.runaway(prose[:135], False, ocr)
    assert "repeats 'ab '" in fusion.runaway("ab " * 10, False, ocr)
    assert fusion.runaway("ab " * 10, False, "ab " * 12) is None  # the page repeats it too
    assert fusion.runaway("Contents . . . . . . . . . . . . 7", False, "Contents 7") is None
    assert fusion.runaway("x" * 5000, False, None) is None  # nothing to compare with
    assert fusion.runaway("short", True, None, 9) == "cut at 9 tokens"  # the cap always counts
    sp = fusion.retry_params(SamplingParams(1.0, 0.05, 100))
    assert (sp.presence_penalty, sp.frequency_penalty, sp.no_repeat_ngram_size) == (1.5, 0.3, 20)


@pytest.mark.parametrize("overlap", [True, False])
def test_ocr_runs_beside_the_layout_step_or_in_line(tiny_vlm, shared_runtime, page, overlap):
    engine = _engine(tiny_vlm, shared_runtime, mode="hybrid", overlap=overlap)
    threads = []
    real = engine.ocr.text_lines
    engine.ocr.text_lines = lambda image: threads.append(threading.current_thread().name) or real(image)
    result = engine.parse(page)
    assert [b.extra["source"] for b in result.blocks] == ["ocr", "ocr", "vlm", "vlm", "vlm"]
    assert len(threads) == 1 and threads[0].startswith("mineru-ocr") == overlap
    t = result.timings
    assert t["ocr"] > 0 and t["layout"] > 0 and t["ocr_wait"] >= 0
    if not overlap:
        assert t["ocr_wait"] >= t["ocr"]  # in line: the main thread spends the whole OCR


def test_ocr_engine_parse_batch_keeps_failures_in_place(page):
    engine = OcrEngine(threads=1)
    good, bad = engine.parse_batch([page, None])
    assert isinstance(bad, Exception)
    assert [b.as_dict() for b in good.blocks] == [b.as_dict() for b in engine.parse(page).blocks]
