"""The Pro model's Image Analysis answers against the Pro client (mineru-vl-utils 2.x, in a
subprocess: tests/vlm/pro_oracle.py): our image_analysis.analyse() and pure_table_html() and each
repair they use, field by field, on answers shaped like the model's (hand-written) and on a
seeded generator's mutations of them.

The unit tests at the end check each repair on a case it changes, without the oracle.
"""

from __future__ import annotations

import os
import random
import time

import pro_oracle
import pytest
from helpers import oracle_missing

from mineru_cli.vlm.protocol import chart_repair, markdown_table, mermaid_repair, mermaid_repetition
from mineru_cli.vlm.protocol.image_analysis import ImageAnalysis, analyse, pure_table_html

# $MINERU_IMAGE_ANALYSIS_CASES raises the generated answers for a longer run
FUZZ_CASES = int(os.environ.get("MINERU_IMAGE_ANALYSIS_CASES", "3000"))
FUZZ_SEED = int(os.environ.get("MINERU_IMAGE_ANALYSIS_SEED", "18"))


@pytest.fixture(scope="module")
def oracle():
    oracle_missing("the Pro oracle, mineru-vl-utils 2.x in .venv/pro-oracle,", pro_oracle.available())
    o = pro_oracle.ProOracle()
    yield o
    o.close()


# --------------------------------------------------------------------------- answers


def answer(kind: str | None, content: str | None, caption: str | None = "", sub_kind: str | None = "") -> str:
    """An answer as the model writes it (a None field is left out)."""
    parts = []
    if kind is not None:
        parts.append(f"<|class_start|>{kind}<|class_end|>")
    if sub_kind is not None:
        parts.append(f"<|sub_class_start|>{sub_kind}<|sub_class_end|>")
    if caption is not None:
        parts.append(f"<|caption_start|>{caption}<|caption_end|>")
    if content is not None:
        parts.append(f"<|content_start|>{content}<|content_end|>")
    return "\n".join(parts)


BAR_TABLE = "| Year | Sales | Profit |\n| --- | ---: | :---: |\n| 2021 | 12.5 | 3.1 |\n| 2022 | 14.0 | 3.9 |"
FLOW = """graph TD
    A[formula] --> B[formula valid]
    A --> C[formula valid]
    B --> D[Formula Unifier]
    C --> E[Formula Refiner (自带Unify效果)]
    D --> F[公式后处理]
    E --> F"""
SOLAR = """graph TD
  Sunlight --> |Textured front surface\\nAnti-reflective coating (SiNx)| Top Layer
  Top Layer --> |Tunnel oxide-2 nm| Bottom Layer
  Bottom Layer --> |Electrons| Rear contact; Rear contact --> Sunlight;
"""
SUBGRAPHS = """graph LR
  subgraph 1) Trigger
    Webhook["Webhook"]
    Form["Form"]
  end
  subgraph 2)_n8n_WorkFlow_Engine
    Engine["n8n Workflow Engine"]
  end
  subgraph 1) Trigger
    Again["Again"]
  end
  subgraph ok_id["Explicit"]
  end
  subgraph 4) "Actions"
  end
  Webhook --> Engine
"""
EDGES = """graph TD
  A -->|ok| B
  G -->node(DRAM)| H
  C --> D
  E -->|v1.0| F
  %% X -->a| Y
  P --> "q|" Q
"""
REPEATED_EDGES = "graph LR\n" + "\n".join("  A --> B" for _ in range(9))
REPEATED_LABEL = 'graph TD\n  A["x"] --> C["注册登记\\n' + "\\n".join(["完成注册登记"] * 10) + '"]'
ID_BLOB = "graph TD\n  A --> " + "AnAoApAq" * 20 + "\n  B --> C"
SAME_LABEL_EDGES = "graph TD\n" + "\n".join(f'  N{i} --> M{i}["成长社区"]' for i in range(9))
FREE_TEXT = "graph TD\n  A[start\n" + "\n".join("> top_valent" for _ in range(9)) + "\n]"
REPEATED_ROWS = BAR_TABLE + "\n" + "\n".join(["| 2023 | 15.0 | 4.2 |"] * 4)
LONG_REPEATED_ROWS = BAR_TABLE + "\n" + "| 2023 | a fairly long cell of text | 4.2 |\n" * 2
REPEATED_FRAGMENTS = BAR_TABLE + "\n| 2024 | " + "; ".join(["north"] * 9) + " | 1 |"
OVERLONG_CELL = BAR_TABLE + "\n| 2024 | " + "x y " * 80 + " | 1 |"
TOKEN_RUN = BAR_TABLE + "\n| 2024 | 0 0 0 0 0 0 0 0 0 | 1 |"
CHAR_RUN = BAR_TABLE + "\n| 2024 | " + "9" * 25 + " | 1 |"
WHOLE_REPEAT = (BAR_TABLE + "\n") * 2
PIPE_ESCAPE = "| a | b \\| c |\n| --- | --- |\n| 1 | 2 |\n| 3 | 4 | 5 |"
NEWLINES = BAR_TABLE + "\n\n\n\n\n\n| 1 | 2 | 3 |"
NO_SEPARATOR = "| a | b |\n| 1 | 2 |\n| 3 | 4 |"
RAGGED = "| a | b |\n| --- | --- |\n| 1 | 2 | 3 |"
FULLWIDTH = "｜ 年份 ｜ 销量 ｜\n｜ --- ｜ --- ｜\n｜ 2021 ｜ 12 ｜\n" + "｜ 2022 ｜ 13 ｜\n" * 3
OTSL = "<fcel>Year<fcel>Sales<nl><fcel>2021<fcel>12<nl><fcel>2022<lcel><nl>"


def _varied(n: int) -> str:
    """n characters with no run, repeated token or fragment in them."""
    return ("".join(f"w{i} " for i in range(100)))[:n].strip().ljust(n, "z")


def _at_and_below(make) -> list[str]:
    return [make(-1), make(0)]


# every threshold of the repetition checks, one below and at it (a check off by one shows here)
BOUNDARIES = [
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + _varied(301 + d) + " | 1 |"),  # cell length
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + "a::" * (21 + d) + " | 1 |"),  # '::' in a cell
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + "ab;" * (31 + d) + " | 1 |"),  # ';' in a cell
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + ", ".join(["east"] * (8 + d)) + " | 1 |"),
    *_at_and_below(lambda d: BAR_TABLE + "\n" + ("| " + _varied(22 + d) + " | 1 |\n") * 2),  # long line twice
    *_at_and_below(lambda d: "\n".join([BAR_TABLE] + ["| 2029 | 1 | 2 |"] * (3 + d))),  # short line thrice
    *_at_and_below(lambda d: "\n\n".join([BAR_TABLE] + ["| a long row that is not repeated | 1 |"] * (4 + d))),
    *_at_and_below(lambda d: "|ab|" * (20 + d)),  # the whole answer repeated, 80 characters
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + "Q" * (20 + d) + " | 1 |"),  # character run
    *_at_and_below(lambda d: BAR_TABLE + "\n| 2024 | " + " ".join(["ok"] * (8 + d)) + " | 1 |"),  # token run
    *_at_and_below(lambda d: BAR_TABLE + "\n" * (5 + d) + "| x | y | z |"),  # newlines
    *_at_and_below(lambda d: "graph LR\n" + "\n".join("  A --> B" for _ in range(8 + d))),  # same edge
    *_at_and_below(lambda d: 'graph TD\n  A["' + "\\n".join(["step"] * (8 + d)) + '"]'),  # label run
    *_at_and_below(lambda d: 'graph TD\n  A["' + "\\n".join(["a", "b"] * (20 + d)) + '"]'),  # label lines total
    *_at_and_below(lambda d: 'graph TD\n  A["' + "\\n".join(["abcd" * 50, "xyz"] * (10 + d)) + '"]'),  # long label
    *_at_and_below(lambda d: "graph TD\n  A --> " + ("abcdefg1" * 20)[: 129 + d]),  # node id length
    *_at_and_below(lambda d: "graph TD\n  A --> " + "Xy" * (8 + d)),  # id pairs
    *_at_and_below(lambda d: "graph TD\n  A --> " + "abcdefgh" + "ab" * (7 + d)),  # id letter windows
    *_at_and_below(lambda d: "graph TD\n" + "\n".join(f'  N{i} --> M{i}["same"]' for i in range(8 + d))),
    *_at_and_below(lambda d: "graph TD\n" + "\n".join(["> free text", "other"] * (20 + d))),  # free text total
    *_at_and_below(lambda d: "graph TD\n" + "\n".join(["> free text"] * (8 + d))),  # free text run
]

HAND_WRITTEN = [
    answer("natural_image", "", "A cat on a sofa."),
    answer("Natural_Image", "ignored content", " A dog.  ", "photo"),
    answer("chart", BAR_TABLE, "Sales by year", "bar"),
    answer("CHART", BAR_TABLE + "\n\nNote: in millions", "Sales", "Line"),
    answer("chart", REPEATED_ROWS, "Sales", "bar"),
    answer("chart", LONG_REPEATED_ROWS, "Sales", "bar"),
    answer("chart", REPEATED_FRAGMENTS, "Regions", "pie"),
    answer("chart", OVERLONG_CELL, "", "bar"),
    answer("chart", TOKEN_RUN, "", "bar"),
    answer("chart", CHAR_RUN, "", "bar"),
    answer("chart", WHOLE_REPEAT, "", "bar"),
    answer("chart", PIPE_ESCAPE, "", "bar"),
    answer("chart", NEWLINES, "", "bar"),
    answer("chart", NO_SEPARATOR, "", "bar"),
    answer("chart", RAGGED, "", "bar"),
    answer("chart", FULLWIDTH + "| x | y | z |\n| x | y | z |\n| x | y | z |", "", "bar"),
    answer("chart", "Just a sentence about the chart.", "cap", "bar"),
    answer("chart", "", "only a caption", "bar"),
    answer("flowchart", FLOW, "Formula pipeline", "flowchart"),
    answer("flowchart", "```mermaid\n" + FLOW + "\n```", "fenced"),
    answer("flowchart", "```\ngrapg TD\n  A - -> B\n  B -> C\n  C <--> D\n```", "typos"),
    answer("flowchart", 'mermaid\nflowchar LR\n  My Node[say "hi"] --> X["[1, 2]"]\n  Y[]', "ids"),
    answer("flowchart", SOLAR, "solar"),
    answer("flowchart", SUBGRAPHS, "subgraphs"),
    answer("flowchart", EDGES, "edges"),
    answer("flowchart", REPEATED_EDGES, "loop"),
    answer("flowchart", REPEATED_LABEL, "loop"),
    answer("flowchart", ID_BLOB, "loop"),
    answer("flowchart", SAME_LABEL_EDGES, "loop"),
    answer("flowchart", FREE_TEXT, "loop"),
    answer("flowchart", "", "empty flowchart"),
    answer("flowchart", "graph TD\n  A[line one\nline two] --> B", "multiline"),
    answer("pure_table", BAR_TABLE, "table"),
    answer("pure_table", OTSL, "otsl"),
    answer("pure_table", "<table><tr><td>x</td></tr></table>", "html"),
    answer("pure_table", "not a table", "text"),
    answer("pure_formula", "E = mc^2", "formula"),
    answer("chemical", "C1=CC=CC=C1", "benzene"),
    answer("diagram", "some content", "a diagram"),
    answer("diagram", "", "a diagram with no content"),
    answer(None, BAR_TABLE, "no class"),
    "",
    "plain text with no tags at all",
    "<|class_start|>chart<|class_end|><|content_start|>" + BAR_TABLE,  # cut off inside the content
    "<|class_start|>flowchart<|class_end|><|content_start|>" + FLOW,
    "<|class_start|>chart<|class_end|><|content_start|>a<|content_start|>b",  # two starts, no end
    "<|class_start|>chart<|content_start|>" + BAR_TABLE + "<|content_end|>",  # class never closed
    "<|class_end|>chart<|class_start|><|caption_start|>x",
    answer("chart", "| a | b |\n| --- | --- |\n| `x|y` | 2 |\n| \\`x | y |", "code", "bar"),
    answer("chart", "| a | b |\n|---|---|\n| 1 | 2 |\n| 1 | 2 |\n| 1 | 2 |\n| ¦ 3 ¦ 4 ¦ |", "", "bar"),
    *(answer(kind, content, "boundary", "bar") for content in BOUNDARIES for kind in ("chart", "flowchart")),
    # fences with nothing inside, arrows two spaces after - or =, free text told apart by punctuation
    *(answer("flowchart", code) for code in ("```mermaid```", "``````", "```mermaid\n```", "````x```", "```mermaid")),
    answer("flowchart", "graph TD\n  A=  -> B\n  C-  -> D\n  E -> F\n  G\t->\tH"),
    answer("flowchart", "graph TD\n" + "\n".join(["> step:", "> step", "(step).", "step;"] * 2)),
]


def _as_dict(result: ImageAnalysis) -> dict:
    return {"class": result.kind, "sub_class": result.sub_kind, "caption": result.caption, "content": result.content}


def _contents(texts: list[str]) -> list[str]:
    """The content part of each answer (what the step functions see), whole text when untagged."""
    out = []
    for text in texts:
        start = text.find("<|content_start|>")
        body = text[start + len("<|content_start|>") :] if start >= 0 else text
        out.append(body.split("<|content_end|>")[0])
    return out


def _ours_or_error(fn, text):
    try:
        return {"ok": fn(text)}
    except Exception as exc:  # noqa: BLE001 - compared with the oracle's own failures
        return {"error": type(exc).__name__}


# every step our code has, beside the client's step of the same name (pro_oracle.IMAGE_ANALYSIS_STEPS)
STEPS = {
    "analyse": lambda s: _as_dict(analyse(s)),
    "pure_table": pure_table_html,
    "markdown_html": markdown_table.markdown_table_to_html,
    "malformed_table": markdown_table.has_malformed_table,
    "chart_has_repetition": chart_repair.has_repetition,
    "chart_largest_table": chart_repair.largest_legal_table,
    "chart_repair": chart_repair.repair_chart_repetition,
    "mermaid_has_repetition": mermaid_repetition.has_mermaid_repetition,
    "mermaid_legalize": mermaid_repair.legalize_node_ids,
    "mermaid_edges": mermaid_repair.drop_single_pipe_edges,
    "mermaid_subgraphs": mermaid_repair.fix_subgraph_ids,
    "mermaid_strict": mermaid_repair.strict_mermaid,
}


def compare(oracle, step: str, texts: list[str]) -> list[tuple[str, dict, dict]]:
    """The texts on which our step and the client's disagree: (text, ours, theirs)."""
    theirs = []
    for i in range(0, len(texts), 500):
        theirs.extend(pro_oracle.image_analysis(oracle, step, texts[i : i + 500]))
    mismatches = []
    for text, their in zip(texts, theirs):
        ours = _ours_or_error(STEPS[step], text)
        if "error" in their:  # the same failure, by exception type
            their = {"error": their["error"].split(":")[0]}
        if ours != their:
            mismatches.append((text, ours, their))
    return mismatches


def _report(step: str, texts: list[str], mismatches: list) -> str:
    shown = "\n".join(f"{t!r}\n  ours:   {o!r}\n  theirs: {th!r}" for t, o, th in mismatches[:3])
    return f"{step}: {len(mismatches)} of {len(texts)} differ\n{shown}"


# --------------------------------------------------------------------------- hand-written


@pytest.mark.parametrize("step", ["analyse"])
def test_hand_written_answers_match_the_client(oracle, step):
    mismatches = compare(oracle, step, HAND_WRITTEN)
    assert not mismatches, _report(step, HAND_WRITTEN, mismatches)


def test_hand_written_answers_exercise_every_branch():
    """The hand-written answers reach each outcome (so the conformance above is not vacuous)."""
    results = [analyse(text) for text in HAND_WRITTEN]
    kinds = {r.kind for r in results}
    assert {"natural_image", "chart", "flowchart", "pure_table", "pure_formula", "chemical", ""} <= kinds
    charts = [r for r, t in zip(results, HAND_WRITTEN) if r.kind == "chart"]
    assert any(r.content == "" for r in charts) and any(r.content for r in charts)
    assert any(r.content != _contents([t])[0].strip() and r.content for r, t in zip(charts, HAND_WRITTEN))
    flows = [r for r in results if r.kind == "flowchart"]
    assert any(r.content.startswith("```mermaid\n") for r in flows) and any(r.content == "" for r in flows)


def test_boundaries_straddle_each_threshold():
    """Each pair of boundary answers falls on the two sides of a repetition check."""
    for below, at in zip(BOUNDARIES[::2], BOUNDARIES[1::2]):
        checks = (chart_repair.has_repetition, mermaid_repetition.has_mermaid_repetition)
        assert [check(below) for check in checks] != [check(at) for check in checks], at


@pytest.mark.parametrize("step", sorted(set(STEPS) - {"analyse"}))
def test_each_step_matches_the_client(oracle, step):
    texts = _contents(HAND_WRITTEN) + [BAR_TABLE, OTSL, FLOW, SOLAR, SUBGRAPHS, EDGES, REPEATED_EDGES, FULLWIDTH]
    mismatches = compare(oracle, step, texts)
    assert not mismatches, _report(step, texts, mismatches)


# --------------------------------------------------------------------------- generated

WORDS = ["Year", "Sales", "2021", "12.5", "北京", "上海", "销量", "x", "α", "😀", "n/a", "a-b", "1,000", "3.1%", "`c`"]
NODE_TEXTS = ["start", "Top Layer", "2 nm", "x-y", "数据", 'say "hi"', "a (b)", "[1, 2]", "", "end", "a|b", "q;r"]
NODE_IDS = ["A", "B", "node_1", "Top Layer", "2nm", "x-y", "数据", "subgraph", "An" * 9, "a b c", "_", "9"]
SUBGRAPH_TITLES = ["1) Trigger", "ok_id", 'id["T"]', "中文 组", '"q"', "2)_x", "-", "A B", "x(y)"]
ARROWS = ["-->", "- ->", "-- >", "->", "<-->", "==>", "-.->", "--->"]
SPECIALS = list('|-[]"\n`\\>;:(){} \t') + ["\r\n", "\u2028", "\udc80", "｜", "¦", "中", "<br>", "\\n", "::", "%%"]
SPECIALS.append("```")
KINDS = ["natural_image", "chart", "flowchart", "pure_table", "pure_formula", "chemical", "Chart", " flowchart ", "x"]


def _row(rng: random.Random, width: int) -> str:
    cells = [rng.choice(WORDS) for _ in range(width)]
    line = " | ".join(cells)
    return rng.choice([f"| {line} |", line, f"|{line}", f"| {line} |  "])


def gen_table(rng: random.Random) -> str:
    width = rng.randint(1, 5)
    separator = [
        rng.choice(["---", ":---:", "---:", "-----"] if rng.random() < 0.85 else ["--", "- - -"]) for _ in range(width)
    ]
    lines = [_row(rng, width), "| " + " | ".join(separator) + " |"]
    lines += [_row(rng, width) for _ in range(rng.randint(0, 6))]
    mutation = rng.randrange(16)  # 11..15: left as written
    if mutation == 0 and len(lines) > 2:  # a row repeated, as a looping decoder does
        lines += [lines[-1]] * rng.randint(1, 9)
    elif mutation == 1:  # a cell of repeated fragments
        sep = rng.choice(["; ", ", ", " :: ", " | "])
        lines.append(f"| {sep.join([rng.choice(WORDS + ['north', 'abc'])] * rng.randint(6, 12))} | 1 |")
    elif mutation == 2:
        lines.append("| " + rng.choice(["9", "a", "Z"]) * rng.randint(15, 30) + " | 1 |")
    elif mutation == 3:
        lines.append("| " + " ".join([rng.choice(WORDS)] * rng.randint(6, 10)) + " |")
    elif mutation == 4:
        lines.insert(rng.randrange(len(lines) + 1), "\n" * rng.randint(1, 6))
    elif mutation == 5:
        lines = lines * rng.randint(2, 3)
    elif mutation == 6 and len(lines) > 1:
        del lines[1]  # the separator lost
    elif mutation == 7:
        lines.append("| " + " | ".join(WORDS[: rng.randint(1, 8)]) + " |")  # another width
    elif mutation == 8:
        lines = [line.replace("|", rng.choice(["｜", "¦", "\\|"])) if rng.random() < 0.5 else line for line in lines]
    elif mutation == 9:
        lines.append("| " + "word " * rng.randint(50, 80) + "| 1 |")
    elif mutation == 10:
        lines.append(rng.choice(["Source: survey", "", "| --- | --- |", "|", "||", "| a |"]))
    return "\n".join(lines)


def gen_mermaid(rng: random.Random) -> str:
    header = rng.choice(
        ["graph TD", "graph LR", "flowchart TB", "grap TD", "grapg LR", "flowchar TD", "mermaid\ngraph TD", ""]
    )
    lines = [header]
    for _ in range(rng.randint(1, 8)):
        choice = rng.randrange(10)
        src, dst = rng.choice(NODE_IDS), rng.choice(NODE_IDS)
        arrow = rng.choice(ARROWS)
        if choice < 4:
            label = rng.choice(["", f"|{rng.choice(NODE_TEXTS)}|", f"| {rng.choice(NODE_TEXTS)} (x) |", "|only"])
            shape = rng.choice(["", f"[{rng.choice(NODE_TEXTS)}]", f'["{rng.choice(NODE_TEXTS)}"]', "(round)", "{d}"])
            lines.append(f"  {src} {arrow}{label} {dst}{shape}")
        elif choice == 4:
            lines.append(f"  {src} --> {dst} --> {rng.choice(NODE_IDS)}; {dst} --> {src};")
        elif choice == 5:
            lines.append("  subgraph " + rng.choice(SUBGRAPH_TITLES))
        elif choice == 6:
            lines.append("  end")
        elif choice == 7:
            lines.append(f"  G -->node({rng.choice(NODE_TEXTS)})| H")
        elif choice == 8:
            lines.append(f"  {src}[{rng.choice(NODE_TEXTS)}\n{rng.choice(NODE_TEXTS)}]")
        else:
            lines.append(f"  %% {rng.choice(NODE_TEXTS)}")
    mutation = rng.randrange(8)
    if mutation == 0:
        lines += [lines[-1]] * rng.randint(7, 10)
    elif mutation == 1:
        lines.append('  A["' + "\\n".join([rng.choice(NODE_TEXTS) or "x"] * rng.randint(7, 22)) + '"]')
    elif mutation == 2:
        lines.append("  A --> " + rng.choice(["AnAoApAq", "Xy", "QQ"]) * rng.randint(4, 40))
    elif mutation == 3:
        lines += [f'  N{i} --> M{i}["same"]' for i in range(rng.randint(6, 10))]
    elif mutation == 4:
        lines += ["> top_valent"] * rng.randint(6, 22)
    code = "\n".join(lines)
    fence = rng.randrange(4)
    if fence == 1:
        code = f"```mermaid\n{code}\n```"
    elif fence == 2:
        code = f"```\n{code}\n```"
    return code + rng.choice(["", "\n", "\n\n"])


def mutate_chars(rng: random.Random, text: str) -> str:
    """A few insertions, deletions and duplications of characters the parsers care about."""
    chars = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(3)
        at = rng.randint(0, len(chars))
        if op == 0:
            chars.insert(at, rng.choice(SPECIALS))
        elif op == 1 and chars:
            del chars[min(at, len(chars) - 1)]
        elif chars:
            start = min(at, len(chars) - 1)
            chars[start:start] = chars[start : start + rng.randint(1, 20)]
    return "".join(chars)


def gen_answer(rng: random.Random) -> str:
    kind = rng.choice(KINDS)
    body = rng.choice([gen_table, gen_mermaid])(rng) if rng.random() < 0.9 else rng.choice(["", " ", "E=mc^2", OTSL])
    if rng.random() < 0.2:
        body = mutate_chars(rng, body)
    text = answer(
        kind if rng.random() < 0.95 else None,
        body,
        rng.choice(["", "A chart of sales.", " 图1：销量 ", "cap<|caption_end|>x"]),
        rng.choice(["", "bar", "Line", "flowchart", None]),
    )
    tag_mutation = rng.randrange(10)
    if tag_mutation == 0:  # cut off: the model hit its token limit
        text = text[: rng.randint(0, len(text))]
    elif tag_mutation == 1:
        text = text.replace("<|content_end|>", "")
    elif tag_mutation == 2:
        text = text.replace("<|content_end|>", "<|content_end")
    elif tag_mutation == 3:
        text = text + "<|content_start|>" + body
    elif tag_mutation == 4:
        text = mutate_chars(rng, text)
    if rng.random() < 0.15:  # a long run of what a looping decoder repeats, somewhere
        at = rng.randint(0, len(text))
        run = rng.choice([" ", "\t", " \t", "\n ", "a-", "a ", "x |", "- ", "[", "|"]) * rng.randint(20, 200)
        text = text[:at] + run + text[at:]
    return text


def test_generated_answers_match_the_client(oracle, capsys):
    rng = random.Random(FUZZ_SEED)
    texts = [gen_answer(rng) for _ in range(FUZZ_CASES)]
    contents = _contents(texts)
    figures = {}
    failures = []
    for step in STEPS:
        cases = texts if step == "analyse" else contents
        mismatches = compare(oracle, step, cases)
        figures[step] = (len(cases), len(mismatches))
        if mismatches:
            failures.append(_report(step, cases, mismatches))
    # how often the generator reaches each outcome: a generator that never repairs proves nothing
    results = [analyse(t) for t in texts]
    changed_charts = sum(1 for c in contents if chart_repair.repair_chart_repetition(c) != c)
    dropped_flows = sum(1 for r in results if r.kind == "flowchart" and not r.content)
    with capsys.disabled():
        total = sum(n for n, _ in figures.values())
        bad = sum(m for _, m in figures.values())
        print(f"\nimage analysis conformance: seed {FUZZ_SEED}, {FUZZ_CASES} answers,", end=" ")
        print(f"{total} step cases, {bad} mismatches")
        print(f"  charts repaired: {changed_charts}, flowcharts dropped: {dropped_flows}")
    assert not failures, "\n\n".join(failures)
    assert changed_charts > FUZZ_CASES // 100 and dropped_flows > FUZZ_CASES // 100


def long_runs(n: int) -> dict[str, str]:
    """Answers with a long run of one thing: words, id characters, spaces, brackets, pipes,
    arrows (what a looping decoder writes, and where a regular expression can backtrack)."""
    return {
        "words": "graph TD\n" + "a " * n,
        "id characters": "graph TD\n" + "a-" * n,
        "leading spaces": " " * n + "| a |",
        "spaces in a row": "| a |" + " " * n + "|",
        "spaces after a separator": "---|---" + " " * n + "x",
        "spaces in a fence": "```mermaid\n" + " " * n + "x",
        "blank lines in a fence": "```\n" + " \n" * n + "x\n```",
        "spaces in a subgraph title": "subgraph a" + " " * n + "b",
        "a chain with one pipe": "A" + " --> B" * (n // 6) + "|",
        "spaces in an edge target": "A -->|x| a" + " " * n + "b",
        "spaces before a bare arrow": "A" + " " * n + "-> B",
        "spaces and tabs": "A" + " \t" * n + "x",
        "open brackets": "a[" * n,
        "long edge ids": "a" * n + " --> " + "b" * n + " [",
        "escaped quotes in a label": 'A["' + 'x\\"' * n,
        "CJK": "中文" * n,
        "pipes": "| " * n,
        "dashes": "- " * n,
        "angle brackets": "< " * n,
        "punctuation at the end": "> x" + " ," * n + "y",
    }


@pytest.mark.parametrize("step", sorted(STEPS))
def test_long_runs_match_the_client(oracle, step):
    """The shapes our code reads without the client's backtracking (short enough for the client)."""
    texts = [text for n in (7, 60, 300) for text in long_runs(n).values()]
    if step == "analyse":
        texts = [answer(kind, text, "cap", "bar") for text in texts for kind in ("chart", "flowchart")]
    mismatches = compare(oracle, step, texts)
    assert not mismatches, _report(step, texts, mismatches)


def test_long_runs_take_linear_time():
    """40,000-character runs: the client's regular expressions take minutes on some of these
    (the cubic one: spaces in a fence); ours read each in well under a second on a quiet machine,
    so 10 s each leaves room for a loaded one."""
    for name, text in long_runs(40_000).items():
        for kind in ("chart", "flowchart"):
            started = time.perf_counter()
            analyse(answer(kind, text))
            pure_table_html(text)
            assert time.perf_counter() - started < 10, (name, kind)


# --------------------------------------------------------------------------- the repairs, one by one


def test_analyse_reads_the_fields():
    result = analyse(answer(" Chart ", BAR_TABLE, "  Sales by year ", "BAR"))
    assert result == ImageAnalysis(kind="chart", sub_kind="bar", caption="Sales by year", content=BAR_TABLE)


def test_analyse_keeps_an_unfinished_content():
    assert analyse("<|class_start|>pure_formula<|class_end|><|content_start|> x^2").content == " x^2"


def test_chemical_content_is_dropped():
    assert analyse(answer("chemical", "C1=CC=CC=C1", "benzene")).content == ""


def test_chart_with_repeated_rows_keeps_the_table():
    fixed = chart_repair.repair_chart_repetition(REPEATED_ROWS)
    assert fixed == (
        "| Year | Sales | Profit |\n| --- | --- | --- |\n| 2021 | 12.5 | 3.1 |\n| 2022 | 14.0 | 3.9 |\n"
        "| 2023 | 15.0 | 4.2 |\n| 2023 | 15.0 | 4.2 |\n| 2023 | 15.0 | 4.2 |\n| 2023 | 15.0 | 4.2 |"
    )


def test_chart_rows_with_looping_cells_are_dropped():
    fixed = chart_repair.repair_chart_repetition(REPEATED_FRAGMENTS)
    assert "north" not in fixed and fixed.count("\n") == 3


def test_chart_without_repetition_is_kept():
    assert chart_repair.repair_chart_repetition(BAR_TABLE) == BAR_TABLE
    assert not chart_repair.has_repetition(BAR_TABLE)


def test_chart_with_a_malformed_table_is_emptied():
    assert analyse(answer("chart", RAGGED)).content == ""
    assert analyse(answer("chart", NO_SEPARATOR)).content == ""


def test_fullwidth_pipes_are_read_in_the_repair():
    assert chart_repair.largest_legal_table(FULLWIDTH).startswith("| 年份 | 销量 |\n| --- | --- |\n| 2021 | 12 |")


def test_markdown_table_html():
    assert markdown_table.markdown_table_to_html("| a | b <c> |\n|---|---|\n| 1 \\| 2 | 3 |") == (
        "<table><tr><th>a</th><th>b &lt;c&gt;</th></tr><tr><td>1 | 2</td><td>3</td></tr></table>"
    )
    assert markdown_table.markdown_table_to_html(RAGGED) is None


def test_pure_table_html_reads_markdown_html_and_otsl():
    assert pure_table_html(BAR_TABLE).startswith("<table><tr><th>Year</th>")
    assert pure_table_html(OTSL) == (
        "<table><tr><td>Year</td><td>Sales</td></tr><tr><td>2021</td><td>12</td></tr>"
        '<tr><td colspan="2">2022</td></tr></table>'
    )
    assert pure_table_html(" <TABLE><tr></tr></table> ") == "<TABLE><tr></tr></table>"
    assert pure_table_html("not a table") == ""


def test_mermaid_repetition_is_detected():
    for looping in (REPEATED_EDGES, REPEATED_LABEL, ID_BLOB, SAME_LABEL_EDGES, FREE_TEXT):
        assert mermaid_repetition.has_mermaid_repetition(looping), looping
    assert not mermaid_repetition.has_mermaid_repetition(FLOW)
    assert analyse(answer("flowchart", REPEATED_EDGES)).content == ""


def test_illegal_node_ids_get_ids_and_labels():
    assert mermaid_repair.legalize_node_ids("graph TD\n  Top Layer --> |oxide (2 nm)| 2 nm\n") == (
        'graph TD\n  TopLayer["Top Layer"] -->|oxide 2 nm| n2Nm["2 nm"]\n'
    )


def test_single_pipe_edges_are_dropped():
    assert mermaid_repair.drop_single_pipe_edges(EDGES) == (
        'graph TD\n  A -->|ok| B\n  C --> D\n  E -->|v1.0| F\n  %% X -->a| Y\n  P --> "q|" Q\n'
    )


def test_subgraph_titles_get_ids():
    fixed = mermaid_repair.fix_subgraph_ids(SUBGRAPHS)
    assert '  subgraph sg_1_Trigger["1) Trigger"]' in fixed
    assert '  subgraph sg_1_Trigger_2["1) Trigger"]' in fixed
    assert '  subgraph sg_4_Actions["4) \\"Actions\\""]' in fixed
    assert "  subgraph 2)_n8n_WorkFlow_Engine" not in fixed and '  subgraph ok_id["Explicit"]' in fixed


def test_strict_mermaid_fixes_header_arrows_and_labels():
    assert mermaid_repair.strict_mermaid('```\ngrapg TD\n  My Node[say "hi"] - -> B[x\ny]\n  B -> C <--> D\n```') == (
        '```mermaid\ngraph TD\n  My_Node["say &quot;hi&quot;"] --> B["x<br>y"]\n  B --> C <--> D\n```'
    )
