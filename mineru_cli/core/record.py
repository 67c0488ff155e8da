"""The page record: one JSON line per input page, and the fingerprint that keys resume.

`PageRecord` is the typed form; `as_dict()` is exactly the JSON line (the shipped
schema/record.schema.json describes it, and a test holds the two together).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from typing import Any

from .blocks import Block
from .errors import ErrorInfo
from .words import CacheStatus, Status

SCHEMA_VERSION = 1


def load_schema() -> dict[str, Any]:
    """The published JSON Schema of a record (mineru_cli/schema/record.schema.json)."""
    text = resources.files("mineru_cli").joinpath("schema/record.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def page_id(source: str, page_index: int) -> str:
    return f"{source}#{page_index}"


def split_page_id(pid: str) -> tuple[str, int | None]:
    """page_id's inverse: (source, page index); None for an id without one."""
    source, _, number = pid.rpartition("#")
    return (source, int(number)) if number.isdigit() else (pid, None)


def fingerprint(engine_info: dict[str, Any], load_options: dict[str, Any]) -> str:
    """Hash of everything that changes a page's answer: engine name/version/model identity,
    engine options and the page loading options (DPI, caps). Page selection is not in it."""
    blob = json.dumps({"engine": engine_info, "load": load_options}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ImageInfo:
    """The normalised page image the engine saw, and how it was made from the original."""

    width: int
    height: int
    sha256: str  # of the normalised RGB pixels
    original_width: int
    original_height: int
    scale: float  # normalised / original, at most 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "height": self.height,
            "sha256": self.sha256,
            "original_width": self.original_width,
            "original_height": self.original_height,
            "scale": self.scale,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ImageInfo:
        return cls(
            int(d["width"]),
            int(d["height"]),
            str(d["sha256"]),
            int(d["original_width"]),
            int(d["original_height"]),
            float(d["scale"]),
        )


@dataclass(frozen=True)
class CacheInfo:
    """How the result cache answered; `source` is the page id a near-hit's result came from."""

    status: CacheStatus
    source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status.value}
        if self.source is not None:
            d["from"] = self.source
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CacheInfo:
        return cls(CacheStatus(d["status"]), d.get("from"))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class PageRecord:
    """The result for one input page. `id` is source + '#' + page_index."""

    source: str
    page_index: int
    page_count: int | None
    status: Status
    engine: dict[str, Any]  # name, version, package, model identity, options
    fingerprint: str
    error: ErrorInfo | None = None
    source_sha256: str | None = None
    image: ImageInfo | None = None
    # PDF pages: whether the page's own text was used and, if not, why (text_layer.TextLayer.info)
    text_layer: dict[str, Any] | None = None
    cache: CacheInfo | None = None
    blocks: list[Block] = field(default_factory=list)
    markdown: str = ""
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    created: str = field(default_factory=_now)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # as the JSON line holds them, so a record equals itself read back from the journal
        self.timings = {k: round(v, 4) for k, v in self.timings.items()}

    @property
    def id(self) -> str:
        return page_id(self.source, self.page_index)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def as_dict(self) -> dict[str, Any]:
        """The record's JSON line, keys in schema order."""
        return {
            "schema_version": self.schema_version,
            "id": self.id,
            "source": self.source,
            "page_index": self.page_index,
            "page_count": self.page_count,
            "status": self.status.value,
            "error": None if self.error is None else self.error.as_dict(),
            "source_sha256": self.source_sha256,
            "image": None if self.image is None else self.image.as_dict(),
            "text_layer": self.text_layer,
            "engine": self.engine,
            "fingerprint": self.fingerprint,
            "cache": None if self.cache is None else self.cache.as_dict(),
            "blocks": [b.as_dict() for b in self.blocks],
            "markdown": self.markdown,
            "warnings": list(self.warnings),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PageRecord:
        """A JSON line (as written by as_dict) back as a PageRecord."""
        return cls(
            source=d["source"],
            page_index=int(d["page_index"]),
            page_count=d.get("page_count"),
            status=Status(d["status"]),
            engine=d.get("engine") or {},
            fingerprint=d.get("fingerprint", ""),
            error=None if d.get("error") is None else ErrorInfo.from_dict(d["error"]),
            source_sha256=d.get("source_sha256"),
            image=None if d.get("image") is None else ImageInfo.from_dict(d["image"]),
            text_layer=d.get("text_layer"),
            cache=None if d.get("cache") is None else CacheInfo.from_dict(d["cache"]),
            blocks=[Block.from_dict(b) for b in d.get("blocks") or []],
            markdown=d.get("markdown", ""),
            warnings=list(d.get("warnings") or []),
            timings=dict(d.get("timings") or {}),
            created=d.get("created", ""),
            schema_version=int(d.get("schema_version", SCHEMA_VERSION)),
        )
