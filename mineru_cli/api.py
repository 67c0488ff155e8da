"""The Python API: `parse()` yields each page's record as it is settled.

    import mineru_cli

    if __name__ == "__main__":  # worker processes are spawned and import this script again
        for record in mineru_cli.parse(["docs/"], out="results.jsonl", engine="ocr"):
            print(record.id, record.status, len(record.blocks))

The options are RunConfig's fields (strings for the choices are fine), plus `dpi`,
`gif_frames` and `text_layer`; their defaults are the CLI's. With `out`, the run keeps the
CLI's journal: every record is written as it finishes, pages already done are not redone (their records
are yielded from the journal), the journal is compacted at the end. Without `out`, no journal
is written and nothing is resumed; the result cache is still on by default, as in the CLI
(cache=False turns it off). Bad pages come back as records with status failed; set-up
problems (a bad option, a missing input or model, a mode the engine cannot run, an `out` that
is not a journal) raise SetupError when parse() is called, before any record; a full disk under
`out` raises OutputError. Breaking out of the loop stops the workers; what was journaled stays.
"""

from __future__ import annotations

import atexit
import weakref
from os import PathLike
from typing import Any, Generator, Iterable, Union

from .config import RunConfig
from .core.errors import SetupError
from .core.record import PageRecord
from .pipeline.pool import in_worker
from .report import Reporter
from .runner import Parser

PathArg = Union[str, "PathLike[str]"]


def parse(
    paths: PathArg | Iterable[PathArg], out: PathArg | None = None, *, reporter: Reporter | None = None, **options: Any
) -> Generator[PageRecord, None, None]:
    """Parse every page under `paths`, yielding one PageRecord per page (resumed pages first,
    then the others as they finish). `reporter`: where messages go (default: silent, only
    warnings on stderr). The options, the paths and the engine are checked and the journal opened
    (and locked) at once, so a SetupError raises from this call; the work starts at the first
    record asked for."""
    if in_worker():
        raise SetupError(
            "mineru_cli.parse() was called while a worker process imported your script: call it under "
            '`if __name__ == "__main__":` (worker processes are spawned and import the script again)'
        )
    config = RunConfig.from_options(paths, out=out, **options)
    records = Parser(config, reporter).records()
    _UNFINISHED.add(records)
    return records


# The runs whose records are still referenced: one exit hook for all of them (a hook per call
# would pile up for the life of a process that calls parse() again and again).
_UNFINISHED: weakref.WeakSet[Generator[PageRecord, None, None]] = weakref.WeakSet()


@atexit.register
def _close_unfinished() -> None:
    """Closed before the interpreter tears itself down, so a loop left unfinished still
    compacts its journal and stops its workers."""
    for records in list(_UNFINISHED):
        records.close()


__all__ = ["Parser", "PageRecord", "RunConfig", "parse"]
