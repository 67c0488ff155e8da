"""The `mineru` command: `python -m mineru_cli` and the console script both start here.

SIGTERM is taken as Ctrl-C from the first line on, before the CLI's imports (typer, rich, the
cache's OpenCV: most of a second on a loaded machine): a run stopped while it starts exits 130,
the code of an interrupted run, as one stopped later does. Until `mineru parse` puts its own
handler in place nothing is parsed, and the run's journal is closed as Ctrl-C closes it; that
handler stops the run gracefully and puts this one back when the run ends."""

from __future__ import annotations

import signal
import sys

from .core.errors import EXIT_INTERRUPTED


def main() -> None:
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # one ignored by our parent stays so
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        from .cli import main as run
    except KeyboardInterrupt:  # while importing; from here on typer ends a command stopped so with 130
        sys.exit(EXIT_INTERRUPTED)
    run()


if __name__ == "__main__":
    main()
