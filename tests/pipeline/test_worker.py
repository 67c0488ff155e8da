"""The worker's page boundary: every problem becomes that page's outcome, filed where it happened."""

from __future__ import annotations

from helpers import EXAMPLES

from mineru_cli.cache import ResultCache
from mineru_cli.config import LoadOptions
from mineru_cli.core.words import CacheStatus, ErrorKind, Stage, Status
from mineru_cli.inputs import OpenDocuments, SourceFile
from mineru_cli.pipeline.messages import PageOutcome
from mineru_cli.pipeline.worker import prepare_page


def _page(docs, src):
    return docs.get(src).page(0)


def test_a_cache_lookup_failure_is_recorded_with_stage_cache(tmp_path):
    src = SourceFile(EXAMPLES / "prose.png", "prose.png", "image")
    docs = OpenDocuments(LoadOptions())
    cache = ResultCache(tmp_path / "cache", warn=lambda m: None)
    try:
        page = _page(docs, src)
        # a row that is JSON but no result (another tool's, a damaged one): the lookup itself fails
        cache.store(page.image, page.sha256, "fp", "other#0", {"not": "a result"})
        stages: list[Stage] = []
        out = prepare_page(cache, docs, "fp", src, 0, stages.append)
        assert isinstance(out, PageOutcome) and out.status is Status.FAILED
        assert (out.error.kind, out.error.stage) == (ErrorKind.CACHE_ERROR, Stage.CACHE), out.error
        assert "KeyError" in out.error.message and stages == [Stage.RENDER, Stage.CACHE]
        # the same page under another fingerprint misses and waits for the engine
        waiting = prepare_page(cache, docs, "other-fp", src, 0, lambda s: None)
        assert not isinstance(waiting, PageOutcome) and waiting.cache.status is CacheStatus.MISS
    finally:
        cache.close()
        docs.close()


def test_a_file_that_cannot_be_decoded_is_corrupt_at_open(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    docs = OpenDocuments(LoadOptions())
    try:
        out = prepare_page(None, docs, "fp", SourceFile(bad, "bad.png", "image"), 0, lambda s: None)
    finally:
        docs.close()
    assert out.status is Status.FAILED and out.error.kind is ErrorKind.CORRUPT, out.error
    assert out.error.stage in (Stage.OPEN, Stage.RENDER)
