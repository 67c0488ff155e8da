"""Per-document outputs made from the journal's records: Markdown, MinerU's content_list.json and
the layout PDF.

`--format markdown` writes `<stem>.md`; `--format content-list` writes `<stem>_content_list.json`,
`<stem>.md` and `images/` (crops of image and table blocks, the Markdown linking the figures')
the way MinerU lays them out, so tools that read MinerU's output read ours; `--format layout`
writes `<stem>_layout.pdf` (the boxes drawn on each page: layout_pdf.py). Each document gets
its own folder under the output folder, named after its path relative to the input root (two
`report.pdf` never collide).

content_list items (MinerU's format): `type` (text | equation | image | table | code | list and
the page furniture types, which stay in reading order), `bbox` in 0..1000 page units, `page_idx`
(0-based), plus by type: text: `text`, `text_level` for headings (a doc_title 1, a paragraph_title
2, a title 1: core.blocks.heading_level); equation: `text` ($$-wrapped LaTeX), `text_format` (a
formula read off the page as text, by the text layer or OCR, is a text item);
image: `img_path`, `image_caption`, `image_footnote`, and when analysed (Pro) `content` (the
description) and `sub_type`; chart: `img_path`, `content` (its table), `chart_caption`,
`chart_footnote`, `sub_type` when analysed; table: `img_path`, `table_body` (HTML; none where the
table has no body), `table_caption`, `table_footnote`; code: `sub_type`, `code_body`, `code_caption`, `code_footnote`.
An index (Pro's table of contents) is an `index` item whose `list_items` are its entries, "- " and
the entry each, page numbers after a tab left out (markdown.index_entries), as MinerU 4 writes it.
A list (the VLM's `list`, a container) is one item, `sub_type` (text | ref_text) and `list_items`
(the texts of the text blocks inside it, which are not items of their own), as MinerU gathers them;
a list read as text of its own (no block inside it) is a text item. Each run of ref_text blocks
(one alone too) is one list of sub_type ref_text, a list item a reference (a line of a reference
list read off the page), as MinerU 4 writes a page's references. A 2509 `unknown` block is no
item (core.blocks.NOT_WRITTEN), as MinerU drops it.
Captions and footnotes are attached to the nearest image/table of their kind on the page (an image
caption or footnote nearest a chart to that chart, as chart_caption / chart_footnote; Pro's
generic caption and footnote to the nearest image, chart, table or code: core.blocks.ATTACHED_TO).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import html
import io
import json
import os
import secrets
import time
from collections import Counter
from itertools import groupby
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Callable, Iterator

from .core.blocks import (
    ATTACHED_TO,
    CONTENT_LIST_CODE,
    CONTENT_LIST_EQUATION,
    CONTENT_LIST_IMAGE,
    CONTENT_LIST_TEXT,
    FIGURES,
    HEADINGS,
    NOT_WRITTEN,
    Block,
    heading_level,
)
from .core.blocks import BlockType as T
from .core.geometry import covered
from .markdown import LITERAL_SOURCES, blocks_to_markdown, embedded_formulas, equation_tags, index_entries, prose_text
from .version import __version__

FORMATS = ("markdown", "content-list", "layout")


def document_dir(out_dir: Path, source: str) -> Path:
    rel = PurePosixPath(source)
    return out_dir.joinpath(*rel.parent.parts, rel.stem + rel.suffix.replace(".", "_"))


def write_documents(
    records: list[dict],
    out_dir: Path,
    formats: set[str],
    load_page=None,
    dpi: float = 200,
    stopping: Callable[[], bool] = lambda: False,
    waiting: Callable[[Path], None] = lambda folder: None,
) -> list[Path]:
    """Write the chosen formats for every document whose pages are all in `records`.

    load_page(source, page_index) -> PIL image, for the crops of content-list and the pages of
    layout (which needs it); None: no crops. dpi: the run's --dpi (the layout pages' size).
    stopping: whether the run is asked to stop; a document another run is writing is then
    left as it is, not waited for. waiting(folder): told once when a document's folder is
    another run's for now and this run waits for it."""
    written: list[Path] = []
    if load_page is not None:
        load_page = _last_page(load_page)  # a one-page document is rendered once for both formats
    key = lambda r: r["source"]  # noqa: E731
    for source, group in groupby(sorted(records, key=lambda r: (r["source"], r["page_index"])), key):
        pages = [p for p in group if p["status"] == "ok"]
        if not pages:
            continue
        folder = document_dir(out_dir, source)
        folder.mkdir(parents=True, exist_ok=True)
        with document_lock(folder, stopping, waiting) as held:
            if not held:
                break  # stopping: the next run writes it
            written += _write_document(source, pages, folder, formats, load_page, dpi)
    return written


def _write_document(
    source: str, pages: list[dict], folder: Path, formats: set[str], load_page, dpi: float
) -> list[Path]:
    """One document's files, from its ok pages' records, unless its stamp says they hold."""
    written: list[Path] = []
    stem = PurePosixPath(source).stem
    stamp = _Stamp.at(folder, stem).of(pages, formats, load_page is not None, dpi)
    if stamp.holds():
        return written  # its files were written from these very records: nothing to redo
    stamp.pending()  # until all its files are written anew
    items: list[dict] = []
    figures: list[dict[int, str]] = [{} for _ in pages]  # each page's figures' crops, by position
    if "content-list" in formats:  # first: the Markdown links the crops, as MinerU's does
        for page, crops in zip(pages, figures):
            image = load_page(source, page["page_index"]) if load_page else None
            items += content_list_items(page, folder, image, crops)
    if formats & {"markdown", "content-list"}:
        md = "\n".join(
            blocks_to_markdown([Block.from_dict(b) for b in p["blocks"]], crops) for p, crops in zip(pages, figures)
        )
        written.append(stamp.wrote(atomic_write(folder / f"{stem}.md", md)))
    if "content-list" in formats:
        content_list = json.dumps(items, ensure_ascii=False, indent=2)
        stamp.crops = sorted({path for it in items for path in _crops_of(it)})
        written.append(stamp.wrote(atomic_write(folder / f"{stem}_content_list.json", content_list)))
    if "layout" in formats and load_page is not None:
        from .layout_pdf import write_layout_pdf  # Pillow drawing and a PDF writer: only when asked

        path = folder / f"{stem}_layout.pdf"
        layout = write_layout_pdf(path, pages, lambda p: load_page(p["source"], p["page_index"]), dpi)
        written.append(stamp.wrote(layout))
    stamp.settle()
    stamp.write()
    return written


@contextlib.contextmanager
def document_lock(
    folder: Path, stopping: Callable[[], bool] = lambda: False, waiting: Callable[[Path], None] = lambda folder: None
) -> Iterator[bool]:
    """Hold `folder` (a document's) for this run alone while its files are written or removed:
    True once held. Two runs with other journals and one --out-dir take turns on a document:
    one run's Markdown never stands beside the other's content list, and neither removes a
    crop the other's content list names. The lock is on the folder itself (no file is left
    behind) and goes with the process; a filesystem without flock (some network mounts) writes
    unlocked. While another run holds it, this one waits (its writes take seconds), unless it
    is asked to stop: False, the folder is left as it is. waiting(folder) is called once when
    it starts to wait, so that a run held up by another says why."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield True  # not there (nothing to take turns on) or not openable: the writes report it
        return
    try:
        yield _take_turn(fd, stopping, lambda: waiting(folder))
    finally:
        os.close(fd)  # releases the lock


LOCK_POLL_S = 0.05  # how often a run waiting for another's document looks again


def _take_turn(fd: int, stopping: Callable[[], bool], waiting: Callable[[], None]) -> bool:
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if stopping():
                return False
            if not told:
                waiting()
                told = True
            time.sleep(LOCK_POLL_S)
        except OSError:
            return True  # no flock on this filesystem: written unlocked


# A document's files are a function of its ok pages' records, the formats, the crops' source and
# --dpi, and this code: the stamp beside them holds a hash of those, so a re-run with nothing new
# for a document rewrites nothing (its crops and layout pages were rendered from the source
# again, 0.1-0.2 s a page, on every run). FILES_REVISION: bump when the same records give other files.
# Each file is held as this run wrote it (its inode, size and modification time): another run
# writing the same document into this folder from other records (another journal) replaces
# files under this run's name between its writes and its stamp, and a stamp that only named them
# vouched for the other run's Markdown for good.
STAMP = ".{stem}.mineru-files.json"
FILES_REVISION = 10


class _Stamp:
    """What a document's files were last written from, and which files those are."""

    def __init__(self, path: Path):
        self.path = path
        self.digest = ""
        self.records = ""  # the hash of the records alone: whether files of other formats still hold
        self.crops: list[str] = []  # images/<name>.jpg the content list names
        self.written: dict[str, list[int]] = {}  # file name -> its _identity as written
        self._earlier: dict | None = None  # the files stood for while writing (pending)

    @classmethod
    def at(cls, folder: Path, stem: str) -> _Stamp:
        return cls(folder / STAMP.format(stem=stem))

    def of(self, pages: list[dict], formats: set[str], crops: bool, dpi: float) -> _Stamp:
        """This stamp for files written from `pages` (ok records), `formats`, crops or none, `dpi`."""
        h = hashlib.sha256(json.dumps([FILES_REVISION, __version__]).encode())
        for page in pages:
            h.update(json.dumps(page, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        self.records = h.hexdigest()
        self.digest = hashlib.sha256(json.dumps([self.records, sorted(formats), crops, dpi]).encode()).hexdigest()
        return self

    def pending(self) -> None:
        """Stand, while the files are written, for the earlier files and those written so far:
        a stamp that never holds (no digest) but names them all, so a run killed before settle
        leaves the next one the earlier files to settle (a content list of the earlier content
        must not outlive the run that wrote the new Markdown). Its records are the earlier
        files' only where those are this run's too. A stamp that cannot be written is removed:
        none must vouch for files being replaced."""
        self._earlier = self.earlier() or {"records": self.records, "written": {}, "crops": []}
        if not self._write_pending():
            self.remove()

    def _write_pending(self) -> bool:
        earlier = self._earlier
        if earlier is None:
            return True  # not writing: nothing to stand for
        written = {n: i for n, i in earlier["written"].items() if isinstance(n, str)} | self.written
        crops = sorted({c for c in earlier["crops"] if isinstance(c, str)} | set(self.crops))
        pending = {"digest": "", "written": written, "crops": crops}
        if "records" in earlier:  # an earlier mineru-cli's stamp: its files' records stay unknown
            pending["records"] = self.records if earlier["records"] == self.records else ""
        return self._write(pending)

    def earlier(self) -> dict | None:
        """The stamp there now (before this run rewrites the files), or None."""
        try:
            held = json.loads(self.path.read_text(encoding="utf-8"))
            return held if isinstance(held.get("written"), dict) and isinstance(held.get("crops"), list) else None
        except (OSError, ValueError, AttributeError):
            return None

    def settle(self) -> None:
        """The files the earlier stamp names that this run did not write again (a format no
        longer asked for, a crop no longer in the content list): kept, and named by this stamp,
        where they were written from the same records and are still the files written;
        removed where the records have changed since (a `doc_content_list.json` of the file's
        earlier content must not stand beside the Markdown of its new one). A file that is no
        longer the one written is another run's or the user's and is left alone, and so is
        everything a stamp without the records' hash names (an earlier mineru-cli's: whether the
        records changed is not known)."""
        earlier, self._earlier = self._earlier, None
        if earlier is None or "records" not in earlier:
            return
        folder, same = self.path.parent, earlier["records"] == self.records
        for name, identity in earlier["written"].items():
            if name in self.written or "/" in name:
                continue
            try:
                ours = _identity(folder / name) == identity
            except OSError:
                continue  # gone
            if ours and same:
                self.written[name] = identity
            elif ours:
                _unlink(folder / name)
        # an earlier crop stays while the records are the same and it is still there (a stamp
        # naming a crop removed since would never hold, and each run would write it all again)
        crops = {c for c in earlier["crops"] if isinstance(c, str) and _is_crop(c)}
        kept = set(self.crops) | {c for c in crops if same and (folder / c).is_file()}
        for crop in crops - kept:
            _unlink(folder / crop)
        self.crops = sorted(kept)

    def holds(self) -> bool:
        """Whether the files were written from the same inputs and are all still there, each
        the file that writer left (crops: there; their names are their pixels)."""
        try:
            held = json.loads(self.path.read_text(encoding="utf-8"))
            folder = self.path.parent
            return (
                held["digest"] == self.digest
                and all(_identity(folder / f) == identity for f, identity in held["written"].items())
                and all((folder / f).is_file() for f in held["crops"])
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False

    def wrote(self, path: Path) -> Path:
        """Note `path` as written now (by this run: it was renamed into place just before)."""
        try:
            self.written[path.name] = _identity(path)
        except OSError:  # gone already (another run removed it): a stamp that never holds
            self.written[path.name] = []
        self._write_pending()
        return path

    def write(self) -> None:
        # the files are written; without their stamp the next run writes them again
        self._write({"digest": self.digest, "records": self.records, "written": self.written, "crops": self.crops})

    def _write(self, stamp: dict) -> bool:
        try:
            atomic_write(self.path, json.dumps(stamp))
            return True
        except OSError:
            return False

    def remove(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass  # none there, or none that could be written (a name too long)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass  # gone already, or not removable (no permission): it is left


def _is_crop(path: str) -> bool:
    """`images/<name>`, a crop as the content list names it."""
    folder, _, name = path.partition("/")
    return folder == "images" and _is_crop_name(name)


def _is_crop_name(name: str) -> bool:
    """A crop's file name as _crop makes it: its pixels' hash."""
    return len(name) == 36 and name.endswith(".jpg") and all(c in "0123456789abcdef" for c in name[:32])


def _identity(path: Path) -> list[int]:
    """Which file `path` is: another one renamed over it (another run's) has another inode."""
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _crops_of(item: dict) -> list[str]:
    path = item.get("img_path")
    return [path] if isinstance(path, str) and path else []


def _last_page(load_page: Callable[[str, int], Any]) -> Callable[[str, int], Any]:
    """load_page remembering the last page it loaded."""
    last: list = [None, None]

    def load(source: str, index: int) -> Any:
        if last[0] != (source, index):
            last[:] = [(source, index), load_page(source, index)]
        return last[1]

    return load


def content_list_items(record: dict, folder: Path, image=None, crops: dict[int, str] | None = None) -> list[dict]:
    """One page's content_list items, in reading order (page furniture in its place, as MinerU 4
    writes it), captions attached to their owners, list items gathered into their list and each
    run of references made one list. crops, where given, gets each image's and chart's crop (its
    img_path) by the block's position in the record's blocks, for the Markdown to link."""
    w, h, page_idx = record["image"]["width"], record["image"]["height"], record["page_index"]
    blocks = list(record["blocks"])
    numbers, tags = equation_tags([Block.from_dict(b) for b in blocks])  # each number a \tag of its equation
    for n, e, latex in tags:
        box = [f(blocks[e]["bbox"][i], blocks[n]["bbox"][i]) for i, f in enumerate((min, min, max, max))]
        blocks[e] = {**blocks[e], "latex": latex, "bbox": box}
    members = list_members(blocks)
    in_a_list = {m for ms in members.values() for m in ms}
    items: list[tuple[int, dict, dict]] = []  # (position in reading order, block, item)
    attached: list[tuple[int, dict, dict]] = []
    for pos, b in enumerate(blocks):
        if pos in in_a_list or pos in numbers or b["type"] in NOT_WRITTEN:
            continue
        if b["type"] == T.LIST and (pos in members or not b.get("text", "").strip()):
            if pos in members:  # a list with no item and no text of its own is nothing (as in MinerU)
                items.append((pos, b, _list_item(b, [blocks[m] for m in members[pos]], w, h, page_idx)))
            continue
        entry = (pos, b, _item(b, w, h, page_idx, folder, image))
        (attached if b["type"] in ATTACHED_TO else items).append(entry)
        if crops is not None and b["type"] in FIGURES and entry[2].get("img_path"):
            crops[pos] = entry[2]["img_path"]
    for pos, b, item in attached:
        kind = str(b["type"]).rpartition("_")[2]  # caption or footnote
        owners = [it for _, _, it in items if it["type"] in ATTACHED_TO[b["type"]]]
        if owners:  # e.g. image["image_caption"], chart["chart_footnote"]
            nearest = min(owners, key=lambda it: _distance(it["bbox"], item["bbox"]))
            nearest[f"{nearest['type']}_{kind}"].append(_text(b))
        else:  # an orphan caption stays a text item in its place
            items.append((pos, b, {"type": "text", "text": _text(b), "bbox": item["bbox"], "page_idx": page_idx}))
    return _reference_lists(sorted(items, key=lambda e: e[0]), w, h, page_idx)


def _reference_lists(entries: list[tuple[int, dict, dict]], w: int, h: int, page_idx: int) -> list[dict]:
    """The entries' items, each run of ref_text blocks one `list` item of sub_type ref_text (a
    lone one too), its bbox around them all and its list_items their references (_reference_texts;
    a run of only blank ones is nothing), as MinerU 4 writes a page's references (content_list
    v1: iter_page_units, unit_bbox)."""
    items: list[dict] = []
    for is_ref, run in groupby(entries, key=lambda e: e[1]["type"] == T.REF_TEXT):
        if not is_ref:
            items += [it for _, _, it in run]
            continue
        blocks = [b for _, b, _ in run]
        texts = _reference_texts(blocks)
        if texts:
            box = [f(b["bbox"][i] for b in blocks) for i, f in enumerate((min, min, max, max))]
            base = _base({"bbox": box}, w, h, page_idx)
            items.append({"type": "list", "sub_type": str(T.REF_TEXT), "list_items": texts, **base})
    return items


LIST_ITEM_TYPES = (T.TEXT, T.REF_TEXT)
LIST_ITEM_SHARE = 0.8  # MinerU's fix_list_blocks: a text block this much inside a list is its item


def list_members(blocks: list[dict]) -> dict[int, list[int]]:
    """The items of each list block on a page, by position in reading order, as MinerU's
    fix_list_blocks gathers them: the VLM's `list` is a container whose items are the text and
    ref_text blocks at least LIST_ITEM_SHARE inside it (each in the first such list). Lists
    with no item are left out."""
    lists = [pos for pos, b in enumerate(blocks) if b["type"] == T.LIST]
    members: dict[int, list[int]] = {}
    for pos, b in enumerate(blocks):
        if b["type"] not in LIST_ITEM_TYPES:
            continue
        owner = next((lp for lp in lists if covered(b["bbox"], blocks[lp]["bbox"]) >= LIST_ITEM_SHARE), None)
        if owner is not None:
            members.setdefault(owner, []).append(pos)
    return members


def _list_item(b: dict, entries: list[dict], w: int, h: int, page_idx: int) -> dict:
    """MinerU's list item: its items' texts (blank ones left out, as MinerU leaves them) and
    the type most of them have (text on a tie) as sub_type; the container's own text, if any,
    is not read (MinerU clears it)."""
    counts = Counter(str(e["type"]) for e in entries)
    sub_type = max(counts, key=lambda t: (counts[t], t == T.TEXT))
    texts = _item_texts(entries)
    return {"type": "list", "sub_type": sub_type, "list_items": texts, **_base(b, w, h, page_idx)}


def _reference_texts(blocks: list[dict]) -> list[str]:
    """A run of ref_text blocks' list_items: one a reference, blank ones left out. MinerU's layout
    boxes each reference (its VLM's and its pipeline's alike) and writes a list item a block; the
    embedded engine boxes a page's reference list whole and starts each reference on a line of its
    own, so a block read off the page (its source text_layer or ocr) gives an item a line."""
    texts = []
    for b in blocks:
        text = _text(b)
        texts += text.split("\n") if b.get("source") in LITERAL_SOURCES else [text]
    return [text for text in texts if text.strip()]


def _item_texts(blocks: list[dict]) -> list[str]:
    """A list item's list_items: its blocks' texts, blank ones left out (as MinerU leaves them)."""
    return [_text(b) for b in blocks if b.get("text", "").strip()]


def _text(b: dict) -> str:
    """A block's text as MinerU writes it (the VLM's inline formulas as $...$: markdown.prose_text)."""
    return prose_text(b["type"], b.get("text", ""), b.get("source"))


def _base(b: dict, w: int, h: int, page_idx: int) -> dict:
    # MinerU writes the VLM's own 0..1000 grid (int() of a box already on it); ours is in pixels,
    # rounded from that grid, and round() gives the grid back on a page over 1000 px wide, where
    # int() is one less for about half the coordinates.
    x1, y1, x2, y2 = b["bbox"]
    bbox = [round(x1 * 1000 / w), round(y1 * 1000 / h), round(x2 * 1000 / w), round(y2 * 1000 / h)]
    return {"bbox": bbox, "page_idx": page_idx}


def _item(b: dict, w: int, h: int, page_idx: int, folder: Path, image) -> dict:
    kind, text = b["type"], _text(b)
    base = _base(b, w, h, page_idx)
    if kind in CONTENT_LIST_EQUATION and b.get("source") in LITERAL_SOURCES and not b.get("latex"):
        # a formula read off the page as it stands (the text layer's or OCR's characters, not
        # LaTeX: `{`, `&`, `%` would be markup to a LaTeX renderer) is a text item, as the
        # Markdown gives it a paragraph
        return {"type": "text", "text": text, **base}
    if kind in CONTENT_LIST_EQUATION:
        latex = b.get("latex") or text
        return {"type": "equation", "text": f"$$\n{latex}\n$$", "text_format": "latex", **base}
    if kind in CONTENT_LIST_IMAGE:
        item: dict[str, Any] = {
            "type": "image",
            "img_path": _crop(image, b["bbox"], folder),
            "image_caption": [],
            "image_footnote": [],
        }
        if text.strip() and "sub_type" in b:  # MinerU 4 writes an analysed image's content
            item["content"] = embedded_formulas(text.strip())  # when there is one; OCR'd labels are not content
        return {**item, **_sub_type(b), **base}
    if kind == T.CHART:
        item = {
            "type": "chart",
            "img_path": _crop(image, b["bbox"], folder),
            "content": embedded_formulas(text.strip()),
            "chart_caption": [],
            "chart_footnote": [],
        }
        return {**item, **_sub_type(b), **base}
    if kind == T.TABLE:
        item = {"type": "table", "img_path": _crop(image, b["bbox"], folder)}
        # no table_body where the table has none (a VLM answer with no HTML, OCR with no cells),
        # as MinerU writes it (4.0.12's content_list/v1.py _render_table)
        if body := embedded_formulas(b.get("html") or cells_to_html(b.get("cells") or [])):
            item["table_body"] = body
        return {**item, "table_caption": [], "table_footnote": [], **base}
    if kind == T.INDEX:  # MinerU 4's index item: its entries as list_items, no text
        return {"type": "index", "list_items": index_entries(text), **base}
    if kind in CONTENT_LIST_CODE:
        return {"type": "code", "sub_type": kind, "code_body": text, "code_caption": [], "code_footnote": [], **base}
    if kind in CONTENT_LIST_TEXT:
        item = {"type": "text", "text": text, **base}
        if kind in HEADINGS:
            item["text_level"] = heading_level(kind, b.get("level"))
        return item
    return {"type": kind, "text": text, **base}  # header, footer, page_number, aside_text, ...


def _sub_type(b: dict) -> dict:
    sub_type = b.get("sub_type")
    return {"sub_type": sub_type.strip()} if isinstance(sub_type, str) and sub_type.strip() else {}


def cells_to_html(rows: list[list[str]]) -> str:
    """A grid of cell texts (the ocr engine's tables) as a plain HTML table."""
    if not rows:
        return ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c or ''))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{body}</table>"


def _crop(image, bbox, folder: Path) -> str:
    if image is None:
        return ""
    crop = image.crop(tuple(bbox))
    if crop.width < 1 or crop.height < 1:
        return ""
    name = hashlib.sha256(crop.tobytes()).hexdigest()[:32] + ".jpg"
    path = folder / "images" / name
    if not path.exists():  # the name is the crop's content: one that exists is this crop, whole
        path.parent.mkdir(exist_ok=True)
        # encoded in memory: Pillow writes a small JPEG to a file with one write() and takes a
        # short one (a disk with a few kB left) as success, which would leave a torn crop
        buf = io.BytesIO()
        crop.convert("RGB").save(buf, "JPEG", quality=90)
        atomic_write(path, buf.getvalue())
    return f"images/{name}"


def _distance(a, b) -> float:
    ax, ay = (a[0] + a[2]) / 2, (a[1] + a[3]) / 2
    bx, by = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
    return (ax - bx) ** 2 + (ay - by) ** 2


def atomic_write(path: Path, data: str | bytes) -> Path:
    """Replace `path` whole or not at all: a full disk leaves the earlier file and no temporary
    (Python's file objects write on after a short write, so the error is raised)."""
    fh, tmp = open_temporary_beside(path)
    try:
        with fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


STALE_TEMP_S = 3600  # a temporary file of ours this old belongs to a write that was killed


def open_temporary_beside(path: Path) -> tuple[BinaryIO, Path]:
    """A new temporary file in `path`'s folder (the rename onto `path` stays atomic), opened for
    writing, and its name. The name is this writer's alone: two runs writing one --out-dir (other
    journals, one document) each write and rename their own, where a shared fixed name was
    truncated or removed under the other. Created as open() creates a file (the umask's mode,
    which the rename keeps), never over an existing one; the name is cut to 200 bytes to stay
    within NAME_MAX. Such files of this name older than STALE_TEMP_S are removed: a run killed
    between a write and its rename leaves its file behind, and a cron job killed often would
    pile them up (a write never takes that long)."""
    prefix = "." + os.fsdecode(os.fsencode(path.name)[:200]) + "."
    while True:
        tmp = path.with_name(f"{prefix}{secrets.token_hex(6)}.tmp")
        try:
            handle = open(tmp, "xb")
            break
        except FileExistsError:  # 48 random bits taken already: draw again
            continue
    _remove_stale(path.parent, prefix)
    return handle, tmp


def _remove_stale(folder: Path, prefix: str) -> None:
    cutoff = time.time() - STALE_TEMP_S
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        try:
            if os.stat(folder / name).st_mtime < cutoff:
                os.unlink(folder / name)
        except OSError:
            continue  # gone already, or not ours to remove


DOCUMENT_FILES = ("{stem}.md", "{stem}_content_list.json", "{stem}_layout.pdf")  # what --format writes


def is_output(out_dir: str, path: str) -> bool:
    """Whether a file found among the inputs is one --format wrote under `out_dir` (an absolute
    path ending in a separator) that could be taken for an input: a crop under images/ or a layout
    PDF. Only those are left out, so an --out-dir that is the folder being parsed (or above it)
    still has its documents parsed."""
    if not path.startswith(out_dir):
        return False
    parts = PurePosixPath(path[len(out_dir) :].replace(os.sep, "/")).parts
    name, folder = parts[-1], parts[-2] if len(parts) > 1 else ""
    if folder == "images":
        return _is_crop_name(name)
    stem = name.removesuffix("_layout.pdf")
    return stem != name and folder.startswith(stem + "_")  # <stem>_layout.pdf in the <stem>_<ext> folder


def remove_documents(out_dir: Path, sources: list[str]) -> list[Path]:
    """Remove the per-document files of documents that have no ok page now (every page failed,
    or the file could not be read): files an earlier run wrote from the document's earlier
    content must not stand for it. Crops under images/ go where the stamp names them (a folder
    name can be shared with another document's, `a.pdf` and a folder `a_pdf`, so nothing
    else there is removed)."""
    removed = []
    for source in sources:
        folder = document_dir(out_dir, source)
        with document_lock(folder):
            removed += _remove_document(folder, PurePosixPath(source).stem)
    return removed


def _remove_document(folder: Path, stem: str) -> list[Path]:
    removed = []
    stamp = _Stamp.at(folder, stem)
    earlier = stamp.earlier()
    stamp.remove()  # first: no stamp outlives its files
    for crop in earlier["crops"] if earlier else ():
        if isinstance(crop, str) and _is_crop(crop):
            _unlink(folder / crop)
    for pattern in DOCUMENT_FILES:
        path = folder / pattern.format(stem=stem)
        try:
            path.unlink()
        except OSError:
            continue  # none there (or one that cannot be removed: a name too long, no permission)
        removed.append(path)
    return removed
