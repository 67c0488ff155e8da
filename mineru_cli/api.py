"""The Python API: `parse()` yields each page's record as it is settled.

    import mineru_cli
    for record in mineru_cli.parse(["docs/"], out="results.jsonl", engine="ocr"):
        print(record.id, record.status, len(record.blocks))

The options are RunConfig's fields (strings for the choices are fine), plus `dpi` and
`gif_frames`; their defaults are the CLI's. With `out`, the run keeps the CLI's journal:
every record is written as it finishes, pages already done are not redone (their records
are yielded from the journal), the journal is compacted at the end. Without `out`, nothing is
written and nothing is resumed. The result cache is on by default, as in the CLI (cache=False
turns it off). Bad pages come back as records with status failed; set-up problems raise
SetupError. Breaking out of the loop stops the workers; what was journaled stays.
"""

from __future__ import annotations

from os import PathLike
from typing import Any, Iterable, Iterator, Union

from .config import RunConfig
from .core.record import PageRecord
from .report import Reporter
from .runner import Parser

PathArg = Union[str, "PathLike[str]"]


def parse(
    paths: PathArg | Iterable[PathArg], out: PathArg | None = None, *, reporter: Reporter | None = None, **options: Any
) -> Iterator[PageRecord]:
    """Parse every page under `paths`, yielding one PageRecord per page (resumed pages first,
    then the others as they finish). `reporter`: where messages go (default: silent, only
    warnings on stderr)."""
    inputs = [paths] if isinstance(paths, (str, PathLike)) else list(paths)
    config = RunConfig.from_options(inputs, out=out, **options)
    yield from Parser(config, reporter).records()


__all__ = ["Parser", "PageRecord", "RunConfig", "parse"]
