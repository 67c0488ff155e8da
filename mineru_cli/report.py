"""What a run tells the person or the cron job: progress, events, the closing summary."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

# control characters, and the characters that end a line or turn text round for editors and log
# viewers that read Unicode's rules (U+2028/U+2029, the bidirectional marks and overrides)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """`text` as one line of the console: control characters (a file name may hold a newline,
    which would start a false line for a cron job's grep, or an escape sequence) and Unicode's
    line separators and direction marks written as Python writes them in a string, and Rich's
    markup ([brackets] in a path) escaped."""
    return escape(_CONTROL.sub(lambda m: repr(m.group())[1:-1], text))


# Seconds between `heartbeat` events with --log-json (pipeline state: busy workers, queue
# depth, pages/s, worker RSS). MINERU_HEARTBEAT_S overrides it (tests use a short one).
HEARTBEAT_S = 5.0


class StageTimes:
    """Busy seconds per pipeline stage, summed in the main process from each parsed page's
    timings: render (`load`), cache (lookup), engine (the page's share of its batch's engine
    call), store (cache store), and the engine's own steps as it reports them (`engine.layout`,
    `engine.ocr`, `engine.content`, ...; they may nest, e.g. ocr_det inside ocr, or overlap, e.g.
    the vlm engine's background OCR). A share is busy seconds / (wall seconds x workers): how
    much of the workers' time the stage took."""

    STAGES = (("load", "render"), ("cache", "cache"), ("engine", "engine"), ("store", "store"))

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.pages = 0

    def add(self, timings: dict) -> None:
        self.pages += 1
        for key, name in self.STAGES:
            if key in timings:
                self.seconds[name] = self.seconds.get(name, 0.0) + float(timings[key])
        for key, value in timings.items():
            if key.startswith("engine."):
                self.seconds[key] = self.seconds.get(key, 0.0) + float(value)

    def _ordered(self) -> list[tuple[str, float]]:
        main = [(name, self.seconds[name]) for _, name in self.STAGES if name in self.seconds]
        return main + sorted((k, v) for k, v in self.seconds.items() if k.startswith("engine."))

    def shares(self, wall: float, workers: int) -> dict[str, float]:
        room = max(1e-9, wall * max(1, workers))
        return {name: round(s / room, 3) for name, s in self._ordered()}

    def as_dict(self, wall: float, workers: int) -> dict:
        room = max(1e-9, wall * max(1, workers))
        return {name: {"seconds": round(s, 3), "share": round(s / room, 3)} for name, s in self._ordered()}


@dataclass
class Summary:
    pages: int = 0  # input pages in this run
    ok: int = 0  # parsed now
    failed: int = 0  # failed now, or failed before and not retried
    skipped: int = 0  # records with status skipped (e.g. symlink loop)
    resumed: int = 0  # already done in the journal: not redone
    cached: int = 0  # served by the result cache
    interrupted: bool = False
    unfinished: int = 0  # after an interrupt: pages not parsed (in flight or never started)
    pages_at_least: bool = False  # stopped before every file was found and counted: pages is a floor
    restarts: int = 0  # workers replaced after a crash or timeout
    recycled: int = 0  # workers replaced for memory (--max-worker-rss)
    retried: int = 0  # pages retried alone after their batch's worker died or hung
    plan: dict | None = None  # the CPU plan used (workers x threads, page batch, mode)
    stages: dict | None = None  # StageTimes.as_dict: busy seconds and share per stage
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (page id, message)
    counts: dict[str, int] = field(default_factory=dict)  # the engine's counts, summed (retries, ...)
    nodes: dict[str, int] = field(default_factory=dict)  # pages the workers answered, per node

    @property
    def pages_per_min(self) -> float:
        worked = self.ok + self.failed
        return 60.0 * worked / self.seconds if self.seconds > 0 and worked else 0.0

    @property
    def pages_per_s(self) -> float:
        return self.pages_per_min / 60.0

    def as_dict(self) -> dict:
        return {
            "pages": self.pages,
            "ok": self.ok,
            "failed": self.failed,
            "skipped": self.skipped,
            "resumed": self.resumed,
            "cached": self.cached,
            "interrupted": self.interrupted,
            "unfinished": self.unfinished,
            "pages_at_least": self.pages_at_least,
            "restarts": self.restarts,
            "recycled": self.recycled,
            "retried": self.retried,
            "plan": self.plan,
            "seconds": round(self.seconds, 3),
            "pages_per_min": round(self.pages_per_min, 2),
            "pages_per_s": round(self.pages_per_s, 3),
            "stages": self.stages,
            "counts": dict(sorted(self.counts.items())),
            "nodes": dict(sorted(self.nodes.items())),
        }


class Reporter:
    """Plain reporter: messages on stderr, no progress bar (non-TTY, or --quiet)."""

    heartbeat_every: float | None = None  # seconds between heartbeat() calls; None: none

    def __init__(self, quiet: bool = False, warnings: bool = True):
        self.quiet = quiet
        self.warnings = warnings  # False for the CLI's --quiet: a cron job hears only of failures
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)  # never hard-wrap log lines

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(shown(message))

    def warn(self, message: str) -> None:
        if self.warnings:
            self.console.print(f"[yellow]warning:[/] {shown(message)}")

    def error(self, message: str) -> None:
        """The error that stops the run (printed whatever --quiet says)."""
        self.console.print(f"[red]error:[/] {shown(message)}")

    def start(self, total: int | None) -> None:
        """The run begins; `total`: its pages, or None while the planner is still finding them."""

    def found(self, total: int) -> None:
        """The pages found so far (the total grows as the planner plans files)."""

    def planned(self, total: int, files: int) -> None:
        """Every file is planned: the run's `total` pages, of `files` files."""

    def page(self, record: dict, resumed: bool = False, worker: dict | None = None) -> None:
        pass

    def heartbeat(self, stats: dict) -> None:
        """Pipeline state: workers, busy, starting, queued (pool queue depth), inflight (pages
        held per worker), done, restarts, recycled, retried, rss_mb, pages_per_s, stages
        (share of the workers' time per stage so far)."""

    def finish(self, summary: Summary, out: str) -> None:
        if self.quiet:
            if summary.failed:
                self._failures(summary, out)
                of = f"at least {summary.pages}" if summary.pages_at_least else summary.pages
                self.console.print(f"{summary.failed} of {of} pages failed; see {shown(out)}")
            return
        table = Table(title=f"mineru parse -> {shown(out)}", show_header=False)
        for key, value in [
            ("pages", f"at least {summary.pages}" if summary.pages_at_least else summary.pages),
            ("ok (parsed now)", summary.ok),
            ("resumed (already done)", summary.resumed),
            ("from cache", summary.cached),
            ("failed", summary.failed),
            ("skipped", summary.skipped),
            ("time", f"{summary.seconds:.1f} s"),
            ("pages/min", f"{summary.pages_per_min:.1f} ({summary.pages_per_s:.2f} pages/s)"),
        ]:
            table.add_row(key, str(value))
        if summary.plan:
            table.add_row(
                "workers x threads",
                f"{summary.plan['workers']} x {summary.plan['threads']}"
                + (f", page batch {summary.plan['page_batch']}" if "page_batch" in summary.plan else ""),
            )
        if len(summary.nodes) > 1 or (summary.plan or {}).get("nodes"):
            plans = {n["node"]: n for n in (summary.plan or {}).get("nodes", [])}
            table.add_row(
                "pages per node",
                " · ".join(
                    f"{node} {pages}" + (f" ({p['workers']} x {p['threads']})" if (p := plans.get(node)) else "")
                    for node, pages in sorted(summary.nodes.items())
                ),
            )
        if summary.stages:
            main = {k: v for k, v in summary.stages.items() if not k.startswith("engine.")}
            steps = {k[7:]: v for k, v in summary.stages.items() if k.startswith("engine.")}
            table.add_row("worker time", " · ".join(f"{k} {v['share']:.0%}" for k, v in main.items()))
            if steps:
                table.add_row("engine steps", " · ".join(f"{k} {v['share']:.0%}" for k, v in steps.items()))
        if summary.restarts or summary.recycled or summary.retried:
            table.add_row(
                "worker restarts",
                f"{summary.restarts} (crash/timeout), "
                f"{summary.recycled} (memory)"
                + (f"; {summary.retried} page(s) retried alone" if summary.retried else ""),
            )
        self.console.print(table)
        self._failures(summary, out)
        if summary.interrupted:
            left = f"{summary.unfinished} page(s) not parsed; " if summary.unfinished else ""
            if summary.pages_at_least:  # the files discovery had not reached yet are not in it
                left = f"at least {summary.unfinished} page(s) not parsed (stopped before every file was counted); "
            self.console.print(f"[yellow]interrupted[/]: {left}re-run the same command to resume")

    def _failures(self, summary: Summary, out: str, most: int = 20) -> None:
        """Each failed page of the run, its id and message (the first `most`; the journal has all)."""
        for pid, msg in summary.failures[:most]:
            self.console.print(f"[red]failed[/] {shown(pid)}: {shown(msg)}")
        if len(summary.failures) > most:
            self.console.print(f"... and {len(summary.failures) - most} more failures (see {shown(out)})")


class _PipelineProgress(Progress):
    """The progress bar plus one line of pipeline state under it."""

    status: str = ""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        if self.status:
            yield Text(self.status, style="dim")


class ProgressReporter(Reporter):
    """Rich progress bar on a TTY: pages done/total, pages/s, ETA, failures; under it the
    pipeline: busy workers, queue depth, worker RSS, restarts."""

    heartbeat_every = 1.0

    def __init__(self):
        super().__init__(quiet=False)
        self.progress = _PipelineProgress(
            TextColumn("[bold]parsing"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("[red]{task.fields[failed]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.task = None
        self.failed = 0
        self.worked = 0
        self.t0 = time.monotonic()

    def info(self, message: str) -> None:
        self.console.print(shown(message))

    def start(self, total: int | None) -> None:
        self.t0 = time.monotonic()
        self.progress.start()
        self.task = self.progress.add_task("pages", total=total, rate="", failed="")

    def found(self, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, total=total)  # grows as files are planned

    def heartbeat(self, stats: dict) -> None:
        rss = "/".join(str(r) for r in stats["rss_mb"]) or "-"
        extra = f" · starting {stats['starting']}" if stats["starting"] else ""
        restarts = stats["restarts"] + stats["recycled"]
        inflight = sum(stats.get("inflight") or ())
        self.progress.status = (
            f"workers {stats['busy']}/{stats['workers']} busy{extra} · "
            f"in flight {inflight} · queue {stats['queued']} · "
            f"{stats['pages_per_s']:.2f} pages/s · "
            f"RSS {rss} MB" + (f" · restarts {restarts}" if restarts else "")
        )
        self.progress.refresh()

    def page(self, record: dict, resumed: bool = False, worker: dict | None = None) -> None:
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
        try:
            self.heartbeat_every = float(os.environ.get("MINERU_HEARTBEAT_S", HEARTBEAT_S))
        except ValueError:
            self.heartbeat_every = HEARTBEAT_S

    def _emit(self, event: str, **fields) -> None:
        fields = {"event": event, "time": round(time.time(), 3), **fields}
        line = json.dumps(fields, ensure_ascii=False)
        # JSON allows U+2028/U+2029 raw, but line readers that follow Unicode end a line there
        sys.stderr.write(line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n")
        sys.stderr.flush()

    def info(self, message: str) -> None:
        self._emit("info", message=message)

    def warn(self, message: str) -> None:
        self._emit("warning", message=message)

    def error(self, message: str) -> None:
        self._emit("error", message=message)  # stderr stays one JSON object a line

    def start(self, total: int | None) -> None:
        self._emit("start", pages=total)

    def planned(self, total: int, files: int) -> None:
        self._emit("planned", pages=total, files=files)

    def page(self, record: dict, resumed: bool = False, worker: dict | None = None) -> None:
        extra = (
            {}
            if worker is None
            else {
                "worker": worker["worker"],
                "rss_mb": round(worker["rss"] / (1 << 20), 1),
                "batch": worker.get("batch", 1),
                **({"node": worker["node"]} if "node" in worker else {}),
            }
        )
        self._emit(
            "page",
            id=record["id"],
            status=record["status"],
            resumed=resumed,
            error=record.get("error"),
            seconds=record.get("timings", {}).get("total"),
            **extra,
        )

    def heartbeat(self, stats: dict) -> None:
        self._emit("heartbeat", **stats)

    def finish(self, summary: Summary, out: str) -> None:
        self._emit("summary", out=out, **summary.as_dict())


def make_reporter(quiet: bool, log_json: bool) -> Reporter:
    if log_json:
        return JsonReporter()
    if not quiet and sys.stderr.isatty():
        return ProgressReporter()
    return Reporter(quiet=quiet, warnings=not quiet)
