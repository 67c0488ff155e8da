"""Parsing of human durations ("30d", "2h") and sizes ("2GB", "500MiB"), sizes in words, and values
as messages show them."""

from __future__ import annotations

import math
import re
from typing import Any

_DURATION = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gib": 1024**3,
    "tib": 1024**4,
}


def shown(value: Any, limit: int = 40) -> str:
    """A value as a refusal repeats it: its repr, cut to its first `limit` characters and "..."
    (a 5,000-digit value is not repeated whole)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def url_shown(url: str) -> str:
    """A URL as messages show it: its password (`user:PASSWORD@`, `?password=`) as `***`, so
    a warning in a cron mail or a log never carries a credential."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # no URL (a refused --cache-url): what looks like ":PASSWORD@"
        return re.sub(r":[^:@]*@", ":***@", url)
    end = min((i for i in (rest.find(c) for c in "?#") if i >= 0), default=len(rest))
    # the user part runs to the last "@" ahead of the query: a password may hold an unescaped
    # "@" or "/" (a base64 one), which makes the URL no Redis URL, whose refusal shows it
    user, at, host = rest[:end].rpartition("@")
    if at and ":" in user:
        user = user.split(":", 1)[0] + ":***"
    tail = re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", rest[end:])
    return f"{scheme}://{user}{at}{host}{tail}"


def parse_duration(text: str | int | float) -> float:
    """Seconds in '90', '90s', '15m', '2h', '30d', '1w'."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if not m:
        raise ValueError(f"not a duration: {shown(text)} (use e.g. 90s, 15m, 2h, 30d)")
    return float(m.group(1)) * _DURATION[m.group(2) or "s"]


def parse_size(text: str | int) -> int:
    """Bytes in '2GB' (10^9), '2GiB' (2^30), '500MB', '1048576'."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _SIZE:
        raise ValueError(f"not a size: {shown(text)} (use e.g. 500MB, 2GB, 1GiB)")
    size = float(m.group(1)) * _SIZE[m.group(2)]
    if not math.isfinite(size):  # past a float's range: no whole number of bytes
        raise ValueError(f"not a size: {shown(text)} is too large (use e.g. 500MB, 2GB, 1GiB)")
    return int(size)


def human_bytes(n: float) -> str:
    """A byte count in decimal units: "512 B", "45.1 KB", "2.3 GB"."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
