"""`mineru review`: the static HTML page, checked as written and opened in headless Chromium.

The browser tests drive Debian's system Chromium (`make test` installs the `chromium` package
where it can) through Playwright for Python; no browser is ever downloaded. Without
/usr/bin/chromium (or without playwright) they are skipped, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from helpers import EXAMPLES, mineru
from PIL import Image, ImageDraw

from mineru_cli.hashing import file_sha256
from mineru_cli.overlay import colour
from mineru_cli.review import write_review

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _record(source, index, count, sha, size, status="ok", blocks=(), error=None, engine="ocr"):
    w, h = size
    return {
        "schema_version": 1,
        "id": f"{source}#{index}",
        "source": source,
        "page_index": index,
        "page_count": count,
        "status": status,
        "error": error,
        "source_sha256": sha,
        "image": {"width": w, "height": h, "sha256": "x", "original_width": w, "original_height": h, "scale": 1.0}
        if status == "ok" or count
        else None,
        "engine": {"name": engine, "options": {"mode": "ocr"} if engine == "ocr" else {"mode": "hybrid"}},
        "fingerprint": "f",
        "cache": {"status": "miss"},
        "blocks": list(blocks),
        "markdown": "",
        "warnings": [],
        "timings": {"engine": 1.5, "total": 2.0},
        "created": "2026-12-01T12:00:00+00:00",
    }


def _journal(path: Path, records: list[dict]) -> Path:
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run over report.pdf (2 pages), a scan with a table, a broken file and a page that timed
    out: its journal, its review page and the expected counts."""
    root = tmp_path_factory.mktemp("review")
    shutil.copy(EXAMPLES / "report.pdf", root / "report.pdf")
    scan = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(scan).rectangle((120, 120, 280, 180), outline=(0, 0, 0), width=2)
    scan.save(root / "scan.png")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    pdf_sha, scan_sha = file_sha256(root / "report.pdf"), file_sha256(root / "scan.png")
    a4 = (1654, 2339)
    records = [
        _record(
            "report.pdf",
            0,
            2,
            pdf_sha,
            a4,
            blocks=[
                {"type": "title", "bbox": [300, 150, 1350, 230], "text": "Annual Report of the Reading Club"},
                {"type": "text", "bbox": [150, 300, 1500, 600], "text": "This short report <b>describes</b>"},
            ],
        ),
        _record(
            "report.pdf",
            1,
            2,
            pdf_sha,
            a4,
            blocks=[
                {"type": "equation", "bbox": [200, 200, 900, 300], "text": "", "latex": "E = mc^2", "source": "vlm"}
            ],
            engine="vlm",
        ),
        _record(
            "scan.png",
            0,
            1,
            scan_sha,
            (400, 300),
            blocks=[
                {
                    "type": "table",
                    "bbox": [100, 100, 300, 200],
                    "text": "a\tb",
                    "html": "<table><tr><td>a</td><td>b</td></tr></table>",
                }
            ],
        ),
        _record(
            "broken.pdf",
            0,
            None,
            "0" * 64,
            (0, 0),
            status="failed",
            error={"kind": "corrupt", "stage": "open", "message": "cannot open PDF: data format error"},
        ),
        _record(
            "slow.png",
            0,
            1,
            "1" * 64,
            (800, 600),
            status="timeout",
            error={"kind": "timeout", "stage": "engine", "message": "page took longer than 600 s"},
        ),
    ]
    journal = _journal(root / "results.jsonl", records)
    html = root / "report.html"
    r = mineru("review", str(journal), "--html", str(html), "--root", str(root), cwd=root)
    assert r.returncode == 0, r.stderr
    return {"root": root, "journal": journal, "html": html, "records": records, "stdout": r.stdout, "stderr": r.stderr}


def test_the_page_is_one_file_that_needs_no_network(run):
    text = run["html"].read_text(encoding="utf-8")
    assert "5 page(s), 3 image(s) (1 left out)" in run["stdout"]  # report.pdf's two pages and the scan
    assert "1 of 3 source file(s) not found" in run["stderr"] and "--root" in run["stderr"]  # slow.png
    # nothing fetched: no external src/href, and a policy that allows nothing else
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "default-src 'none'" in text
    # the records' text cannot close the data script
    assert "<b>describes</b>" not in text and "\\u003cb\\u003edescribes" in text
    assert len(re.findall(r'<script type="text/plain" id="img-\d+">', text)) == 3


def test_no_images_and_a_changed_source_leave_the_thumbnails_out(run, tmp_path):
    out = tmp_path / "plain.html"
    stats = write_review(run["journal"], out, run["root"], images=False)
    assert stats.images == 0 and 'id="img-' not in out.read_text(encoding="utf-8")
    changed = tmp_path / "root"
    shutil.copytree(run["root"], changed)
    (changed / "scan.png").write_bytes((EXAMPLES / "table.png").read_bytes())  # not the parsed file
    stats = write_review(run["journal"], tmp_path / "changed.html", changed)
    assert stats.images == 2 and stats.missing == 2  # the changed scan, and slow.png (not there)


# --------------------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: install Debian's chromium package (make test does where it can)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, run):
    """The review page opened from file://, with every console error and page error kept."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.goto(run["html"].as_uri())
    pg.wait_for_function("window.reviewReady === true", timeout=10000)
    yield pg
    context.close()


def _visible_ids(pg) -> list[str]:
    return pg.eval_on_selector_all("#grid .page", "els => els.map(e => e.dataset.id)")


def test_it_loads_from_file_with_no_console_errors_and_shows_the_summary(page):
    page.wait_for_timeout(300)  # let the lazy images decode
    assert page.errors == []
    summary = page.inner_text("#summary")
    assert "5\npages" in summary and "1\nfailed" in summary and "1\ntimeout" in summary
    engines = page.inner_text("#engines")
    assert "ocr\tocr\t4" in engines and "vlm\thybrid\t1" in engines
    assert page.eval_on_selector_all("#grid img[src^='data:image/jpeg']", "els => els.length") == 3


def test_it_lists_the_failures_with_kind_stage_and_message(page):
    rows = page.locator("#failures tbody tr")
    assert rows.count() == 2
    text = page.inner_text("#failures")
    assert "broken.pdf#0" in text and "corrupt" in text and "data format error" in text
    assert "slow.png#0" in text and "timeout\tengine" in text


def test_filters_by_status_type_source_and_document(page):
    assert len(_visible_ids(page)) == 5
    page.select_option("#f-status", "failed")
    assert _visible_ids(page) == ["broken.pdf#0"]
    page.select_option("#f-status", "")
    page.select_option("#f-type", "table")
    assert _visible_ids(page) == ["scan.png#0"]
    page.select_option("#f-type", "")
    page.select_option("#f-source", "vlm")
    assert _visible_ids(page) == ["report.pdf#1"]
    page.select_option("#f-source", "")
    page.select_option("#f-doc", label="report.pdf")
    assert _visible_ids(page) == ["report.pdf#0", "report.pdf#1"]
    assert "2 of 5 pages" in page.inner_text("#count")
    # a failure's link shows its document's pages
    page.select_option("#f-doc", "")
    page.click("#failures a:text('slow.png#0')")
    assert _visible_ids(page) == ["slow.png#0"]
    assert page.errors == []


def test_clicking_a_box_shows_its_text_html_or_latex(page):
    page.click(".page[data-id='scan.png#0'] rect[data-type='table']")
    detail = page.inner_text("#detail")
    assert "table" in detail and "<table><tr><td>a</td>" in detail
    assert page.frame_locator("#detail iframe").locator("td").first.inner_text() == "a"  # rendered, sandboxed
    page.click(".page[data-id='report.pdf#1'] rect[data-type='equation']")
    assert "E = mc^2" in page.inner_text("#detail") and "source vlm" in page.inner_text("#detail")
    assert page.errors == []


def test_screenshot_shows_the_page_image_with_its_box_overlaid(page, tmp_path):
    view = page.locator(".page[data-id='scan.png#0'] .view")
    view.scroll_into_view_if_needed()
    page.wait_for_function(
        "document.querySelector(\".page[data-id='scan.png#0'] img\").complete && "
        "document.querySelector(\".page[data-id='scan.png#0'] img\").naturalWidth > 0"
    )
    view.screenshot(path=str(tmp_path / "view.png"))
    shot = Image.open(tmp_path / "view.png").convert("RGB")
    sx, sy = shot.width / 400, shot.height / 300
    green = colour("table")

    def px(x, y):
        return shot.getpixel((round(x * sx), round(y * sy)))

    # the outline of the table box [100, 100, 300, 200], in the table colour
    left = px(100, 150)
    assert all(abs(a - b) <= 40 for a, b in zip(left, green)), left
    # inside: the tint over the page's white, greener than it is red or blue
    r, g, b = px(200, 110)
    assert g - r > 8 and g - b > 8 and min(r, g, b) > 150
    # the page image itself: the black frame drawn on the scan at x=120 shows through the tint
    assert max(px(120.5, 150)) < 120
    # outside any box: the scan's white
    assert min(px(20, 20)) > 240


def test_a_file_name_that_is_not_utf8_is_shown_as_its_bytes(browser, tmp_path):
    """A real run over a file whose name is not UTF-8 (its record holds os.fsdecode's lone
    surrogates): the review page is written, opens, and names the file by its bytes."""
    name = os.fsdecode(b"scan \xff.png")
    root = tmp_path / os.fsdecode(b"dump \xfe")
    root.mkdir()
    Image.new("RGB", (200, 100), "white").save(root / name)
    journal = root / os.fsdecode(b"results \xfd.jsonl")
    parsed = mineru("parse", str(root), "--out", str(journal), "--cpus", "1", "--no-cache", cwd=tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    html_path = tmp_path / "report.html"
    r = mineru("review", str(journal), "--html", str(html_path), "--root", str(root), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "1 page(s), 1 image(s)" in r.stdout  # the file is found by its real name
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    pg = browser.new_page()
    try:
        pg.goto(html_path.as_uri())
        pg.wait_for_function("window.reviewReady === true", timeout=10000)
        assert pg.get_attribute("#grid .page", "data-id") == "scan \\xff.png#0"
        assert "dump \\xfe" in pg.title() and "results \\xfd.jsonl" in pg.title()
    finally:
        pg.close()


def test_review_refuses_what_it_cannot_read_or_write_before_working(tmp_path):
    """A page given for the journal made an empty report (exit 0), a folder was "no such journal",
    and an --html in a missing folder (or a file's) ended in a traceback with exit 1 after every
    thumbnail was made. Each is refused with exit 2, saying what to change."""
    page = Path(__file__).parent / "data" / "dash_row_table_chromium.png"
    r = mineru("review", str(page), "--html", str(tmp_path / "r.html"), cwd=tmp_path)
    assert r.returncode == 2 and f"{page} is not a mineru journal" in r.stderr, r.stderr
    r = mineru("review", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and f"{tmp_path}: is a folder, not a journal" in r.stderr, r.stderr
    journal = tmp_path / "results.jsonl"
    journal.write_text("")
    r = mineru("review", str(journal), "--html", str(tmp_path / "nowhere" / "r.html"), cwd=tmp_path)
    expected = f"its folder {tmp_path / 'nowhere'} does not exist: create it or choose another --html"
    assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = mineru("review", str(journal), "--html", str(page / "r.html"), cwd=tmp_path)
    assert r.returncode == 2 and f"its folder {page} is not a folder" in r.stderr, r.stderr
    r = mineru("review", str(journal), "--html", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "is a folder; give a file name" in r.stderr, r.stderr
    assert not (tmp_path / "r.html").exists()


def test_review_writes_into_a_pipe_and_through_a_link_never_over_them(tmp_path):
    """The page was written beside --html and renamed over it, whatever --html was: as root,
    `--html /dev/full` replaced the system's /dev/full with a regular file (and `--html
    /dev/stdout` its /dev/stdout), a named pipe became a file its reader never heard from, and
    a link became a file where it pointed elsewhere. A pipe or device is written into (the count
    goes to stderr, so a page on /dev/stdout stays whole); a link is followed: its file is
    replaced, the link stays."""
    import stat

    journal = _journal(tmp_path / "results.jsonl", [_record("a.png", 0, 1, "0" * 64, (400, 300))])
    pipe = tmp_path / "page.fifo"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # the page (a few kB) fits the pipe's buffer
    try:
        r = mineru("review", str(journal), "--html", str(pipe), "--no-images", cwd=tmp_path)
        assert r.returncode == 0 and r.stdout == "" and f"{pipe}: 1 page(s)" in r.stderr, r.stdout + r.stderr
        assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
        page = os.read(reader, 1 << 20)
    finally:
        os.close(reader)
    assert page.startswith(b"<!DOCTYPE html>") and page.rstrip().endswith(b"</html>"), page[-100:]

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "r.html").write_text("an earlier page")
    (tmp_path / "latest.html").symlink_to("reports/r.html")
    r = mineru("review", str(journal), "--html", "latest.html", "--no-images", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("latest.html: 1 page(s)"), r.stdout + r.stderr
    assert (tmp_path / "latest.html").is_symlink()
    assert (tmp_path / "reports" / "r.html").read_bytes() == page


def test_review_into_a_pipe_whose_reader_goes_says_the_page_is_cut_short(tmp_path):
    """`mineru review ... --html /dev/stdout | head -c 100`: the reader went after the first
    bytes of the page, and the command said "nothing was written" of a page whose start had been
    read. It exits 3 and says the page is cut short."""
    import subprocess
    import sys

    records = [_record(f"p{i:04}.png", 0, 1, "0" * 64, (400, 300)) for i in range(2000)]
    journal = _journal(tmp_path / "results.jsonl", records)
    pipe = tmp_path / "page.fifo"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    command = [sys.executable, "-m", "mineru_cli", "review", str(journal), "--html", str(pipe), "--no-images"]
    p = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = b""
    try:
        while len(start) < 100 and p.poll() is None:
            try:
                start += os.read(reader, 100)
            except BlockingIOError:
                time.sleep(0.05)
    finally:
        os.close(reader)  # `head -c 100` has what it wanted: the page (megabytes) is cut there
    out, err = p.communicate(timeout=120)
    assert start.startswith(b"<!DOCTYPE html>"), start
    assert p.returncode == 3 and out == "", (p.returncode, out, err)
    assert err == f"error: --html {pipe} could not be written whole (Broken pipe); the page is cut short there\n", err


def test_review_writes_a_new_file_under_dev_shm_as_a_file(tmp_path):
    """`--html /dev/shm/report.html` (a new file on the tmpfs) was taken for a device, being under
    /dev: written in place (a full tmpfs left a page cut short) and its count line sent to stderr.
    It is a file as any other: written whole through a temporary, the count on stdout. /dev/stdout
    (a link under /dev) is still written into."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    journal = _journal(tmp_path / "results.jsonl", [_record("a.png", 0, 1, "0" * 64, (400, 300))])
    page = shm / f"mineru-review-test-{os.getpid()}.html"
    try:
        r = mineru("review", str(journal), "--html", str(page), "--no-images", cwd=tmp_path)
        assert r.returncode == 0 and r.stdout.startswith(f"{page}: 1 page(s)"), r.stdout + r.stderr
        assert page.read_bytes().rstrip().endswith(b"</html>")
    finally:
        page.unlink(missing_ok=True)
    r = mineru("review", str(journal), "--html", "/dev/stdout", "--no-images", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>") and "/dev/stdout: 1 page(s)" in r.stderr
