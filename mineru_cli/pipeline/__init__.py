"""The staged multiprocess pipeline behind `mineru parse`.

The main process discovers, plans, checks resume and writes the journal (the only writer);
worker processes (spawned: ONNX Runtime and fork do not mix) each hold one engine and do
load/render -> cache lookup -> engine -> cache store for one page at a time. See pool.py.
"""

from .pool import PageFault, PoolStats, WorkerPool

__all__ = ["PageFault", "PoolStats", "WorkerPool"]
