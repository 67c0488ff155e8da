"""What a run tells the person or the cron job: progress, events, the closing summary."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table


@dataclass
class Summary:
    pages: int = 0          # input pages in this run
    ok: int = 0             # parsed now
    failed: int = 0         # failed now, or failed before and not retried
    skipped: int = 0        # records with status skipped (e.g. symlink loop)
    resumed: int = 0        # already done in the journal: not redone
    cached: int = 0         # served by the result cache
    interrupted: bool = False
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (page id, message)

    @property
    def pages_per_min(self) -> float:
        worked = self.ok + self.failed
        return 60.0 * worked / self.seconds if self.seconds > 0 and worked else 0.0

    def as_dict(self) -> dict:
        return {"pages": self.pages, "ok": self.ok, "failed": self.failed, "skipped": self.skipped,
                "resumed": self.resumed, "cached": self.cached, "interrupted": self.interrupted,
                "seconds": round(self.seconds, 3), "pages_per_min": round(self.pages_per_min, 2)}


class Reporter:
    """Plain reporter: messages on stderr, no progress bar (non-TTY, or --quiet)."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.console = Console(stderr=True, highlight=False)

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message)

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/] {message}")

    def start(self, total: int) -> None:
        pass

    def page(self, record: dict, resumed: bool = False) -> None:
        pass

    def finish(self, summary: Summary, out: str) -> None:
        if self.quiet:
            if summary.failed:
                self.console.print(f"{summary.failed} of {summary.pages} pages failed; see {out}")
            return
        table = Table(title=f"mineru parse -> {out}", show_header=False)
        for key, value in [("pages", summary.pages), ("ok (parsed now)", summary.ok),
                           ("resumed (already done)", summary.resumed), ("from cache", summary.cached),
                           ("failed", summary.failed), ("skipped", summary.skipped),
                           ("time", f"{summary.seconds:.1f} s"),
                           ("pages/min", f"{summary.pages_per_min:.1f}")]:
            table.add_row(key, str(value))
        self.console.print(table)
        for pid, msg in summary.failures[:20]:
            self.console.print(f"[red]failed[/] {pid}: {msg}")
        if len(summary.failures) > 20:
            self.console.print(f"... and {len(summary.failures) - 20} more failures (see {out})")
        if summary.interrupted:
            self.console.print("[yellow]interrupted[/]: re-run the same command to resume")


class ProgressReporter(Reporter):
    """Rich progress bar on a TTY: pages done/total, pages/s, ETA, failures."""

    def __init__(self):
        super().__init__(quiet=False)
        self.progress = Progress(TextColumn("[bold]parsing"), BarColumn(), MofNCompleteColumn(),
                                 TaskProgressColumn(), TextColumn("{task.fields[rate]}"),
                                 TextColumn("[red]{task.fields[failed]}"), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=self.console, transient=False)
        self.task = None
        self.failed = 0
        self.worked = 0
        self.t0 = time.monotonic()

    def info(self, message: str) -> None:
        self.console.print(message)

    def start(self, total: int) -> None:
        self.t0 = time.monotonic()
        self.progress.start()
        self.task = self.progress.add_task("pages", total=total, rate="", failed="")

    def page(self, record: dict, resumed: bool = False) -> None:
        if not resumed:
            self.worked += 1
        if record["status"] in ("failed", "timeout"):
            self.failed += 1
        dt = time.monotonic() - self.t0
        rate = f"{self.worked / dt:.2f} pages/s" if self.worked and dt > 0 else ""
        failed = f"{self.failed} failed" if self.failed else ""
        self.progress.update(self.task, advance=1, rate=rate, failed=failed)

    def finish(self, summary: Summary, out: str) -> None:
        if self.task is not None:
            self.progress.stop()
        super().finish(summary, out)


class JsonReporter(Reporter):
    """--log-json: one JSON object per event on stderr, for cron and log shippers."""

    def __init__(self):
        super().__init__(quiet=True)

    def _emit(self, event: str, **fields) -> None:
        fields = {"event": event, "time": round(time.time(), 3), **fields}
        sys.stderr.write(json.dumps(fields, ensure_ascii=False) + "\n")
        sys.stderr.flush()

    def info(self, message: str) -> None:
        self._emit("info", message=message)

    def warn(self, message: str) -> None:
        self._emit("warning", message=message)

    def start(self, total: int) -> None:
        self._emit("start", pages=total)

    def page(self, record: dict, resumed: bool = False) -> None:
        self._emit("page", id=record["id"], status=record["status"], resumed=resumed,
                   error=record.get("error"), seconds=record.get("timings", {}).get("total"))

    def finish(self, summary: Summary, out: str) -> None:
        self._emit("summary", out=out, **summary.as_dict())


def make_reporter(quiet: bool, log_json: bool) -> Reporter:
    if log_json:
        return JsonReporter()
    if not quiet and sys.stderr.isatty():
        return ProgressReporter()
    return Reporter(quiet=quiet)
