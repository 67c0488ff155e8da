"""Time reading Image Analysis answers that hold a long run of one thing (what a looping decoder
writes): ours (mineru_cli.vlm.protocol.image_analysis) or the Pro client's
(mineru-vl-utils 2.x in .venv/pro-oracle, test-only), on the shapes of
tests/vlm/test_image_analysis_conformance.py's long_runs(), each as a chart and as a flowchart.

    python scripts/image_analysis_long_runs.py --impl ours --repeats 2000
    farm-bench -n 3 --vs 'python scripts/image_analysis_long_runs.py --impl client' -- \
        python scripts/image_analysis_long_runs.py --impl ours

Prints the slowest shapes with their seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("ours", "client"), default="ours")
    parser.add_argument("--repeats", type=int, default=2000, help="length of each run (default 2000)")
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "tests" / "vlm"), str(ROOT / "tests")]
    from test_image_analysis_conformance import answer, long_runs

    if args.impl == "client":
        sys.path.insert(0, str(ROOT / ".venv" / "pro-oracle"))
        from loguru import logger
        from mineru_vl_utils.post_process.image_analysis_postprocess import process_image_or_chart

        logger.remove()
        read = process_image_or_chart
    else:
        from mineru_cli.vlm.protocol.image_analysis import analyse

        read = analyse
    times = []
    for name, text in long_runs(args.repeats).items():
        for kind in ("chart", "flowchart"):
            started = time.perf_counter()
            read(answer(kind, text))
            times.append((time.perf_counter() - started, name, kind))
    for seconds, name, kind in sorted(times, reverse=True)[:5]:
        print(f"{seconds:9.3f} s  {name} ({kind})")
    print(f"{sum(t for t, _, _ in times):9.3f} s  all {len(times)}")


if __name__ == "__main__":
    main()
