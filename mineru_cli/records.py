"""The page record: one JSON line per input page, and the fingerprint that keys resume."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from importlib import resources

SCHEMA_VERSION = 1


def load_schema() -> dict:
    """The published JSON Schema of a record (mineru_cli/schema/record.schema.json)."""
    text = resources.files("mineru_cli").joinpath("schema/record.schema.json").read_text("utf-8")
    return json.loads(text)


def page_id(source: str, page_index: int) -> str:
    return f"{source}#{page_index}"


def split_page_id(pid: str) -> tuple[str, int | None]:
    """page_id's inverse: (source, page index); None for an id without one."""
    source, _, number = pid.rpartition("#")
    return (source, int(number)) if number.isdigit() else (pid, None)


def fingerprint(engine_info: dict, load_options: dict) -> str:
    """Hash of everything that changes a page's answer: engine name/version/model identity,
    engine options and the page loading options (DPI, caps). Page selection is not in it."""
    blob = json.dumps({"engine": engine_info, "load": load_options}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def make_record(*, source: str, page_index: int, page_count: int | None, status: str,
                engine_info: dict, fingerprint: str, source_sha256: str | None = None,
                error: dict | None = None, image: dict | None = None, cache: dict | None = None,
                blocks: list[dict] | None = None, markdown: str = "", warnings: list[str] | None = None,
                timings: dict[str, float] | None = None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "id": page_id(source, page_index),
        "source": source,
        "page_index": page_index,
        "page_count": page_count,
        "status": status,
        "error": error,
        "source_sha256": source_sha256,
        "image": image,
        "engine": engine_info,
        "fingerprint": fingerprint,
        "cache": cache,
        "blocks": blocks or [],
        "markdown": markdown,
        "warnings": warnings or [],
        "timings": {k: round(v, 4) for k, v in (timings or {}).items()},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
