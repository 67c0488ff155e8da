"""A chaos run of `mineru parse`: many faults at once, every page accounted for.

A corpus of small real-looking pages (one-line and invoice-like images, multi-page PDFs, exact
duplicates, broken files) is parsed by the real CLI with the embedded `ocr` engine while a
driver with a fixed seed SIGKILLs random workers, SIGKILLs the main process and starts it
again (as cron would), sends SIGTERM, truncates or replaces input files mid-run, and makes the
cache folder read-only for a while. Afterwards the same command runs once more without faults
(the next cron run) and then with --retry-failed. The checks:

- exactly one record per page of every input file's current content (no page lost, none
  duplicated, none of a page that no longer exists);
- each record equal to the calm run's record of that page's content (blocks, Markdown, image,
  page count, status), or an error record naming the fault (a worker SIGKILLed on the page:
  kind `crash`; a broken or truncated file: `corrupt`/`empty`/...); after --retry-failed only
  the broken files are not ok;
- no record served from the cache differs from the engine's result for its content;
- the peak RSS of the main process and of any worker stays under a bound.

`python tests/chaos.py --pages 3000 --seed 7` runs a long soak by hand (tests/test_chaos.py runs
the CI setting; MINERU_CHAOS_PAGES there does the same). Run it from the repository root.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fshelpers import make_read_only, make_writable  # noqa: E402
from synthetic import WORDS, invoice  # noqa: E402

# What a record must match in the calm run's record of the same content (not id, source,
# timings, cache, created: those differ by design).
ESSENCE = ("status", "page_count", "image", "blocks", "markdown", "warnings")
# Error kinds that name a fault of the file itself (a broken or truncated input).
FILE_FAULTS = {"corrupt", "empty", "not_found", "unreadable", "too_large"}


@dataclass
class Settings:
    pages: int = 48  # about this many pages in the corpus (images + PDF pages)
    seed: int = 20
    workers: int = 2
    faults: int = 12  # faults to inject (the kinds drawn by weight)
    gap: tuple[float, float] | None = None  # seconds between faults (None: the calm run's time spread over them)
    readonly_s: tuple[float, float] = (4.0, 10.0)  # how long the cache folder stays read-only
    rss_bound: int = 2_500_000_000  # bytes: main process and each worker
    timeout: float = 900.0  # the whole chaos phase


WEIGHTS = {"kill_worker": 4, "kill_main": 2, "sigterm": 2, "truncate": 1, "replace": 2, "readonly_cache": 1}


@dataclass
class Report:
    pages: int = 0  # pages in the final journal
    files: int = 0
    faults: Counter = field(default_factory=Counter)
    lost: int = 0
    duplicated: int = 0
    wrong: int = 0
    wrong_from_cache: int = 0
    crash_records: int = 0  # pages a SIGKILLed worker was on (error records naming the fault)
    file_fault_records: int = 0
    orphans: int = 0  # workers still alive 10 s after their main process was killed
    lingering: int = 0  # ... and still alive at the end of the run
    starts: int = 0
    exit_codes: Counter = field(default_factory=Counter)
    peak_rss_main: int = 0
    peak_rss_worker: int = 0
    peak_rss_total: int = 0
    calm_s: float = 0.0
    chaos_s: float = 0.0
    settle_s: float = 0.0
    problems: list[str] = field(default_factory=list)
    not_possible: set[str] = field(default_factory=set)  # fault kinds this machine cannot inject
    not_injected: int = 0  # faults left when the corpus was done (no run left to hit)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["faults"] = dict(self.faults)
        d["exit_codes"] = {str(k): v for k, v in self.exit_codes.items()}
        d["problems"] = self.problems[:20]
        d["not_possible"] = sorted(self.not_possible)
        return d


# -- the corpus -------------------------------------------------------------------------------
def _font(size: int):
    return ImageFont.load_default(size=size)


def line_page(rng: random.Random, i: int) -> Image.Image:
    """A small page with a heading and a line or two: quick to OCR, distinct per i."""
    img = Image.new("RGB", (560, 170), "white")
    d = ImageDraw.Draw(img)
    words = " ".join(rng.choice(WORDS) for _ in range(3)).capitalize()
    d.text((20, 20), f"Item {i}: {words}", fill="black", font=_font(30))
    d.text((20, 90), f"Total {rng.randint(100, 99999)} units in lot {i}", fill="black", font=_font(24))
    return img


def build_corpus(root: Path, settings: Settings) -> dict[str, bytes]:
    """Write the inputs under root; return {relative path: bytes} of every valid content (the
    pool replacements are drawn from)."""
    rng = random.Random(settings.seed)
    root.mkdir(parents=True)
    contents: dict[str, bytes] = {}
    n_pdf_pages = 0
    i = 0
    while i + n_pdf_pages < settings.pages:
        roll = rng.random()
        sub = root / f"batch{i % 4}"
        sub.mkdir(exist_ok=True)
        if roll < 0.12 and contents:  # a 2- or 3-page PDF
            pages = [line_page(rng, 1000 + i * 3 + k) for k in range(rng.choice((2, 3)))]
            buf = io.BytesIO()
            pages[0].save(buf, "PDF", save_all=True, append_images=pages[1:], resolution=72)
            name, data = f"doc{i:04d}.pdf", buf.getvalue()
            n_pdf_pages += len(pages) - 1
        elif roll < 0.17:  # an invoice-like page, smaller than the original
            buf = io.BytesIO()
            invoice(f"{rng.randint(1, 9)},{rng.randint(100, 999)}.50").resize((500, 650)).save(buf, "PNG")
            name, data = f"inv{i:04d}.png", buf.getvalue()
        elif roll < 0.40 and contents:  # an exact copy of an earlier file (a cache hit)
            src = rng.choice(sorted(contents))
            name, data = f"copy{i:04d}{Path(src).suffix}", contents[src]
        else:
            buf = io.BytesIO()
            fmt = "JPEG" if rng.random() < 0.2 else "PNG"
            line_page(rng, i).save(buf, fmt, **({"quality": 92} if fmt == "JPEG" else {}))
            name, data = f"page{i:04d}.{'jpg' if fmt == 'JPEG' else 'png'}", buf.getvalue()
        path = sub / name
        path.write_bytes(data)
        contents[str(path.relative_to(root))] = data
        i += 1
    broken = root / "broken"
    broken.mkdir()
    (broken / "empty.png").write_bytes(b"")
    (broken / "garbage.pdf").write_bytes(b"%PDF-1.4\n not a pdf at all\n")
    first_png = next(v for k, v in contents.items() if k.endswith(".png"))
    (broken / "half.png").write_bytes(first_png[: len(first_png) // 2])
    return contents


# -- processes ---------------------------------------------------------------------------------
class Sampler(threading.Thread):
    """Peak RSS of the main process and its workers, sampled every 0.2 s."""

    def __init__(self, report: Report):
        super().__init__(daemon=True)
        self.report, self.proc = report, None
        self.stop = threading.Event()

    def run(self) -> None:
        r = self.report
        while not self.stop.wait(0.2):
            proc = self.proc
            if proc is None:
                continue
            try:
                main = psutil.Process(proc.pid)
                rss_main = main.memory_info().rss
                kids = [c.memory_info().rss for c in main.children(recursive=True)]
            except psutil.Error:
                continue
            r.peak_rss_main = max(r.peak_rss_main, rss_main)
            r.peak_rss_worker = max([r.peak_rss_worker, *kids])
            r.peak_rss_total = max(r.peak_rss_total, rss_main + sum(kids))


def workers_of(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children()
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            if "resource_tracker" not in " ".join(k.cmdline()):
                out.append(k)
        except psutil.Error:
            pass
    return out


def command(inputs: Path, out: Path, cache: Path, workers: int, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "mineru_cli", "parse", str(inputs), "--out", str(out), "--cache-dir", str(cache)),
        *("--engine", "ocr", "--workers", str(workers), "--quiet", *extra),
    ]


def run_calm(cmd: list[str], cwd: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"calm run: exit {r.returncode}: {r.stderr[-2000:]}")
    return r.returncode, time.monotonic() - t0


def _log(msg: str) -> None:
    if os.environ.get("MINERU_CHAOS_VERBOSE"):
        print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the run -----------------------------------------------------------------------------------
def chaos(work: Path, settings: Settings) -> Report:
    report = Report()
    rng = random.Random(settings.seed * 7919 + 1)
    inputs = work / "in"
    contents = build_corpus(inputs, settings)

    # The calm run: the same command, no faults, its own fresh cache; its records are the
    # reference (cache misses are the engine's own results; its hits are checked below too).
    calm_out, calm_cache = work / "calm.jsonl", work / "calm-cache"
    _, report.calm_s = run_calm(command(inputs, calm_out, calm_cache, settings.workers), work)
    reference = reference_of(calm_out, inputs)
    mean_gap = report.calm_s / (settings.faults + 1)
    gap = settings.gap or (0.5 * mean_gap, 1.5 * mean_gap)

    out, cache = work / "chaos.jsonl", work / "cache"
    cache.mkdir()
    cmd = command(inputs, out, cache, settings.workers)
    sampler = Sampler(report)
    sampler.start()
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    pending = [rng.choices(kinds, weights)[0] for _ in range(settings.faults)]
    # every kind at least once in the CI setting
    for k, kind in enumerate(kinds[: len(pending)]):
        pending[k] = kind
    rng.shuffle(pending)
    readonly_until: float | None = None
    truncated: set[str] = set()
    t0 = time.monotonic()
    proc: subprocess.Popen | None = None
    ended_alone = 0  # runs in a row that ended by themselves, no fault drawn between them
    orphans: list[psutil.Process] = []
    try:
        while pending or proc is not None or readonly_until is not None:
            if time.monotonic() - t0 > settings.timeout:
                raise RuntimeError(f"chaos phase past {settings.timeout} s; faults left: {pending}")
            if proc is None and pending:
                proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                sampler.proc = proc
                report.starts += 1
            time.sleep(rng.uniform(*gap))
            if readonly_until is not None and time.monotonic() >= readonly_until:
                make_writable(cache)
                readonly_until = None
                _log("cache writable again")
            if proc is not None and proc.poll() is not None:
                report.exit_codes[proc.returncode] += 1
                proc = None
                ended_alone += 1
                if ended_alone >= 2 and pending:
                    # two runs in a row ended by themselves between two draws: the corpus is
                    # done and a resumed run ends before a fault can land, so the faults left
                    # would wait for ever
                    report.not_injected, pending = len(pending), []
                continue  # a finished run: the next one (cron's) starts at the top
            if not pending:
                continue  # no faults left: the run finishes calmly (and a read-only spell ends)
            kind = pending.pop()
            ended_alone = 0
            _log(f"fault {kind}")
            if kind == "kill_worker":
                ws = workers_of(proc.pid) if proc else []
                if not ws:
                    pending.append(kind)  # none yet (starting up): try again later
                    continue
                try:
                    rng.choice(ws).send_signal(signal.SIGKILL)
                except psutil.Error:
                    pending.append(kind)
                    continue
            elif kind in ("kill_main", "sigterm") and proc is not None:
                kids = workers_of(proc.pid)
                proc.send_signal(signal.SIGKILL if kind == "kill_main" else signal.SIGTERM)
                try:
                    report.exit_codes[proc.wait(timeout=90)] += 1
                except subprocess.TimeoutExpired:
                    report.problems.append(f"{kind}: the main process did not exit within 90 s")
                    proc.kill()
                    report.exit_codes[proc.wait()] += 1
                proc = None
                _, alive = psutil.wait_procs(kids, timeout=10)
                report.orphans += len(alive)
                orphans += alive
            elif kind in ("kill_main", "sigterm"):
                pending.append(kind)
                continue
            elif kind == "truncate":
                pngs = sorted(p for p in contents if p.endswith(".png") and p not in truncated)
                target = rng.choice(pngs)
                data = (inputs / target).read_bytes()
                (inputs / target).write_bytes(data[: len(data) // 2])
                truncated.add(target)
                contents.pop(target)
            elif kind == "replace":
                target = rng.choice(sorted(contents))
                same_kind = sorted(p for p in contents if Path(p).suffix == Path(target).suffix and p != target)
                if not same_kind:
                    pending.append(kind)
                    continue
                new = contents[rng.choice(same_kind)]
                with open(inputs / target, "wb") as fh:  # in place: a reader may see it half-written
                    fh.write(new[: len(new) // 2])
                    fh.flush()
                    time.sleep(0.05)
                    fh.write(new[len(new) // 2 :])
                contents[target] = new
            elif kind == "readonly_cache":
                if readonly_until is not None:
                    continue  # already read-only: this one is not counted
                if not make_read_only(cache):
                    if not report.faults[kind]:
                        report.not_possible.add(kind)  # root without mount rights
                    continue
                readonly_until = time.monotonic() + rng.uniform(*settings.readonly_s)
            report.faults[kind] += 1
            report.not_possible.discard(kind)
    finally:
        if readonly_until is not None:
            make_writable(cache)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        report.chaos_s = time.monotonic() - t0

    # The next cron run: no faults. Then --retry-failed: the pages a killed worker was on.
    t1 = time.monotonic()
    sampler.proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report.exit_codes[sampler.proc.wait()] += 1
    report.settle_s = time.monotonic() - t1
    check(out, inputs, contents, truncated, reference, report, retried=False)
    sampler.proc = subprocess.Popen([*cmd, "--retry-failed"], cwd=work, stdout=subprocess.DEVNULL)
    report.exit_codes[sampler.proc.wait()] += 1
    sampler.stop.set()
    check(out, inputs, contents, truncated, reference, report, retried=True)
    for k in orphans:  # by their pid, only those seen as the killed main process's workers
        if k.is_running() and k.status() != psutil.STATUS_ZOMBIE:
            report.lingering += 1
            k.kill()
    return report


def reference_of(journal: Path, inputs: Path) -> dict[tuple[str, int], dict]:
    """(file sha256, page index) -> the calm run's record essence, from its cache misses."""
    ref: dict[tuple[str, int], dict] = {}
    recs = [json.loads(line) for line in journal.open()]
    for rec in sorted(recs, key=lambda r: r["cache"] is not None and r["cache"]["status"] != "miss"):
        if rec["status"] != "ok":
            continue
        key = (rec["source_sha256"], rec["page_index"])
        essence = {k: rec.get(k) for k in ESSENCE}
        if key not in ref:
            ref[key] = essence
        elif ref[key] != essence:  # a hit in the calm run that differs from the miss it copies
            raise AssertionError(f"calm run: {rec['id']} ({rec['cache']}) differs from its content's result")
    return ref


def check(out, inputs, contents, truncated, reference, report: Report, retried: bool) -> None:
    from mineru_cli.inputs import file_sha256

    lines = [json.loads(line) for line in out.open()]
    ids = Counter(r["id"] for r in lines)
    report.duplicated = sum(n - 1 for n in ids.values())
    recs = {r["id"]: r for r in lines}
    expected: set[str] = set()
    report.wrong = report.wrong_from_cache = report.crash_records = report.file_fault_records = 0
    files = sorted(p for p in inputs.rglob("*") if p.is_file())
    report.files = len(files)
    for path in files:
        rel = str(path.relative_to(inputs))
        sha = file_sha256(path)
        pages = sorted(i for (s, i) in reference if s == sha)
        if rel in contents and not pages:
            report.problems.append(f"{rel}: no calm record of its content")
        if not pages:  # a broken or truncated file: one record, an error naming it
            expected.add(f"{rel}#0")
            rec = recs.get(f"{rel}#0")
            if rec is None:
                continue
            if rec["status"] == "failed" and rec["error"]["kind"] in FILE_FAULTS:
                report.file_fault_records += 1
            else:
                report.wrong += 1
                report.problems.append(f"{rel}#0: a broken file got {rec['status']} {rec.get('error')}")
            continue
        for i in pages:
            pid = f"{rel}#{i}"
            expected.add(pid)
            rec = recs.get(pid)
            if rec is None:
                continue
            if rec["status"] == "failed" and rec["error"]["kind"] == "crash" and not retried:
                report.crash_records += 1  # the page a SIGKILLed worker was on: names the fault
                continue
            got = {k: rec.get(k) for k in ESSENCE}
            if rec["source_sha256"] != sha or got != reference[(sha, i)]:
                report.wrong += 1
                cache = (rec.get("cache") or {}).get("status")
                if cache in ("hit", "near-hit"):
                    report.wrong_from_cache += 1
                report.problems.append(f"{pid}: differs from the calm run's record of its content (cache {cache})")
    report.lost = len(expected - set(recs))
    extra = set(recs) - expected
    report.pages = len(recs)
    if extra:
        report.problems.append(f"records of pages that do not exist: {sorted(extra)[:5]}")
        report.wrong += len(extra)
    for pid in sorted(expected - set(recs))[:5]:
        report.problems.append(f"{pid}: no record")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--faults", type=int, default=None, help="default: one per 10 pages")
    ap.add_argument("--work", type=Path, default=None, help="folder to work in (default: a new temporary one)")
    args = ap.parse_args()
    s = Settings(pages=args.pages, seed=args.seed, workers=args.workers)
    s.faults = args.faults or max(12, args.pages // 10)
    s.timeout = 60.0 * 60 * 24
    work = args.work or Path(
        subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip()
    )
    t0 = time.monotonic()
    report = chaos(work / "chaos", s)
    print(json.dumps({**report.as_dict(), "wall_s": round(time.monotonic() - t0, 1), "work": str(work)}, indent=2))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
