"""The calibration pages of `mineru export --bias-correction`: rendered prose, invoice and slide
pages at crop-like sizes, each with the prompt MinerU sends for such a page.

The page generators are the exporter's own, not shared with the cache tests' synthetic pages:
these pages decide the bias-corrected weights, so they change only with the exporter. Text uses
Pillow's built-in font, so the pages are identical on every machine.
"""

from __future__ import annotations

import random

from PIL import Image, ImageDraw, ImageFont

from ..vlm.protocol.chat import LAYOUT_PROMPT, TABLE_PROMPT, TEXT_PROMPT

CALIBRATION_SIZES = ((448, 448), (336, 672), (560, 420))  # crop-like: 1,024 / 1,152 / 1,200 patches
WORDS = (
    "the of and to in is for on that with as by this are from at be or an it "
    "revenue quarter model page table figure result method data cache layout "
    "document parser engine block text image value total report analysis"
).split()


def calibration_pages(samples: int) -> list[tuple[Image.Image, str]]:
    """(image, prompt) pairs: prose, invoice and slide pages in turn, each turn with new content
    and the sizes shifted, with MinerU's prompt for each."""
    words = ("higher", "lower", "better", "worse")  # slide(): "Margins were {word} than planned"
    out = []
    for i in range(samples):
        kind, turn = i % 3, i // 3
        page = (text_page(7 + turn), invoice(f"{1284.50 + 731.25 * turn:,.2f}"), slide(words[turn % len(words)]))[kind]
        size = CALIBRATION_SIZES[(kind + turn) % len(CALIBRATION_SIZES)]
        out.append((page.resize(size, Image.Resampling.BICUBIC), (TEXT_PROMPT, TABLE_PROMPT, LAYOUT_PROMPT)[kind]))
    return out


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def text_page(seed: int, width: int = 1000, height: int = 1300, size: int = 18) -> Image.Image:
    """A page of random prose with a title; different seeds give different pages."""
    rng = random.Random(seed)
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    d.text(
        (60, 50), f"Section {seed}: " + " ".join(rng.choices(WORDS, k=4)).title(), fill="black", font=_font(size + 14)
    )
    y, f = 120, _font(size)
    while y < height - 80:
        d.text((60, y), " ".join(rng.choices(WORDS, k=rng.randint(9, 12))), fill=(20, 20, 20), font=f)
        y += size + 10
        if rng.random() < 0.12:
            y += size
    return img


def invoice(amount: str, width: int = 1000, height: int = 1300, size: int = 18) -> Image.Image:
    """An invoice whose only variable is the total `amount`."""
    img = Image.new("RGB", (width, height), "white")
    d = ImageDraw.Draw(img)
    d.text((60, 50), "INVOICE No. 2024-0042", fill="black", font=_font(32))
    f = _font(size)
    for i, line in enumerate(
        ["ACME Corp, 1 Main Street, Springfield", "Customer: Globex Ltd", "Date: 2024-03-14   Due: 2024-04-13"]
    ):
        d.text((60, 110 + i * 28), line, fill="black", font=f)
    d.rectangle((60, 220, width - 60, 640), outline="black", width=2)
    for i in range(10):
        y = 240 + i * 38
        d.text((80, y), f"Item {i + 1}: consulting services, phase {i + 1}", fill="black", font=f)
        d.text((width - 220, y), f"{(i + 3) * 117}.00", fill="black", font=f)
    d.text((width - 420, 680), "Total due:", fill="black", font=_font(size + 2))
    d.text((width - 240, 680), amount, fill="black", font=_font(size + 2))
    d.text(
        (60, 760), "Payment by bank transfer within 30 days. Thank you for your business.", fill=(60, 60, 60), font=f
    )
    return img


def slide(word: str, width: int = 1280, height: int = 720) -> Image.Image:
    """A 16:9 slide with a coloured title bar; only `word` varies (in a bullet)."""
    img = Image.new("RGB", (width, height), (250, 250, 245))
    d = ImageDraw.Draw(img)
    d.rectangle((0, 0, width, 110), fill=(30, 60, 120))
    d.text((50, 30), "Quarterly results overview", fill="white", font=_font(44))
    f = _font(30)
    bullets = [
        "Revenue grew in every region",
        f"Margins were {word} than planned",
        "Headcount stable at 1,240",
        "Next steps: expand the pilot",
    ]
    for i, b in enumerate(bullets):
        d.ellipse((60, 170 + i * 90, 74, 184 + i * 90), fill=(30, 60, 120))
        d.text((95, 160 + i * 90), b, fill=(20, 20, 20), font=f)
    return img
