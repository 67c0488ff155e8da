"""The VLM engine on pages with a text layer: `--mode standard` (the embedded engine's layout and
text, the VLM for tables and equations only) and hybrid mode taking a trusted text layer instead
of its OCR; on the tiny trained MinerU2.5-shaped model."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pdfs import first_page, table_pdf
from tiny_fixtures import Counting, tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.engines.ocr import OcrEngine
from mineru_cli.engines.vlm import VlmEngine, standard_vlm_blocks
from mineru_cli.text_layer import TextLayer, TextLine
from mineru_cli.vlm.protocol.crops import prepare_crops
from mineru_cli.vlm.protocol.profiles import PROFILE_2509

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def engine():
    return OcrEngine(threads=2)


@pytest.fixture(scope="module")
def shared_runtime(tiny_vlm):
    return VlmEngine(tiny_vlm / "model", threads=1).runtime


def test_standard_mode_sends_only_tables_and_equations_to_the_vlm(tiny_vlm, shared_runtime, engine, tmp_path):
    page = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100)
    embedded = engine.parse(page.image, page.text_layer)
    vlm_types = {"table", "equation"}
    expected = sum(1 for b in embedded.blocks if b.type in vlm_types)
    assert expected == 1  # the page's ruled table

    standard = VlmEngine(tiny_vlm / "model", threads=1, mode="standard")
    standard._runtime = Counting(shared_runtime)
    result = standard.parse(page.image, page.text_layer)
    # one request per table/equation crop; no layout request (the layout prompt is 1,369 image tokens)
    assert standard.runtime.sequences == expected
    assert max(n for batch in standard.runtime.batches for n in batch) < 1369
    assert [b.type for b in result.blocks] == [b.type for b in embedded.blocks]
    for mine, base in zip(result.blocks, embedded.blocks):
        assert mine.bbox == base.bbox
        if base.type in vlm_types and mine.extra["source"] == "vlm":
            assert "html" in mine.extra  # the VLM's table answer
        else:
            assert mine.as_dict() == base.as_dict()  # text and titles: the embedded engine's, exactly
    assert result.counts["text_layer_blocks"] == len(embedded.blocks) - result.counts["vlm_blocks"]
    assert standard.options()["mode"] == "standard"
    assert "layout" in {m["role"] for m in standard.identity()["ocr"]["models"]}


def test_hybrid_mode_takes_a_trusted_text_layer_instead_of_the_ocr(tiny_vlm, shared_runtime, engine):
    page = Image.open(tiny_vlm / "page.png").convert("RGB")
    ocr_lines = engine.text_lines(page)[0]
    # a text layer with the OCR's boxes and other text: where hybrid fills a block from its lines,
    # the text must be the layer's
    layer = TextLayer(tuple(TextLine(ln.box, ln.text.lower()) for ln in ocr_lines), True, None, 99, 0)
    hybrid = VlmEngine(tiny_vlm / "model", threads=1, mode="hybrid")
    hybrid._runtime = Counting(shared_runtime)
    result = hybrid.parse(page, layer)
    by_type = {b.type: b for b in result.blocks}
    for kind in ("title", "text"):
        assert by_type[kind].extra["source"] == "text_layer"
        assert by_type[kind].text == by_type[kind].text.lower() and by_type[kind].text
    assert by_type["text"].text == "small pages make fast tests."
    assert result.counts["text_layer_blocks"] == 2 and result.counts["ocr_blocks"] == 0
    assert result.timings["ocr"] == 0.0  # no OCR ran
    plain = VlmEngine(tiny_vlm / "model", threads=1, mode="hybrid")
    plain._runtime = Counting(shared_runtime)
    assert {plain.parse(page).blocks[i].extra["source"] for i in (0, 1)} == {"ocr"}


def test_standard_mode_crops_a_turned_page_s_table_upright(engine, tmp_path):
    page = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100).image
    turned = page.rotate(90, expand=True)  # a scan that came in sideways
    crops = {}
    for name, image in (("upright", page), ("turned", turned)):
        blocks = engine.parse(image).blocks
        _, layout = standard_vlm_blocks(blocks, image.size)
        (table,) = [b for b in layout if b.type == "table"]
        assert table.angle == (270 if name == "turned" else 0)
        (crop,) = prepare_crops(image, [table], PROFILE_2509)
        crops[name] = crop.image
    # the ruled table is wider than tall; read from the turned page it is cropped upright again
    assert crops["upright"].width > crops["upright"].height and crops["turned"].width > crops["turned"].height
    assert abs(crops["turned"].width - crops["upright"].width) <= 0.05 * crops["upright"].width


def test_standard_mode_reads_a_batch_once_when_one_page_fails(tiny_vlm, shared_runtime, tmp_path):
    """A page the embedded engine failed on (a 1900 x 4 px spacer: too elongated for the text
    detector) made standard mode read the whole batch again page by page: in a batch of 3, 5
    embedded reads, where the embedded engine is most of a page's time. The failing page now
    gets its error in its place and the others keep their one read."""
    good = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100)
    thin = Image.new("RGB", (1900, 4), "white")
    standard = VlmEngine(tiny_vlm / "model", threads=1, mode="standard")
    standard._runtime = Counting(shared_runtime)
    read = standard.ocr.parse
    calls = []

    def counted(image, text=None):
        calls.append(image.size)
        return read(image, text)

    standard.ocr.parse = counted  # type: ignore[method-assign]  (a spy: the real parse runs)
    out = standard.parse_batch([good.image, thin, good.image], [good.text_layer, None, good.text_layer])
    assert isinstance(out[1], Exception) and "too elongated" in str(out[1])
    assert calls == [good.image.size, thin.size, good.image.size]  # each page read once
    alone = standard.parse(good.image, good.text_layer)
    for result in (out[0], out[2]):
        assert not isinstance(result, Exception)
        assert [b.as_dict() for b in result.blocks] == [b.as_dict() for b in alone.blocks]
        assert result.counts["vlm_blocks"] == alone.counts["vlm_blocks"] == 1  # its table, read by the VLM


def test_standard_mode_says_when_the_vlm_gives_no_table(tiny_vlm, shared_runtime):
    """A table whose VLM answer held no table (no OTSL cell: the tiny model's nonsense on the
    second table of a real page) kept the embedded engine's block without a word, though the
    VLM reads every table in standard mode. It still keeps it, and the page's warnings name it."""
    page = first_page(DATA / "booktabs_table.pdf")
    standard = VlmEngine(tiny_vlm / "model", threads=1, mode="standard")
    standard._runtime = Counting(shared_runtime)
    result = standard.parse(page.image, page.text_layer)
    tables = [i for i, b in enumerate(result.blocks) if b.type == "table"]
    kept = [i for i in tables if result.blocks[i].extra["source"] != "vlm"]
    assert standard.runtime.sequences == len(tables) == 2 and len(kept) == 1  # both read, one gave no table
    assert result.blocks[kept[0]].extra["source"] == "text_layer" and "html" in result.blocks[kept[0]].extra
    assert result.warnings == [
        f"block {kept[0]} (table): the VLM's answer held no table; kept the embedded engine's block"
    ]


def test_standard_mode_records_the_lang_its_embedded_engine_reads_with(tiny_vlm):
    """--lang ch --mode standard recorded lang "en" with its embedded engine's options (the
    record said otherwise than the run was told), where --mode ocr records "ch". Both say "ch"."""
    from mineru_cli.engines import describe, make_engine, resolve_engine

    model = str(tiny_vlm / "model")
    for lang in ("ch", "en"):
        spec = resolve_engine("vlm", mode="standard", model=model, lang=lang, say=lambda m: None)
        engine = make_engine("vlm", threads=1, model=model, mode="standard", lang=lang, say=lambda m: None)
        recorded = describe(spec)["options"]
        assert recorded == engine.options()
        assert recorded["standard"]["embedded"]["lang"] == lang
        assert describe(resolve_engine("ocr", lang=lang, say=lambda m: None))["options"]["lang"] == lang


def test_standard_mode_s_vlm_blocks_carry_the_angle_the_page_s_other_blocks_carry(tiny_vlm, shared_runtime, tmp_path):
    """A table the VLM read in standard mode carried `angle: 0` where every other block of its
    page, the embedded engine's, carries none (the embedded engine gives `angle` only to the
    blocks of a page it read turned, and then to each). The VLM block now carries what the
    embedded block it replaces carried: nothing on an upright page, the page's turn on a
    turned one."""
    page = first_page(table_pdf(tmp_path / "table.pdf"), dpi=100)
    standard = VlmEngine(tiny_vlm / "model", threads=1, mode="standard")
    standard._runtime = Counting(shared_runtime)
    upright = standard.parse(page.image, page.text_layer)
    read = [b for b in upright.blocks if b.extra["source"] == "vlm"]
    assert [b.type for b in read] == ["table"]  # the page's ruled table, read by the VLM
    assert not [b.as_dict() for b in upright.blocks if "angle" in b.extra]
    turned = standard.parse(page.image.rotate(90, expand=True))
    angles = [b.extra.get("angle") for b in turned.blocks]
    assert set(angles) == {270} and "vlm" in {b.extra["source"] for b in turned.blocks}, angles
