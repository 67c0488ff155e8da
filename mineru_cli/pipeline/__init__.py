"""The staged multiprocess pipeline behind `mineru parse`.

The main process discovers, plans, checks resume and writes the journal (the only writer).
Worker processes (spawned: ONNX Runtime and fork do not mix) each hold one engine and up to
`--page-batch` pages at a time, over one pipe each: render -> cache lookup per page, one
`engine.parse_batch` call for the cache misses, then cache store per page. The main process
keeps the deadlines, kills and replaces hung or dead workers, and retries the pages of a lost
batch one by one so only the culprit gets the failure record. See executor.py (the interface
the runner relies on), scheduler.py (the one driver loop), pool.py and ray_executor.py (its
transports), messages.py and worker.py.
"""

from .executor import Executor, Finished, PageWork
from .messages import PageOutcome, WorkerSpec
from .pool import PoolStats, WorkerPool

__all__ = ["Executor", "Finished", "PageOutcome", "PageWork", "PoolStats", "WorkerPool", "WorkerSpec"]
