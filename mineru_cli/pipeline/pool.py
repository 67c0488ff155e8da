"""The process executor: worker processes on this machine, each fed small batches of pages
over its own pipe. The loop that decides (dispatch, deadlines, blame, retries, the stop,
recycling) is scheduler.py's; this module is its transport for local processes.

Design
  * One duplex pipe per worker (no shared queue: a worker killed while holding a shared
    queue's lock would wedge every other worker). The main process waits on all pipes and
    all process sentinels at once (`multiprocessing.connection.wait`).
  * Workers are spawned (never forked: ONNX Runtime and fork do not mix) with their thread
    variables in the environment before they import numpy / onnxruntime, and die with the
    main process. Pixels never cross the pipe: pages go as (source, page index).
  * The worker reports each page's stages itself (StageEntered), so the scheduler's clocks
    are the worker's own; it batches the pages it holds into one engine call (worker.py), so
    the scheduler tops it up as it answers (`refill`).
  * A worker that dies (segfault, abort, SIGKILL, OOM killer) is seen through its sentinel /
    pipe EOF: Lost, with its exit code or signal. Its RSS is measured from outside (busy
    workers too).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import wait
from typing import Iterator

from .blame import Task
from .messages import Finish, PageTask, WorkerSpec
from .scheduler import Event, Lost, PoolStats, Scheduler
from .worker import WORKER_ENV, rss_bytes, worker_main

_HOST = socket.gethostname()

__all__ = ["PoolStats", "WorkerPool", "describe_exit", "in_worker"]

_SPAWN_LOCK = threading.Lock()


def in_worker() -> bool:
    """Whether this process is a worker (spawned with WORKER_ENV set). This process's own
    environment holds WORKER_ENV too while one of its threads spawns a worker: read under the
    spawn lock, another thread never takes that moment for being a worker."""
    with _SPAWN_LOCK:
        return bool(os.environ.get(WORKER_ENV))


def _script_hint() -> str:
    """When a user's script drives the run: the usual cause of workers that die at start."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if getattr(main, "__file__", None) and not (spec and spec.name.startswith("mineru_cli")):
        return (
            '; a script that calls mineru_cli.parse() must call it under `if __name__ == "__main__":` '
            "(worker processes are spawned and import the script again)"
        )
    return ""


def describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (killed: out of memory?)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exit code {code}"


class _Proc:
    def __init__(self, proc, conn):
        self.proc, self.conn = proc, conn


class ProcessTransport:
    """Worker processes on this machine (see scheduler.Transport)."""

    refill = True  # the worker batches what it holds: top it up as it answers
    noun, nouns = "worker process", "worker processes"

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.ctx = mp.get_context("spawn")

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def start(self, slot: int) -> _Proc:
        parent, child = self.ctx.Pipe(duplex=True)
        main_thread = threading.current_thread() is threading.main_thread()
        proc = self.ctx.Process(
            target=worker_main,
            args=(child, self.spec, os.getpid(), main_thread),
            daemon=True,
            name=f"mineru-worker-{slot}",
        )
        # The child inherits this environment at exec: thread counts are in place before the
        # interpreter imports numpy / onnxruntime (even via the __main__ re-import of spawn).
        # WORKER_ENV tells a script that the spawn re-import runs (one without a __main__ guard)
        # that it is inside our worker. The lock keeps two pools in two threads from mixing envs.
        env = {**self.spec.env, WORKER_ENV: "1"}
        with _SPAWN_LOCK:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                proc.start()
            except BaseException:
                parent.close()  # the system refused the process: its pipe is not left open
                child.close()
                raise
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        child.close()
        return _Proc(proc, parent)

    def send(self, h: _Proc, tasks: list[Task]) -> tuple[int, list[Event]]:
        for i, t in enumerate(tasks):
            try:
                h.conn.send(PageTask(t.id, t.item.src, t.item.index, t.solo))
            except OSError:  # died while idle: its sentinel will tell
                return i, []
        return len(tasks), []

    def wait(self, handles: list[_Proc], timeout: float) -> None:
        waitables = [h.conn for h in handles] + [h.proc.sentinel for h in handles]
        if waitables:
            wait(waitables, timeout)
        else:
            time.sleep(timeout)

    def receive(self, h: _Proc) -> Iterator[Event]:
        try:
            while h.conn.poll():
                yield h.conn.recv()
        except (EOFError, OSError):
            yield Lost(describe_exit(self._reap(h, kill=True)))
            return
        if not h.proc.is_alive():
            yield Lost(describe_exit(self._reap(h, kill=True)))

    def _reap(self, h: _Proc, kill: bool) -> int | None:
        if kill and h.proc.is_alive():
            h.proc.kill()
        h.proc.join(timeout=5)
        if h.proc.is_alive():  # did not exit when asked: no more patience
            h.proc.kill()
            h.proc.join(timeout=5)
        try:
            h.conn.close()
        except OSError:
            pass
        return h.proc.exitcode

    def stop(self, h: _Proc, kill: bool) -> None:
        if not kill:
            try:
                h.conn.send(Finish())
            except OSError:
                pass
        self._reap(h, kill)

    def kill_now(self, h: _Proc) -> None:
        h.proc.kill()

    def rss(self, h: _Proc) -> int | None:
        return rss_bytes(h.proc.pid) if h.proc.pid else 0

    def node(self, h: _Proc) -> str | None:
        return _HOST  # every worker process runs on this machine

    def start_hint(self) -> str:
        return _script_hint()


class WorkerPool(Scheduler):
    """The process executor (see executor.Executor): parses PageWork items on worker processes
    and yields a Finished for each page as it finishes, in completion order."""

    def make_transport(self) -> ProcessTransport:
        return ProcessTransport(self.spec)
