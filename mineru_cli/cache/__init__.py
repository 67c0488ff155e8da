"""Result cache: exact and verified near-duplicate reuse of page results.

Local tier: SQLite in the user cache dir (store.py).  Shared tier: Redis with a
TTL (redis_tier.py).  Near-duplicate verification: similarity.py.  Standalone:
nothing here imports the runner or the engines.
"""

from .result_cache import CacheHit, ResultCache

__all__ = ["CacheHit", "ResultCache"]
