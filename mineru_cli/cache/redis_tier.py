"""The shared tier: exact-key results in Redis with a TTL, so machines share work.

Only exact keys (fingerprint, pixel sha256) live here; near-duplicate search
stays local, where the verification thumbnails are.  Redis is an optimisation:
any error (down, killed mid-run, timeout) disables the tier for the rest of
the run after one warning, and the run carries on with the local tier.  A
server that answers a write with an error (a read-only replica, a user whose
ACL allows reads only, a full Redis that evicts nothing) stops the writes
only: what it holds is still read.  A value under a page's key that is no
result of ours (damaged, another program's, of another Redis type) is a miss
for that page alone.  A server that requires a password, reached without one,
is said so in our words (failure), with where the password goes in the URL.
"""

from __future__ import annotations

import json
from typing import Callable

from ..units import url_shown
from .store import SCHEMA_VERSION, digest

KEY_PREFIX = f"mineru-cli:v{SCHEMA_VERSION}"


def failure(exc: Exception, client, url: str) -> str:
    """Why the server at `url` failed `client` (a redis.Redis made from it), as messages say it:
    its type and Redis's words, or, for a server that requires a password reached without one
    (needs_password), that and where the password goes."""
    if needs_password(exc, client):
        return f"the server requires a password: {give_password(url)}"
    return f"{type(exc).__name__}: {exc}"


def needs_password(exc: Exception, client) -> bool:
    """Whether `exc` is a server that requires a password refusing `client`, which gave none.
    Its words do not say so: `HELLO must be called with the client already authenticated,
    otherwise the HELLO AUTH <user> <pass> option can be used ...` to redis-py's RESP3 handshake,
    `Authentication required.` (NOAUTH) to a command."""
    import redis

    if not isinstance(exc, redis.AuthenticationError) or client is None:
        return False
    return not client.connection_pool.connection_kwargs.get("password")


def give_password(url: str) -> str:
    """How to give the server at `url` its password, the password shown as `***`."""
    return f"give it in --cache-url, {url_with_password(url)} with the password for ***"


def url_with_password(url: str) -> str:
    """`url` (a Redis URL without a password) with one, shown as `***` (url_shown): in the user
    part of a redis:// or rediss:// URL (`redis://:***@host:6379/0`, `redis://app:***@host`), as
    `?password=` in a unix:// one (`unix:///run/redis.sock?password=***`)."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() == "unix" or not sep:
        return url_shown(url) + ("&" if "?" in url else "?") + "password=***"
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    user, at, host = rest[:end].rpartition("@")
    return url_shown(f"{scheme}://{user.split(':', 1)[0]}:***@{host}{rest[end:]}")


class RedisTier:
    def __init__(self, url: str, ttl_s: int, warn: Callable[[str], None] = print, local: bool = True):
        """local: whether the run has a local cache to go on with when this tier fails."""
        self.url, self.ttl_s, self._warn = url, int(ttl_s), warn
        self._shown = url_shown(url)  # the URL in warnings: never its password
        self._then = "continuing with the local cache only" if local else "running without a cache"
        self._client = None
        try:
            import redis
        except ImportError:
            self._fail("the redis package is not installed (pip install 'mineru-cli[redis]')")
            return
        self._errors = (redis.RedisError, OSError)
        self._refused = redis.ResponseError  # the server's own answer: it is up, it refuses this
        self._writes = True
        # Short timeouts: a dead server must cost one warning, not minutes.
        self._client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)

    @property
    def active(self) -> bool:
        return self._client is not None

    def _fail(self, why: str) -> None:
        self._warn(f"shared cache {self._shown} unavailable ({why}); {self._then}")
        self.close()

    @staticmethod
    def key(fingerprint: str, pixel_sha256: str) -> str:
        return f"{KEY_PREFIX}:{fingerprint}:{pixel_sha256}"

    def get(self, fingerprint: str, pixel_sha256: str) -> tuple[str, str, int, int] | None:
        """(page_id, payload JSON, width, height) or None."""
        if self._client is None:
            return None
        key = self.key(fingerprint, pixel_sha256)
        try:
            raw = self._client.get(key)
        except self._refused as e:
            if not str(e).startswith("WRONGTYPE"):
                self._fail(f"{type(e).__name__}: {e}")
                return None
            # a list, hash, ... under the page's key (another program's): the server is fine and this
            # key holds no result; the page's store (SET) replaces it
            self._warn(
                f"shared cache {self._shown}: {key} holds no page result ({e}); ignored (the page is parsed again)"
            )
            return None
        except self._errors as e:
            self._fail(failure(e, self._client, self.url))
            return None
        if raw is None:
            return None
        try:
            v = json.loads(raw)
            page_id, payload = v["page_id"], v["payload"]
            if not (isinstance(page_id, str) and isinstance(payload, str)) or digest(payload) != v["digest"]:
                return None
            return page_id, payload, int(v["width"]), int(v["height"])
        except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: int() of 1e400
            return None  # someone else's or damaged value: a miss, never a wrong result

    def put(
        self, fingerprint: str, pixel_sha256: str, page_id: str, payload_json: str, width: int, height: int
    ) -> None:
        if self._client is None or not self._writes:
            return
        value = json.dumps(
            {
                "page_id": page_id,
                "payload": payload_json,
                "digest": digest(payload_json),
                "width": width,
                "height": height,
            }
        )
        try:
            self._client.set(self.key(fingerprint, pixel_sha256), value, ex=self.ttl_s)
        except self._refused as e:
            self._writes = False
            self._warn(f"shared cache {self._shown} refuses writes ({e}); its results are still read, none are stored")
        except self._errors as e:
            self._fail(failure(e, self._client, self.url))

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection must not fail the run
                pass
            self._client = None
