"""torch -> ONNX export of the tiny trained model: graphs, manifest, parity, INT8 / INT4."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from fshelpers import as_plain_user, read_only, skip_unless_bits_stop, small_filesystem  # noqa: E402
from helpers import mineru  # noqa: E402
from model_shapes import small_random_config  # noqa: E402
from onnx_fixtures import tiny_onnx, tiny_onnx_int8, tiny_onnx_int8_report, tiny_onnx_report  # noqa: E402,F401
from tiny_fixtures import tiny_vlm  # noqa: E402,F401

from mineru_cli.core.errors import SetupError  # noqa: E402
from mineru_cli.export.bench import OPENVINO_VARIANT  # noqa: E402
from mineru_cli.export.onnx_export import compare_logits, export_model  # noqa: E402
from mineru_cli.vlm import int8_target, openvino_vision  # noqa: E402
from mineru_cli.vlm.export_format import UNFINISHED, is_export_dir, read_manifest  # noqa: E402

FP32_LOGIT_BOUND = 1e-4  # max |onnx - torch| over every logit (logits of the tiny model reach ~13)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _dims(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _step_branches(decoder) -> list[list[str]]:
    """The op types of each step-path If's else branch (one If per layer), checked to wrap one
    GroupQueryAttention node each."""
    branches = []
    for node in (n for n in decoder.node if n.op_type == "If"):
        graphs = {a.name: a.g for a in node.attribute}
        assert [(n.op_type, n.domain) for n in graphs["then_branch"].node] == [("GroupQueryAttention", "com.microsoft")]
        branches.append([n.op_type for n in graphs["else_branch"].node])
    return branches


def _keeps_clear_choices(parity: dict, cosine: float) -> bool:
    """A quantized export keeps every clear choice of the reference's next token
    (onnx_export.CLEAR_LEAD), and the choices are clear at nine positions in ten or more (the
    check reads most of the steps), with its logits' cosine over `cosine`."""
    return (
        parity["top1_clear_agreement"] == 1.0
        and parity["clear_positions"] >= 0.9 * parity["positions"]
        and parity["cosine_min"] > cosine
    )


def test_parity_with_no_clear_choice_stays_strict_json():
    """Where no reference choice is clear (logits level at every step: a near-flat random model),
    top1_clear_agreement was NaN, which manifest.json then held as a bare NaN that strict JSON
    readers (jq, a browser's JSON.parse) refuse."""
    ref = np.zeros((3, 2, 8), dtype=np.float32)
    ref[..., :2] = 1.0  # every step's top two tie
    parity = compare_logits(ref, ref + np.float32(0.01))
    assert parity["clear_positions"] == 0
    json.dumps(parity, allow_nan=False)
    assert not _keeps_clear_choices(parity, 0.9)


def _assert_topological(graph) -> None:
    """Every value a node reads, in its If branches too, is a graph input, an initializer or made
    by an earlier node (onnx.checker would say so too, but it rejects onnxruntime's
    SimplifiedLayerNormalization in the ONNX domain)."""
    known = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}

    def reads(node):
        names = list(node.input)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                made = {o for n in attr.g.node for o in n.output}
                names += [i for n in attr.g.node for i in reads(n) if i not in made]
        return names

    for node in graph.node:
        missing = set(reads(node)) - known
        assert not missing, f"{node.name or node.op_type} reads {sorted(missing)} before they are made"
        known.update(node.output)


STEP_OPS = [
    "Reshape",
    "Reshape",
    "ScatterND",
    "ScatterND",
    "Reshape",
    "FusedMatMul",
    "Add",
    "Softmax",
    "MatMul",
    "Reshape",
]


def test_export_writes_graphs_tables_and_manifest(tiny_onnx, tiny_onnx_report, tiny_vlm):
    manifest = json.loads((tiny_onnx / "manifest.json").read_text())
    assert manifest["format"] == "mineru-cli-onnx" and manifest["format_version"] == 4
    assert manifest["graphs"] == {
        "vision": "vision.onnx",
        "decoder": "decoder.onnx",
        "embed_tokens": "embed_tokens.npy",
    }
    for name in (
        "config.json",
        "tokenizer.json",
        "preprocessor_config.json",
        "vision.onnx",
        "decoder.onnx",
        "embed_tokens.npy",
    ):
        assert name in manifest["files"], name
    for name, meta in manifest["files"].items():
        path = tiny_onnx / name
        assert meta == {"sha256": _sha(path), "bytes": path.stat().st_size}, name
    weights = tiny_vlm / "model" / "model.safetensors"
    assert manifest["source"]["files"] == {"model.safetensors": _sha(weights)}
    assert manifest["opset"] == 18 and manifest["exporter"] == "dynamo"
    assert manifest["quantization"] is None
    for lib in ("torch", "transformers", "onnx", "onnxruntime"):
        assert manifest["versions"][lib]
    cfg = json.loads((tiny_vlm / "model" / "config.json").read_text())
    model = manifest["model"]
    assert model["num_layers"] == cfg["text_config"]["num_hidden_layers"]
    assert model["vocab_size"] == cfg["text_config"]["vocab_size"]
    assert model["image_token_id"] == cfg["image_token_id"]
    table = np.load(tiny_onnx / "embed_tokens.npy")
    assert table.shape == (model["vocab_size"], model["hidden_size"]) and table.dtype == np.float32
    assert not (tiny_onnx.parent / "fp32.partial").exists()
    assert tiny_onnx_report["timings"]["total"] > 0 and tiny_onnx_report["bytes"] > 0


def test_graph_inputs_and_outputs_are_named_and_dynamic(tiny_onnx):
    vision = onnx.load(str(tiny_onnx / "vision.onnx"), load_external_data=False).graph
    assert [(v.name, _dims(v)) for v in vision.input] == [
        ("pixel_values", ["patches", 1176]),
        ("vision_position_ids", ["patches", 2]),
    ]
    assert [v.name for v in vision.output] == ["image_embeds"]
    assert _dims(vision.output[0])[0] == "tokens"

    decoder = onnx.load(str(tiny_onnx / "decoder.onnx"), load_external_data=False).graph
    inputs = {v.name: _dims(v) for v in decoder.input}
    assert inputs["inputs_embeds"] == ["batch", "seq", 64]
    assert inputs["position_ids"] == [3, "batch", "seq"]
    assert inputs["seqlens_k"] == ["batch"] and inputs["total_sequence_length"] == []
    assert inputs["past_key_0"] == ["batch", 2, "capacity", 16] and "past_value_1" in inputs
    outputs = {v.name: _dims(v) for v in decoder.output}
    assert outputs["logits"][0] == "batch" and outputs["present_value_1"] == ["batch", 2, "capacity", 16]
    # every linear layer is a MatMul with a constant weight (what the INT8 quantizer takes)
    ops = {n.op_type for n in decoder.node} | {n.op_type for n in vision.node}
    assert "Gemm" not in ops and "Conv" not in ops
    # the vision attention is onnxruntime's fused kernel, one node per block
    fused = [n for n in vision.node if n.op_type == "MultiHeadAttention"]
    assert len(fused) == 1 and {n.domain for n in fused} == {"com.microsoft"}
    assert "Softmax" not in {n.op_type for n in vision.node}
    # the decoder's attention is one If per layer: prompts take one GroupQueryAttention node,
    # decoding steps (one token per row) the step path's scatter and grouped products
    assert _step_branches(decoder) == [STEP_OPS] * 2
    assert "Softmax" not in {n.op_type for n in decoder.node}
    _assert_topological(decoder)
    # rotary embeddings are one node per query and key tensor, in the vision blocks and the layers
    for graph, blocks in ((vision, 1), (decoder, 2)):
        rope = [n for n in graph.node if n.op_type == "RotaryEmbedding"]
        assert len(rope) == 2 * blocks and {n.domain for n in rope} == {"com.microsoft"}
        assert "Neg" not in {n.op_type for n in graph.node}
    # RMSNorm is one node each (two per layer and the final norm), not an elementwise chain
    assert [n.op_type for n in decoder.node].count("SimplifiedLayerNormalization") == 2 * 2 + 1
    assert not {"Pow", "ReduceMean", "Sqrt"} & {n.op_type for n in decoder.node}


def test_export_parity_figures(tiny_onnx_report):
    parity = tiny_onnx_report["parity"]
    assert parity["max_abs_logit_diff"] < FP32_LOGIT_BOUND, parity
    assert parity["top1_agreement"] == 1.0 and parity["cosine_min"] > 0.999999, parity
    assert parity["vision_max_abs_diff"] < FP32_LOGIT_BOUND, parity
    assert parity["batch"] == 2 and parity["positions"] == 2 * (parity["steps"] + 1)


def test_int8_export_quantizes_matmuls_and_stays_close(tiny_onnx_int8, tiny_onnx_int8_report, tiny_onnx):
    q = tiny_onnx_int8_report["quantization"]
    assert q["scheme"] == "int8"
    # the weights follow this CPU's target (auto), by the rule the export uses
    assert q["target"] == int8_target.detect_target() and q["made_on"] == int8_target.cpu_summary()
    for role, settings in int8_target.int8_settings(q["target"]).items():
        assert {k: q[role][k] for k in settings} == settings and q[role]["per_channel"] is True
    assert tiny_onnx_int8_report["exporter"] == "torchscript"
    decoder = onnx.load(str(tiny_onnx_int8 / "decoder.onnx"), load_external_data=False).graph
    ops = {n.op_type for n in decoder.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops
    # the step path is added after quantization: its products of activations stay float
    assert _step_branches(decoder) == [STEP_OPS] * 2
    assert [n.op_type for n in decoder.node].count("RotaryEmbedding") == 2 * 2  # TorchScript maps it too
    _assert_topological(decoder)
    parity = tiny_onnx_int8_report["parity"]
    # measured on the tiny model: cosine min 0.9990, max |diff| 0.24 of logits ~13
    assert _keeps_clear_choices(parity, 0.99), parity
    assert not list(tiny_onnx_int8.rglob(".fp32"))
    fp32 = sum(
        f["bytes"]
        for n, f in json.loads((tiny_onnx / "manifest.json").read_text())["files"].items()
        if n.startswith("decoder")
    )
    int8 = sum(f["bytes"] for n, f in tiny_onnx_int8_report["files"].items() if n.startswith("decoder"))
    assert int8 < fp32


def test_int8_export_with_bias_correction(tiny_vlm, tmp_path):
    report = export_model(
        tiny_vlm / "model", tmp_path / "bc", int8=True, exporter="torchscript", threads=1, bias_correction=True
    )
    q = report["quantization"]
    for role in ("vision", "decoder"):
        graph = onnx.load(str(tmp_path / "bc" / f"{role}.onnx"), load_external_data=False).graph
        quantized = [t for t in graph.initializer if t.name.endswith("_quantized")]
        bc = q[role]["bias_correction"]
        assert bc["folded_into_bias"] > 0 and bc["shift_rms_median"] > 0, bc
        # the output layer sees one row per calibration prompt (last-token logits): left as it is
        assert bc["uncorrected_few_rows"] == (1 if role == "decoder" else 0), bc
        assert bc["folded_into_bias"] + bc["added"] + bc["uncorrected_few_rows"] == len(quantized), bc
        assert sum(n.name.endswith("_bias_correction") for n in graph.node) == bc["added"]
        if role == "decoder":
            _assert_topological(graph)
            assert _step_branches(graph) == [STEP_OPS] * 2  # the step path goes in after it
    # measured on the tiny model: cosine min 0.9984 (0.9990 uncorrected), max |diff| 0.24
    assert _keeps_clear_choices(report["parity"], 0.99), report["parity"]


def test_calibration_runs_distinct_pages_through_the_decoder_as_the_runtime_prefills(tiny_vlm, tiny_onnx):
    import onnxruntime as ort

    from mineru_cli.export.bias_correction import calibration_inputs, prompt_feed
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    cfg = json.loads((tiny_vlm / "model" / "config.json").read_text())
    inputs = calibration_inputs(
        tiny_vlm / "model", (cfg["vision_start_token_id"], cfg["image_token_id"], cfg["vision_end_token_id"]), samples=6
    )
    images = {x.pixel_values.tobytes() for x in inputs}
    assert len(images) == 6  # six different pages, not three counted twice
    rt = OnnxRuntime(tiny_onnx)
    decoder = ort.InferenceSession(str(tiny_onnx / "decoder.onnx"), providers=["CPUExecutionProvider"])
    for x in inputs[:3]:
        feed = prompt_feed(
            rt.prompt_embeds(x, rt.image_embeds([x])[0]), x.position_ids, rt.num_layers, rt.num_kv_heads, rt.head_dim
        )
        np.testing.assert_allclose(decoder.run(["logits"], feed)[0], rt.prefill([x]), rtol=1e-5, atol=1e-5)


def test_int4_export(tiny_vlm, tmp_path):
    report = export_model(tiny_vlm / "model", tmp_path / "int4", int4=True, exporter="torchscript", threads=1)
    assert report["quantization"]["scheme"] == "int4"
    decoder = onnx.load(str(tmp_path / "int4" / "decoder.onnx"), load_external_data=False).graph
    assert "MatMulNBits" in {n.op_type for n in decoder.node}
    assert _step_branches(decoder) == [STEP_OPS] * 2
    assert _keeps_clear_choices(report["parity"], 0.98), report["parity"]


def test_export_refuses_bad_targets(tiny_vlm, tiny_onnx, tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(SetupError, match="not an ONNX export"):
        export_model(tiny_vlm / "model", tmp_path / "other", verify=False)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    with pytest.raises(SetupError, match="already holds an export"):
        export_model(tiny_vlm / "model", tiny_onnx, verify=False)
    with pytest.raises(SetupError, match="not a model folder"):
        export_model(tmp_path / "nothing", tmp_path / "out")
    with pytest.raises(SetupError, match="one of"):
        export_model(tiny_vlm / "model", tmp_path / "out", int8=True, int4=True)
    with pytest.raises(SetupError, match="--bias-correction corrects INT8 weights"):
        export_model(tiny_vlm / "model", tmp_path / "out", bias_correction=True)
    with pytest.raises(SetupError, match="--target chooses the INT8 weights"):
        export_model(tiny_vlm / "model", tmp_path / "out", target="avx2")
    with pytest.raises(SetupError, match="--target 'neon': choose auto or one of avx2, avx-vnni, avx512-vnni, amx"):
        export_model(tiny_vlm / "model", tmp_path / "out", int8=True, target="neon")
    assert not (tmp_path / "out").exists()


def test_export_replaces_an_old_export_with_force(tiny_vlm, tmp_path):
    out = tmp_path / "exp"
    export_model(tiny_vlm / "model", out, exporter="torchscript", verify=False, threads=1)
    (out / "stale.bin").write_bytes(b"x")
    report = export_model(tiny_vlm / "model", out, exporter="torchscript", verify=False, force=True, threads=1)
    assert not (out / "stale.bin").exists() and report["parity"] is None
    assert not (tmp_path / "exp.partial").exists() and not (tmp_path / "exp.replaced").exists()


def test_an_export_through_a_link_goes_where_it_points(tiny_vlm, tmp_path):
    """With --force and OUT a symbolic link to an export, the link was replaced by a real folder,
    OUT.replaced was left as a link to the old export (marked unfinished for good), and every
    later --force failed on it ("Cannot call rmtree on a symbolic link"). The export is written
    where the link points and the link stays; a link left at OUT.replaced by such a run goes,
    never what it points to."""
    target, link = tmp_path / "big" / "exp", tmp_path / "model" / "onnx"
    link.parent.mkdir()
    export_model(tiny_vlm / "model", target, exporter="torchscript", verify=False, threads=1)
    link.symlink_to(target)
    for int8 in (True, False):
        export_model(tiny_vlm / "model", link, int8=int8, exporter="torchscript", verify=False, force=True, threads=1)
        assert link.is_symlink() and is_export_dir(target)
        assert (read_manifest(target)["quantization"] or {}).get("scheme") == ("int8" if int8 else None)
        assert sorted(p.name for p in link.parent.iterdir()) == ["onnx"] and not (target / UNFINISHED).exists()
        assert sorted(p.name for p in target.parent.iterdir()) == ["exp"]
    link.unlink()
    export_model(tiny_vlm / "model", link, exporter="torchscript", verify=False, threads=1)
    (target / UNFINISHED).touch()
    (tmp_path / "model" / "onnx.replaced").symlink_to(target)  # as such a run left it
    export_model(tiny_vlm / "model", link, exporter="torchscript", verify=False, force=True, threads=1)
    assert sorted(p.name for p in link.parent.iterdir()) == ["onnx"] and is_export_dir(link)
    assert (target / "manifest.json").is_file()


# An export that waits, once it has begun writing OUT.partial, until the test lets it go on
PAUSED_EXPORT = """
import sys, time
from pathlib import Path
from mineru_cli.export.onnx_export import export_model

def log(message):
    if message.startswith("hashing the weights"):
        Path(sys.argv[3]).touch()
        while not Path(sys.argv[4]).exists():
            time.sleep(0.05)

export_model(sys.argv[1], sys.argv[2], int8=True, exporter="torchscript", verify=False, threads=1, log=log)
"""


def test_a_second_export_to_the_same_folder_is_refused_while_the_first_runs(tiny_vlm, tmp_path):
    """Two exports into the same OUT removed each other's OUT.partial: both ended in exit 3
    (FileNotFoundError) and no export was left. The second is refused at once, exit 2, and the
    first completes; no lock file is left."""
    model, started, go = tmp_path / "model", tmp_path / "started", tmp_path / "go"
    shutil.copytree(tiny_vlm / "model", model)
    first = subprocess.Popen(
        [sys.executable, "-c", PAUSED_EXPORT, str(model), str(model / "onnx"), str(started), str(go)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), first.stderr.read() if first.poll() is not None else "the first export did not start"
        r = mineru("export", "--model", str(model), "--no-verify", cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert f"another mineru export is writing {model / 'onnx'} (lock held); wait for it to finish" in r.stderr
        assert (model / "onnx.partial").is_dir() and not (model / "onnx").exists()
    finally:
        go.touch()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]
    assert read_manifest(model / "onnx")["quantization"]["scheme"] == "int8"
    assert not [p.name for p in model.iterdir() if p.name.startswith(".") or p.name.startswith("onnx.")]


def test_an_export_stopped_by_sigterm_leaves_nothing_and_out_as_it_was(tiny_vlm, tmp_path):
    """SIGTERM during `mineru export --force` ended the process where it stood: OUT.partial and the
    lock file were left (removed only by the next export). It stops as Ctrl-C does, exit 130:
    both are removed and the export already in OUT is unchanged."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    export_model(model, model / "onnx", exporter="torchscript", verify=False, threads=1)
    before = {p.name: _sha(p) for p in (model / "onnx").iterdir()}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mineru_cli", "export", "--model", str(model), "--force", "--threads", "1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        said = []
        for line in proc.stdout:  # OUT.partial is made before its weights are hashed
            said.append(line)
            if line.startswith("loading the model"):
                break
        assert (model / "onnx.partial").is_dir(), said
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
        proc.wait()
    assert sorted(p.name for p in model.iterdir() if p.name.startswith((".", "onnx"))) == ["onnx"]
    assert {p.name: _sha(p) for p in (model / "onnx").iterdir()} == before


def test_a_set_aside_export_left_by_a_cut_off_replacement_is_removed(tiny_vlm, tmp_path):
    """The old export is renamed aside (marked unfinished) before the new one takes its place; a
    run killed in between leaves it, and the next export removes it. A folder of that name that
    is no such leftover is the user's: refused, never removed."""
    out, aside = tmp_path / "exp", tmp_path / "exp.replaced"
    export_model(tiny_vlm / "model", aside, exporter="torchscript", verify=False, threads=1)
    (aside / UNFINISHED).touch()
    export_model(tiny_vlm / "model", out, exporter="torchscript", verify=False, threads=1)
    assert is_export_dir(out) and not aside.exists()
    aside.mkdir()
    (aside / "notes.txt").write_text("mine")
    with pytest.raises(SetupError, match="in the way"):
        export_model(tiny_vlm / "model", out, exporter="torchscript", verify=False, force=True, threads=1)
    assert (aside / "notes.txt").read_text() == "mine" and is_export_dir(out)


def test_an_export_to_a_full_or_read_only_disk_says_so(tiny_vlm, tmp_path):
    """A full disk ended `mineru export` in a Python traceback ("OSError: problem writing element
    4096 to file") with exit 1; it is one line saying what failed and how much space is free,
    exit 3 (the output could not be written), and nothing is left on the disk."""
    with small_filesystem(tmp_path / "fs", "600k") as fs:
        if fs is None:
            pytest.skip("cannot mount a small filesystem here")
        r = mineru("export", "--model", str(tiny_vlm / "model"), "--out", str(fs / "exp"), "--threads", "1")
        assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert f"error: the export to {fs / 'exp'} failed" in r.stderr and f"MB free in {fs}" in r.stderr
        assert "free space (or choose another --out)" in r.stderr
        assert list(fs.iterdir()) == []
    (tmp_path / "ro").mkdir()
    with read_only(tmp_path / "ro"):
        r = mineru("export", "--model", str(tiny_vlm / "model"), "--out", str(tmp_path / "ro" / "exp"))
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    assert f"{tmp_path / 'ro'} is on a read-only file system" in r.stderr and "free space" not in r.stderr, r.stderr


def test_an_export_that_cannot_read_its_model_or_make_its_folder_says_why(tiny_vlm, tmp_path):
    """Every OSError was said as a full disk, exit 3 ("free space (or choose another --out)"): a
    missing or unreadable source file and a file where OUT's folder goes are set-up errors (exit
    2) that name the path and say why in words."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    (model / "extra.safetensors").symlink_to(tmp_path / "gone.safetensors")
    r = mineru("export", "--model", str(model), "--no-verify", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    # the model folder's check finds it first (model_dir.missing_files: a link to nothing is missing)
    assert "missing: extra.safetensors (a broken link)" in r.stderr and "free space" not in r.stderr, r.stderr
    (model / "extra.safetensors").unlink()
    (tmp_path / "afile").write_text("mine")
    r = mineru("export", "--model", str(model), "--out", "afile/sub", "--no-verify", cwd=tmp_path)
    assert r.returncode == 2 and f"{tmp_path / 'afile'}: is a file, not a folder" in r.stderr, r.stderr[-3000:]
    assert "free space" not in r.stderr and (tmp_path / "afile").read_text() == "mine"
    (model / "tokenizer.json").chmod(0)
    skip_unless_bits_stop(f"open({str(model / 'tokenizer.json')!r}, 'rb')")
    r = mineru("export", "--model", str(model), "--no-verify", cwd=tmp_path, preexec_fn=as_plain_user())
    assert r.returncode == 2 and f"{model / 'tokenizer.json'}: permission denied" in r.stderr, r.stderr[-3000:]
    assert "free space" not in r.stderr and not (model / "onnx").exists()


def test_an_export_into_a_folder_this_user_may_not_write_says_to_choose_another_out(tiny_vlm, tmp_path):
    """A shared model folder this user may only read: `mineru export --model MODEL` (its default
    --out is MODEL/onnx) said "MODEL: permission denied" and no more. It says what to do, exit 2;
    an unreadable source file is not told to choose another --out."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    model.chmod(0o555)
    try:
        skip_unless_bits_stop(f"open({str(model / 'probe')!r}, 'w')")
        r = mineru("export", "--model", str(model), "--no-verify", cwd=tmp_path, preexec_fn=as_plain_user())
    finally:
        model.chmod(0o755)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert (
        f"{model}: permission denied" in r.stderr
        and "choose another --out (a folder this user may write in)" in r.stderr
    )
    assert not (model / "onnx").exists() and not (model / "onnx.partial").exists()
    (model / "tokenizer.json").chmod(0)
    r = mineru("export", "--model", str(model), "--no-verify", cwd=tmp_path, preexec_fn=as_plain_user())
    assert r.returncode == 2 and f"{model / 'tokenizer.json'}: permission denied" in r.stderr, r.stderr[-3000:]
    assert "choose another --out" not in r.stderr


def test_an_export_left_from_other_weights_in_the_model_folder_is_refused(tiny_vlm, tmp_path):
    """A model folder updated in place (new weights, as an `hf download` of a newer revision
    writes them) kept its onnx/ export of the old weights, which parse ran in the folder's name
    and `mineru models` listed as ok. parse refuses it, saying how to export again; models and
    doctor fail it; an export made again is taken."""
    from safetensors.numpy import load_file, save_file

    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    export_model(model, model / "onnx", exporter="torchscript", verify=False, threads=1)
    tensors = load_file(model / "model.safetensors")
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] * 1.5
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    r = mineru("parse", str(tiny_vlm / "page.png"), "--model", str(model), "--out", "r.jsonl", cwd=tmp_path, env=env)
    assert r.returncode == 2 and not (tmp_path / "r.jsonl").exists(), r.stderr[-2000:]
    assert f"the ONNX export {model / 'onnx'} is stale: it was not made from the model folder it is in" in r.stderr
    assert f"mineru export --model {model} --force" in r.stderr and "model.safetensors changed" in r.stderr
    listing = mineru("models", "--model", str(model), "--json", cwd=tmp_path, env=env, timeout=120)
    entries = {Path(e["path"]).name: e for e in json.loads(listing.stdout)["entries"]}
    assert listing.returncode == 1 and entries["onnx"]["status"] == "fail" and entries["model"]["status"] == "ok"
    d = mineru("doctor", "--model", str(model), "--json", cwd=tmp_path, env=env, timeout=120)
    assert d.returncode == 1 and any(
        c["name"] == f"export {model / 'onnx'}" and c["status"] == "fail" for c in json.loads(d.stdout)["checks"]
    )
    export_model(model, model / "onnx", exporter="torchscript", verify=False, force=True, threads=1)
    listing = mineru("models", "--model", str(model), "--json", cwd=tmp_path, env=env, timeout=120)
    assert listing.returncode == 0, listing.stdout


def test_the_suggested_export_command_keeps_the_exports_own_options(tiny_vlm, tmp_path):
    """The command a stale (or damaged) export's message gives left out the --float-lm-head and
    --bias-correction it was made with: run as said, it made other weights. It has them, read
    from the manifest's quantization table, and run as said it makes such an export again."""
    from safetensors.numpy import load_file, save_file

    from mineru_cli.vlm.export_format import export_command

    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    made = export_model(
        model,
        model / "onnx",
        int8=True,
        quantize_lm_head=False,
        bias_correction=True,
        exporter="torchscript",
        verify=False,
        threads=1,
    )["quantization"]
    tensors = load_file(model / "model.safetensors")
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] * 1.5
    save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    r = mineru("parse", str(tiny_vlm / "page.png"), "--model", str(model), "--out", "r.jsonl", cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    command = r.stderr.split("export it again with: ", 1)[1].split(" (or run --runtime torch)", 1)[0]
    expected = (
        f"mineru export --model {model} --int8 --target {made['target']} --float-lm-head --bias-correction --force"
    )
    assert command == expected, command
    e = mineru(*shlex.split(command)[1:], "--no-verify", cwd=tmp_path, env=env, timeout=600)
    assert e.returncode == 0, e.stderr[-3000:]
    again = read_manifest(model / "onnx")["quantization"]
    assert again["decoder"]["excluded_nodes"] and "bias_correction" in again["decoder"], again["decoder"]
    assert (again["scheme"], again["target"]) == ("int8", made["target"])
    # the bias correction an avx2 export makes whether asked or not is no option it was given
    plain = {"scheme": "int8", "target": "avx2", "vision": {"bias_correction": {}}, "decoder": {"excluded_nodes": []}}
    assert export_command(model / "onnx", {"quantization": plain}).endswith("--int8 --target avx2 --force")


def test_an_export_whose_model_config_changed_is_stale(tiny_vlm, tmp_path):
    """config.json edited in the model folder after its export (the context length, which caps
    the answers) went unnoticed: parse ran the export with the config it had copied, and `mineru
    models` listed it as ok. The export is stale, as for changed weights; so with another image
    processor setting; a re-save that only rewrites the layout and the saver's version is none."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    export_model(model, model / "onnx", exporter="torchscript", verify=False, threads=1)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "transformers_version": "9.9.9"}, indent=4))
    listing = mineru("models", "--model", str(model), cwd=tmp_path, env=env, timeout=120)
    assert listing.returncode == 0, listing.stdout
    config["text_config"]["max_position_embeddings"] = 64
    (model / "config.json").write_text(json.dumps(config, indent=2))
    r = mineru("parse", str(tiny_vlm / "page.png"), "--model", str(model), "--out", "r.jsonl", cwd=tmp_path, env=env)
    assert r.returncode == 2 and not (tmp_path / "r.jsonl").exists(), r.stderr[-2000:]
    assert f"the ONNX export {model / 'onnx'} is stale" in r.stderr
    assert "(config.json changed since it was made)" in r.stderr
    assert f"export it again with: mineru export --model {model} --force (or run --runtime torch)" in r.stderr
    shutil.copy(model / "onnx" / "config.json", model / "config.json")
    preprocessor = json.loads((model / "preprocessor_config.json").read_text())
    preprocessor["max_pixels"] = preprocessor["max_pixels"] // 2
    (model / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    listing = mineru("models", "--model", str(model), "--json", cwd=tmp_path, env=env, timeout=120)
    entries = {Path(e["path"]).name: e for e in json.loads(listing.stdout)["entries"]}
    assert listing.returncode == 1 and entries["onnx"]["status"] == "fail", listing.stdout
    assert "preprocessor_config.json changed since it was made" in entries["onnx"]["detail"]


def test_a_stale_export_in_a_folder_this_user_may_not_write_is_made_again_elsewhere(tiny_vlm, tmp_path):
    """A stale export in a shared model folder this user may only read: parse and `mineru models`
    said "export it again with: mineru export --model MODEL --force", which that user's export
    refuses (it writes MODEL/onnx). The command exports under the user's cache folder and says to
    name that export with --model; followed, it makes an export that parse runs."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    export_model(model, model / "onnx", exporter="torchscript", verify=False, threads=1)
    preprocessor = json.loads((model / "preprocessor_config.json").read_text())
    preprocessor["max_pixels"] = preprocessor["max_pixels"] // 2  # the folder changed since: stale
    (model / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    elsewhere = tmp_path / ".cache-test" / "exports" / "model"  # helpers.mineru's MINERU_CACHE_DIR
    page = str(tiny_vlm / "page.png")
    model.chmod(0o555)
    try:
        skip_unless_bits_stop(f"open({str(model / 'probe')!r}, 'w')")
        plain = as_plain_user()
        r = mineru("parse", page, "--model", str(model), "--out", "r.jsonl", cwd=tmp_path, env=env, preexec_fn=plain)
        listing = mineru("models", "--model", str(model), cwd=tmp_path, env=env, timeout=120, preexec_fn=plain)
        hint = f"mineru export --model {model} --out {elsewhere} --force (this user may not write in {model}: "
        assert r.returncode == 2 and f"the ONNX export {model / 'onnx'} is stale" in r.stderr, r.stderr[-2000:]
        assert f"export it again with: {hint}" in r.stderr and f"then run parse with --model {elsewhere})" in r.stderr
        assert listing.returncode == 1 and f"-> fix: export it again with: {hint}" in listing.stdout, listing.stdout
        command = shlex.split(r.stderr.split("export it again with: ", 1)[1].split(" (", 1)[0])
        made = mineru(*command[1:], "--no-verify", cwd=tmp_path, env=env, preexec_fn=plain)
        assert made.returncode == 0, made.stderr[-2000:]
        args = ("parse", page, "--model", str(elsewhere), "--out", "r.jsonl")
        r = mineru(*args, cwd=tmp_path, env=env, preexec_fn=plain)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        model.chmod(0o755)
    assert not (model / "onnx.partial").exists() and is_export_dir(elsewhere)


def test_an_export_named_where_a_model_folder_is_needed_is_said_to_be_one(tiny_vlm, tmp_path):
    """`--runtime torch --model MODEL/onnx` (and `mineru export --model MODEL/onnx`) said the
    export is no model folder for lack of *.safetensors, with the command that downloads one: it
    is said to be an export, with the runtime that runs it and the model folder it was made from."""
    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    export_model(model, model / "onnx", exporter="torchscript", verify=False, threads=1)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "MINERU_MODEL_PATH": ""}
    said = (
        f"--model {model / 'onnx'} is an ONNX export, not a model folder: parse runs it with --runtime onnx (or auto); "
        f"--runtime torch and mineru export take the MinerU2.5 model folder it was exported from: --model {model}"
    )
    page = str(tiny_vlm / "page.png")
    r = mineru(
        "parse", page, "--runtime", "torch", "--model", str(model / "onnx"), "--out", "r.jsonl", cwd=tmp_path, env=env
    )
    assert r.returncode == 2 and said in r.stderr and "safetensors" not in r.stderr, r.stderr[-2000:]
    r = mineru("export", "--model", str(model / "onnx"), cwd=tmp_path, env=env)
    assert r.returncode == 2 and said in r.stderr and "safetensors" not in r.stderr, r.stderr[-2000:]
    # an export whose model folder is gone: nothing to name
    shutil.move(model / "onnx", tmp_path / "alone")
    shutil.rmtree(model)
    r = mineru("export", "--model", str(tmp_path / "alone"), cwd=tmp_path, env=env)
    assert r.returncode == 2 and r.stderr.rstrip().endswith("the MinerU2.5 model folder it was exported from"), r.stderr


# An export killed (SIGKILL: no cleanup runs) at a fixed point: when verification begins, the
# manifest of the whole export is already written in OUT.partial
KILLED_IN_VERIFICATION = """
import os, signal, sys
from mineru_cli.export.onnx_export import export_model

def log(message):
    if message.startswith("checking the export"):
        os.kill(os.getpid(), signal.SIGKILL)

export_model(sys.argv[1], sys.argv[2], exporter="torchscript", threads=1, log=log)
"""


def test_an_export_killed_before_it_is_complete_is_never_taken_for_one(tiny_vlm, tmp_path):
    """`mineru models` listed the OUT.partial of an export killed during verification as a whole
    export ("[ok]", its files match the manifest written before verification) and parse ran it;
    it is marked unfinished until it is renamed into place: not listed, refused by name with
    what to do, and the next export starts over."""
    out = tmp_path / "models" / "exp"
    out.parent.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_VERIFICATION, str(tiny_vlm / "model"), str(out)], timeout=600
    )
    partial = tmp_path / "models" / "exp.partial"
    assert killed.returncode == -signal.SIGKILL and (partial / "manifest.json").is_file() and not out.exists()
    env = {
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "MODELSCOPE_CACHE": str(tmp_path / "modelscope"),
        "MINERU_TOOLS_CONFIG_JSON": str(tmp_path / "mineru.json"),
        "MINERU_MODEL_PATH": "",
    }
    r = mineru("models", "--json", cwd=tmp_path, env=env, timeout=120)
    assert json.loads(r.stdout)["entries"] == [], r.stdout
    r = mineru("models", "--model", str(partial), cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 1 and "[fail] " in r.stdout and "unfinished export" in r.stdout, r.stdout
    r = mineru("parse", str(tiny_vlm / "page.png"), "--model", str(partial), cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 2 and "is an unfinished export" in r.stderr and "mineru export --model" in r.stderr
    export_model(tiny_vlm / "model", out, exporter="torchscript", verify=False, threads=1)
    assert is_export_dir(out) and not partial.exists()


def test_bench_compares_runtimes_on_a_small_random_model(tmp_path):
    from mineru_cli.export.bench import bench_full_size

    small = small_random_config(vision_depth=1)
    report = bench_full_size(
        tmp_path,
        threads=1,
        config=small,
        repeats=1,
        image_hw=(56, 84),
        prefill_tokens=32,
        decode_batches=(1, 8),
        decode_steps=2,
        decode_context=20,
        log=None,
        crop_sizes={16: (56, 56)},
        bandwidth_bytes=16 << 20,
    )
    # where OpenVINO can run the vision encoder in bf16 (an Intel CPU with AMX or AVX-512 BF16 and
    # the plugin), the INT8 export is measured with it too
    openvino = not openvino_vision.not_here()
    extra = {OPENVINO_VARIANT} if openvino else set()
    assert set(report["median"]) == {"torch_fp32", "onnx_fp32", "onnx_int8"} | extra
    assert (openvino_vision.GRAPH_ROLE in read_manifest(tmp_path / "onnx-int8")["graphs"]) == openvino
    # the kernel roofline of this machine, measured in the same run at the vision MLP's shape of
    # the largest image (56x84 px: 24 patches x 32 x 128), and each phase's fraction of it
    roof = report["roofline"]
    assert roof["shapes"] == [[24, 32, 128]] and roof["threads"] == 1
    assert roof["fp32_gflops"] > 0 and roof["int8_gops"] > 0 and roof["bandwidth_gbs"] > 0
    # measured before and after the variants, each rate the faster of the two
    assert len(roof["measurements"]) == 2
    rates = ("fp32_gflops", "int8_gops", "bandwidth_gbs")
    assert all(roof[rate] == max(m[rate] for m in roof["measurements"]) for rate in rates)
    assert roof["bandwidth_gbs"] == max(roof["bandwidth_probes_gbs"].values())
    assert set(report["roofline_fraction"]) == set(report["median"])
    for name, fractions in report["roofline_fraction"].items():
        # bf16 is not a rate the roofline measures: vision on OpenVINO gets no fraction
        measured = {k for k in report["median"][name] if name != OPENVINO_VARIANT or not k.startswith("vision_s")}
        assert set(fractions) == measured, name
        assert all(f > 0 for f in fractions.values()), fractions
    from mineru_cli.export.bench import roofline_table

    title, cols, rows = roofline_table(report)
    assert "GFLOP/s" in title and "GB/s" in title
    assert cols[0] == "variant" and [row[0] for row in rows] == list(report["median"])
    # the page at the roofline per variant, none for vision on OpenVINO (bf16: no measured rate)
    at_roof = report["roofline_page_s"]
    assert set(at_roof) == set(report["median"])
    for name, page in at_roof.items():
        assert (page is None) == (name == OPENVINO_VARIANT), name
        assert page is None or 0 < page["standard"] < page["hybrid"] < page["vlm"]
    assert cols[-2:] == ["page at roof s", "page % roof"]
    for row, name in zip(rows, report["median"]):
        assert (row[-2] == "-") == (at_roof[name] is None)
        assert row[-1] == "-" or float(row[-1]) == round(100 * at_roof[name]["vlm"] / report["page_s"][name]["vlm"])
    # the CPU the figures were taken on, and the INT8 export's target (this CPU's)
    assert report["cpu"] == int8_target.cpu_summary() and report["cpu"]["model"]
    target = int8_target.detect_target()
    assert report["int8_target"] == {"onnx_fp32": None, "onnx_int8": target} | {name: target for name in extra}
    from mineru_cli.export.bench import report_table

    assert [row[0] for row in report_table(report)[1]] == [
        "torch_fp32",
        "onnx_fp32",
        f"onnx_int8 ({int8_target.detect_target()})",
    ] + ([f"{OPENVINO_VARIANT} ({int8_target.detect_target()})"] if openvino else [])
    for variant in report["median"].values():
        assert set(variant) == {"vision_s", "vision_s_16", "prefill_s", "decode_ms_b1", "decode_ms_b8"}
        assert all(v > 0 for v in variant.values())
    assert report["speedup_vs_torch_fp32"]["torch_fp32"]["decode_ms_b1"] == 1.0
    # each export's size and the peak RSS of a fresh process running it
    assert set(report["bytes"]) == set(report["peak_rss"]) == {"onnx_fp32", "onnx_int8"} | extra
    assert report["bytes"]["onnx_int8"] < report["bytes"]["onnx_fp32"]
    assert all(50 << 20 < rss < 4 << 30 for rss in report["peak_rss"].values()), report["peak_rss"]

    # a later run reuses the exports, except one written in an older format, which it exports again
    manifest_path = tmp_path / "onnx-int8" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 2
    manifest_path.write_text(json.dumps(manifest))
    # (decoding only this time: no image, no prompt; the peak RSS run leaves them out too, and
    # no page is modelled from figures that were not measured)
    again = bench_full_size(
        tmp_path,
        threads=1,
        config=small,
        repeats=1,
        image_hw=None,
        prefill_tokens=0,
        decode_batches=(1, 8),
        decode_steps=2,
        decode_context=20,
        log=None,
        crop_sizes={},
    )
    assert set(again["export_timings"]) == {"onnx_int8"}
    assert set(again["median"]["onnx_int8"]) == {"decode_ms_b1", "decode_ms_b8"} and again["page_s"] == {}
    assert all(50 << 20 < rss < 4 << 30 for rss in again["peak_rss"].values()), again["peak_rss"]
    assert json.loads(manifest_path.read_text())["format_version"] == 4
    # the bench model's placeholder tokenizer has no chat tokens: calibration inputs are its
    # image tokens and random text
    from mineru_cli.export.bias_correction import TEXT_TOKENS, calibration_inputs

    for x in calibration_inputs(tmp_path / "model", (901, 900, 902), samples=2):
        ids = x.input_ids
        assert ids[0] == 901 and ids[-TEXT_TOKENS - 1] == 902 and (ids[1 : -TEXT_TOKENS - 1] == 900).all()
        assert (ids[-TEXT_TOKENS:] < 900).all()

    # decoding alone (no image, no prompt timing), as for decode-only reruns
    from mineru_cli.export.bench import bench_runtimes
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    alone = bench_runtimes(
        {"int8": OnnxRuntime(tmp_path / "onnx-int8")},
        small,
        image_hw=None,
        crop_sizes={},
        prefill_tokens=0,
        decode_batches=(2,),
        decode_steps=2,
        decode_context=20,
        repeats=1,
    )
    assert set(alone["median"]["int8"]) == {"decode_ms_b2"}


def _quantized_weights(graph) -> list[np.ndarray]:
    """Every INT8 weight matrix of a quantized graph, minus its zero point."""
    from onnx import numpy_helper

    inits = {t.name: t for t in graph.initializer}
    out = []
    for name, t in inits.items():
        if name.endswith("_quantized"):
            zero = numpy_helper.to_array(inits[name[: -len("_quantized")] + "_zero_point"]).astype(np.int32)
            out.append(numpy_helper.to_array(t).astype(np.int32) - zero)
    return out


def _stored_weights(path, role: str, table: dict):
    """(kind, onnx data type, largest |q|) of each quantized weight of a graph, its kind from
    its shape (onnx_export.weight_kind)."""
    from onnx import numpy_helper

    from mineru_cli.export.onnx_export import weight_kind

    graph = onnx.load(str(path))
    return [
        (
            weight_kind(role, tuple(t.dims), table),
            t.data_type,
            int(np.abs(numpy_helper.to_array(t).astype(np.int32)).max()),
        )
        for t in graph.graph.initializer
        if t.name.endswith("_quantized")
    ]


def test_an_avx2_export_is_saturation_free_and_right_on_any_cpu(tiny_vlm, tmp_path):
    """--target avx2 on any CPU (an AMX one included) writes only weights that no kernel adds in
    saturating 16-bit sums: signed 7-bit ones (|q| <= 64: 255 * 64 * 2 < 32,767), so a CPU
    without VNNI runs them on its fast kernels as they are; the vision graph's products are
    bias-corrected without being asked, the decoder's are not; and it stays as close to torch as
    the other INT8 exports."""
    report = export_model(
        tiny_vlm / "model", tmp_path / "avx2", int8=True, exporter="torchscript", threads=1, target="avx2"
    )
    q, table = report["quantization"], report["model"]
    assert q["target"] == "avx2" and not int8_target.saturating_graphs(q)
    own = int8_target.kind_settings("avx2")
    seven = {"weight_type": "QInt8", "reduce_range": True}
    # both graphs (the output layer included) signed 7-bit
    assert {r: {k: q[r][k] for k in seven} for r in ("vision", "decoder")} == {"vision": seven, "decoder": seven}
    assert int8_target.corrected_graphs("avx2") == ("vision",) and "bias_correction" not in q["decoder"]
    vision = onnx.load(str(tmp_path / "avx2" / "vision.onnx"), load_external_data=False).graph
    bc = q["vision"]["bias_correction"]
    assert bc["folded_into_bias"] > 0 and bc["shift_rms_median"] > 0, bc
    assert bc["folded_into_bias"] + bc["added"] == sum(t.name.endswith("_quantized") for t in vision.initializer), bc
    for role in ("vision", "decoder"):
        recorded = q[role].get("kinds", {})
        assert {k: {f: v[f] for f in ("weight_type", "reduce_range")} for k, v in recorded.items()} == own[role]
        assert q[role]["excluded_nodes"] == []  # nothing left in float32
        stored = _stored_weights(tmp_path / "avx2" / f"{role}.onnx", role, table)
        assert sum(len(v["nodes"]) for v in recorded.values()) == sum(kind in own[role] for kind, _, _ in stored)
        assert {kind for kind, _, _ in stored} >= ({"attention", "mlp", "lm_head"} if role == "decoder" else {"mlp"})
        for kind, dtype, largest in stored:
            if kind in own[role] or q[role]["reduce_range"]:
                # signed 7-bit: per-channel scales put each channel's largest weight at 64 exactly,
                # so full-range (127) or narrower weights fail here
                assert (dtype, largest) == (onnx.TensorProto.INT8, 64), (role, kind, largest)
            else:
                assert dtype == onnx.TensorProto.UINT8, (role, kind)  # no other signed weight
    assert _keeps_clear_choices(report["parity"], 0.99), report["parity"]
    assert int8_target.graphs_needing_exact_kernels(report, {"avx2", "fma"}) == []  # fast on plain AVX2


def test_a_vnni_export_runs_exactly_where_it_would_saturate(tiny_vlm, tmp_path):
    """Full 8-bit signed weights (--target amx) take the fast kernels on CPUs with VNNI/AMX; on the
    others they would saturate (and do: the parity falls apart), so the runtime runs them on
    onnxruntime's exact u8 x u8 kernels and `mineru parse` says an avx2 export would be faster."""
    from typer.testing import CliRunner

    from mineru_cli.cli import app
    from mineru_cli.export.onnx_export import _load_model, measure_parity, parity_inputs
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime
    from mineru_cli.vlm.runtime_torch import TorchRuntime

    out = tmp_path / "amx"
    report = export_model(tiny_vlm / "model", out, int8=True, exporter="torchscript", threads=1, target="amx")
    q = report["quantization"]
    assert q["target"] == "amx" and int8_target.saturating_graphs(q) == ["vision", "decoder"]
    assert max(int(np.abs(w).max()) for w in _quantized_weights(onnx.load(str(out / "decoder.onnx")).graph)) > 64
    # the verification ran the way this CPU runs the export: exactly
    assert _keeps_clear_choices(report["parity"], 0.99), report["parity"]
    for flags in ({"avx2", "avx512_vnni"}, {"avx2", "amx_int8"}, {"avx2", "avx_vnni"}):
        assert int8_target.graphs_needing_exact_kernels(report, flags) == []
    assert int8_target.graphs_needing_exact_kernels(report, {"avx2", "fma", "avx512f", "avx512bw"}) == [
        "vision",
        "decoder",
    ]

    runtime = OnnxRuntime(out)
    assert runtime.exact_kernels == ([] if int8_target.has_int8_sums() else ["vision", "decoder"])
    page = tmp_path / "page.png"
    from PIL import Image

    Image.new("RGB", (200, 100), "white").save(page)
    result = CliRunner().invoke(
        app,
        [
            "parse",
            str(page),
            "--out",
            str(tmp_path / "r.jsonl"),
            "--engine",
            "vlm",
            "--model",
            str(out),
            "--runtime",
            "onnx",
            "--no-cache",
        ],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert ("exact but slower u8 x u8 kernels" in said) != int8_target.has_int8_sums(), result.output
    if not int8_target.has_int8_sums():
        assert "quantized for amx" in said and "mineru export --model " in said, said
        assert f"--out {out} --int8 --target avx2 --force" in said, said  # the whole command that works
        # what the exact kernels prevent: this CPU's fast kernel saturates on those weights
        fast = measure_parity(
            TorchRuntime.from_model(_load_model(tiny_vlm / "model")),
            OnnxRuntime(out, exact_int8=False),
            parity_inputs(tiny_vlm / "model"),
        )
        assert fast["cosine_min"] < 0.99, fast


def test_the_int8_target_rule():
    """Which target a CPU is, and which weights each target gets: full 8-bit signed weights only
    where the kernel adds in 32 bits, signed 7-bit ones (saturation-free) for plain AVX2."""
    assert int8_target.detect_target({"avx2", "fma"}) == "avx2"
    assert int8_target.detect_target({"avx2", "avx512f", "avx512bw"}) == "avx2"  # AVX-512 without VNNI
    assert int8_target.detect_target({"avx2", "avx_vnni"}) == "avx-vnni"
    assert int8_target.detect_target({"avx512f", "avx512_vnni"}) == "avx512-vnni"
    assert int8_target.detect_target({"avx512_vnni", "amx_int8", "amx_tile"}) == "amx"
    assert int8_target.resolve_target(None) == int8_target.resolve_target("auto") == int8_target.detect_target()
    assert int8_target.resolve_target("amx") == "amx"
    with pytest.raises(SetupError, match="choose auto or one of avx2"):
        int8_target.resolve_target("neon")
    for target in int8_target.TARGETS:
        settings = int8_target.int8_settings(target)
        assert set(settings) == {"vision", "decoder"}
        saturating = [int8_target.saturates(s) for s in settings.values()]
        assert saturating == [target != "avx2"] * 2, (target, settings)
        # 7-bit weights lose a bit: the avx2 vision graph makes up for it by bias correction
        sevens = [r for r, s in settings.items() if s == {"weight_type": "QInt8", "reduce_range": True}]
        assert int8_target.corrected_graphs(target) == (("vision",) if target == "avx2" else ()), target
        assert set(int8_target.corrected_graphs(target)) <= set(sevens), target
        # an export's table is current for its target (mineru bench re-exports one that is not)
        table = {r: {**v, "nodes": 3} for r, v in settings.items()}
        for role in int8_target.corrected_graphs(target):
            table[role]["bias_correction"] = {"folded_into_bias": 3}
        assert int8_target.made_for(table, target), target
        assert int8_target.made_for({**table, "decoder": {"bits": 4}}, target), target  # INT4 decoder
        for role in int8_target.corrected_graphs(target):  # made before the graph was corrected
            assert not int8_target.made_for({**table, role: settings[role]}, target), target
        other = "avx2" if target != "avx2" else "amx"
        assert not int8_target.made_for(table, other), (target, other)
        with_kind = {**table, "decoder": {**table["decoder"], "kinds": {"lm_head": {"weight_type": "QUInt8"}}}}
        assert not int8_target.made_for(with_kind, target), target
        flags = {"avx2"} | ({int8_target.TARGET_FLAGS[target]} if target != "avx2" else set())
        # an export made for a target takes the fast kernels on a CPU of that target
        assert int8_target.graphs_needing_exact_kernels({"quantization": {**settings, "target": target}}, flags) == []
    # what `--target avx2` wrote before 2026-12-05: unsigned vision weights, uncorrected
    old_avx2 = {"vision": {"weight_type": "QUInt8", "reduce_range": False}, "decoder": int8_target.S7}
    assert not int8_target.made_for(old_avx2, "avx2") and not int8_target.made_for(None, "avx2")
    assert not int8_target.saturates({"weight_type": "QUInt8", "reduce_range": False})
    assert not int8_target.saturates({"weight_type": "QInt8", "reduce_range": True})  # 7-bit signed
    assert not int8_target.saturates({"bits": 4, "method": "onnxruntime.MatMulNBitsQuantizer"})  # INT4
    # an earlier avx2 decoder: unsigned weights, the output layer's signed 7-bit; its own table counts too
    lm7 = {"weight_type": "QInt8", "reduce_range": True}
    assert not int8_target.saturates({"weight_type": "QUInt8", "reduce_range": False, "lm_head": lm7})
    lm8 = {"weight_type": "QInt8", "reduce_range": False}
    assert int8_target.saturates({"weight_type": "QUInt8", "reduce_range": False, "lm_head": lm8})
    # kinds of product with their own weights (the table's "kinds"): any that saturates counts
    u8 = {"weight_type": "QUInt8", "reduce_range": False}
    assert not int8_target.saturates({**u8, "kinds": {"mlp": lm7, "lm_head": lm7}})
    assert int8_target.saturates({**u8, "kinds": {"mlp": lm7, "lm_head": lm8}})
    assert int8_target.saturates({**u8, "kinds": {"mlp": {"weight_type": "QInt8"}}})  # no reduce_range
    assert int8_target.saturates({**u8, "kinds": "mlp"})  # a damaged table
    assert int8_target.graphs_needing_exact_kernels({"quantization": None}, {"avx2"}) == []  # fp32
    # the exports of earlier mineru-cli versions: QUInt8 vision and a full-range QInt8 decoder
    old = {
        "quantization": {
            "vision": {"weight_type": "QUInt8", "reduce_range": False},
            "decoder": {"weight_type": "QInt8", "reduce_range": False},
            "cpu_int8_flags": [],
        }
    }
    assert int8_target.graphs_needing_exact_kernels(old, {"avx2", "fma"}) == ["decoder"]
    note = int8_target.exact_kernels_note(old, "old", ["decoder"])
    assert note.startswith("the ONNX export old was made by a mineru-cli without INT8 targets: its decoder graph holds")
    # settings the rule does not know, or a damaged table, take the exact kernels (they cost only speed)
    for odd in ({"weight_type": "QInt8", "reduce_range": "false"}, {"weight_type": "QInt8"}, {"method": "x"}, "QInt8"):
        assert int8_target.saturates(odd), odd
    assert int8_target.saturating_graphs("int8") == ["vision", "decoder"]
    assert int8_target.saturating_graphs({"scheme": "int8"}) == []  # no graph quantized
