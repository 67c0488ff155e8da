"""Flowcharts the Pro model wrote in a loop: the signs the Pro client (mineru-vl-utils 2.x,
mermaid_repetition) looks for before it drops a flowchart's Mermaid code.

A looping decoder shows up in Mermaid as node labels that repeat one line, the same edge many
times, node ids that are a blob of repeated pairs (AnAnAoAp...), many edges to one label, or
free text lines repeated. A flowchart with any of these is not worth repairing.
"""

from __future__ import annotations

import itertools
import re

_ID_CHAR = r"[A-Za-z0-9_\u4e00-\u9fa5\-]"
_ID = _ID_CHAR + "+"  # a node id as the client reads it (CJK allowed)
# `A["label"]`. The client's pattern has no look-behind; a match can only begin where an id
# begins (from inside an id the same match would start earlier), so the look-behind changes no
# match and keeps a long run of id characters from being rescanned at each of its positions.
_NODE_LABEL = re.compile(r"(?<!" + _ID_CHAR + r")(?P<node>" + _ID + r')\s*\["(?P<label>(?:[^"\\]|\\.)*)"\]', re.DOTALL)
# a single edge `A --> B`, optionally `A -->|label| B`, with an optional shape after B
_EDGE_LINE = re.compile(
    r"^\s*(?P<src>" + _ID + r")\s*-->"
    r"\s*(?:\|[^|\n]*\|\s*)?"
    r"(?P<dst>" + _ID + r")"
    r"(?:\s*(?:\[[^\]]*\]|\([^\)]*\)|\{[^\}]*\}))?\s*$"
)
# an edge whose destination carries a quoted label: `A --> B["label"]` (the pattern's `\\\\.`
# is the client's: a backslash pair, then any character)
_EDGE_TO_LABEL = re.compile(
    r"^\s*(?P<src>" + _ID + r")\s*-->\s*"
    r"(?P<dst>" + _ID + r")\s*"
    r"\[\"(?P<label>(?:[^\"\\]|\\\\.)*)\"\]\s*$"
)
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_ID_PAIR = re.compile(r"[A-Z][a-z]|[A-Z]{2}")  # the 2-character units of a CamelCase id blob

_MIN_CONSECUTIVE = 8  # a line (or id pair, or edge) this many times is a loop
_MIN_TOTAL_LINES = 20  # a line this many times anywhere in a label or the free text
_MAX_LABEL_LEN = 2000  # a label this long...
_MAX_UNIQUE_RATIO = 0.2  # ...with this few distinct lines
_MIN_SAME_EDGES = 8
_MAX_NODE_ID_LEN = 128


def _real_newlines(text: str) -> str:
    """Literal `\\n` (any number of backslashes) and <br> as newlines, as labels write them."""
    return _BR.sub("\n", re.sub(r"\\+n", "\n", text))


def _longest_run(lines: list[str]) -> int:
    return max((sum(1 for _ in group) for _, group in itertools.groupby(lines)), default=0)


def _most_common_count(lines: list[str]) -> int:
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return max(counts.values(), default=0)


def _pair_counts(node_id: str) -> dict[str, int]:
    """How often each CamelCase pair occurs in an id; with none, each 2-letter window of its
    runs of eight letters or more."""
    counts: dict[str, int] = {}
    for pair in _ID_PAIR.findall(node_id):
        counts[pair] = counts.get(pair, 0) + 1
    if counts:
        return counts
    for chunk in re.findall(r"[A-Za-z]{8,}", node_id):
        for i in range(len(chunk) - 1):
            counts[chunk[i : i + 2]] = counts.get(chunk[i : i + 2], 0) + 1
    return counts


def _bad_node_id(node_id: str) -> bool:
    """An id too long to be real, or one pair repeated eight times (a swallowed chain)."""
    if not node_id:
        return False
    return len(node_id) > _MAX_NODE_ID_LEN or max(_pair_counts(node_id).values(), default=0) >= _MIN_CONSECUTIVE


def _repetitive_label(raw_label: str) -> bool:
    label = _real_newlines(raw_label)
    lines = [line.strip() for line in label.splitlines() if line.strip()]
    if not lines:
        return False
    return (
        _longest_run(lines) >= _MIN_CONSECUTIVE
        or _most_common_count(lines) >= _MIN_TOTAL_LINES
        or (len(label) >= _MAX_LABEL_LEN and len(set(lines)) / len(lines) <= _MAX_UNIQUE_RATIO)
    )


def _labels_repeat(content: str) -> bool:
    return any(
        _bad_node_id(match.group("node")) or _repetitive_label(match.group("label"))
        for match in _NODE_LABEL.finditer(content)
    )


def _same_edge_repeats(lines: list[str]) -> bool:
    counts: dict[str, int] = {}
    for line in lines:
        match = _EDGE_LINE.match(line)
        if match:
            key = f"{match.group('src')}-->{match.group('dst')}"
            counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0) >= _MIN_SAME_EDGES


def _endpoint_id(segment: str) -> str:
    """The node id at the start of one side of an edge (an edge label dropped first)."""
    cleaned = re.sub(r"^\|[^|\n]*\|\s*", "", segment.strip())
    match = re.match(r"^(" + _ID + r")", cleaned)
    return match.group(1) if match else ""


def _edge_ids_repeat(lines: list[str]) -> bool:
    """A bad node id at an end of an edge; a chain `A --> B --> C` is read end by end, since
    Mermaid allows it."""
    for line in lines:
        stripped = line.strip()
        if "-->" not in stripped:
            continue
        if stripped.count("-->") >= 2:
            ids = [_endpoint_id(segment) for segment in stripped.split("-->")]
        else:
            match = _EDGE_LINE.match(line)
            ids = [match.group("src"), match.group("dst")] if match else []
        if any(_bad_node_id(node_id) for node_id in ids):
            return True
    return False


def _edges_share_label(lines: list[str]) -> bool:
    counts: dict[str, int] = {}
    for line in lines:
        match = _EDGE_TO_LABEL.match(line)
        label = match.group("label").strip() if match else ""
        if label:
            counts[label] = counts.get(label, 0) + 1
    return max(counts.values(), default=0) >= _MIN_SAME_EDGES


def _is_structure_line(line: str) -> bool:
    """Blank, a header, subgraph/end, direction, a comment or an edge: not free text."""
    stripped = line.strip()
    lowered = stripped.lower()
    return (
        not stripped
        or lowered.startswith(("graph ", "flowchart ", "subgraph ", "direction ", "%%"))
        or lowered == "end"
        or "-->" in stripped
    )


_TRAILING_PUNCTUATION = "[]()\"',.;:"


def _free_text(line: str) -> str:
    """A free text line without the brackets, quotes and punctuation around it."""
    line = re.sub(r'^[\[\]\(\)"\'\s>]+', "", line.strip())
    # the client's `[...]+$` (quadratic on a long run of spaces) as a strip from the right
    end = len(line)
    while end and (line[end - 1].isspace() or line[end - 1] in _TRAILING_PUNCTUATION):
        end -= 1
    return re.sub(r"\s+", " ", line[:end]).strip()


def _free_text_repeats(lines: list[str]) -> bool:
    """The fallback for labels the label pattern cannot read: the free text lines themselves."""
    texts = [text for text in (_free_text(line) for line in lines if not _is_structure_line(line)) if text]
    return _longest_run(texts) >= _MIN_CONSECUTIVE or _most_common_count(texts) >= _MIN_TOTAL_LINES


def has_mermaid_repetition(content: str) -> bool:
    """Any sign that the model looped while writing this flowchart."""
    lines = _real_newlines(content).splitlines()
    return (
        _labels_repeat(content)
        or _same_edge_repeats(lines)
        or _edge_ids_repeat(lines)
        or _edges_share_label(lines)
        or _free_text_repeats(lines)
    )
