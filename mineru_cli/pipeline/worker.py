"""The worker process: one engine, one page at a time, told what to do over a pipe.

Imports only the standard library at module level: the spawned child imports this module
before `worker_main` sets the thread environment, and numpy/onnxruntime read it at import.

Messages, worker -> main (all small; pixels never cross the process boundary):
  ("ready", pid)                      engine loaded, waiting for pages
  ("fatal", message)                  cannot start (bad set-up): the run stops with exit 2
  ("stage", task_id, stage)           entering render | cache | engine | store
  ("warn", message)                   a warning for the user (e.g. the cache degraded)
  ("done", task_id, result, rss)      the page's record fields, and RSS after it
main -> worker: (task_id, SourceFile, page_index) or None (exit).

Test hook (off unless the variable is set; used by tests/test_pipeline.py):
  MINERU_TEST_FAULTS="hang=<glob>;abort=<glob>;kill=<glob>;raise=<glob>;leak=<glob>"
  makes the worker, on a page whose id matches the fnmatch glob, at the engine stage:
  hang (sleep forever), os.abort() (SIGABRT), SIGKILL itself, raise RuntimeError, or keep
  64 MiB more memory alive (for the RSS recycling path). Several globs: "hang=a*,b*".
"""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
import time

FAULTS_ENV = "MINERU_TEST_FAULTS"


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


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the main process dies, even if stuck in native code."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass


def worker_main(conn, spec: dict) -> None:
    """Entry point of a worker process. `spec`: engine, lang, model, model_profile, runtime,
    threads, spinning, env, fp, load (LoadOptions), cache (ResultCache kwargs or None)."""
    os.environ.update(spec["env"])          # before numpy / onnxruntime are imported
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the main process's business
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    faults = parse_faults(os.environ.get(FAULTS_ENV))

    def send(*msg) -> None:
        conn.send(msg)

    try:
        from ..engines import make_engine
        from ..errors import SetupError

        engine = make_engine(spec["engine"], threads=spec["threads"], lang=spec["lang"], say=lambda m: None,
                             model=spec["model"], model_profile=spec["model_profile"], runtime=spec["runtime"],
                             spinning=spec["spinning"])
        engine.warm_up()                     # load the models now, not on page one
        cache = None
        if spec["cache"] is not None:
            from ..cache import ResultCache

            cache = ResultCache(**spec["cache"], warn=lambda m: send("warn", m))
    except SetupError as exc:
        send("fatal", str(exc))
        return
    except Exception as exc:  # noqa: BLE001
        send("fatal", f"worker could not start the engine: {type(exc).__name__}: {exc}")
        return

    from ..inputs import OpenDocuments

    docs = OpenDocuments(spec["load"])
    send("ready", os.getpid())
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg is None:
                break
            task_id, src, index = msg
            result = parse_page(engine, cache, docs, spec["fp"], src, index, faults,
                                lambda stage: send("stage", task_id, stage))
            send("done", task_id, result, rss_bytes())
    except (BrokenPipeError, EOFError, OSError):
        pass   # the main process went away
    finally:
        docs.close()
        if cache is not None:
            cache.close()


def parse_page(engine, cache, docs, fp: str, src, index: int, faults, stage) -> dict:
    """One page -> the fields of its record (status, error, image, cache, blocks, ...).
    Every problem becomes a failed page; nothing here raises."""
    from ..errors import PageError
    from ..records import page_id

    pid = page_id(src.rel, index)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    where = "open"
    try:
        stage("render")
        try:
            doc = docs.get(src)
        except OSError as exc:
            raise PageError("unreadable", "open", str(exc)) from None
        where = "render"
        page = doc.page(index)
        timings["load"] = time.perf_counter() - t0
        image = {"width": page.image.width, "height": page.image.height, "sha256": page.sha256,
                 "original_width": page.original_size[0], "original_height": page.original_size[1],
                 "scale": page.scale}
        payload, cache_info = None, {"status": "off"} if cache is None else {"status": "miss"}
        if cache is not None:
            where = "cache"
            stage("cache")
            hit = cache.lookup(page.image, page.sha256, fp)
            if hit is not None:
                payload, cache_info = hit.payload, {"status": hit.kind}
                if hit.kind == "near-hit":
                    cache_info["from"] = hit.source
        if payload is None:
            where = "engine"
            stage("engine")
            if faults:
                _fault(faults, pid)
            t1 = time.perf_counter()
            result = engine.parse(page.image)
            timings["engine"] = time.perf_counter() - t1
            timings.update({f"engine.{k}": v for k, v in result.timings.items()})
            payload = {"blocks": [b.as_dict() for b in result.blocks], "markdown": result.markdown,
                       "warnings": result.warnings}
            if cache is not None:
                where = "store"
                stage("store")
                cache.store(page.image, page.sha256, fp, pid, payload)
        timings["total"] = time.perf_counter() - t0
        return {"status": "ok", "image": image, "cache": cache_info, "blocks": payload["blocks"],
                "markdown": payload["markdown"], "warnings": page.warnings + payload.get("warnings", []),
                "timings": timings}
    except PageError as exc:
        return {"status": "failed", "error": exc.as_dict(), "timings": {"total": time.perf_counter() - t0}}
    except Exception as exc:  # noqa: BLE001 - the page boundary: any failure costs this page only
        # The engine or a native library choked on this page: record it and go on with the batch.
        stage_ = "engine" if where in ("engine", "store", "cache") else "render"
        return {"status": "failed",
                "error": {"kind": "engine_error" if stage_ == "engine" else "corrupt",
                          "stage": stage_, "message": f"{type(exc).__name__}: {exc}"},
                "timings": {"total": time.perf_counter() - t0}}
