"""The worker's page boundary: every problem becomes that page's outcome, filed where it happened."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from helpers import EXAMPLES

from mineru_cli.cache import ResultCache
from mineru_cli.config import FileKind, LoadOptions
from mineru_cli.core.words import CacheStatus, ErrorKind, Stage, Status
from mineru_cli.inputs import OpenDocuments, SourceFile
from mineru_cli.pipeline.messages import PageOutcome
from mineru_cli.pipeline.worker import prepare_page

FPS = {kind: "fp" for kind in FileKind}  # the fingerprint of a page of each kind of file


def _page(docs, src):
    return docs.get(src).page(0)


class _BrokenCache:
    """A cache whose lookup raises (ResultCache turns its own problems into misses; this is the
    page boundary's last line for what it does not foresee)."""

    def lookup(self, *args):
        raise RuntimeError("the cache broke")


def test_a_cache_lookup_failure_is_recorded_with_stage_cache():
    src = SourceFile(EXAMPLES / "prose.png", "prose.png", "image")
    docs = OpenDocuments(LoadOptions())
    try:
        stages: list[Stage] = []
        out = prepare_page(_BrokenCache(), docs, FPS, src, 0, stages.append)
        assert isinstance(out, PageOutcome) and out.status is Status.FAILED
        assert (out.error.kind, out.error.stage) == (ErrorKind.CACHE_ERROR, Stage.CACHE), out.error
        assert "the cache broke" in out.error.message and stages == [Stage.RENDER, Stage.CACHE]
    finally:
        docs.close()


def test_a_cached_row_that_is_no_result_is_a_miss(tmp_path):
    """A row that is JSON but no page result (another tool's, one written by hand) failed its
    page on every run; the page now waits for the engine, and the run says why once."""
    src = SourceFile(EXAMPLES / "prose.png", "prose.png", "image")
    docs = OpenDocuments(LoadOptions())
    warnings: list[str] = []
    cache = ResultCache(tmp_path / "cache", warn=warnings.append)
    try:
        page = _page(docs, src)
        cache.store(page.image, page.sha256, "fp", "other#0", {"not": "a result"})
        waiting = prepare_page(cache, docs, FPS, src, 0, lambda s: None)
        assert not isinstance(waiting, PageOutcome) and waiting.cache.status is CacheStatus.MISS
        assert warnings == ["local cache entry other#0 is not a page result; ignored (the page is parsed again)"]
    finally:
        cache.close()
        docs.close()


def test_a_file_that_cannot_be_decoded_is_corrupt_at_open(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    docs = OpenDocuments(LoadOptions())
    try:
        out = prepare_page(None, docs, FPS, SourceFile(bad, "bad.png", "image"), 0, lambda s: None)
    finally:
        docs.close()
    assert out.status is Status.FAILED and out.error.kind is ErrorKind.CORRUPT, out.error
    assert out.error.stage in (Stage.OPEN, Stage.RENDER)


# -- the worker's batching pieces, in-process ------------------------------------------------


class _Result:
    def __init__(self, tag):
        self.tag = tag


class _PageOnly:
    """An engine without parse_batch: the worker loops over parse."""

    def parse(self, image, text=None):
        if image == "bad":
            raise ValueError("bad page")
        return _Result(image)


class _Batching(_PageOnly):
    def __init__(self, misbehave=None):
        self.calls, self.misbehave = [], misbehave

    def parse_batch(self, images, texts=None):
        self.calls.append(list(images))
        if self.misbehave == "raise":
            raise RuntimeError("whole batch")
        if self.misbehave == "short":
            return [_Result(images[0])]
        return [ValueError("bad page") if i == "bad" else _Result(i) for i in images]


@pytest.mark.parametrize(
    "engine",
    [_PageOnly(), _Batching(), _Batching("raise"), _Batching("short")],
    ids=["no-parse_batch", "parse_batch", "batch-raises", "batch-short"],
)
def test_engine_batch_gives_one_entry_per_page_and_isolates_failures(engine):
    from mineru_cli.pipeline.worker import engine_batch

    out = engine_batch(engine, ["a", "bad", "c"])
    assert [o.tag for o in (out[0], out[2])] == ["a", "c"]
    assert isinstance(out[1], ValueError)
    if isinstance(engine, _Batching):
        assert engine.calls[0] == ["a", "bad", "c"]  # asked once, all together


def test_collect_batch_takes_up_to_n_within_the_window():
    from mineru_cli.pipeline.messages import Finish, PageTask
    from mineru_cli.pipeline.worker import collect_batch

    main, child = mp.Pipe(duplex=True)
    for i in range(5):
        main.send(PageTask(i, "src", i))
    tasks, last = collect_batch(child, 3, 0.05)
    assert [t.task_id for t in tasks] == [0, 1, 2] and not last  # full
    tasks, last = collect_batch(child, 3, 0.05)
    assert [t.task_id for t in tasks] == [3, 4] and not last  # the window passed
    main.send(PageTask(5, "src", 5, solo=True))
    main.send(PageTask(6, "src", 6))
    tasks, _ = collect_batch(child, 3, 0.05)
    assert [t.task_id for t in tasks] == [5]  # solo: alone
    main.send(Finish())
    tasks, last = collect_batch(child, 3, 0.05)
    assert [t.task_id for t in tasks] == [6] and last  # exit after this batch


@pytest.mark.parametrize("failed_blocks", [0, 1])
def test_a_page_with_a_block_the_engine_could_not_read_is_not_cached(tmp_path, failed_blocks):
    """Such a page is ok with a warning; stored, it would be every later run's answer (--force
    too) instead of a new read."""
    from mineru_cli.core.blocks import Block
    from mineru_cli.engines.base import EngineResult
    from mineru_cli.pipeline.worker import finish_page

    src = SourceFile(EXAMPLES / "prose.png", "prose.png", "image")
    docs = OpenDocuments(LoadOptions())
    cache = ResultCache(tmp_path / "cache")
    try:
        waiting = prepare_page(cache, docs, FPS, src, 0, lambda s: None)
        result = EngineResult(
            [Block("text", (1, 2, 30, 40), "kept")],
            "kept\n",
            warnings=["block 1 (table): the VLM could not read it (RuntimeError: no memory); left empty"],
            counts={"failed_blocks": failed_blocks} if failed_blocks else {},
        )
        out = finish_page(cache, waiting, result, 1.0, lambda s: None)
        assert out.status is Status.OK and out.warnings == result.warnings
        again = prepare_page(cache, docs, FPS, src, 0, lambda s: None)
        hit = isinstance(again, PageOutcome) and again.cache.status is CacheStatus.HIT
        assert hit is (not failed_blocks)
    finally:
        cache.close()
        docs.close()


@pytest.mark.parametrize(("took", "said"), [(0.31, "0.3 s"), (9.96, "10.0 s"), (612.4, "612 s")])
def test_a_timeout_record_says_how_long_the_page_had_in_tenths_under_ten_seconds(took, said):
    """--page-timeout 0.3 recorded `no result after 0 s (--page-timeout 0.3 s per page)`."""
    from mineru_cli.pipeline.blame import Task, timed_out

    task = Task(1, item=None, solo=True, sent=100.0, started=100.0, stage=Stage.ENGINE)  # the item is not read
    out = timed_out(task, 100.0 + took, 0.3)
    assert out.status is Status.TIMEOUT and out.error is not None
    assert out.error.message.startswith(f"no result after {said} (--page-timeout 0.3 s per page) in the engine stage")
