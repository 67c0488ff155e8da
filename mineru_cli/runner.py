"""`mineru parse`: inputs -> pages -> (cache) -> engine -> journal, one page at a time.

Everything about one page happens in `_parse_page`, which turns every problem into a record,
so one bad file never stops the batch.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .budget import available_cpus
from .engines import Engine, make_engine
from .errors import PageError, SetupError
from .inputs import LoadOptions, SourceFile, discover, file_sha256, open_document, parse_page_ranges
from .journal import Journal
from .records import fingerprint as make_fingerprint
from .records import make_record, page_id
from .report import Reporter, Summary


@dataclass
class ParseOptions:
    inputs: list[Path]
    out: Path
    engine: str = "auto"
    lang: str = "en"
    cpus: int | None = None
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    pages: str | None = None
    load: LoadOptions = field(default_factory=LoadOptions)
    force: bool = False
    retry_failed: bool = False
    cache_dir: Path | None = None          # None: no cache
    cache_near: str = "verify"
    cache_url: str | None = None
    cache_ttl: int = 7200


@dataclass
class _Planned:
    """A source file after the planning pass: hashed and counted, or failed."""
    src: SourceFile
    sha256: str | None = None
    page_count: int | None = None
    indices: list[int] = field(default_factory=list)
    error: PageError | None = None


def run_parse(opts: ParseOptions, reporter: Reporter) -> Summary:
    for p in opts.inputs:
        if not p.exists() and not p.is_symlink():
            raise SetupError(f"input not found: {p}")
    select = _page_filter(opts.pages)
    cpus = opts.cpus or available_cpus()
    engine = make_engine(opts.engine, threads=cpus, lang=opts.lang, say=reporter.info)
    engine_info = {"name": engine.name, "version": engine.version, "package": __version__,
                   "model": engine.identity(), "options": engine.options()}
    fp = make_fingerprint(engine_info, dataclasses.asdict(opts.load))
    cache = _open_cache(opts, reporter)

    summary = Summary()
    t0 = time.monotonic()
    with Journal(opts.out) as journal:
        if journal.repaired_bytes:
            reporter.warn(f"{opts.out}: cut off a torn last line ({journal.repaired_bytes} bytes) "
                          "left by an interrupted run")
        if journal.bad_lines:
            reporter.warn(f"{opts.out}: {journal.bad_lines} lines that are not records will be dropped")
        plan = [_plan(src, select, opts.load) for src in discover(opts.inputs, opts.include, opts.exclude)]
        order = [page_id(p.src.rel, i) for p in plan for i in (p.indices or [0])]
        summary.pages = len(order)
        reporter.start(summary.pages)
        ctx = _Context(opts, engine, engine_info, fp, journal, cache, reporter, summary)
        try:
            for planned in plan:
                ctx.run_source(planned)
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            journal.compact(order)
            if cache is not None:
                cache.close()
    summary.seconds = time.monotonic() - t0
    return summary


def _page_filter(spec: str | None):
    try:
        return parse_page_ranges(spec)
    except ValueError as exc:
        raise SetupError(f"--pages {spec!r}: {exc}") from None


def _plan(src: SourceFile, select, load: LoadOptions) -> _Planned:
    if src.error is not None:
        return _Planned(src, error=src.error)
    try:
        sha = file_sha256(src.path)
        with open_document(src, load) as doc:   # counts pages (GIF frames per --gif-frames); renders nothing
            count = doc.page_count
    except PageError as exc:
        return _Planned(src, error=exc)
    except OSError as exc:
        return _Planned(src, error=PageError("unreadable", "open", f"{type(exc).__name__}: {exc}"))
    indices = [i for i in range(count) if select is None or select(i + 1)]
    return _Planned(src, sha256=sha, page_count=count, indices=indices)


def _open_cache(opts: ParseOptions, reporter: Reporter):
    if opts.cache_dir is None:
        return None
    from .cache import ResultCache

    return ResultCache(opts.cache_dir, near=opts.cache_near, redis_url=opts.cache_url,
                       ttl_s=opts.cache_ttl, warn=reporter.warn)


@dataclass
class _Context:
    opts: ParseOptions
    engine: Engine
    engine_info: dict
    fp: str
    journal: Journal
    cache: object
    reporter: Reporter
    summary: Summary

    def record(self, planned: _Planned, index: int, **fields) -> dict:
        return make_record(source=planned.src.rel, page_index=index, page_count=planned.page_count,
                           engine_info=self.engine_info, fingerprint=self.fp,
                           source_sha256=planned.sha256, **fields)

    def emit(self, rec: dict) -> None:
        self.journal.append(rec)
        self._count(rec, resumed=False)

    def _count(self, rec: dict, resumed: bool) -> None:
        s = self.summary
        if resumed:
            s.resumed += 1
        elif rec["status"] == "ok":
            s.ok += 1
            if rec["cache"] and rec["cache"]["status"] in ("hit", "near-hit"):
                s.cached += 1
        if rec["status"] in ("failed", "timeout"):
            s.failed += 1
            s.failures.append((rec["id"], rec["error"]["message"] if rec["error"] else rec["status"]))
        elif rec["status"] == "skipped":
            s.skipped += 1
        self.reporter.page(rec, resumed=resumed)

    def done_before(self, planned: _Planned, index: int) -> bool:
        if self.opts.force:
            return False
        rec = self.journal.finished(page_id(planned.src.rel, index), planned.sha256, self.fp,
                                    self.opts.retry_failed)
        if rec is not None:
            self._count(rec, resumed=True)
        return rec is not None

    def run_source(self, planned: _Planned) -> None:
        if planned.error is not None:
            if not self.done_before(planned, 0):
                status = planned.src.status if planned.error is planned.src.error else "failed"
                self.emit(self.record(planned, 0, status=status, error=planned.error.as_dict()))
            return
        todo = [i for i in planned.indices if not self.done_before(planned, i)]
        if not todo:
            return
        try:
            doc = open_document(planned.src, self.opts.load)
        except (PageError, OSError) as exc:
            err = exc if isinstance(exc, PageError) else PageError("unreadable", "open", str(exc))
            for i in todo:
                self.emit(self.record(planned, i, status="failed", error=err.as_dict()))
            return
        with doc:
            for i in todo:
                self.emit(self._parse_page(planned, doc, i))

    def _parse_page(self, planned: _Planned, doc, index: int) -> dict:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        try:
            page = doc.page(index)
            timings["load"] = time.perf_counter() - t0
            image = {"width": page.image.width, "height": page.image.height, "sha256": page.sha256,
                     "original_width": page.original_size[0], "original_height": page.original_size[1],
                     "scale": page.scale}
            payload, cache_info = None, {"status": "off"} if self.cache is None else {"status": "miss"}
            if self.cache is not None:
                hit = self.cache.lookup(page.image, page.sha256, self.fp)
                if hit is not None:
                    payload, cache_info = hit.payload, {"status": hit.kind}
                    if hit.kind == "near-hit":
                        cache_info["from"] = hit.source
            if payload is None:
                t1 = time.perf_counter()
                result = self.engine.parse(page.image)
                timings["engine"] = time.perf_counter() - t1
                timings.update({f"engine.{k}": v for k, v in result.timings.items()})
                payload = {"blocks": [b.as_dict() for b in result.blocks], "markdown": result.markdown,
                           "warnings": result.warnings}
                if self.cache is not None:
                    self.cache.store(page.image, page.sha256, self.fp, page_id(planned.src.rel, index), payload)
            timings["total"] = time.perf_counter() - t0
            return self.record(planned, index, status="ok", image=image, cache=cache_info,
                               blocks=payload["blocks"], markdown=payload["markdown"],
                               warnings=page.warnings + payload.get("warnings", []), timings=timings)
        except PageError as exc:
            return self.record(planned, index, status="failed", error=exc.as_dict(),
                               timings={"total": time.perf_counter() - t0})
        except Exception as exc:  # noqa: BLE001 - the page boundary: any failure costs this page only
            # The engine or a native library choked on this page: record it and go on with the batch.
            stage = "engine" if "load" in timings else "render"
            return self.record(planned, index, status="failed",
                               error={"kind": "engine_error" if stage == "engine" else "corrupt",
                                      "stage": stage, "message": f"{type(exc).__name__}: {exc}"},
                               timings={"total": time.perf_counter() - t0})
