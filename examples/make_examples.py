#!/usr/bin/env python3
"""Generate the demo inputs in ``examples/`` together with their ground truth.

Run from the repository root::

    .venv/bin/python examples/make_examples.py

Everything is rendered with Pillow from original text written for this
project, so the files are free to ship.  The output is deterministic for a
given Pillow/FreeType version and font files.

Fonts needed (Debian packages):
  * fonts-dejavu-core  -> /usr/share/fonts/truetype/dejavu/DejaVuSans*.ttf, DejaVuSerif*.ttf
  * fonts-wqy-microhei -> /usr/share/fonts/truetype/wqy/wqy-microhei.ttc  (Chinese page)
    (fonts-noto-cjk works too: NotoSansCJK-Regular.ttc is used if present)

Ground truth is written to ``examples/ground_truth/<name>.txt`` (for the PDF:
``report.p1.txt`` and ``report.p2.txt``): one line per visual line of text,
blocks separated by one blank line, in human reading order.  Table rows are
written as their cells joined by single spaces.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
GT_DIR = HERE / "ground_truth"

DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")
CJK_CANDIDATES = [
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),
]

BLACK = (20, 20, 20)
WHITE = (255, 255, 255)

# A4 at 150 DPI for the PNG pages, at 200 DPI for the PDF pages.
A4_150 = (1240, 1754)
A4_200 = (1654, 2339)


# --------------------------------------------------------------------------
# fonts
# --------------------------------------------------------------------------


def _need(path: Path, package: str) -> Path:
    if not path.is_file():
        sys.exit(f"make_examples.py: font file {path} not found.\nInstall it with: apt-get install -y {package}")
    return path


# The BASIC layout engine is used on purpose: it does not form ligatures
# ("fi", "ffl"), so the pixels match the ground-truth characters, and it does
# not depend on whether Pillow was built with libraqm.
def latin(name: str, size: int) -> ImageFont.FreeTypeFont:
    path = _need(DEJAVU_DIR / name, "fonts-dejavu-core")
    return ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)


def cjk(size: int) -> ImageFont.FreeTypeFont:
    for path in CJK_CANDIDATES:
        if path.is_file():
            return ImageFont.truetype(str(path), size, layout_engine=ImageFont.Layout.BASIC)
    sys.exit(
        "make_examples.py: no CJK font found (looked for "
        + ", ".join(str(p) for p in CJK_CANDIDATES)
        + ").\nInstall one with: apt-get install -y fonts-wqy-microhei"
        " (or fonts-noto-cjk)"
    )


# --------------------------------------------------------------------------
# layout helpers
# --------------------------------------------------------------------------


def wrap_words(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    lines: list[str] = []
    cur = ""
    for word in text.split():
        trial = word if not cur else cur + " " + word
        if font.getlength(trial) <= width:
            cur = trial
        else:
            if cur:
                lines.append(cur)
            cur = word
    if cur:
        lines.append(cur)
    return lines


_NO_LINE_START = set("，。、；：？！”）》")


def wrap_chars(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """Wrap CJK text character by character (no punctuation at line start)."""
    lines: list[str] = []
    cur = ""
    for ch in text:
        if font.getlength(cur + ch) <= width or (ch in _NO_LINE_START and cur):
            cur += ch
        else:
            lines.append(cur)
            cur = ch
    if cur:
        lines.append(cur)
    return lines


class Page:
    """An image plus the ground-truth blocks drawn on it, in reading order."""

    def __init__(self, size: tuple[int, int], bg=WHITE):
        self.im = Image.new("RGB", size, bg)
        self.draw = ImageDraw.Draw(self.im)
        self.blocks: list[list[str]] = []

    def text_block(
        self, x: int, y: int, lines: list[str], font, leading: float = 1.45, fill=BLACK, record: bool = True
    ) -> int:
        """Draw lines top-down from (x, y); return the y below the block."""
        step = int(round(font.size * leading))
        for i, line in enumerate(lines):
            self.draw.text((x, y + i * step), line, font=font, fill=fill)
        if record:
            self.blocks.append(list(lines))
        return y + len(lines) * step

    def centered(
        self, y: int, line: str, font, fill=BLACK, record: bool = True, x0: int = 0, x1: int | None = None
    ) -> int:
        x1 = self.im.width if x1 is None else x1
        w = font.getlength(line)
        self.draw.text((int(x0 + (x1 - x0 - w) / 2), y), line, font=font, fill=fill)
        if record:
            self.blocks.append([line])
        return y + int(round(font.size * 1.45))

    def ground_truth(self) -> str:
        return "\n\n".join("\n".join(b) for b in self.blocks) + "\n"


def save_png(page: Page, name: str) -> None:
    page.im.save(HERE / f"{name}.png", optimize=True)
    (GT_DIR / f"{name}.txt").write_text(page.ground_truth(), encoding="utf-8")


# --------------------------------------------------------------------------
# texts (original, written for this project)
# --------------------------------------------------------------------------

PROSE_TITLE = "Why Document Parsing Is Hard"
PROSE_PARAS = [
    "A scanned page looks simple to a person. We notice the title, a few "
    "paragraphs and often a small page number at the foot of the page, and we "
    "read them in the right order without thinking about it. A computer, however, starts with nothing more than "
    "a grid of pixels and has to rebuild all of that structure on its own.",
    "The first step is usually layout analysis. A model looks at the whole page and "
    "proposes regions such as titles, paragraphs, tables and figures. Each region "
    "gets a bounding box and a label, and the boxes are later sorted into the order "
    "in which a reader would visit them.",
    "The second step is text recognition. Every region that contains text is cut "
    "into lines, and each line is turned into characters by a recognition model. "
    "Small fonts, low contrast and skewed scans all make this step less reliable, "
    "so good input images matter a great deal.",
    "Finally the pieces are put back together. Lines become paragraphs, paragraphs "
    "become blocks with a type and a position, and the result can be written out "
    "as plain text, Markdown or structured records for further processing.",
]

TWO_COL_TITLE = "Notes From a Small Harbour Town"
TWO_COL_LEFT = [
    "Every morning the fishing boats leave the harbour before sunrise. By the time "
    "the bakery opens its doors, most of them are already far out at sea, and only "
    "the gulls remain to watch the empty quay.",
    "The market square fills up slowly. Farmers arrive with crates of apples and "
    "onions, a man sells honey from a folding table, and children run between the "
    "stalls with paper bags of warm bread.",
    "Around noon the church bell rings twelve times and the square grows quiet "
    "again. Shopkeepers pull down their awnings and sit in the shade to eat.",
]
TWO_COL_RIGHT = [
    "In the afternoon the wind usually turns and blows in from the west. Sailors "
    "say this is the best time to read the sky, because the clouds tell you what "
    "the weather will do during the night.",
    "The old lighthouse on the northern cliff has not been used for many years. "
    "Volunteers now keep it open as a small museum with maps, ropes and a brass "
    "lamp that visitors are allowed to touch.",
    "When the boats finally return in the evening, the whole town walks down to "
    "the water to see what the sea has brought home.",
]

TABLE_HEADING = "Table 3. Monthly results of the test library"
TABLE_ROWS = [
    ["Month", "Visitors", "Loans", "Rating"],
    ["January", "1240", "310", "4.2"],
    ["February", "1185", "295", "4.1"],
    ["March", "1420", "362", "4.5"],
    ["April", "1310", "340", "4.3"],
]
TABLE_NOTE = "All numbers are invented for this example."

SLIDE_TITLE = "Quarterly Planning Review"
SLIDE_BULLETS = [
    "Finish the offline parsing engine",
    "Measure speed on ordinary laptops",
    "Publish clear examples and tests",
    "Collect feedback from early users",
]
SLIDE_FOOTER = "Project update, week 12"

CN_TITLE = "文档解析的基本流程"
CN_PARAS = [
    "在日常工作中，我们经常需要把扫描的文件或者屏幕截图转换成可以编辑的文字。"
    "这个过程看起来很简单，但是计算机首先只能看到一张由像素组成的图片，"
    "它必须自己找出哪里是标题，哪里是正文，哪里是表格。",
    "通常的做法是先进行版面分析，把页面划分成不同的区域，然后再对每个区域进行文字识别。"
    "识别完成以后，程序会按照人的阅读顺序把这些区域重新排列，并输出为纯文本或者结构化的数据。",
    "图片越清晰，字体越大，识别的结果就越准确。因此在准备示例文件的时候，我们尽量使用清楚的字体和足够的对比度。",
]

REPORT_P1_TITLE = "Annual Report of the Reading Club"
REPORT_P1 = [
    (
        "Introduction",
        [
            "This short report describes the activities of our reading club during the "
            "past year. The club met twice a month in the public library and welcomed "
            "eleven new members, which brings the total number of members to forty.",
            "Most meetings followed the same pattern. One member introduced a book, the "
            "group discussed it for about an hour, and the evening ended with tea and "
            "suggestions for the next title.",
        ],
    ),
    (
        "Books of the Year",
        [
            "The club read twenty two books in total. Novels were the most popular "
            "choice, followed by travel writing and popular science. Members rated each "
            "book on a scale from one to five after the discussion."
        ],
    ),
]
REPORT_P2 = [
    (
        "Finances",
        [
            "The club is funded by a small yearly fee and by a grant from the town "
            "council. Most of the money was spent on new copies of books for members who "
            "could not borrow them from the library in time.",
            "At the end of the year the club had a modest surplus, which will be used to "
            "invite a local author to one of the meetings next spring.",
        ],
    ),
    (
        "Plans for Next Year",
        [
            "Next year we would like to start a second group that meets on weekend "
            "mornings, so that members who work in the evening can also take part. We "
            "also plan to read more books by authors from neighbouring countries.",
            "Everyone is welcome to join. Please ask at the library desk for details.",
        ],
    ),
]


# --------------------------------------------------------------------------
# pages
# --------------------------------------------------------------------------


def make_prose() -> None:
    W, H = A4_150
    p = Page(A4_150)
    margin = 130
    title_f = latin("DejaVuSerif-Bold.ttf", 40)
    body_f = latin("DejaVuSerif.ttf", 26)
    y = 150
    y = p.centered(y, PROSE_TITLE, title_f) + 40
    for para in PROSE_PARAS:
        y = p.text_block(margin, y, wrap_words(para, body_f, W - 2 * margin), body_f, leading=1.65)
        y += 34
    p.centered(H - 120, "- 1 -", latin("DejaVuSerif.ttf", 22))
    save_png(p, "prose")


def make_two_column() -> None:
    W, H = A4_150
    p = Page(A4_150)
    margin, gutter = 110, 70
    col_w = (W - 2 * margin - gutter) // 2
    title_f = latin("DejaVuSans-Bold.ttf", 42)
    body_f = latin("DejaVuSans.ttf", 24)
    y = p.centered(140, TWO_COL_TITLE, title_f)
    p.draw.line([(margin, y + 10), (W - margin, y + 10)], fill=(90, 90, 90), width=2)
    top = y + 60
    for x, paras in ((margin, TWO_COL_LEFT), (margin + col_w + gutter, TWO_COL_RIGHT)):
        yy = top
        for para in paras:
            yy = p.text_block(x, yy, wrap_words(para, body_f, col_w), body_f, leading=1.5)
            yy += 34
    save_png(p, "two_column")


def make_table() -> None:
    W, H = A4_150
    p = Page(A4_150)
    head_f = latin("DejaVuSans-Bold.ttf", 32)
    cell_f = latin("DejaVuSans.ttf", 28)
    cellb_f = latin("DejaVuSans-Bold.ttf", 28)
    note_f = latin("DejaVuSans-Oblique.ttf", 22)
    x0, y0 = 150, 260
    p.text_block(x0, 160, [TABLE_HEADING], head_f)
    col_w = [280, 220, 200, 240]
    row_h = 76
    n_rows = len(TABLE_ROWS)
    x1 = x0 + sum(col_w)
    y1 = y0 + n_rows * row_h
    p.draw.rectangle([x0, y0, x1, y0 + row_h], fill=(225, 230, 240))
    xs = [x0]
    for w in col_w:
        xs.append(xs[-1] + w)
    for i in range(n_rows + 1):
        y = y0 + i * row_h
        p.draw.line([(x0, y), (x1, y)], fill=BLACK, width=3 if i in (0, 1, n_rows) else 2)
    for i, x in enumerate(xs):
        p.draw.line([(x, y0), (x, y1)], fill=BLACK, width=3 if i in (0, len(xs) - 1) else 2)
    rows_gt = []
    for r, row in enumerate(TABLE_ROWS):
        f = cellb_f if r == 0 else cell_f
        for c, cell in enumerate(row):
            ty = y0 + r * row_h + (row_h - f.size) // 2 - 3
            if c == 0 or r == 0:
                tx = xs[c] + 22
            else:  # right-align numbers
                tx = xs[c + 1] - 22 - f.getlength(cell)
            p.draw.text((tx, ty), cell, font=f, fill=BLACK)
        rows_gt.append(" ".join(row))
    p.blocks.append(rows_gt)
    p.text_block(x0, y1 + 30, [TABLE_NOTE], note_f)
    save_png(p, "table")


def make_slide() -> None:
    W, H = 1600, 900
    p = Page((W, H), bg=(248, 249, 252))
    bar = (31, 78, 140)
    p.draw.rectangle([0, 0, W, 150], fill=bar)
    p.draw.rectangle([0, 150, W, 162], fill=(242, 169, 0))
    title_f = latin("DejaVuSans-Bold.ttf", 64)
    bullet_f = latin("DejaVuSans.ttf", 44)
    foot_f = latin("DejaVuSans.ttf", 26)
    p.text_block(80, 40, [SLIDE_TITLE], title_f, fill=WHITE)
    y = 240
    for b in SLIDE_BULLETS:
        cy = y + bullet_f.size // 2 + 4
        p.draw.ellipse([100, cy - 10, 120, cy + 10], fill=bar)
        p.draw.text((150, y), b, font=bullet_f, fill=(30, 30, 30))
        y += 110
    p.blocks.append(list(SLIDE_BULLETS))
    # a simple decorative shape: three rising bars in a rounded frame
    fx0, fy0, fx1, fy1 = 1140, 250, 1500, 640
    p.draw.rounded_rectangle([fx0, fy0, fx1, fy1], radius=24, outline=bar, width=5)
    for i, hgt in enumerate((120, 200, 300)):
        bx = fx0 + 50 + i * 100
        p.draw.rectangle([bx, fy1 - 40 - hgt, bx + 60, fy1 - 40], fill=(242, 169, 0) if i == 2 else bar)
    p.draw.line([(0, H - 70), (W, H - 70)], fill=(200, 205, 215), width=2)
    p.text_block(80, H - 55, [SLIDE_FOOTER], foot_f, fill=(90, 90, 90))
    save_png(p, "slide")


def make_chinese() -> None:
    W, H = A4_150
    p = Page(A4_150)
    margin = 130
    title_f = cjk(48)
    body_f = cjk(32)
    y = p.centered(160, CN_TITLE, title_f)
    y += 50
    for para in CN_PARAS:
        # first-line indent of two characters, as usual in Chinese typesetting
        indent = int(body_f.getlength("中中"))
        first = wrap_chars(para, body_f, W - 2 * margin - indent)[0]
        rest = wrap_chars(para[len(first) :], body_f, W - 2 * margin)
        step = int(round(body_f.size * 1.6))
        p.draw.text((margin + indent, y), first, font=body_f, fill=BLACK)
        for i, line in enumerate(rest, start=1):
            p.draw.text((margin, y + i * step), line, font=body_f, fill=BLACK)
        p.blocks.append([first] + rest)
        y += (1 + len(rest)) * step + 36
    save_png(p, "chinese")


def _report_page(title: str | None, sections, page_no: int) -> Page:
    W, H = A4_200
    p = Page(A4_200)
    margin = 180
    title_f = latin("DejaVuSerif-Bold.ttf", 52)
    head_f = latin("DejaVuSans-Bold.ttf", 40)
    body_f = latin("DejaVuSerif.ttf", 32)
    y = 200
    if title:
        y = p.centered(y, title, title_f) + 50
    for heading, paras in sections:
        y = p.text_block(margin, y, [heading], head_f) + 20
        for para in paras:
            y = p.text_block(margin, y, wrap_words(para, body_f, W - 2 * margin), body_f)
            y += 36
        y += 30
    p.centered(H - 160, f"Page {page_no} of 2", latin("DejaVuSerif.ttf", 28))
    return p


def make_report() -> None:
    p1 = _report_page(REPORT_P1_TITLE, REPORT_P1, 1)
    p2 = _report_page(None, REPORT_P2, 2)
    ims = [p.im.convert("L") for p in (p1, p2)]
    ims[0].save(
        HERE / "report.pdf",
        save_all=True,
        append_images=ims[1:],
        resolution=200.0,
        quality=85,
        title="Annual Report of the Reading Club",
        creationDate=None,
        modDate=None,
    )
    for i, p in enumerate((p1, p2), start=1):
        (GT_DIR / f"report.p{i}.txt").write_text(p.ground_truth(), encoding="utf-8")


def main() -> None:
    GT_DIR.mkdir(parents=True, exist_ok=True)
    make_prose()
    make_two_column()
    make_table()
    make_slide()
    make_chinese()
    make_report()
    for f in sorted(HERE.glob("*")):
        if f.is_file() and f.suffix in (".png", ".pdf"):
            print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
