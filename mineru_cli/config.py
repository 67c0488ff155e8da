"""One configuration for a run: every parse option, its one default, its check.

`RunConfig` is what `mineru parse` and `mineru_cli.parse()` run from: frozen and picklable,
built from the CLI's options or the API's keywords, validated once here. The CLI's defaults
and `--help` choices come from this module (a test compares them). `EngineSpec` is the
resolved engine (no `auto` left) that the main process fingerprints and every worker builds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.errors import SetupError
from .core.record import fingerprint
from .core.words import Word
from .units import parse_duration, parse_size, shown, url_shown


class EngineChoice(Word):
    AUTO = "auto"  # vlm when a MinerU2.5 model (and a runtime for it) is found, else ocr
    OCR = "ocr"  # the embedded RapidOCR + layout engine
    VLM = "vlm"  # MinerU2.5


class Mode(Word):
    VLM = "vlm"  # MinerU's two-step protocol; OCR lines only as a cross-check
    HYBRID = "hybrid"  # VLM layout, tables and equations; OCR or text-layer text for confident text blocks
    STANDARD = "standard"  # the embedded layout and text (text layer or OCR); the VLM reads tables and equations
    OCR = "ocr"  # the embedded engine, whatever the engine option says


class Runtime(Word):
    AUTO = "auto"  # onnx when an export is found, else torch
    ONNX = "onnx"
    TORCH = "torch"


class TextLayerChoice(Word):
    AUTO = "auto"  # a PDF page's own text where it can be trusted (text_layer.py), else its pixels
    OFF = "off"  # always read the pixels


class GifFrames(Word):
    FIRST = "first"
    ALL = "all"


class CacheNear(Word):
    OFF = "off"
    VERIFY = "verify"  # reuse a near-duplicate page's result after verifying it


class ExecutorChoice(Word):
    LOCAL = "local"  # worker processes on this machine (pipeline/pool.py)
    RAY = "ray"  # Ray actors: a private local instance, or a cluster at --ray-address


class OutputFormat(Word):
    MARKDOWN = "markdown"  # <stem>.md per document
    CONTENT_LIST = "content-list"  # MinerU's <stem>_content_list.json + <stem>.md + images/
    LAYOUT = "layout"  # <stem>_layout.pdf: the boxes drawn on each page


DEFAULT_PAGE_BATCH = {EngineChoice.OCR: 1, EngineChoice.VLM: 4}  # pages a worker parses together
DEFAULT_BATCH_WAIT_MS = 100  # a page batch closes when no page came this long
DEFAULT_CROP_BATCH = 8  # vlm: crops decoded together
# vlm, Pro models: image/chart blocks read with the Image Analysis prompt, as MinerU 4 does on
# the path we match (its two-step VLM path, the xhigh effort, asks for it unless turned off)
DEFAULT_IMAGE_ANALYSIS = True
DEFAULT_PAGE_TIMEOUT = 600.0  # seconds a page may take
DEFAULT_MAX_WORKER_RSS = "3GB"  # recycle a worker whose RSS is above this after a page
DEFAULT_CACHE_TTL = "2h"  # how long a result lives in the shared (Redis) tier
# The longest --cache-ttl. Redis keeps an expiry as a Unix time in milliseconds in a signed
# 64-bit number: `SET ... EX` refuses more than (2**63 - 1) // 1000 s less the time since 1970
# ("invalid expire time"; past 2**63 s "value is not an integer or out of range"), and each
# store of a run would fail. This round bound, about 285 million years, holds for millions of
# years to come. The SQLite tier keeps no TTL at all (its entries live until pruned).
MAX_CACHE_TTL_S = 9 * 10**15
DEFAULT_DPI = 200
DEFAULT_OUT_DIR = Path("mineru_output")  # where --format files go


CACHE_DIR_ENV = "MINERU_CACHE_DIR"


def user_cache_dir() -> Path:
    """mineru-cli's cache folder: $MINERU_CACHE_DIR, else the platform's user cache folder.
    The result cache lives there by default, and so do the verified-export stamps."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir as platform_cache_dir

    return Path(platform_cache_dir("mineru-cli"))


def default_page_batch(engine: str) -> int:
    """Pages a worker holds for this (resolved) engine: 1 for ocr (it parses page by page),
    4 for vlm (its layout steps and crops decode together across the batch's pages)."""
    return DEFAULT_PAGE_BATCH.get(EngineChoice(engine), 1)


# How this version makes a PDF page's pixels and text lines, beyond the options below. It is a
# LoadOptions field so that the fingerprint changes with it: a journal or result cache made by an
# earlier renderer holds other answers for the pages it now renders differently, which must be
# parsed again, not served. Bump it with every such change. 2: filled-in AcroForm fields are
# drawn, and their values join a trusted text layer (1 drew a filled form as its blank template);
# the text layer hides what filled rectangles cover and reads scanned pages from their pixels.
# 3: the text of drawn FreeText annotations (a typewriter tool's, a reviewer's text box) joins a
# trusted text layer, which held none of it (the pixels are unchanged: pdfium drew them before).
# 4: fields and FreeText annotations give the text their appearance shows, not their values.
# 5: a field counts only where its own ink shows; descenders, typed-over templates, numeric values, signatures.
# 6: a stencil-mask picture (a bilevel scan painted in its ink colour) counts towards `scanned` by its box.
# 7: a character whose Unicode is a control code is U+FFFD in the text (text_layer._is_control).
# 8: a character beyond the BMP is one character (not two lone surrogates), and the TeX accents
# set over or under a letter are joined to it (text_layer._join_accents).
# 9: right-to-left words pdfium gives as drawn are turned round, a character printed over an
# earlier copy of itself is read once, a page with vertical CJK columns is read from its pixels,
# and a line's table pieces (CELL_GAP) are part of its text layer's digest.
# 10: a right-to-left phrase in a left-to-right line is read from its rightmost word, and a
# character boxed under 4 px high is kept when its font size says it is text (text_layer._seen).
# 11: no space between two wide (CJK) characters where a justified line only stretched or beside a
# full-width punctuation mark (text_layer.WIDE_SPACE).
PDF_RENDERER = 11


@dataclass(frozen=True)
class LoadOptions:
    """How a file becomes page images; part of the fingerprint."""

    dpi: int = DEFAULT_DPI  # PDF render DPI
    pdf_max_side: int = 3500  # long side of a rendered PDF page is capped (as MinerU does)
    max_page_pixels: int = 3500 * 3500  # larger pages are downscaled to this area
    bomb_pixels: int = 178_956_970  # decoded images above this are refused
    gif_frames: str = GifFrames.FIRST.value
    text_layer: str = TextLayerChoice.AUTO.value  # PDF pages: read their text layer (auto) or not (off)
    pdf_renderer: int = PDF_RENDERER  # not an option: the renderer's revision, in the fingerprint (PDF_RENDERER)


class FileKind(Word):
    """What a file is to the page loader (inputs.Document.kind, by its content): which of the
    LoadOptions make its pages (LOAD_OPTIONS_OF)."""

    PDF = "pdf"
    GIF = "gif"  # --gif-frames picks its frames (PAGE_CHOICE_OPTIONS)
    IMAGE = "image"  # any other image: a TIFF's frames are all pages, an APNG's or WebP's first is


# The LoadOptions each kind of file is loaded with (inputs.py): the others change nothing of its
# pages, so they are left out of its pages' fingerprint (load_options_for).
LOAD_OPTIONS_OF = {
    FileKind.PDF: frozenset({"dpi", "pdf_max_side", "max_page_pixels", "bomb_pixels", "text_layer", "pdf_renderer"}),
    FileKind.GIF: frozenset({"max_page_pixels", "bomb_pixels"}),
    FileKind.IMAGE: frozenset({"max_page_pixels", "bomb_pixels"}),
}
# The LoadOptions that choose which pages a file has, as --pages chooses which are parsed, and
# make none of them: in no fingerprint. A GIF's frame 1 is the same pixels under --gif-frames
# first and all, so its record resumes and the cache serves it; the record's page_count, which
# follows the option, is made this run's as it resumes (runner), and a document is made of the
# pages the file has now (runner._document_pages).
PAGE_CHOICE_OPTIONS = frozenset({"gif_frames"})


def load_options_for(load: LoadOptions, kind: FileKind) -> LoadOptions:
    """`load` with the options that do not apply to this kind of file at their defaults: what its
    pages' fingerprint hashes, so --dpi parses no image again and --gif-frames no page at all
    (PAGE_CHOICE_OPTIONS), and options at their defaults hash as they did before the fingerprint
    was made per kind (no journal or cache made so is parsed again)."""
    default = LoadOptions()
    unused = {f.name: getattr(default, f.name) for f in dataclasses.fields(load) if f.name not in LOAD_OPTIONS_OF[kind]}
    return dataclasses.replace(load, **unused)


def page_fingerprints(engine_info: dict[str, Any], load: LoadOptions) -> dict[FileKind, str]:
    """The fingerprint of the pages of each kind of file (core.record.fingerprint): the engine's
    identity and options and the load options that apply to that kind."""
    return {kind: fingerprint(engine_info, dataclasses.asdict(load_options_for(load, kind))) for kind in FileKind}


@dataclass(frozen=True)
class CacheSpec:
    """Where and how the workers' result cache lives."""

    path: Path
    near: CacheNear = CacheNear.VERIFY
    redis_url: str | None = None
    ttl_s: int = int(parse_duration(DEFAULT_CACHE_TTL))


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (1-based): the files whose source path hashes to it. Whole files,
    not pages, go to a shard: a machine hashes and opens only its own files, and each document's
    pages stay in one journal (its --format files need them all)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        k, sep, n = text.partition("/")
        if not (sep and k.strip().isdigit() and n.strip().isdigit()) or not 1 <= int(k) <= int(n):
            raise SetupError(f"--shard {text!r}: give K/N with 1 <= K <= N, e.g. 2/3")
        return cls(int(k), int(n))

    def holds(self, source: str) -> bool:
        """Whether the file with this record `source` (its path relative to the input root) is ours."""
        digest = hashlib.sha256(source.encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class EngineSpec:
    """A resolved engine: what the fingerprint is computed from and what workers build."""

    engine: EngineChoice  # OCR or VLM, never AUTO
    mode: Mode
    lang: str = "en"
    model: str | None = None  # vlm: the model folder or ONNX export in use
    model_profile: str | None = None  # vlm: "2509" | "pro" (None: from the model folder)
    runtime: Runtime | None = None  # vlm: ONNX or TORCH
    crop_batch: int = DEFAULT_CROP_BATCH
    max_new_tokens: int | None = None  # vlm: the cap on an answer (None: up to the context)
    image_analysis: bool = DEFAULT_IMAGE_ANALYSIS  # vlm: Pro image/chart analysis


def parse_choice(kind: type[Word], value: Any, option: str) -> Any:
    """`value` as a member of `kind`, or a SetupError naming the option and its choices."""
    try:
        return kind(value)
    except ValueError:
        raise SetupError(f"{option} {value!r}: choose from {', '.join(kind.values())}") from None


# The numeric options, by type; the API may give them as numbers or as strings ("5").
_NUMBERS = (
    ("cpus", int),
    ("workers", int),
    ("page_batch", int),
    ("batch_wait_ms", int),
    ("crop_batch", int),
    ("max_new_tokens", int),
    ("page_timeout", float),
)


def _several(value: Any, option: str) -> tuple[Any, ...]:
    """A repeatable option's values: one string (or path) is one value, not its characters."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise SetupError(f"{option} takes one value or a list of them, not {value!r}") from None


def _patterns(value: Any, option: str) -> tuple[str, ...]:
    """--include / --exclude: glob patterns, one string or several."""
    patterns = _several(value, option)
    for one in patterns:
        if not isinstance(one, str):
            raise SetupError(f"{option} takes glob patterns (strings), not {one!r}")
    return patterns


def _path(value: Any, option: str) -> Path:
    """A path option's value (a str or os.PathLike)."""
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise SetupError(f"{option} must be a path, not {value!r}")


def _flag(value: Any, option: str) -> bool:
    """A switch's value: True or False, not a string whose truth would be taken ("no" is true)."""
    if isinstance(value, bool):
        return value
    raise SetupError(f"{option} must be True or False, not {value!r}")


def _pages(value: Any) -> str:
    """--pages as its text ("1-3,7"); the API also takes a page number or a list of numbers and
    ranges ([1, "4-6"])."""
    if isinstance(value, str):
        return value
    parts = list(value) if hasattr(value, "__iter__") else [value]
    if all(isinstance(p, (int, str)) and not isinstance(p, bool) for p in parts):
        return ",".join(str(p) for p in parts)
    raise SetupError(f"--pages takes ranges such as '1-3,7' (or page numbers), not {value!r}")


def _formats(value: Any) -> tuple[Any, ...]:
    """--format's values, each also a comma-separated list (`-f markdown,layout`)."""
    out: list[Any] = []
    for one in _several(value, "--format"):
        out += [part.strip() for part in one.split(",")] if isinstance(one, str) else [one]
    return tuple(out)


def _number(value: Any, kind: type[int] | type[float], name: str) -> Any:
    option = "--" + name.replace("_", "-")
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if kind is int and number != int(number):
            raise ValueError
        return kind(number)
    except (TypeError, ValueError, OverflowError):
        raise SetupError(f"{option} must be {'a whole number' if kind is int else 'a number'}, not {value!r}") from None


def _is_redis_url(url: str) -> bool:
    """Whether `url` has the form redis-py's Redis.from_url takes (it is checked before any
    worker starts: a bad one failed there, as an engine that could not start)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is no number
    except ValueError:
        return False
    if parts.scheme == "unix":
        return bool(parts.path)
    return parts.scheme in ("redis", "rediss") and bool(parts.hostname)


def _duration(value: Any, option: str) -> float:
    """A duration given as text ("2h") or as seconds, parsed once, in seconds (a fraction kept):
    inf for one past a float's range (400 digits), nan for nan; the caller bounds it."""
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError
        return parse_duration(value)
    except ValueError:
        raise SetupError(f"{option}: not a duration: {shown(value)} (use e.g. 90s, 15m, 2h, 30d)") from None
    except OverflowError:  # an int past a float's range
        return math.inf if value > 0 else -math.inf


def _cache_ttl(value: Any) -> int:
    """--cache-ttl in whole seconds, at least 1 (Redis refuses an expiry below 1 s on every
    store) and at most MAX_CACHE_TTL_S (Redis refuses a longer one on every store): a value no
    tier can keep is refused, not clamped. The refusal names the unit, and the value as given
    (cut short) where it had a fraction ("0.5s" is 0 s)."""
    seconds = _duration(value, "--cache-ttl")
    if math.isnan(seconds):
        raise SetupError(f"--cache-ttl: not a duration: {shown(value)} (use e.g. 90s, 15m, 2h, 30d)")
    if seconds > MAX_CACHE_TTL_S:
        raise SetupError(
            f"--cache-ttl {shown(value)} is too long: the shared tier (Redis) keeps a result at most "
            f"{MAX_CACHE_TTL_S:,} s (about 285 million years)"
        )
    if seconds < 1:
        whole = int(seconds) if math.isfinite(seconds) else seconds
        cut = isinstance(value, (str, float)) and seconds != whole
        given = f" ({shown(value)} is {whole} whole seconds)" if cut else ""
        raise SetupError(
            f"--cache-ttl must be at least 1 second, not {whole}{given}: "
            "give how long a result lives in the shared tier, e.g. 90s, 15m, 2h, 7d"
        )
    return int(seconds)


def _at_least(value: Any, low: float, option: str, high: float | None = None) -> None:
    if value is not None and (value < low or (high is not None and value > high)):
        span = f"at least {low:g}" if high is None else f"between {low:g} and {high:g}"
        raise SetupError(f"{option} must be {span}, not {value}")


@dataclass(frozen=True)
class RunConfig:
    """Every option of a parse run. Build it with keywords (strings are accepted for the
    choices and for sizes/durations); it checks itself and raises SetupError."""

    inputs: tuple[Path, ...]
    out: Path | None = Path("results.jsonl")  # None (API): no journal, no resume
    engine: EngineChoice = EngineChoice.AUTO
    mode: Mode | None = None  # None: vlm for the vlm engine, else ocr
    model: str | None = None  # vlm: model folder or ONNX export (else env / HF cache)
    model_profile: str | None = None  # vlm: "2509" | "pro" (default: from the model folder)
    runtime: Runtime = Runtime.AUTO
    lang: str = "en"
    cpus: int | None = None  # None: the affinity / cgroup limit
    workers: int | None = None  # None: from the CPU plan
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    root: Path | None = None  # page ids are paths relative to it (None: the inputs' common folder)
    pages: str | None = None  # 1-based ranges, "1-3,7"
    load: LoadOptions = field(default_factory=LoadOptions)
    force: bool = False
    retry_failed: bool = False
    cache: bool = True
    cache_dir: Path | None = None  # None: $MINERU_CACHE_DIR or the user cache dir
    cache_near: CacheNear = CacheNear.VERIFY
    cache_url: str | None = None
    cache_ttl: int = int(parse_duration(DEFAULT_CACHE_TTL))  # seconds
    formats: frozenset[OutputFormat] = frozenset()
    out_dir: Path | None = None  # None: DEFAULT_OUT_DIR; given without formats, refused
    page_timeout: float = DEFAULT_PAGE_TIMEOUT
    max_worker_rss: int = parse_size(DEFAULT_MAX_WORKER_RSS)  # bytes; 0: never recycle
    page_batch: int | None = None  # None: default_page_batch(engine)
    batch_wait_ms: int = DEFAULT_BATCH_WAIT_MS
    crop_batch: int = DEFAULT_CROP_BATCH
    max_new_tokens: int | None = None  # vlm: the cap on an answer (None: the context minus the prompt)
    image_analysis: bool = DEFAULT_IMAGE_ANALYSIS  # vlm: Pro models read images and charts
    shard: Shard | None = None  # this machine's share of the files ("K/N"); None: all of them
    executor: ExecutorChoice = ExecutorChoice.LOCAL
    ray_address: str | None = None  # executor ray: None starts a private local instance

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("inputs", tuple(_path(p, "an input") for p in _several(self.inputs, "paths")))
        put("out", None if self.out is None else _path(self.out, "--out"))
        if self.out_dir is not None:
            put("out_dir", _path(self.out_dir, "--out-dir"))
        for name in ("force", "retry_failed", "cache", "image_analysis"):
            put(name, _flag(getattr(self, name), "--" + name.replace("_", "-")))
        if not isinstance(self.load, LoadOptions):
            raise SetupError(f"load must be a LoadOptions, not {self.load!r}")
        if self.pages is not None:
            put("pages", _pages(self.pages))
        put("engine", parse_choice(EngineChoice, self.engine, "--engine"))
        put("runtime", parse_choice(Runtime, self.runtime, "--runtime"))
        put("cache_near", parse_choice(CacheNear, self.cache_near, "--cache-near"))
        put("executor", parse_choice(ExecutorChoice, self.executor, "--executor"))
        if self.ray_address is not None and self.executor is not ExecutorChoice.RAY:
            raise SetupError("--ray-address needs --executor ray")
        if self.mode is not None:
            put("mode", parse_choice(Mode, self.mode, "--mode"))
        put("formats", frozenset(parse_choice(OutputFormat, f, "--format") for f in _formats(self.formats)))
        put("include", _patterns(self.include, "--include"))
        put("exclude", _patterns(self.exclude, "--exclude"))
        for name, kind in _NUMBERS:
            if getattr(self, name) is not None:
                put(name, _number(getattr(self, name), kind, name))
        put("load", dataclasses.replace(self.load, dpi=_number(self.load.dpi, int, "dpi")))
        if self.cache_dir is not None:
            put("cache_dir", _path(self.cache_dir, "--cache-dir"))
        if self.model is not None:
            put("model", str(_path(self.model, "--model")))
        if self.root is not None:
            put("root", _path(self.root, "--root"))
        rss = self.max_worker_rss
        try:
            put("max_worker_rss", parse_size(_number(rss, int, "max_worker_rss") if not isinstance(rss, str) else rss))
        except ValueError as exc:
            raise SetupError(f"--max-worker-rss: {exc}") from None
        _at_least(self.max_worker_rss, 0, "--max-worker-rss")
        put("cache_ttl", _cache_ttl(self.cache_ttl))
        if self.cache_url is not None and not (isinstance(self.cache_url, str) and _is_redis_url(self.cache_url)):
            url = url_shown(self.cache_url) if isinstance(self.cache_url, str) else self.cache_url  # never its password
            raise SetupError(
                f"--cache-url {url!r} is not a Redis URL: "
                "redis://[user:password@]host[:port][/db], rediss://... (TLS) or unix:///path/to/socket"
            )
        parse_choice(GifFrames, self.load.gif_frames, "--gif-frames")
        parse_choice(TextLayerChoice, self.load.text_layer, "--text-layer")
        _at_least(self.load.dpi, 36, "--dpi", 600)
        _at_least(self.cpus, 1, "--cpus")
        _at_least(self.workers, 1, "--workers")
        _at_least(self.page_timeout, 0.1, "--page-timeout")
        _at_least(self.page_batch, 1, "--page-batch", 64)
        _at_least(self.batch_wait_ms, 0, "--batch-wait-ms", 60000)
        _at_least(self.crop_batch, 1, "--crop-batch", 256)
        _at_least(self.max_new_tokens, 1, "--max-new-tokens")
        if self.shard is not None and not isinstance(self.shard, Shard):
            put("shard", Shard.parse(str(self.shard)))
        if self.formats and self.out is None:
            raise SetupError("--format needs a journal (out): the per-document files are built from it")
        if self.out_dir is not None and not self.formats:
            # an --out-dir given alone would be ignored without a word: no file is written there
            raise SetupError(
                f"--out-dir {self.out_dir} needs --format (markdown, content-list, layout): it is where the "
                "per-document files go, and none are written without one"
            )

    @property
    def documents_dir(self) -> Path:
        """Where the per-document files go (--out-dir)."""
        return self.out_dir if self.out_dir is not None else DEFAULT_OUT_DIR

    @classmethod
    def from_options(cls, inputs: Any, /, **options: Any) -> RunConfig:
        """The API's keywords: the fields above but the inputs (given first), plus `dpi`,
        `gif_frames` and `text_layer` for `load`."""
        load = {k: options.pop(k) for k in ("dpi", "gif_frames", "text_layer") if k in options}
        base = options.get("load") or LoadOptions()
        if load and isinstance(base, LoadOptions):  # another `load` is refused below
            options["load"] = dataclasses.replace(base, **load)
        unknown = set(options) - {f.name for f in dataclasses.fields(cls)} | ({"inputs"} & set(options))
        if unknown:
            raise SetupError(f"unknown option(s): {', '.join(sorted(unknown))}")
        return cls(inputs=inputs, **options)

    def cache_spec(self, default_dir: Path) -> CacheSpec | None:
        """The workers' cache (None: no cache); `default_dir` when no cache_dir was given."""
        if not self.cache:
            return None
        return CacheSpec(self.cache_dir or default_dir, self.cache_near, self.cache_url, self.cache_ttl)
