"""`mineru parse`: inputs -> plan -> resume check -> worker pool -> journal, as one stream.

The main process discovers and plans the inputs (planner.py: threads beside the parsing, a
bounded window ahead of it), decides page by page which still need work (resume) as the plan
reaches them, and is the only writer of the journal. The pages themselves are parsed by worker processes
(`pipeline/`): each holds one engine and does load/render -> cache lookup -> engine -> cache
store on small batches of pages (`--page-batch`), so a page that hangs or crashes a native
library costs only that page. Every problem becomes a record, so one bad file never stops the
batch. The busy time of each stage (from the pages' timings) is summed here for the summary.
"""

from __future__ import annotations

import errno
import itertools
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Container, Generator, Iterable, Iterator, Sequence, cast

from .budget import CpuPlan, explain, plan_cpus
from .config import EngineSpec, ExecutorChoice, RunConfig, default_page_batch, page_fingerprints, user_cache_dir
from .core.errors import OutputError, PageError, SetupError, in_words
from .core.places import may_write_in, missing_folders, remove_empty
from .core.record import PageRecord, page_id, split_page_id
from .core.words import Status
from .engines import check_model, describe, resolve_engine
from .inputs import DOC_EXTS, OpenDocuments, SourceFile, input_root, outside_root, parse_page_ranges
from .journal import Journal, NoJournal, check_out, lock_held, renamed_pages
from .planner import Planned, Planner
from .report import Reporter, StageTimes, Summary

if TYPE_CHECKING:
    from .pipeline.executor import Executor

FEED_WAIT = 0.05  # before the workers start: how long the driver waits for the planner's next file
LOOK_AHEAD = 0.5  # seconds the first page to do waits for more before the workers start
STOP_GRACE = 30.0  # after Ctrl-C / SIGTERM: how long pages in flight may take to finish
# What a first Ctrl-C / SIGTERM stops, in the words of its warning: while pages are parsed, and
# from when they are all settled on where --format files are written (_write_documents takes
# the stop between documents, and leaves one another run is writing at once)
PAGES_STOP = f"pages in flight may finish (up to {STOP_GRACE:g} s)"
DOCUMENTS_STOP = (
    "the document at hand gets its per-document files (one another run is writing is not waited for) "
    "and the next run writes the others"
)
# write errors that stop a run (exit 3) rather than fail a page: no room, a size limit, a bad disk
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


_Planned = Planned  # the planner's result for one file (its old name here)
# --format: a file, its sha256, its pages' fingerprint and how many it has (None: it did not open)
_Doc = tuple[SourceFile, str | None, str, int | None]
SETTLED_MAX = 256  # records of resumed / failed-at-planning pages held before the driver yields them


@dataclass
class _Item:
    """One page for the worker pool (only src and index cross the process boundary)."""

    planned: _Planned
    index: int

    @property
    def src(self) -> SourceFile:
        return self.planned.src

    @property
    def stat(self) -> tuple[int, int] | None:
        """(size, mtime_ns) when the file was hashed: a Ray worker checks its node's copy against it."""
        return self.planned.stat


class _Interrupts:
    """SIGINT/SIGTERM: the first asks the run to stop taking work (pages in flight finish,
    the journal is compacted, exit 130); a second one exits at once (the journal is valid:
    records are fsynced per line and compaction is an atomic rename)."""

    def __init__(self, reporter: Reporter, install: bool = True):
        self.reporter = reporter
        self.install = install  # the CLI takes the signals; a library caller keeps its own
        self.count = 0
        self.pool: Executor | None = None  # the executor running now (killed on a second signal)
        self.then = PAGES_STOP  # what the run does on a first signal now
        self._previous: dict = {}

    @property
    def requested(self) -> bool:
        return self.count > 0

    def __enter__(self):
        if self.install and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handler(self, signum, frame) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1:
            self.reporter.warn(f"{name}: stopping; {self.then}. Press Ctrl-C again to stop at once.")
            return
        if self.pool is not None:
            self.pool.kill_all()
        sys.stderr.write(f"\n{name} again: stopped at once; the journal is valid, re-run to resume\n")
        sys.stderr.flush()
        os._exit(130)


class Parser:
    """One parse run: `records()` yields every page's PageRecord of the run as it is settled
    (resumed pages first, as the plan reaches them, then parsed ones in completion order),
    journaling each one when the config has an `out`. `summary` is filled in as it goes."""

    def __init__(self, config: RunConfig, reporter: Reporter | None = None, signals: bool = False):
        for p in config.inputs:
            if not p.exists() and not p.is_symlink():
                raise SetupError(f"input not found: {p}")
        if config.root is not None:
            if not config.root.is_dir():
                raise SetupError(f"--root: not a folder: {config.root}")
            stray = outside_root(config.inputs, config.root)
            if stray is not None:
                raise SetupError(f"--root: {stray} is not inside {config.root} (page ids are paths relative to it)")
        self.config = config
        self.reporter = reporter or Reporter(quiet=True)
        self.signals = signals  # take SIGINT/SIGTERM for a graceful stop (the CLI)
        self.summary = Summary()
        self.stages = StageTimes()

    def __iter__(self) -> Iterator[PageRecord]:
        return self.records()

    def records(self) -> Generator[PageRecord, None, None]:
        """The run's records. The set-up runs here, before the first record is asked for: the
        options are checked, the engine resolved and the journal opened, so a SetupError raises
        from this call (the API's parse() promises it); the pages are found and parsed as the
        records are asked for."""
        run = self._run()
        next(run)  # up to the end of the set-up
        return cast(Generator[PageRecord, None, None], run)

    def _run(self) -> Generator[PageRecord | None, None, None]:
        """The run: yields None once the set-up is done (records() takes it), then the records."""
        cfg, reporter, summary = self.config, self.reporter, self.summary
        select, self.spec = prepare(cfg, reporter)
        self.engine_info = describe(self.spec)
        # per kind of file: an option that makes no page of a file (--dpi for an image) keeps
        # its pages' fingerprint, so their records resume and the cache serves them
        self.fps = page_fingerprints(self.engine_info, cfg.load)
        made = _check_out_dir(cfg.documents_dir) if cfg.formats else []
        journal = Journal(cfg.out) if cfg.out is not None else NoJournal()
        self.journal = journal
        out_dir = os.path.abspath(cfg.documents_dir) + os.sep
        from .writers import is_output

        def ours(src: SourceFile) -> bool:
            if is_output(out_dir, os.path.abspath(src.path)):
                return False  # our own per-document output (crops are images): never an input
            if src.error is None and journal.is_file(src.path):
                return False  # the journal, named like a document (`--out docs/out.pdf`)
            return cfg.shard is None or cfg.shard.holds(src.rel)  # another machine's file: not hashed

        self._settled: deque[PageRecord] = deque()  # resumed / failed at planning, not yet yielded
        # this run's files in input order (compaction sorts their records by it, then by page:
        # a page id per page found would cost what a PDF claims, not what the journal holds)
        self._file_order: dict[str, tuple[int, Sequence[int]]] = {}  # rel -> (place, pages of this run)
        self._fixed_counts: dict[str, int] = {}  # page counts that are the files' own (pages past the end)
        self._failed_whole: dict[str, str] = {}  # files that no longer open, by content: their sha256
        self._docs: list[_Doc] = []  # with --format: each file, its hash, its pages' fingerprint and count
        self._unselected: tuple[int, str] = (0, "")  # files --pages selects no page of; the first
        self._settled_pages = 0
        self._written: set[str] = set()  # ids of the records this run writes (not those resumed)
        self._wait_s = 0.0
        with _removed_on_setup_error(made), journal:
            if journal.repaired_bytes:
                reporter.warn(
                    f"{cfg.out}: cut off a torn last line ({journal.repaired_bytes} bytes) left by an interrupted run"
                )
            if journal.bad_lines:
                reporter.warn(f"{cfg.out}: {journal.bad_lines} lines that are not records will be dropped")
            yield None  # the set-up is done: records() returns from here
            t0 = time.monotonic()
            # the planner starts at the first record asked for
            self.planner = planner = Planner(
                cfg.inputs, cfg.include, cfg.exclude, select, cfg.load, keep=ours, root=cfg.root
            )
            with _Interrupts(reporter, install=self.signals) as stop, planner:
                try:
                    reporter.start(None)  # the total grows as files are planned (reporter.found)
                    feed = self._feed(planner, stop)
                    # Look ahead until there are pages for every worker the budget allows, the plan
                    # ends, or LOOK_AHEAD s after the first page to do: no more workers start than a
                    # small run has pages, a run whose pages are all done starts none, and a dump of
                    # mostly done pages does not keep its workers waiting.
                    cap = plan_cpus(cfg.cpus, cfg.workers, engine=self.spec.engine.value).workers
                    ahead: list[_Item] = []
                    until = float("inf")
                    self._wait_s = FEED_WAIT
                    for item in feed:
                        yield from self._drain_settled()
                        if item is not None:
                            ahead.append(item)
                            until = min(until, time.monotonic() + LOOK_AHEAD)
                        if len(ahead) >= cap or time.monotonic() > until or stop.requested:
                            break
                    yield from self._drain_settled()
                    self._wait_s = 0.0  # from here the scheduler's loop waits, not the feed
                    if ahead and not stop.requested:
                        known = len(ahead) if self._feed_done else None
                        cpu = plan_cpus(cfg.cpus, cfg.workers, pages=known, engine=self.spec.engine.value)
                        yield from self._run_pool(itertools.chain(ahead, feed), cpu, stop, known)
                    yield from self._drain_settled()
                    if stop.requested:
                        self._count_unfinished(planner)
                    summary.interrupted = stop.requested
                except KeyboardInterrupt:
                    summary.interrupted = True
                    self._count_unfinished(planner)
                    if not self.signals:
                        raise
                finally:
                    planner.close()
                    if cfg.formats:
                        stop.then = DOCUMENTS_STOP
                    order = _input_order(journal.index, self._file_order)
                    drop = _pages_past_end(journal.index, self._fixed_counts)
                    drop += _pages_of_other_content(journal.index, self._failed_whole)
                    drop += _folders_listed_now(journal.index, planner.listed)
                    not_compacted: OutputError | None = None
                    try:
                        note = journal.compact(order, drop=drop)
                    except OutputError as exc:  # the journal is valid as it is: the documents are written first
                        not_compacted, note = exc, None
                    if note:
                        reporter.warn(note)
                    moved = _written_under_other_ids(journal.index, self._written, self._file_order)
                    if moved:
                        reporter.warn(root_moved(cfg, moved))
                    summary.seconds = time.monotonic() - t0
                if cfg.formats and not summary.interrupted:
                    stopping = lambda: stop.requested  # noqa: E731
                    summary.interrupted = not _write_documents(cfg, self._docs, journal, reporter, stopping)
                if not_compacted is not None:
                    raise not_compacted
        summary.seconds = time.monotonic() - t0

    def _count_unfinished(self, planner: Planner) -> None:
        """After a stop: the pages found and not settled, those of files not taken yet too."""
        summary = self.summary
        summary.pages = max(summary.pages, planner.total())
        summary.unfinished = summary.pages - self._settled_pages
        summary.pages_at_least = not (self._feed_done or planner.exact)

    # -- the stream of pages -------------------------------------------------------------
    def _feed(self, planner: Planner, stop: _Interrupts) -> Iterator[_Item | None]:
        """The pages still to do, as the planner plans their files; None: none ready now (or
        records of done pages wait to be yielded). Pages already done are settled here, page by
        page, as their file comes: resume checks happen on the fly."""
        self._feed_done = False
        while not stop.requested:
            if len(self._settled) >= SETTLED_MAX:
                yield None  # the driver yields those records first
                continue
            planned = planner.take(self._wait_s)
            if planned is None:
                if planner.done:
                    self._planning_done()
                    self._feed_done = True
                    return
                yield None
                continue
            self._found(planned)
            yield from self._queue_source(planned)

    def _found(self, planned: Planned) -> None:
        """A planned file joins the run: its pages count, their ids keep the input order."""
        rel, pages = planned.src.rel, planned.pages
        self._file_order.setdefault(rel, (len(self._file_order), pages))
        self.summary.pages += planned.records  # the pages that get a record
        if planned.unselected:
            self._unselected = (self._unselected[0] + 1, self._unselected[1] or rel)
        if planned.error is None and planned.fixed_count:
            self._fixed_counts[rel] = cast(int, planned.page_count)
        elif planned.error is not None and planned.sha256 is not None:
            self._failed_whole[rel] = planned.sha256
        if self.config.formats:
            self._docs.append((planned.src, planned.sha256, self.fps[planned.kind], planned.page_count))
        self.reporter.found(self.planner.total())

    def _planning_done(self) -> None:
        count, first = self._unselected
        if count:
            self.reporter.warn(f"--pages selects no page of {count} file(s), e.g. {first}")
        elif not self.planner.files:  # a wrong path or glob in a cron line is told; an empty dump is no failure
            self.reporter.warn(nothing_found(self.config))
        self.reporter.planned(self.summary.pages, self.planner.files)

    def _drain_settled(self) -> Iterator[PageRecord]:
        while self._settled:
            yield self._settled.popleft()

    # -- records -------------------------------------------------------------------------
    def _record(self, planned: _Planned, index: int, **fields) -> PageRecord:
        return PageRecord(
            source=planned.src.rel,
            page_index=index,
            page_count=planned.page_count,
            engine=self.engine_info,
            fingerprint=self.fps[planned.kind],
            source_sha256=planned.sha256,
            **fields,
        )

    def _emit(self, rec: PageRecord, worker: dict | None = None) -> PageRecord:
        line = rec.as_dict()
        self.journal.append(line)
        self._written.add(line["id"])
        self._count(line, resumed=False, worker=worker)
        return rec

    def _count(self, rec: dict, resumed: bool, worker: dict | None = None) -> None:
        s = self.summary
        self._settled_pages += 1
        if resumed:
            s.resumed += 1
        elif rec["status"] == Status.OK:
            s.ok += 1
            if rec["cache"] and rec["cache"]["status"] in ("hit", "near-hit"):
                s.cached += 1
        if worker is not None and "node" in worker:
            s.nodes[worker["node"]] = s.nodes.get(worker["node"], 0) + 1
        if rec["status"] in (Status.FAILED, Status.TIMEOUT):
            s.failed += 1
            s.failures.append((rec["id"], rec["error"]["message"] if rec["error"] else rec["status"]))
        elif rec["status"] == Status.SKIPPED:
            s.skipped += 1
        self.reporter.page(rec, resumed=resumed, worker=worker)

    def _done_before(self, planned: _Planned, index: int) -> PageRecord | None:
        if self.config.force:
            return None
        pid, fp = page_id(planned.src.rel, index), self.fps[planned.kind]
        rec = self.journal.finished(pid, planned.sha256, fp, self.config.retry_failed)
        if rec is None:
            return None
        if rec.get("page_count") != planned.page_count:
            # a GIF's frame count follows --gif-frames, which makes no page (in no fingerprint):
            # its frame resumes, recorded with the count it has in this run
            rec = {**rec, "page_count": planned.page_count}
            self.journal.append(rec)
        self._count(rec, resumed=True)
        return PageRecord.from_dict(rec)

    def _queue_source(self, planned: _Planned) -> Iterator[_Item | None]:
        """Record a file that failed planning; settle its pages already done (resumed); yield
        the pages still to do (and None while the settled records wait to be yielded)."""
        if planned.error is not None:
            done = self._done_before(planned, 0)
            if done is None:
                status = planned.src.status if planned.error is planned.src.error else Status.FAILED
                done = self._emit(self._record(planned, 0, status=Status(status), error=planned.error.info))
            self._settled.append(done)
            return
        for i in planned.indices:
            done = self._done_before(planned, i)
            if done is None:
                yield _Item(planned, i)
            else:
                self._settled.append(done)
                if len(self._settled) >= SETTLED_MAX:
                    yield None

    def _on_result(self, item: _Item, outcome, worker: dict) -> PageRecord:
        o = outcome
        rec = self._record(
            item.planned,
            item.index,
            status=o.status,
            error=o.error,
            image=o.image,
            text_layer=o.text_layer,
            cache=o.cache,
            blocks=o.blocks,
            markdown=o.markdown,
            warnings=o.warnings,
            timings=o.timings,
        )
        if o.status is Status.OK:
            self.stages.add(o.timings)
            for k, v in o.counts.items():
                if k != "batch_pages":  # the size of the page's batch, not a count to add up
                    self.summary.counts[k] = self.summary.counts.get(k, 0) + v
        if item.planned.changed_since_planned() or o.transient:
            # the page was read from content other than what was hashed (the file changed or went
            # away mid-run), or its worker ran out of something (file descriptors): no hash, so the
            # next run parses it again instead of resuming a result (or a failure) of content the
            # file may not hold, even if it holds the hashed one again, or a failure not the file's
            rec.source_sha256 = None
        return self._emit(rec, worker)

    def _run_pool(
        self, todo: Iterable[_Item | None], cpu: CpuPlan, stop: _Interrupts, known: int | None = None
    ) -> Iterator[PageRecord]:
        from .pipeline import WorkerPool, WorkerSpec

        cfg = self.config
        batch = cfg.page_batch or default_page_batch(self.spec.engine)
        self.reporter.info(
            f"pipeline: {cpu.workers} worker(s) x {cpu.threads} thread(s) "
            f"(--cpus {cpu.budget}; {cpu.why}); page batch {batch}, "
            f"mode {self.spec.mode}; pages handed out as their files are planned"
        )
        if cpu.warning:
            self.reporter.warn(cpu.warning)
        spec = WorkerSpec(
            self.spec,
            cpu.threads,
            cpu.spinning,
            cpu.thread_env(),
            self.fps,
            cfg.load,
            cfg.cache_spec(user_cache_dir()),
            batch,
            cfg.batch_wait_ms,
        )
        self.summary.plan = {
            **cpu.as_dict(),
            "page_batch": batch,
            "crop_batch": cfg.crop_batch,
            "batch_wait_ms": cfg.batch_wait_ms,
            "mode": self.spec.mode.value,
        }
        t0 = time.monotonic()
        beat = {"next": t0}
        every = self.reporter.heartbeat_every

        def tick(stats) -> None:
            now = time.monotonic()
            if every is None or now < beat["next"]:
                return
            beat["next"] = now + every
            self.reporter.heartbeat(
                {
                    **stats.as_dict(),
                    "pages": self.planner.total(),  # found so far: the total grows while planning
                    "planning": not self._feed_done,
                    "pages_per_s": round(stats.done / max(1e-9, now - t0), 3),
                    "stages": self.stages.shares(now - t0, pool.stats.workers),
                }
            )

        pool: Executor
        if cfg.executor is ExecutorChoice.RAY:
            from .pipeline.ray_executor import RayExecutor

            pool = RayExecutor(
                cpu.workers,
                spec,
                cfg.page_timeout,
                cfg.max_worker_rss,
                warn=self.reporter.warn,
                info=self.reporter.info,
                address=cfg.ray_address,
                num_cpus=cpu.budget,
                node_workers=cfg.workers,  # the CPU plan runs per node once Ray is up
                pages=known,
            )
        else:
            pool = WorkerPool(
                cpu.workers,
                spec,
                cfg.page_timeout,
                cfg.max_worker_rss,
                warn=self.reporter.warn,
                info=self.reporter.info,
            )
        stop.pool = pool
        try:
            with pool:
                node_plans = getattr(pool, "node_plans", None)  # Ray: the slots are planned per node
                if node_plans is not None:
                    self.summary.plan.update(workers=pool.stats.workers, nodes=node_plans())
                for done in pool.run(
                    todo, should_stop=lambda: stop.requested, grace=min(STOP_GRACE, cfg.page_timeout), on_tick=tick
                ):
                    if done is not None:
                        yield self._on_result(cast(_Item, done.item), done.outcome, done.worker_info())
                    yield from self._drain_settled()  # pages resumed meanwhile, in the driver's turn
        finally:
            stop.pool = None
            self.summary.stages = self.stages.as_dict(time.monotonic() - t0, pool.stats.workers)
            self.summary.restarts = pool.stats.restarts
            self.summary.recycled = pool.stats.recycled
            self.summary.retried = pool.stats.retried


def prepare(config: RunConfig, reporter: Reporter) -> tuple[Callable[[int], bool] | None, EngineSpec]:
    """What a run checks before it starts, and the engine it runs (auto resolved, the mode
    checked against it, the model's files checked as its load checks them): --pages as a page
    filter and the EngineSpec. The run and
    --explain-plan both take them from here, so the plan is the run's and refuses what it refuses."""
    select = _page_filter(config.pages)
    spec = resolve_engine(
        config.engine,
        mode=config.mode,
        runtime=config.runtime,
        model=config.model,
        model_profile=config.model_profile,
        lang=config.lang,
        crop_batch=config.crop_batch,
        max_new_tokens=config.max_new_tokens,
        image_analysis=config.image_analysis,
        say=reporter.info,
        warn=reporter.warn,
    )
    # a damaged export refused here, before the journal is opened, as --explain-plan refuses it
    check_model(spec, say=reporter.info)
    return select, spec


def explain_plan(config: RunConfig, reporter: Reporter) -> str:
    """--explain-plan: the CPU plan and batch settings the run of `config` would use, from the
    engine it would resolve; a SetupError where the run would refuse the options or its output
    places (--out, --out-dir), in the run's order and words. Nothing is written, made or locked.
    Another run writing the journal is a warning, not a refusal: the options are fine, the
    plan is the one that run uses, and a run started once it ends is not refused."""
    Parser(config, reporter)  # the inputs must exist, as for the run
    _, spec = prepare(config, reporter)
    if config.formats:
        check_out_dir(config.documents_dir)
    if config.out is not None:
        held = lock_held(check_out(config.out))
        if held is not None:
            reporter.warn(held)
    return explain(plan_cpus(config.cpus, config.workers, engine=spec.engine.value), config, spec)


def nothing_found(config: RunConfig) -> str:
    """The warning of a run that found no file to parse: where it looked and what narrowed the
    walk, as a shell would take them."""
    where = " ".join(shlex.quote(str(p)) for p in config.inputs)
    given = [f"--include {shlex.quote(p)}" for p in config.include]
    given += [f"--exclude {shlex.quote(p)}" for p in config.exclude]
    given += [f"--shard {config.shard}"] if config.shard else []
    narrowed = f" with {' '.join(given)}" if given else ""
    names = " ".join(f"*{ext}" for ext in sorted(DOC_EXTS))
    return f"no images or PDFs to parse in {where}{narrowed} (mineru parse reads files named {names})"


def _written_under_other_ids(index, written: set[str], inputs: Container[str]) -> list[tuple[str, str]]:
    """(id written now, id written before) of each page the journal holds under ids from two
    input roots, one of them this run's (renamed_pages, as `mineru merge` finds them). An id
    written before whose file is one of this run's `inputs` (their sources) names no old root:
    the file is still there, and the one written now is a new copy of it (`x/2024/a.png` added
    beside `2024/a.png`)."""
    if not written:  # a run that only resumed: nothing new to compare
        return []
    # only pages of the contents written now can pair with one of them (a dict lookup each for
    # the rest of a journal of a million pages, not a look at every one's shorter paths)
    now = {entry.source_sha256 for pid in written if (entry := index.get(pid)) is not None} - {None}
    pairs = renamed_pages(
        [pid for pid, entry in index.items() if entry.source_sha256 in now],
        lambda pid: entry.source_sha256 if (entry := index.get(pid)) is not None else None,
        lambda longer, shorter: (longer in written) != (shorter in written),
    )
    moved = ((a, b) if a in written else (b, a) for a, b in pairs)
    return sorted((now, before) for now, before in moved if split_page_id(before)[0] not in inputs)


def root_moved(config: RunConfig, moved: list[tuple[str, str]]) -> str:
    """The warning of a run that parsed pages its journal already holds under ids from another
    input root (`moved`: renamed_since's pairs, the id now first): how many, an example, the two
    roots where they can be told, and the --root that keeps the ids from moving: the wider one,
    which holds this run's inputs (and the earlier run's, where that root was the wider)."""
    now, before = moved[0]
    root = input_root(config.inputs, config.root)
    source, earlier = split_page_id(now)[0], split_page_id(before)[0]
    old = _earlier_root(root, source, earlier)
    wider = root if len(source) > len(earlier) else old
    said = f"which moved from {_shown(old)} to {_shown(root)}" if old else "which moved"
    if config.root is None:
        said += " (without --root it is the arguments' common folder, and moves when they change)"
    keep = f"--root {shlex.quote(_shown(wider))}" if wider else "--root"
    return (
        f"{len({pid for pid, _ in moved})} page(s) parsed again: {config.out} holds them under other ids "
        f"(e.g. {before}, now {now}). Page ids are paths under the input root, {said}; the journal keeps "
        f"both records. Give every run the same {keep} to keep the ids steady and the pages resumed"
    )


def _earlier_root(root: str, source: str, earlier: str) -> str | None:
    """The input root under which a run named `earlier` the file this run names `source` under
    `root` (one path ends with the other), where it can be told."""
    if len(source) > len(earlier):  # wider now: the earlier root was a folder inside it
        return os.path.join(root, *source[: -len(earlier) - 1].split("/"))
    tail = os.sep + os.path.join(*earlier[: -len(source) - 1].split("/"))
    return (root[: -len(tail)] or os.sep) if root.endswith(tail) else None  # a folder above it, by its name


def _shown(path: str) -> str:
    """A folder as a message names it: relative to the current folder where it is inside it."""
    rel = os.path.relpath(path)
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def run_parse(config: RunConfig, reporter: Reporter) -> Summary:
    """The CLI's run: every record journaled, Ctrl-C / SIGTERM handled, the summary back."""
    parser = Parser(config, reporter, signals=True)
    for _ in parser.records():
        pass
    return parser.summary


def _check_out_dir(out_dir: Path) -> list[Path]:
    """--out-dir must be a folder we can create and write: found out before parsing, not after.
    Returns the folders it made (nearest first)."""
    check_out_dir(out_dir)
    made = missing_folders(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file put there since the check
        raise _out_dir_is_a_file(out_dir) from None
    except OSError as exc:
        raise SetupError(f"--out-dir {out_dir}: {exc.strerror or exc}") from None
    # a read-only mount, another user's folder: found by making a file there (one without a name,
    # gone when closed), as the run's own writes are judged; os.access answers for the real user
    # id, without this process's capabilities
    try:
        tempfile.TemporaryFile(dir=out_dir).close()
    except OSError as exc:
        raise SetupError(f"--out-dir {out_dir}: the folder cannot be written ({in_words(exc)})") from None
    return made


def check_out_dir(out_dir: Path) -> None:
    """What _check_out_dir refuses of --out-dir, found without making anything (the run checks
    with it first, --explain-plan only with it): a file in its place or on its path, a folder
    that cannot be written (a read-only mount, another user's folder) where it is or is made."""
    there = next(folder for folder in (out_dir, *out_dir.parents) if folder.exists())
    if there == out_dir and not out_dir.is_dir():
        raise _out_dir_is_a_file(out_dir)
    if not there.is_dir():  # a file above it: making its folders fails as mkdir says
        raise SetupError(f"--out-dir {out_dir}: {os.strerror(errno.ENOTDIR)}")
    if not may_write_in(there):
        raise _not_writable(out_dir, there)


def _out_dir_is_a_file(out_dir: Path) -> SetupError:
    return SetupError(f"--out-dir {out_dir} is a file, not a folder")


def _not_writable(out_dir: Path, there: Path) -> SetupError:
    if there == out_dir:
        return SetupError(f"--out-dir {out_dir}: the folder cannot be written")
    return SetupError(f"--out-dir {out_dir}: cannot make it in {there}, which cannot be written")


@contextmanager
def _removed_on_setup_error(folders: list[Path]) -> Iterator[None]:
    """The folders a run made (--out-dir's) removed where a set-up error ends it (a model its
    workers cannot load) while they are still empty: the failed command leaves nothing new."""
    try:
        yield
    except SetupError:
        remove_empty(folders)
        raise


def _document_pages(index, docs: list[_Doc]) -> dict[str, list[str]]:
    """Ids of every page the journal holds of this run's files, per file in input order and page
    order: the per-document files are built from all of them, not only from the pages --pages
    chose now; but only from records of the file's current content made with this run's
    fingerprint for it (a page parsed before the file changed, or by another engine version or
    options, and not chosen now is left out, not mixed in), and only of the pages the file has
    now: a GIF's frames past the first, parsed under --gif-frames all, are no pages of it under
    first (their fingerprint is the same: config.PAGE_CHOICE_OPTIONS)."""
    current = {src.rel: (sha, fp) for src, sha, fp, _ in docs}
    counts = {src.rel: count for src, _, _, count in docs}
    pages: dict[str, list[tuple[int, str]]] = {}
    for pid, entry in index.items():
        source, number = split_page_id(pid)
        if number is None or source not in current or (entry.source_sha256, entry.fingerprint) != current[source]:
            continue
        count = counts[source]
        if count is None or number < count:
            pages.setdefault(source, []).append((number, pid))
    return {src.rel: [pid for _, pid in sorted(pages[src.rel])] for src, *_ in docs if src.rel in pages}


def _vanished_pages(index, plan: Iterable[_Planned]) -> list[str]:
    """_pages_past_end for planned files (what is a fixed page count: see there)."""
    counts = {p.src.rel: cast(int, p.page_count) for p in plan if p.error is None and p.fixed_count}
    return _pages_past_end(index, counts)


def _input_order(index, files: dict[str, tuple[int, Sequence[int]]]) -> list[str]:
    """Ids of the journal's records of this run's pages (`files`: each file's place in the input
    order and the pages this run settles of it), in input order and page order."""
    ours = []
    for pid in index:
        source, number = split_page_id(pid)
        place, pages = files.get(source, (None, ()))
        if place is not None and number is not None and number in pages:
            ours.append((place, number, pid))
    return [pid for _, _, pid in sorted(ours)]


def _folders_listed_now(index, listed: set[str]) -> list[str]:
    """Ids of failed records of folders this run listed: one that could not be listed before
    (unreadable then) has its documents' records now, and its own would say so for ever."""
    return [pid for pid, entry in index.items() if entry.status != "ok" and split_page_id(pid)[0] in listed]


def _pages_past_end(index, counts: dict[str, int]) -> list[str]:
    """Ids of pages past the current page count of a file of this run (one that shrank): their
    old records would otherwise stay in the output for ever. `counts` holds only files whose page
    count is their own, known by content (Planned.fixed_count): GIFs are left alone (their frame
    count follows --gif-frames), and so is a file that fails to open now (its first page's record
    is the failure; it may be unreadable only for a moment)."""
    gone = []
    for pid in index:
        source, number = split_page_id(pid)
        count = counts.get(source)
        if count is not None and number is not None and number >= count:
            gone.append(pid)
    return gone


def _pages_of_other_content(index, failed: dict[str, str]) -> list[str]:
    """Ids of the pages past the first of files that now fail to open for their content (`failed`:
    their sha256), recorded from an earlier content: the file's one record is its failure now,
    and the old pages' records would stay beside it for ever."""
    gone = []
    for pid, entry in index.items():
        source, number = split_page_id(pid)
        if number and source in failed and entry.source_sha256 != failed[source]:
            gone.append(pid)
    return gone


def _write_documents(
    opts: RunConfig, docs: list[_Doc], journal, reporter: Reporter, stopping: Callable[[], bool] = lambda: False
) -> bool:
    """--format markdown / content-list / layout: per-document files from the journal's records
    (_document_pages), one document at a time (its records only are read back at once). A stop
    (Ctrl-C / SIGTERM) is taken between documents: False, the rest is left to the next run."""
    from .writers import document_dir, remove_documents, write_documents

    sources = {src.rel: src for src, *_ in docs}
    pages = _document_pages(journal.index, docs)
    opened = OpenDocuments(opts.load)
    written: list[Path] = []
    ok: set[str] = set()
    changed: list[tuple[str, PageError]] = []  # files gone or rewritten since their pages were parsed
    refused: list[tuple[str, OSError]] = []  # documents whose files the filesystem would not take

    def load_page(pixels: dict[int, str | None]):
        # crops and layout pages are read again from the file: only from the pixels the
        # records were made from (the file may have changed or gone mid-run)
        def load(source: str, index: int):
            doc = opened.get(sources[source])
            page = doc.page(index) if index < doc.page_count else None
            if page is None or page.sha256 != pixels.get(index):
                raise PageError("corrupt", "open", "its pixels are no longer those its record was made from")
            return page.image

        return load

    try:
        for rel, ids in pages.items():
            if stopping():
                break
            records = list(journal.records(ids))
            pixels = {r["page_index"]: (r.get("image") or {}).get("sha256") for r in records}
            try:
                written += write_documents(
                    records,
                    opts.documents_dir,
                    {str(f) for f in opts.formats},
                    load_page(pixels),
                    dpi=opts.load.dpi,
                    stopping=stopping,
                    waiting=lambda folder: reporter.info(
                        f"waiting for another run to finish writing {folder}/ (Ctrl-C leaves it to the next run)"
                    ),
                )
            except PageError as exc:
                changed.append((rel, exc))  # not ok: the files written of it so far are removed below
                continue
            except OSError as exc:
                if exc.errno in OUTPUT_ERRNOS:
                    exc.filename = exc.filename or str(document_dir(opts.documents_dir, rel))  # for the message
                    raise
                # a name too long, a file where its folder goes, no permission: this document only
                refused.append((rel, exc))
                continue
            if any(r["status"] == "ok" for r in records):
                ok.add(rel)
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRNOS:
            raise
        # a full disk: the journal is complete, the files are written by the next run
        fix = "make it writable again" if exc.errno == errno.EROFS else "free space (or fix the cause)"
        raise OutputError(
            f"--out-dir {opts.documents_dir}: {exc.strerror or exc} while writing the per-document files "
            f"({getattr(exc, 'filename', '') or 'a file'}); every page's record is in the journal and no "
            f"file is torn: {fix} and run the same command again to write them"
        ) from None
    finally:
        opened.close()
    reporter.info(f"wrote {len(written)} file(s) under {opts.documents_dir}/")
    if changed:
        first, why = changed[0]
        reporter.warn(
            f"{len(changed)} document(s) changed or went away after their pages were parsed, e.g. {first} "
            f"({why}): they get no per-document files now; a re-run parses what they hold now"
        )
    if stopping():
        # the documents not reached keep their files as they were (the next run writes them);
        # what was written of a changed one goes, as below
        remove_documents(opts.documents_dir, [rel for rel, _ in changed + refused])
        reporter.warn(
            f"stopped before every per-document file was written under {opts.documents_dir}/: re-run to write them"
        )
        return False
    removed = remove_documents(opts.documents_dir, [src.rel for src, *_ in docs if src.rel not in ok])
    if removed:
        reporter.warn(
            f"removed {len(removed)} per-document file(s) of documents with no ok page now, e.g. {removed[0]}"
        )
    if refused:
        first, error = refused[0]
        raise OutputError(
            f"--out-dir {opts.documents_dir}: could not write the files of {len(refused)} document(s), e.g. {first} "
            f"({error.strerror or error}); the other documents' files are written and every page's record is in "
            "the journal"
        )
    return True


def _page_filter(spec: str | None):
    try:
        return parse_page_ranges(spec)
    except ValueError as exc:
        raise SetupError(f"--pages {spec!r}: {exc}") from None
