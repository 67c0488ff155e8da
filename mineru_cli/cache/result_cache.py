"""ResultCache: the one object the runner talks to.

Lookup order: local exact key -> shared (Redis) exact key -> local verified
near-duplicate.  Exact answers are preferred over near ones, so Redis is asked
before the (more expensive, approximate) near search.  A cache problem of any
kind is reported once through ``warn`` and turns into a miss: the cache can
make a run faster, never wrong and never failed.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np
from PIL import Image

from . import similarity as sim
from .node import node_local_dir
from .redis_tier import RedisTier
from .store import SqliteStore, UnusableCache, in_words


@dataclass(frozen=True)
class CacheHit:
    kind: Literal["hit", "near-hit"]
    payload: dict
    source: str  # page id the result was computed for


def page_result(payload_json: str) -> dict | None:
    """The cached text as a page's result (what the worker stores: blocks, markdown, warnings),
    or None where it is not one. A checksum only says the text is what was written; a value
    written by another program, by hand or under a clashing key can still be JSON of another
    shape, which as a hit would fail its page on every run."""
    try:
        payload = json.loads(payload_json)
    except ValueError:
        return None
    if not (
        isinstance(payload, dict)
        and isinstance(payload.get("blocks"), list)
        and isinstance(payload.get("markdown"), str)
        and isinstance(payload.get("warnings", []), list)
        and all(isinstance(w, str) for w in payload.get("warnings", []))
        and all(_is_block(b) for b in payload["blocks"])
    ):
        return None
    return payload


def _is_block(d: object) -> bool:
    """Whether `d` is a record's block (core.blocks.Block.as_dict's fields, of their types)."""
    if not (isinstance(d, dict) and isinstance(d.get("type"), str) and isinstance(d.get("text", ""), str)):
        return False
    box, score = d.get("bbox"), d.get("score")
    return (
        isinstance(box, list) and len(box) == 4 and all(_finite(v) for v in box) and (score is None or _finite(score))
    )


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _said(e: Exception) -> str:
    """A local tier's error in a warning: UnusableCache's own words (they name the folder or
    file and why), an OSError's path and why in words, any other error with its type."""
    if isinstance(e, UnusableCache):
        return str(e)
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {in_words(e)}"
    return f"{type(e).__name__}: {e}"


class ResultCache:
    def __init__(
        self,
        path: Path | None,
        near: str = "verify",
        redis_url: str | None = None,
        ttl_s: int = 7200,
        warn: Callable[[str], None] = print,
    ):
        if near not in ("off", "verify"):
            raise ValueError(f"near must be 'off' or 'verify', not {near!r}")
        self.near = near
        self._warned: set[str] = set()
        self._user_warn = warn
        self._store: SqliteStore | None = None
        self._redis: RedisTier | None = None
        # hashes of the last few looked-up pages, so store() after a miss does not redo them
        self._memo: OrderedDict[str, tuple[np.ndarray | None, int]] = OrderedDict()
        if path is None:
            return  # disabled: every lookup misses, store is a no-op
        try:
            self._store = SqliteStore(node_local_dir(Path(path)), self._warn)
        except Exception as e:  # noqa: BLE001 - unusable directory, disk full, ...
            self._warn(f"local cache {path} unavailable ({_said(e)}); running without it")
        if redis_url:
            self._redis = RedisTier(redis_url, ttl_s, self._warn, local=self._store is not None)

    def _warn(self, msg: str) -> None:
        if msg not in self._warned:
            self._warned.add(msg)
            self._user_warn(msg)

    def _local_failed(self, e: Exception) -> None:
        self._warn(f"local cache error ({_said(e)}); this page is treated as a miss")

    def _result(self, payload_json: str, page_id: str, tier: str) -> dict | None:
        """The entry's page result, or None (a miss, said once per entry) where it is none."""
        payload = page_result(payload_json)
        if payload is None:
            self._warn(f"{tier} cache entry {page_id} is not a page result; ignored (the page is parsed again)")
        return payload

    def _hashes(self, image: Image.Image, pixel_sha256: str) -> tuple[np.ndarray | None, int]:
        """The page's verification thumbnail and pHash; (None, 0) for a page that gets no
        near-duplicate search (sim.verification_thumb)."""
        if pixel_sha256 in self._memo:
            return self._memo[pixel_sha256]
        thumb = sim.verification_thumb(image)
        out = (thumb, 0 if thumb is None else sim.phash64(thumb))
        self._memo[pixel_sha256] = out
        while len(self._memo) > 4:
            self._memo.popitem(last=False)
        return out

    # -- API ------------------------------------------------------------------
    def lookup(self, image: Image.Image, pixel_sha256: str, fingerprint: str) -> CacheHit | None:
        if self._store is None and self._redis is None:
            return None
        if self._store is not None:
            try:
                e = self._store.get(fingerprint, pixel_sha256)
                if e is not None and (payload := self._result(e.payload, e.page_id, "local")) is not None:
                    return CacheHit("hit", payload, e.page_id)
            except Exception as ex:  # noqa: BLE001 - a failing local tier degrades to a miss
                self._local_failed(ex)
        if self._redis is not None:
            got = self._redis.get(fingerprint, pixel_sha256)
            if got is not None:
                page_id, payload_json, _, _ = got
                if (payload := self._result(payload_json, page_id, "shared")) is not None:
                    self._fill_local(image, pixel_sha256, fingerprint, page_id, payload_json)
                    return CacheHit("hit", payload, page_id)
        if self.near == "verify" and self._store is not None:
            try:
                return self._near(image, pixel_sha256, fingerprint)
            except Exception as ex:  # noqa: BLE001 - a failing local tier degrades to a miss
                self._local_failed(ex)
        return None

    def _near(self, image: Image.Image, pixel_sha256: str, fingerprint: str) -> CacheHit | None:
        thumb, ph = self._hashes(image, pixel_sha256)
        store = self._store
        if thumb is None or store is None:
            return None
        cands = [
            c[1]
            for c in store.candidates(fingerprint, ph, sim.PHASH_RADIUS)
            if sim.aspect_close(c[2], c[3], image.width, image.height)
        ][: sim.MAX_PHASH_CANDIDATES]
        mine = sim.coarse_sig(thumb)
        close = sorted(
            (sim.coarse_dist(mine, sig), id_) for id_, sig in store.coarse_of(cands).items() if sig
        )  # rows stored without a thumbnail have no signature either
        query_thumbs: dict[tuple[int, int], np.ndarray] = {}
        for dist, id_ in close[: sim.MAX_CANDIDATES]:
            if dist > sim.COARSE_MAX:
                break
            got = store.get_by_id(id_)
            if got is None:
                continue
            entry, tw, th, blob = got
            if tw < sim.MIN_DETAIL * thumb.shape[1]:
                # a cached copy of lower resolution would verify the page at its own coarser
                # scale, where the query's small print may no longer show
                continue
            if (tw, th) not in query_thumbs:
                query_thumbs[(tw, th)] = thumb if thumb.shape[:2] == (th, tw) else sim.make_thumb(image, (tw, th))
            cached = sim.unpack_thumb(blob, tw, th)
            if not sim.compare(cached, query_thumbs[(tw, th)]).ok:
                continue
            payload = self._result(entry.payload, entry.page_id, "local")
            if payload is None:
                continue
            scale = tw / entry.width
            if not (sim.lines_tall_enough(payload, scale) and sim.lines_contrasted(payload, cached, scale)):
                continue  # text the pixel check cannot vouch for: small print, or told apart by colour
            if (entry.width, entry.height) != (image.width, image.height):
                payload = sim.rescale_payload(
                    payload, image.width / entry.width, image.height / entry.height, image.width, image.height
                )
            return CacheHit("near-hit", payload, entry.page_id)
        return None

    def _fill_local(self, image, pixel_sha256, fingerprint, page_id, payload_json) -> None:
        if self._store is None:
            return
        try:
            thumb, ph = self._hashes(image, pixel_sha256)
            # no thumbnail (sim.verification_thumb): a row for exact hits only, pHash 0, no signature
            tw, th, coarse, packed = (
                (0, 0, b"", b"")
                if thumb is None
                else (thumb.shape[1], thumb.shape[0], sim.coarse_sig(thumb), sim.pack_thumb(thumb))
            )
            self._store.put(
                fingerprint, pixel_sha256, page_id, image.width, image.height, ph, payload_json, tw, th, coarse, packed
            )
        except Exception as ex:  # noqa: BLE001 - a failing local tier loses only this store
            self._local_failed(ex)

    def store(self, image: Image.Image, pixel_sha256: str, fingerprint: str, page_id: str, payload: dict) -> None:
        if self._store is None and self._redis is None:
            return
        payload_json = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        # a file name that is not UTF-8 arrives with lone surrogates, which SQLite and Redis
        # refuse; the id is only told back as a near-hit's source, so a readable stand-in will do
        page_id = page_id.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        self._fill_local(image, pixel_sha256, fingerprint, page_id, payload_json)
        if self._redis is not None:
            self._redis.put(fingerprint, pixel_sha256, page_id, payload_json, image.width, image.height)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._redis is not None:
            self._redis.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
