"""Where the MinerU2.5 model folder is: --model, $MINERU_MODEL_PATH, ./models, or the HF cache.

A model folder is a Hugging Face model folder: config.json, *.safetensors, tokenizer.json and
preprocessor_config.json. Nothing is ever downloaded; a missing model is a SetupError that says
how to get one.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import SetupError

REPO_ID = "opendatalab/MinerU2.5-2509-1.2B"
ENV_VAR = "MINERU_MODEL_PATH"
LOCAL_DIR = Path("models") / "MinerU2.5-2509-1.2B"  # where the download hint puts it
REQUIRED_FILES = ("config.json", "tokenizer.json", "preprocessor_config.json")

DOWNLOAD_HINT = (
    f"get it with: hf download {REPO_ID} --local-dir {LOCAL_DIR.as_posix()} "
    f"(then pass --model {LOCAL_DIR.as_posix()} or set {ENV_VAR})"
)


def missing_files(path: Path) -> list[str]:
    """What `path` lacks to be a model folder ([] when it is one)."""
    if not path.is_dir():
        return ["the folder itself"]
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if not any(path.glob("*.safetensors")):
        missing.append("*.safetensors")
    return missing


def is_model_dir(path: Path) -> bool:
    return not missing_files(path)


def hub_cache_dir() -> Path:
    """The HF hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hf_cache_snapshot(repo_id: str = REPO_ID, cache_dir: Path | None = None) -> Path | None:
    """The complete snapshot folder of `repo_id` in the HF cache (refs/main first), or None."""
    root = (cache_dir or hub_cache_dir()) / f"models--{repo_id.replace('/', '--')}"
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = []
    ref = root / "refs" / "main"
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    candidates += sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((p for p in candidates if is_model_dir(p)), None)


def _checked(path: Path, source: str) -> Path:
    missing = missing_files(path)
    if missing:
        raise SetupError(
            f"{source} {path} is not a MinerU2.5 model folder (missing: {', '.join(missing)}); {DOWNLOAD_HINT}"
        )
    return path.resolve()


def find_model(explicit: str | os.PathLike | None = None) -> Path | None:
    """The model folder to use, or None when there is none.

    Order: `explicit` (--model), $MINERU_MODEL_PATH, ./models/MinerU2.5-2509-1.2B, the HF cache
    snapshot of opendatalab/MinerU2.5-2509-1.2B. A path the user named (explicit or the
    environment variable) that is not a model folder raises SetupError instead of being skipped.
    """
    if explicit:
        return _checked(Path(explicit).expanduser(), "--model")
    env = os.environ.get(ENV_VAR)
    if env:
        return _checked(Path(env).expanduser(), ENV_VAR)
    if is_model_dir(LOCAL_DIR):
        return LOCAL_DIR.resolve()
    return hf_cache_snapshot()


def resolve_model(explicit: str | os.PathLike | None = None) -> Path:
    """Like find_model, but a missing model is a SetupError with the download command."""
    path = find_model(explicit)
    if path is None:
        raise SetupError(
            f"the MinerU2.5 model was not found (no --model, no ${ENV_VAR}, nothing in "
            f"{LOCAL_DIR.as_posix()} or the Hugging Face cache {hub_cache_dir()}); "
            f"{DOWNLOAD_HINT}"
        )
    return path
