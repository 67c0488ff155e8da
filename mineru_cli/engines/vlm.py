"""The MinerU2.5 engine: layout, then content per block, through a VLM runtime.

Per page:
  1. layout: the page stretched to 1036x1036 with the layout prompt; the answer is parsed
     (protocol.parse_layout) into blocks in reading order, boxes as page fractions.
  2. content: every block not skipped by the profile is cropped from the full page
     (protocol.prepare_crops) and read with its type's prompt and sampling; crops are decoded
     in batches of `batch_size`, sorted by prompt length (results do not depend on batching).
  3. post-processing (protocol.post_process): OTSL tables -> HTML, equation repairs, merged
     equation blocks, display equations wrapped in \\[ \\].
Blocks carry page-pixel boxes; tables put their HTML in extra["html"], equations their LaTeX
(without the \\[ \\] wrapper) in extra["latex"]; extra["angle"] is the model's rotation.

Runtimes: "torch" (transformers, fp32, the reference) and "onnx" (onnxruntime, no torch; the
model folder is then an export from `mineru export`, or a model folder holding one in onnx/).
Not thread-safe: one engine per worker.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import time
from pathlib import Path
from typing import Any

from PIL import Image

from ..errors import SetupError
from ..hashing import file_sha256
from ..markdown import blocks_to_markdown
from ..vlm import protocol as P
from ..vlm.generate import DEFAULT_MAX_NEW_TOKENS, generate
from ..vlm.model_dir import resolve_model
from ..vlm.processor import ImageProcessor, ImageProcessorConfig
from ..vlm.tokenizer import ChatTokenizer, build_input
from .base import Block, EngineResult

RUNTIMES = ("torch", "onnx")
CONFIG_KEYS = ("architectures", "model_type", "image_token_id", "tie_word_embeddings")


def pick_profile(model_dir: Path, explicit: str | None = None) -> P.Profile:
    """`explicit` ("2509" | "pro"), else "pro" when the folder or config names a Pro model."""
    if explicit:
        try:
            return P.PROFILES[explicit.lower()]
        except KeyError:
            raise SetupError(f"unknown model profile {explicit!r}; choose one of "
                             f"{', '.join(P.PROFILES)}") from None
    names = [model_dir.name]
    try:
        names.append(str(json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
                         .get("_name_or_path", "")))
    except (OSError, ValueError):
        pass
    if any(re.search(r"(^|[-_/])pro([-_/]|$)", n, re.IGNORECASE) for n in names):
        return P.PROFILE_PRO
    return P.PROFILE_2509


def _sampling_dict(sp: P.SamplingParams) -> dict:
    return {"presence_penalty": sp.presence_penalty, "frequency_penalty": sp.frequency_penalty,
            "no_repeat_ngram_size": sp.no_repeat_ngram_size, "max_new_tokens": sp.max_new_tokens}


def _html_text(table_html: str) -> str:
    """Cell texts of an HTML table: cells joined by a tab, rows by a newline."""
    rows = re.findall(r"<tr>(.*?)</tr>", table_html, re.DOTALL)
    if not rows:
        return html_lib.unescape(re.sub(r"<[^>]+>", " ", table_html)).strip()
    return "\n".join("\t".join(html_lib.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.DOTALL))
                     for r in rows)


def _unwrap_equation(latex: str) -> str:
    s = latex.strip()
    if s.startswith("\\[") and s.endswith("\\]"):
        s = s[2:-2]
    return s.strip()


class VlmEngine:
    name = "vlm"
    version = "0.1"  # bump when the same inputs would give different output

    def __init__(self, model_dir: str | Path | None, threads: int = 1, runtime: str = "torch",
                 profile: str | None = None, batch_size: int = 8,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS):
        if runtime not in RUNTIMES:
            raise SetupError(f"unknown vlm runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
        if runtime == "onnx":
            from ..vlm.runtime_onnx import find_export

            self.model_dir = find_export(model_dir)
        else:
            self.model_dir = resolve_model(model_dir)
        self.threads = max(1, int(threads))
        self.runtime_name = runtime
        self.profile = pick_profile(self.model_dir, profile)
        self.batch_size = max(1, int(batch_size))
        self.max_new_tokens = int(max_new_tokens)
        self.tokenizer = ChatTokenizer.from_dir(self.model_dir)
        self.processor = ImageProcessor(ImageProcessorConfig.from_file(self.model_dir / "preprocessor_config.json"))
        try:
            self._config = json.loads((self.model_dir / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SetupError(f"cannot read {self.model_dir / 'config.json'}: {exc}") from exc
        self._runtime = None   # loaded on first parse
        self._identity: dict | None = None

    # ------------------------------------------------------------------ record fields

    def identity(self) -> dict:
        if self._identity is None:
            weights = {p.name: file_sha256(p) for p in sorted(self.model_dir.glob("*.safetensors"))}
            config = {k: self._config[k] for k in CONFIG_KEYS if k in self._config}
            for part in ("text_config", "vision_config"):
                sub = self._config.get(part) or {}
                config[part] = {k: v for k, v in sub.items()
                                if isinstance(v, (int, float, str, list)) and not k.startswith("_")}
            self._identity = {"profile": self.profile.name,
                              "config": config, "weights": weights,
                              "tokenizer": _sha256_file(self.model_dir / "tokenizer.json")}
            if self.runtime_name == "onnx":
                from ..vlm.runtime_onnx import manifest_digest, read_manifest

                manifest = read_manifest(self.model_dir)
                self._identity["weights"] = dict(manifest["source"]["files"])
                self._identity["export"] = {"sha256": manifest_digest(manifest),
                                            "quantization": (manifest.get("quantization") or {}).get("scheme", "fp32"),
                                            "opset": manifest.get("opset")}
        return self._identity

    def options(self) -> dict:
        prof = self.profile
        return {"profile": prof.name, "runtime": self.runtime_name,
                "prompts": dict(prof.prompts), "system_prompt": P.SYSTEM_PROMPT,
                "sampling": {k: _sampling_dict(v) for k, v in prof.sampling.items()},
                "skip_types": sorted(prof.skip_types), "layout_size": list(prof.layout_size),
                "max_new_tokens": self.max_new_tokens, "decoding": "greedy"}

    # ------------------------------------------------------------------ runtime

    @property
    def runtime(self):
        if self._runtime is None:
            if self.runtime_name == "torch":
                try:
                    from ..vlm.runtime_torch import TorchRuntime
                except ImportError as exc:
                    raise SetupError("the torch vlm runtime needs torch and transformers: "
                                     "pip install 'mineru-cli[torch]'") from exc
                self._runtime = TorchRuntime(self.model_dir, self.threads, self.tokenizer.image_pad_id)
            elif self.runtime_name == "onnx":
                from ..vlm.runtime_onnx import OnnxRuntime

                self._runtime = OnnxRuntime(self.model_dir, self.threads, self.tokenizer.image_pad_id)
        return self._runtime

    def warm_up(self) -> None:
        """Load the runtime now rather than on the first page (pipeline workers call this)."""
        _ = self.runtime

    def _decode(self, inputs, params) -> list:
        gens = generate(self.runtime, inputs, params, self.tokenizer.stop_ids, self.max_new_tokens)
        return [(self.tokenizer.decode(g.tokens), g) for g in gens]

    # ------------------------------------------------------------------ parse

    def layout(self, page: Image.Image) -> tuple[str, P.LayoutParse, Any]:
        x = build_input(self.tokenizer, self.processor, P.layout_image(page, self.profile), self.profile.layout_prompt)
        (text, gen), = self._decode([x], self.profile.layout_sampling)
        return text, P.parse_layout(text, self.profile), gen

    def read_crops(self, crops: list[P.Crop]) -> list[tuple[str, Any]]:
        """Answers for the crops, in crop order, decoded in length-sorted batches."""
        inputs = [build_input(self.tokenizer, self.processor, c.image, c.prompt) for c in crops]
        order = sorted(range(len(crops)), key=lambda i: len(inputs[i]))
        out: list = [None] * len(crops)
        for s in range(0, len(order), self.batch_size):
            chunk = order[s:s + self.batch_size]
            results = self._decode([inputs[i] for i in chunk], [crops[i].sampling for i in chunk])
            for i, result in zip(chunk, results):
                out[i] = result
        return out

    def parse(self, image: Image.Image) -> EngineResult:
        page = P.to_rgb(image)
        width, height = page.size
        warnings: list[str] = []
        timings: dict[str, float] = {}

        t0 = time.perf_counter()
        _, layout, gen = self.layout(page)
        timings["layout"] = time.perf_counter() - t0
        if gen.truncated:
            warnings.append(f"layout answer cut at {len(gen.tokens)} tokens")
        if layout.skipped:
            warnings.append(f"layout: {layout.malformed} malformed lines, {layout.bad_boxes} bad boxes, "
                            f"{layout.unknown_types} unknown types dropped")
        blocks = layout.blocks

        t0 = time.perf_counter()
        crops = P.prepare_crops(page, blocks, self.profile)
        for crop, (text, g) in zip(crops, self.read_crops(crops)):
            blocks[crop.index].content = text
            if g.truncated:
                warnings.append(f"block {crop.index} ({blocks[crop.index].type}) cut at {len(g.tokens)} tokens")
        timings["content"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        done = P.post_process(blocks, self.profile,
                              on_error=lambda step, content, err: warnings.append(f"{step} failed: {err}"))
        out = [self._block(b, width, height) for b in done]
        markdown = blocks_to_markdown(out)
        timings["post"] = time.perf_counter() - t0
        return EngineResult(blocks=out, markdown=markdown, timings=timings, warnings=warnings)

    @staticmethod
    def _block(b: P.LayoutBlock, width: int, height: int) -> Block:
        x1, y1, x2, y2 = b.bbox
        bbox = (round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height))
        content = b.content or ""
        extra: dict[str, Any] = {"angle": b.angle}
        text = content
        if b.type == "table" and content:
            extra["html"] = content
            text = _html_text(content) if content.startswith("<table") else content
        elif b.type == "equation" and content:
            extra["latex"] = _unwrap_equation(content)
        if b.merge_prev:
            extra["merge_prev"] = True
        return Block(type=b.type, bbox=bbox, text=text, score=None, extra=extra)


def _sha256_file(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None
