"""The MinerU2.5 engine: layout, then content per block, through a VLM runtime, with the
embedded OCR beside it.

parse_batch(pages) (parse(page) is parse_batch([page])[0]):
  1. layout: every page stretched to 1036x1036 with the layout prompt, all pages decoded as one
     batch; each answer is parsed (protocol.layout.parse_layout) into blocks in reading order.
  2. content: every block not skipped by the profile (nor filled by OCR, hybrid mode) is cropped
     from its full page (protocol.crops.prepare_crops) and read with its type's prompt and sampling;
     the crops of ALL pages are decoded together in batches of `batch_size`, sorted by prompt
     length. Greedy decoding with per-sequence stopping computes each row as it would alone
     (the torch runtime left-pads and masks, the ONNX one gives each row its length), so
     results do not depend on batching or on which pages share a batch (INT8 steps aside: their
     activation scales are per call).
  3. post-processing per page (protocol.postprocess.post_process): OTSL tables -> HTML, equation repairs,
     merged equation blocks, display equations wrapped in \\[ \\]. The Pro profile adds its client's
     own steps (protocol.pro, protocol.table_images): figure captions dropped after step 1,
     images inside tables masked in the table's crop and put back in its HTML, text fixes, and
     image analysis (on unless image_analysis=False): standalone image/chart blocks big enough
     are read in step 2 with the Image Analysis prompt, and the answer makes the block a table,
     an equation, a chart or an image with extra["sub_type"] and its description as text
     (protocol.figures).
Meanwhile the embedded OCR (RapidOCR det + cls + rec, one thread) reads the text lines of the same
pages in a background thread (onnxruntime releases the GIL, so it overlaps the layout step;
`overlap=False` runs it in line, for comparison). Its lines serve, per `mode`:
  - "vlm" (default, MinerU's own output): a cross-check. A text-like block whose answer is a
    runaway (fusion.runaway: cut at the token cap, far longer than the OCR text of its box, or
    looping) gets a warning and one retry with raised penalties (fusion.retry_params); the retry
    is kept unless it runs away too, then the OCR text (when the box's lines are confident) or
    else the shorter answer is kept. Retried blocks carry extra["retried"] (and
    extra["source"] = "ocr" when the OCR text was kept).
  - "hybrid": the VLM does layout, tables and equations; a text-like block (fusion.TEXT_TYPES)
    whose OCR lines are confident (mean score >= fusion.OCR_MIN_SCORE) takes their text and no
    crop is decoded for it; other blocks are read by the VLM and cross-checked as above. Every
    block carries extra["source"] = "ocr" | "vlm"; OCR-filled ones also "lines" and a score.
  ("ocr" mode is the OcrEngine itself: engines.resolve_engine.)
A page that fails costs only itself: parse_batch returns its Exception in its place (a failed
batched step is redone page by page to find the culprit; an OCR failure only loses that page's
OCR, with a warning).
Blocks carry page-pixel boxes; tables put their HTML in extra["html"], equations their LaTeX
(without the \\[ \\] wrapper) in extra["latex"]; extra["angle"] is the model's rotation.

Timings per page: "ocr" (its own OCR, in the background), "layout" and "content" (the batch's
seconds divided by its pages), "ocr_wait" (what the main thread waited for OCR once it needed
the lines, divided likewise), "post". Counts (EngineResult.counts): "batch_pages", "retries",
with image analysis on "analysed_figures" (the image/chart crops it read) and, in hybrid mode,
"ocr_blocks"/"vlm_blocks" (blocks by source).

Runtimes: "torch" (transformers, fp32, the reference) and "onnx" (onnxruntime, no torch; the
model folder is then an export from `mineru export`, or a model folder holding one in onnx/).
Not thread-safe: one engine per worker.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from PIL import Image

from ..core.blocks import PARATEXT, Block
from ..core.errors import PageError, SetupError, in_words, is_permission
from ..core.words import FAILED_BLOCK, FAILED_BLOCKS, ErrorKind, Stage
from ..hashing import file_sha256
from ..markdown import blocks_to_markdown
from ..reading_order import reading_order
from ..text_layer import TextLayer
from ..vlm.generate import generate
from ..vlm.model_dir import DOWNLOAD_HINT, resolve_model, safetensors_check
from ..vlm.model_identity import ModelIdentity, detect, from_manifest
from ..vlm.processor import ImageProcessor, ImageProcessorConfig
from ..vlm.protocol.chat import SYSTEM_PROMPT
from ..vlm.protocol.crops import Crop, layout_image, prepare_crops, to_rgb
from ..vlm.protocol.layout import LayoutBlock, LayoutParse, parse_layout
from ..vlm.protocol.postprocess import post_process
from ..vlm.protocol.pro import select_blocks
from ..vlm.protocol.profiles import FIGURE_TYPES, PROFILES, Profile, SamplingParams, without_image_analysis
from ..vlm.protocol.table_images import font_file as table_image_font
from ..vlm.tokenizer import ChatTokenizer, build_input
from . import fusion
from .assembly import assemble_blocks
from .base import EngineResult, parse_each
from .lines import Line
from .ocr import OCR, TEXT_LAYER, OcrEngine, text_layer_lines
from .ocr import identity as ocr_identity
from .ocr import options as ocr_options

RUNTIMES = ("torch", "onnx")
MODES = ("vlm", "hybrid", "standard")  # --mode ocr is the OcrEngine itself (engines.resolve_engine)
# standard mode: the block types the VLM reads (the rest come from the embedded engine)
STANDARD_VLM_TYPES = frozenset({"table", "equation"})
# hybrid: a page whose layout has no block of these types has lost its body text
# (_text_outside_layout); page furniture alone (a header, a page number) does not hold it
BODY_TEXT = fusion.TEXT_TYPES - PARATEXT
OCR_THREADS = 1  # one background OCR thread with one ONNX Runtime thread
CONFIG_KEYS = ("architectures", "model_type", "image_token_id", "tie_word_embeddings")
# The model folder's files the torch runtime reads beyond the weights and tokenizer.json.
TORCH_READS = ("config.json", "preprocessor_config.json")


def model_identity(model_dir: Path, strict: bool = True) -> ModelIdentity:
    """What the folder holds, from its files (an export: from its manifest); SetupError when it
    is no MinerU2.5 model (or, when strict, its files disagree about the release)."""
    from ..vlm.export_format import is_export_dir, read_manifest

    if is_export_dir(model_dir):
        return from_manifest(model_dir, read_manifest(model_dir), strict)
    return detect(model_dir, strict)


def pick_profile(model_dir: Path, explicit: str | None = None, image_analysis: bool = True) -> Profile:
    """`explicit` ("2509" | "pro", --model-profile), else the release the folder's files hold
    (vlm.model_identity): never the folder's name or the config's _name_or_path.
    image_analysis=False turns the profile's image analysis off (Pro; 2509 has none)."""
    if explicit:
        try:
            profile = PROFILES[explicit.lower()]
        except KeyError:
            raise SetupError(f"unknown model profile {explicit!r}; choose one of {', '.join(PROFILES)}") from None
        model_identity(model_dir, strict=False)  # still refuses what is no MinerU2.5 model
    else:
        profile = PROFILES[model_identity(model_dir).profile]
    return profile if image_analysis else without_image_analysis(profile)


def _sampling_dict(sp: SamplingParams) -> dict:
    return {
        "presence_penalty": sp.presence_penalty,
        "frequency_penalty": sp.frequency_penalty,
        "no_repeat_ngram_size": sp.no_repeat_ngram_size,
        "max_new_tokens": sp.max_new_tokens,
    }


def _html_text(table_html: str) -> str:
    """Cell texts of an HTML table: cells joined by a tab, rows by a newline. Split, not
    regex-matched: a lazy pattern over thousands of unclosed <tr> or <td took minutes."""
    rows = [piece.split("</tr>", 1)[0] for piece in table_html.split("<tr>")[1:] if "</tr>" in piece]
    if not rows:
        return html_lib.unescape(re.sub(r"<[^<>]*>", " ", table_html)).strip()
    return "\n".join("\t".join(html_lib.unescape(c).strip() for c in _cells(r)) for r in rows)


def _cells(row: str) -> list[str]:
    """The contents of a row's <td ...>...</td> cells."""
    cells = []
    for piece in row.split("<td")[1:]:
        start = piece.find(">") + 1
        end = piece.find("</td>", start)
        if start and end >= 0:
            cells.append(piece[start:end])
    return cells


def _unwrap_equation(latex: str) -> str:
    s = latex.strip()
    if s.startswith("\\[") and s.endswith("\\]"):
        s = s[2:-2]
    return s.strip()


def locate(model_dir: str | Path | None, runtime: str) -> Path:
    """The model folder (torch) or ONNX export (onnx) the engine runs, or a SetupError that
    says where to put one."""
    if runtime == "onnx":
        from ..vlm.export_format import find_export

        return find_export(model_dir)
    return resolve_model(model_dir)


def check_files(model_dir: Path, runtime: str, say: Callable[[str], None] | None = None) -> None:
    """What loading the model checks of its files, without loading it (runner.prepare: before a
    run opens its journal, and for --explain-plan): an export's files against its manifest, as
    the onnx runtime checks them when it loads (export_format.verify_export; a file unchanged
    since it was last hashed is not hashed again), a model folder's safetensors against their
    headers (a file cut short or padded, which the torch runtime refuses to load). A SetupError
    says what is wrong and how to fix it, as the run's load would; `say` hears that an export's
    files are hashed (seconds a GB) before they are."""
    if runtime == "onnx":
        from ..vlm.export_format import verify_export

        verify_export(model_dir, say=say)
        return
    for weights in sorted(model_dir.glob("*.safetensors")):
        try:
            problem = safetensors_check(weights)[1]
        except OSError:
            continue  # one it cannot read: _weights_sha256 says so in words when the run hashes it
        if problem:
            raise SetupError(
                f"cannot load the model from {model_dir}: {problem}; download the model again "
                "(hf download ... --force-download)"
            )


def read_config(model_dir: Path) -> dict:
    try:
        config: dict = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SetupError(f"cannot read {model_dir / 'config.json'}: {exc}") from exc
    return config


def identity(model_dir: Path, runtime: str, profile: Profile, config: dict | None = None, mode: str = "vlm") -> dict:
    """The model's identity for the record (what the fingerprint hashes): profile, config,
    weight hashes (an export's: its manifest's), tokenizer, and the OCR models in use."""
    config = read_config(model_dir) if config is None else config
    weights = {p.name: _weights_sha256(p) for p in sorted(model_dir.glob("*.safetensors"))}
    shown = {k: config[k] for k in CONFIG_KEYS if k in config}
    for part in ("text_config", "vision_config"):
        sub = config.get(part) or {}
        shown[part] = {k: v for k, v in sub.items() if isinstance(v, (int, float, str, list)) and not k.startswith("_")}
    out: dict = {
        "profile": profile.name,
        "config": shown,
        "weights": weights,
        "tokenizer": _sha256_file(model_dir / "tokenizer.json"),
    }
    if runtime != "onnx":
        # the torch runtime reads these whole (transformers: config.json's nested tables, such as
        # text_config's rope_parameters, which "config" leaves out; the image processor: min/max
        # pixels, mean and std), so an edit of either must change the fingerprint; an export's
        # copies are in its manifest's digest
        out["files"] = {name: _sha256_file(model_dir / name) for name in TORCH_READS}
    if runtime == "onnx":
        from ..vlm.export_format import manifest_digest, read_manifest
        from ..vlm.int8_target import graphs_needing_exact_kernels

        manifest = read_manifest(model_dir)
        out["weights"] = dict(manifest["source"]["files"])
        out["export"] = {
            "sha256": manifest_digest(manifest),
            "quantization": (manifest.get("quantization") or {}).get("scheme", "fp32"),
            "opset": manifest.get("opset"),
        }
        # graphs run on the exact INT8 kernels give other results than the fast ones (and
        # the pages an earlier version parsed with saturating sums are not reused)
        if exact := graphs_needing_exact_kernels(manifest):
            out["export"]["exact_int8_kernels"] = exact
    ocr = ocr_identity()  # the OCR's lines change the output in every mode
    if mode == "standard":  # the embedded engine's layout model finds the blocks too
        out["ocr"] = {"models": ocr["models"], "packages": ocr["packages"]}
    else:
        out["ocr"] = {
            "models": [m for m in ocr["models"] if m["role"] in ("det", "cls", "rec")],
            "packages": {k: v for k, v in ocr["packages"].items() if k != "rapid-layout"},
        }
    return out


def context_length(config: dict) -> int | None:
    """The model's context in tokens (prompt + answer): text_config's max_position_embeddings
    (the root's in a flat config); None when the config does not say."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        text = {}
    value = text.get("max_position_embeddings", config.get("max_position_embeddings"))
    return int(value) if isinstance(value, int) and value > 0 else None


def post_process_switches(profile: Profile) -> dict:
    """The profile's post-processing steps that are on (Pro), for the record; a table's masked
    images are drawn with a font that depends on the machine, so it is named too."""
    switches = {
        "drop_figure_captions": profile.drop_figure_captions,
        "table_images": profile.table_images,
        "text_fixes": profile.text_fixes,
        "table_formula_tags": profile.table_formula_tags,
        "image_analysis": profile.image_analysis,
    }
    out: dict[str, Any] = {k: v for k, v in switches.items() if v}
    if profile.table_images:
        out["table_image_font"] = table_image_font() or "pillow-default"
    return out


def options(
    profile: Profile,
    mode: str,
    runtime: str,
    max_new_tokens: int | None = None,
    context: int | None = None,
    lang: str = "en",
) -> dict:
    """Every setting that changes the output (the record's engine.options). max_new_tokens:
    the cap on an answer (None: up to the context, `context` tokens minus the prompt); lang:
    --lang, recorded with standard mode's embedded engine as the ocr engine records it."""
    return {
        "mode": mode,
        "profile": profile.name,
        "runtime": runtime,
        "prompts": dict(profile.prompts),
        "system_prompt": SYSTEM_PROMPT,
        "sampling": {k: _sampling_dict(v) for k, v in profile.sampling.items()},
        "skip_types": sorted(profile.skip_types),
        # (only where a step is on: a 2509 fingerprint stays what it was)
        **({"post_process": switches} if (switches := post_process_switches(profile)) else {}),
        "layout_size": list(profile.layout_size),
        "max_new_tokens": max_new_tokens if max_new_tokens is not None else "context",
        "context_length": context,
        "decoding": "greedy",
        "ocr": fusion.settings(),
        **(
            {
                "standard": {
                    "vlm_types": sorted(STANDARD_VLM_TYPES),
                    # the version too: a change of its reading order changes no option
                    "embedded": {**ocr_options(lang), "version": OcrEngine.version},
                }
            }
            if mode == "standard"
            else {}
        ),
        # hybrid's text is the embedded engine's reading of each block's lines (joining): its
        # version, as standard mode's, so that a change of how lines are joined re-reads a page
        **({"hybrid": {"embedded_version": OcrEngine.version}} if mode == "hybrid" else {}),
    }


class VlmEngine:
    name = "vlm"
    version = "0.6"  # bump when the same inputs would give different output

    def __init__(
        self,
        model_dir: str | Path | None,
        threads: int = 1,
        runtime: str = "torch",
        profile: str | None = None,
        batch_size: int = 8,
        max_new_tokens: int | None = None,
        mode: str = "vlm",
        overlap: bool = True,
        image_analysis: bool = True,
        lang: str = "en",
    ):
        if runtime not in RUNTIMES:
            raise SetupError(f"unknown vlm runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
        if mode not in MODES:
            raise SetupError(f"unknown vlm mode {mode!r}; choose one of {', '.join(MODES)}")
        self.model_dir = locate(model_dir, runtime)
        self.threads = max(1, int(threads))
        self.runtime_name = runtime
        self.profile = pick_profile(self.model_dir, profile, image_analysis)
        self.batch_size = max(1, int(batch_size))
        # None: an answer may run to the context (MinerU's own runs stop there); the runaway
        # guards (penalties, the n-gram ban, the OCR cross-check) still apply
        self.max_new_tokens = None if max_new_tokens is None else int(max_new_tokens)
        self.mode = mode
        self.overlap = bool(overlap)
        self.lang = lang  # recorded only: the OCR reads every lang with the same models
        self.tokenizer = ChatTokenizer.from_dir(self.model_dir)
        self.processor = ImageProcessor(ImageProcessorConfig.from_file(self.model_dir / "preprocessor_config.json"))
        self._config = read_config(self.model_dir)
        # The embedded OCR (text lines only; its models ship in the rapidocr wheel). Spinning
        # off: its one thread runs beside the VLM's threads and must not burn a core waiting.
        # Standard mode runs it in line, before the VLM, with the engine's threads.
        self.ocr = OcrEngine(threads=self.threads if mode == "standard" else OCR_THREADS, spinning=False)
        self._pool: ThreadPoolExecutor | None = None
        self._runtime = None  # loaded on first parse
        self._identity: dict | None = None

    # ------------------------------------------------------------------ record fields

    def identity(self) -> dict:
        if self._identity is None:
            self._identity = identity(self.model_dir, self.runtime_name, self.profile, self._config, self.mode)
        return self._identity

    def options(self) -> dict:
        return options(
            self.profile, self.mode, self.runtime_name, self.max_new_tokens, context_length(self._config), self.lang
        )

    # ------------------------------------------------------------------ runtime

    @property
    def runtime(self):
        if self._runtime is None:
            if self.runtime_name == "torch":
                try:
                    from ..vlm.runtime_torch import TorchRuntime
                except ImportError as exc:
                    raise SetupError(
                        "the torch vlm runtime needs torch and transformers: pip install 'mineru-cli[torch]'"
                    ) from exc
                self._runtime = TorchRuntime(self.model_dir, self.threads, self.tokenizer.image_pad_id)
            elif self.runtime_name == "onnx":
                from ..vlm.runtime_onnx import OnnxRuntime

                self._runtime = OnnxRuntime(self.model_dir, self.threads, self.tokenizer.image_pad_id)
        return self._runtime

    def warm_up(self) -> None:
        """Load the runtime and the OCR's models now rather than on the first page (standard
        mode: its layout model too)."""
        _ = self.runtime
        self.ocr.warm_up(layout=self.mode == "standard")

    def _decode(self, inputs, params) -> list:
        gens = generate(
            self.runtime, inputs, params, self.tokenizer.stop_ids, self.max_new_tokens, context_length(self._config)
        )
        return [(self.tokenizer.decode(g.tokens), g) for g in gens]

    # ------------------------------------------------------------------ steps

    def layouts(self, pages: list[Image.Image]) -> list[tuple[str, LayoutParse, Any]]:
        """Step 1 for all pages as one batch: (answer, parsed layout, Generation) per page."""
        inputs = [
            build_input(self.tokenizer, self.processor, layout_image(p, self.profile), self.profile.layout_prompt)
            for p in pages
        ]
        return [
            (text, parse_layout(text, self.profile), gen)
            for text, gen in self._decode(inputs, self.profile.layout_sampling)
        ]

    def layout(self, page: Image.Image) -> tuple[str, LayoutParse, Any]:
        return self.layouts([page])[0]

    def read_crops(self, crops: list[Crop]) -> list[tuple[str, Any] | Exception]:
        """Answers for the crops (of any pages), in crop order, decoded in length-sorted batches.

        A crop costs only itself: one whose input cannot be built, or whose decode raises, gets
        its Exception in its place (a batch that raises is decoded again crop by crop to find
        it), and the callers keep the rest of its page. A SetupError (no runtime) is raised."""
        out: list = _each_crop(lambda c: build_input(self.tokenizer, self.processor, c.image, c.prompt), crops)
        order = sorted((i for i, x in enumerate(out) if not isinstance(x, Exception)), key=lambda i: len(out[i]))
        for s in range(0, len(order), self.batch_size):
            chunk = order[s : s + self.batch_size]
            results = self._decode_apart([out[i] for i in chunk], [crops[i].sampling for i in chunk])
            for i, result in zip(chunk, results):
                out[i] = result
        return out

    def _decode_apart(self, inputs: list, params: list[SamplingParams]) -> list:
        """_decode of a batch; if it raises, of each input alone (its Exception in its place).
        Greedy rows do not depend on their batch, so the answers are those of the batch."""
        try:
            return self._decode(inputs, params)
        except SetupError:
            raise
        except Exception as exc:  # noqa: BLE001 - attributed below
            if len(inputs) == 1:
                return [exc]
        return _each_crop(lambda pair: self._decode([pair[0]], [pair[1]])[0], list(zip(inputs, params)))

    # ------------------------------------------------------------------ parse

    def parse(self, image: Image.Image, text: TextLayer | None = None) -> EngineResult:
        return _raise_if_failed(self.parse_batch([image], [text])[0])

    def parse_batch(
        self, images: list[Image.Image], texts: list[TextLayer | None] | None = None
    ) -> list[EngineResult | Exception]:
        """The pages' results in input order, each an EngineResult or the page's Exception
        (base.Engine.parse_batch). Post-processing failures are caught per page; when a batched
        step raises, the pages are parsed again one by one, so the exception lands on the page
        that caused it and the others still get their results. A page's trusted text layer
        (`texts`) gives its lines instead of the OCR."""
        texts = list(texts) if texts is not None else [None] * len(images)
        prepared = parse_each(_loaded_rgb, images)  # a page whose pixels cannot be read fails alone
        pages = [(p, t) for p, t in zip(prepared, texts) if not isinstance(p, Exception)]
        results = iter(self._parse_all(pages) if pages else [])
        return [p if isinstance(p, Exception) else next(results) for p in prepared]

    def _parse_all(self, pages: list[tuple[Image.Image, TextLayer | None]]) -> list[EngineResult | Exception]:
        """All pages as one batch; if a batched step raises, each page alone (its own error)."""
        parse = self._parse_standard if self.mode == "standard" else self._parse_pages
        try:
            return parse(pages)
        except Exception as exc:  # noqa: BLE001 - attributed below
            if len(pages) == 1:
                return [exc]
        return parse_each(lambda page: _raise_if_failed(parse([page])[0]), pages)

    def _parse_pages(self, pages: list[tuple[Image.Image, TextLayer | None]]) -> list[EngineResult | Exception]:
        n = len(pages)
        states = [_Page(page, counts={"retries": 0}, text=text) for page, text in pages]
        self.ocr.warm_up(layout=False)  # sessions are created here, never in the OCR thread
        ocr = _OcrJobs(self.ocr, pages, self._ocr_pool() if self.overlap else None)
        try:
            t0 = time.perf_counter()
            for st, (_, layout, gen) in zip(states, self.layouts([st.page for st in states])):
                # Pro: captions inside figures dropped, images inside tables marked (protocol.pro)
                st.blocks = select_blocks(layout.blocks, self.profile)
                if gen.truncated:
                    st.warnings.append(f"layout answer cut at {len(gen.tokens)} tokens")
                if layout.skipped:
                    st.warnings.append(
                        f"layout: {layout.malformed} malformed lines, {layout.bad_boxes} bad "
                        f"boxes, {layout.unknown_types} unknown types dropped"
                    )
            layout_time = time.perf_counter() - t0

            ocr_wait = 0.0
            if self.mode == "hybrid":  # the lines decide which blocks need a crop
                ocr_wait += self._take_ocr(ocr, states)
                for st in states:
                    _text_outside_layout(st)
                    self._fill_from_ocr(st)

            t0 = time.perf_counter()
            jobs = [
                (st, crop)
                for st in states
                for crop in prepare_crops(st.page, st.blocks, self.profile)
                if crop.index not in st.filled
            ]
            if self.profile.image_analysis:  # the crops it adds, for the run's summary
                for st in states:
                    st.counts["analysed_figures"] = 0
                for st, crop in jobs:
                    st.counts["analysed_figures"] += st.blocks[crop.index].type in FIGURE_TYPES
            for (st, crop), answer in zip(jobs, self.read_crops([c for _, c in jobs])):
                if isinstance(answer, Exception):  # settled once the lines are in
                    st.failed[crop.index] = answer
                    continue
                text, gen = answer
                st.blocks[crop.index].content = text
                st.blocks[crop.index].image_tokens = crop.image_tokens or None  # Pro tables
                st.answers[crop.index] = (text, gen)
                if gen.truncated and st.blocks[crop.index].type not in fusion.TEXT_TYPES:
                    # (a text-like block's cut answer gets the cross-check's warning instead)
                    st.warnings.append(
                        f"block {crop.index} ({st.blocks[crop.index].type}) cut at {len(gen.tokens)} tokens"
                    )
            if self.mode == "vlm":  # the lines only check the answers: waited for last
                w0 = time.perf_counter()
                ocr_wait += self._take_ocr(ocr, states)
                t0 += time.perf_counter() - w0
            for st in states:
                self._settle_failed(st)
            self._cross_check([(st, crop) for st, crop in jobs if crop.index in st.answers])
            content_time = time.perf_counter() - t0
        finally:
            ocr.cancel()

        results: list[EngineResult | Exception] = []
        for st in states:
            st.timings.update({"layout": layout_time / n, "content": content_time / n, "ocr_wait": ocr_wait / n})
            st.counts["batch_pages"] = n
            try:
                results.append(self._finish(st))
            except Exception as exc:  # noqa: BLE001 - this page's post-processing only
                results.append(exc)
        return results

    def _parse_standard(self, pages: list[tuple[Image.Image, TextLayer | None]]) -> list[EngineResult | Exception]:
        """Standard mode: the embedded engine's blocks (its layout model; text from a trusted
        text layer, else its OCR), and the VLM reads only the tables and equations, all pages'
        crops decoded together. No VLM layout step runs. A page the embedded engine fails on
        gets its exception in its place; the batch's other pages keep their reads (the
        embedded engine is most of a page's time here: the batch is not read again)."""
        bases = parse_each(lambda page_text: self.ocr.parse(*page_text), pages)
        states: list[tuple[EngineResult, list[int], list[LayoutBlock], Image.Image]] = []
        for base, (page, _) in zip(bases, pages):
            if not isinstance(base, Exception):
                picked, layout = standard_vlm_blocks(base.blocks, page.size)
                states.append((base, picked, layout, page))
        t0 = time.perf_counter()
        jobs = [
            (k, crop)
            for k, (_, _, layout, page) in enumerate(states)
            for crop in prepare_crops(page, layout, self.profile)
        ]
        answers = self.read_crops([crop for _, crop in jobs])
        content_time = time.perf_counter() - t0
        for (k, crop), read in zip(jobs, answers):
            base, picked, layout, _ = states[k]
            if isinstance(read, Exception):  # this block only: the embedded engine's stays
                base.counts[FAILED_BLOCKS] = base.counts.get(FAILED_BLOCKS, 0) + 1
                base.blocks[picked[crop.index]].extra[FAILED_BLOCK] = True
                base.warnings.append(
                    f"block {picked[crop.index]} ({layout[crop.index].type}): the VLM could not read it "
                    f"({type(read).__name__}: {read}); kept the embedded engine's block"
                )
                continue
            answer, gen = read
            layout[crop.index].content = answer
            if gen.truncated:
                base.warnings.append(
                    f"block {picked[crop.index]} ({layout[crop.index].type}) cut at {len(gen.tokens)} tokens"
                )
        finished = iter(states)
        results: list[EngineResult | Exception] = []
        for base in bases:
            if isinstance(base, Exception):
                results.append(base)
                continue
            _, picked, layout, page = next(finished)
            try:
                results.append(self._finish_standard(base, picked, layout, page, content_time / len(states)))
            except Exception as exc:  # noqa: BLE001 - this page's post-processing only
                results.append(exc)
        return results

    def _finish_standard(
        self, base: EngineResult, picked: list[int], layout: list[LayoutBlock], page: Image.Image, content_s: float
    ) -> EngineResult:
        """The embedded engine's page with its tables and equations replaced by the VLM's."""
        t0 = time.perf_counter()
        width, height = page.size
        warnings = list(base.warnings)
        answered = [j for j, b in enumerate(layout) if b.content is not None]  # (a failed read: None)
        read = [layout[j] for j in answered]
        done = post_process(
            read, self.profile, on_error=lambda step, content, err: warnings.append(f"{step} failed: {err}")
        )
        blocks = list(base.blocks)
        for block, m in zip(done, _match_blocks(done, read)):
            if m is None:  # dropped by the post-processing: the embedded block stays
                continue
            i = picked[answered[m]]
            if not block.content:  # an empty answer, or one with no table cell: said, not silent
                warnings.append(
                    f"block {i} ({block.type}): the VLM's answer held no {block.type}; kept the embedded engine's block"
                )
                continue
            vlm_block = self._block(block, width, height)
            vlm_block.bbox = blocks[i].bbox  # the embedded engine's box, in its pixels
            # and its `angle`: the page's turn where it read the page turned, else none, as on the
            # page's other blocks (the VLM was given no angle of its own, only the crop turned by it)
            if "angle" in blocks[i].extra:
                vlm_block.extra["angle"] = blocks[i].extra["angle"]
            else:
                del vlm_block.extra["angle"]
            vlm_block.extra["source"] = "vlm"
            blocks[i] = vlm_block
        counts = dict(base.counts)
        counts.update(source_counts(blocks))
        timings = {**base.timings, "content": content_s, "post": time.perf_counter() - t0}
        return EngineResult(
            blocks=blocks, markdown=blocks_to_markdown(blocks), timings=timings, warnings=warnings, counts=counts
        )

    def _ocr_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=OCR_THREADS, thread_name_prefix="mineru-ocr")
        return self._pool

    @staticmethod
    def _take_ocr(ocr: "_OcrJobs", states: list["_Page"]) -> float:
        """Wait for the pages' OCR lines; returns the seconds waited. A page whose OCR failed
        keeps a warning and goes on without lines (its blocks are then all read by the VLM)."""
        t0 = time.perf_counter()
        for st, outcome in zip(states, ocr.results()):
            if isinstance(outcome, Exception):
                why = PageError.from_exception(outcome, ErrorKind.ENGINE_ERROR, Stage.ENGINE).message
                st.warnings.append(f"OCR failed ({why}): no OCR text or cross-check on this page")
                continue
            lines, seconds = outcome
            st.timings["ocr"] = seconds
            width, height = st.page.size
            boxes = [_pixel_box(b.bbox, width, height) for b in st.blocks]
            st.page_lines = lines
            st.lines = fusion.assign_lines(lines, boxes)
        return time.perf_counter() - t0

    def _fill_from_ocr(self, st: "_Page") -> None:
        """Hybrid: text-like, upright blocks with confident OCR lines take the OCR text."""
        for i, block in enumerate(st.blocks):
            lines = st.lines[i] if st.lines is not None else []
            if (
                block.type in fusion.TEXT_TYPES
                and block.angle in (0, None)
                and block.type not in self.profile.skip_types
                and fusion.trusted(lines)
            ):
                text, line_dicts, score = fusion.read_lines(lines, block.type)
                block.content = text
                st.filled.add(i)
                st.info[i] = {"source": st.line_source, "lines": line_dicts, "score": score}

    @staticmethod
    def _settle_failed(st: "_Page") -> None:
        """Blocks whose crop the VLM could not read (read_crops' Exceptions) cost only
        themselves: an upright text-like one takes the text of its box's lines (from the text
        layer or OCR, confident or not), any other stays empty; each gets extra["failed"] and a
        warning naming it, and the page keeps every other block."""
        for i, exc in sorted(st.failed.items()):
            block = st.blocks[i]
            lines = st.lines[i] if st.lines is not None else []
            if block.type in fusion.TEXT_TYPES and block.angle in (0, None) and lines:
                block.content, line_dicts, score = fusion.read_lines(lines, block.type)
                st.info[i] = {"source": st.line_source, "lines": line_dicts, "score": score, FAILED_BLOCK: True}
                kept = f"kept the {st.line_source} text of its box"
            else:
                st.info[i] = {FAILED_BLOCK: True}
                kept = "left empty"
            st.counts[FAILED_BLOCKS] = st.counts.get(FAILED_BLOCKS, 0) + 1
            st.warnings.append(
                f"block {i} ({block.type}): the VLM could not read it ({type(exc).__name__}: {exc}); {kept}"
            )

    def _cross_check(self, jobs: list[tuple["_Page", Crop]]) -> None:
        """Runaway text answers get a warning and one retry (all retries of the batch decoded
        together); see the module docstring for which answer is kept."""
        suspects = []
        for st, crop in jobs:
            block = st.blocks[crop.index]
            if block.type not in fusion.TEXT_TYPES:
                continue
            text, gen = st.answers[crop.index]
            lines = st.lines[crop.index] if st.lines is not None else []
            # line OCR reads horizontal text: a rotated block has nothing to compare with
            ocr_text = fusion.read_lines(lines, block.type)[0] if lines and block.angle in (0, None) else None
            reason = fusion.runaway(text, gen.truncated, ocr_text, len(gen.tokens))
            if reason is not None:
                suspects.append((st, crop, reason, ocr_text, lines))
        if not suspects:
            return
        retries = [replace(crop, sampling=fusion.retry_params(crop.sampling)) for _, crop, *_ in suspects]
        for (st, crop, reason, ocr_text, lines), answer in zip(suspects, self.read_crops(retries)):
            st.counts["retries"] += 1
            block = st.blocks[crop.index]
            info = st.info.setdefault(crop.index, {})
            info["retried"] = True
            retry: str | None = None  # the retry's answer (None: its decode raised)
            again: str | None  # what went wrong with the retry
            if isinstance(answer, Exception):  # a block left as it was: not cached, read again later
                again = f"failed ({type(answer).__name__}: {answer})"
                st.counts[FAILED_BLOCKS] = st.counts.get(FAILED_BLOCKS, 0) + 1
                info[FAILED_BLOCK] = True
            else:
                retry, gen = answer
                why = fusion.runaway(retry, gen.truncated, ocr_text, len(gen.tokens))
                again = None if why is None else f"ran away too ({why})"
            if again is None:
                block.content, outcome = retry, "kept the retry"
            elif ocr_text and fusion.trusted(lines):
                line_dicts = fusion.read_lines(lines, block.type)[1]
                block.content, outcome = ocr_text, f"the retry {again}: kept the OCR text"
                info.update({"source": st.line_source, "lines": line_dicts})
            else:
                first = st.answers[crop.index][0]
                block.content = first if retry is None else min((first, retry), key=len)
                outcome = f"the retry {again}: kept the {'answer' if retry is None else 'shorter answer'}"
            st.warnings.append(
                f"block {crop.index} ({block.type}): runaway answer ({reason}); "
                f"retried with raised penalties, {outcome}"
            )

    def _finish(self, st: "_Page") -> EngineResult:
        """Post-processing of one page (raises only for this page)."""
        t0 = time.perf_counter()
        width, height = st.page.size
        done = post_process(
            st.blocks, self.profile, on_error=lambda step, content, err: st.warnings.append(f"{step} failed: {err}")
        )
        out = []
        for b, index in zip(done, _match_blocks(done, st.blocks, self.profile.content_rename)):
            block = self._block(b, width, height)
            info = st.info.get(index, {}) if index is not None else {}
            block.extra["source"] = "vlm"
            for key in ("source", "retried", "lines", FAILED_BLOCK):
                if key in info:
                    block.extra[key] = info[key]
            if "score" in info:
                block.score = info["score"]
            out.append(block)
        if self.mode == "hybrid":
            st.counts.update(source_counts(out))
        markdown = blocks_to_markdown(out)
        st.timings["post"] = time.perf_counter() - t0
        return EngineResult(blocks=out, markdown=markdown, timings=st.timings, warnings=st.warnings, counts=st.counts)

    @staticmethod
    def _block(b: LayoutBlock, width: int, height: int) -> Block:
        bbox = _pixel_box(b.bbox, width, height)
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
        if b.sub_type is not None:  # an analysed image's or chart's kind ("" when unnamed): it
            extra["sub_type"] = b.sub_type  # marks the text as the analysis, not OCR labels
        return Block(type=b.type, bbox=bbox, text=text, score=None, extra=extra)


@dataclass
class _Page:
    """One page's state through parse_batch."""

    page: Image.Image
    text: TextLayer | None = None  # the page's text layer; a trusted one gives the lines
    blocks: list[LayoutBlock] = field(default_factory=list)
    lines: list[list[Line]] | None = None  # OCR lines per block, once OCR is in
    page_lines: list[Line] = field(default_factory=list)  # all the page's OCR lines
    filled: set[int] = field(default_factory=set)  # blocks given OCR text (hybrid)
    answers: dict[int, tuple[str, Any]] = field(default_factory=dict)  # VLM answers by block
    failed: dict[int, Exception] = field(default_factory=dict)  # blocks whose crop read raised
    info: dict[int, dict] = field(default_factory=dict)  # block extras: source, retried, lines
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def line_source(self) -> str:
        """Where this page's lines come from: its trusted text layer, else the OCR."""
        return TEXT_LAYER if self.text is not None and self.text.trusted else OCR


class _OcrJobs:
    """The pages' OCR lines: submitted to the background thread at once (overlap), or read in
    line on the first results() call. results(): per page (lines, seconds) or its Exception.
    A page with a trusted text layer takes that layer's lines and runs no OCR."""

    def __init__(
        self, ocr: OcrEngine, pages: list[tuple[Image.Image, TextLayer | None]], pool: ThreadPoolExecutor | None
    ):
        # Each thread its own pixels: a lazily loaded PIL image is not safe to share.
        self._ocr = ocr
        self._pages = [text if text is not None and text.trusted else p.copy() for p, text in pages]
        self._futures: list[Future] | None = None if pool is None else [pool.submit(self._read, p) for p in self._pages]
        self._done: list | None = None

    def _read(self, page: Image.Image | TextLayer) -> tuple[list[Line], float]:
        if isinstance(page, TextLayer):
            return text_layer_lines(page), 0.0
        lines, timings = self._ocr.text_lines(page)
        return lines, timings["ocr"]

    def results(self) -> list:
        if self._done is None:
            # an OCR failure only loses the OCR of its page
            if self._futures is None:
                self._done = parse_each(self._read, self._pages)
            else:
                self._done = parse_each(Future.result, self._futures)
        return self._done

    def cancel(self) -> None:
        """Drop the pages not yet started (a failed batch is redone page by page)."""
        for f in self._futures or ():
            f.cancel()


def _loaded_rgb(image: Image.Image) -> Image.Image:
    """The page in RGB with its pixels read now, in this thread (the OCR thread gets a copy)."""
    page = to_rgb(image)
    page.load()
    return page


def _each_crop(read: Callable[[Any], Any], items: list) -> list:
    """base.parse_each for crops: each item's result or Exception in its place; a SetupError (no
    runtime, a tokenizer that does not fit the model) is no crop's own and is raised."""
    out: list = []
    for item in items:
        try:
            out.append(read(item))
        except SetupError:
            raise
        except Exception as exc:  # noqa: BLE001 - this crop only
            out.append(exc)
    return out


def _raise_if_failed(result):
    if isinstance(result, Exception):
        raise result
    return result


def _text_outside_layout(st: _Page) -> None:
    """Hybrid: a page whose layout holds no body text (no block found, a malformed answer, only
    figures, tables or page furniture) gets text blocks made of its lines outside every block,
    grouped into paragraphs as the embedded engine groups loose lines, so the text of a trusted
    text layer or of the OCR is not lost; each is then filled from its lines or read by the VLM
    as any text block. A line inside a figure's box stays the figure's."""
    if st.lines is None or any(b.type in BODY_TEXT for b in st.blocks):
        return
    held = {id(line) for group in st.lines for line in group}
    loose = [line for line in st.page_lines if id(line) not in held]
    paragraphs = assemble_blocks(loose, [], st.page.size)
    if not paragraphs:
        return
    width, height = st.page.size
    blocks = st.blocks + [LayoutBlock(str(b.type), _unit_box(b.bbox, width, height), 0) for b in paragraphs]
    boxes = [_pixel_box(b.bbox, width, height) for b in blocks]
    order = reading_order(boxes, [b.type for b in blocks])
    st.blocks = [blocks[i] for i in order]
    st.lines = fusion.assign_lines(st.page_lines, [boxes[i] for i in order])
    st.warnings.append(
        f"layout: no text block; {len(paragraphs)} text block(s) made of the page's "
        f"{st.line_source} lines outside the layout's blocks"
    )


def standard_vlm_blocks(blocks: list[Block], size: tuple[int, int]) -> tuple[list[int], list[LayoutBlock]]:
    """Standard mode: which of the embedded engine's blocks the VLM reads (their indices) and
    them as layout blocks for prepare_crops. A block of a page the engine read turned keeps its
    `angle`, so its crop is turned upright the way the VLM's own layout angles are."""
    picked = [i for i, b in enumerate(blocks) if b.type in STANDARD_VLM_TYPES]
    layout = [
        LayoutBlock(blocks[i].type, _unit_box(blocks[i].bbox, *size), int(blocks[i].extra.get("angle", 0)))
        for i in picked
    ]
    return picked, layout


def source_counts(blocks: list[Block]) -> dict[str, int]:
    """The record's counts of blocks by where their text came from (vlm, ocr, text_layer)."""
    return {
        f"{source}_blocks": sum(1 for b in blocks if b.extra.get("source") == source)
        for source in ("vlm", OCR, TEXT_LAYER)
    }


def _unit_box(box, width: int, height: int) -> tuple[float, float, float, float]:
    """A page-pixel box as the layout step's 0..1 fractions (what prepare_crops takes)."""
    x1, y1, x2, y2 = box
    return x1 / width, y1 / height, x2 / width, y2 / height


def _pixel_box(bbox, width: int, height: int) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = bbox
    return round(x1 * width), round(y1 * height), round(x2 * width), round(y2 * height)


def _match_blocks(
    done: list[LayoutBlock], blocks: list[LayoutBlock], renamed: Mapping[str, str] | None = None
) -> list[int | None]:
    """Index in `blocks` of each post-processed block: post_process keeps the order, drops some
    blocks and puts merged equations at an equation_block's place with its box, so a forward
    walk matching box, angle and type (equation for an equation_block; `renamed`, the profile's
    content_rename: Pro's list_item -> text) finds each one (None: no match). The type matters:
    a dropped block may share its box and angle with the next one. An analysed image or chart
    may come back as any figure, table or equation (protocol.figures)."""
    renamed = renamed or {}

    def same(a: LayoutBlock, b: LayoutBlock) -> bool:
        return (
            a.bbox == b.bbox
            and a.angle == b.angle
            and (
                a.type == b.type
                or (a.type == "equation_block" and b.type == "equation")
                or renamed.get(a.type) == b.type
                or (a.type in FIGURE_TYPES and b.type in _ANALYSED_AS)
            )
        )

    out: list[int | None] = []
    j = 0
    for b in done:
        k = next((k for k in range(j, len(blocks)) if same(blocks[k], b)), None)
        out.append(k)
        if k is not None:
            j = k + 1
    return out


_ANALYSED_AS = FIGURE_TYPES | {"table", "equation"}


def _weights_sha256(path: Path) -> str:
    """A weights file's sha256 for the record; one that cannot be read is a set-up error in words."""
    try:
        return file_sha256(path)
    except OSError as exc:
        from ..vlm.export_format import read_fix

        fix = read_fix(path) if is_permission(exc) else f"the model folder is incomplete; {DOWNLOAD_HINT}"
        raise SetupError(f"cannot read the model's weights {path} ({in_words(exc)}); {fix}") from None


def _sha256_file(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None
