"""`mineru review RESULTS.jsonl --html report.html`: one static HTML page to look at a run.

The page is one self-contained file (no server, no network: its Content-Security-Policy allows
nothing but inline scripts, styles and data: images, so it works from file://): the run's
summary (pages by status, per engine and mode, time, cache hits), a table of the pages that are
not ok with their error's kind, stage and message, and a viewer: each page's thumbnail with its
boxes overlaid (overlay.COLOURS), clicking a box shows its text, HTML or LaTeX; filters by status,
block type, source and document.

Thumbnails are rendered again from the sources (found under `root`, the folder the records'
`source` paths are relative to; a file whose sha256 is not the record's is left out, as it is
not the page that was parsed), downscaled to THUMB_WIDTH and embedded as JPEG. Each image sits
in its own inert <script> element, decoded by the page only when its card is near the viewport,
and cards are made a few dozen at a time as the list scrolls, so a 10,000-page run opens about
as fast as a small one (docs/benchmarks.md has the sizes and load times).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from .config import LoadOptions
from .journal import read_records
from .overlay import COLOURS, OTHER, block_source, hex_colour
from .streams import is_stream
from .writers import atomic_write

THUMB_WIDTH = 360  # px: a card's width on a laptop screen; ~12-18 KB a PDF page (base64 JPEG)
THUMB_QUALITY = 60
THUMB_DPI = 45  # PDFs are rendered at this DPI (an A4 page: 372 px wide), then downscaled
STATUSES = ("ok", "failed", "timeout", "skipped")


@dataclass
class ReviewStats:
    pages: int
    images: int  # thumbnails embedded
    missing: int  # pages with an image that could not be embedded (source gone, changed or unreadable)
    bytes: int


def write_review(
    records_path: Path,
    out: Path,
    root: Path | None = None,
    images: bool = True,
    log: Callable[[str], None] = lambda _m: None,
) -> ReviewStats:
    """Write the review page of the journal `records_path` to `out`."""
    records = sorted(read_records(records_path), key=lambda r: (r["source"], r["page_index"]))
    root = Path(root) if root is not None else Path.cwd()
    thumbs = _thumbnails(records, root, log) if images else {}
    page = render(records, thumbs, title=str(records_path)).encode("utf-8")
    if is_stream(out):  # a device or pipe (/dev/stdout): written into as it is
        with open(out, "wb") as fh:
            fh.write(page)
    else:  # whole or not at all, through a temporary of this run's own; a link is followed (it stays)
        atomic_write(Path(os.path.realpath(out)), page)
    wanted = sum(1 for r in records if r.get("image") and r.get("page_count")) if images else 0
    return ReviewStats(len(records), len(thumbs), wanted - len(thumbs), len(page))


def render(records: list[dict[str, Any]], thumbs: dict[str, str], title: str) -> str:
    """The page's HTML for `records` (in the order shown) and their thumbnails (page id ->
    base64 JPEG)."""
    docs: list[str] = []
    doc_index: dict[str, int] = {}
    pages: list[dict[str, Any]] = []
    image_tags: list[str] = []
    types: set[str] = set()
    sources: set[str] = set()
    for rec in records:
        if rec["source"] not in doc_index:
            doc_index[rec["source"]] = len(docs)
            docs.append(rec["source"])
        entry = _page(rec, doc_index[rec["source"]])
        if rec["id"] in thumbs:
            entry["img"] = len(image_tags)
            image_tags.append(f'<script type="text/plain" id="img-{len(image_tags)}">{thumbs[rec["id"]]}</script>')
        types.update(b["t"] for b in entry["b"])
        sources.update(b["o"] for b in entry["b"])
        pages.append(entry)
    data = {
        "title": title,
        "summary": summarise(records),
        "pages": pages,
        "docs": docs,
        "statuses": [s for s in STATUSES if any(r["status"] == s for r in records)],
        "types": sorted(types),
        "sources": sorted(sources),
        "colours": {**{t: hex_colour(t) for t in COLOURS}, "": "#%02x%02x%02x" % OTHER},
    }
    template = resources.files("mineru_cli").joinpath("assets/review.html").read_text(encoding="utf-8")
    return (
        template.replace("__TITLE__", html.escape(shown(title)))
        .replace("__IMAGES__", "\n".join(image_tags))
        .replace("__DATA__", _script_json(data))
    )


def _page(rec: dict[str, Any], doc: int) -> dict[str, Any]:
    """One page as the viewer reads it (short keys: a 10,000-page run repeats them a lot)."""
    image = rec.get("image") or {}
    entry: dict[str, Any] = {"id": rec["id"], "d": doc, "p": rec["page_index"], "s": rec["status"], "b": []}
    if image:
        entry["w"], entry["h"] = image["width"], image["height"]
    error = rec.get("error")
    if error:
        entry["e"] = [error.get("kind", ""), error.get("stage", ""), error.get("message", "")]
    for b in rec.get("blocks") or []:
        block = {"t": str(b["type"]), "bb": [int(v) for v in b["bbox"]], "o": block_source(b, rec)}
        if b.get("text"):
            block["x"] = b["text"]
        if b.get("html"):
            block["h"] = b["html"]
        if b.get("latex"):
            block["l"] = b["latex"]
        if b.get("score") is not None:
            block["sc"] = b["score"]
        entry["b"].append(block)
    return entry


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary cards (label, value) and the per engine and mode rows."""
    status = Counter(r["status"] for r in records)
    cache = Counter((r.get("cache") or {}).get("status", "none") for r in records)
    seconds = sum(float((r.get("timings") or {}).get("total", 0.0)) for r in records)
    created = sorted(r["created"] for r in records if r.get("created"))
    documents = len({r["source"] for r in records})
    cards: list[tuple[str, str]] = [("pages", str(len(records))), ("documents", str(documents))]
    cards += [(s, str(status.get(s, 0))) for s in STATUSES]
    cards.append(("page seconds (sum)", f"{seconds:.1f}"))
    if created:
        cards.append(("records written", f"{created[0]} .. {created[-1]}"))
    hits = sum(n for s, n in cache.items() if s in ("hit", "near-hit"))
    cards.append(("cache hits", f"{hits} of {len(records)}"))
    cards += [(f"cache {s}", str(n)) for s, n in sorted(cache.items())]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        engine = r.get("engine") or {}
        mode = (engine.get("options") or {}).get("mode") or engine.get("name") or ""
        groups[(engine.get("name") or "", mode)].append(r)
    engines = []
    for (name, mode), group in sorted(groups.items()):
        counts = Counter(r["status"] for r in group)
        engine_s = [float((r.get("timings") or {}).get("engine", 0.0)) for r in group if r["status"] == "ok"]
        per_page = f"{sum(engine_s) / len(engine_s):.2f}" if engine_s else ""
        engines.append([name, mode, str(len(group)), *(str(counts.get(s, 0)) for s in STATUSES), per_page])
    return {"cards": cards, "engines": engines}


def _thumbnails(records: list[dict[str, Any]], root: Path, log: Callable[[str], None]) -> dict[str, str]:
    """page id -> base64 JPEG thumbnail, for every page whose source is under root unchanged.

    A source that is gone or changed loses its pages' images (one line each); a page that fails
    to render loses only its own."""
    from .hashing import file_sha256
    from .inputs import SourceFile, open_document

    out: dict[str, str] = {}
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("image") and r.get("page_count"):
            by_source[r["source"]].append(r)
    # every GIF frame may be a page (--gif-frames all); a run that took only the first has no
    # record of the others, so opening them all costs nothing
    load = LoadOptions(dpi=THUMB_DPI, gif_frames="all")
    found = 0
    for source, recs in by_source.items():
        path = root / source
        try:
            if file_sha256(path) != recs[0].get("source_sha256"):
                log(f"{path}: changed since it was parsed: its pages have no image")
                continue
        except OSError:
            continue  # not under root: counted below
        found += 1
        try:
            with open_document(SourceFile(path, source, "pdf"), load) as doc:  # opened by content, not kind
                for r in recs:
                    try:
                        out[r["id"]] = _jpeg(doc.page(r["page_index"]).image)
                    except Exception as exc:  # noqa: BLE001 - a page that cannot be rendered again loses its image
                        log(f"{r['id']}: no image ({type(exc).__name__}: {exc})")
        except Exception as exc:  # noqa: BLE001 - a source that cannot be opened again loses its images
            log(f"{path}: no images ({type(exc).__name__}: {exc})")
    if len(by_source) > found:
        log(
            f"{len(by_source) - found} of {len(by_source)} source file(s) not found under {root}: their pages have "
            "no image (--root is the folder the records' source paths are relative to: the one given to mineru parse)"
        )
    return out


def _jpeg(image) -> str:
    image = image.convert("RGB")
    if image.width > THUMB_WIDTH:
        image = image.resize((THUMB_WIDTH, max(1, round(image.height * THUMB_WIDTH / image.width))))
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=THUMB_QUALITY)
    return base64.b64encode(buf.getvalue()).decode("ascii")


_SURROGATE = re.compile("[\ud800-\udfff]")


def shown(text: str) -> str:
    """`text` as a UTF-8 page can hold it. A file name that is not UTF-8 reaches the records as
    lone surrogates (os.fsdecode's surrogateescape), which UTF-8 cannot encode: its bytes are
    shown as `\\xff`, as `ls -b` shows them (any other lone surrogate as `\\udXXX`)."""
    return _SURROGATE.sub(_escaped_surrogate, text)


def _escaped_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' that could close it, and no lone
    surrogate (shown(): each becomes its escape's text, so the page is valid UTF-8)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = _SURROGATE.sub(lambda m: json.dumps(shown(m.group()))[1:-1], text)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
