"""Page batches in the worker pool: --page-batch N gives the same records as one page at a time,
at most N pages are held per worker, and a page that hangs or kills its worker inside a batch
costs only itself (the batch is retried page by page). The worker's batching pieces on their
own are in test_worker.py.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from helpers import mineru, read_journal
from PIL import Image
from test_pipeline import events, text_page, write_pages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vlm"))
from tiny_fixtures import tiny_vlm  # noqa: F401  (a fixture: the tiny MinerU2.5-shaped model)

pytestmark = pytest.mark.e2e  # runs the real CLI / worker pool on real pages (make test-fast skips it)


def stable(path: Path) -> dict[str, dict]:
    """page id -> the record without what may differ between runs (timings, time written)."""
    return {r["id"]: {k: v for k, v in r.items() if k not in ("timings", "created")} for r in read_journal(path)}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Six single pages plus a two-frame TIFF: 8 pages, batches of 3 = 3 + 3 + 2."""
    return write_pages(tmp_path_factory.mktemp("batching") / "in")


@pytest.fixture(scope="module")
def one_at_a_time(pages, record_validator):
    """The reference: one worker, --page-batch 1 (the ocr engine's default)."""
    out = pages.parent / "batch1.jsonl"
    r = mineru(
        "parse",
        str(pages),
        "--out",
        str(out),
        "--no-cache",
        "--engine",
        "ocr",
        "--cpus",
        "2",
        "--workers",
        "1",
        "--page-batch",
        "1",
        "--log-json",
        cwd=pages.parent,
    )
    assert r.returncode == 0, r.stderr
    read_journal(out, record_validator)
    got = stable(out)
    assert len(got) == 8 and all(v["status"] == "ok" for v in got.values())
    assert all(e["batch"] == 1 for e in events(r.stderr) if e["event"] == "page")
    return got


def test_page_batch_3_gives_the_same_records_and_holds_at_most_3(pages, one_at_a_time, tmp_path, record_validator):
    out = tmp_path / "batch3.jsonl"
    r = mineru(
        "parse",
        str(pages),
        "--out",
        str(out),
        "--no-cache",
        "--engine",
        "ocr",
        "--cpus",
        "2",
        "--workers",
        "1",
        "--page-batch",
        "3",
        "--log-json",
        cwd=tmp_path,
        env={"MINERU_HEARTBEAT_S": "0.1"},
    )
    assert r.returncode == 0, r.stderr
    read_journal(out, record_validator)
    assert stable(out) == one_at_a_time  # batch-invariant, apart from timings
    evs = events(r.stderr)
    sizes = [e["batch"] for e in evs if e["event"] == "page"]
    # Pages of one engine call each report its size. The first batch is deterministic (3 pages
    # sent at once to the fresh worker); later ones are 3 + 2 unless the main process was slower
    # than --batch-wait-ms to refill the worker.
    assert len(sizes) == 8 and sizes[:3] == [3, 3, 3] and max(sizes) <= 3
    assert all(sizes.count(k) % k == 0 for k in set(sizes))
    beats = [e for e in evs if e["event"] == "heartbeat"]
    assert beats and all(max(e["inflight"], default=0) <= 3 for e in beats)
    summary = [e for e in evs if e["event"] == "summary"][0]
    assert summary["plan"]["page_batch"] == 3 and summary["retried"] == 0
    stages = summary["stages"]
    assert {"render", "engine", "engine.ocr", "engine.layout"} <= set(stages)
    assert 0 < stages["engine"]["share"] <= 1 and summary["pages_per_s"] > 0
    info = [e["message"] for e in evs if e["event"] == "info"]
    assert any("page batch 3" in m for m in info)


def test_cache_hits_in_a_batch_answer_at_once(pages, one_at_a_time, tmp_path):
    out = tmp_path / "cached.jsonl"
    args = [
        "parse",
        str(pages),
        "--out",
        str(out),
        "--engine",
        "ocr",
        "--cpus",
        "2",
        "--workers",
        "1",
        "--page-batch",
        "3",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--log-json",
    ]
    first = mineru(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    r = mineru(*args, "--force", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = stable(out)
    assert {r["cache"]["status"] for r in recs.values()} == {"hit"}
    strip = lambda d: {k: {f: v for f, v in rec.items() if f != "cache"} for k, rec in d.items()}  # noqa: E731
    assert strip(recs) == strip(one_at_a_time)
    assert all(e["batch"] == 0 for e in events(r.stderr) if e["event"] == "page")  # no engine call


def test_a_poison_page_in_a_batch_costs_only_itself(pages, one_at_a_time, tmp_path, record_validator):
    """One worker, batches of 3: [p0 p1 p2] is SIGKILLed on p1, p4 raises inside [p3 p4 p5],
    and [q#0 q#1] hangs on q#1. A batch that lost its worker is retried page by page: only p1
    (crash), p4 (engine error) and q#1 (timeout) fail; every other page is as without faults."""
    out = tmp_path / "faults.jsonl"
    t0 = time.monotonic()
    r = mineru(
        "parse",
        str(pages),
        "--out",
        str(out),
        "--no-cache",
        "--engine",
        "ocr",
        "--cpus",
        "2",
        "--workers",
        "1",
        "--page-batch",
        "3",
        "--page-timeout",
        "10",
        "--log-json",
        cwd=tmp_path,
        env={"MINERU_TEST_FAULTS": "kill=p1.png*;raise=p4.png*;hang=q_frames.tif#1"},
    )
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t0 < 240
    recs = {rec["id"]: rec for rec in read_journal(out, record_validator)}
    assert sorted(recs) == sorted(one_at_a_time)

    killed = recs["p1.png#0"]
    assert killed["status"] == "failed" and killed["error"]["kind"] == "crash", killed
    assert killed["error"]["stage"] == "engine" and "SIGKILL" in killed["error"]["message"]
    raised = recs["p4.png#0"]  # a Python error: its batch goes on
    assert raised["status"] == "failed" and raised["error"]["kind"] == "engine_error"
    hung = recs["q_frames.tif#1"]
    assert hung["status"] == "timeout", hung
    assert hung["error"]["kind"] == "timeout" and hung["error"]["stage"] == "engine"
    assert hung["timings"]["total"] >= 10  # its solo retry: one page's timeout

    faulty = {"p1.png#0", "p4.png#0", "q_frames.tif#1"}
    got = stable(out)
    assert {k: v for k, v in got.items() if k not in faulty} == {
        k: v for k, v in one_at_a_time.items() if k not in faulty
    }
    evs = events(r.stderr)
    summary = [e for e in evs if e["event"] == "summary"][0]
    # two batches lost their worker (kill, hang), then so did the solo retries of p1 and q#1
    assert summary["failed"] == 3 and summary["ok"] == 5
    assert summary["restarts"] == 4 and summary["retried"] == 5
    batch = {e["id"]: e.get("batch") for e in evs if e["event"] == "page"}
    assert all(batch[p] == 1 for p in ("p0.png#0", "p2.png#0", "q_frames.tif#0"))  # retried alone
    assert batch["p3.png#0"] == batch["p5.png#0"] == 3  # not retried


def test_explain_plan_shows_batches_and_mode(tmp_path):
    text_page(tmp_path / "p.png", "Hello")
    r = mineru(
        "parse",
        "p.png",
        "--engine",
        "ocr",
        "--page-batch",
        "3",
        "--crop-batch",
        "5",
        "--batch-wait-ms",
        "50",
        "--explain-plan",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "page batch         3" in r.stdout and "crop batch         5" in r.stdout
    assert "batch wait         50 ms" in r.stdout and "mode               ocr" in r.stdout
    r = mineru("parse", "p.png", "--mode", "bogus", cwd=tmp_path)
    assert r.returncode == 2 and "--mode" in r.stderr
    r = mineru("parse", "p.png", "--engine", "ocr", "--mode", "hybrid", "--out", "o.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "needs the vlm engine" in r.stderr
    assert not (tmp_path / "o.jsonl").exists() or not (tmp_path / "o.jsonl").read_text()


def test_explain_plan_resolves_the_engine_as_the_run_does(tiny_vlm, tmp_path):
    """--explain-plan planned as the ocr engine unless --engine vlm was given: with a model and
    --mode hybrid (or engine auto finding one) it printed 2 workers x 1 thread where the run uses
    1 x 2, and it exited 0 for options the run refuses. It now resolves the engine as the run does."""
    text_page(tmp_path / "p.png", "Hello")
    model = str(tiny_vlm / "model")
    none = {  # no model anywhere but where a test names one
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "MODELSCOPE_CACHE": str(tmp_path / "modelscope"),
        "MINERU_TOOLS_CONFIG_JSON": str(tmp_path / "mineru.json"),
        "MINERU_MODEL_PATH": "",
    }
    for args, env in (
        (("--model", model, "--mode", "hybrid"), none),
        (("--mode", "standard"), {**none, "MINERU_MODEL_PATH": model}),
        ((), {**none, "MINERU_MODEL_PATH": model}),  # engine auto finds the model
    ):
        r = mineru("parse", "p.png", "--cpus", "2", *args, "--explain-plan", cwd=tmp_path, env=env)
        assert r.returncode == 0, (args, r.stderr)
        assert "workers            1" in r.stdout and "threads/worker     2" in r.stdout, (args, r.stdout)
        assert "page batch         4" in r.stdout and "engine vlm" in r.stdout
        assert f"mode               {(args[3:] or args[1:] or ('vlm',))[0]}" in r.stdout, (args, r.stdout)
    r = mineru("parse", "p.png", "--cpus", "2", "--explain-plan", cwd=tmp_path, env=none)  # auto: no model
    assert r.returncode == 0 and "workers            2" in r.stdout and "mode               ocr" in r.stdout
    for args, message in (
        (("--engine", "ocr", "--mode", "hybrid"), "needs the vlm engine"),
        (("--mode", "hybrid"), "needs the vlm engine: no MinerU2.5 model found"),
        (("--engine", "vlm"), "MinerU2.5 model"),
        (("--lang", "fr"), "unsupported lang"),
        (("--pages", "0-x"), "--pages"),
    ):
        r = mineru("parse", "p.png", *args, "--explain-plan", cwd=tmp_path, env=none)
        assert r.returncode == 2 and message in r.stderr, (args, r.returncode, r.stderr)
    assert not (tmp_path / "results.jsonl").exists()  # a plan writes nothing


def test_explain_plan_says_where_each_mode_runs_its_ocr(tiny_vlm, tmp_path):
    """--explain-plan said '+1 thread per worker runs the embedded OCR beside the VLM' in
    --mode standard too, where the embedded engine runs before the VLM on the worker's own
    threads (no layout step to hide it behind), and pointed every engine at the embedded
    engine's benchmarks. Each mode now says what it runs."""
    text_page(tmp_path / "p.png", "Hello")
    model = str(tiny_vlm / "model")
    said = {}
    for mode in ("vlm", "hybrid", "standard"):
        r = mineru("parse", "p.png", "--model", model, "--mode", mode, "--explain-plan", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        said[mode] = r.stdout
        assert "docs/benchmarks.md (VLM stages and plans)" in r.stdout
    for mode in ("vlm", "hybrid"):
        assert "+1 thread per worker runs the embedded OCR beside the VLM" in said[mode]
    assert "beside the VLM" not in said["standard"]
    assert "embedded engine    runs before the VLM, on the worker's threads" in said["standard"]
    assert "the VLM reads only tables and equations" in said["standard"]
    r = mineru("parse", "p.png", "--engine", "ocr", "--explain-plan", cwd=tmp_path)
    assert r.returncode == 0 and "(Embedded engine)" in r.stdout and "VLM" not in r.stdout


def test_an_unknown_lang_is_refused_in_every_mode(tiny_vlm, tmp_path):
    """--lang fr was refused (exit 2) by the ocr engine only: with a model, --mode vlm, hybrid
    and standard took it in silence and ran their OCR as ever. Every mode refuses it now."""
    text_page(tmp_path / "p.png", "Hello")
    model = str(tiny_vlm / "model")
    for args in (("--engine", "ocr"), *(("--model", model, "--mode", mode) for mode in ("vlm", "hybrid", "standard"))):
        for plan in (("--explain-plan",), ()):
            r = mineru("parse", "p.png", *args, "--lang", "fr", "--out", "o.jsonl", *plan, cwd=tmp_path)
            assert r.returncode == 2 and "unsupported lang 'fr' (choose from en, ch)" in r.stderr, (args, r.stderr)
            assert not (tmp_path / "o.jsonl").exists() or not (tmp_path / "o.jsonl").read_text()


def test_vlm_batches_give_the_same_records_and_a_poison_page_costs_only_itself(tiny_vlm, tmp_path, record_validator):
    """The vlm engine's own parse_batch through the pool: the default page batch (4) with
    --crop-batch 2 gives exactly the records of --page-batch 1 --crop-batch 8; a page that kills
    its worker inside a batch costs only itself."""
    from PIL import ImageOps

    d = tmp_path / "in"
    d.mkdir()
    page = Image.open(tiny_vlm / "page.png").convert("RGB")
    page.save(d / "a.png")
    ImageOps.mirror(page).save(d / "b.png")
    ImageOps.expand(page, border=40, fill="white").save(d / "c.png")
    common = [
        "parse",
        str(d),
        "--engine",
        "vlm",
        "--model",
        str(tiny_vlm / "model"),
        "--no-cache",
        "--cpus",
        "1",
        "--log-json",
    ]
    r = mineru(*common, "--out", "one.jsonl", "--page-batch", "1", "--crop-batch", "8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    one = stable(tmp_path / "one.jsonl")
    assert len(one) == 3 and all(v["status"] == "ok" and v["blocks"] for v in one.values())

    r = mineru(*common, "--out", "batched.jsonl", "--crop-batch", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    read_journal(tmp_path / "batched.jsonl", record_validator)
    assert stable(tmp_path / "batched.jsonl") == one
    evs = events(r.stderr)
    assert [e["batch"] for e in evs if e["event"] == "page"] == [3, 3, 3]
    summary = [e for e in evs if e["event"] == "summary"][0]
    assert summary["plan"]["page_batch"] == 4 and summary["plan"]["mode"] == "vlm"
    assert {"engine", "engine.layout", "engine.content"} <= set(summary["stages"])

    r = mineru(*common, "--out", "fault.jsonl", cwd=tmp_path, env={"MINERU_TEST_FAULTS": "kill=b.png*"})
    assert r.returncode == 1, r.stderr
    got = stable(tmp_path / "fault.jsonl")
    assert got["b.png#0"]["status"] == "failed" and got["b.png#0"]["error"]["kind"] == "crash"
    assert {k: v for k, v in got.items() if k != "b.png#0"} == {k: v for k, v in one.items() if k != "b.png#0"}
    summary = [e for e in events(r.stderr) if e["event"] == "summary"][0]
    assert summary["retried"] == 3 and summary["restarts"] == 2
