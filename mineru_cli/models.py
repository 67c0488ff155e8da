"""`mineru models`: every MinerU2.5 model folder and ONNX export this installation can find,
and `mineru models verify PATH`: one of them checked fully. `mineru doctor` lists the same
entries (discover() is the one search both use).

Where it looks: --model and $MINERU_MODEL_PATH (and their onnx/ subfolders), the places
vlm.model_dir searches (./models/<release>, ~/mineru.json's models-dir, the Hugging Face and
ModelScope caches), every folder in ./models and the onnx/ folder inside each model folder.

Each entry says where it was found, which release it holds (vlm.model_identity: from its files,
an export's from its manifest), its size, for an export the format and quantization, and
whether its files match: an export against its manifest (size and sha256 of every file; a
listing trusts the stamps of files already hashed, verify hashes everything again), a model
folder's safetensors against their own headers and, in a Hugging Face cache snapshot, against
the sha256 its blob is named by (verify only). Nothing is changed and torch is never imported.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .core.errors import SetupError, in_words, is_permission
from .hashing import file_sha256
from .vlm import int8_target
from .vlm.export_format import (
    FORMAT,
    ExportDamaged,
    export_command,
    is_export_dir,
    is_unfinished_export,
    read_fix,
    read_manifest,
    source_mismatch,
    stale_export,
    verify_export,
)
from .vlm.model_dir import (
    DOWNLOAD_HINT,
    ENV_VAR,
    NO_FOLDER,
    incomplete_models,
    is_model_dir,
    missing_files,
    named_place,
    not_a_folder,
    not_a_model_dir,
    safetensors_check,
    search_places,
)
from .vlm.model_identity import detect, from_manifest

OK, WARN, FAIL = "ok", "warn", "fail"
GIVEN = "given"  # an Entry's `where` for the folder `mineru models verify` is given
MODEL, EXPORT = "model", "export"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Entry:
    path: str
    kind: str  # model | export
    where: str  # how it was found: --model, $MINERU_MODEL_PATH, models folder, Hugging Face cache, ...
    status: str = OK  # ok | warn | fail: whether its files are whole (warn: runs slower here)
    detail: str = ""  # what the check found (the problem when not ok)
    fix: str = ""
    release: str | None = None  # e.g. MinerU2.5-Pro-2605-1.2B; None: unknown (identity_error says why)
    profile: str | None = None
    identity_error: str | None = None
    bytes: int = 0
    format: str | None = None  # export: "mineru-cli-onnx v4"
    quantization: str | None = None  # export: fp32 | int8 | int4 (for a CPU target)
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != FAIL and self.identity_error is None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        release = self.release or (f"unknown ({self.identity_error})" if self.identity_error else "release unknown")
        quantization = f", {self.quantization}" if self.quantization else ""  # none: its manifest was not read
        kind = "model folder" if self.kind == MODEL else f"export {self.format}{quantization}"
        if self.kind == EXPORT and self.format is None:  # no manifest read: an unfinished export
            kind = "unfinished export"
        fix = f" -> fix: {self.fix}" if self.fix else ""
        # a folder that lacks model files has no release or size to tell: its detail says what it lacks
        what = "" if self.extra.get("missing") else f"{kind}; {release}; {self.bytes / 1e9:.2f} GB; "
        found = "" if self.where == GIVEN else f"found via {self.where}; "
        return f"[{self.status:>4}] {self.path}\n       {what}{found}{self.detail}{fix}"


# --------------------------------------------------------------------------- finding


def candidates(model: str | None = None) -> list[tuple[str, Path]]:
    """(where, folder) to look at, in order; folders may repeat or not exist."""
    out: list[tuple[str, Path]] = []
    for where, value in (("--model", model), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if value:
            out += [(where, Path(value).expanduser()), (where, Path(value).expanduser() / "onnx")]
    for where, path in search_places():
        out += [(where, path), (where, path / "onnx")]
    models = Path("models")
    if models.is_dir():  # ./models/<name> and ./models/<name>/onnx (mineru export's default places)
        for child in sorted(p for p in models.iterdir() if p.is_dir()):
            out += [("models folder", child), ("models folder", child / "onnx")]
    return out


def _holds_model(path: Path) -> bool:
    """Whether parse finds a model folder or an export at `path` (or in its onnx/ folder)."""
    return any(is_export_dir(p) or is_model_dir(p) for p in (path, path / "onnx"))


def discover(model: str | None = None, full: bool = False) -> list[Entry]:
    """Every model folder and export found (each once, under the first place it was found).
    A named place (model_dir.named_place) that holds neither is a failed entry first: parse refuses it, so it
    is never passed over in silence."""
    seen: set[Path] = set()
    entries = []
    place = named_place(model)
    if place is not None and not _holds_model(place[1]):
        entries.append(inspect(place[1], place[0], full))
    # a folder where the search looks that holds part of a model: the search passes over it, so
    # it is said here with what it lacks, never "nothing in" it
    for incomplete in incomplete_models():
        if place is None or incomplete.folder.resolve() != place[1].resolve():
            entry = inspect(incomplete.folder.resolve(), incomplete.where, full)
            entry.fix = incomplete.fix
            entries.append(entry)
    for where, path in candidates(model):
        if not (is_export_dir(path) or is_model_dir(path)):
            continue
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        entries.append(inspect(real, where, full, of_parent=place is None or real != place[1].resolve()))
    return entries


# --------------------------------------------------------------------------- checking


def inspect(path: str | Path, where: str = GIVEN, full: bool = False, of_parent: bool = True) -> Entry:
    """One folder: an export (manifest.json) or a model folder; full: hash every file again.
    of_parent: an export in a model folder's onnx/, which parse runs as that model's, must be
    made from it as it is now (False: the export was named itself, and parse runs it as it is)."""
    path = Path(path)
    if is_export_dir(path):
        return _inspect_export(path, where, full, of_parent)
    entry = Entry(str(path), MODEL, where)
    missing = missing_files(path)
    if missing:
        entry.status = FAIL
        entry.detail, entry.fix = not_a_model_dir(path, missing)
        entry.extra["missing"] = missing
        if is_unfinished_export(path):
            entry.kind = EXPORT
        return entry
    entry.bytes = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    try:
        ident = detect(path)
        entry.release, entry.profile = ident.release, ident.profile
    except SetupError as exc:
        entry.identity_error = str(exc)
    problems: list[str] = []
    unreadable: list[Path] = []  # files this user may not read: a copy is not the fix for those
    tensors = 0
    for weights in sorted(path.glob("*.safetensors")):
        try:
            count, problem = safetensors_check(weights)
            tensors += count
            if problem:
                problems.append(problem)
            elif full and (blob := _hub_blob_sha256(weights)) is not None and file_sha256(weights) != blob:
                problems.append(f"{weights.name} does not match the sha256 its Hugging Face cache blob is named by")
        except OSError as exc:
            if is_permission(exc):
                unreadable.append(weights)
            else:
                problems.append(f"{weights.name} cannot be read ({in_words(exc)})")
    refused = [f"{p.name} cannot be read (permission denied)" for p in unreadable]
    if problems:
        entry.status, entry.detail = FAIL, "; ".join(problems + refused)
        entry.fix = "download the model again (hf download ... --force-download), or remove the damaged files"
    elif unreadable:
        entry.status, entry.detail = FAIL, "; ".join(refused)
        entry.fix = read_fix(unreadable[0] if len(unreadable) == 1 else path / "*")
    else:
        hub = any(_hub_blob_sha256(w) for w in path.glob("*.safetensors"))
        checked = "headers and the sha256 of their cache blobs" if full and hub else "headers"
        entry.detail = f"{tensors} tensors in its safetensors ({checked} checked)"
    return entry


def _inspect_export(path: Path, where: str, full: bool, of_parent: bool) -> Entry:
    entry = Entry(str(path), EXPORT, where, format=FORMAT)
    entry.bytes = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    try:
        manifest = read_manifest(path)
        entry.format = f"{FORMAT} v{manifest.get('format_version')}"
        quant = manifest.get("quantization") or {}
        scheme = quant.get("scheme") or ("quantized" if quant else "fp32")
        entry.quantization = scheme + (f" for {quant['target']}" if quant.get("target") else "")
        manifest = verify_export(path, manifest, trust_stamps=not full)
    except ExportDamaged as exc:
        entry.status, entry.detail, entry.fix = FAIL, exc.detail, exc.fix
        return entry
    except SetupError as exc:  # a manifest it cannot take: the fix is a command that makes it again
        entry.status, entry.detail = FAIL, exc.detail if "mineru export" in exc.fix else str(exc)
        entry.fix = export_command(path)
        return entry
    try:  # the release it holds, stale or not: its manifest says which it was made from
        ident = from_manifest(path, manifest)
        entry.release, entry.profile = ident.release, ident.profile
        entry.extra["identity_from"] = ident.source
    except SetupError as exc:
        entry.identity_error = str(exc)
    try:
        why = of_parent and path.name == "onnx" and is_model_dir(path.parent) and source_mismatch(path, path.parent)
    except SetupError as exc:  # the model's weights it was made from cannot be read
        entry.status, entry.detail, entry.fix = FAIL, exc.detail, exc.fix
        return entry
    if why:
        entry.status = FAIL
        entry.detail, entry.fix = stale_export(path, why, manifest)
        return entry
    entry.detail = f"matches its manifest ({len(manifest['files'])} files)"
    graphs = int8_target.graphs_needing_exact_kernels(manifest)
    if graphs:
        entry.status = WARN
        entry.detail += f"; its {' and '.join(graphs)} weights run on the exact, slower INT8 kernels here"
        entry.fix = f"{export_command(path, manifest, target='avx2')} (an avx2 export is right on every CPU)"
    return entry


def _hub_blob_sha256(path: Path) -> str | None:
    """The sha256 a Hugging Face cache snapshot's file links to (its blob's name), or None."""
    if not path.is_symlink():
        return None
    name = Path(os.readlink(path)).name
    return name if _SHA256.match(name) else None


def verify(path: str | Path) -> Entry:
    """One folder checked fully (every file hashed again, not trusting earlier stamps)."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise SetupError(f"{path} {not_a_folder(path)}")
    if not is_export_dir(path) and not is_model_dir(path) and is_export_dir(path / "onnx"):
        path = path / "onnx"
    if not is_export_dir(path) and missing_files(path) == [NO_FOLDER]:
        raise SetupError(f"{path} {not_a_folder(path)}")
    entry = inspect(path.resolve(), GIVEN, full=True)
    if entry.extra.get("missing") and entry.kind == MODEL:  # neither PATH nor PATH/onnx holds one
        entry.detail = f"looked in {path} and {path / 'onnx'}: {path} {entry.detail}"
    return entry


def all_ok(entries: list[Entry]) -> bool:
    """Whether `mineru models` passes: something was found and every entry is whole and MinerU2.5."""
    return bool(entries) and all(e.ok for e in entries)


def render(entries: list[Entry], as_json: bool = False) -> str:
    """What `mineru models` prints: two lines per entry, or one JSON object."""
    if as_json:
        return json.dumps({"ok": all_ok(entries), "entries": [e.as_dict() for e in entries]}, indent=2)
    if not entries:
        return (
            "no MinerU2.5 model folder or ONNX export found (see mineru models --help for where it looks); "
            + DOWNLOAD_HINT
        )
    return "\n".join(e.line() for e in entries)
