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
    # `|label| dst` (the client's `^\|(.*?)\|\s*(.+?)\s*$`, read without its quadratic
    # backtracking): the label ends at the second pipe and something must follow it
    close = stripped.find("|", 1) if stripped.startswith("|") else -1
    if close < 0 or close == len(stripped) - 1:
        return ids.endpoint(stripped)
    label = re.sub(r" {2,}", " ", stripped[1:close].replace("(", "").replace(")", "")).strip()
    return f"|{label}| {ids.endpoint(stripped[close + 1 :].strip())}"


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
    return _unquoted_pipes(line) == 1 and _arrow_then_last_pipe(stripped)


def _arrow_then_last_pipe(line: str) -> bool:
    """The client's `-->\\s*[^|\\n]*\\|\\s*[^|\\n]+$` (quadratic on long chains) as string
    searches: something follows the last pipe, and an arrow lies between it and the pipe before."""
    last = line.rfind("|")
    if last < 0 or last == len(line) - 1:
        return False
    return line.find("-->", line.rfind("|", 0, last) + 1, last) >= 0


def drop_single_pipe_edges(content: str) -> str:
    """Edge lines with an unmatched label pipe removed; `A -->|label| B` stays."""
    return _per_line(content, lambda lines: [line for line in lines if not _is_single_pipe_edge(line)])


# --------------------------------------------------------------------------- subgraphs

_SUBGRAPH_HEAD = re.compile(r"(\s*)subgraph\s+")
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
        # `subgraph <body>` (the client's `^(\s*)subgraph\s+(.+?)\s*$`, without its
        # backtracking on long runs of spaces); a bare `subgraph` stays as written
        head = _SUBGRAPH_HEAD.match(line)
        body = line[head.end() :].rstrip() if head else ""
        if not head or not body:
            out.append(line)
            continue
        indent = head.group(1)
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

_BIDIR_PLACEHOLDER = "__MERMAID_BIDIR_ARROW__"
# ` -> ` not after - or = (the client's `(?<![-=])\\s+->\\s+`). A match can only begin where its
# run of spaces begins, or one space in when the run follows - or =; the look-behinds say so,
# which changes no match and keeps a long run of spaces from being rescanned at each position.
_BARE_ARROW = re.compile(r"(?:(?<![-=\s])|(?<=[-=]\s))\s+->\s+")
_ID_RUN = re.compile(r"[a-zA-Z0-9_\u4e00-\u9fa5\-]+")


def _fenced(content: str, opening: str) -> str | None:
    """The text between the first `opening` and the next ```, stripped; None without both.

    The client's `opening\\s*(.*?)\\s*```` (DOTALL) gives the same text, but its lazy group
    retries the trailing `\\s*` at every character and is cubic on a long run of spaces."""
    start = content.find(opening)
    if start < 0:
        return None
    end = content.find("```", start + len(opening))
    return content[start + len(opening) : end].strip() if end >= 0 else None


def _unfenced(content: str) -> str:
    """The code inside a ```mermaid (or any ```) fence, without a leading "mermaid" word."""
    code = _fenced(content, "```mermaid")
    if code is None:
        code = _fenced(content, "```")
    if code is None:
        code = content.strip()
    return code[7:].strip() if code.lower().startswith("mermaid") else code


def _fix_arrows(code: str) -> str:
    """`- ->`, `-- >`, `- - >` and a bare ` -> ` become `-->`; `<-->` is kept apart first."""
    code = re.sub(r"<\s*-\s*-\s*>", _BIDIR_PLACEHOLDER, code)
    code = re.sub(r"-\s+->", "-->", code)
    code = re.sub(r"--\s+>", "-->", code)
    code = re.sub(r"-\s+-\s+>", "-->", code)
    code = _BARE_ARROW.sub(" --> ", code)
    return code.replace(_BIDIR_PLACEHOLDER, "<-->")


def _fix_node(whole: str, node_id: str, text: str) -> str:
    """`My Node[say "hi"]` -> `My_Node["say &quot;hi&quot;"]`: spaces in the id become
    underscores, the text is quoted, inner quotes escaped and line breaks written as <br>."""
    raw_id = node_id.strip()
    if raw_id.lower().startswith("subgraph ") or text.startswith('"['):
        return whole  # a subgraph title, or an array-like label: left as written
    node_id = re.sub(r"[ \t]+", "_", raw_id)
    if not text:
        return f"{node_id}[]"
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    text = text.replace('"', "&quot;").replace("\n", "<br>")
    return f'{node_id}["{text}"]'


def _fix_nodes(code: str) -> str:
    """Every node `Id[text]` through _fix_node, as the client's
    `re.sub(r"(ID(?:[ \\t]+ID)*)[ \\t]*\\[(.*?)\\]", ..., flags=re.DOTALL)` finds them.

    That pattern is quadratic on a long line of words or of id characters with no `[` after them
    (a looping answer), so the nodes are found by a scan that gives the same matches: an id may
    hold words separated by spaces or tabs; a node is a chain of such words, spaces or tabs, a
    `[` and the text up to the first `]` (across lines). A match begins where the chain does (or
    where the previous node ended): from any word of a chain the rest of the pattern sees the
    same end of the chain, so if the chain's start fails, every later word of it fails too.
    """
    out: list[str] = []
    done = pos = 0
    size = len(code)
    closed = True  # False once no `]` is left: no later `[` can open a node
    while (word := _ID_RUN.search(code, pos)) is not None:
        start, end = word.span()
        while True:  # the chain: words separated by spaces or tabs
            after = end
            while after < size and code[after] in " \t":
                after += 1
            following = _ID_RUN.match(code, after) if after > end else None
            if following is None:
                break
            end = following.end()
        if closed and after < size and code[after] == "[":
            close = code.find("]", after + 1)
            if close >= 0:
                out.append(code[done:start])
                out.append(_fix_node(code[start : close + 1], code[start:end], code[after + 1 : close]))
                done = pos = close + 1
                continue
            closed = False
        pos = after
    out.append(code[done:])
    return "".join(out)


def strict_mermaid(content: str) -> str:
    """The content as one fenced Mermaid block with its header's typos (grap, flowchar...),
    arrows and node labels fixed; "" for blank content."""
    if not content or not content.strip():
        return ""
    code = _unfenced(content.strip())
    code = re.sub(r"^(grap|grapg|graphh)\b", "graph", code, flags=re.IGNORECASE)
    code = re.sub(r"^(flowchar|flowchartt)\b", "flowchart", code, flags=re.IGNORECASE)
    code = _fix_nodes(_fix_arrows(code))
    return f"```mermaid\n{code}\n```"
