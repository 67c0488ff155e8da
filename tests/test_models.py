"""`mineru models` and `mineru models verify` on folders with a good export, a tampered one and
none: the tiny trained model (Pro-shaped in ./models, 2509-shaped in a Hugging Face cache
snapshot whose weights link to their sha256-named blob) and a real TorchScript export of it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import mineru

from mineru_cli.vlm.export_format import UNFINISHED
from mineru_cli.vlm.model_dir import LINK_LOOP

sys.path.insert(0, str(Path(__file__).resolve().parent / "vlm"))
from model_shapes import COMMIT, pro_shaped
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def site(tiny_vlm, tmp_path_factory):
    pytest.importorskip("onnx")
    from mineru_cli.export.onnx_export import export_model

    root = tmp_path_factory.mktemp("site")
    pro = pro_shaped(tiny_vlm / "model", root / "models" / "MinerU2.5-Pro-2605-1.2B")
    export_model(pro, pro / "onnx", verify=False, exporter="torchscript", threads=1)
    tampered = root / "models" / "tampered-export"
    shutil.copytree(pro / "onnx", tampered)
    data = bytearray((tampered / "decoder.onnx").read_bytes())
    data[-10] ^= 0xFF  # same size, other bytes: only the sha256 tells
    (tampered / "decoder.onnx").write_bytes(bytes(data))
    # a Hugging Face cache snapshot of the 2509 shape, no export: files link to their blobs
    repo = root / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B"
    snap, blobs = repo / "snapshots" / COMMIT, repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for src in (tiny_vlm / "model").iterdir():
        blob = blobs / hashlib.sha256(src.read_bytes()).hexdigest()
        shutil.copy(src, blob)
        os.symlink(os.path.relpath(blob, snap), snap / src.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return {"root": root, "pro": pro, "export": pro / "onnx", "tampered": tampered, "hub": snap}


def env_for(root: Path) -> dict:
    return {
        "HF_HUB_CACHE": str(root / "hub"),
        "MODELSCOPE_CACHE": str(root / "modelscope"),
        "MINERU_TOOLS_CONFIG_JSON": str(root / "mineru.json"),
        "MINERU_MODEL_PATH": "",
        "MINERU_CACHE_DIR": str(root / "cache"),
    }


def models(root: Path, *args: str):
    r = mineru("models", *args, cwd=root, env=env_for(root), timeout=120)
    return r, (json.loads(r.stdout) if "--json" in args and r.stdout.strip() else None)


def test_models_lists_every_folder_and_export(site):
    root = site["root"]
    r, report = models(root, "--json")
    entries = {Path(e["path"]): e for e in report["entries"]}
    assert r.returncode == 1 and report["ok"] is False, r.stdout + r.stderr  # the tampered export
    pro, export, tampered, hub = (entries[site[k].resolve()] for k in ("pro", "export", "tampered", "hub"))
    assert (pro["kind"], pro["release"], pro["status"], pro["where"]) == (
        "model",
        "MinerU2.5-Pro-2605-1.2B",
        "ok",
        "models folder",
    )
    assert pro["bytes"] == sum(p.stat().st_size for p in site["pro"].iterdir() if p.is_file())
    assert (export["kind"], export["release"], export["status"]) == ("export", "MinerU2.5-Pro-2605-1.2B", "ok")
    assert export["format"] == "mineru-cli-onnx v4" and export["quantization"] == "fp32"
    assert export["extra"]["identity_from"] == "manifest"
    assert tampered["status"] == "fail" and "decoder.onnx does not match its sha256" in tampered["detail"]
    assert "mineru export" in tampered["fix"]
    assert (hub["release"], hub["status"], hub["where"]) == ("MinerU2.5-2509-1.2B", "ok", "Hugging Face cache")
    assert len(entries) == 4
    # the human form: each entry with its release and state; doctor lists the same exports
    r, _ = models(root)
    assert r.returncode == 1 and "[fail] " + str(site["tampered"].resolve()) in r.stdout
    assert r.stdout.count("MinerU2.5-Pro-2605-1.2B") >= 2
    d = mineru("doctor", "--json", cwd=root, env=env_for(root), timeout=120)
    checks = {c["name"]: c for c in json.loads(d.stdout)["checks"]}
    assert checks[f"export {site['tampered'].resolve()}"]["status"] == "fail"
    assert checks[f"export {site['export'].resolve()}"]["status"] == "ok"
    assert "MinerU2.5-Pro-2605-1.2B" in checks["model"]["detail"]


def test_verify_checks_one_fully(site, tmp_path):
    root = site["root"]
    for key in ("pro", "export", "hub"):
        r, report = models(root, "verify", str(site[key]), "--json")
        assert r.returncode == 0 and report["entries"][0]["status"] == "ok", (key, r.stdout, r.stderr)
    r, report = models(root, "verify", str(site["hub"]), "--json")
    assert "sha256 of their cache blobs" in report["entries"][0]["detail"]
    r, _ = models(root, "verify", str(site["tampered"]))
    assert r.returncode == 1 and "does not match its sha256" in r.stdout
    # a weight changed in place (header and size intact): the listing's header check passes,
    # verify's hash against the blob's name does not
    hub = tmp_path / "hub-copy"
    shutil.copytree(site["hub"].parents[2], hub, symlinks=True)
    snap = hub / "models--opendatalab--MinerU2.5-2509-1.2B" / "snapshots" / COMMIT
    blob = (snap / "model.safetensors").resolve()
    data = bytearray(blob.read_bytes())
    data[-3] ^= 0x01
    blob.write_bytes(bytes(data))
    r, report = models(root, "verify", str(snap), "--json")
    assert r.returncode == 1 and "does not match the sha256" in report["entries"][0]["detail"]
    r, _ = models(root, "verify", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and f"{tmp_path / 'nowhere'} does not exist" in r.stderr


def test_a_stale_export_is_said_to_be_stale_with_its_release(site, tmp_path):
    """An export in a model folder's onnx/ made from other weights than the folder's was listed
    as "release unknown": it is the release its manifest records, said to be stale, with the
    command that exports it again."""
    model = tmp_path / "model"
    shutil.copytree(site["pro"], model)
    data = bytearray((model / "model.safetensors").read_bytes())
    data[-3] ^= 0x01  # other weights, the header intact
    (model / "model.safetensors").write_bytes(bytes(data))
    r, _ = models(tmp_path, "--model", str(model))
    export = r.stdout.split(f"[fail] {model.resolve() / 'onnx'}\n", 1)[1].splitlines()[0]
    assert r.returncode == 1 and "release unknown" not in r.stdout, r.stdout
    assert "; MinerU2.5-Pro-2605-1.2B; " in export and "stale: it was not made from the model folder it is in" in export
    assert export.endswith(f"-> fix: export it again with: mineru export --model {model.resolve()} --force"), export


def test_nothing_found(tmp_path):
    # `--help` promises exit 1 when there is no MinerU2.5 model (all([]) passed it as 0)
    r, report = models(tmp_path, "--json")
    assert r.returncode == 1 and report == {"ok": False, "entries": []}
    r, _ = models(tmp_path)
    assert r.returncode == 1 and "no MinerU2.5 model folder or ONNX export found" in r.stdout
    assert "hf download opendatalab/MinerU2.5-2509-1.2B" in r.stdout  # where to get one, as parse says
    (tmp_path / "models" / "some-folder").mkdir(parents=True)
    (tmp_path / "models" / "some-folder" / "config.json").write_text("{}")
    r, report = models(tmp_path, "--json")
    assert report["entries"] == []  # not a model folder: not listed (doctor and parse name what it lacks)


def test_a_model_folder_that_is_not_there_is_a_usage_error(tmp_path):
    """--model names a folder to look at: one that does not exist was ignored (exit 0, as if not
    given); it is refused with exit 2, as parse refuses it."""
    r, _ = models(tmp_path, "--model", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and f"--model {tmp_path / 'nowhere'}: does not exist" in r.stderr, r.stderr
    (tmp_path / "a-file").write_text("")
    r, _ = models(tmp_path, "--model", str(tmp_path / "a-file"), "--json")
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr and r.stdout == ""
    # a symbolic-link loop is said to be one, not a folder that is not there
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    loop = "is a symbolic-link loop (a link on its path leads back to itself)"
    r, _ = models(tmp_path, "--model", str(tmp_path / "loop"))
    assert r.returncode == 2 and f"--model {tmp_path / 'loop'}: {loop}" in r.stderr, r.stderr
    r, _ = models(tmp_path, "verify", str(tmp_path / "loop"))
    assert r.returncode == 2 and f"{tmp_path / 'loop'} {loop}" in r.stderr, r.stderr
    r = mineru("models", cwd=tmp_path, env={**env_for(tmp_path), "MINERU_MODEL_PATH": str(tmp_path / "loop")})
    assert r.returncode == 1 and f"$MINERU_MODEL_PATH; {loop}" in r.stdout, r.stdout


def test_a_named_folder_without_a_model_is_reported_as_parse_refuses_it(site, tmp_path):
    """--model X (or $MINERU_MODEL_PATH) naming a folder with neither a model nor an export was
    passed over in silence: exit 0 when another model was found, 1 "none found" otherwise, while
    parse refuses X (exit 2). It is a failed entry that names X and what it lacks."""
    root = site["root"]
    (tmp_path / "some-folder").mkdir()
    (tmp_path / "some-folder" / "config.json").write_text("{}")
    r, report = models(root, "--model", str(tmp_path / "some-folder"), "--json")
    first = report["entries"][0]
    assert r.returncode == 1 and report["ok"] is False, r.stdout
    assert (first["path"], first["where"], first["status"]) == (str(tmp_path / "some-folder"), "--model", "fail")
    detail = first["detail"]
    assert "is not a MinerU2.5 model folder (missing: tokenizer.json" in detail and "not an ONNX export" in detail
    assert len(report["entries"]) == 5  # the four found as before, each listed
    p = mineru("parse", str(tmp_path), "--model", str(tmp_path / "some-folder"), cwd=root, env=env_for(root))
    assert p.returncode == 2 and f"--model {tmp_path / 'some-folder'} is not a MinerU2.5 model folder" in p.stderr
    # the variable likewise, unless --model overrides it (as parse does)
    nowhere = str(tmp_path / "nowhere")
    r = mineru("models", cwd=root, env={**env_for(root), "MINERU_MODEL_PATH": nowhere}, timeout=120)
    assert r.returncode == 1 and f"[fail] {nowhere}" in r.stdout and "$MINERU_MODEL_PATH; does not exist" in r.stdout
    env = {**env_for(root), "MINERU_MODEL_PATH": nowhere}
    r = mineru("models", "--model", str(site["export"]), "--json", cwd=root, env=env, timeout=120)
    assert nowhere not in r.stdout and json.loads(r.stdout)["entries"][0]["status"] == "ok", r.stdout


def test_parse_and_models_say_what_a_named_folder_is_in_the_same_words(tmp_path):
    """What a folder named as the model is when it holds none was written three times (parse,
    `mineru models`, `mineru models verify`) in words that differed: a path not there "does not
    exist" to parse, "no such folder" to models, "is not a folder" to verify; a file "is a file,
    not a folder" to parse, "is not a folder" to models; part of a model "is not a MinerU2.5
    model folder" to parse, "not a model folder ... and not an ONNX export" to models; an
    unfinished export's fix was another sentence in each. They say it in the same words now."""
    page = Path(__file__).parent / "data" / "dash_row_table_chromium.png"
    (tmp_path / "a-file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "config.json").write_text("{}")
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / UNFINISHED).write_text("")

    def parse(*args: str, env: dict | None = None) -> str:
        env = {**env_for(tmp_path), **(env or {})}
        r = mineru("parse", str(page), "--out", str(tmp_path / "r.jsonl"), *args, cwd=tmp_path, env=env, timeout=120)
        assert r.returncode == 2, r.stdout + r.stderr
        return r.stderr

    no_folder = {"nowhere": "does not exist", "a-file": "is a file, not a folder", "loop": f"is {LINK_LOOP}"}
    for name, words in no_folder.items():
        path = tmp_path / name
        assert f"--model {path} {words}: check the path, or get it with: " in parse("--model", str(path))
        r, _ = models(tmp_path, "--model", str(path))
        assert r.returncode == 2 and f"--model {path}: {words}" in r.stderr, r.stderr
        r, _ = models(tmp_path, "verify", str(path))
        assert r.returncode == 2 and f"{path} {words}" in r.stderr, r.stderr
        r = mineru("models", "--json", cwd=tmp_path, env={**env_for(tmp_path), "MINERU_MODEL_PATH": str(path)})
        (entry,) = json.loads(r.stdout)["entries"]
        assert entry["detail"].startswith(words) and entry["fix"].startswith("check the path, or get it with: ")
        said = parse(env={"MINERU_MODEL_PATH": str(path)})
        assert f"MINERU_MODEL_PATH {path} {entry['detail']}: {entry['fix']}" in said, said
    not_a_model = {
        "part": "is not a MinerU2.5 model folder (missing: tokenizer.json, preprocessor_config.json, *.safetensors) "
        "and not an ONNX export (no manifest.json)",
        "unfinished": "is an unfinished export (mineru export was cut off while writing it)",
    }
    for name, words in not_a_model.items():
        path = tmp_path / name
        r, report = models(tmp_path, "--model", str(path), "--json")
        (entry,) = report["entries"]
        assert r.returncode == 1 and entry["detail"] == words, entry
        said = parse("--model", str(path))
        assert f"--model {path} {entry['detail']}; {entry['fix']}" in said, said


def test_verify_of_a_folder_without_a_model_exits_1(tmp_path):
    """As `models verify --help` says: 1 when PATH is a folder but not a whole model or export,
    2 only when it is no folder."""
    (tmp_path / "empty").mkdir()
    r, report = models(tmp_path, "verify", str(tmp_path / "empty"), "--json")
    assert r.returncode == 1 and report["entries"][0]["status"] == "fail", r.stdout + r.stderr
    assert "is not a MinerU2.5 model folder" in report["entries"][0]["detail"]
    # it says where it looked and what is missing, not "found via given"
    r, _ = models(tmp_path, "verify", str(tmp_path / "empty"))
    empty = tmp_path / "empty"
    looked = f"looked in {empty} and {empty / 'onnx'}: {empty} is not a MinerU2.5 model folder (missing: config.json"
    assert r.returncode == 1 and looked in r.stdout and "given" not in r.stdout, r.stdout
    assert "GB" not in r.stdout  # no size or release of a folder that holds no model
    r, _ = models(tmp_path, "verify", str(tmp_path / "empty" / "nowhere"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_an_incomplete_model_in_the_default_place_is_listed_with_what_it_lacks(tiny_vlm, tmp_path):
    """models/MinerU2.5-2509-1.2B without tokenizer.json: `mineru models` said "nothing found" and
    suggested downloading into that very folder; doctor said the same. Both name it and what it
    lacks; parse warns and runs the OCR engine; a dangling weights link is no traceback."""
    folder = tmp_path / "models" / "MinerU2.5-2509-1.2B"
    shutil.copytree(tiny_vlm / "model", folder)
    (folder / "tokenizer.json").unlink()
    r, report = models(tmp_path, "--json")
    (entry,) = report["entries"]
    assert r.returncode == 1 and (entry["path"], entry["status"]) == (str(folder), "fail"), r.stdout
    assert "missing: tokenizer.json" in entry["detail"]
    hf = "hf download opendatalab/MinerU2.5-2509-1.2B --local-dir models/MinerU2.5-2509-1.2B"
    assert entry["fix"] == f"complete it with: {hf}"
    d = mineru("doctor", "--json", cwd=tmp_path, env=env_for(tmp_path), timeout=120)
    model = {c["name"]: c for c in json.loads(d.stdout)["checks"]}["model"]
    assert d.returncode == 0 and model["status"] == "warn", model
    assert "models/MinerU2.5-2509-1.2B is not a complete model folder (missing: tokenizer.json)" in model["detail"]
    (tmp_path / "inputs").mkdir()  # no pages: the engine is chosen all the same
    p = mineru("parse", "inputs", cwd=tmp_path, env=env_for(tmp_path), timeout=120)
    assert "warning: models/MinerU2.5-2509-1.2B is not a complete model folder" in p.stderr, p.stderr
    # a copied snapshot whose weights link to a blob that is not there
    shutil.copy(tiny_vlm / "model" / "tokenizer.json", folder)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(tmp_path / "blobs" / "gone")
    p = mineru("parse", "inputs", "--engine", "vlm", "--model", str(folder), cwd=tmp_path, env=env_for(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "missing: model.safetensors (a broken link)" in p.stderr


def test_an_incomplete_snapshot_in_the_hugging_face_cache_is_listed_with_what_it_lacks(tiny_vlm, tmp_path):
    """A Hugging Face cache snapshot without tokenizer.json (a download cut short): `mineru
    models` said nothing was found, `mineru export` that there was nothing in the cache, doctor
    that there was no model. Each names it and what it lacks, with the download that completes it."""
    repo = tmp_path / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B"
    snapshot = repo / "snapshots" / COMMIT
    shutil.copytree(tiny_vlm / "model", snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (snapshot / "tokenizer.json").unlink()
    incomplete = f"{snapshot} is not a complete model folder (missing: tokenizer.json)"
    fix = "complete it with: hf download opendatalab/MinerU2.5-2509-1.2B"
    r, report = models(tmp_path, "--json")
    (entry,) = report["entries"]
    assert r.returncode == 1 and (entry["path"], entry["where"], entry["status"]) == (
        str(snapshot),
        "Hugging Face cache",
        "fail",
    ), r.stdout
    assert "missing: tokenizer.json" in entry["detail"] and entry["fix"] == fix
    e = mineru("export", cwd=tmp_path, env=env_for(tmp_path), timeout=120)
    assert e.returncode == 2 and incomplete in e.stderr and e.stderr.rstrip().endswith(fix), e.stderr
    d = mineru("doctor", "--json", cwd=tmp_path, env=env_for(tmp_path), timeout=120)
    model = {c["name"]: c for c in json.loads(d.stdout)["checks"]}["model"]
    assert model["status"] == "warn" and incomplete in model["detail"] and model["fix"] == fix, model


def test_files_it_may_not_read_are_said_in_words_with_the_fix(site, tmp_path):
    """An export file or model.safetensors this user may not read: models and doctor ended in a
    PermissionError traceback, and advised downloading the model again."""
    from fshelpers import as_plain_user, skip_unless_bits_stop

    model = tmp_path / "model"
    shutil.copytree(site["pro"], model)
    (model / "onnx" / "decoder.onnx").chmod(0o000)
    (model / "model.safetensors").chmod(0o000)
    skip_unless_bits_stop(f"open({str(model / 'model.safetensors')!r}).close()")
    env = {**env_for(tmp_path), "MINERU_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "cache").mkdir(mode=0o777)
    r = mineru("models", "--model", str(model), "--json", cwd=tmp_path, env=env, preexec_fn=as_plain_user())
    entries = {e["path"]: e for e in json.loads(r.stdout)["entries"]}
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    folder, export = entries[str(model.resolve())], entries[str((model / "onnx").resolve())]
    assert "model.safetensors cannot be read (permission denied)" in folder["detail"] and "chmod a+r" in folder["fix"]
    assert "decoder.onnx cannot be read (permission denied)" in export["detail"] and "chmod a+r" in export["fix"]
    assert "download" not in folder["fix"] + export["fix"]
    d = mineru("doctor", "--model", str(model), cwd=tmp_path, env=env, preexec_fn=as_plain_user())
    assert d.returncode == 1 and "Traceback" not in d.stderr and "permission denied" in d.stdout, d.stdout + d.stderr


def test_the_fix_for_a_damaged_export_is_a_command_that_works(site, tmp_path):
    """The fix said "mineru export" (which fails without --model, and without --force where the
    export is), or "mineru export MODEL_DIR OUT_DIR" (export takes no positional arguments). It is
    now the whole command: run as said, it makes the export whole again."""
    import shlex

    from mineru_cli.vlm.export_format import export_command

    model = tmp_path / "model"
    shutil.copytree(site["pro"], model)
    data = bytearray((model / "onnx" / "decoder.onnx").read_bytes())
    data[-10] ^= 0xFF
    (model / "onnx" / "decoder.onnx").write_bytes(bytes(data))
    r, report = models(tmp_path, "verify", str(model / "onnx"), "--json")
    fix = report["entries"][0]["fix"]
    assert r.returncode == 1 and fix == f"export it again with: mineru export --model {model.resolve()} --force", fix
    e = mineru(*shlex.split(fix.split(": ", 1)[1])[1:], cwd=tmp_path, env=env_for(tmp_path), timeout=600)
    assert e.returncode == 0, e.stderr
    r, report = models(tmp_path, "verify", str(model / "onnx"), "--json")
    assert r.returncode == 0 and report["entries"][0]["status"] == "ok"
    # elsewhere than MODEL/onnx: --out; an INT8 export: its scheme and target; an unfinished one: OUT's name
    int8 = {"source": {"model_dir": str(model)}, "quantization": {"scheme": "int8", "target": "avx2"}}
    out = tmp_path / "q"
    assert export_command(out, int8) == f"mineru export --model {model} --out {out} --int8 --target avx2 --force"
    partial = model / "onnx.partial"
    assert export_command(partial, {}) == f"mineru export --model {model} --force"


def test_a_path_holding_a_semicolon_keeps_its_problem_and_fix_apart(site, tmp_path):
    """models and doctor split a SetupError's text at its last "; " to show the problem and the
    fix apart: for a model folder under "a; b" whose safetensors this user may not read, the
    export's fix began "b/model/model.safetensors')" and its detail ended in half a chmod command.
    The error carries the two parts; each is shown whole."""
    from fshelpers import as_plain_user, skip_unless_bits_stop

    from mineru_cli.vlm.export_format import read_fix

    model = tmp_path / "a; b" / "model"
    shutil.copytree(site["pro"], model)
    (model / "model.safetensors").chmod(0o000)
    skip_unless_bits_stop(f"open({str(model / 'model.safetensors')!r}).close()")
    env = {**env_for(tmp_path), "MINERU_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "cache").mkdir(mode=0o777)
    r = mineru("models", "--model", str(model), "--json", cwd=tmp_path, env=env, preexec_fn=as_plain_user())
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    export = next(e for e in json.loads(r.stdout)["entries"] if e["kind"] == "export")
    weights = model.resolve() / "model.safetensors"
    assert export["detail"] == (
        f"cannot read {weights} (permission denied), so whether the export {model.resolve() / 'onnx'} "
        "was made from it cannot be checked"
    ), export
    assert export["fix"] == read_fix(weights) and "'" in export["fix"], export  # the path quoted whole
    d = mineru("doctor", "--model", str(model), "--json", cwd=tmp_path, env=env, preexec_fn=as_plain_user())
    check = next(c for c in json.loads(d.stdout)["checks"] if c["name"].startswith("export "))
    assert (check["detail"], check["fix"]) == (export["detail"], export["fix"]), check


def test_a_user_allowed_to_read_by_a_capability_is_not_refused_the_export(site, tmp_path):
    """A service user given CAP_DAC_READ_SEARCH (it may read files it does not own, as a backup
    user does) was told the export's files "cannot be read (permission denied)": os.access, which
    answers for the real user id without capabilities, said so. Reading is tried: it matches."""
    import subprocess
    import tempfile

    from fshelpers import with_capability

    prefix = with_capability("dac_read_search")
    shared = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are searched by their owner alone
    try:
        shared.chmod(0o755)
        export = shared / "onnx"
        shutil.copytree(site["export"], export)
        for p in export.iterdir():
            p.chmod(0o600)  # this process's: the other user reads them by its capability alone
        env = {**os.environ, **env_for(shared)}
        r = subprocess.run(
            [*prefix, sys.executable, "-m", "mineru_cli", "models", "verify", str(export), "--json"],
            cwd=shared,
            env=env,
            capture_output=True,
            text=True,
        )
        entry = json.loads(r.stdout)["entries"][0]
        assert entry["status"] == "ok" and entry["detail"].startswith("matches its manifest"), entry
    finally:
        shutil.rmtree(shared)
