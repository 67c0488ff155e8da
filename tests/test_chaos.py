"""The chaos run (tests/chaos.py) in its CI setting: a few dozen pages under every fault kind at
once, every page accounted for. MINERU_CHAOS_PAGES=3000 (and MINERU_CHAOS_SEED) make it a long
soak by hand; `python tests/chaos.py --pages 3000` prints the same figures."""

from __future__ import annotations

import json
import os

import pytest
from chaos import WEIGHTS, Settings, chaos

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_every_page_is_accounted_for_under_faults_at_once(tmp_path):
    pages = int(os.environ.get("MINERU_CHAOS_PAGES", "16"))
    settings = Settings(pages=pages, seed=int(os.environ.get("MINERU_CHAOS_SEED", "20")))
    settings.faults = max(8, pages // 10)
    settings.timeout = max(600.0, pages * 30.0)
    report = chaos(tmp_path / "chaos", settings)
    print(json.dumps(report.as_dict(), indent=1))  # the figures, with pytest -s
    assert report.problems == [], report.problems
    assert (report.lost, report.duplicated, report.wrong, report.wrong_from_cache) == (0, 0, 0, 0)
    assert report.lingering == 0  # a killed main process takes its workers with it
    assert set(report.faults) | report.not_possible == set(WEIGHTS), report.faults  # every kind, at once
    assert report.file_fault_records >= 3  # the broken files (and any truncated one) name their fault
    assert report.peak_rss_main < settings.rss_bound and report.peak_rss_worker < settings.rss_bound
