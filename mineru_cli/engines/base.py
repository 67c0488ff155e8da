"""What every engine offers the runner: the Engine protocol and its result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, TypeVar

from PIL import Image

from ..core.blocks import Block
from ..text_layer import TextLayer


@dataclass
class EngineResult:
    blocks: list[Block]
    markdown: str
    timings: dict[str, float] = field(default_factory=dict)  # seconds per engine step
    counts: dict[str, int] = field(default_factory=dict)  # e.g. retries, blocks by source
    warnings: list[str] = field(default_factory=list)


class Engine(Protocol):
    name: str  # "ocr" | "vlm"
    version: str  # bump when the same inputs would give different output

    def identity(self) -> dict:
        """Model identity for the record: file names and sha256 of the weights in use."""

    def options(self) -> dict:
        """Options that change the output (go into the resume/cache fingerprint)."""

    def warm_up(self) -> None:
        """Load the models now rather than on the first page (pipeline workers call this
        before they take pages, so model loading never counts against a page's timeout)."""

    def parse(self, image: Image.Image, text: TextLayer | None = None) -> EngineResult:
        """Parse one normalised 8-bit RGB page image; a failure raises. `text` is the page's
        text layer (PDF pages; in the image's pixels): a trusted one is read instead of OCR."""

    def parse_batch(
        self, images: list[Image.Image], texts: list[TextLayer | None] | None = None
    ) -> list[EngineResult | Exception]:
        """Parse several pages together; one entry per image, in input order (`texts`: each
        page's text layer, as for parse).

        An entry is the page's EngineResult, or the Exception that page raised: a page that
        fails never costs the others (the caller turns it into that page's failed record).
        Results equal parse() of each page alone: batching changes speed, never output.
        Nothing is raised for a page's own failure; only a KeyboardInterrupt-style
        BaseException escapes. parse(image, text) behaves as parse_batch([image], [text])[0], raised.
        """


_Page = TypeVar("_Page")
_Result = TypeVar("_Result")


def parse_each(parse: Callable[[_Page], _Result], images: list[_Page]) -> list[_Result | Exception]:
    """parse_batch for an engine without batching (and the VLM engine's per-page fallback):
    each page parsed alone, its exception kept in its place. Also used for any per-page step
    (reading pixels, an OCR pass): `parse` maps a page to its result, whatever their types."""
    out: list[_Result | Exception] = []
    for image in images:
        try:
            out.append(parse(image))
        except Exception as exc:  # noqa: BLE001 - the page boundary: the others go on
            out.append(exc)
    return out
