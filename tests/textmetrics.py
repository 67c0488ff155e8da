"""Character error rate against the examples' ground truth."""

import re

from rapidfuzz.distance import Levenshtein


def squash(text: str) -> str:
    """Drop all whitespace: line breaks and spacing are layout, not content, and the CJK page has
    no spaces at all. Reading order still counts: a misplaced line costs its length twice."""
    return re.sub(r"\s+", "", text)


def cer(hypothesis: str, truth: str) -> float:
    truth = squash(truth)
    return Levenshtein.distance(squash(hypothesis), truth) / max(1, len(truth))


def record_text(record: dict) -> str:
    return "\n".join(b["text"] for b in record["blocks"])
