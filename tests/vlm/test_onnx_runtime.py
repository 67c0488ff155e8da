"""The ONNX runtime on the tiny trained model: parity with torch, the engine end to end, no
torch on its import path, and refusal of exports that do not match their manifest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from onnx_fixtures import tiny_onnx, tiny_onnx_int8, tiny_onnx_int8_report, tiny_onnx_report  # noqa: E402,F401
from tiny_fixtures import Recorder, tiny_case, tiny_vlm  # noqa: E402,F401

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.engines.vlm import VlmEngine  # noqa: E402
from mineru_cli.vlm.export_format import find_export, verify_export  # noqa: E402
from mineru_cli.vlm.generate import generate  # noqa: E402
from mineru_cli.vlm.protocol.chat import LAYOUT_PROMPT  # noqa: E402
from mineru_cli.vlm.protocol.crops import layout_image, prepare_crops  # noqa: E402
from mineru_cli.vlm.protocol.layout import parse_layout  # noqa: E402
from mineru_cli.vlm.protocol.profiles import PROFILE_2509  # noqa: E402
from mineru_cli.vlm.runtime_onnx import OnnxRuntime  # noqa: E402
from mineru_cli.vlm.tokenizer import build_input  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FP32_LOGIT_BOUND = 1e-4  # max |onnx - torch| over every logit (logits of the tiny model reach ~13)
# ... over a whole parse's requests: float32 rounding grows with their length and differs with the
# kernels' accumulation order per ISA (1.6e-4 on a plain-AVX2 EPYC, under 1e-4 on AVX-512); a
# wrong operation shows as 1e-2 or more, and the tokens must be identical anyway
PARSE_LOGIT_BOUND = 5e-4


@pytest.fixture(scope="module")
def page(tiny_vlm):
    return Image.open(tiny_vlm / "page.png").convert("RGB")


@pytest.fixture(scope="module")
def torch_engine(tiny_vlm):
    return VlmEngine(tiny_vlm / "model", threads=1)


@pytest.fixture(scope="module")
def onnx_engine(tiny_onnx):
    return VlmEngine(tiny_onnx, threads=1, runtime="onnx")


def _requests(engine, page, tiny_case):
    """The layout request and every crop request of the tiny page, with their sampling."""
    blocks = parse_layout(tiny_case["layout"]).blocks
    crops = prepare_crops(page, blocks)
    inputs = [build_input(engine.tokenizer, engine.processor, layout_image(page), LAYOUT_PROMPT)]
    inputs += [build_input(engine.tokenizer, engine.processor, c.image, c.prompt) for c in crops]
    return inputs, [PROFILE_2509.layout_sampling] + [c.sampling for c in crops]


def test_onnx_logits_match_torch_over_every_decoding_step(torch_engine, onnx_engine, page, tiny_case):
    """Whole parse, one request at a time: identical tokens, logits within PARSE_LOGIT_BOUND."""
    inputs, params = _requests(torch_engine, page, tiny_case)
    worst = 0.0
    for x, sp in zip(inputs, params):
        t, o = Recorder(torch_engine.runtime), Recorder(onnx_engine.runtime)
        gt = generate(t, [x], sp, torch_engine.tokenizer.stop_ids)[0]
        go = generate(o, [x], sp, onnx_engine.tokenizer.stop_ids)[0]
        assert go.tokens == gt.tokens and go.stop_token == gt.stop_token
        diff = np.abs(np.stack(t.logits[0]) - np.stack(o.logits[0])).max()
        worst = max(worst, float(diff))
    assert worst < PARSE_LOGIT_BOUND, worst


def test_onnx_batched_decoding_matches_one_at_a_time(onnx_engine, page, tiny_case):
    inputs, params = _requests(onnx_engine, page, tiny_case)
    inputs, params = inputs[1:], params[1:]  # the crops: rows of different lengths
    assert len({len(x) for x in inputs}) == len(inputs)
    rt = onnx_engine.runtime
    batched = Recorder(rt)
    together = generate(batched, inputs, params, onnx_engine.tokenizer.stop_ids)
    for i, (x, sp) in enumerate(zip(inputs, params)):
        single = Recorder(rt)
        alone = generate(single, [x], sp, onnx_engine.tokenizer.stop_ids)[0]
        assert alone.tokens == together[i].tokens and alone.stop_token == together[i].stop_token
        np.testing.assert_allclose(np.stack(single.logits[0]), np.stack(batched.logits[i]), atol=FP32_LOGIT_BOUND)
    assert [onnx_engine.tokenizer.decode(g.tokens) for g in together] == [
        e[2] for e in tiny_case["elements"] if e[2] is not None
    ]


def test_chunked_prefill_equals_one_call_and_the_kv_buffer_grows(onnx_engine, page, tiny_case, monkeypatch):
    """Prompts in chunks (PREFILL_CHUNK_TOKENS) fill the KV buffer that later chunks and steps read in
    place; the logits equal a single-call prefill (fp32), also across a capacity growth and when a
    prompt's last chunk is one token (which takes the step path)."""
    import mineru_cli.vlm.runtime_onnx as rt_mod

    inputs, _ = _requests(onnx_engine, page, tiny_case)
    batch = inputs[1:4]
    rt = onnx_engine.runtime

    def run():
        rows = [rt.prefill(batch)]
        for _ in range(rt_mod.KV_GROWTH + 3):  # past the first capacity: one growth
            rows.append(rt.step(rows[-1].argmax(-1).astype(np.int64)))
        return np.stack(rows)

    monkeypatch.setattr(rt_mod, "PREFILL_CHUNK_TOKENS", 10**6)
    whole = run()
    monkeypatch.setattr(rt_mod, "PREFILL_CHUNK_TOKENS", 64)  # several chunks per prompt
    assert max(len(x) for x in batch) > 64
    chunked = run()
    assert np.abs(whole - chunked).max() < 1e-4
    assert (whole.argmax(-1) == chunked.argmax(-1)).all()
    # a chunk of one token after the rest of its prompt: the decoder's step path, at batch 1
    monkeypatch.setattr(rt_mod, "PREFILL_CHUNK_TOKENS", max(len(x) for x in batch) - 1)
    assert np.abs(whole - run()).max() < 1e-4


def test_onnx_engine_returns_exactly_the_torch_blocks(torch_engine, onnx_engine, page, tiny_case):
    theirs = torch_engine.parse(page)
    ours = onnx_engine.parse(page)
    assert [b.as_dict() for b in ours.blocks] == [b.as_dict() for b in theirs.blocks]
    assert ours.markdown == theirs.markdown and ours.warnings == []
    assert [b.type for b in ours.blocks] == [e[0] for e in tiny_case["elements"]]


def test_int8_export_parses_the_tiny_page_end_to_end(torch_engine, tiny_onnx_int8, page):
    """INT8 (this CPU's target: per-channel weights, the output layer included) gives the same blocks."""
    engine = VlmEngine(tiny_onnx_int8, threads=1, runtime="onnx")
    assert [b.as_dict() for b in engine.parse(page).blocks] == [b.as_dict() for b in torch_engine.parse(page).blocks]
    assert engine.identity()["export"]["quantization"] == "int8"


def test_identity_names_the_export_and_the_source_weights(torch_engine, onnx_engine, tiny_onnx_report):
    ident = onnx_engine.identity()
    assert ident["weights"] == torch_engine.identity()["weights"]
    assert ident["tokenizer"] == torch_engine.identity()["tokenizer"]
    assert ident["export"]["quantization"] == "fp32" and len(ident["export"]["sha256"]) == 64
    assert onnx_engine.options()["runtime"] == "onnx"
    json.dumps(ident)


NO_TORCH_SCRIPT = r"""
import json, sys
sys.modules["torch"] = None          # any `import torch` now raises ImportError
sys.modules["transformers"] = None
from PIL import Image
from mineru_cli.engines.vlm import VlmEngine
engine = VlmEngine(sys.argv[1], threads=1, runtime="onnx")
result = engine.parse(Image.open(sys.argv[2]))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers") and sys.modules[m] is not None)
print(json.dumps({"blocks": [b.as_dict() for b in result.blocks], "loaded": loaded}))
"""


def test_onnx_path_never_imports_torch(tiny_onnx, tiny_vlm, torch_engine, page):
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH_SCRIPT, str(tiny_onnx), str(tiny_vlm / "page.png")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []
    assert out["blocks"] == [b.as_dict() for b in torch_engine.parse(page).blocks]


def test_threads_reach_the_sessions(tiny_onnx):
    rt = OnnxRuntime(tiny_onnx, threads=2)
    assert rt._decoder.get_session_options().intra_op_num_threads == 2
    assert rt._vision.get_session_options().intra_op_num_threads == 2


def test_tampered_or_incomplete_exports_are_refused(tiny_onnx, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(tiny_onnx, bad)
    verify_export(bad)  # an untouched copy is fine
    data = bad / "decoder.onnx.data"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit of one weight
    data.write_bytes(bytes(raw))
    with pytest.raises(SetupError, match=r"decoder.onnx.data does not match its sha256"):
        OnnxRuntime(bad)
    with pytest.raises(SetupError, match="damaged or was changed"):
        VlmEngine(bad, runtime="onnx").warm_up()
    (bad / "vision.onnx").unlink()
    with pytest.raises(SetupError, match="vision.onnx is missing"):
        verify_export(bad)
    (bad / "manifest.json").unlink()
    with pytest.raises(SetupError, match="not an ONNX export"):
        VlmEngine(bad, runtime="onnx")
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "manifest.json").write_text("{not json")
    with pytest.raises(SetupError, match="cannot read"):
        OnnxRuntime(tmp_path / "garbled")


def test_a_file_left_out_of_the_manifest_is_refused(tiny_onnx, tmp_path):
    """Deleting decoder.onnx.data's entry from manifest.json switched its check off: random bytes
    of the same size then passed `mineru models verify` and ran. Every file the export needs, and
    every file in its folder, must be in the manifest's file table."""
    from helpers import mineru

    bad = tmp_path / "bad"
    shutil.copytree(tiny_onnx, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    del manifest["files"]["decoder.onnx.data"]
    (bad / "manifest.json").write_text(json.dumps(manifest))
    data = bad / "decoder.onnx.data"
    data.write_bytes(os.urandom(data.stat().st_size))
    with pytest.raises(SetupError, match=r"decoder.onnx.data is in the folder but not in the manifest's file table"):
        verify_export(bad, trust_stamps=False)
    with pytest.raises(SetupError, match="damaged or was changed"):
        OnnxRuntime(bad)
    r = mineru("models", "verify", str(bad), cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "decoder.onnx.data is in the folder but not in" in r.stdout, r.stdout + r.stderr
    # a file the runtime reads, gone with its entry, and a graph's entry gone
    del manifest["files"]["tokenizer.json"], manifest["files"]["vision.onnx"]
    (bad / "manifest.json").write_text(json.dumps(manifest))
    (bad / "tokenizer.json").unlink()
    with pytest.raises(SetupError) as err:
        verify_export(bad)
    assert "tokenizer.json, which the runtime reads, is not in" in str(err.value)
    assert "vision.onnx, the vision file, is not in" in str(err.value)


def test_a_graph_left_out_of_the_manifest_and_a_model_moved_away_are_said_in_words(tiny_onnx, tmp_path):
    """A manifest whose graph table lost a role ended parse in `'embed_tokens'` (a KeyError's
    words); and the export command a damaged export suggests named the folder the manifest
    records, though no model folder is there any more (an export copied to another machine):
    a placeholder, said as one."""
    bad = tmp_path / "bad"
    shutil.copytree(tiny_onnx, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    del manifest["graphs"]["embed_tokens"]
    manifest["source"] = {**(manifest.get("source") or {}), "model_dir": str(tmp_path / "moved")}
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SetupError) as err:
        OnnxRuntime(bad)
    said = str(err.value)
    assert "manifest.json's graph table names no embed_tokens file" in said, said
    assert said.endswith(
        f"export it again with: mineru export --model MODEL_DIR --out {bad} --force (MODEL_DIR: the MinerU2.5 "
        f"model folder it was exported from, no longer a model folder at {tmp_path / 'moved'})"
    ), said


def test_an_export_of_another_format_version_is_refused(tiny_onnx, tmp_path):
    """Format 2 exports returned the new k/v for the runtime to copy in; format 3's decoding steps
    lack the step path; the runtime reads only the format its exporter writes."""
    old = tmp_path / "old"
    shutil.copytree(tiny_onnx, old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["format_version"] = 2
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SetupError, match=r"format version 2; this mineru-cli reads version 4; export the model again"):
        OnnxRuntime(old)


def test_a_verified_file_is_not_hashed_again_until_it_changes(tiny_onnx, tmp_path, monkeypatch):
    import mineru_cli.vlm.export_format as rt

    monkeypatch.setenv("MINERU_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "copy"
    shutil.copytree(tiny_onnx, copy)
    hashed: list[str] = []
    real = rt.sha256_file
    monkeypatch.setattr(rt, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    verify_export(copy)
    files = len(json.loads((copy / "manifest.json").read_text())["files"])
    assert len(hashed) == files
    hashed.clear()
    verify_export(copy)  # every stamp matches: nothing read again
    assert hashed == []
    data = copy / "vision.onnx.data" if (copy / "vision.onnx.data").exists() else copy / "vision.onnx"
    st = data.stat()
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: ctime still moved
    with pytest.raises(SetupError, match=f"{data.name} does not match its sha256"):
        verify_export(copy)
    assert hashed == [data.name]


def test_find_export_accepts_a_model_folder_holding_onnx(tiny_onnx, tmp_path, monkeypatch):
    holder = tmp_path / "MinerU2.5-2509-1.2B"
    holder.mkdir()
    os.symlink(tiny_onnx, holder / "onnx")
    assert find_export(holder) == tiny_onnx.resolve()
    monkeypatch.setenv("MINERU_MODEL_PATH", str(tiny_onnx))
    assert find_export(None) == tiny_onnx.resolve()
    monkeypatch.delenv("MINERU_MODEL_PATH")
    with pytest.raises(SetupError, match="needs an export folder"):
        find_export(None)


def test_cli_export_then_parse_picks_the_onnx_runtime(tiny_vlm, tmp_path, record_validator):
    """`mineru export` (INT8 for plain AVX2, bias-corrected) into the model folder's onnx/, then `mineru parse`
    (engine and runtime auto) finds the export by itself and returns the blocks the torch runtime
    returns."""
    import json
    import shutil

    from helpers import mineru

    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    exported = mineru(
        "export",
        "--model",
        str(model),
        "--int8",
        "--float-lm-head",
        "--bias-correction",
        "--no-verify",
        "--target",
        "avx2",
        "--threads",
        "1",
        cwd=tmp_path,
    )
    assert exported.returncode == 0, exported.stderr
    quantization = json.loads((model / "onnx" / "manifest.json").read_text())["quantization"]
    assert quantization["scheme"] == "int8" and quantization["target"] == "avx2"
    for role in ("vision", "decoder"):  # 7-bit signed (int8_target)
        assert quantization[role]["weight_type"] == "QInt8" and quantization[role]["reduce_range"] is True

    from mineru_cli.vlm.int8_target import cpu_summary

    assert quantization["made_on"] == cpu_summary()
    assert len(quantization["decoder"]["excluded_nodes"]) == 1  # the output layer stays float32
    # the target corrects the vision graph anyway; the opt-in adds the decoder
    assert quantization["vision"]["bias_correction"]["folded_into_bias"] > 0
    assert quantization["decoder"]["bias_correction"]["folded_into_bias"] > 0
    env = {"MINERU_MODEL_PATH": str(model)}
    onnx_run = mineru("parse", "page.png", "--out", "a.jsonl", "--no-cache", "--cpus", "1", cwd=tmp_path, env=env)
    assert onnx_run.returncode == 0 and "onnx runtime" in onnx_run.stderr, onnx_run.stderr
    torch_run = mineru(
        "parse",
        "page.png",
        "--out",
        "b.jsonl",
        "--no-cache",
        "--cpus",
        "1",
        "--runtime",
        "torch",
        cwd=tmp_path,
        env=env,
    )
    assert torch_run.returncode == 0, torch_run.stderr
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.jsonl", "b.jsonl"))
    record_validator.validate(a)
    assert a["engine"]["options"]["runtime"] == "onnx" and b["engine"]["options"]["runtime"] == "torch"
    assert a["engine"]["model"]["export"]["quantization"] == "int8"
    assert a["blocks"] == b["blocks"] and a["markdown"] == b["markdown"]
    assert a["fingerprint"] != b["fingerprint"]  # a different runtime never resumes the other's pages


def _flip_a_bit(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit of one weight: the size stays, the sha256 does not
    path.write_bytes(bytes(raw))


def _rehashed(export: Path, name: str, data: bytes) -> None:
    """`name` in `export` replaced by `data`, with its size and sha256 written into the manifest:
    a file the manifest check passes that is no longer what the runtime can load."""
    import hashlib

    (export / name).write_bytes(data)
    manifest = json.loads((export / "manifest.json").read_text())
    manifest["files"][name].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (export / "manifest.json").write_text(json.dumps(manifest))


def test_explain_plan_refuses_a_damaged_export_as_the_run_does_and_neither_leaves_a_journal(tiny_onnx, tmp_path):
    """`--explain-plan` printed its plan and exited 0 over an export whose decoder weights were cut
    short or changed in one bit, that lacks a file its manifest lists or holds one it does not,
    where the run exits 2 (its workers check the export against its manifest as they load it);
    and that run left an empty journal behind (opened before the workers loaded). Both now exit 2
    with the same error, and nothing is written."""
    from helpers import mineru

    Image.new("RGB", (200, 100), "white").save(tmp_path / "page.png")
    damages = {
        "cut": lambda bad: os.truncate(bad / "decoder.onnx.data", 1000),
        "bit": lambda bad: _flip_a_bit(bad / "decoder.onnx.data"),
        "missing": lambda bad: (bad / "vision.onnx.data").unlink(),
        "unlisted": lambda bad: (bad / "stray.bin").write_bytes(b"x"),
    }
    said = {
        "cut": "decoder.onnx.data has 1000 bytes",
        "bit": "decoder.onnx.data does not match its sha256",
        "missing": "vision.onnx.data is missing",
        "unlisted": "stray.bin is in the folder but not in the manifest's file table",
    }
    for name, damage in damages.items():
        bad = tmp_path / name
        shutil.copytree(tiny_onnx, bad)
        damage(bad)
        for extra in (["--explain-plan"], []):
            r = mineru(
                "parse",
                "page.png",
                "--mode",
                "standard",
                "--model",
                str(bad),
                "--out",
                f"runs/{name}/r.jsonl",
                "--no-cache",
                *extra,
                cwd=tmp_path,
                timeout=120,
            )
            assert r.returncode == 2, (name, extra, r.stdout, r.stderr)
            assert "damaged or was changed" in r.stderr and said[name] in r.stderr, (name, extra, r.stderr)
            assert not (tmp_path / "runs").exists(), (name, extra)


def test_a_run_whose_model_fails_to_load_leaves_no_journal_and_an_old_one_as_it_was(tiny_onnx, tmp_path):
    """An export whose decoder is no ONNX graph, though its manifest lists it as it is (the manifest
    made again over it): the files check passes and the workers' load fails, exit 2. The run left
    an empty `--out` journal behind (with the folders made for it) and an empty `--out-dir`, made
    before the workers loaded the model; it leaves nothing now, and a journal that was there is
    left as it was."""
    from helpers import mineru

    Image.new("RGB", (200, 100), "white").save(tmp_path / "page.png")
    bad = tmp_path / "bad"
    shutil.copytree(tiny_onnx, bad)
    _rehashed(bad, "decoder.onnx", os.urandom(2000))
    old = tmp_path / "old.jsonl"
    ok = mineru("parse", "page.png", "--mode", "ocr", "--out", str(old), "--no-cache", cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    before = old.read_bytes()
    for out, *formats in (("runs/2026/r.jsonl", "--format", "markdown", "--out-dir", "docs/md"), ("old.jsonl",)):
        r = mineru(
            "parse",
            "page.png",
            "--mode",
            "standard",
            "--model",
            str(bad),
            "--out",
            out,
            "--no-cache",
            "--force",
            *formats,
            cwd=tmp_path,
            timeout=120,
        )
        assert r.returncode == 2 and f"cannot load the ONNX export {bad}" in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "docs").exists()
    assert old.read_bytes() == before


def test_explain_plan_says_it_hashes_a_fresh_export_once(tiny_onnx, tmp_path):
    """The run and --explain-plan check an export's files against its manifest before anything
    else (sha256, about 2 s a GB: 10 s and more for a full-size export), and said nothing while
    they did: the plan stopped after its `engine:` line for no reason given. The first check of
    an export says so; a later one, which trusts the files unchanged since, says nothing."""
    from helpers import mineru

    Image.new("RGB", (200, 100), "white").save(tmp_path / "page.png")
    args = ("parse", "page.png", "--model", str(tiny_onnx), "--mode", "vlm", "--out", "r.jsonl", "--explain-plan")
    env = {"MINERU_CACHE_DIR": str(tmp_path / "fresh-cache")}  # no stamps: every file is hashed
    first = mineru(*args, cwd=tmp_path, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    said = f"checking the ONNX export {tiny_onnx} against its manifest"
    assert said in first.stdout + first.stderr, first.stdout + first.stderr
    again = mineru(*args, cwd=tmp_path, env=env, timeout=120)
    assert again.returncode == 0 and said not in again.stdout + again.stderr, again.stdout + again.stderr
