"""The worker process: one engine, pages in small batches, told what to do over a pipe.

Imports only the standard library and our dependency-free core at module level: the spawned
child imports this module before `worker_main` sets the thread environment, and
numpy/onnxruntime read it at import.

Batches. The main process sends a worker up to `page_batch` pages (never more in flight: that
is the back-pressure). The worker blocks for one page, then keeps taking pages until it has
`page_batch` of them or none arrived within `batch_wait_ms` (a "solo" page closes its batch at
once: it is alone by design). For each page of the batch, in order: render/normalise it and
look it up in the cache; a hit (or a page that fails here) is answered at once. The misses go
to `engine.parse_batch(images)` together (the VLM decodes their layout steps and crops
together); each page's result is then stored in the cache and answered. So at most
`page_batch` rendered pages are held per worker.

Messages: pipeline/messages.py. A "solo" page is sent alone: the main process retries each
page of a batch whose worker died or hung that way, so one poison page costs only itself
(see pool.py).

Test hook (off unless the variable is set; used by tests/test_pipeline*.py):
  MINERU_TEST_FAULTS="hang=<glob>;abort=<glob>;kill=<glob>;raise=<glob>;leak=<glob>;slow=<glob>"
  makes the worker, on a page whose id matches the fnmatch glob, at the engine stage (in a
  batch: just before the batch's engine call): hang (sleep forever), os.abort() (SIGABRT),
  SIGKILL itself, raise RuntimeError (that page alone fails, as a parse_batch entry would),
  keep 64 MiB more memory alive (for the RSS recycling path), or sleep 1 s first ("slow": keeps
  workers busy, e.g. while a test takes a Ray node away). Several globs: "hang=a*,b*".
  The Ray actor also reads "fingerprint=*": it reports another engine fingerprint than the
  driver's, as a node with other packages or models would.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..config import FileKind
from ..core.blocks import Block
from ..core.errors import PageError, SetupError
from ..core.record import CacheInfo, ImageInfo, page_id
from ..core.words import FAILED_BLOCKS, CacheStatus, ErrorKind, Stage, Status
from .messages import Done, Fatal, Finish, Notice, PageOutcome, PageTask, Ready, StageEntered, WorkerSpec

if TYPE_CHECKING:
    from ..cache import ResultCache
    from ..engines import Engine

FAULTS_ENV = "MINERU_TEST_FAULTS"
SLOW_FAULT_S = 1.0  # MINERU_TEST_FAULTS "slow": seconds the page takes at its engine stage
WORKER_ENV = "MINERU_WORKER"  # set in every worker process's environment


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process (default: this one), 0 if unknown."""
    try:
        import psutil

        return psutil.Process(pid or os.getpid()).memory_info().rss
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - gone, no permission
        return 0
    try:
        with open(f"/proc/{pid or 'self'}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def parse_faults(spec: str | None) -> dict[str, list[str]]:
    faults: dict[str, list[str]] = {}
    for part in (spec or "").split(";"):
        if "=" in part:
            kind, globs = part.split("=", 1)
            faults.setdefault(kind.strip(), []).extend(g for g in globs.split(",") if g)
    return faults


_LEAKED: list[bytearray] = []


def _fault(faults: dict[str, list[str]], pid: str) -> None:
    def hit(kind: str) -> bool:
        return any(fnmatch.fnmatchcase(pid, g) for g in faults.get(kind, ()))

    if hit("hang"):
        while True:  # a native call that never returns: only the main process's kill ends it
            time.sleep(3600)
    if hit("abort"):
        os.abort()
    if hit("kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    if hit("raise"):
        raise RuntimeError("injected fault")
    if hit("leak"):
        _LEAKED.append(bytearray(os.urandom(1)) * (64 << 20))
    if hit("slow"):
        time.sleep(SLOW_FAULT_S)


def _die_with_parent(parent_pid: int, by_thread: bool) -> None:
    """Die when the main process does. Linux: SIGKILL from the kernel, even while stuck in native
    code, when the thread that started us ends; so that is used only when that thread is the
    main thread (it lasts as long as the process). Otherwise (a caller iterating parse() from
    another thread), a watchdog thread checks once a second that the parent is still ours."""
    if not by_thread or not sys.platform.startswith("linux"):
        import threading

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="mineru-parent-watch", daemon=True).start()
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass
    if os.getppid() != parent_pid:
        os._exit(1)  # the main process died while we were starting, before the tie above


def start_engine(spec: WorkerSpec, warn: Callable[[str], None]) -> tuple[Engine, ResultCache | None]:
    """A worker's page engine, its models loaded now rather than on page one, and its result
    cache (None: none), which says through warn what it cannot do. A SetupError when they cannot
    start: the engine's own, or any other error in words. A worker process and a Ray actor start
    with it."""
    try:
        from ..engines import build_engine

        engine = build_engine(spec.engine, threads=spec.threads, spinning=spec.spinning)
        engine.warm_up()
        cache = None
        if spec.cache is not None:
            from ..cache import ResultCache

            c = spec.cache
            cache = ResultCache(path=c.path, near=c.near.value, redis_url=c.redis_url, ttl_s=c.ttl_s, warn=warn)
    except SetupError:
        raise
    except Exception as exc:  # whatever stops the engine loading ends the worker, said in words
        raise SetupError(f"worker could not start the engine: {type(exc).__name__}: {exc}") from exc
    return engine, cache


def worker_main(conn, spec: WorkerSpec, parent_pid: int, from_main_thread: bool) -> None:
    """Entry point of a worker process (started by the main process `parent_pid`, from its
    main thread or another one)."""
    os.environ.update(spec.env)  # before numpy / onnxruntime are imported
    # Ctrl-C and SIGTERM are the main process's business: both reach the whole process group
    # (a terminal, `timeout`, `kill -- -PGID`, systemd), and the main process stops gracefully,
    # letting the pages in flight finish. The pool ends a worker with SIGKILL or a Finish
    # message, and the worker dies with the main process (_die_with_parent), so nothing needs
    # SIGTERM to reach it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent(parent_pid, from_main_thread)
    faults = parse_faults(os.environ.get(FAULTS_ENV))
    send = conn.send

    try:
        engine, cache = start_engine(spec, lambda m: send(Notice(m)))
    except SetupError as exc:
        send(Fatal(str(exc)))
        return

    from ..inputs import OpenDocuments

    docs = OpenDocuments(spec.load)
    size = max(1, spec.page_batch)
    window = max(0.0, spec.batch_wait_ms / 1000.0)
    send(Ready(os.getpid()))
    try:
        while True:
            tasks, last = collect_batch(conn, size, window)
            if tasks:
                run_batch(engine, cache, docs, spec.fingerprints, tasks, faults, send)
            if last:
                break
    except (BrokenPipeError, EOFError, OSError):
        pass  # the main process went away
    finally:
        docs.close()
        if cache is not None:
            cache.close()


def collect_batch(conn, size: int, window: float) -> tuple[list[PageTask], bool]:
    """Block for one task, then take more until `size` of them or none arrived within `window`
    seconds. A solo task comes alone. Returns (tasks, exit_after_them)."""
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        return [], True
    if isinstance(msg, Finish):
        return [], True
    tasks = [msg]
    if msg.solo:
        return tasks, False
    try:
        while len(tasks) < size and conn.poll(window):
            msg = conn.recv()
            if isinstance(msg, Finish):
                return tasks, True
            tasks.append(msg)
    except (EOFError, OSError):
        return tasks, True
    return tasks, False


@dataclass
class _Waiting:
    """A rendered page of the current batch, a cache miss waiting for the engine."""

    task_id: int
    pid: str
    page: Any  # inputs.Page
    image: ImageInfo
    cache: CacheInfo
    t0: float
    timings: dict[str, float] = field(default_factory=dict)
    key: str = ""  # the fingerprint its result is cached under (page_key)


def run_batch(engine, cache, docs, fps: dict[FileKind, str], tasks: list[PageTask], faults, send) -> None:
    """Render + cache lookup per page (hits answered at once), one engine call for the
    misses, then store and answer each. Every problem becomes that page's failed outcome."""
    waiting: list[_Waiting] = []
    for task in tasks:
        out = prepare_page(
            cache, docs, fps, task.source, task.index, lambda s, t=task.task_id: send(StageEntered(t, s))
        )
        if isinstance(out, PageOutcome):
            send(Done(task.task_id, out, rss_bytes(), 0))
        else:
            out.task_id = task.task_id
            waiting.append(out)
    if not waiting:
        return
    n = len(waiting)
    for w in waiting:
        send(StageEntered(w.task_id, Stage.ENGINE, n))
    results, share = parse_waiting(engine, waiting, faults)
    for w, res in zip(waiting, results):
        outcome = finish_page(cache, w, res, share, lambda s, t=w.task_id: send(StageEntered(t, s)))
        send(Done(w.task_id, outcome, rss_bytes(), n))


def parse_waiting(engine, waiting: list[_Waiting], faults) -> tuple[list, float]:
    """The engine step of a batch (the process worker's and the Ray actor's): one EngineResult
    or Exception per waiting page, in order (an injected fault first), and each page's share of
    the engine call's seconds."""
    n = len(waiting)
    results: list = [None] * n
    if faults:
        for i, w in enumerate(waiting):
            try:
                _fault(faults, w.pid)
            except Exception as exc:  # noqa: BLE001 - an injected per-page failure
                results[i] = exc
    todo = [i for i in range(n) if results[i] is None]
    t1 = time.perf_counter()
    pages = [waiting[i].page for i in todo]
    for i, res in zip(todo, engine_batch(engine, [p.image for p in pages], [p.text_layer for p in pages])):
        results[i] = res
    return results, (time.perf_counter() - t1) / max(1, len(todo))  # each page's share of the call


def engine_batch(engine, images: list, texts: list | None = None) -> list:
    """engine.parse_batch(images, texts): one EngineResult or Exception per image, in order;
    `texts` are the pages' text layers (None for images).

    Fallbacks, so the pipeline works with any engine: an engine without parse_batch gets
    engine.parse per page; a parse_batch that raises (against its contract) or answers the
    wrong number of entries gets each page again alone, so one bad page fails only itself."""
    texts = texts if texts is not None else [None] * len(images)
    batch = getattr(engine, "parse_batch", None)
    if batch is not None:
        try:
            out = list(batch(images, texts))
            if len(out) == len(images):
                return out
        except Exception as exc:  # noqa: BLE001
            if len(images) == 1:
                return [exc]
    from ..engines.base import parse_each

    return parse_each(lambda pair: engine.parse(*pair), list(zip(images, texts)))


# The kind of error an unexpected exception in each stage is recorded as.
_KIND = {
    Stage.OPEN: ErrorKind.CORRUPT,
    Stage.RENDER: ErrorKind.CORRUPT,
    Stage.CACHE: ErrorKind.CACHE_ERROR,
    Stage.ENGINE: ErrorKind.ENGINE_ERROR,
    Stage.STORE: ErrorKind.CACHE_ERROR,
}


def _failed(exc: BaseException, stage: Stage, t0: float) -> PageOutcome:
    # The engine, the cache or a native library choked on this page: record it, go on with the batch.
    err = PageError.from_exception(exc, _KIND[stage], stage)
    return PageOutcome.failed(err.kind, err.stage, err.message, time.perf_counter() - t0, transient=err.transient)


def prepare_page(cache, docs, fps: dict[FileKind, str], src, index: int, stage) -> PageOutcome | _Waiting:
    """Render and look up one page: a finished outcome (cache hit, or failed), or a _Waiting
    page for the engine. `fps`: the fingerprint of a page of each kind of file; the page's is
    that of the document opened here (the driver's record has the planned file's: the same
    unless the file changed mid-run, and such a record keeps no content hash). Nothing here raises."""
    pid = page_id(src.rel, index)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    where = Stage.OPEN
    try:
        stage(Stage.RENDER)
        try:
            doc = docs.get(src)
        except OSError as exc:
            raise PageError(ErrorKind.UNREADABLE, Stage.OPEN, str(exc)) from None
        where = Stage.RENDER
        page = doc.page(index)
        timings["load"] = time.perf_counter() - t0
        image = ImageInfo(
            page.image.width, page.image.height, page.sha256, page.original_size[0], page.original_size[1], page.scale
        )
        cache_info = CacheInfo(CacheStatus.OFF if cache is None else CacheStatus.MISS)
        key = ""
        if cache is not None:
            where = Stage.CACHE
            stage(Stage.CACHE)
            t1 = time.perf_counter()
            key = page_key(fps[doc.kind], page)
            hit = cache.lookup(page.image, page.sha256, key)
            timings["cache"] = time.perf_counter() - t1
            if hit is not None:
                cache_info = CacheInfo(CacheStatus(hit.kind), hit.source if hit.kind == "near-hit" else None)
                timings["total"] = time.perf_counter() - t0
                return _ok(page, image, cache_info, hit.payload, timings, {})
        return _Waiting(0, pid, page, image, cache_info, t0, timings, key)
    except Exception as exc:  # noqa: BLE001 - the page boundary: any failure costs this page only
        return _failed(exc, where, t0)


def page_key(fp: str, page) -> str:
    """The fingerprint a page's result is cached under: a page whose trusted text layer the
    engine reads is keyed by that text too (two PDFs can render to the same pixels with
    different text), so a cache hit is never another text's result; one read from its pixels
    whose text layer says it stands upright (the engine then turns it nowhere) apart from the
    same pixels without that word (an image, another PDF)."""
    layer = page.text_layer
    if layer is None:
        return fp
    if layer.trusted:
        return f"{fp}:text:{layer.digest()[:32]}"
    return f"{fp}:upright" if layer.upright else fp


def finish_page(cache, w: _Waiting, result, engine_s: float, stage) -> PageOutcome:
    """The engine's answer for one page (EngineResult or Exception) -> its outcome, stored in
    the cache. `engine_s`: the page's share of its batch's engine call."""
    if isinstance(result, BaseException):
        return _failed(result, Stage.ENGINE, w.t0)
    where = Stage.ENGINE
    try:
        timings = w.timings
        timings["engine"] = engine_s
        timings.update({f"engine.{k}": v for k, v in result.timings.items()})
        payload = {
            "blocks": [b.as_dict() for b in result.blocks],
            "markdown": result.markdown,
            "warnings": result.warnings,
        }
        # A page with a block the engine could not read (its warning says which) is not stored:
        # another run, or this one with --force, reads it again rather than the cached shortfall.
        if cache is not None and not result.counts.get(FAILED_BLOCKS):
            where = Stage.STORE
            stage(Stage.STORE)
            t1 = time.perf_counter()
            cache.store(w.page.image, w.page.sha256, w.key, w.pid, payload)
            timings["store"] = time.perf_counter() - t1
        timings["total"] = time.perf_counter() - w.t0
        return _ok(w.page, w.image, w.cache, payload, timings, dict(result.counts))
    except Exception as exc:  # noqa: BLE001
        return _failed(exc, where, w.t0)


def _ok(
    page, image: ImageInfo, cache_info: CacheInfo, payload: dict, timings: dict[str, float], counts: dict[str, int]
) -> PageOutcome:
    return PageOutcome(
        Status.OK,
        image=image,
        text_layer=None if page.text_layer is None else page.text_layer.info(),
        cache=cache_info,
        blocks=[Block.from_dict(b) for b in payload["blocks"]],
        markdown=payload["markdown"],
        warnings=page.warnings + payload.get("warnings", []),
        timings=timings,
        counts=counts,
    )
