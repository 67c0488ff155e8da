"""Where the MinerU2.5 model folder is. The search order (find_model; the first model folder wins):

  1. --model                       (a path the user names must be a model folder, else SetupError)
  2. $MINERU_MODEL_PATH            (likewise)
  3. ./models/MinerU2.5-2509-1.2B, then ./models/MinerU2.5-Pro-2605-1.2B
  4. MinerU's own config: ~/mineru.json (or $MINERU_TOOLS_CONFIG_JSON), its "models-dir" "vlm"
     folder (the model folder itself, or a folder holding one under either release's name)
  5. the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub):
     opendatalab/MinerU2.5-2509-1.2B, then opendatalab/MinerU2.5-Pro-2605-1.2B (refs/main first)
  6. the ModelScope cache ($MODELSCOPE_CACHE, else ~/.cache/modelscope/hub): models/<owner>/<name>
     or <owner>/<name>, with older ModelScope's "___" for each "." in the name; 2509 then Pro

At each step 2509 comes before Pro, so an installation that has both keeps the model it used.
Which release a folder holds is read from its files (model_identity), never from these names.
A model folder is a Hugging Face model folder: config.json, *.safetensors, tokenizer.json and
preprocessor_config.json. A folder of steps 3-6 that holds part of one (a download cut short) is
passed over, but named with what it lacks (incomplete_models). Nothing is ever downloaded; a
missing model is a SetupError that says how to get one.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import struct
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import SetupError
from .model_identity import ARCHITECTURE, RELEASES, config_vote

REPO_ID = "opendatalab/MinerU2.5-2509-1.2B"
PRO_REPO_ID = "opendatalab/MinerU2.5-Pro-2605-1.2B"  # MinerU 4's default
REPO_IDS = (REPO_ID, PRO_REPO_ID)  # the search order within each place
ENV_VAR = "MINERU_MODEL_PATH"
HF_PLACE, MODELSCOPE_PLACE = "Hugging Face cache", "ModelScope cache"  # search_places' words for the caches
LOCAL_DIR = Path("models") / "MinerU2.5-2509-1.2B"  # where the download hint puts it
LOCAL_DIRS = tuple(Path("models") / r.split("/")[1] for r in REPO_IDS)
MINERU_CONFIG_ENV = "MINERU_TOOLS_CONFIG_JSON"  # MinerU's own: its config file's name (in ~)
REQUIRED_FILES = ("config.json", "tokenizer.json", "preprocessor_config.json")
PICKLE_WEIGHTS = "pytorch_model*.bin"  # transformers' names for weights saved with pickle

DOWNLOAD_HINT = (
    f"get it with: hf download {REPO_ID} --local-dir {LOCAL_DIR.as_posix()} "
    f"(then pass --model {LOCAL_DIR.as_posix()} or set {ENV_VAR})"
)


def complete_hint(folder: Path, missing: list[str], repo: str | None, where: str) -> str:
    """How to complete `folder`, found `where` holding part of `repo`'s model (None: a folder not
    named by its release, whose config says which it is): a cache's own download of the release,
    which fetches what is not there and mends links to missing blobs, else the release downloaded
    into the folder again, broken links removed first."""
    if where == HF_PLACE:
        return f"complete it with: hf download {repo}"
    if where == MODELSCOPE_PLACE:
        return f"complete it with: modelscope download --model {repo}"
    repo = repo or _release_repo(folder)
    fetch = f"hf download {repo or REPO_ID} --local-dir {shlex.quote(folder.as_posix())}"
    if repo is None:
        fetch += f" (or {PRO_REPO_ID}, where that is the release it held)"
    if any(m.endswith("(a broken link)") for m in missing):
        return f"remove its broken links (find {shlex.quote(folder.as_posix())} -xtype l -delete), then {fetch}"
    return f"complete it with: {fetch}"


def _release_repo(folder: Path) -> str | None:
    """The repository of the release whose config.json `folder` holds, or None (none readable)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return f"opendatalab/{RELEASES[config_vote(config)]}" if isinstance(config, dict) else None


NO_FOLDER = "the folder itself"  # all that missing_files says a path that is no folder lacks


def missing_files(path: Path) -> list[str]:
    """What `path` lacks to be a model folder ([] when it is one). A link to a file that is not
    there (a Hugging Face snapshot copied without its blobs) is a missing file: is_file follows
    links, and every safetensors file must be there, not only one."""
    if not path.is_dir():
        return [NO_FOLDER]
    missing = [_lacking(path / name) for name in REQUIRED_FILES if not (path / name).is_file()]
    weights = sorted(path.glob("*.safetensors"))
    missing += [_lacking(p) for p in weights if not p.is_file()]
    if not weights:
        pickled = ", ".join(p.name for p in pickle_weights(path))
        never = f" (only {pickled}: pickle weights, which mineru-cli never reads)" if pickled else ""
        missing.append(f"*.safetensors{never}")
    return missing


def safetensors_check(path: Path) -> tuple[int, str | None]:
    """(tensors, problem): the header parses and the data it describes fills the file exactly."""
    with open(path, "rb") as fh:  # an OSError is the caller's: whether it is damage depends on why
        try:
            (n,) = struct.unpack("<Q", fh.read(8))
            if n > 100_000_000:
                return 0, f"{path.name}: not a safetensors file (header of {n} bytes)"
            header = json.loads(fh.read(n))
        except (ValueError, struct.error) as exc:
            return 0, f"{path.name}: unreadable safetensors header ({exc})"
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    size = path.stat().st_size
    if 8 + n + end != size:
        return len(tensors), f"{path.name} has {size} bytes, its header describes {8 + n + end} (cut short or padded)"
    return len(tensors), None


def pickle_weights(path: Path) -> list[Path]:
    """The pickle weights in `path` (pytorch_model.bin and its shards). Loading pickle runs code
    from the file, so they are never read: a folder with only those gets how to convert them."""
    return sorted(p for p in path.glob(PICKLE_WEIGHTS) if p.is_file())


def model_fix(path: Path) -> str:
    """How to make `path` (no model folder) one: its pickle weights converted to safetensors
    where it has those and no safetensors, else a release downloaded."""
    if any(path.glob("*.safetensors")) or not pickle_weights(path):
        return DOWNLOAD_HINT
    folder = json.dumps(str(path))  # a Python string in a shell word
    code = f"from transformers import {ARCHITECTURE} as M; M.from_pretrained({folder}).save_pretrained({folder})"
    return (
        f"convert them to safetensors with: python -c {shlex.quote(code)} "
        "(transformers loads the pickle once: only for a file you trust)"
    )


def _lacking(path: Path) -> str:
    """A missing file's name, and whether a link stands in its place."""
    return f"{path.name} (a broken link)" if path.is_symlink() else path.name


# A path whose links lead back to themselves: exists() and is_dir() only say False, and "does
# not exist" sends the user looking for a typo in a name that is there
LINK_LOOP = "a symbolic-link loop (a link on its path leads back to itself)"


def link_loops(path: Path) -> bool:
    """Whether a symbolic link on `path` leads back to itself (the system's ELOOP)."""
    try:
        path.stat()
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


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
    return next((p for p in _hf_snapshots(repo_id, cache_dir) if is_model_dir(p)), None)


def _hf_snapshots(repo_id: str, cache_dir: Path | None = None) -> list[Path]:
    """The snapshot folders of `repo_id` in the HF cache: refs/main's first, then the newest."""
    root = hf_repo_dir(repo_id, cache_dir)
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        return []
    candidates = []
    ref = root / "refs" / "main"
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    candidates += sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    return candidates


def hf_repo_dir(repo_id: str, cache_dir: Path | None = None) -> Path:
    return (cache_dir or hub_cache_dir()) / f"models--{repo_id.replace('/', '--')}"


def mineru_config_dirs() -> list[tuple[Path, str | None]]:
    """(folder, release repository) of the VLM models folder MinerU's own config names
    (~/mineru.json "models-dir"; None: that folder is named by its user, not by a release), and
    of the release-named folders inside it; [] when there is no such config."""
    path = Path.home() / os.environ.get(MINERU_CONFIG_ENV, "mineru.json")  # an absolute name wins
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    models = config.get("models-dir") if isinstance(config, dict) else None
    value = models.get("vlm") if isinstance(models, dict) else models
    if not isinstance(value, str) or not value:
        return []
    root = Path(value).expanduser()
    return [(root, None)] + [(root / r.split("/")[1], r) for r in REPO_IDS]


def modelscope_cache_dir() -> Path:
    if os.environ.get("MODELSCOPE_CACHE"):
        return Path(os.environ["MODELSCOPE_CACHE"]).expanduser()
    return Path.home() / ".cache" / "modelscope" / "hub"


def modelscope_dirs(repo_id: str, cache_dir: Path | None = None) -> list[Path]:
    """Where ModelScope keeps `repo_id` (newer: models/<owner>/<name>; older: <owner>/<name>,
    and "." written "___")."""
    root = cache_dir or modelscope_cache_dir()
    owner, name = repo_id.split("/")
    return [
        base / owner / n for base in (root / "models", root) for n in dict.fromkeys((name, name.replace(".", "___")))
    ]


def search_places() -> list[tuple[str, Path]]:
    """(where, folder) for steps 3-6 of the search, in order; a folder may not exist. The Hugging
    Face entry is the snapshot folder find_model would take (else the one it passes over, else
    the repo's cache folder)."""
    return [(where, folder) for where, folder, _ in _places()]


def _places() -> list[tuple[str, Path, str | None]]:
    """search_places with the repository of the release each place is named for (None: the
    mineru.json models-dir folder itself)."""
    places: list[tuple[str, Path, str | None]] = [("models folder", d, r) for d, r in zip(LOCAL_DIRS, REPO_IDS)]
    places += [("mineru.json models-dir", d, r) for d, r in mineru_config_dirs()]
    for repo in REPO_IDS:
        snapshots = _hf_snapshots(repo)
        snapshot = next((p for p in snapshots if is_model_dir(p)), snapshots[0] if snapshots else None)
        places.append((HF_PLACE, snapshot or hf_repo_dir(repo), repo))
    places += [(MODELSCOPE_PLACE, d, repo) for repo in REPO_IDS for d in modelscope_dirs(repo)]
    return places


@dataclass(frozen=True)
class Incomplete:
    """A folder where the search looks that holds part of a model (incomplete_models)."""

    where: str  # as search_places says it
    folder: Path
    missing: tuple[str, ...]
    fix: str  # complete_hint

    def __str__(self) -> str:
        return f"{self.folder.as_posix()} is not a complete model folder (missing: {', '.join(self.missing)})"


def incomplete_models() -> list[Incomplete]:
    """Each folder where the search looks (steps 3-6) that is there but no model folder: a
    download cut short, or a snapshot copied without its blobs. The search passes over it; parse,
    `mineru export`, `mineru models` and `mineru doctor` name it, what it lacks and how to
    complete it rather than say there is nothing there. A release's own folder (or a cache's
    snapshot of it) counts whenever it is there; the mineru.json models-dir folder itself, which
    may only hold release-named folders, where it holds a model file; a Hugging Face cache folder
    of a release with no snapshot in it, not at all."""
    found: dict[Path, Incomplete] = {}
    for where, folder, repo in _places():
        if not folder.is_dir() or folder.resolve() in found or not (missing := missing_files(folder)):
            continue
        if repo is None and not _holds_model_files(folder):
            continue
        if where == HF_PLACE and folder == hf_repo_dir(repo or ""):  # no snapshot: no file of it came yet
            continue
        found[folder.resolve()] = Incomplete(where, folder, tuple(missing), complete_hint(folder, missing, repo, where))
    return list(found.values())


def _holds_model_files(folder: Path) -> bool:
    """Whether `folder` holds any file of a model folder (a link to nothing too)."""
    names = [folder / n for n in REQUIRED_FILES] + list(folder.glob("*.safetensors")) + pickle_weights(folder)
    return any(p.exists() or p.is_symlink() for p in names)


def incomplete_note() -> tuple[str, str] | None:
    """(what, fix): incomplete_models in words and how to complete them; None when there are none."""
    found = incomplete_models()
    if not found:
        return None
    return "; ".join(map(str, found)), "; ".join(i.fix for i in found)


def named_place(explicit: str | os.PathLike | None = None) -> tuple[str, Path] | None:
    """(source, folder) of the place the user named: --model, else $MINERU_MODEL_PATH (which
    --model overrides); None when neither is set. parse takes its model or export from there or
    refuses to run; `mineru models` and `mineru doctor` report that same place."""
    for source, value in (("--model", explicit), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if value:
            return source, Path(value).expanduser()
    return None


def not_a_folder(path: Path) -> str:
    """What `path`, named where a model folder or export is wanted, is when it is no folder, in
    words that follow its name: a file or something else, a symbolic-link loop, or nothing."""
    if path.exists():
        return "is a file, not a folder" if path.is_file() else "is not a folder"
    return f"is {LINK_LOOP}" if link_loops(path) else "does not exist"


def not_a_model_dir(path: Path, missing: list[str]) -> tuple[str, str]:
    """(what, fix) for `path`, which lacks `missing` (missing_files): what it is instead of a
    model folder, in words that follow its name (no folder, an unfinished export, an export, part
    of a model or its pickle weights alone), and what to do about it. parse's refusal of --model,
    `mineru models`, `mineru models verify` and `mineru doctor` say it in these words."""
    from .export_format import (  # (it imports this module)
        MANIFEST,
        is_export_dir,
        is_unfinished_export,
        not_a_model,
        unfinished_export,
    )

    if missing == [NO_FOLDER]:
        return not_a_folder(path), f"check the path, or {DOWNLOAD_HINT}"
    if is_unfinished_export(path):
        return unfinished_export(path)
    if is_export_dir(path):
        return not_a_model(path)
    return (
        f"is not a MinerU2.5 model folder (missing: {', '.join(missing)}) and not an ONNX export (no {MANIFEST})",
        model_fix(path),
    )


def _checked(path: Path, source: str) -> Path:
    missing = missing_files(path)
    if not missing:
        return path.resolve()
    what, fix = not_a_model_dir(path, missing)
    if missing == [NO_FOLDER]:  # a mistyped path, most often: the fix is about the path itself
        raise SetupError(f"{source} {path} {what}: {fix}")
    raise SetupError(f"{source} {path} {what}", fix)


def find_model(explicit: str | os.PathLike | None = None) -> Path | None:
    """The model folder to use, or None when there is none.

    Order: see the module docstring. A path the user named (explicit or the environment
    variable) that is not a model folder raises SetupError instead of being skipped.
    """
    if explicit:
        return _checked(Path(explicit).expanduser(), "--model")
    env = os.environ.get(ENV_VAR)
    if env:
        return _checked(Path(env).expanduser(), ENV_VAR)
    return next((path.resolve() for _, path in search_places() if is_model_dir(path)), None)


def resolve_model(explicit: str | os.PathLike | None = None) -> Path:
    """Like find_model, but a missing model is a SetupError with the download command, or with
    each incomplete_models folder, what it lacks and how to complete it."""
    path = find_model(explicit)
    if path is None:
        incomplete = incomplete_models()
        found = "".join(f"{i}, " for i in incomplete)
        hint = "; ".join(i.fix for i in incomplete) or DOWNLOAD_HINT
        named = {i.folder for i in incomplete}
        empty = " or ".join(d.as_posix() for d in LOCAL_DIRS if d not in named)
        raise SetupError(
            f"the MinerU2.5 model was not found (no --model, no ${ENV_VAR}, {found}"
            f"{'no complete model' if incomplete else 'nothing'} in {empty + ', ' if empty else ''}~/mineru.json's "
            f"models-dir, the Hugging Face cache {hub_cache_dir()} or the ModelScope cache {modelscope_cache_dir()}); "
            f"{hint}"
        )
    return path
