"""Synthetic pages for the cache tests and benchmark (scripts/bench_cache.py): look-alikes and
re-encodings.

Look-alikes differ in one number or one word, which no global perceptual hash
sees; re-encodings are the same page after JPEG, rescaling or a PNG re-save.
The prose, invoice and slide pages are the exporter's calibration generators (one copy).
Text uses Pillow's built-in font so the pages are identical on every machine.
"""

from __future__ import annotations

import io

from PIL import Image, ImageDraw

from mineru_cli.export.calibration import WORDS, _font, invoice, slide, text_page  # noqa: F401  (the page kinds)


def amount_page(amount: str, seed: int = 5, width: int = 1000, height: int = 1300, size: int = 14) -> Image.Image:
    """A prose page in small type with one line "Amount due: <amount> EUR" (halfway down)."""
    img = text_page(seed, width, height, size)
    d = ImageDraw.Draw(img)
    y = height // 2 - 50
    d.rectangle((60, y, width - 60, y + size + 6), fill="white")
    d.text((60, y), f"Amount due: {amount} EUR", fill="black", font=_font(size))
    return img


def colour_slide(
    value: str, fg=(230, 30, 30), bg=(0, 70, 160), width: int = 1280, height: int = 720, size: int = 28
) -> Image.Image:
    """A slide of coloured text on a coloured background; only `value` varies. Text whose colour
    differs from the background more than its brightness does is faint in grayscale."""
    img = Image.new("RGB", (width, height), bg)
    d = ImageDraw.Draw(img)
    d.text((60, 60), "Quarterly update", fill=fg, font=_font(48))
    for i, line in enumerate(
        ["Revenue grew in every region", f"Users grew to {value} million", "Margins stable", "Next: expand the pilot"]
    ):
        d.text((80, 180 + i * 70), line, fill=fg, font=_font(size))
    return img


def footnote_page(base: Image.Image, amount: str, size: int) -> Image.Image:
    """`base` with a footnote "Note 3: total <amount> EUR" in type of `size` px near its bottom."""
    img = base.copy()
    d = ImageDraw.Draw(img)
    d.rectangle((60, img.height - 60, 600, img.height - 20), fill="white")
    d.text((60, img.height - 50), f"Note 3: total {amount} EUR", fill="black", font=_font(size))
    return img


def chart_slide(price: str, size: int = 8, width: int = 1280, height: int = 720) -> Image.Image:
    """A slide of 16 large coloured bars with one line of small print, "Price <price> EUR": the
    page's median glyph is large, the line that decides is not."""
    img = Image.new("RGB", (width, height), (250, 250, 245))
    d = ImageDraw.Draw(img)
    for i in range(16):
        x, y = 60 + (i % 8) * 140, 80 + (i // 8) * 200
        d.rectangle((x, y, x + 100, y + 60 + 10 * (i % 5)), fill=(30 + 20 * (i % 7), 90, 160))
    d.text((60, height - 60), f"Price {price} EUR", fill="black", font=_font(size))
    return img


def secondary_text_page(amount: str, fill=(170, 170, 170), size: int = 18) -> Image.Image:
    """The invoice with its total line in low-contrast type of colour `fill` (#AAA: a common
    colour of secondary text), at body size."""
    img = invoice("1,234.50")
    d = ImageDraw.Draw(img)
    d.rectangle((60, 676, 940, 740), fill="white")
    d.text((60, 680), f"Total due: {amount}", fill=fill, font=_font(size))
    return img


def dark_mode_page(amount: str, fill: int = 120) -> Image.Image:
    """A dark-mode screen: light body text on near black, one line in a dimmer gray."""
    img = Image.new("RGB", (1280, 800), (30, 30, 30))
    d = ImageDraw.Draw(img)
    for i in range(8):
        d.text((60, 60 + 60 * i), f"Dark mode body line number {i} with some words", fill=(230,) * 3, font=_font(20))
    d.text((60, 600), f"Pending: {amount} EUR", fill=(fill,) * 3, font=_font(20))
    return img


def vertical_note_page(amount: str, fill=(150, 150, 150), size: int = 16) -> Image.Image:
    """A prose page with a note set vertically in its left margin (as arXiv stamps are)."""
    img = text_page(3)
    strip = Image.new("RGB", (700, size + 6), "white")
    ImageDraw.Draw(strip).text((0, 0), f"Ref: total {amount} EUR", fill=fill, font=_font(size))
    img.paste(strip.rotate(90, expand=True), (15, 300))
    return img


# Pairs that must never share a result: (page_a, page_b, what differs).
def lookalike_pairs() -> list[tuple[Image.Image, Image.Image, str]]:
    pairs = []
    for a, b in [
        ("1,234.50", "1,284.50"),
        ("1,234.50", "1,234.58"),
        ("7,310.00", "1,310.00"),
        ("5,600.00", "6,600.00"),
        ("9,999.99", "9,999.90"),
        ("3,141.59", "8,141.59"),
    ]:
        pairs.append((invoice(a), invoice(b), f"invoice {a} vs {b}"))
    for a, b in [("higher", "lower"), ("better", "worse"), ("much", "mush")]:
        pairs.append((slide(a), slide(b), f"slide {a} vs {b}"))
    for a, b in [("5,600", "6,600"), ("9.99", "9.90"), ("3.14", "8.14"), ("1.50", "7.50")]:
        pairs.append((amount_page(a), amount_page(b), f"14px text {a} vs {b}"))
    pairs.append(
        (amount_page("5,600", 11, 1654, 2339, 28), amount_page("6,600", 11, 1654, 2339, 28), "A4 200dpi 5,600 vs 6,600")
    )
    # small print on an A4 page at 200 DPI: 8 pt (22 px) and 6 pt (17 px)
    for a, b, size in [
        ("3141.50", "3141,50", 22),
        ("1,500.00", "1.500.00", 22),
        ("5,600", "6,600", 17),
        ("3141.50", "3141,50", 17),
    ]:
        pairs.append(
            (
                amount_page(a, 11, 1654, 2339, size),
                amount_page(b, 11, 1654, 2339, size),
                f"A4 200dpi {size}px {a} vs {b}",
            )
        )
    # coloured text: red on blue, orange on a gray of the same brightness, green on red
    for a, b, fg, bg in [
        ("4.2", "9.7", (230, 30, 30), (0, 70, 160)),
        ("100,000", "900,000", (255, 88, 0), (128, 128, 128)),
        ("12", "72", (0, 160, 0), (200, 30, 30)),
    ]:
        pairs.append((colour_slide(a, fg, bg), colour_slide(b, fg, bg), f"colour slide {fg} on {bg} {a} vs {b}"))
    # low contrast at body size: light-gray and pink text on white, dimmed text in dark mode, a
    # vertical note in the margin (a review's pairs; a fixed luma threshold let all of them through)
    for fill in [(150, 150, 150), (170, 170, 170), (200, 200, 200), (215, 215, 215), (230, 150, 150)]:
        pairs.append(
            (
                secondary_text_page("5,600.00", fill),
                secondary_text_page("6,600.00", fill),
                f"text in {fill} 5,600.00 vs 6,600.00",
            )
        )
    pairs.append(
        (dark_mode_page("5,600.00"), dark_mode_page("6,600.00"), "dark mode, gray 120 on 30: 5,600.00 vs 6,600.00")
    )
    pairs.append((vertical_note_page("5,600"), vertical_note_page("6,600"), "vertical gray note 5,600 vs 6,600"))
    return pairs


def long_screenshot(amount: str) -> Image.Image:
    """A 1080 x 8000 phone screenshot of prose with one amount: too long for its text to stay
    legible in a verification thumbnail, so it may only ever hit exactly."""
    return amount_page(amount, 3, 1080, 8000, 28)


# Re-encodings that must reuse the result (each is a function of the page).
def jpeg(img: Image.Image, quality: int = 70) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def rescale(img: Image.Image, factor: float = 0.95) -> Image.Image:
    return img.resize((round(img.width * factor), round(img.height * factor)), Image.Resampling.LANCZOS)


def png_resave(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "PNG", optimize=True, pnginfo=None)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


REENCODINGS = {
    "jpeg-q70": jpeg,
    "rescale-95": rescale,
    "png-resave": png_resave,
    "rescale-95+jpeg-q70": lambda im: jpeg(rescale(im)),
}
