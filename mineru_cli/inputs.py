"""Finding input files and turning them into normalised page images.

Two halves:

* ``discover`` walks the command-line paths into a stable, de-duplicated list of
  ``SourceFile``s. Problems found while walking (dangling links, loops, FIFOs,
  directories named like documents) become ``SourceFile.error`` instead of
  exceptions, so one bad entry never stops the batch.
* ``open_document`` sniffs a file's content (PDF or any image Pillow decodes) and
  gives a ``Document`` whose ``page(i)`` returns an 8-bit RGB ``Page``. Every
  failure is a ``PageError`` with a kind the record can carry.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import logging
import math
import os
import posixpath
import stat
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pypdfium2 as pdfium
from PIL import Image, ImageOps, TiffImagePlugin, UnidentifiedImageError

from .config import FileKind, LoadOptions
from .core.errors import PageError
from .hashing import file_sha256  # noqa: F401  (part of the inputs API: hash a source file)
from .text_layer import TextLayer, read_text_layer
from .tiff_header import DIRECTORY, compression, cut_short, is_tiff

# MinerU's image suffixes (JPEG 2000 too: archives keep their scans so), TIFF's short name, PDF
DOC_EXTS = {".png", ".jpg", ".jpeg", ".jp2", ".webp", ".bmp", ".tif", ".tiff", ".gif", ".pdf"}

WHITE = (255, 255, 255)
_HEAD_BYTES = 1024  # pdfium accepts a "%PDF-" header anywhere in the first 1 KiB
# Reads refused for what the process or the system has run out of, not for the file.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
# On an XFA form, pypdfium2's init_forms logs a hint to install a build with XFA support; the
# pages render without their XFA layer all the same (AcroForm fields drawn), and a batch's stderr
# is no place for that hint once per document
_PDFIUM_LOG = logging.getLogger("pypdfium2")


@dataclass(frozen=True)
class SourceFile:
    path: Path  # as discovered (not resolved; may go through symlinks)
    rel: str  # posix path relative to the input root: the record's `source`
    kind: str  # "image" | "pdf"
    error: PageError | None = None  # a problem found while discovering
    status: str = "failed"  # status to record when error is set: "failed" | "skipped"


@dataclass
class Page:
    image: Image.Image  # 8-bit RGB, normalised
    sha256: str  # of the normalised pixels: a lossless re-save of the file matches
    original_size: tuple[int, int]  # before any downscale (PDF: rendered size before the cap)
    scale: float  # applied downscale factor (1.0 if none)
    warnings: list[str] = field(default_factory=list)
    # PDF pages: the page's own text in the normalised image's pixels, and whether it is
    # trusted (text_layer.py); None for images (and for PDF pages with --text-layer off)
    text_layer: TextLayer | None = None


# --------------------------------------------------------------------------- discover


def discover(
    paths: list[Path], include: Sequence[str] = (), exclude: Sequence[str] = (), root: Path | None = None
) -> list[SourceFile]:
    """Expand files and folders into SourceFiles, in a stable order, each `rel` once: a path
    relative to `root` (default: the arguments' common folder)."""
    return list(iter_sources(paths, include, exclude, root))


def iter_sources(
    paths: list[Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    root: Path | None = None,
    listed: set[str] | None = None,
) -> Iterator[SourceFile]:
    """discover() as a stream: each SourceFile as the walk reaches it (folders are listed one at
    a time), so a planner can start on the first file of a huge dump at once. `listed` gets the
    rel of each folder the walk lists ("." for the root): a failed record of such a folder from
    an earlier run (it could not be listed then) is out of date."""
    args = _unique_args(paths)
    root_dir = input_root(args, root)
    # Overlapping arguments (`a/ a/x.png`) reach one file twice: keep the first. One argument
    # cannot (a walk reaches each name once), so a single folder's dump keeps no set of names.
    seen: set[str] | None = set() if len(args) > 1 else None
    for arg in args:
        for src in _discover_arg(arg, _rel_to(root_dir, arg), listed if listed is not None else set()):
            if not _selected(src.rel, include, exclude):
                continue
            if seen is not None:
                if src.rel in seen:
                    continue
                seen.add(src.rel)
            yield src


def _unique_args(paths) -> list[Path]:
    seen, args = set(), []
    for p in map(Path, paths):
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            args.append(p)
    return args


def input_root(paths: Sequence[Path], root: Path | None = None) -> str:
    """The folder page ids are paths under (absolute): `root` (--root), else the arguments'
    common folder."""
    return os.path.abspath(root) if root is not None else _input_root(_unique_args(paths))


def _input_root(args: list[Path]) -> str:
    """Common folder of the arguments (a folder itself, a file's parent); lexical, not resolved."""
    folders = [os.path.abspath(a if a.is_dir() else a.parent) for a in args]
    if not folders:
        return os.path.abspath(".")
    try:
        return os.path.commonpath(folders)
    except ValueError:  # different drives on Windows: no common root
        return ""


def outside_root(paths: Sequence[Path], root: Path) -> Path | None:
    """The first of `paths` not inside folder `root` (lexically, as ids are made), else None."""
    base = os.path.abspath(root)
    for path in paths:
        absolute = os.path.abspath(path)
        if os.path.commonpath([base, absolute]) != base:
            return path
    return None


def _rel_to(root: str, path: Path) -> str:
    absolute = os.path.abspath(path)
    rel = os.path.relpath(absolute, root) if root else absolute
    return Path(rel).as_posix()


def _selected(rel: str, include, exclude) -> bool:
    def matches(patterns) -> bool:
        name = posixpath.basename(rel)
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)

    if include and not matches(include):
        return False
    return not matches(exclude)


def _is_doc(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in DOC_EXTS


def named_kind(src: SourceFile) -> FileKind:
    """What a file is to the page loader by its name (or, named explicitly without a document's
    extension, its sniffed content): the kind of a file that did not open, whose content says
    nothing (its one record is fingerprinted as that kind)."""
    if src.kind == "pdf":
        return FileKind.PDF
    return FileKind.GIF if src.path.name.lower().endswith(".gif") else FileKind.IMAGE


def _kind_for(name: str) -> str:
    return "pdf" if name.lower().endswith(".pdf") else "image"


def _failed(path: Path, rel: str, kind: str, message: str, status: str = "failed") -> SourceFile:
    error = PageError(kind, "discover", message)
    return SourceFile(path, rel, _kind_for(path.name), error, status)


def _stat_or_error(path: Path, rel: str) -> os.stat_result | SourceFile:
    """Follow links once; turn what the OS says about a broken entry into a record."""
    try:
        return path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return _failed(path, rel, "not_found", f"dangling symlink -> {os.readlink(path)}")
        return _failed(path, rel, "not_found", "no such file or directory")
    except PermissionError as exc:
        return _failed(path, rel, "unreadable", f"cannot stat: {exc.strerror}")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _failed(path, rel, "symlink_loop", "symlink loop (link resolves to itself)")
        return _failed(path, rel, "unreadable", f"cannot stat: {exc.strerror or exc}")


def _discover_arg(arg: Path, rel: str, listed: set[str]) -> Iterator[SourceFile]:
    st = _stat_or_error(arg, rel)
    if isinstance(st, SourceFile):
        yield st
    elif stat.S_ISDIR(st.st_mode):
        # An explicit folder is walked; files inside are relative to the input root.
        yield from _walk(arg, "" if rel == "." else rel, {(st.st_dev, st.st_ino)}, listed)
    elif not stat.S_ISREG(st.st_mode):
        yield _failed(arg, rel, "not_a_file", f"not a regular file ({_file_type(st)})")
    elif _is_doc(arg.name):
        yield SourceFile(arg, rel, _kind_for(arg.name))
    else:
        yield _explicit_other(arg, rel)


def _explicit_other(path: Path, rel: str) -> SourceFile:
    """A file named explicitly with an unknown extension: take it if its content is a document."""
    kind = _sniff_kind(path)
    if kind is None:
        suffix = path.suffix or "no extension"
        return _failed(path, rel, "unsupported", f"unsupported file type ({suffix}): not an image or PDF")
    return SourceFile(path, rel, kind)


def _sniff_kind(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            if b"%PDF-" in f.read(_HEAD_BYTES):
                return "pdf"
            f.seek(0)
            with _pillow_bomb_limit(None), Image.open(f):  # identify only: size is page()'s business
                return "image"
    except Exception:  # noqa: BLE001 - any failure to identify means "not a document we know"
        return None


def _walk(folder: Path, rel: str, ancestors: set[tuple[int, int]], listed: set[str]) -> Iterator[SourceFile]:
    """Depth-first, entries sorted by name; `ancestors` holds (dev, ino) of the folders
    on the current path, so a link back up is reported once instead of walked forever."""
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        yield _failed(folder, rel or ".", "unreadable", f"cannot list folder: {exc.strerror or exc}")
        return
    listed.add(rel or ".")
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        path, child_rel = folder / name, posixpath.join(rel, name)
        st = _stat_or_error(path, child_rel)
        if isinstance(st, SourceFile):
            if _is_doc(name):  # broken entries without a document name are not ours
                yield st
            elif _may_be_folder(entry):  # else its documents would go unmentioned
                assert st.error is not None
                message = f"{st.error.message}; a folder (or of unknown type): nothing in it is parsed"
                yield _failed(path, child_rel, st.error.kind, message)
        elif stat.S_ISDIR(st.st_mode):
            yield from _walk_child_dir(path, child_rel, st, ancestors, listed)
        elif _is_doc(name):
            if stat.S_ISREG(st.st_mode):
                yield SourceFile(path, child_rel, _kind_for(name))
            else:  # never open these: reading a FIFO blocks forever
                yield _failed(path, child_rel, "not_a_file", f"not a regular file ({_file_type(st)})")


def _may_be_folder(entry: os.DirEntry) -> bool:
    """For an entry whose stat failed (its folder has no search permission, its path is longer
    than PATH_MAX, a link into a folder we may not enter): is it, or may it be, a folder? The
    listing's own file type answers without a stat; a link is followed. A link to nothing or a
    loop of links is not (a broken entry without a document name is not ours)."""
    try:
        return entry.is_dir()
    except OSError as exc:
        return exc.errno not in (errno.ENOENT, errno.ELOOP)


def _walk_child_dir(path: Path, rel: str, st: os.stat_result, ancestors, listed: set[str]) -> Iterator[SourceFile]:
    key = (st.st_dev, st.st_ino)
    if _is_doc(path.name):
        yield _failed(path, rel, "not_a_file", "is a directory (named like a document; not walked)")
    elif key in ancestors:
        target = os.readlink(path) if path.is_symlink() else path
        yield _failed(
            path, rel, "symlink_loop", f"symlink loop: {target} is an ancestor folder; not walked", status="skipped"
        )
    else:
        yield from _walk(path, rel, ancestors | {key}, listed)


def _file_type(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


# --------------------------------------------------------------------------- small helpers


def parse_page_ranges(spec: str | None) -> Callable[[int], bool] | None:
    """Parse "1-3,7" or "5-" (1-based, inclusive) into a predicate.

    The predicate takes a **1-based page number** (Document.page(i) is page i + 1).
    None means every page. Raises ValueError on a malformed spec.
    """
    if spec is None:
        return None
    ranges: list[tuple[int, float]] = []
    for part in spec.split(","):
        ranges.append(_parse_range(part.strip(), spec))

    def wanted(number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in ranges)

    return wanted


def _parse_range(part: str, spec: str) -> tuple[int, float]:
    # the whole spec is not repeated where it is the one range (the caller names the spec)
    bad = f"bad page range {part!r}" + (f" in {spec!r}" if part != spec.strip() else "")
    lo_s, dash, hi_s = part.partition("-")
    try:
        lo = int(lo_s)
        hi = (int(hi_s) if hi_s.strip() else math.inf) if dash else lo
    except ValueError:
        raise ValueError(f"{bad}: expected N, N-M or N- joined by commas, e.g. 1-3,7,10-") from None
    if lo < 1 or hi < lo:
        raise ValueError(f"{bad}: pages start at 1 and need start <= end")
    return lo, hi


def pixels_sha256(image: Image.Image) -> str:
    """Hash of what the engine sees, independent of the file's encoding."""
    h = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def os_error(exc: OSError, stage: str) -> PageError:
    """A file's OSError as its page's error, in the words every executor's records use."""
    if isinstance(exc, PermissionError):
        return PageError("unreadable", stage, "permission denied")
    if isinstance(exc, FileNotFoundError):
        return PageError("not_found", stage, "no such file (removed or a dangling link)")
    if isinstance(exc, IsADirectoryError):
        return PageError("not_a_file", stage, "is a directory")
    if exc.errno == errno.ELOOP:
        return PageError("symlink_loop", stage, "symlink loop")
    if exc.errno in RESOURCE_ERRNOS:
        return PageError(
            "unreadable", stage, f"cannot read: {exc.strerror or exc} (a limit of this process, not the file)", True
        )
    return PageError("unreadable", stage, f"cannot read: {exc.strerror or exc}")


# --------------------------------------------------------------------------- documents


class Document:
    """An opened source file; `page(i)` decodes and normalises one page."""

    page_count: int = 0
    # Whether page_count is the file's own, which no option changes (a GIF's frames follow
    # --gif-frames): what pages past the end of a file that shrank are told by. Known from the
    # content, as the document is opened: an extension may lie.
    fixed_page_count: bool = True
    # Which load options make its pages (config.LOAD_OPTIONS_OF, what its pages' fingerprint
    # hashes): known from the content, as the document is opened
    kind: FileKind = FileKind.IMAGE

    def page(self, index: int) -> Page:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Document":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_index(self, index: int) -> None:
        # A wrong index is a caller bug, not a bad file: fail loudly.
        if not 0 <= index < self.page_count:
            raise IndexError(f"page index {index} out of range (0..{self.page_count - 1})")


class OpenDocuments:
    """The last opened document, kept open while consecutive pages come from it (a PDF is
    parsed once, not once per page); opening another closes it."""

    def __init__(self, load: LoadOptions):
        self.load = load
        self.key: Path | None = None
        self.doc: Document | None = None

    def get(self, src: SourceFile) -> Document:
        if self.key != src.path or self.doc is None:
            self.close()
            self.doc = open_document(src, self.load)
            self.key = src.path
        return self.doc

    def close(self) -> None:
        if self.doc is not None:
            try:
                self.doc.close()
            except Exception:  # noqa: BLE001 - closing must not fail the page that follows
                pass
        self.key, self.doc = None, None


def open_document(src: SourceFile, opts: LoadOptions) -> Document:
    """Open by content, not extension. Raises PageError (stage "open")."""
    if src.error is not None:
        raise src.error
    head = _read_head(src.path)
    if not head:
        raise PageError("empty", "open", "file is empty (0 bytes)")
    if b"%PDF-" in head:
        return PdfDocument(src.path, opts)
    return ImageDocument(src.path, opts)


def _read_head(path: Path) -> bytes:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # never open a FIFO: it blocks
            raise PageError("not_a_file", "open", f"not a regular file ({_file_type(st)})")
        with open(path, "rb") as f:
            return f.read(_HEAD_BYTES)
    except OSError as exc:
        raise os_error(exc, "open") from None


class ImageDocument(Document):
    """Any image Pillow can decode. Multi-page TIFF: every frame; GIF: first or all
    frames per options; other animations (APNG, WEBP, MPO): first frame."""

    def __init__(self, path: Path, opts: LoadOptions):
        self.opts = opts
        try:
            self._file = open(path, "rb")
        except OSError as exc:
            raise os_error(exc, "open") from None
        notes: list[str] = []
        try:
            # Only the header is read here; page() checks each frame's size before decoding.
            with _pillow_notes(notes), _pillow_bomb_limit(None):
                self._im = Image.open(self._file)
                self.page_count = self._frames_to_read()
                self.fixed_page_count = self._im.format != "GIF"
                self.kind = FileKind.GIF if self._im.format == "GIF" else FileKind.IMAGE
        except PageError:
            self._file.close()
            raise
        except Exception as exc:  # noqa: BLE001 - a decoder's failure is this file's error
            error = self._tiff_error(exc, notes, None) or _decode_error(exc, "open")
            self._file.close()
            raise error from None

    def _frames_to_read(self) -> int:
        if self._im.format == "TIFF":
            return self._tiff_frames()
        if self._im.format == "GIF" and self.opts.gif_frames == "all":
            return getattr(self._im, "n_frames", 1)
        return 1

    def _tiff_frames(self) -> int:
        """The TIFF's frames, up to and including the first whose directory cannot be read (its
        page is this file's error, said by page()): a file damaged after its first frames keeps
        them, where Pillow's n_frames fails for the whole file."""
        try:
            return int(getattr(self._im, "n_frames", 1))
        except Exception:  # noqa: BLE001 - a damaged directory further on: counted frame by frame
            pass
        frames = 0
        while True:
            try:
                self._im.seek(frames)
            except EOFError:  # the chain ends cleanly
                break
            except Exception:  # noqa: BLE001 - this frame's directory is the damage
                frames += 1
                break
            frames += 1
        self._im.seek(0)
        return max(1, frames)

    def page(self, index: int) -> Page:
        self._check_index(index)
        notes: list[str] = []
        try:
            with _pillow_notes(notes), _pillow_bomb_limit(self.opts.bomb_pixels):
                if getattr(self._im, "n_frames", 1) > 1:
                    self._im.seek(index)
                _check_bomb(self._im.size, self.opts.bomb_pixels)  # header size, before decoding
                self._im.load()
                frame, warns = _upright(self._im)
                if _white_is_zero(self._im):
                    frame = _positive(frame)
        except PageError:
            raise
        except Exception as exc:  # noqa: BLE001 - a decoder's failure is this file's error
            raise self._tiff_error(exc, notes, index) or _decode_error(exc, "open") from None
        return _finish_page(frame, frame.size, 1.0, warns, self.opts)

    def _tiff_error(self, exc: Exception, notes: list[str], index: int | None) -> PageError | None:
        """A TIFF's decoding failure said as what is wrong with the file (cut short, which part
        is damaged, or whole but compressed in a scheme Pillow lacks: a page compressed so is no
        damage, and getting it again does not help), with Pillow's words kept after it; None for
        other files and for failures that are not the file's data (memory, permissions, the
        pixel limit)."""
        # TypeError: Pillow's "Missing dimensions" for a directory that holds no image size
        decoding = (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, struct.error, TypeError)
        if not isinstance(exc, decoding):
            return None
        if isinstance(exc, (PermissionError, FileNotFoundError, Image.DecompressionBombError)):
            return None
        try:
            if not is_tiff(self._file):
                return None
            short = cut_short(self._file)
            code = compression(self._file) if index is None else None
        except OSError:
            return None
        pillow = "; ".join([*dict.fromkeys(notes), f"{type(exc).__name__}: {exc}"])
        if code is not None and code not in TiffImagePlugin.COMPRESSION_INFO:  # whole, but not readable here
            return PageError(
                "unsupported",
                "open",
                f"a TIFF compressed in a scheme Pillow cannot decode (compression {code}): convert it to one it "
                f"can (e.g. tiffcp -c lzw IN OUT) (Pillow: {pillow})",
            )
        if short:
            what = f"a TIFF file cut short or damaged: {short}"
        elif index is None:
            what = f"a TIFF file whose {DIRECTORY} is damaged"
        else:
            what = f"page {index + 1} of this TIFF cannot be decoded: its {DIRECTORY} or its image data is damaged"
        return PageError("corrupt", "open", f"{what}; get the file again (Pillow: {pillow})")

    def close(self) -> None:
        self._im.close()
        self._file.close()


class PdfDocument(Document):
    """A PDF through pypdfium2: counting pages renders nothing."""

    kind = FileKind.PDF

    def __init__(self, path: Path, opts: LoadOptions):
        self.opts = opts
        try:
            self._pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            if _no_pages(path):
                raise PageError("empty", "open", "the PDF has no pages") from None
            raise _pdf_open_error(exc) from None
        self._forms_warning: str | None = None
        try:
            # pdfium draws AcroForm fields (what was filled into a form) and gives their values
            # (annotation_text.py) only through a form environment, made before any page is loaded:
            # without it a filled form renders as its blank template (config.PDF_RENDERER)
            with _quiet(_PDFIUM_LOG):
                self._pdf.init_forms()
        except pdfium.PdfiumError as exc:  # the pages still render, as the blank form
            self._forms_warning = f"PDF form fields not drawn ({exc})"
        self.page_count = len(self._pdf)

    def page(self, index: int) -> Page:
        self._check_index(index)
        page = None
        text: TextLayer | None = None
        warns: list[str] = [self._forms_warning] if self._forms_warning else []
        try:
            page = self._pdf[index]
            width, height = _page_size(page, index, warns)
            image, original, cap = self._render(page, width, height)
            if self.opts.text_layer == "auto":
                text = self._text_layer(page, image, index, warns)
        except PageError:
            raise
        except Exception as exc:  # noqa: BLE001 - a renderer's failure is this page's error
            raise PageError("corrupt", "render", f"PDF page {index + 1} failed to render: {exc}") from None
        finally:
            if page is not None:
                page.close()
        if cap < 1.0:
            warns.append(
                f"PDF page rendered at {image.width}x{image.height} (long side capped at {self.opts.pdf_max_side})"
            )
        out = _finish_page(image, original, cap, warns, self.opts)
        if text is not None:
            out.text_layer = text.scaled(out.image.width / image.width)
        return out

    @staticmethod
    def _text_layer(page, image: Image.Image, index: int, warns: list[str]) -> TextLayer | None:
        """The page's text layer, read against its rendered pixels; a text layer pdfium cannot
        read costs only itself (the page is then read from its pixels, with a warning)."""
        try:
            return read_text_layer(page, np.asarray(image), index)  # RGB: coloured text on a band of its grey shows
        except Exception as exc:  # noqa: BLE001 - the pixels are still good
            warns.append(f"PDF page {index + 1}: text layer unreadable ({type(exc).__name__}: {exc}); read from pixels")
            return None

    def _render(self, page, width: float, height: float) -> tuple[Image.Image, tuple[int, int], float]:
        # As MinerU: scale = dpi/72, lowered so the long side stays within pdf_max_side.
        base = self.opts.dpi / 72
        scale = base
        long_side = max(width, height)
        if long_side * scale > self.opts.pdf_max_side:
            scale = self.opts.pdf_max_side / long_side
        original = (math.ceil(width * base), math.ceil(height * base))  # pypdfium2 sizes with ceil
        _check_bomb((math.ceil(width * scale), math.ceil(height * scale)), self.opts.bomb_pixels)
        bitmap = page.render(scale=scale, may_draw_forms=True)  # the page as filled in (init_forms above)
        try:
            image = bitmap.to_pil().convert("RGB")  # a copy: the bitmap buffer is freed below
        finally:
            bitmap.close()
        return image, original, scale / base

    def close(self) -> None:
        self._pdf.close()


def _page_size(page, index: int, warns: list[str]) -> tuple[float, float]:
    """The page's size in points. pdfium shows a page its CropBox cut from its MediaBox; a
    CropBox that misses the MediaBox leaves nothing (a 0 x 0 page it refuses to render), where
    PDF viewers (pdf.js, MuPDF) show the whole MediaBox: so is the page rendered then."""
    width, height = page.get_size()
    if width > 0 and height > 0:
        return width, height
    crop = [round(v, 2) for v in page.get_cropbox()]
    media = page.get_mediabox()
    page.set_cropbox(*media)
    warns.append(
        f"PDF page {index + 1}: its CropBox {crop} lies outside its MediaBox "
        f"{[round(v, 2) for v in media]}; the whole MediaBox is rendered"
    )
    return page.get_size()


def _no_pages(path: Path) -> bool:
    """Whether PDFium loads the file as a PDF without pages. pypdfium2 refuses one as it refuses
    a file PDFium cannot load, with PDFium's last error, which PDFium did not set for it: the
    message named whatever failed before ("PDFium: Success" in a fresh process)."""
    raw = pdfium.raw
    doc = raw.FPDF_LoadDocument(os.fsencode(path), None)
    if not doc:  # not loaded: the error PDFium set now is the file's
        return False
    try:
        return bool(raw.FPDF_GetPageCount(doc) == 0)
    finally:
        raw.FPDF_CloseDocument(doc)


def _pdf_open_error(exc: pdfium.PdfiumError) -> PageError:
    code = getattr(exc, "err_code", None)
    if code == pdfium.raw.FPDF_ERR_PASSWORD:
        return PageError(
            "encrypted",
            "open",
            "the PDF needs a password to open, and mineru-cli takes none: decrypt it first (e.g. qpdf --decrypt "
            f"--password=PASSWORD IN OUT) ({exc})",
        )
    if code == pdfium.raw.FPDF_ERR_SECURITY:
        return PageError("encrypted", "open", f"the PDF is encrypted in a way PDFium cannot open ({exc})")
    if code == pdfium.raw.FPDF_ERR_FILE:
        return PageError("unreadable", "open", str(exc))
    return PageError("corrupt", "open", str(exc))


def _decode_error(exc: Exception, stage: str) -> PageError:
    if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        return PageError("too_large", "normalise", str(exc))
    if isinstance(exc, UnidentifiedImageError):
        return PageError("corrupt", stage, "not an image or PDF (content not recognised)")
    if isinstance(exc, MemoryError):  # this process's memory as much as the file: tried again next run
        return PageError("too_large", stage, "out of memory while decoding", transient=True)
    if isinstance(exc, (PermissionError, FileNotFoundError)):
        return os_error(exc, stage)
    if isinstance(exc, ValueError) and "MAX_TEXT_CHUNK" in str(exc):  # Pillow's guard on PNG text chunks
        return PageError(
            "too_large",
            stage,
            "a PNG whose text metadata (a zTXt/iTXt chunk) is larger than Pillow reads, a guard against "
            f"decompression bombs; its pixels may be fine: strip its metadata (e.g. optipng -strip all) ({exc})",
        )
    # Pillow's decoders raise a zoo of types (OSError, SyntaxError, ValueError, EOFError,
    # struct.error, ...) for bad data; all mean the same thing to the record.
    return PageError("corrupt", stage, f"cannot decode image: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def _quiet(log: logging.Logger):
    """Only errors from `log` for a while."""
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _pillow_notes(notes: list[str]):
    """Pillow's warnings while it reads a file (a TIFF's damaged directory shows as "Corrupt
    EXIF data") collected into `notes` for the file's error, not printed on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            yield
        finally:
            notes.extend(str(w.message).strip() for w in caught if issubclass(w.category, UserWarning))


@contextlib.contextmanager
def _pillow_bomb_limit(limit: int | None):
    """Make Pillow's own size checks (GIF frames, TIFF tiles, ...) use our limit and fail
    instead of warn; None turns them off. Process-global state: one thread decodes at a time."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = limit
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def _check_bomb(size: tuple[int, int], limit: int) -> None:
    pixels = size[0] * size[1]
    if pixels > limit:
        raise PageError(
            "too_large",
            "normalise",
            f"image is {size[0]}x{size[1]} = {pixels:,} pixels, over the limit of "
            f"{limit:,} pixels (possible decompression bomb); refused",
        )


def _upright(im: Image.Image) -> tuple[Image.Image, list[str]]:
    """Apply EXIF orientation; a broken EXIF block only costs the rotation."""
    try:
        return ImageOps.exif_transpose(im), []
    except Exception as exc:  # noqa: BLE001 - a bad EXIF tag costs only the rotation
        return im.copy(), [f"EXIF orientation ignored: {exc}"]


# --------------------------------------------------------------------------- normalisation


def _finish_page(
    image: Image.Image, original: tuple[int, int], scale: float, warns: list[str], opts: LoadOptions
) -> Page:
    try:
        rgb = to_rgb8(image)
    except Exception as exc:  # noqa: BLE001 - a converter's failure is this page's error
        raise PageError("unsupported", "normalise", f"cannot convert {image.mode} image to RGB: {exc}") from None
    rgb, factor = _fit_area(rgb, opts.max_page_pixels)
    if factor < 1.0:
        warns.append(
            f"downscaled from {image.width}x{image.height} to {rgb.width}x{rgb.height} "
            f"(max_page_pixels={opts.max_page_pixels:,})"
        )
    return Page(rgb, pixels_sha256(rgb), original, scale * factor, warns)


SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def to_rgb8(im: Image.Image) -> Image.Image:
    """Any Pillow mode -> 8-bit RGB; transparency is flattened onto white."""
    if im.mode in SIXTEEN_BIT_MODES:
        im = _sixteen_to_l(im)
    elif im.mode == "F":
        im = _float_to_l(im)
    if _has_alpha(im):
        rgba = im.convert("RGBA")  # P/L/RGB with a tRNS colour become real alpha here
        return Image.alpha_composite(Image.new("RGBA", rgba.size, WHITE + (255,)), rgba).convert("RGB")
    return im if im.mode == "RGB" else im.convert("RGB")


def _has_alpha(im: Image.Image) -> bool:
    return im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info


def _sixteen_to_l(im: Image.Image) -> Image.Image:
    """A 16-bit (or mode "I", which 16-bit PNG/TIFF also give) grey image -> 8-bit, by the bit
    depth its values actually use. Values within 0..255 are 8-bit data in a 16-bit container
    (what Pillow writes when it converts an 8-bit page to I;16): kept as they are, exactly what
    Pillow's own convert("L") gives and so what MinerU (convert("RGB")) reads; scaled by the
    full 16-bit range they would all be 0 or 1, an all-black page. Deeper data is scaled from
    the smallest bit depth holding its maximum (12-bit scans: 0..4095; 16-bit: 0..65535) onto
    0..255, where Pillow's convert would clip everything above 255 to white."""
    a = np.clip(np.asarray(im).astype(np.int64), 0, 65535)
    peak = int(a.max()) if a.size else 0
    if peak <= 255:
        grey = Image.fromarray(a.astype(np.uint8))
    else:
        full = (1 << peak.bit_length()) - 1
        grey = Image.fromarray(((a * 255 + full // 2) // full).astype(np.uint8))
    return _with_transparent_value(grey, a, im.info.get("transparency"))


def _float_to_l(im: Image.Image) -> Image.Image:
    """A 32-bit float grey image (a float TIFF) -> 8-bit. Float data mostly holds 0..1 (1 white):
    read on 0..255, as Pillow's convert does, such a page is all but black. Values all within
    0..1 are read on that scale, others on 0..255; NaN is black."""
    a = np.nan_to_num(np.asarray(im, dtype=np.float64), nan=0.0, posinf=255.0, neginf=0.0)
    if a.size and a.max() <= 1.0:
        a = a * 255
    return Image.fromarray(np.clip(a, 0, 255).round().astype(np.uint8))


def _with_transparent_value(grey: Image.Image, values: np.ndarray, key) -> Image.Image:
    """A 16-bit grey PNG's tRNS names one value as see-through (its background, mostly): that
    becomes alpha here, for to_rgb8 to put white behind, as it does for 8-bit ones."""
    if not isinstance(key, int):
        return grey
    alpha = Image.fromarray(np.where(values == key, 0, 255).astype(np.uint8))
    return Image.merge("LA", (grey, alpha))


def _white_is_zero(im: Image.Image) -> bool:
    """A 16-bit grey TIFF frame stored WhiteIsZero (PhotometricInterpretation 0: 0 is paper
    white). Pillow inverts such data only up to 8 bits; a 16-bit frame comes as stored, a
    negative of the page."""
    tags = getattr(im, "tag_v2", None)
    return im.format == "TIFF" and im.mode in SIXTEEN_BIT_MODES and tags is not None and tags.get(262) == 0


def _positive(frame: Image.Image) -> Image.Image:
    """A WhiteIsZero frame as 8-bit grey with 0 black: inverted after the bit-depth scaling,
    so a 12-bit scan in 16 bits keeps its whole range."""
    return ImageOps.invert(_sixteen_to_l(frame).convert("L"))


def _fit_area(im: Image.Image, max_pixels: int) -> tuple[Image.Image, float]:
    """Downscale so width*height <= max_pixels, aspect kept; text stays legible
    instead of the engine shrinking an oversized page to nothing."""
    w, h = im.size
    if w * h <= max_pixels:
        return im, 1.0
    factor = math.sqrt(max_pixels / (w * h))
    size = (max(1, math.floor(w * factor)), max(1, math.floor(h * factor)))
    # reducing_gap: a cheap box reduction first, then LANCZOS; quality is indistinguishable.
    return im.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0), size[0] / w
