"""Which MinerU2.5 release a model folder (or ONNX export) holds, read from its files alone.

Folder names and `config._name_or_path` say nothing: a Hugging Face cache folder is named by a
commit hash, an export folder by its user, and `_name_or_path` is whatever the saver had. The two
releases differ in how their files are written (DESIGN.md section 1):

  signal          MinerU2.5-2509-1.2B                MinerU2.5-Pro-2605-1.2B
  config.json     `tie_word_embeddings` at the root  nested `text_config` with `rope_parameters`,
                                                      the tie flag only inside `text_config`
  preprocessor    min_pixels 3136                     min_pixels 50176
  tokenizer       chat_template.json                  chat_template.jinja, added_tokens.json,
                                                      special_tokens_map.json

The config's structure and the preprocessor vote (a min_pixels other than those two abstains);
when they disagree the folder is refused with a request for --model-profile, never guessed. The
tokenizer files are reported beside them (a transformers 5 re-save writes them for any model).
An export records its source's identity in its manifest (export_format), which wins over the
copied files. A folder that is no MinerU2.5 model (another architecture, remote code, no
tokenizer) is a SetupError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import SetupError, in_words
from ..hashing import file_sha256

ARCHITECTURE = "Qwen2VLForConditionalGeneration"
MODEL_TYPE = "qwen2_vl"
PROFILE_2509, PROFILE_PRO = "2509", "pro"
RELEASES = {PROFILE_2509: "MinerU2.5-2509-1.2B", PROFILE_PRO: "MinerU2.5-Pro-2605-1.2B"}
MIN_PIXELS = {3136: PROFILE_2509, 50176: PROFILE_PRO}
PRO_TOKENIZER_FILES = ("chat_template.jinja", "added_tokens.json", "special_tokens_map.json")


@dataclass(frozen=True)
class ModelIdentity:
    profile: str  # "2509" | "pro"
    config_sha256: str
    signals: dict = field(default_factory=dict)  # what each file said
    source: str = "files"  # "files" (read from the folder) | "manifest" (an export's record)

    @property
    def release(self) -> str:
        return RELEASES[self.profile]

    def as_dict(self) -> dict:
        return {
            "profile": self.profile,
            "release": self.release,
            "config_sha256": self.config_sha256,
            "signals": dict(self.signals),
            "from": self.source,
        }


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SetupError(f"{path.parent} is not a MinerU2.5 model folder: no {path.name}") from None
    except OSError as exc:
        raise SetupError(f"cannot read {path} ({in_words(exc)})") from exc
    except ValueError as exc:
        raise SetupError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise SetupError(f"{path} is not a JSON object")
    return data


def check_model_files(folder: Path, config: dict) -> None:
    """Refuse what is no MinerU2.5 model: another architecture, remote code, no tokenizer."""
    archs = config.get("architectures") or []
    if config.get("model_type") != MODEL_TYPE or ARCHITECTURE not in archs:
        raise SetupError(
            f"{folder} holds no MinerU2.5 model: its config.json is model_type {config.get('model_type')!r}, "
            f"architectures {archs}; MinerU2.5 is {MODEL_TYPE} ({ARCHITECTURE})"
        )
    if config.get("auto_map"):
        raise SetupError(f"{folder}'s config.json asks for remote code (auto_map), which mineru-cli never runs")
    if not (folder / "tokenizer.json").is_file():
        raise SetupError(f"{folder} has no tokenizer.json: not a complete MinerU2.5 model folder")
    if not isinstance(config.get("text_config", {}), dict) or not isinstance(config.get("vision_config"), dict):
        raise SetupError(f"{folder}'s config.json has no vision_config (or a malformed text_config)")


def tie_flag(config: dict) -> bool:
    """Whether the config ties the output layer to the input embeddings: the root flag, else
    `text_config`'s (Pro writes it only there), else Qwen2-VL's default (tied)."""
    if "tie_word_embeddings" in config:
        return bool(config["tie_word_embeddings"])
    text = config.get("text_config") or {}
    return bool(text.get("tie_word_embeddings", True))


def config_vote(config: dict) -> str:
    text = config.get("text_config")
    if not isinstance(text, dict):
        return PROFILE_2509
    if (
        isinstance(text.get("rope_parameters"), dict)
        and "tie_word_embeddings" not in config
        and "tie_word_embeddings" in text
    ):
        return PROFILE_PRO
    return PROFILE_2509


def detect(folder: str | Path, strict: bool = True) -> ModelIdentity:
    """The identity of a model folder or export, from its files (SetupError: not MinerU2.5, or,
    when strict, files that disagree about the release; not strict: the config decides)."""
    folder = Path(folder)
    config = read_json(folder / "config.json")
    check_model_files(folder, config)
    preprocessor = read_json(folder / "preprocessor_config.json")
    min_pixels = preprocessor.get("min_pixels", (preprocessor.get("size") or {}).get("shortest_edge"))
    by_config = config_vote(config)
    by_preprocessor = MIN_PIXELS.get(min_pixels) if isinstance(min_pixels, int) else None
    signals = {
        "config": by_config,
        "preprocessor": by_preprocessor,
        "min_pixels": min_pixels,
        "tied": tie_flag(config),
        "pro_tokenizer_files": [n for n in PRO_TOKENIZER_FILES if (folder / n).is_file()],
    }
    if strict and by_preprocessor is not None and by_preprocessor != by_config:
        raise SetupError(
            f"{folder}: its config.json is shaped like {RELEASES[by_config]} but its preprocessor_config.json "
            f"(min_pixels {min_pixels}) is {RELEASES[by_preprocessor]}'s; pass --model-profile 2509|pro"
        )
    return ModelIdentity(by_config, file_sha256(folder / "config.json"), signals)


def from_manifest(export_dir: str | Path, manifest: dict, strict: bool = True) -> ModelIdentity:
    """An export's source identity as its manifest recorded it (the copied config.json must be
    the one it hashed), else read from the copied files (an export made before it was recorded)."""
    export_dir = Path(export_dir)
    recorded = (manifest.get("source") or {}).get("identity")
    if not isinstance(recorded, dict) or recorded.get("profile") not in RELEASES:
        return detect(export_dir, strict)
    check_model_files(export_dir, read_json(export_dir / "config.json"))
    config_sha = file_sha256(export_dir / "config.json")
    if recorded.get("config_sha256") != config_sha:
        from .export_format import export_command  # (it imports model_dir, which this module need not)

        raise SetupError(
            f"{export_dir}/config.json is not the source model's config its manifest records; "
            f"export the model again with: {export_command(export_dir, manifest)}"
        )
    return ModelIdentity(recorded["profile"], config_sha, dict(recorded.get("signals") or {}), "manifest")
