"""Equations: MinerU's repairs of the model's LaTeX, in MinerU's order, and display wrapping."""

from __future__ import annotations

import re
from typing import Callable, Sequence

from .profiles import PROFILE_2509, Profile


class _BadArrays(ValueError):
    """\\end{array} before its \\begin{array}: MinerU leaves such LaTeX alone."""


def strip_equation_delimiters(latex: str) -> str:
    """Pro: drop a leading \\[ and a trailing \\] the model wrote itself."""
    s = latex.strip()
    if s[:2] == "\\[":
        s = s[2:]
    if s[-2:] == "\\]":
        s = s[:-2]
    return s.strip()


# \left / \right tokens as MinerU counts them. Note "\right." matches \right + any character
# (so \rightarrow counts as a \right): kept, because it decides which equations are rewritten.
_LEFT_PATTERNS = [
    r"\\left\\lbrace",
    r"\\left\\lVert",
    r"\\left\\lvert",
    r"\\left\\rvert",
    r"\\left\\rVert",
    r"\\left\\vert",
    r"\\left\\Vert",
    r"\\left\\lfloor",
    r"\\left\\lbrack",
    r"\\left\\langle",
    r"\\left\|",
    r"\\left\\\|",
    r"\\left\[",
    r"\\left\]",
    r"\\left\(",
    r"\\left\\{",
    r"\\left\\}",
    r"\\left\.",
]
_RIGHT_PATTERNS = [
    r"\\right\\rbrace",
    r"\\right\\lVert",
    r"\\right\\lvert",
    r"\\right\\rvert",
    r"\\right\\rVert",
    r"\\right\\vert",
    r"\\right\\Vert",
    r"\\right\\rfloor",
    r"\\right\\rbrack",
    r"\\right\\rangle",
    r"\\right\|",
    r"\\right\\\|",
    r"\\right\]",
    r"\\right\[",
    r"\\right\)",
    r"\\right\\}",
    r"\\right\\{",
    r"\\right.",
]
_LEFT_RE = re.compile("|".join(_LEFT_PATTERNS))
_RIGHT_RE = re.compile("|".join(_RIGHT_PATTERNS))
_LEFT_RIGHT_SPLIT = re.compile("(" + "|".join(_LEFT_PATTERNS + _RIGHT_PATTERNS) + ")")
_ARRAY_SPLIT = re.compile(r"(\&|\\\\|\\begin{array}\s*{[a-zA-Z\s]*}|\\end{array})")
_BEGIN, _END = "\\begin{array}", "\\end{array}"

# the delimiters that pair up; "\left." and "\right." pair with anything on the other side
_PAIRS = {
    "\\left\\lbrace": "\\right\\rbrace",
    "\\left\\lVert": "\\right\\lVert",
    "\\left\\lvert": "\\right\\lvert",
    "\\left\\vert": "\\right\\vert",
    "\\left\\Vert": "\\right\\Vert",
    "\\left\\lfloor": "\\right\\rfloor",
    "\\left\\lbrack": "\\right\\rbrack",
    "\\left\\langle": "\\right\\rangle",
    "\\left|": "\\right|",
    "\\left\\|": "\\right\\|",
    "\\left[": "\\right]",
    "\\left]": "\\right[",
    "\\left(": "\\right)",
    "\\left)": "\\right(",
    "\\left\\{": "\\right\\}",
    "\\left\\}": "\\right\\{",
    "\\left/": "\\right/",
}
_LEFTS = set(_PAIRS) | {"\\left\\rvert", "\\left\\rVert", "\\left."}
_RIGHTS = set(_PAIRS.values()) | {"\\right\\rvert", "\\right\\rVert", "\\right."}


def _pairs(left: str, right: str) -> bool:
    if not (left == "\\left." or left in _PAIRS):
        return False
    if not (right == "\\right." or right in _PAIRS.values()):
        return False
    return left == "\\left." or right == "\\right." or _PAIRS[left] == right


# the (array number, cell number) a node belongs to; None: in no array
_CellKey = tuple[int, int] | None


def _cell_keys(nodes: list[str]) -> list[_CellKey]:
    """For each node, the (array, cell) it belongs to, innermost array first.

    Reproduces MinerU's numbering: the counter restarts from the number of the array just
    closed, so two arrays can share a number and their cells are then balanced together.
    With no array at all only the first node gets a key (MinerU's behaviour).
    """
    arrays: list[tuple[int, int, int]] = []  # (number, start, end), in order of closing
    stack: list[tuple[int, int]] = []  # (number, start) of the arrays open
    counter = 0
    for i, node in enumerate(nodes):
        if _BEGIN in node:
            counter += 1
            stack.append((counter, i))
        elif node == _END:
            if not stack:
                raise _BadArrays(nodes)
            counter, start = stack.pop()
            arrays.append((counter, start, i))
    if stack:
        raise _BadArrays(nodes)
    if not arrays:
        return [None]
    nested = [[b[0] for b in arrays if a[1] < b[1] and a[2] > b[2]] for a in arrays]
    order = sorted(range(len(arrays)), key=lambda k: len(nested[k]), reverse=True)
    by_number = {arrays[k][0]: arrays[k] for k in order}
    keys: list[_CellKey] = [None] * len(nodes)
    for k in order:
        number, start, end = arrays[k]
        hidden: set[int] = set()
        for inner in nested[k]:
            _, s, e = by_number[inner]
            hidden.update(range(s, e + 1))
        cell = 0
        for i in range(start, end + 1):
            if i in hidden:
                continue
            if nodes[i] in ("&", "\\\\"):
                cell += 1
            elif keys[i] is None:
                keys[i] = (number, cell)
    return keys


def _balance(pieces_per_node: list[list[str]]) -> None:
    stack: list[tuple[str, int, int]] = []
    for n, pieces in enumerate(pieces_per_node):
        for k, piece in enumerate(pieces):
            if piece not in _LEFTS and piece not in _RIGHTS:
                continue
            if stack and _pairs(stack[-1][0], piece):
                stack.pop()
            else:
                stack.append((piece, n, k))
    for piece, n, k in stack:
        if "\\left" in piece:
            pieces_per_node[n][k] = piece + " \\right."
        elif "\\right" in piece:
            pieces_per_node[n][k] = "\\left. " + piece


def fix_left_right(latex: str) -> str:
    """Close unmatched \\left/\\right with \\right./\\left., cell by cell inside arrays.

    Only applies when the counts differ and \\begin{array}/\\end{array} counts agree. Like
    MinerU, it also removes the whitespace around & and \\\\ when it rewrites.
    Raises _BadArrays when arrays close before they open.
    """
    if len(_LEFT_RE.findall(latex)) == len(_RIGHT_RE.findall(latex)):
        return latex
    if latex.count(_BEGIN) != latex.count(_END):
        return latex
    nodes = [n.strip() for n in _ARRAY_SPLIT.split(latex.strip()) if n]
    keys = _cell_keys(nodes)
    groups: dict[_CellKey, list[int]] = {}
    for i, key in enumerate(keys):
        node = nodes[i]
        if node in ("&", "\\\\") or _BEGIN in node or _END in node:
            continue
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        lefts = sum(len(_LEFT_RE.findall(nodes[i])) for i in members)
        rights = sum(len(_RIGHT_RE.findall(nodes[i])) for i in members)
        if lefts == rights:
            continue
        pieces = [[p for p in _LEFT_RIGHT_SPLIT.split(nodes[i]) if p.strip()] for i in members]
        _balance(pieces)
        for i, node_pieces in zip(members, pieces):
            nodes[i] = "".join(node_pieces)
    return "".join(nodes)


_DOUBLE_SUBSCRIPT = re.compile(r"_\s*\{([^{}]|\{[^{}]*\})*\}\s*_\s*\{([^{}]|\{[^{}]*\})*\}")


def fix_double_subscript(latex: str) -> str:
    """MinerU removes both groups of a doubled subscript `_{a}_{b}` (invalid LaTeX)."""
    return _DOUBLE_SUBSCRIPT.sub("", latex)


def fix_colon_equals(latex: str) -> str:
    return latex.replace("\\eqqcolon", "=:").replace("\\coloneqq", ":=")


_BIG = ["big", "bigr", "bigm", "bigl", "bigg", "biggr", "biggm", "biggl"]
_BIG_ALL = _BIG + [b.capitalize() for b in _BIG]


def _big_rules() -> list[tuple[str, str]]:
    """`\\big{)}` -> `\\big)` and friends, in MinerU's order, with its quirks:
    \\biggm/\\biggl (and capitals) turn {[} / {]} into `\\[` / `\\]`, and \\Biggm{\\rangle}
    and \\Biggm{\\}} are left alone."""
    rules: list[tuple[str, str]] = []

    def add(cmds: list[str], delims: list[str], out: Callable[[str, str], str] = lambda cmd, d: d) -> None:
        for cmd in cmds:
            for spaced in ("", " "):
                for d in delims:
                    rules.append((f"\\{cmd}{spaced}{{{d}}}", f"\\{cmd}{out(cmd, d)}"))

    add(_BIG_ALL, [")", "("])
    add([c for c in _BIG_ALL if c != "Biggm"], ["\\}", "\\{"])
    add(_BIG_ALL, ["|"])
    add(_BIG_ALL, ["\\|"])
    add(_BIG_ALL, ["]", "["], lambda cmd, d: ("\\" + d) if cmd.lower() in ("biggm", "biggl") else d)
    add([c for c in _BIG_ALL if c != "Biggm"], ["\\rangle", "\\langle"], lambda cmd, d: d + " ")
    rules.append(("\\bigtimes", "\\times"))
    return rules


BIG_RULES = _big_rules()


def fix_big_delimiters(latex: str) -> str:
    for old, new in BIG_RULES:
        if old in latex:
            latex = latex.replace(old, new)
    return latex


def fix_less_than(latex: str) -> str:
    return latex.replace("<", "< ")


def fix_unbalanced_braces(latex: str) -> str:
    """Delete `{` and `}` that have no partner; braces after an odd run of backslashes are escaped."""
    open_at: list[int] = []
    drop: set[int] = set()
    backslashes = 0
    for i, ch in enumerate(latex):
        if ch in "{}" and backslashes % 2 == 0:
            if ch == "{":
                open_at.append(i)
            elif open_at:
                open_at.pop()
            else:
                drop.add(i)
        backslashes = backslashes + 1 if ch == "\\" else 0
    drop.update(open_at)
    return "".join(ch for i, ch in enumerate(latex) if i not in drop)


def fix_equation(latex: str, profile: Profile = PROFILE_2509) -> str:
    """MinerU's LaTeX repairs for an `equation` block, in its order.

    With the 2509 profile a malformed array order leaves the equation untouched (MinerU aborts
    the whole chain); the Pro profile only skips the \\left/\\right step.
    """
    original = latex
    if profile.strip_equation_delimiters:
        latex = strip_equation_delimiters(latex)
    try:
        latex = fix_left_right(latex)
    except _BadArrays:
        if not profile.tolerate_bad_arrays:
            return original
    latex = fix_double_subscript(latex)
    latex = fix_colon_equals(latex)
    latex = fix_big_delimiters(latex)
    latex = fix_less_than(latex)
    return fix_unbalanced_braces(latex)


def wrap_display_equation(latex: str) -> str:
    """`\\[\\n ... \\n\\]` unless already delimited."""
    latex = latex.strip()
    if not latex.startswith("\\["):
        latex = "\\[\n" + latex
    if not latex.endswith("\\]"):
        latex = latex + "\n\\]"
    return latex


_TAG = re.compile(r"\\tag\s*\{([^}]*)\}")


def combine_equations(contents: Sequence[str]) -> str:
    """Several equations as one `array`; with more than one \\tag, tags become `(n)`."""
    if sum(len(_TAG.findall(c)) for c in contents) > 1:
        contents = [_TAG.sub(r"(\1)", c) for c in contents]
    return "\\begin{array}{l} " + "".join(c + " \\\\ " for c in contents) + "\\end{array}"
