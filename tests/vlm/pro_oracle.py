"""The Pro profile's conformance oracle: mineru-vl-utils 2.x (the client MinerU 4.0.x runs
MinerU2.5-Pro with), run in a subprocess.

It cannot be imported here: the venv holds 0.1.22, the 2509 oracle, under the same package name.
`make dev` installs 2.x into .venv/pro-oracle (see the Makefile's pro-oracle target); this module
starts one Python with that folder first on sys.path and talks to it in JSON lines. The helper is
configured as MinerU 4.0.12 configures it (mineru/model/vlm/runtime.py: table formula <eq>
wrapping on, cross-page table merging off), with image analysis off unless a call asks for it
(extract and two_step take image_analysis, as the client's prepare_for_extract does).

Blocks travel as dicts: type, bbox, angle, content, merge_prev, and the helper's own keys for
images held by tables (_absorbed_by_table, _table_image_token_map). Images travel as PNG (pages)
or raw bytes with size and mode (crops).

The "image_analysis" op runs the client's Image Analysis answer parsing and repairs on strings,
whole or one step at a time (image_analysis()).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from PIL import Image

ORACLE_DIR = Path(__file__).resolve().parents[2] / ".venv" / "pro-oracle"

_SERVER = r"""
import base64, io, json, os, random, sys
sys.path.insert(0, sys.argv[1])
out = os.fdopen(os.dup(1), "w")
sys.stdout = sys.stderr  # anything the library prints stays out of the answers
from loguru import logger
logger.remove()
from PIL import Image
import mineru_vl_utils
from mineru_vl_utils import mineru_client as mc
from mineru_vl_utils import post_process as mpp
from mineru_vl_utils.post_process import text_display2inline, text_inline_spacing, text_move_underscores_outside
from mineru_vl_utils.post_process import table_image_processor as tip
from mineru_vl_utils.structs import BLOCK_TYPES, ContentBlock
from mineru_vl_utils.version import __version__

assert mineru_vl_utils.__file__.startswith(sys.argv[1]), mineru_vl_utils.__file__
HELPER = mc.MinerUClientHelper(
    backend="transformers", prompts=mc.DEFAULT_PROMPTS, sampling_params=mc.DEFAULT_SAMPLING_PARAMS,
    layout_image_size=(1036, 1036), min_image_edge=28, max_image_edge_ratio=50, simple_post_process=False,
    handle_equation_block=True, abandon_list=False, abandon_paratext=False, image_analysis=False, debug=False,
    enable_table_formula_eq_wrap=True, enable_cross_page_table_merge=False,
)

def block_in(d):
    b = ContentBlock(d["type"], list(d["bbox"]), angle=d["angle"], content=d["content"],
                     merge_prev=bool(d.get("merge_prev", False)) if d["type"] == "text" else False)
    for key in (tip.TABLE_IMAGE_ABSORBED_KEY, tip.TABLE_IMAGE_TOKEN_MAP_KEY):
        if d.get(key):
            b[key] = d[key]
    return b

def block_out(b):
    return {k: v for k, v in b.items() if k != "scored"}

def page_in(data):
    return Image.open(io.BytesIO(base64.b64decode(data)))

def crop_out(im):
    return {"size": list(im.size), "mode": im.mode, "data": base64.b64encode(im.tobytes()).decode()}

def params_out(p):
    return [p.presence_penalty, p.frequency_penalty, p.no_repeat_ngram_size,
            p.temperature, p.top_k, p.repetition_penalty]

def extract(page, blocks, seed, image_analysis=False):
    random.seed(seed)
    images, prompts, params, indices = HELPER.prepare_for_extract(page, blocks, image_analysis=image_analysis)
    return {"crops": [crop_out(i) for i in images], "prompts": prompts, "params": [params_out(p) for p in params],
            "indices": indices, "blocks": [block_out(b) for b in blocks]}

def op_facts():
    return {"version": __version__, "prompts": mc.DEFAULT_PROMPTS, "system_prompt": mc.DEFAULT_SYSTEM_PROMPT,
            "sampling": {k: params_out(v) for k, v in mc.DEFAULT_SAMPLING_PARAMS.items()},
            "block_types": sorted(BLOCK_TYPES), "angles": mc.ANGLE_MAPPING,
            "dedup_iou": mc.LAYOUT_DEDUPLICATION_IOU_THRESHOLD, "inside": mc.INTERNAL_BLOCK_THRESHOLD,
            "paratext": sorted(mpp.PARATEXT_TYPES)}

def op_layout(output):
    return [block_out(b) for b in HELPER.parse_layout_output(output)]

def op_extract(page, blocks, seed=0, image_analysis=False):
    return extract(page_in(page), [block_in(d) for d in blocks], seed, image_analysis)

def op_post_process(blocks):
    return [block_out(b) for b in HELPER.post_process([block_in(d) for d in blocks])]

def op_text(s):
    s = text_display2inline.try_convert_display_to_inline(s)
    s = text_inline_spacing.try_fix_macro_spacing_in_markdown(s)
    return text_move_underscores_outside.try_move_underscores_outside(s)

def op_equation(s):
    try:
        return mpp._process_equation(s, False)
    except Exception:
        return s  # the chain failed: MinerU keeps the content

def op_put_back(s, tokens):
    return tip.replace_table_image_tokens(s, tokens)

def op_table_formulas(s):
    return tip.replace_table_formula_delimiters(s, enabled=True)

def op_two_step(page, layout, answers, seed=0, image_analysis=False):
    # the client's two_step_extract with the model's answers given: layout, crops, post-process
    page = page_in(page)
    blocks = HELPER.parse_layout_output(layout)
    prepared = extract(page, blocks, seed, image_analysis)
    for idx, answer in zip(prepared["indices"], answers):
        blocks[idx].content = answer
    prepared["final"] = [block_out(b) for b in HELPER.post_process(blocks)]
    return prepared

from mineru_vl_utils.post_process import image_analysis_postprocess as iap
from mineru_vl_utils.post_process import chart_invalid_repetition as cir
from mineru_vl_utils.post_process import mermaid_invalid_edge_lines as mie
from mineru_vl_utils.post_process import mermaid_invalid_subgraph_lines as mis
from mineru_vl_utils.post_process import mermaid_node_id_legalize as mnl
from mineru_vl_utils.post_process import mermaid_repetition as mrep

# Image Analysis answers, whole (process_image_or_chart; a pure_table's HTML) and step by step
IMAGE_ANALYSIS_STEPS = {
    "analyse": iap.process_image_or_chart,
    "pure_table": mpp._convert_pure_table_content_to_html,
    "markdown_html": iap.convert_markdown_table_to_html,
    "malformed_table": iap.has_malformed_markdown_table,
    "chart_has_repetition": lambda s: bool(cir.validate_content_repetition(s)),
    "chart_largest_table": cir.extract_largest_legal_markdown_table,
    "chart_repair": cir.try_fix_chart_invalid_repetition,
    "mermaid_has_repetition": lambda s: bool(mrep.detect_mermaid_repetition_issues(s)),
    "mermaid_legalize": mnl.try_fix_mermaid_node_id_legalization,
    "mermaid_edges": mie.try_fix_mermaid_invalid_edge_lines,
    "mermaid_subgraphs": mis.try_fix_mermaid_invalid_subgraph_lines,
    "mermaid_strict": iap.extract_and_validate_mermaid_strict,
}

def op_image_analysis(step, texts):
    # one answer per text: {"ok": result} or {"error": "Type: message"}
    answers = []
    for text in texts:
        try:
            answers.append({"ok": IMAGE_ANALYSIS_STEPS[step](text)})
        except Exception as exc:
            answers.append({"error": f"{type(exc).__name__}: {exc}"})
    return answers

OPS = {k[3:]: v for k, v in globals().items() if k.startswith("op_")}
for line in sys.stdin:
    request = json.loads(line)
    try:
        reply = {"ok": OPS[request["op"]](**request["args"])}
    except Exception as exc:
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    out.write(json.dumps(reply) + "\n")
    out.flush()
"""


class OracleError(RuntimeError):
    """The oracle's own code raised (the input is one it rejects)."""


class ProOracle:
    """One oracle process; call(op, **args) -> its answer (OracleError when it raised)."""

    def __init__(self, oracle_dir: Path = ORACLE_DIR):
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(oracle_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.facts = self.call("facts")

    def call(self, op: str, **args: Any) -> Any:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Pro oracle exited (code {self._proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise OracleError(reply["error"])
        return reply["ok"]

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)


def available() -> bool:
    return (ORACLE_DIR / "mineru_vl_utils").is_dir()


def png(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image_analysis(oracle: ProOracle, step: str, texts: list[str]) -> list[dict]:
    """The client's Image Analysis step (see IMAGE_ANALYSIS_STEPS in the server) on each text:
    {"ok": its result} or {"error": "Type: message"} where it raised."""
    return oracle.call("image_analysis", step=step, texts=list(texts))


def crop_image(crop: dict) -> Image.Image:
    return Image.frombytes(crop["mode"], tuple(crop["size"]), base64.b64decode(crop["data"]))
