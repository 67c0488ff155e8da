"""Per-document Markdown and MinerU content_list.json from page records."""

import contextlib
import errno
import json
import os
import resource
import time

import numpy as np
import pytest
from PIL import Image

from mineru_cli import writers
from mineru_cli.writers import STALE_TEMP_S, content_list_items, document_dir, open_temporary_beside, write_documents


def page(source, index, blocks, status="ok"):
    return {
        "source": source,
        "page_index": index,
        "status": status,
        "blocks": blocks,
        "image": {"width": 2000, "height": 1000},
    }


BLOCKS = [
    {"type": "header", "bbox": [0, 0, 2000, 50], "text": "Running head", "score": None},
    {"type": "title", "bbox": [100, 60, 1900, 120], "text": "Results", "score": None},
    {"type": "table_caption", "bbox": [100, 130, 900, 160], "text": "Table 1. Scores", "score": None},
    {
        "type": "table",
        "bbox": [100, 170, 900, 400],
        "text": "a\tb",
        "score": None,
        "html": "<table><tr><td>a</td><td>b</td></tr></table>",
    },
    {"type": "equation", "bbox": [100, 420, 900, 480], "text": "\\[x^2\\]", "score": None, "latex": "x^2"},
    {"type": "image", "bbox": [1000, 170, 1900, 600], "text": "", "score": None},
    {"type": "image_caption", "bbox": [1000, 610, 1900, 650], "text": "Figure 1. A cat", "score": None},
    {"type": "text", "bbox": [100, 700, 1900, 900], "text": "Body text.", "score": 0.9},
    {"type": "table_footnote", "bbox": [100, 950, 400, 990], "text": "orphan? no: owner on page", "score": None},
]


def test_content_list_items_follow_minerus_format(tmp_path):
    img = Image.new("RGB", (2000, 1000), "white")
    items = content_list_items(page("a.pdf", 3, BLOCKS), tmp_path, img)
    assert [it["type"] for it in items] == ["header", "text", "table", "equation", "image", "text"]
    header, title, table, eq, image, body = items
    assert title == {"type": "text", "text": "Results", "text_level": 1, "bbox": [50, 60, 950, 120], "page_idx": 3}
    assert table["table_body"].startswith("<table>") and table["table_caption"] == ["Table 1. Scores"]
    assert table["table_footnote"] == ["orphan? no: owner on page"]
    assert eq["text"] == "$$\nx^2\n$$" and eq["text_format"] == "latex"
    assert image["image_caption"] == ["Figure 1. A cat"]
    assert (tmp_path / image["img_path"]).is_file() and (tmp_path / table["img_path"]).is_file()
    with Image.open(tmp_path / image["img_path"]) as crop:
        assert crop.size == (900, 430)
    assert all(0 <= v <= 1000 for it in items for v in it["bbox"])


def test_pro_headings_get_minerus_text_levels(tmp_path):
    """MinerU 4 gives a doc_title text_level 1 and a paragraph_title 2 (2 to 6 where its block
    says; docvortex's _normalize_raw_blocks); a title (2509, the embedded engine) 1, as MinerU 3."""
    blocks = [
        {"type": "doc_title", "bbox": [0, 0, 2000, 50], "text": "Parsing Documents", "score": None},
        {"type": "paragraph_title", "bbox": [0, 100, 2000, 150], "text": "1 Introduction", "score": None},
        {"type": "paragraph_title", "bbox": [0, 200, 2000, 250], "text": "1.1 Scope", "score": None, "level": 3},
        {"type": "title", "bbox": [0, 300, 2000, 350], "text": "Results", "score": None},
    ]
    items = content_list_items(page("pro.pdf", 0, blocks), tmp_path, None)
    assert [(it["text"], it["text_level"]) for it in items] == [
        ("Parsing Documents", 1),
        ("1 Introduction", 2),
        ("1.1 Scope", 3),
        ("Results", 1),
    ]


def test_a_run_of_references_is_one_ref_text_list(tmp_path):
    """MinerU 4 writes each run of ref_text blocks on a page (one alone too) as one `list` item,
    sub_type ref_text, its bbox around them all (content_list v1's ReferenceGroup: iter_page_units,
    unit_bbox); a block of another type between two ends a run, and a blank reference is left out."""

    def ref(y, text):
        return {"type": "ref_text", "bbox": [100, y, 1900, y + 40], "text": text, "score": None}

    blocks = [
        {"type": "paragraph_title", "bbox": [100, 0, 1900, 40], "text": "References", "score": None},
        ref(100, "[1] A. Author. A paper. 2020."),
        ref(150, "   "),
        {**ref(200, "[2] B. Author. Another. 2021."), "bbox": [80, 200, 1000, 240]},
        {"type": "page_footnote", "bbox": [100, 900, 1900, 940], "text": "1 A footnote.", "score": None},
        ref(950, "[3] C. Author. The last. 2022."),
    ]
    items = content_list_items(page("refs.pdf", 2, blocks), tmp_path, None)
    assert items[1:] == [
        {
            "type": "list",
            "sub_type": "ref_text",
            "list_items": ["[1] A. Author. A paper. 2020.", "[2] B. Author. Another. 2021."],
            "bbox": [40, 100, 950, 240],
            "page_idx": 2,
        },
        {"type": "page_footnote", "text": "1 A footnote.", "bbox": [50, 900, 950, 940], "page_idx": 2},
        {
            "type": "list",
            "sub_type": "ref_text",
            "list_items": ["[3] C. Author. The last. 2022."],
            "bbox": [50, 950, 950, 990],
            "page_idx": 2,
        },
    ]


def test_ocr_table_cells_become_table_body(tmp_path):
    blocks = [
        {"type": "table", "bbox": [0, 0, 10, 10], "text": "", "score": 0.9, "cells": [["Name", "Qty"], ["a<b", "2"]]}
    ]
    (item,) = content_list_items(page("t.png", 0, blocks), tmp_path, None)
    assert item["table_body"] == "<table><tr><td>Name</td><td>Qty</td></tr><tr><td>a&lt;b</td><td>2</td></tr></table>"


def test_orphan_caption_stays_text_in_place(tmp_path):
    blocks = [
        {"type": "text", "bbox": [0, 0, 10, 10], "text": "x", "score": None},
        {"type": "image_caption", "bbox": [0, 20, 10, 30], "text": "Lonely caption", "score": None},
    ]
    items = content_list_items(page("a.png", 0, blocks), tmp_path, None)
    assert [it["text"] for it in items] == ["x", "Lonely caption"]


def test_write_documents_one_folder_per_document(tmp_path):
    recs = [
        page("x/report.pdf", 1, BLOCKS[7:8]),
        page("x/report.pdf", 0, BLOCKS[1:2]),
        page("y/report.pdf", 0, BLOCKS[7:8]),
        page("bad.png", 0, [], status="failed"),
    ]
    written = write_documents(recs, tmp_path, {"content-list"})
    a, b = document_dir(tmp_path, "x/report.pdf"), document_dir(tmp_path, "y/report.pdf")
    assert a != b and not document_dir(tmp_path, "bad.png").exists()
    assert (a / "report.md").read_text() == "# Results\n\nBody text.\n"  # pages in order
    items = json.loads((a / "report_content_list.json").read_text())
    assert [it["page_idx"] for it in items] == [0, 1]
    assert len(written) == 4


def test_a_pro_continuation_flag_joins_nothing(tmp_path):
    """Pro's `merge_prev` (<|txt_contd_tgt|>: the block continues the previous one, on its page or
    the last) stays in the record, but MinerU 4.0.12 drops it before it writes anything
    (mineru/backend/analysis/pdf/normalization.py, _normalize_pdf_model_list) and so do we: each
    block its own paragraph and content_list item, without the flag."""
    first = {"type": "text", "bbox": [100, 100, 1900, 900], "text": "A paragraph that goes", "score": None}
    same_page = {**first, "bbox": [100, 920, 1900, 990], "text": "on below,", "merge_prev": True}
    next_page = {**first, "bbox": [100, 50, 1900, 200], "text": "and over the page.", "merge_prev": True}
    recs = [page("pro.pdf", 0, [first, same_page]), page("pro.pdf", 1, [next_page])]
    write_documents(recs, tmp_path, {"content-list"})
    folder = document_dir(tmp_path, "pro.pdf")
    assert (folder / "pro.md").read_text() == "A paragraph that goes\n\non below,\n\nand over the page.\n"
    items = json.loads((folder / "pro_content_list.json").read_text())
    assert [(it["text"], it["page_idx"]) for it in items] == [
        ("A paragraph that goes", 0),
        ("on below,", 0),
        ("and over the page.", 1),
    ]
    assert not any("merge_prev" in it for it in items)


def test_analysed_figures_are_written_as_mineru_4_writes_them(tmp_path):
    """content_list v1 (MinerU 4): an image's `content` and `sub_type` only when it has them; a
    chart is a chart item with its table as `content`."""
    img = Image.new("RGB", (2000, 1000), "white")
    table = "| a | b |\n| --- | --- |\n| 1 | 2 |"
    blocks = [
        {"type": "image", "bbox": [0, 0, 500, 500], "text": "A cat", "score": None, "sub_type": "natural_image"},
        {"type": "chart", "bbox": [500, 0, 1000, 500], "text": table, "score": None, "sub_type": "bar_chart"},
        {"type": "image", "bbox": [1000, 0, 1500, 500], "text": "", "score": None},
        {"type": "chart", "bbox": [1500, 0, 2000, 500], "text": "", "score": None},
        {"type": "image", "bbox": [0, 500, 500, 1000], "text": "Q1 Q2", "score": None},  # OCR'd labels
    ]
    photo, chart, plain, bare_chart, labelled = content_list_items(page("f.png", 0, blocks), tmp_path, img)
    assert (photo["type"], photo["content"], photo["sub_type"]) == ("image", "A cat", "natural_image")
    assert photo["image_caption"] == [] and (tmp_path / photo["img_path"]).is_file()
    assert {k: chart[k] for k in ("type", "content", "sub_type", "chart_caption", "chart_footnote")} == {
        "type": "chart",
        "content": table,
        "sub_type": "bar_chart",
        "chart_caption": [],
        "chart_footnote": [],
    }
    assert (tmp_path / chart["img_path"]).is_file()
    assert "content" not in plain and "sub_type" not in plain
    assert bare_chart["type"] == "chart" and bare_chart["content"] == "" and "sub_type" not in bare_chart
    assert "content" not in labelled  # the embedded engine's labels are not an analysis


def test_an_image_caption_next_to_a_chart_is_its_chart_caption(tmp_path):
    blocks = [
        {"type": "chart", "bbox": [0, 0, 500, 400], "text": "| a |", "score": None, "sub_type": "bar_chart"},
        {"type": "image_caption", "bbox": [0, 410, 500, 450], "text": "Figure 1: sales", "score": None},
        {"type": "image", "bbox": [1000, 0, 1500, 400], "text": "", "score": None},
        {"type": "image_caption", "bbox": [1000, 410, 1500, 450], "text": "Figure 2: a cat", "score": None},
    ]
    chart, photo = content_list_items(page("c.png", 0, blocks), tmp_path, None)
    assert (chart["type"], chart["chart_caption"], chart["chart_footnote"]) == ("chart", ["Figure 1: sales"], [])
    assert (photo["type"], photo["image_caption"]) == ("image", ["Figure 2: a cat"])


@contextlib.contextmanager
def file_size_limit(limit):
    """RLIMIT_FSIZE on this process: a write past `limit` bytes is cut short and the next one
    fails with EFBIG, as a write onto a disk that fills up is cut short and then fails with ENOSPC
    (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_crop_or_layout_pdf_cut_short_by_a_full_disk_is_an_error_not_a_torn_file(tmp_path):
    """Pillow writes a JPEG of up to 64 kB with one write() to the file and takes a short write
    (what a disk with a few kB left gives) as success, and pypdfium2 only prints an error of the
    file it saves into: both left a torn crop or layout PDF under its final name, and a torn crop
    stayed for ever (a crop that exists is taken as whole). Each must be an error, and leave no
    file or temporary."""
    noise = np.random.default_rng(0).integers(0, 256, (1000, 2000, 3), dtype=np.uint8)
    img = Image.fromarray(noise)
    blocks = [
        {"type": "image", "bbox": [100, 100, 220, 220], "text": "", "score": None},  # a ~20 kB JPEG
        {"type": "text", "bbox": [300, 100, 900, 200], "text": "Body text.", "score": 0.9},
    ]
    recs = [
        {
            **page("n.png", 0, blocks),
            "image": {"width": 2000, "height": 1000, "original_width": 2000, "original_height": 1000},
        }
    ]
    folder = document_dir(tmp_path, "n.png")
    for formats in ({"content-list"}, {"layout"}):
        with file_size_limit(4096), pytest.raises(OSError) as exc:
            write_documents(recs, tmp_path, formats, lambda source, index: img)
        assert exc.value.errno == errno.EFBIG, exc.value
        assert not (folder / "n_layout.pdf").exists() and not (folder / "n_content_list.json").exists()
        assert not list(folder.rglob("*.jpg")) and not list(folder.rglob("*.tmp"))
    write_documents(recs, tmp_path, {"content-list", "layout"}, lambda source, index: img)  # room again
    (crop,) = folder.glob("images/*.jpg")
    Image.open(crop).load()  # whole
    assert (folder / "n_layout.pdf").read_bytes().rstrip().endswith(b"%%EOF")


def test_two_runs_writing_one_document_never_share_a_temporary(tmp_path):
    """Two runs writing one --out-dir (other journals, one document) wrote through one fixed
    temporary name, `.<name>.tmp`, each removing it in turn: the other's rename failed with
    ENOENT (two threads: thousands of times in 6,000 writes). Each writer now has its own."""
    import threading

    blocks = [{"type": "text", "bbox": [10, 10, 900, 100], "text": "Body text.", "score": 0.9}]
    size = {"width": 400, "height": 300, "original_width": 400, "original_height": 300}
    recs = [{**page("d.png", 0, blocks), "image": size}]
    white = Image.new("RGB", (400, 300), "white")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for i in range(150):  # records made anew each time: each write is a real one
                again = [{**rec, "created": f"2026-12-05T12:00:{i % 60:02d}.{i:06d}+00:00"} for rec in recs]
                write_documents(again, tmp_path, {"markdown", "layout"}, lambda source, index: white)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    folder = document_dir(tmp_path, "d.png")
    assert sorted(p.name for p in folder.iterdir()) == [".d.mineru-files.json", "d.md", "d_layout.pdf"]  # no temporary
    assert (folder / "d.md").read_text().strip() == "Body text."
    assert (folder / "d_layout.pdf").read_bytes().rstrip().endswith(b"%%EOF")
    umask = os.umask(0)
    os.umask(umask)
    assert (folder / "d.md").stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes a file


def test_a_long_multibyte_name_keeps_its_temporary_within_name_max(tmp_path):
    # 80 CJK characters are 240 bytes: a temporary name cut at 200 characters went past 255 bytes
    target = tmp_path / ("文" * 80 + ".md")
    handle, tmp = open_temporary_beside(target)
    with handle:
        handle.write(b"x")
    assert len(os.fsencode(tmp.name)) <= 255 and tmp.parent == tmp_path
    os.replace(tmp, target)
    assert target.read_bytes() == b"x"


def test_temporaries_left_by_killed_writes_are_removed_once_stale(tmp_path):
    target = tmp_path / "d.md"
    stale, fresh = tmp_path / ".d.md.0123456789ab.tmp", tmp_path / ".d.md.ba9876543210.tmp"
    other = tmp_path / ".e.md.0123456789ab.tmp"  # another document's
    for p in (stale, fresh, other):
        p.write_bytes(b"torn")
    old = time.time() - STALE_TEMP_S - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    handle, tmp = open_temporary_beside(target)
    handle.close()
    assert not stale.exists() and fresh.exists() and other.exists() and tmp.exists()


def test_a_vlm_list_is_one_list_item_of_the_text_blocks_inside_it(tmp_path):
    """The VLM's `list` is a container (skipped in step 2: no text of its own); its items are
    the text blocks inside it. MinerU (fix_list_blocks, then make_blocks_to_content_list) writes
    one `list` item with their texts as `list_items`, not a blank text item beside them."""
    blocks = [
        {"type": "title", "bbox": [100, 20, 1900, 80], "text": "Steps", "score": None, "source": "vlm"},
        {"type": "list", "bbox": [100, 100, 1900, 400], "text": "", "score": None, "source": "vlm"},
        {"type": "text", "bbox": [120, 110, 1880, 190], "text": "1. Unpack the box.", "score": None, "source": "vlm"},
        {"type": "text", "bbox": [120, 210, 1880, 290], "text": "2. Plug it in.", "score": None, "source": "vlm"},
        {"type": "text", "bbox": [120, 310, 1880, 390], "text": " ", "score": None, "source": "vlm"},
        {"type": "text", "bbox": [100, 500, 1900, 700], "text": "Then wait.", "score": None, "source": "vlm"},
        {"type": "list", "bbox": [100, 800, 1900, 900], "text": "", "score": None, "source": "vlm"},  # nothing in it
    ]
    items = content_list_items(page("manual.pdf", 2, blocks), tmp_path, None)
    assert [it["type"] for it in items] == ["text", "list", "text"]
    title, steps, after = items
    assert steps == {
        "type": "list",
        "sub_type": "text",
        "list_items": ["1. Unpack the box.", "2. Plug it in."],
        "bbox": [50, 100, 950, 400],
        "page_idx": 2,
    }
    assert (title["text"], after["text"]) == ("Steps", "Then wait.")


def test_a_list_with_text_of_its_own_is_a_text_item(tmp_path):
    blocks = [{"type": "list", "bbox": [0, 0, 2000, 500], "text": "- one\n- two", "score": 0.9}]
    (item,) = content_list_items(page("scan.png", 0, blocks), tmp_path, None)
    assert (item["type"], item["text"]) == ("text", "- one\n- two")


def test_files_another_run_wrote_over_are_written_again_though_the_stamp_matches(tmp_path):
    """Two runs writing one document into one --out-dir from other records (two journals of a
    file of the same name) where they cannot take turns (a filesystem without flock, or an
    earlier mineru-cli beside this one): the other run's Markdown lands between this run's
    Markdown and its stamp, which then matched this run's records and vouched for the other's
    Markdown on every later run (with nothing new for the document). A file that is not the one
    this run wrote is written again."""
    size = {"width": 400, "height": 300, "original_width": 400, "original_height": 300}
    white = Image.new("RGB", (400, 300), "white")
    formats = {"content-list", "layout"}

    def records(text: str) -> list[dict]:
        block = {"type": "text", "bbox": [10, 10, 390, 100], "text": text, "score": 0.9}
        return [{**page("d.png", i, [block]), "image": size} for i in (0, 1)]

    mine, theirs = records("Mine."), records("Theirs.")
    loads: list[int] = []

    def load_page(source, index):  # the crops' pages, then the layout's: after the Markdown
        loads.append(index)
        if len(loads) == 3:
            folder = document_dir(tmp_path, "d.png")  # the other run's writer, without the lock
            writers._write_document("d.png", theirs, folder, {"content-list"}, lambda source, index: white, 200)
        return white

    write_documents(mine, tmp_path, formats, load_page)
    assert loads == [0, 1, 0, 1]
    md = document_dir(tmp_path, "d.png") / "d.md"
    assert md.read_text().split() == ["Theirs."] * 2  # the other run's, with this run's stamp now
    assert [p.name for p in write_documents(mine, tmp_path, formats, lambda s, i: white)] == [
        "d.md",
        "d_content_list.json",
        "d_layout.pdf",
    ]
    assert md.read_text().split() == ["Mine."] * 2
    assert write_documents(mine, tmp_path, formats, lambda s, i: white) == []  # and then it holds


def _noise(seed: int) -> Image.Image:
    """A page whose crops differ from another seed's (crops are named by their pixels)."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (1000, 2000, 3), dtype=np.uint8))


def test_files_of_formats_no_longer_asked_for_go_when_the_records_change(tmp_path):
    """A document's content changed (the file replaced) and the next run asked for Markdown
    only: it wrote the new Markdown and left the content list and its crops of the earlier
    content beside it (doc.md read one page, doc_content_list.json another)."""
    folder = document_dir(tmp_path, "a.pdf")
    before, after = [page("a.pdf", 0, BLOCKS)], [page("a.pdf", 0, [{**BLOCKS[-2], "text": "New text."}])]
    write_documents(before, tmp_path, {"content-list"}, lambda s, i: _noise(1))
    crops = sorted(folder.glob("images/*.jpg"))
    assert len(crops) == 2 and (folder / "a_content_list.json").is_file()  # the table and the image
    assert [p.name for p in write_documents(after, tmp_path, {"markdown"}, lambda s, i: _noise(2))] == ["a.md"]
    assert sorted(p.name for p in folder.iterdir()) == [".a.mineru-files.json", "a.md", "images"]
    assert list(folder.glob("images/*")) == [] and (folder / "a.md").read_text().strip() == "New text."
    assert write_documents(after, tmp_path, {"markdown"}, lambda s, i: _noise(2)) == []  # and then it holds


def test_files_of_formats_no_longer_asked_for_stay_while_the_records_are_the_same(tmp_path):
    """The same records: the content list and its crops still hold, and stay named by the
    stamp (a later change of the records removes them); a file the user has written over is
    theirs and is left alone."""
    folder, records = document_dir(tmp_path, "a.pdf"), [page("a.pdf", 0, BLOCKS)]
    records[0]["image"] |= {"original_width": 2000, "original_height": 1000}  # the layout PDF's page size
    write_documents(records, tmp_path, {"content-list", "layout"}, lambda s, i: _noise(1))
    crops = sorted(folder.glob("images/*.jpg"))
    (folder / "a_layout.pdf").write_bytes(b"the user's own")
    assert [p.name for p in write_documents(records, tmp_path, {"markdown"}, lambda s, i: _noise(1))] == ["a.md"]
    assert (folder / "a_content_list.json").is_file() and sorted(folder.glob("images/*.jpg")) == crops
    assert write_documents(records, tmp_path, {"markdown"}, lambda s, i: _noise(1)) == []
    changed = [page("a.pdf", 0, BLOCKS[:2])]
    write_documents(changed, tmp_path, {"markdown"}, lambda s, i: _noise(1))
    assert not (folder / "a_content_list.json").exists() and list(folder.glob("images/*")) == []
    assert (folder / "a_layout.pdf").read_bytes() == b"the user's own"


def test_a_document_with_no_ok_page_loses_its_crops_too(tmp_path):
    """remove_documents removed the Markdown and content list and left their crops for good."""
    from mineru_cli.writers import remove_documents

    folder = document_dir(tmp_path, "a.pdf")
    write_documents([page("a.pdf", 0, BLOCKS)], tmp_path, {"content-list"}, lambda s, i: _noise(1))
    other = folder / "images" / "notes.txt"  # not a crop of ours
    other.write_text("kept")
    assert len(remove_documents(tmp_path, ["a.pdf"])) == 2
    assert list(folder.glob("images/*")) == [other]


def test_a_stamp_without_the_records_hash_leaves_the_files_it_names(tmp_path):
    """An earlier mineru-cli's stamp says nothing of whether the records changed: the files it
    names that this run does not write stay (as they did), and a damaged crop list is no crash."""
    folder = document_dir(tmp_path, "a.pdf")
    write_documents([page("a.pdf", 0, BLOCKS)], tmp_path, {"content-list"}, lambda s, i: _noise(1))
    crops = sorted(folder.glob("images/*.jpg"))
    stamp = folder / ".a.mineru-files.json"
    held = json.loads(stamp.read_text())
    del held["records"]
    held["crops"] += [{"not": "a name"}, "../a.md"]
    stamp.write_text(json.dumps(held))
    after = [page("a.pdf", 0, BLOCKS[:2])]
    assert [p.name for p in write_documents(after, tmp_path, {"markdown"}, lambda s, i: _noise(2))] == ["a.md"]
    assert (folder / "a_content_list.json").is_file() and sorted(folder.glob("images/*.jpg")) == crops
    held = json.loads(stamp.read_text())
    held["crops"] += [{"not": "a name"}, "../a.md"]
    stamp.write_text(json.dumps(held))
    write_documents([page("a.pdf", 0, BLOCKS[:3])], tmp_path, {"markdown"}, lambda s, i: _noise(2))
    assert (folder / "a.md").is_file()


def test_a_run_killed_while_writing_leaves_the_next_run_the_earlier_files_to_remove(tmp_path):
    """The document changed and the run writing its new Markdown was killed (SIGKILL: the OOM
    killer, `timeout -s KILL`) while it drew the layout PDF: the stamp was gone, so no later run
    knew of the earlier content list and crops, which stood beside the new Markdown for good."""
    import subprocess
    import sys
    import textwrap

    folder = document_dir(tmp_path, "a.pdf")
    before = [page("a.pdf", 0, BLOCKS)]
    after = [page("a.pdf", 0, [{**BLOCKS[-2], "text": "New text."}])]
    for records in (before, after):
        records[0]["image"] |= {"original_width": 2000, "original_height": 1000}  # the layout PDF's page size
    write_documents(before, tmp_path, {"content-list"}, lambda s, i: _noise(1))
    assert len(list(folder.glob("images/*.jpg"))) == 2
    killed = textwrap.dedent(f"""
        import os, signal
        from mineru_cli.writers import write_documents
        def load_page(source, index):  # the layout PDF's page: after the Markdown is written
            os.kill(os.getpid(), signal.SIGKILL)
        write_documents({after!r}, __import__("pathlib").Path({str(tmp_path)!r}), {{"markdown", "layout"}}, load_page)
    """)
    run = subprocess.run([sys.executable, "-c", killed], env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == -9
    assert (folder / "a.md").read_text().strip() == "New text."  # written before the kill

    write_documents(after, tmp_path, {"markdown", "layout"}, lambda s, i: _noise(2))
    assert sorted(p.name for p in folder.iterdir()) == [".a.mineru-files.json", "a.md", "a_layout.pdf", "images"]
    assert list(folder.glob("images/*")) == []


def test_a_crop_removed_by_the_user_does_not_make_every_run_write_the_document_again(tmp_path):
    """Markdown and layout asked for after a content list, the same records: the crops stay
    named; one removed since (the user cleared images/) kept being named, the stamp never held,
    and every later run wrote the Markdown and drew the layout PDF again."""
    folder, records = document_dir(tmp_path, "a.pdf"), [page("a.pdf", 0, BLOCKS)]
    records[0]["image"] |= {"original_width": 2000, "original_height": 1000}
    write_documents(records, tmp_path, {"content-list"}, lambda s, i: _noise(1))
    for crop in folder.glob("images/*.jpg"):
        crop.unlink()
    written = write_documents(records, tmp_path, {"markdown", "layout"}, lambda s, i: _noise(1))
    assert [p.name for p in written] == ["a.md", "a_layout.pdf"]
    assert write_documents(records, tmp_path, {"markdown", "layout"}, lambda s, i: _noise(1)) == []


def test_content_list_writes_vlm_inline_formulas_as_minerus_dollars(tmp_path):
    """content_list's texts hold the VLM's inline formulas as MinerU writes them, $...$ (its
    V1 renderer, mineru/render/_internal/content_list/v1.py in MinerU 4.0.12, renders every
    text, caption and list item with render_inline_content and the `$` inline delimiters;
    MinerU 2.5.4's make_blocks_to_content_list with merge_para_with_text): a tool reading
    MinerU's format finds no \\(...\\) there. Text read off the page stays as read."""
    vlm = {"score": None, "source": "vlm"}
    blocks = [
        {"type": "title", "bbox": [0, 0, 2000, 50], "text": "On \\(\\pi\\)", **vlm},
        {"type": "text", "bbox": [0, 60, 2000, 100], "text": "Let \\( x>0 \\).", **vlm},
        {"type": "image", "bbox": [0, 110, 900, 400], "text": "", **vlm},
        {"type": "image_caption", "bbox": [0, 410, 900, 440], "text": "Plot of \\(f\\)", **vlm},
        {"type": "ref_text", "bbox": [0, 450, 2000, 480], "text": "[1] On \\(L^2\\).", **vlm},
        {"type": "text", "bbox": [0, 500, 2000, 540], "text": "Type \\(x\\).", "score": None, "source": "ocr"},
    ]
    items = content_list_items(page("f.pdf", 0, blocks), tmp_path, None)
    assert [it.get("text") for it in items] == ["On $\\pi$", "Let $x>0$.", None, None, "Type \\(x\\)."]
    assert items[2]["image_caption"] == ["Plot of $f$"]
    assert items[3]["list_items"] == ["[1] On $L^2$."]


def test_the_markdown_links_each_figures_crop_as_minerus_does(tmp_path):
    """Beside content_list.json and images/, MinerU's Markdown shows each figure as a link to its
    crop, `![](images/<name>.jpg)`, and after it an analysed figure's content (MinerU 2.5.4:
    vlm_middle_json_mkcontent.py mk_blocks_to_markdown, MM_MD; MinerU 4.0.12: docvortex's
    render/_internal/markdown/blocks.py, _render_media_body and _render_chart_with_details).
    The link is the content list's img_path; `--format markdown` alone writes no crop to link."""
    img = _noise(1)
    table = "| a | b |\n| --- | --- |\n| 1 | 2 |"
    blocks = [
        {"type": "text", "bbox": [0, 0, 2000, 100], "text": "See the figures.", "score": None},
        {"type": "image", "bbox": [0, 100, 500, 500], "text": "", "score": None},
        {"type": "image", "bbox": [500, 100, 1000, 500], "text": "A cat", "score": None, "sub_type": "natural_image"},
        {"type": "chart", "bbox": [1000, 100, 1500, 500], "text": table, "score": None, "sub_type": "bar_chart"},
        {"type": "image", "bbox": [0, 500, 500, 900], "text": "Q1 Q2", "score": None},  # OCR'd labels
    ]
    write_documents([page("f.png", 0, blocks)], tmp_path, {"content-list"}, lambda source, index: img)
    folder = document_dir(tmp_path, "f.png")
    plain, photo, chart, labelled = (
        it["img_path"] for it in json.loads((folder / "f_content_list.json").read_text())[1:]
    )
    assert all((folder / path).is_file() for path in (plain, photo, chart, labelled))
    assert (folder / "f.md").read_text() == (
        f"See the figures.\n\n![]({plain})\n\n"
        f"![]({photo})\n\n<details>\n<summary>natural_image</summary>\n\nA cat\n</details>\n\n"
        f"![]({chart})\n\n<details>\n<summary>bar_chart</summary>\n\n{table}\n</details>\n\n"
        f"![]({labelled})\n"
    )
    alone = tmp_path / "alone"
    write_documents([page("f.png", 0, blocks)], alone, {"markdown"}, lambda source, index: img)
    assert "![](" not in (document_dir(alone, "f.png") / "f.md").read_text()


def test_a_vlm_index_is_an_index_item_of_its_entries(tmp_path):
    """MinerU 4's content_list v1 writes an index as {"type": "index", "list_items": [...]}, the
    entries "- " and their label, page numbers after a tab left out, and no `text`
    (mineru/render/_internal/content_list/v1.py, _render_index_items): a tool reading MinerU's
    index items found no list_items in ours."""
    blocks = [{"type": "index", "bbox": [0, 0, 2000, 500], "text": "Intro\t1\nMethods\t7", "score": None}]
    (item,) = content_list_items(page("toc.pdf", 0, blocks), tmp_path, None)
    assert item == {"type": "index", "list_items": ["- Intro", "- Methods"], "bbox": [0, 0, 1000, 500], "page_idx": 0}


def test_pros_generic_captions_and_footnotes_go_to_their_figure_table_or_code(tmp_path):
    """MinerU2.5-Pro reads a caption or footnote without its owner's kind (`caption`, `footnote`).
    MinerU 4 groups it with a figure, table, chart or code block (docvortex's
    regroup_visual_blocks over VISUAL_MAIN_TYPES) and writes it in that item's <type>_caption /
    <type>_footnote (content_list v1: render_annotation_texts; a code item has code_footnote
    too), one that belongs to none as a text item. content_list.json had items of type
    `caption` and `footnote`, which MinerU never writes."""
    blocks = [
        {"type": "caption", "bbox": [0, 0, 900, 50], "text": "Table 1. Sizes", "score": None},
        {"type": "table", "bbox": [0, 60, 900, 400], "text": "a", "score": None, "html": "<table></table>"},
        {"type": "footnote", "bbox": [0, 410, 900, 450], "text": "a In mm.", "score": None},
        {"type": "code", "bbox": [1000, 60, 2000, 400], "text": "x = 1", "score": None},
        {"type": "caption", "bbox": [1000, 410, 2000, 450], "text": "Listing 1. Setup", "score": None},
    ]
    table, code = content_list_items(page("p.pdf", 0, blocks), tmp_path, None)
    assert (table["table_caption"], table["table_footnote"]) == (["Table 1. Sizes"], ["a In mm."])
    assert (code["code_caption"], code["code_footnote"]) == (["Listing 1. Setup"], [])
    alone = [{"type": "caption", "bbox": [0, 0, 900, 50], "text": "Figure 9.", "score": None}]
    assert content_list_items(page("p.pdf", 1, alone), tmp_path, None) == [
        {"type": "text", "text": "Figure 9.", "bbox": [0, 0, 450, 50], "page_idx": 1}
    ]


def test_an_equations_number_is_its_tag_in_the_content_list(tmp_path):
    """MinerU 4 writes an equation's number (Pro's formula_number) as the \\tag of the equation
    beside it, the equation's bbox around both (optimize_hybrid_formula_number_blocks,
    mineru/backend/analysis/pdf/formulas.py), and a number beside no equation as text:
    content_list.json had items of type formula_number, which MinerU never writes."""
    vlm = {"score": None, "source": "vlm"}
    blocks = [
        {"type": "equation", "bbox": [400, 100, 1600, 200], "text": "\\[x=1\\]", "latex": "x=1", **vlm},
        {"type": "formula_number", "bbox": [1800, 120, 1900, 180], "text": "(4)", **vlm},
        {"type": "text", "bbox": [100, 300, 1900, 400], "text": "Then", **vlm},
        {"type": "formula_number", "bbox": [1800, 420, 1900, 480], "text": "(5)", **vlm},
    ]
    items = content_list_items(page("m.pdf", 0, blocks), tmp_path, None)
    assert [(it["type"], it["text"]) for it in items] == [
        ("equation", "$$\nx=1\\tag{4}\n$$"),
        ("text", "Then"),
        ("text", "(5)"),
    ]
    assert items[0]["bbox"] == [200, 100, 950, 200]


def test_content_list_writes_formulas_in_tables_and_figures_as_minerus_inline_math(tmp_path):
    """content_list v1 (MinerU 4.0.12) passes a table's body and an analysed figure's content
    through format_embedded_html, which writes each <eq>...</eq> (MinerU2.5-Pro's formula in a
    cell) as ` $...$ `: a tool reading MinerU's table_body found the tags in ours."""
    cell = "<table><tr><td><eq>x^2</eq></td></tr></table>"
    blocks = [
        {"type": "table", "bbox": [0, 0, 900, 400], "text": "x^2", "score": None, "html": cell},
        {"type": "chart", "bbox": [1000, 0, 1900, 400], "text": cell, "score": None, "sub_type": "bar_chart"},
    ]
    table, chart = content_list_items(page("t.pdf", 0, blocks), tmp_path, None)
    assert table["table_body"] == chart["content"] == "<table><tr><td> $x^2$ </td></tr></table>"


def test_a_2509_unknown_block_is_in_neither_file(tmp_path):
    """MinerU2.5-2509 reads some boxes as `unknown`; MinerU drops them (2.5.4's and 3.4.4's
    vlm_magic_model.py sort an unknown block into no kind of block, so neither its Markdown nor its
    content_list has it). Ours wrote a content_list item of type `unknown` and a paragraph of its
    text; the record keeps the block."""
    vlm = {"score": None, "source": "vlm"}
    blocks = [
        {"type": "text", "bbox": [0, 0, 2000, 50], "text": "Body.", **vlm},
        {"type": "unknown", "bbox": [0, 100, 2000, 150], "text": "QR 7f3a", **vlm},
    ]
    record = page("u.pdf", 0, blocks)
    assert [it["type"] for it in content_list_items(record, tmp_path, None)] == ["text"]
    write_documents([record], tmp_path, {"content-list"})
    assert (tmp_path / "u_pdf" / "u.md").read_text() == "Body.\n"


def test_a_table_without_a_body_has_no_table_body(tmp_path):
    """MinerU writes table_body only where the table has one (2.5.4's and 3.4.4's
    make_blocks_to_content_list set it from a non-empty html; 4.0.12's content_list/v1.py
    _render_table adds it when there is content): a VLM table whose answer gave no HTML, or an
    OCR table with no cells, had `"table_body": ""`."""
    blocks = [
        {"type": "table", "bbox": [0, 0, 900, 400], "text": "", "score": None, "source": "vlm"},
        {"type": "table", "bbox": [0, 500, 900, 900], "text": "", "score": None, "source": "ocr", "cells": []},
        {"type": "table", "bbox": [1000, 0, 1900, 400], "text": "", "score": None, "cells": [["a"]]},
    ]
    empty, no_cells, table = content_list_items(page("t.pdf", 0, blocks), tmp_path, None)
    assert "table_body" not in empty and "table_body" not in no_cells
    assert table["table_body"] == "<table><tr><td>a</td></tr></table>"
    assert list(empty) == ["type", "img_path", "table_caption", "table_footnote", "bbox", "page_idx"]


def test_the_embedded_engines_reference_list_is_an_item_a_reference(tmp_path):
    """Page 5 of the asmejour template (tests/data/references_table_asmejour_p5.png, 150 DPI),
    parsed by the embedded engine: its reference list is one ref_text block, a reference a line.
    MinerU's layout boxes each reference and writes a list item a block (4.0.12's content_list/
    v1.py: a ReferenceGroup's list_items, one per ref_text block; 3.4.4's pipeline
    _get_ref_text_item_blocks), so a reader of list_items finds one reference in each; ours was
    one item holding all of them."""
    from mineru_cli.engines.ocr import OcrEngine

    image = Image.open(writers.Path(__file__).parent / "data" / "references_table_asmejour_p5.png").convert("RGB")
    blocks = [b.as_dict() for b in OcrEngine(threads=2, lang="en").parse(image).blocks]
    record = {**page("refs.png", 0, blocks), "image": {"width": image.width, "height": image.height}}
    (refs,) = [it for it in content_list_items(record, tmp_path, None) if it.get("sub_type") == "ref_text"]
    numbers = [int(item[1 : item.index("]")]) for item in refs["list_items"]]
    assert numbers[:3] == [1, 2, 3] and len(numbers) >= 15, refs["list_items"]
    assert all(item.count("[") == 1 for item in refs["list_items"][:9]), refs["list_items"]
