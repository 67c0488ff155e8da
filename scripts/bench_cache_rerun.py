"""Cache-hit throughput of `mineru parse` on a re-run of N pages (issue 4's measurement).

Makes N distinct synthetic text pages (1000x1300 PNG), fills the result cache with a result for
each under the real ocr-engine fingerprint (parsing 1,000 pages for real first would take most
of an hour on 2 cores and measures nothing extra), then times two re-runs through the real CLI:
  1. a new output file: every page is loaded, normalised, hashed and served by the cache;
  2. the same output file again: the journal's resume check answers without loading pages.
Usage: python scripts/bench_cache_rerun.py [N] [WORKDIR]
"""

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mineru_cli.cache import ResultCache
from mineru_cli.config import EngineChoice, EngineSpec, Mode
from mineru_cli.core.record import fingerprint, page_id
from mineru_cli.engines import describe
from mineru_cli.inputs import LoadOptions, SourceFile, open_document

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic test pages
from synthetic import text_page


def main(n: int, work: Path) -> None:
    pages, cache_dir = work / "pages", work / "cache"
    pages.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = pages / f"p{i:04d}.png"
        if not path.exists():
            text_page(i).save(path)
    # the fingerprint `mineru parse --engine ocr` computes, so the run finds these entries
    fp = fingerprint(describe(EngineSpec(EngineChoice.OCR, Mode.OCR)), dataclasses.asdict(LoadOptions()))
    with ResultCache(cache_dir) as cache:
        for path in sorted(pages.iterdir()):
            with open_document(SourceFile(path, path.name, "image"), LoadOptions()) as doc:
                page = doc.page(0)
            payload = {
                "blocks": [{"type": "text", "bbox": [0, 0, 10, 10], "text": path.stem, "score": 1.0}],
                "markdown": path.stem + "\n",
                "warnings": [],
            }
            cache.store(page.image, page.sha256, fp, page_id(path.name, 0), payload)
    for label, out in (("cache hits (new output file)", "a.jsonl"), ("resume (same output file)", "a.jsonl")):
        t = time.perf_counter()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mineru_cli",
                "parse",
                str(pages),
                "--out",
                str(work / out),
                "--engine",
                "ocr",
                "--cache-dir",
                str(cache_dir),
                "--log-json",
            ],
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - t
        summary = [json.loads(x) for x in r.stderr.splitlines() if '"summary"' in x][-1]
        print(
            f"{label}: {n} pages in {seconds:.1f} s wall = {n / seconds:.0f} pages/s "
            f"(cached {summary['cached']}, resumed {summary['resumed']}, exit {r.returncode})"
        )


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    main(n, Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="mineru-cache-bench-")))
