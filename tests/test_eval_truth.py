"""The held-out evaluation's ground truth (scripts/eval_real_pages.py) on a real page that is not
one of its pages (tests/data/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from eval_real_pages import truth_text  # noqa: E402


def test_a_word_broken_at_a_lines_end_is_one_word_in_the_truth():
    """elsarticle's two-column page breaks 14 words at a line's end with a hyphen; pdfium reports
    each as U+0002, so a reader that joined the word ("narrow") was counted one error there."""
    text = truth_text(ROOT / "tests" / "data" / "preprint_foot_elstest_3pd_p1.pdf", 1, "stream")
    assert "\x02" not in text
    assert "narrow" in text.replace("\r", "").replace("\n", "")
