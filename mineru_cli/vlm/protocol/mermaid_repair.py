"""Flowcharts: the repairs the Pro client (mineru-vl-utils 2.x) makes to the model's Mermaid code
so that a renderer accepts it.

In the client's order: edge endpoints that are not legal ids become ids with the text as label
(mermaid_node_id_legalize), edge lines with a single unmatched label pipe are dropped
(mermaid_invalid_edge_lines), subgraphs whose title is not an id get one
(mermaid_invalid_subgraph_lines); then the code is cut out of its fence and its header, arrows
and node labels normalised (extract_and_validate_mermaid_strict).

The three line repairs rebuild the text from str.splitlines(), so any line break becomes "\\n";
a trailing newline is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# --------------------------------------------------------------------------- shared


def _per_line(content: str, fix: Callable[[list[str]], list[str]]) -> str:
    """Apply a fix to the content's lines; "\\n" joins them, a trailing newline stays."""
    fixed = "\n".join(fix(content.splitlines()))
    return fixed + "\n" if content.endswith("\n") else fixed


# --------------------------------------------------------------------------- node ids

_VALID_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DECLARED_ID = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*[\[\(\{]")  # `A[`, `A(`, `A{`
_BIDIRECTIONAL = re.compile(r"<\s*-\s*-\s*>")
_LABELLED_TARGET = re.compile(r"^\|(?P<label>.*?)\|\s*(?P<dst>.+?)\s*$")


def _legal_id(raw: str) -> str:
    """`Top Layer` -> `TopLayer`, `2 nm` -> `n2Nm`: the alphanumeric parts, camel-cased."""
    parts = re.findall(r"[A-Za-z0-9]+", raw)
    if parts:
        candidate = parts[0] + "".join(part.capitalize() for part in parts[1:])
    else:
        candidate = re.sub(r"[^A-Za-z0-9_]", "", raw)
    candidate = candidate or "node"
    return f"n{candidate}" if candidate[0].isdigit() else candidate


class _NodeIds:
    """The ids given to illegal endpoints so far, and every id declared or given."""

    def __init__(self, declared: set[str]):
        self.declared = declared
        self.given: dict[str, str] = {}

    def endpoint(self, token: str) -> str:
        """An edge endpoint with a legal id: a plain illegal one gets a fresh id, labelled with
        its text the first time (`Top Layer` -> `TopLayer["Top Layer"]`). A shaped or quoted
        endpoint is left as written."""
        raw = token.strip()
        if not raw or any(ch in raw for ch in '[](){}"|'):
            return token
        if _VALID_ID.fullmatch(raw):
            return raw
        fixed = self.given.get(raw)
        if fixed is None:
            base = fixed = _legal_id(raw)
            suffix = 2
            while fixed in self.declared or fixed in self.given.values():
                fixed = f"{base}{suffix}"
                suffix += 1
            self.given[raw] = fixed
        if fixed in self.declared:
            return fixed
        self.declared.add(fixed)
        return f'{fixed}["{raw}"]'


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split on `separator` outside quotes, brackets and |edge labels|."""
    parts: list[str] = []
    start = idx = depth = 0
    in_quote = escaped = in_label = False
    while idx < len(text):
        ch = text[idx]
        if escaped:
            escaped = False
        elif in_quote:
            if ch == "\\":
                escaped = True
            elif ch == '"':
                in_quote = False
        elif ch == '"':
            in_quote = True
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth = max(depth - 1, 0)
        elif ch == "|" and depth == 0:
            in_label = not in_label
        elif depth == 0 and not in_label and text.startswith(separator, idx):
            parts.append(text[start:idx])
            idx += len(separator)
            start = idx
            continue
        idx += 1
    parts.append(text[start:])
    return parts


def _target(segment: str, ids: _NodeIds) -> str:
    """The part after an arrow: `|label| B` keeps its label (without parentheses, which some
    parsers reject inside pipes) and a legal destination."""
    stripped = segment.strip()
    match = _LABELLED_TARGET.match(stripped)
    if not match:
        return ids.endpoint(stripped)
    label = re.sub(r" {2,}", " ", match.group("label").replace("(", "").replace(")", "")).strip()
    return f"|{label}| {ids.endpoint(match.group('dst'))}"


def _edge_statement(statement: str, ids: _NodeIds) -> str:
    stripped = statement.strip()
    if "-->" not in stripped or stripped.startswith("%%"):
        return stripped
    parts = _split_top_level(stripped, "-->")
    if len(parts) < 2:
        return stripped
    fixed = ids.endpoint(parts[0].strip())
    for segment in parts[1:]:
        target = _target(segment, ids)
        fixed += f" -->{target}" if target.startswith("|") else f" --> {target}"
    return fixed


def _legalize_lines(lines: list[str]) -> list[str]:
    ids = _NodeIds({m.group(1) for m in (_DECLARED_ID.match(line.strip()) for line in lines) if m})
    out: list[str] = []
    for line in lines:
        # only single-direction edges are rewritten; a bidirectional line stays as written
        if _BIDIRECTIONAL.search(line) or "-->" not in line or line.strip().startswith("%%"):
            out.append(line)
            continue
        statements = _split_top_level(line, ";")
        trailing_semicolon = len(statements) > 1 and not statements[-1].strip()
        if trailing_semicolon:
            statements.pop()
        fixed = [_edge_statement(s, ids) for s in statements if s.strip()]
        if not fixed:
            out.append(line)
            continue
        out.append("  " + "; ".join(fixed) + (";" if trailing_semicolon else ""))
    return out


def legalize_node_ids(content: str) -> str:
    """Edge endpoints that are not Mermaid ids (spaces, punctuation, a leading digit) get an id
    and keep their text as its label; edge lines are re-indented by two spaces."""
    return _per_line(content, _legalize_lines)


# --------------------------------------------------------------------------- edge lines

_VALID_EDGE_LABEL = re.compile(r"-->\s*\|[^|\n]+\|\s*\S")
_SINGLE_PIPE_EDGE = re.compile(r"-->\s*[^|\n]*\|\s*[^|\n]+$")


def _unquoted_pipes(line: str) -> int:
    count = 0
    in_single = in_double = escaped = False
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "'" and not in_double:
            in_single = not in_single
        elif ch == '"' and not in_single:
            in_double = not in_double
        elif ch == "|" and not in_single and not in_double:
            count += 1
    return count


def _is_single_pipe_edge(line: str) -> bool:
    """`G -->node(DRAM)| H`: an edge with one unquoted pipe, which no renderer parses."""
    stripped = line.strip()
    if not stripped or stripped.startswith("%%") or "-->" not in line or "|" not in line:
        return False
    if _VALID_EDGE_LABEL.search(line):
        return False
    return _unquoted_pipes(line) == 1 and _SINGLE_PIPE_EDGE.search(stripped) is not None


def drop_single_pipe_edges(content: str) -> str:
    """Edge lines with an unmatched label pipe removed; `A -->|label| B` stays."""
    return _per_line(content, lambda lines: [line for line in lines if not _is_single_pipe_edge(line)])


# --------------------------------------------------------------------------- subgraphs

_SUBGRAPH_LINE = re.compile(r"^(\s*)subgraph\s+(.+?)\s*$")
_EXPLICIT_SUBGRAPH_ID = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?=[\[\(])")  # `id["Title"]`


def _subgraph_id(title: str, seen: set[str]) -> str:
    """`1) Trigger` -> `sg_1_Trigger`, numbered `_2`, `_3`... when taken."""
    base = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]+", "_", title)).strip("_") or "sg"
    if base[0].isdigit():
        base = f"sg_{base}"
    sid, suffix = base, 2
    while sid in seen:
        sid = f"{base}_{suffix}"
        suffix += 1
    seen.add(sid)
    return sid


def _subgraph_lines(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        match = _SUBGRAPH_LINE.match(line)
        if not match:
            out.append(line)
            continue
        indent, body = match.groups()
        explicit = _EXPLICIT_SUBGRAPH_ID.match(body.strip())
        first = body.split(None, 1)
        if explicit:
            seen.add(explicit.group(1))
        elif first and _VALID_ID.match(first[0]):
            seen.add(first[0])
        elif first:
            escaped_title = body.replace('"', '\\"')
            out.append(f'{indent}subgraph {_subgraph_id(body, seen)}["{escaped_title}"]')
            continue
        out.append(line)
    return out


def fix_subgraph_ids(content: str) -> str:
    """Subgraphs whose title is not an id get one, the title kept as its label:
    `subgraph 1) Trigger` -> `subgraph sg_1_Trigger["1) Trigger"]`."""
    return _per_line(content, _subgraph_lines)


# --------------------------------------------------------------------------- strict extraction

_FENCED_MERMAID = re.compile(r"```mermaid\s*(.*?)\s*```", re.DOTALL)
_FENCED = re.compile(r"```\s*(.*?)\s*```", re.DOTALL)
_BIDIR_PLACEHOLDER = "__MERMAID_BIDIR_ARROW__"
# a node `Id[text]` (ids may hold spaces, which become underscores; never across lines)
_NODE = re.compile(r"([a-zA-Z0-9_\u4e00-\u9fa5\-]+(?:[ \t]+[a-zA-Z0-9_\u4e00-\u9fa5\-]+)*)[ \t]*\[(.*?)\]", re.DOTALL)


def _unfenced(content: str) -> str:
    """The code inside a ```mermaid (or any ```) fence, without a leading "mermaid" word."""
    match = _FENCED_MERMAID.search(content) or _FENCED.search(content)
    code = match.group(1).strip() if match else content.strip()
    return code[7:].strip() if code.lower().startswith("mermaid") else code


def _fix_arrows(code: str) -> str:
    """`- ->`, `-- >`, `- - >` and a bare ` -> ` become `-->`; `<-->` is kept apart first."""
    code = re.sub(r"<\s*-\s*-\s*>", _BIDIR_PLACEHOLDER, code)
    code = re.sub(r"-\s+->", "-->", code)
    code = re.sub(r"--\s+>", "-->", code)
    code = re.sub(r"-\s+-\s+>", "-->", code)
    code = re.sub(r"(?<![-=])\s+->\s+", " --> ", code)
    return code.replace(_BIDIR_PLACEHOLDER, "<-->")


def _fix_node(match: re.Match[str]) -> str:
    """`My Node[say "hi"]` -> `My_Node["say &quot;hi&quot;"]`: spaces in the id become
    underscores, the text is quoted, inner quotes escaped and line breaks written as <br>."""
    raw_id, text = match.group(1).strip(), match.group(2)
    if raw_id.lower().startswith("subgraph ") or text.startswith('"['):
        return match.group(0)  # a subgraph title, or an array-like label: left as written
    node_id = re.sub(r"[ \t]+", "_", raw_id)
    if not text:
        return f"{node_id}[]"
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    text = text.replace('"', "&quot;").replace("\n", "<br>")
    return f'{node_id}["{text}"]'


def strict_mermaid(content: str) -> str:
    """The content as one fenced Mermaid block with its header's typos (grap, flowchar...),
    arrows and node labels fixed; "" for blank content."""
    if not content or not content.strip():
        return ""
    code = _unfenced(content.strip())
    code = re.sub(r"^(grap|grapg|graphh)\b", "graph", code, flags=re.IGNORECASE)
    code = re.sub(r"^(flowchar|flowchartt)\b", "flowchart", code, flags=re.IGNORECASE)
    code = _NODE.sub(_fix_node, _fix_arrows(code))
    return f"```mermaid\n{code}\n```"
