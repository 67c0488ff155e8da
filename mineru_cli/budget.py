"""The CPU budget: how many cores this process may use, and how engines split them."""

from __future__ import annotations

import math
import os
from pathlib import Path


def available_cpus() -> int:
    """Cores we may use: the affinity mask, further limited by a cgroup v2 CPU quota.

    os.cpu_count() counts the host's cores, which oversubscribes a container or a taskset."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)
