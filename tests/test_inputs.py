"""inputs.py: discovery, opening by content, normalisation. Files are made at test time."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest
from PIL import Image

from mineru_cli import inputs
from mineru_cli.core.errors import PageError
from mineru_cli.inputs import LoadOptions, SourceFile, discover, open_document, parse_page_ranges

RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


# --------------------------------------------------------------------------- helpers


def png(path: Path, size=(20, 10), color=RED, mode="RGB") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, color).save(path, format="PNG")
    return path


def noise_image(size=(200, 200)) -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def rels(found) -> list[str]:
    return [s.rel for s in found]


def by_rel(found, rel) -> SourceFile:
    return next(s for s in found if s.rel == rel)


def src_for(path: Path) -> SourceFile:
    return SourceFile(path, path.name, "pdf" if path.suffix == ".pdf" else "image")


def load_page(path: Path, index=0, **opts):
    with open_document(src_for(path), LoadOptions(**opts)) as doc:
        return doc.page(index)


def open_error(path: Path, **opts) -> PageError:
    with pytest.raises(PageError) as info:
        with open_document(src_for(path), LoadOptions(**opts)) as doc:
            doc.page(0)
    return info.value


def pdf_with_pages(path: Path, sizes) -> Path:
    pdf = pdfium.PdfDocument.new()
    for w, h in sizes:
        pdf.new_page(w, h).close()
    pdf.save(str(path))
    pdf.close()
    return path


def minimal_pdf(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer_extra, xref)
    return bytes(out)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG header claiming a size, followed by a few bytes of pixel data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + png_chunk(b"IEND", b"")
    )


def close_to(actual, expected, tol=8) -> bool:
    return all(abs(a - e) <= tol for a, e in zip(actual, expected))


# --------------------------------------------------------------------------- discover


def test_walk_is_sorted_recursive_and_filters_extensions(tmp_path):
    for name in ["b.png", "a.PNG", "A.jpg", "sub/c.pdf", "sub/z/d.tiff", "notes.txt", "c.webp", "scan.JP2"]:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    found = discover([tmp_path])
    assert rels(found) == ["A.jpg", "a.PNG", "b.png", "c.webp", "scan.JP2", "sub/c.pdf", "sub/z/d.tiff"]
    assert [s.kind for s in found] == ["image"] * 5 + ["pdf", "image"]
    assert all(s.error is None for s in found)
    assert found[0].path == tmp_path / "A.jpg"  # as discovered, not resolved


def test_hidden_files_and_folders_are_skipped(tmp_path):
    png(tmp_path / "ok.png")
    png(tmp_path / ".hidden.png")
    png(tmp_path / ".git" / "x.png")
    assert rels(discover([tmp_path])) == ["ok.png"]


def test_include_and_exclude_match_rel_or_basename(tmp_path):
    for name in ["a.png", "b.pdf", "drafts/c.png", "drafts/d.pdf"]:
        png(tmp_path / name)
    assert rels(discover([tmp_path], include=["*.pdf"])) == ["b.pdf", "drafts/d.pdf"]
    assert rels(discover([tmp_path], exclude=["drafts/*"])) == ["a.png", "b.pdf"]
    assert rels(discover([tmp_path], include=["*.png"], exclude=["c.png"])) == ["a.png"]


def test_rel_is_relative_to_common_root(tmp_path, monkeypatch):
    png(tmp_path / "a" / "report.pdf")
    png(tmp_path / "b" / "report.pdf")
    png(tmp_path / "examples" / "prose.png")
    monkeypatch.chdir(tmp_path)
    assert rels(discover([Path("a/report.pdf"), Path("b/report.pdf")])) == ["a/report.pdf", "b/report.pdf"]
    assert rels(discover([Path("examples/")])) == ["prose.png"]
    assert rels(discover([Path("examples/prose.png")])) == ["prose.png"]


def test_duplicate_and_overlapping_arguments_are_taken_once(tmp_path):
    png(tmp_path / "d" / "x.png")
    png(tmp_path / "d" / "y.png")
    found = discover([tmp_path / "d", tmp_path / "d", tmp_path / "d" / "x.png", tmp_path / "d/./x.png"])
    assert rels(found) == ["x.png", "y.png"]


def test_symlink_loop_is_skipped_not_walked(tmp_path):
    png(tmp_path / "top.png")
    png(tmp_path / "sub" / "in.png")
    os.symlink("..", tmp_path / "sub" / "up")
    found = discover([tmp_path])
    assert rels(found) == ["sub/in.png", "sub/up", "top.png"]
    loop = by_rel(found, "sub/up")
    assert loop.status == "skipped"
    assert loop.error.kind == "symlink_loop" and loop.error.stage == "discover"


def test_symlinked_folder_and_file_are_followed(tmp_path):
    png(tmp_path / "real" / "x.png")
    os.symlink("real", tmp_path / "alias")
    os.symlink("real/x.png", tmp_path / "link.png")
    found = discover([tmp_path])
    assert rels(found) == ["alias/x.png", "link.png", "real/x.png"]
    assert all(s.error is None for s in found)


def test_dangling_and_self_links_fail(tmp_path):
    os.symlink("missing.png", tmp_path / "dead.png")
    os.symlink("self.png", tmp_path / "self.png")
    os.symlink("missing", tmp_path / "dead_no_ext")  # not a document name: ignored
    found = discover([tmp_path])
    assert rels(found) == ["dead.png", "self.png"]
    assert by_rel(found, "dead.png").error.kind == "not_found"
    assert "missing.png" in by_rel(found, "dead.png").error.message
    assert by_rel(found, "self.png").error.kind == "symlink_loop"
    assert all(s.status == "failed" for s in found)
    # Named explicitly they fail the same way.
    assert discover([tmp_path / "dead.png"])[0].error.kind == "not_found"
    assert discover([tmp_path / "nope.pdf"])[0].error.kind == "not_found"


def test_folder_named_like_document(tmp_path):
    png(tmp_path / "scan.png" / "inner.png")
    found = discover([tmp_path])
    assert rels(found) == ["scan.png"]
    assert found[0].error.kind == "not_a_file"
    assert "directory" in found[0].error.message
    assert rels(discover([tmp_path / "scan.png"])) == ["inner.png"]  # explicit: walked


def test_a_folder_past_path_max_gets_a_record_not_silence(tmp_path):
    """A folder whose path is longer than PATH_MAX cannot be stat'ed: it was dropped without a
    word (only entries with a document name got an error record), so the PNG at the bottom of
    the tree was never mentioned and the run exited 0."""
    png(tmp_path / "top.png")
    name = "d" * 243
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(18):  # 18 x 244 bytes: past Linux's 4096 (made through folder fds)
            os.mkdir(name, dir_fd=fd)
            fd, parent = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
        with open(os.open("deep.png", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as fh:
            Image.new("RGB", (20, 10), RED).save(fh, format="PNG")
    finally:
        os.close(fd)
    found = discover([tmp_path])
    assert rels(found)[-1] == "top.png"
    [deep] = found[:-1]  # the first folder the walk cannot reach, and nothing below it
    assert deep.status == "failed" and deep.error.kind == "unreadable" and deep.error.stage == "discover"
    assert set(deep.rel.split("/")) == {name} and len(str(tmp_path / deep.rel)) > 4095
    assert "folder" in deep.error.message and "too long" in deep.error.message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_reported_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.png")
    os.mkfifo(tmp_path / "pipe")
    found = discover([tmp_path])
    assert rels(found) == ["pipe.png"]
    assert found[0].error.kind == "not_a_file" and "FIFO" in found[0].error.message
    explicit = discover([tmp_path / "pipe"])
    assert explicit[0].error.kind == "not_a_file"
    # Even handed straight to open_document it is refused without blocking.
    with pytest.raises(PageError) as info:
        open_document(src_for(tmp_path / "pipe.png"), LoadOptions())
    assert info.value.kind == "not_a_file"


def test_explicit_file_of_unknown_type(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    png(tmp_path / "scan_without_ext")
    found = discover([tmp_path / "notes.txt", tmp_path / "scan_without_ext"])
    assert found[0].status == "failed" and found[0].error.kind == "unsupported"
    assert found[1].error is None and found[1].kind == "image"


# --------------------------------------------------------------------------- small helpers


def test_parse_page_ranges():
    assert parse_page_ranges(None) is None
    want = parse_page_ranges("1-3, 7")
    assert [n for n in range(1, 11) if want(n)] == [1, 2, 3, 7]  # predicate takes 1-based numbers
    open_end = parse_page_ranges("4-")
    assert [n for n in range(1, 7) if open_end(n)] == [4, 5, 6]
    for bad in ["", "0", "3-1", "a", "1-2-3", "1,,2", "-2"]:
        with pytest.raises(ValueError):
            parse_page_ranges(bad)


def test_file_and_pixel_hashes(tmp_path):
    a = png(tmp_path / "a.png", color=BLUE)
    b = tmp_path / "b.bmp"
    Image.open(a).save(b)  # lossless re-save in another format
    assert inputs.file_sha256(a) != inputs.file_sha256(b)
    assert load_page(a).sha256 == load_page(b).sha256
    assert load_page(a).sha256 != load_page(png(tmp_path / "c.png", color=GREEN)).sha256


# --------------------------------------------------------------------------- opening images


def test_empty_file(tmp_path):
    (tmp_path / "e.png").write_bytes(b"")
    assert open_error(tmp_path / "e.png").kind == "empty"


def test_text_named_png_is_corrupt(tmp_path):
    (tmp_path / "t.png").write_text("not really an image\n" * 10)
    err = open_error(tmp_path / "t.png")
    assert (err.kind, err.stage) == ("corrupt", "open")
    assert "not an image" in err.message


@pytest.mark.parametrize("fmt,name", [("PNG", "cut.png"), ("JPEG", "cut.jpg")])
def test_truncated_image_is_corrupt(tmp_path, fmt, name):
    path = tmp_path / name
    noise_image().save(path, format=fmt)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert open_error(path).kind == "corrupt"


def test_png_named_jpg_works(tmp_path):
    path = png(tmp_path / "really_png.jpg", color=GREEN)
    page = load_page(path)
    assert page.image.getpixel((0, 0)) == GREEN and page.scale == 1.0


def test_unreadable_file(tmp_path, monkeypatch):
    path = png(tmp_path / "locked.png")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(args[0]))

    # Tests run as root, where chmod 000 does not stop reads: refuse inside inputs only.
    monkeypatch.setattr(inputs, "open", denied, raising=False)
    err = open_error(path)
    assert (err.kind, err.stage) == ("unreadable", "open")


def test_multi_frame_tiff_gives_every_frame(tmp_path):
    path = tmp_path / "scan.tif"
    frames = [Image.new("RGB", (30, 20), c) for c in (RED, GREEN, BLUE)]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    with open_document(src_for(path), LoadOptions()) as doc:
        assert doc.page_count == 3
        assert [doc.page(i).image.getpixel((5, 5)) for i in range(3)] == [RED, GREEN, BLUE]
        with pytest.raises(IndexError):
            doc.page(3)


def test_a_tiff_damaged_after_its_first_frames_keeps_them(tmp_path):
    """Pillow's frame count fails for the whole file (TypeError: Missing dimensions) where a
    directory further on is damaged: the file failed whole, in Pillow's words. Its frames up to
    the damage are pages now, and the damaged one is a page that fails in a TIFF's words."""
    frames = [Image.new("RGB", (200, 200), c) for c in (RED, GREEN, BLUE, (9, 9, 9))]
    buf = io.BytesIO()
    frames[0].save(buf, format="TIFF", save_all=True, append_images=frames[1:])
    cut = tmp_path / "cut.tif"
    cut.write_bytes(buf.getvalue()[: len(buf.getvalue()) * 5 // 8])  # frames 1-2 whole
    with open_document(src_for(cut), LoadOptions()) as doc:
        assert doc.page_count >= 3
        assert [doc.page(i).image.getpixel((5, 5)) for i in range(2)] == [RED, GREEN]
        with pytest.raises(PageError) as damaged:
            doc.page(doc.page_count - 1)
    assert damaged.value.kind == "corrupt" and "of this TIFF cannot be decoded" in damaged.value.message
    # one frame whose pointer to the next directory points far past the end of the file
    one = io.BytesIO()
    frames[0].save(one, format="TIFF")
    data = bytearray(one.getvalue())
    ifd = struct.unpack("<I", data[4:8])[0]
    entries = struct.unpack("<H", data[ifd : ifd + 2])[0]
    data[ifd + 2 + 12 * entries : ifd + 6 + 12 * entries] = struct.pack("<I", 0xFFFFFFF0)
    far = tmp_path / "far.tif"
    far.write_bytes(bytes(data))
    with open_document(src_for(far), LoadOptions()) as doc:
        assert doc.page_count == 2 and doc.page(0).image.getpixel((5, 5)) == RED
        with pytest.raises(PageError) as damaged:
            doc.page(1)
    assert damaged.value.message.startswith("page 2 of this TIFF cannot be decoded")


def test_a_png_with_a_huge_text_chunk_says_so(tmp_path):
    """Pillow refuses a PNG whose zTXt chunk inflates past its limit (a guard against bombs):
    that is said as what it is, not as an image that cannot be decoded."""
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "a" * (3 * 1024 * 1024), zip=True)  # 3 KB on disk
    Image.new("RGB", (40, 30), "white").save(tmp_path / "meta.png", pnginfo=info)
    err = open_error(tmp_path / "meta.png")
    assert err.kind == "too_large"
    assert err.message.startswith("a PNG whose text metadata (a zTXt/iTXt chunk) is larger than Pillow reads")


def test_gif_first_or_all_frames(tmp_path):
    path = tmp_path / "anim.gif"
    frames = [Image.new("RGB", (16, 16), c) for c in (RED, GREEN, BLUE)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100)
    with open_document(src_for(path), LoadOptions()) as doc:
        assert doc.page_count == 1
        assert doc.page(0).image.getpixel((0, 0)) == RED
    with open_document(src_for(path), LoadOptions(gif_frames="all")) as doc:
        assert doc.page_count == 3
        assert [doc.page(i).image.getpixel((8, 8)) for i in range(3)] == [RED, GREEN, BLUE]


def test_a_file_s_kind_is_its_content_s_and_a_file_that_fails_its_name_s(tmp_path):
    """The kind picks the load options in its pages' fingerprint: a PDF named .png is rendered at
    --dpi, a GIF named .png has --gif-frames; a file that does not open is what its name says."""
    from mineru_cli.config import FileKind
    from mineru_cli.planner import plan_file

    pdf = pdf_with_pages(tmp_path / "scan.png", [(72, 72)])
    gif = tmp_path / "anim.png"
    Image.new("RGB", (16, 16), RED).save(gif, format="GIF")
    tif = tmp_path / "pages.tif"
    Image.new("RGB", (16, 16), RED).save(tif)
    for path, kind in [(pdf, FileKind.PDF), (gif, FileKind.GIF), (tif, FileKind.IMAGE)]:
        assert plan_file(src_for(path), None, LoadOptions()).kind is kind, path
    for name, kind in [("bad.gif", FileKind.GIF), ("bad.pdf", FileKind.PDF), ("bad.jpg", FileKind.IMAGE)]:
        (tmp_path / name).write_bytes(b"not a document")
        planned = plan_file(src_for(tmp_path / name), None, LoadOptions())
        assert planned.error is not None and planned.kind is kind, name


def test_animated_png_gives_first_frame(tmp_path):
    path = tmp_path / "anim.png"
    frames = [Image.new("RGB", (16, 16), c) for c in (BLUE, RED)]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    with open_document(src_for(path), LoadOptions()) as doc:
        assert doc.page_count == 1
        assert doc.page(0).image.getpixel((0, 0)) == BLUE


# --------------------------------------------------------------------------- normalisation


def test_exif_rotated_jpeg_comes_out_upright(tmp_path):
    stored = Image.new("RGB", (40, 20), RED)
    stored.paste(BLUE, (0, 10, 40, 20))  # red top half, blue bottom half as stored
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    path = tmp_path / "phone.jpg"
    stored.save(path, exif=exif, quality=95)
    page = load_page(path)
    assert page.image.size == (20, 40) and page.original_size == (20, 40)
    assert close_to(page.image.getpixel((15, 20)), RED)  # the stored top is now on the right
    assert close_to(page.image.getpixel((4, 20)), BLUE)


def test_rgba_is_flattened_onto_white(tmp_path):
    im = Image.new("RGBA", (4, 1), (0, 0, 0, 0))
    im.putpixel((1, 0), (255, 0, 0, 255))
    im.putpixel((2, 0), (255, 0, 0, 128))
    im.save(tmp_path / "a.png")
    page = load_page(tmp_path / "a.png")
    assert page.image.mode == "RGB"
    assert page.image.getpixel((0, 0)) == WHITE
    assert page.image.getpixel((1, 0)) == RED
    assert close_to(page.image.getpixel((2, 0)), (255, 127, 127), tol=2)


def test_la_and_palette_transparency_flattened(tmp_path):
    Image.new("LA", (2, 2), (0, 0)).save(tmp_path / "la.png")
    assert load_page(tmp_path / "la.png").image.getpixel((0, 0)) == WHITE
    p = Image.new("P", (2, 1))
    p.putpalette([0, 0, 0, 0, 0, 255] + [0] * 762)
    p.putpixel((1, 0), 1)
    p.save(tmp_path / "p.png", transparency=0)
    page = load_page(tmp_path / "p.png")
    assert page.image.getpixel((0, 0)) == WHITE and page.image.getpixel((1, 0)) == BLUE


@pytest.mark.parametrize(
    "mode,color,name,expected",
    [
        ("P", None, "p.png", (0, 0, 255)),
        ("CMYK", (255, 0, 0, 0), "c.tif", (0, 255, 255)),
        ("CMYK", (0, 0, 0, 0), "w.jpg", WHITE),
        ("L", 100, "l.png", (100, 100, 100)),
        ("1", 1, "one.png", WHITE),
        ("1", 0, "zero.bmp", (0, 0, 0)),
    ],
)
def test_modes_become_8bit_rgb(tmp_path, mode, color, name, expected):
    if mode == "P":
        im = Image.new("P", (8, 8), 1)
        im.putpalette([0, 0, 0, 0, 0, 255] + [0] * 762)
    else:
        im = Image.new(mode, (8, 8), color)
    im.save(tmp_path / name)
    page = load_page(tmp_path / name)
    assert page.image.mode == "RGB"
    assert close_to(page.image.getpixel((4, 4)), expected, tol=2)


def test_a_jpeg_2000_scan_is_a_page(tmp_path):
    """JPEG 2000 (.jp2), as archives keep scans and MinerU takes them, is found in a folder and
    decoded (Pillow's OpenJPEG)."""
    im = Image.new("RGB", (64, 48), (250, 250, 250))
    im.paste((20, 20, 20), (8, 8, 40, 16))
    im.save(tmp_path / "scan.jp2", quality_mode="dB", quality_layers=[60])
    [src] = discover([tmp_path])
    page = load_page(src.path)
    assert page.image.size == (64, 48)
    assert close_to(page.image.getpixel((20, 12)), (20, 20, 20), tol=12)
    assert close_to(page.image.getpixel((50, 40)), (250, 250, 250), tol=12)


def test_16_bit_is_scaled_not_clipped(tmp_path):
    values = np.array([[0, 32768, 65535, 1000]], dtype=np.uint16)
    Image.fromarray(values).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    px = [load_page(tmp_path / "deep.png").image.getpixel((x, 0))[0] for x in range(4)]
    assert px == [0, 128, 255, 4]  # a clipping convert would give [0, 255, 255, 255]
    as_i = Image.fromarray(values.astype(np.int32))  # mode "I"
    assert inputs.to_rgb8(as_i).getpixel((2, 0)) == WHITE


def _text_page_l() -> Image.Image:
    """An 8-bit grey page with dark text and grey levels across the whole 0..255 range."""
    from PIL import ImageDraw, ImageFont

    page = Image.new("L", (400, 120), 255)
    draw = ImageDraw.Draw(page)
    draw.text((10, 10), "Sixteen-bit page 42", fill=0, font=ImageFont.load_default(size=28))
    page.paste(Image.linear_gradient("L").resize((380, 40)), (10, 70))
    return page


def test_16_bit_holding_8_bit_values_reads_as_the_8_bit_page(tmp_path):
    # What Pillow writes when it converts an 8-bit page to I;16: the values stay 0..255.
    # Read by the 16-bit range they would all be 0 or 1 (an all-black page); Pillow's own
    # convert("L") and MinerU (convert("RGB")) keep them, and so does the normalisation.
    page = _text_page_l()
    page.convert("I;16").save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode == "I;16"
    loaded = load_page(tmp_path / "deep.png").image
    assert loaded.tobytes() == page.convert("RGB").tobytes()
    for mode in ("I;16", "I"):
        assert inputs.to_rgb8(page.convert(mode)).tobytes() == page.convert("RGB").tobytes()


def test_16_bit_is_scaled_by_the_bit_depth_its_values_use():
    # 12-bit data (0..4095, a scanner's or camera's) spans the page's range, as 16-bit does
    twelve = Image.fromarray(np.array([[0, 2048, 4095, 300]], dtype=np.uint16))
    assert [inputs.to_rgb8(twelve).getpixel((x, 0))[0] for x in range(4)] == [0, 128, 255, 19]
    sixteen = Image.fromarray(np.array([[0, 32768, 65535, 300]], dtype=np.uint16))
    assert [inputs.to_rgb8(sixteen).getpixel((x, 0))[0] for x in range(4)] == [0, 128, 255, 1]


def test_a_16_bit_grey_png_with_a_transparent_value_gets_white_behind_it(tmp_path):
    # tRNS names the see-through grey value (here the background, 0): a viewer shows white
    # there, as the normalisation does for 8-bit grey, palette and alpha images
    values = np.where(np.asarray(_text_page_l()) < 128, 20000, 0).astype(np.uint16)
    Image.fromarray(values).save(tmp_path / "logo.png", transparency=0)
    with Image.open(tmp_path / "logo.png") as saved:
        assert (saved.mode, saved.info.get("transparency")) == ("I;16", 0)
    grey = np.asarray(load_page(tmp_path / "logo.png").image.convert("L"))
    assert (grey[values == 0] == 255).all()
    assert (grey[values == 20000] < 255).all()  # the ink stays ink


def test_a_16_bit_white_is_zero_tiff_is_not_a_negative(tmp_path):
    # PhotometricInterpretation 0 (WhiteIsZero): 0 is paper white. Pillow inverts such data
    # up to 8 bits and reads a 16-bit frame as stored; both must give the page itself
    page = _text_page_l()
    stored = (255 - np.asarray(page).astype(np.uint16)) * 257
    Image.fromarray(stored).save(tmp_path / "scan16.tif", tiffinfo={262: 0})
    page.save(tmp_path / "scan8.tif", tiffinfo={262: 0})
    for name in ("scan16.tif", "scan8.tif"):
        with Image.open(tmp_path / name) as saved:
            assert saved.tag_v2[262] == 0
        assert load_page(tmp_path / name).image.tobytes() == page.convert("RGB").tobytes(), name


def test_a_float_tiff_reads_on_the_scale_its_values_use(tmp_path):
    # 32-bit float data mostly holds 0..1 (1 white); read on 0..255 that page was all but black
    page = _text_page_l()
    values = np.asarray(page).astype(np.float32)
    Image.fromarray(values / 255, mode="F").save(tmp_path / "unit.tif")
    Image.fromarray(values, mode="F").save(tmp_path / "bytes.tif")
    for name in ("unit.tif", "bytes.tif"):
        with Image.open(tmp_path / name) as saved:
            assert saved.mode == "F"
        assert load_page(tmp_path / name).image.tobytes() == page.convert("RGB").tobytes(), name


def test_8_bit_inputs_are_untouched_by_the_16_bit_rule(tmp_path):
    page = _text_page_l()
    page.save(tmp_path / "grey.png")
    assert load_page(tmp_path / "grey.png").image.tobytes() == page.convert("RGB").tobytes()


def test_bomb_limit_refuses_before_decoding(tmp_path):
    path = png(tmp_path / "big.png", size=(30, 20))
    err = open_error(path, bomb_pixels=500)
    assert (err.kind, err.stage) == ("too_large", "normalise")
    assert "30x20" in err.message and "600" in err.message and "500" in err.message
    # A header that claims 100000 x 100000 with no pixel data: refused by size,
    # never decoded (decoding would report "corrupt").
    (tmp_path / "claims.png").write_bytes(png_header_only(100_000, 100_000))
    err = open_error(tmp_path / "claims.png")
    assert err.kind == "too_large" and "100000x100000" in err.message


def test_huge_page_is_downscaled_by_area(tmp_path):
    path = png(tmp_path / "wide.png", size=(400, 100))
    page = load_page(path, max_page_pixels=10_000)
    assert page.image.size == (200, 50)
    assert page.original_size == (400, 100) and page.scale == 0.5
    assert any("downscaled" in w for w in page.warnings)
    assert load_page(path).scale == 1.0 and load_page(path).warnings == []


# --------------------------------------------------------------------------- PDFs


def test_pdf_page_count_and_200_dpi(tmp_path):
    path = pdf_with_pages(tmp_path / "doc.pdf", [(72, 144), (144, 72), (36, 36)])
    with open_document(src_for(path), LoadOptions()) as doc:
        assert doc.page_count == 3
        page = doc.page(1)
    assert page.image.size == (400, 200) and page.image.mode == "RGB"
    assert page.original_size == (400, 200) and page.scale == 1.0
    assert page.image.getpixel((10, 10)) == WHITE
    want = parse_page_ranges("1,3")
    assert [i for i in range(doc.page_count) if want(i + 1)] == [0, 2]  # as the runner selects


def test_pdf_sniffed_by_content(tmp_path):
    path = pdf_with_pages(tmp_path / "doc.pdf", [(72, 72)])
    disguised = tmp_path / "scan.png"
    path.rename(disguised)
    assert load_page(disguised).image.size == (200, 200)


def test_pdf_long_side_capped_like_mineru(tmp_path):
    path = pdf_with_pages(tmp_path / "poster.pdf", [(2520, 1260)])  # 35 x 17.5 inches
    page = load_page(path)
    assert page.image.size == (3500, 1750)
    assert page.original_size == (7000, 3500)
    assert page.scale == pytest.approx(0.5)
    assert page.warnings


def test_corrupt_pdf(tmp_path):
    (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body\n")
    err = open_error(tmp_path / "bad.pdf")
    assert (err.kind, err.stage) == ("corrupt", "open")
    assert "PDFium" in err.message


def test_a_pdf_without_pages_is_empty_and_says_so(tmp_path):
    """A well-formed PDF with no pages was `corrupt`, "Failed to load document (PDFium: Success)"."""
    pdf = pdfium.PdfDocument.new()
    pdf.save(tmp_path / "none.pdf")
    pdf.close()
    err = open_error(tmp_path / "none.pdf")
    assert (err.kind, err.stage, err.message) == ("empty", "open", "the PDF has no pages")


def test_encrypted_pdf(tmp_path):
    # A standard-security dictionary whose password hashes match no password:
    # pdfium refuses it as it would a real user-password PDF.
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>",
        b"<< /Filter /Standard /V 1 /R 2 /O <" + b"ab" * 32 + b"> /U <" + b"cd" * 32 + b"> /P -4 >>",
    ]
    trailer = b"/Encrypt 4 0 R /ID [<" + b"00" * 16 + b"><" + b"00" * 16 + b">] "
    (tmp_path / "locked.pdf").write_bytes(minimal_pdf(objects, trailer))
    (tmp_path / "open.pdf").write_bytes(minimal_pdf(objects[:3]))
    err = open_error(tmp_path / "locked.pdf")
    assert err.kind == "encrypted"
    assert err.message.startswith("the PDF needs a password to open, and mineru-cli takes none: decrypt it first")
    assert load_page(tmp_path / "open.pdf").image.size == (278, 278)


def test_a_crop_box_outside_the_media_box_renders_the_media_box(tmp_path):
    # pdfium makes such a page 0 x 0 and refuses to render it; viewers show the MediaBox
    ink = b"0 g 20 20 60 60 re f"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /CropBox [300 300 400 400] /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ink), ink),
    ]
    (tmp_path / "cropped.pdf").write_bytes(minimal_pdf(objects))
    page = load_page(tmp_path / "cropped.pdf", dpi=72)
    assert page.image.size == (200, 100)
    grey = np.asarray(page.image.convert("L"))
    assert grey[100 - 50, 50] == 0 and grey[100 - 90, 150] == 255  # the square, drawn upright; paper around it
    assert any("CropBox" in w and "MediaBox" in w for w in page.warnings)


def test_pdf_original_size_matches_uncapped_render(tmp_path):
    path = pdf_with_pages(tmp_path / "a4.pdf", [(595.276, 841.89)])
    page = load_page(path)
    assert page.original_size == page.image.size == (1654, 2339)


def _without_app14(jpeg: bytes) -> bytes:
    """The JPEG with its Adobe APP14 segment (which marks CMYK data as stored inverted) cut out."""
    out, i = bytearray(jpeg[:2]), 2
    while jpeg[i + 1] != 0xDA:  # segments up to the scan
        length = struct.unpack(">H", jpeg[i + 2 : i + 4])[0]
        if jpeg[i + 1] != 0xEE:
            out += jpeg[i : i + 2 + length]
        i += 2 + length
    return bytes(out + jpeg[i:])


def test_a_cmyk_jpeg_without_an_adobe_marker_is_read_as_chromium_shows_it(tmp_path):
    """CMYK JPEGs are stored inverted (Photoshop's convention, which Pillow writes); one whose
    APP14 marker was dropped is still shown that way by Chromium (and decoded so by OpenCV):
    a page, not its negative. A page of a real PDF stands in for the scan."""
    pdf = pdfium.PdfDocument(str(Path(__file__).parent / "data" / "title_r_intro_p1.pdf"))
    rgb = pdf[0].render(scale=50 / 72).to_pil().convert("RGB")
    pdf.close()
    buf = io.BytesIO()
    rgb.convert("CMYK").save(buf, "JPEG", quality=95)
    assert b"Adobe" in buf.getvalue()
    path = tmp_path / "scan.jpg"
    path.write_bytes(_without_app14(buf.getvalue()))
    assert "adobe" not in Image.open(path).info
    page = np.asarray(load_page(path).image, dtype=np.int16)
    assert np.abs(page - np.asarray(rgb, dtype=np.int16)).mean() < 4  # a negative is ~200 off


def test_a_pdf_page_with_a_user_unit_renders_as_pdfium_and_poppler_show_it(tmp_path):
    """/UserUnit (PDF 1.6: a page unit of N/72 in) is not applied by pdfium, poppler's pdftoppm
    or Chromium: the page renders at its size in 1/72 in, so a huge unit costs no memory."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /UserUnit 75000 /Contents 4 0 R >>"
    draw = b"0 g 72 648 144 72 re f"  # a black band an inch from the top-left corner
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        page,
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(draw), draw),
    ]
    path = tmp_path / "unit.pdf"
    path.write_bytes(minimal_pdf(objects))
    rendered = load_page(path)
    assert rendered.image.size == (1700, 2200) and rendered.scale == 1.0  # 8.5 x 11 in at 200 DPI
    assert rendered.image.getpixel((250, 250)) == (0, 0, 0) and rendered.image.getpixel((100, 100)) == WHITE


def test_a_whole_tiff_in_a_compression_pillow_lacks_is_not_called_damaged(tmp_path):
    """A scan whose TIFF is whole but compressed in a scheme Pillow cannot decode (JPEG 2000 in
    TIFF, code 34712, as archives write) was "a TIFF file whose image file directory is damaged;
    get the file again", which a download again does not help: it says which compression and to
    convert the file."""
    scan = bytearray((Path(__file__).parent / "data" / "scan_ragged2e_p1.tif").read_bytes())
    ifd = struct.unpack("<I", scan[4:8])[0]
    (count,) = struct.unpack("<H", scan[ifd : ifd + 2])
    entries = [ifd + 2 + 12 * k for k in range(count)]
    at = next(e for e in entries if struct.unpack("<H", scan[e : e + 2])[0] == 259)  # its compression
    scan[at + 8 : at + 10] = struct.pack("<H", 34712)
    (tmp_path / "jp2k.tif").write_bytes(bytes(scan))
    error = open_error(tmp_path / "jp2k.tif")
    assert error.kind == "unsupported", error
    assert "compression 34712" in str(error) and "convert it" in str(error)
    assert "damaged" not in str(error) and "get the file again" not in str(error)
