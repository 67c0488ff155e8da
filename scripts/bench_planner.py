"""The streaming planner's figures (issue 17): time to the first record and the driver's peak
RSS on a 20,000-file dump, for two source trees of mineru-cli run alternately (A B A B ...).

    .venv/bin/python scripts/bench_planner.py --runs 3 --tree after=. --tree before=/tmp/before

Each run is `python -m mineru_cli parse DUMP --out ... --no-cache --engine ocr --log-json` with
PYTHONPATH set to the tree; the script reads its events as they come and samples the driver's
/proc/PID/status (VmRSS, VmHWM) with each one. Two dumps (made once, in --work):

* `tiny`: 20,000 16x16 white PNGs (every file a page for the workers). The run is stopped with
  SIGTERM `--after` seconds after its first parsed record (a whole run is hours of pages).
* `mixed`: 20,000 files, three of them real text pages and the rest empty (each its `failed`
  record, written by the driver), run to the end: the whole run's driver peak and wall time.

Printed per run and as medians: seconds to the executor's start (its "pipeline:" line: the
workers begin to load), to the first record (any) and to the first ok record,
the driver's RSS at its first event and its peak (VmHWM), the wall time, the records written and
the driver's own CPU seconds (its workers not included) per record; with the CPU model, its ISA
flags and the load average.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

FILES = 20_000


def make_dumps(work: Path) -> dict[str, Path]:
    from PIL import Image, ImageDraw, ImageFont

    dumps = {"tiny": work / "tiny", "mixed": work / "mixed"}
    if not dumps["tiny"].exists():
        buf = io.BytesIO()
        Image.new("RGB", (16, 16), "white").save(buf, "PNG")
        for i in range(FILES):
            folder = dumps["tiny"] / f"d{i // 1000:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i:05d}.png").write_bytes(buf.getvalue())
    if not dumps["mixed"].exists():
        for i in range(FILES):
            folder = dumps["mixed"] / f"d{i // 1000:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"f{i:05d}.png"
            if i % 7000 == 0:
                img = Image.new("RGB", (420, 110), "white")
                ImageDraw.Draw(img).text((14, 34), f"Page {i}", fill="black", font=ImageFont.load_default(size=32))
                img.save(path)
            else:
                path.touch()
    return dumps


def status(pid: int) -> dict[str, float]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


def cpu_seconds(pid: int) -> float | None:
    """The process's own user + system seconds (its children not included)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(tree: Path, dump: Path, out: Path, stop_after: float | None) -> dict[str, float | None]:
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "MINERU_HEARTBEAT_S": "1"}
    cmd = [sys.executable, "-m", "mineru_cli", "parse", str(dump), "--out", str(out), "--no-cache", "--engine", "ocr"]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*cmd, "--log-json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=out.parent
    )
    first = first_ok = start_rss = pool = None
    peak = 0.0
    cpu = 0.0
    pages = 0
    at_ok = (0.0, 0)  # driver CPU seconds and records at the first ok record
    stop_at = None
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.monotonic() - t0
        st = status(proc.pid)
        peak = max(peak, st.get("VmHWM", 0.0))
        cpu = cpu_seconds(proc.pid) or cpu
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if start_rss is None:
            start_rss = st.get("VmRSS")
        if event["event"] == "info" and event["message"].startswith("pipeline:") and pool is None:
            pool = now  # the executor starts: its workers are being spawned
        if event["event"] == "page":
            pages += 1
            first = first if first is not None else now
            if event["status"] == "ok" and first_ok is None:
                first_ok = now
                at_ok = (cpu, pages)
                if stop_after is not None:
                    stop_at = now + stop_after
        if stop_at is not None and now >= stop_at:
            proc.send_signal(signal.SIGTERM)
            stop_at = float("inf")
    proc.wait()
    return {
        "pool_start_s": pool,
        "first_record_s": first,
        "first_ok_s": first_ok,
        "rss_start_mb": start_rss,
        "rss_peak_mb": peak,
        "wall_s": time.monotonic() - t0,
        "pages": pages,
        "driver_cpu_s": cpu,
        "driver_ms_per_page": 1000 * cpu / pages if pages else None,
        # from the first ok record on: the steady state, start-up and imports left out
        "steady_ms_per_page": 1000 * (cpu - at_ok[0]) / (pages - at_ok[1]) if pages > at_ok[1] else None,
    }


def machine() -> str:
    model, flags = "?", []
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                have = set(line.split(":", 1)[1].split())
                flags = [
                    f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile") if f in have
                ]
    return f"{model}, {os.cpu_count()} CPUs, ISA {' '.join(flags)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH of a mineru-cli source tree")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_planner"))
    ap.add_argument("--after", type=float, default=20.0, help="tiny dump: seconds after the first ok record to stop")
    ap.add_argument("--dumps", default="tiny,mixed")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    args.work.mkdir(parents=True, exist_ok=True)
    dumps = make_dumps(args.work)
    print(machine())
    results: dict[tuple[str, str], list[dict]] = {}
    for run in range(args.runs):
        for dump in args.dumps.split(","):
            for name, tree in trees.items():  # alternating: A B A B, dump by dump
                load = os.getloadavg()[0]
                r = one_run(
                    Path(tree), dumps[dump], args.work / f"{name}-{dump}.jsonl", args.after if dump == "tiny" else None
                )
                r["load"] = load
                results.setdefault((dump, name), []).append(r)
                print(
                    json.dumps({"run": run, "dump": dump, "tree": name, **{k: v and round(v, 2) for k, v in r.items()}})
                )
                sys.stdout.flush()
    print("medians (min-max):")
    for (dump, name), rs in results.items():
        cells = []
        keys = ("pool_start_s", "first_record_s", "first_ok_s", "rss_start_mb", "rss_peak_mb", "wall_s", "pages")
        for key in (*keys, "driver_cpu_s", "driver_ms_per_page", "steady_ms_per_page", "load"):
            values = [r[key] for r in rs if r[key] is not None]
            if values:
                cells.append(f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        print(f"  {dump:5} {name:8} " + ", ".join(cells))


if __name__ == "__main__":
    main()
