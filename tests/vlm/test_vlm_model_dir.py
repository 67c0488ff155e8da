"""Finding the model folder, and the set-up error when there is none."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_fixtures import tiny_vlm  # noqa: F401  (fixture)

from mineru_cli.core.errors import SetupError
from mineru_cli.engines import make_engine
from mineru_cli.vlm.model_dir import ENV_VAR, find_model, hf_cache_snapshot, resolve_model, search_places

HINT = "hf download opendatalab/MinerU2.5-2509-1.2B --local-dir models/MinerU2.5-2509-1.2B"


def _fake_model(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "preprocessor_config.json", "model.safetensors"):
        (path / name).write_text("{}")
    return path


@pytest.fixture
def no_model(tmp_path, monkeypatch):
    """No --model, no env var, no ./models, empty HF and ModelScope caches, no ~/mineru.json."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "modelscope"))
    monkeypatch.setenv("MINERU_TOOLS_CONFIG_JSON", str(tmp_path / "mineru.json"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_missing_model_is_a_setup_error_with_the_download_command(no_model):
    assert find_model(None) is None
    with pytest.raises(SetupError) as err:
        resolve_model(None)
    assert HINT in str(err.value)
    with pytest.raises(SetupError) as err:
        make_engine("vlm", threads=1, say=lambda m: None)
    assert HINT in str(err.value)


def test_auto_falls_back_to_ocr_without_a_model(no_model):
    said = []
    engine = make_engine("auto", threads=1, say=said.append)
    assert engine.name == "ocr"
    assert "no MinerU2.5 model found" in said[0]


def test_named_folder_that_is_not_a_model_is_an_error(no_model, monkeypatch):
    (no_model / "empty").mkdir()
    with pytest.raises(SetupError, match="missing: config.json, tokenizer.json"):
        find_model(str(no_model / "empty"))
    monkeypatch.setenv(ENV_VAR, str(no_model / "nowhere"))
    with pytest.raises(SetupError, match=ENV_VAR):
        find_model(None)


def test_a_named_path_that_loops_is_said_to_loop(no_model, monkeypatch):
    """--model (or the variable) naming a symbolic-link loop was said not to exist, which sent the
    user looking for a typo in a name that is there."""
    (no_model / "a").symlink_to(no_model / "b")
    (no_model / "b").symlink_to(no_model / "a")
    loop = "is a symbolic-link loop (a link on its path leads back to itself): check the path"
    for given in (no_model / "a", no_model / "a" / "model"):
        with pytest.raises(SetupError) as err:
            find_model(str(given))
        assert str(err.value).startswith(f"--model {given} {loop}"), err.value
    monkeypatch.setenv(ENV_VAR, str(no_model / "b"))
    with pytest.raises(SetupError) as err:
        make_engine("vlm", threads=1, say=lambda m: None)
    assert str(err.value).startswith(f"{ENV_VAR} {no_model / 'b'} {loop}"), err.value
    with pytest.raises(SetupError, match="does not exist"):
        find_model(str(no_model / "nowhere"))


def test_pickle_weights_alone_are_said_never_to_be_read_with_how_to_convert_them(tiny_vlm, no_model):
    """A folder with pytorch_model.bin and no safetensors was said to miss `*.safetensors`, with
    the download command: nothing said that its weights are there but pickle, which is never
    read. It says so, and the command it gives makes safetensors that are then taken."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    folder = no_model / "pickled"
    shutil.copytree(tiny_vlm / "model", folder, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.save(load_file(tiny_vlm / "model" / "model.safetensors"), folder / "pytorch_model.bin")
    with pytest.raises(SetupError) as err:
        find_model(str(folder))
    message = str(err.value)
    assert "(missing: *.safetensors (only pytorch_model.bin: pickle weights, which mineru-cli never reads))" in message
    assert HINT not in message
    command = shlex.split(message.split("; convert them to safetensors with: ", 1)[1].split(" (transformers", 1)[0])
    assert command[0] == "python"
    subprocess.run([sys.executable, *command[1:]], cwd=no_model, check=True, capture_output=True, timeout=300)
    assert find_model(str(folder)) == folder.resolve()


def test_search_order(no_model, monkeypatch):
    explicit = _fake_model(no_model / "explicit")
    env = _fake_model(no_model / "env")
    local = _fake_model(no_model / "models" / "MinerU2.5-2509-1.2B")
    monkeypatch.setenv(ENV_VAR, str(env))
    assert find_model(str(explicit)) == explicit.resolve()
    assert find_model(None) == env.resolve()
    monkeypatch.delenv(ENV_VAR)
    assert find_model(None) == local.resolve()


def test_hf_cache_snapshot(no_model):
    repo = no_model / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B"
    _fake_model(repo / "snapshots" / "aaa")
    (repo / "snapshots" / "bbb").mkdir(parents=True)  # incomplete: skipped
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("bbb\n")
    assert hf_cache_snapshot() == repo / "snapshots" / "aaa"
    assert find_model(None) == repo / "snapshots" / "aaa"
    _fake_model(repo / "snapshots" / "bbb")
    assert find_model(None) == repo / "snapshots" / "bbb"  # refs/main wins


def test_every_place_in_the_documented_order(no_model):
    """Each place is found alone, and a place earlier in the order wins over every later one
    (removing them from the front, one at a time)."""
    places = [
        _fake_model(no_model / "models" / "MinerU2.5-2509-1.2B"),
        _fake_model(no_model / "models" / "MinerU2.5-Pro-2605-1.2B"),
        _fake_model(no_model / "mineru-models" / "vlm"),  # models-dir's vlm folder itself
        _fake_model(no_model / "mineru-models2" / "MinerU2.5-Pro-2605-1.2B"),  # or a folder holding one
        _fake_model(no_model / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B" / "snapshots" / "c1"),
        _fake_model(no_model / "hub" / "models--opendatalab--MinerU2.5-Pro-2605-1.2B" / "snapshots" / "c2"),
        _fake_model(no_model / "modelscope" / "models" / "opendatalab" / "MinerU2.5-2509-1.2B"),
        _fake_model(no_model / "modelscope" / "opendatalab" / "MinerU2___5-Pro-2605-1___2B"),  # older ModelScope
    ]
    config = no_model / "mineru.json"
    for i, expected in enumerate(places):
        if i in (2, 3):
            config.write_text(
                json.dumps({"models-dir": {"pipeline": "/x", "vlm": str(expected.parent if i == 3 else expected)}})
            )
        else:
            config.unlink(missing_ok=True)
        assert find_model(None) == expected.resolve(), i
        shutil.rmtree(expected)
    assert find_model(None) is None
    assert [where for where, _ in search_places()][:2] == ["models folder", "models folder"]


def test_a_broken_mineru_json_is_skipped(no_model):
    (no_model / "mineru.json").write_text("{not json")
    assert find_model(None) is None
    (no_model / "mineru.json").write_text(json.dumps({"models-dir": 3}))
    assert find_model(None) is None


def test_a_broken_link_is_a_missing_file(no_model):
    """A Hugging Face snapshot copied without its blobs: model.safetensors a link to nothing was
    taken for weights (glob lists it), and parse ended in a FileNotFoundError traceback."""
    folder = _fake_model(no_model / "copied")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(no_model / "blobs" / "gone")
    with pytest.raises(SetupError, match=r"missing: model.safetensors \(a broken link\)"):
        find_model(str(folder))


def test_an_incomplete_model_in_a_cache_or_the_models_dir_is_named(no_model):
    """A folder that lacks files in the Hugging Face cache, the ModelScope cache or mineru.json's
    models-dir was passed over without a word: auto said no model was found and --engine vlm that
    there was nothing there. Each is named with what it lacks and the download that completes it
    where it is, as a models/<release> folder is; the models-dir folder itself only where it holds
    a model file (it may only hold release folders)."""
    hub = no_model / "hub" / "models--opendatalab--MinerU2.5-2509-1.2B"
    snapshot = _fake_model(hub / "snapshots" / "c1")
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("c1")
    modelscope = _fake_model(no_model / "modelscope" / "models" / "opendatalab" / "MinerU2.5-Pro-2605-1.2B")
    models_dir = _fake_model(no_model / "vlm-models")
    (models_dir / "config.json").write_text(  # Pro's shape: the release its download must be
        json.dumps({"text_config": {"rope_parameters": {}, "tie_word_embeddings": True}})
    )
    cases = [
        (snapshot, "tokenizer.json", "hf download opendatalab/MinerU2.5-2509-1.2B"),
        (modelscope, "model.safetensors", "modelscope download --model opendatalab/MinerU2.5-Pro-2605-1.2B"),
        (
            models_dir,
            "preprocessor_config.json",
            f"hf download opendatalab/MinerU2.5-Pro-2605-1.2B --local-dir {models_dir}",
        ),
    ]
    (no_model / "mineru.json").write_text(json.dumps({"models-dir": {"vlm": str(models_dir)}}))
    for folder, name, fix in cases:
        others = [f for f, _, _ in cases if f != folder]
        for i, other in enumerate(others):  # out of every place the search looks
            shutil.move(other, no_model / f"aside{i}")
        (folder / name).unlink()
        missing = "*.safetensors" if name.endswith(".safetensors") else name
        incomplete = f"{folder} is not a complete model folder (missing: {missing})"
        said, warned = [], []
        assert make_engine("auto", threads=1, say=said.append, warn=warned.append).name == "ocr"
        assert warned == [f"{incomplete}: the vlm engine passes over it; complete it with: {fix}"], warned
        with pytest.raises(SetupError) as err:
            resolve_model(None)
        assert incomplete in str(err.value) and str(err.value).endswith(f"; complete it with: {fix}"), err.value
        assert "nothing in" not in str(err.value)
        _fake_model(folder)
        for i, other in enumerate(others):
            shutil.move(no_model / f"aside{i}", other)
    # the models-dir folder holding no model file (its release folders are where models go): not named
    for path in models_dir.iterdir():
        path.unlink()
    shutil.rmtree(snapshot)
    shutil.rmtree(modelscope)
    (hub / "refs" / "main").unlink()
    with pytest.raises(SetupError) as err:
        resolve_model(None)
    assert "is not a complete model folder" not in str(err.value) and HINT in str(err.value), err.value


def test_an_incomplete_model_in_the_default_place_is_named(no_model):
    """models/MinerU2.5-2509-1.2B lacking tokenizer.json was passed over in silence: auto ran the
    OCR engine and --engine vlm said there was "nothing in" that very folder."""
    folder = _fake_model(no_model / "models" / "MinerU2.5-2509-1.2B")
    (folder / "tokenizer.json").unlink()
    said, warned = [], []
    assert make_engine("auto", threads=1, say=said.append, warn=warned.append).name == "ocr"
    complete = "complete it with: hf download opendatalab/MinerU2.5-2509-1.2B --local-dir models/MinerU2.5-2509-1.2B"
    incomplete = "models/MinerU2.5-2509-1.2B is not a complete model folder (missing: tokenizer.json)"
    assert warned == [f"{incomplete}: the vlm engine passes over it; {complete}"], warned
    assert said[-1] == "engine: ocr (embedded RapidOCR + layout; no complete MinerU2.5 model for the vlm engine)"
    with pytest.raises(SetupError) as err:
        resolve_model(None)
    assert incomplete in str(err.value) and complete in str(err.value)
    assert "nothing in models/MinerU2.5-2509-1.2B" not in str(err.value)
    # only links to blobs that are not there: each named, and the fix removes them first
    for name in ("config.json", "tokenizer.json", "preprocessor_config.json", "model.safetensors"):
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(no_model / "blobs" / name)
    with pytest.raises(SetupError) as err:
        make_engine("vlm", threads=1, say=lambda m: None)
    assert "missing: config.json (a broken link), tokenizer.json (a broken link)" in str(err.value)
    assert "remove its broken links (find models/MinerU2.5-2509-1.2B -xtype l -delete), then hf download" in str(
        err.value
    )


def test_explain_plan_refuses_weights_cut_short_as_the_run_does(tiny_vlm, tmp_path):
    """A model folder whose safetensors lost their last kilobyte: the torch runtime's load refuses
    it (exit 2), but `--explain-plan` printed its plan and exited 0. It now refuses it too, from the
    file's header (no model is loaded), and the run refuses it before it writes anything."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from helpers import mineru

    model = tmp_path / "model"
    shutil.copytree(tiny_vlm / "model", model)
    weights = model / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as fh:
        fh.truncate(size - 1000)
    shutil.copy(tiny_vlm / "page.png", tmp_path / "page.png")
    for extra in (["--explain-plan"], []):
        r = mineru(
            "parse",
            "page.png",
            "--mode",
            "standard",
            "--model",
            str(model),
            "--runtime",
            "torch",
            "--out",
            "runs/r.jsonl",
            *extra,
            cwd=tmp_path,
            timeout=300,
        )
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert f"model.safetensors has {size - 1000} bytes" in r.stderr, (extra, r.stderr)
        assert not (tmp_path / "runs").exists(), extra
