"""The ONNX export folder: its files, its manifest (written, read, verified) and format version.

One definition for both sides: the exporter (mineru_cli.export, `mineru export`) writes such a
folder and the ONNX runtime (runtime_onnx) reads it.

    manifest.json           what the folder holds: format and version, the source weights'
                            sha256, the model table, graphs, every file's sha256 and size, I/O
                            names, opset, versions, quantization, parity figures
    vision.onnx (+ .data)   pixel_values (N, 1176) f32, vision_position_ids (N, 2) i64
                            -> image_embeds (N/4, hidden) f32                   [one image]
    decoder.onnx (+ .data)  inputs_embeds (B, S, hidden) f32, position_ids (3, B, S) i64,
                            seqlens_k (B,) i32, total_sequence_length () i32,
                            past_key_i/past_value_i (B, kv, C, d) f32 (a KV buffer)
                            -> logits (B, vocab) f32 [last position], present_key_i/value_i: the
                            buffers with the new tokens written in place (see
                            export.graphs.DecoderGraph; C must exceed every seqlens_k);
                            one-token calls take export.step_path
    embed_tokens.npy        the input embedding table, float32 (vocab, hidden)
    config.json, tokenizer.json, preprocessor_config.json, ...   copied from the model folder

The runtime checks the folder against manifest.json (size and sha256 of every file) when it
loads: a mismatch is a SetupError, never a silently different model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from ..config import user_cache_dir
from ..core.errors import SetupError, in_words, is_permission
from ..core.places import may_write_in
from ..hashing import file_sha256 as sha256_file
from .model_dir import ENV_VAR, REQUIRED_FILES, is_model_dir

MANIFEST = "manifest.json"
FORMAT = "mineru-cli-onnx"
# Raised whenever what the graphs take or return changes; the runtime reads only this version, so
# an older folder is refused with a request to export again rather than misread. Version 4: the
# decoder takes one-token calls through the step path.
FORMAT_VERSION = 4
GRAPHS = {"vision": "vision.onnx", "decoder": "decoder.onnx", "embed_tokens": "embed_tokens.npy"}
COPIED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "chat_template.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
)
# Where the verified-file stamps are kept: in config.user_cache_dir(), beside the result cache.
STAMPS_FILE = "verified-exports.json"
# Marks a folder whose export is not complete: one being written (OUT.partial, manifest and all
# before its verification), or one set aside to be replaced. Such a folder is never an export
# (is_export_dir), so a run cut off by SIGKILL or a power cut leaves nothing `mineru models` or
# parse would take for one. The exporter removes it just before moving the folder into place.
UNFINISHED = ".unfinished"


def decoder_io(num_layers: int) -> tuple[list[str], list[str]]:
    """The decoder graph's input and output names, in order."""
    past = [f"past_{kv}_{i}" for i in range(num_layers) for kv in ("key", "value")]
    present = [f"present_{kv}_{i}" for i in range(num_layers) for kv in ("key", "value")]
    return ["inputs_embeds", "position_ids", "seqlens_k", "total_sequence_length", *past], ["logits", *present]


# --------------------------------------------------------------------------- writing


def file_table(folder: Path) -> dict:
    """{relative path: {"sha256", "bytes"}} of every file in folder but the manifest."""
    return {
        p.relative_to(folder).as_posix(): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (MANIFEST, UNFINISHED)
    }


def write_manifest(folder: Path, manifest: dict) -> None:
    """Write `manifest` into folder with its file table filled in from what folder holds now."""
    for path in folder.rglob("*"):  # the quantizer writes its external data 0600 (a temp file)
        if path.is_file():
            path.chmod(0o644)
    manifest["files"] = file_table(folder)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- reading


def manifest_digest(manifest: dict) -> str:
    """A short id of an export: the sha256 of its file table (names and hashes)."""
    files = manifest.get("files") or {}
    text = "\n".join(f"{name} {files[name]['sha256']}" for name in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def read_manifest(export_dir: str | Path) -> dict:
    path = Path(export_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        why, fix = not_an_export_parts(Path(export_dir))
        raise SetupError(f"{export_dir} {why}", fix) from None
    except OSError as exc:
        if is_permission(exc):  # a permission to give, not an export to make again
            raise ExportDamaged(Path(export_dir), [], [f"{MANIFEST} cannot be read ({in_words(exc)})"], "") from None
        raise SetupError(f"cannot read {path} ({in_words(exc)})") from exc
    except ValueError as exc:
        raise SetupError(f"cannot read {path}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise SetupError(f"{path} is not a {FORMAT} manifest")
    if int(manifest.get("format_version", 0)) != FORMAT_VERSION:
        raise SetupError(
            f"{path} has format version {manifest.get('format_version')}; "
            f"this mineru-cli reads version {FORMAT_VERSION}",
            f"export the model again with this mineru-cli: {export_command(Path(export_dir), manifest)}",
        )
    for key in ("files", "graphs", "model"):
        if not isinstance(manifest.get(key), dict):
            raise SetupError(f"{path} has no {key!r} table")
    lacking = [role for role in GRAPHS if not isinstance(manifest["graphs"].get(role), str)]
    if lacking:  # the runtime would end in a KeyError: the manifest was changed
        raise ExportDamaged(
            Path(export_dir),
            [f"{MANIFEST}'s graph table names no {role} file" for role in lacking],
            [],
            export_command(Path(export_dir), manifest),
        )
    return manifest


def verify_export(
    export_dir: str | Path,
    manifest: dict | None = None,
    trust_stamps: bool = True,
    say: Callable[[str], None] | None = None,
) -> dict:
    """The manifest, after checking every file it lists (size, then sha256; trust_stamps: not
    again for a file unchanged since it was last hashed, see _VerifiedStamps; `say` hears, once,
    that files are hashed: seconds a GB, where nothing else shows), and that it lists
    every file the export needs: each graph, the files the runtime reads, and every other file in
    the folder (a graph's external data is named inside the graph, so any file there may be one).
    A file left out of the table would be read unchecked: deleting its entry must not switch the
    check off.

    Raises ExportDamaged naming each missing, changed, unlisted or unreadable file.
    """
    export_dir = Path(export_dir)
    manifest = manifest if manifest is not None else read_manifest(export_dir)
    listed = manifest["files"]
    problems: list[str] = []
    unreadable: list[str] = []
    stamps = _VerifiedStamps()
    hashing = say
    for name, meta in sorted(listed.items()):
        path = export_dir / name
        try:
            if not path.is_file():
                problems.append(f"{name} is missing")
            elif not _may_read(path):  # a stamp says nothing of who may read it
                unreadable.append(f"{name} cannot be read (permission denied)")
            elif path.stat().st_size != int(meta.get("bytes", -1)):
                problems.append(f"{name} has {path.stat().st_size} bytes, the manifest says {meta.get('bytes')}")
            elif not (trust_stamps and stamps.seen(path, meta.get("sha256"))):
                if hashing is not None:
                    hashing(
                        f"checking the ONNX export {export_dir} against its manifest (the sha256 of its files, "
                        "about 2 s a GB; once: files unchanged since are trusted)"
                    )
                    hashing = None
                if sha256_file(path) != meta.get("sha256"):
                    problems.append(f"{name} does not match its sha256 in {MANIFEST}")
                else:
                    stamps.add(path, meta.get("sha256"))
        except OSError as exc:
            (unreadable if is_permission(exc) else problems).append(f"{name} cannot be read ({in_words(exc)})")
    table = f"the manifest's file table ({MANIFEST})"
    needed = {name: f"{name}, the {role} file, is not in {table}" for role, name in manifest["graphs"].items()}
    needed.update({n: f"{n}, which the runtime reads, is not in {table}" for n in REQUIRED_FILES if n not in needed})
    needed.update({n: f"{n} is in the folder but not in {table}" for n in present_files(export_dir) if n not in needed})
    problems += [problem for name, problem in needed.items() if name not in listed]
    if problems or unreadable:
        raise ExportDamaged(export_dir, problems, unreadable, export_command(export_dir, manifest))
    stamps.save()
    return manifest


def _may_read(path: Path) -> bool:
    """Whether this process may read `path`, found by opening it (os.access answers for the real
    user id, without this process's capabilities: a user allowed to read every file was refused)."""
    try:
        with open(path, "rb"):
            return True
    except OSError as exc:
        if is_permission(exc):
            return False
        raise


class ExportDamaged(SetupError):
    """An export whose files do not match its manifest (`problems`: made again, by `command`), or
    that this user may not read (`unreadable`: a permission to give, not a copy to make)."""

    def __init__(self, export_dir: Path, problems: list[str], unreadable: list[str], command: str):
        self.problems, self.unreadable, self.command = problems, unreadable, command
        if problems:
            what = f"the ONNX export {export_dir} is damaged or was changed: {'; '.join(problems + unreadable)}"
            fix = f"export it again with: {command}"
        else:
            what = f"the ONNX export {export_dir} cannot be read: {'; '.join(unreadable)}"
            fix = read_fix(export_dir / "*")
        super().__init__(what, fix)


def read_fix(path: Path) -> str:
    """What to do about files this user may not read (a glob `*` stays unquoted)."""
    several = path.name == "*"
    quoted = shlex.quote(str(path.parent)) + "/*" if several else shlex.quote(str(path))
    return (
        f"let this user read {'them' if several else 'it'} (as the owner: chmod a+r {quoted}), or run as a user who may"
    )


def present_files(folder: Path) -> list[str]:
    """The files in an export folder, by their manifest names (the manifest and the unfinished
    marker aside); a link to nothing is one too (is_file says it is missing)."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.name not in (MANIFEST, UNFINISHED)
    )


def manifest_as_written(export_dir: Path) -> dict:
    """As much as can be read of export_dir's manifest, unchecked ({} where it cannot be read):
    one this version refuses (read_manifest) still says how the export was made."""
    try:
        manifest = json.loads((export_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def export_command(export_dir: Path, manifest: dict | None = None, target: str | None = None) -> str:
    """The `mineru export` command that makes export_dir again as its manifest recorded it: its
    model folder (the one it sits in as onnx/, else the source the manifest names), --out where
    that is not the default place, the weights' scheme and CPU target (`target`: INT8 weights for
    that one instead), and --force (an export there is replaced only with it, and an unfinished
    one may be there under OUT's name). Where this user may not write beside export_dir (a shared
    model folder), --out is a folder under the user's cache folder, and parse is told to name it."""
    export_dir = Path(export_dir)
    manifest = manifest_as_written(export_dir) if manifest is None else manifest
    out = export_dir.with_name(export_dir.name.removesuffix(".partial").removesuffix(".replaced"))
    source = manifest.get("source")
    source = source.get("model_dir") if isinstance(source, dict) else None
    # made elsewhere (an export copied from another machine) or its model moved: a placeholder
    model = source_model(out, manifest) or "MODEL_DIR"
    words = ["mineru", "export", "--model", model]
    elsewhere = None if _may_write_in(out.parent) else user_cache_dir() / "exports" / _export_name(out)
    if elsewhere is not None:
        words += ["--out", str(elsewhere)]
    elif (Path(model) / "onnx").resolve() != out.resolve():
        words += ["--out", str(out)]
    quantization = manifest.get("quantization")
    quantization = quantization if isinstance(quantization, dict) else {}
    scheme = quantization.get("scheme")
    if scheme in ("int8", "int4") or target:
        words.append(f"--{scheme if scheme in ('int8', 'int4') else 'int8'}")
        target = target or quantization.get("target")
        if isinstance(target, str):
            words += ["--target", target]
        words += quantization_options(quantization)
    words.append("--force")
    command = " ".join(w if w == "MODEL_DIR" else shlex.quote(w) for w in words)
    notes = []
    if model == "MODEL_DIR":
        where = f", no longer a model folder at {source}" if isinstance(source, str) and source else ""
        notes.append(f"MODEL_DIR: the MinerU2.5 model folder it was exported from{where}")
    if elsewhere is not None:
        # an export named with --model runs as it is, wherever it is; the one in out stays
        # (its owner replaces it), so the model folder alone would still find that one
        notes.append(
            f"this user may not write in {out.parent}: the export goes to a folder of its own; "
            f"then run parse with --model {shlex.quote(str(elsewhere))}"
        )
    return f"{command} ({'; '.join(notes)})" if notes else command


def _may_write_in(folder: Path) -> bool:
    """Whether this user may make and rename files in `folder` (the nearest existing one above
    it where it is not there), as the kernel judges the export's writes (core.places)."""
    there = next((f for f in (folder, *folder.parents) if f.exists()), folder)
    return may_write_in(there)


def _export_name(out: Path) -> str:
    """A name for an export of the model `out` is (or would be) the export of: the model
    folder's name for MODEL/onnx, else out's own."""
    return out.parent.name if out.name == "onnx" and out.parent.name else out.name


def quantization_options(quantization: dict) -> list[str]:
    """The --float-lm-head and --bias-correction an INT8/INT4 export was made with, read from its
    manifest's quantization table: its decoder leaves nodes in float32 (only the output layer is
    ever left out), and a graph is bias-corrected that its target does not always correct."""
    from .int8_target import corrected_graphs  # (it imports this module)

    target = quantization.get("target")
    always = corrected_graphs(target) if isinstance(target, str) else ()
    graphs: dict[str, dict] = {
        role: table for role in ("vision", "decoder") if isinstance(table := quantization.get(role), dict)
    }
    words = ["--float-lm-head"] if (graphs.get("decoder") or {}).get("excluded_nodes") else []
    if any("bias_correction" in table and role not in always for role, table in graphs.items()):
        words.append("--bias-correction")
    return words


def source_model(export_dir: Path, manifest: dict) -> str | None:
    """The model folder the export was made from: the one it sits in as onnx/, else the source
    its manifest names; None when neither is a model folder now."""
    source = manifest.get("source")
    source = source.get("model_dir") if isinstance(source, dict) else None
    if export_dir.name == "onnx" and is_model_dir(export_dir.parent):
        return str(export_dir.parent)
    if isinstance(source, str) and source and is_model_dir(Path(source)):
        return source
    return None


def not_a_model(export_dir: Path) -> tuple[str, str]:
    """(what, fix): why the export in export_dir, named where a model folder is needed (the torch
    runtime, mineru export), is none, and what to name instead."""
    model = source_model(export_dir, manifest_as_written(export_dir))
    named = f": --model {shlex.quote(model)}" if model else ""
    return (
        "is an ONNX export, not a model folder: parse runs it with --runtime onnx (or auto)",
        f"--runtime torch and mineru export take the MinerU2.5 model folder it was exported from{named}",
    )


def stale_export(export_dir: Path, why: str, manifest: dict) -> tuple[str, str]:
    """(what, fix) for the export in a model folder's onnx/ that was not made from that folder as
    it is now (source_mismatch says why): parse refuses it (export_in), `mineru models` fails it."""
    return (
        f"stale: it was not made from the model folder it is in as it is now ({why})",
        f"export it again with: {export_command(export_dir, manifest)}",
    )


# What a re-save of a JSON file changes without changing the model: the saver's version and
# where it read the model from (at any depth: text_config may hold them too)
SAVER_KEYS = frozenset({"_name_or_path", "transformers_version"})


def source_mismatch(export_dir: Path, model_dir: Path) -> str | None:
    """Why the export in export_dir was not made from model_dir as it is now, or None when it
    was: other safetensors, or one whose sha256 is not the one its manifest records (a file is
    hashed once while its stamp stays, _VerifiedStamps), or a file the run reads from the export
    (REQUIRED_FILES: the config that shapes the graphs and the run, the tokenizer, the image
    processor's settings) that says otherwise in the model folder (changed_copies). Weights are
    not compared where the manifest records none."""
    recorded = (read_manifest(export_dir).get("source") or {}).get("files") or {}
    present = {p.name: p for p in sorted(model_dir.glob("*.safetensors"))}
    if recorded and set(recorded) != set(present):
        return f"it was made from {', '.join(sorted(recorded))}, the folder holds {', '.join(present) or 'none'}"
    stamps = _VerifiedStamps()
    try:
        changed = [name for name, path in present.items() if recorded and not stamps.matches(path, recorded[name])]
        changed += changed_copies(export_dir, model_dir)
    except OSError as exc:
        raise SetupError(
            f"cannot read {exc.filename} ({in_words(exc)}), so whether the export {export_dir} was made from it "
            "cannot be checked",
            read_fix(Path(exc.filename)),
        ) from None
    stamps.save()
    if changed:
        return f"{', '.join(changed)} changed since it was made"
    return None


def changed_copies(export_dir: Path, model_dir: Path) -> list[str]:
    """The files of REQUIRED_FILES whose content in model_dir is not that of the export's copy
    (the one the run reads): the same JSON value, SAVER_KEYS aside, is the same content, so a
    re-save that only rewrites them or the layout is no change. An OSError on the model's file
    is the caller's; an export copy that cannot be read is verify_export's to report."""
    changed = []
    for name in REQUIRED_FILES:
        mine = (model_dir / name).read_bytes()
        try:
            copy = (export_dir / name).read_bytes()
        except OSError:
            continue
        if mine != copy and _meaning(mine) != _meaning(copy):
            changed.append(name)
    return changed


def _meaning(data: bytes) -> object:
    """A JSON file's value without SAVER_KEYS (the bytes themselves where it is no JSON)."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in SAVER_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    try:
        return strip(json.loads(data))
    except ValueError:
        return data


def export_in(model_dir: Path) -> Path | None:
    """model_dir/onnx when it holds an export (None when not), after checking that it was made
    from model_dir as it is now (source_mismatch): a model folder updated in place (hf download
    of a newer revision, an edited config.json) keeps its old onnx/, which must not run in the
    new model's name. SetupError when not."""
    export_dir = model_dir / "onnx"
    if not is_export_dir(export_dir):
        return None
    why = source_mismatch(export_dir, model_dir)
    if why:
        what, fix = stale_export(export_dir, why, read_manifest(export_dir))
        raise SetupError(f"the ONNX export {export_dir} is {what}; {fix} (or run --runtime torch)")
    return export_dir


class _VerifiedStamps:
    """Files whose sha256 was checked, by (path, sha256) -> their stat stamp at that time.

    Hashing a 5 GB fp32 export takes ~5 s, and every pipeline worker loads the export. A file
    whose size, mtime, ctime and inode are unchanged since it was hashed is not hashed again:
    writing to a file (or replacing it) changes its ctime, which no user call can set back.
    Kept as JSON in the user cache folder; any problem with it just means hashing again.
    """

    def __init__(self):
        self.path = user_cache_dir() / STAMPS_FILE
        try:
            self.table = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(self.table, dict):
                self.table = {}
        except (OSError, ValueError):
            self.table = {}
        self.changed = False

    @staticmethod
    def _key(path: Path, sha256) -> str:
        return f"{path.resolve()} {sha256}"

    @staticmethod
    def _stamp(path: Path) -> list[int]:
        st = path.stat()
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]

    def seen(self, path: Path, sha256) -> bool:
        return self.table.get(self._key(path, sha256)) == self._stamp(path)

    def matches(self, path: Path, sha256) -> bool:
        """Whether the file's sha256 is `sha256` (hashed again unless its stamp says so)."""
        if self.seen(path, sha256):
            return True
        if sha256_file(path) != sha256:
            return False
        self.add(path, sha256)
        return True

    def add(self, path: Path, sha256) -> None:
        self.table[self._key(path, sha256)] = self._stamp(path)
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:  # written whole and renamed: concurrent workers never read half a file
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(self.table), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass


# --------------------------------------------------------------------------- finding


def is_export_dir(path: str | Path) -> bool:
    """Whether path holds a complete export (a manifest, and not marked UNFINISHED)."""
    return (Path(path) / MANIFEST).is_file() and not is_unfinished_export(path)


def is_unfinished_export(path: str | Path) -> bool:
    """Whether path is an export still being written, or left half-done by a cut-off export."""
    return (Path(path) / UNFINISHED).is_file()


def unfinished_export(path: Path) -> tuple[str, str]:
    """(what, fix) for an unfinished export at `path` (is_unfinished_export)."""
    return (
        "is an unfinished export (mineru export was cut off while writing it)",
        f"run the export again, which starts over and removes it: {export_command(path)}",
    )


def not_an_export(path: Path) -> str:
    """Why `path` is no export, and what to do, for an error message ("WHY; FIX")."""
    return "; ".join(not_an_export_parts(path))


def not_an_export_parts(path: Path) -> tuple[str, str]:
    """(why, fix) of not_an_export, apart: the path in the fix may hold "; " itself."""
    if is_unfinished_export(path):
        return unfinished_export(path)
    model = shlex.quote(str(path)) if is_model_dir(path) else "MODEL_DIR"
    return (
        f"is not an ONNX export (no {MANIFEST})",
        f"make one with: mineru export --model {model} (it writes {model}/onnx)",
    )


def find_export(explicit: str | os.PathLike | None = None) -> Path:
    """The export folder: `explicit` (--model), else $MINERU_MODEL_PATH; either may also be a
    model folder with the export in its `onnx/` subfolder."""
    source, value = ("--model", explicit) if explicit else (f"${ENV_VAR}", os.environ.get(ENV_VAR))
    if not value:
        raise SetupError(
            "the onnx runtime needs an export folder (--model DIR or $MINERU_MODEL_PATH); "
            "make one with: mineru export --model MODEL_DIR (it writes MODEL_DIR/onnx, which --model MODEL_DIR finds)"
        )
    path = Path(value).expanduser()
    if is_export_dir(path):
        return path.resolve()
    inside = export_in(path) if is_model_dir(path) else (path / "onnx" if is_export_dir(path / "onnx") else None)
    if inside is not None:
        return inside.resolve()
    raise SetupError(f"{source} {path} {not_an_export(path)}")
