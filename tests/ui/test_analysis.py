"""The dashboard's display tables select and arrange the core's figures: the calibration table narrow enough to show
whole, the interval only where coverage is a check, no group column where there are no groups."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
from tables import audited_groups, small_audit

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.metrics import summarize
from cpa_core.report.worklist import worklist
from cpa_ui.analysis import calibration_table, flagged_table, table_height


def test_calibration_table_shows_the_coverage_interval_only_where_coverage_is_a_check():
    result = audited_groups()[0]  # the split protocol
    split = calibration_table(summarize(result))
    assert list(split.columns[:4]) == ["confidence", "threshold", "coverage", "coverage_ci"]
    entry = summarize(result).level(0.9)
    assert split.loc[split["confidence"] == 0.9, "coverage_ci"].item() == \
        f"{100 * entry.coverage_low:.1f}–{100 * entry.coverage_high:.1f} %"
    release = calibration_table(replace(summarize(result), protocol="release"))
    assert "coverage_ci" not in release.columns  # coverage by construction: no interval to show


def test_calibration_table_leaves_out_what_says_nothing_new():
    """α repeats the confidence level; the open-world bound describes the 'exclude' miss policy only; the warnings are
    said above the table: none is a column, so the table shows whole beside the sidebar."""
    summary = summarize(small_audit(1))
    shown = calibration_table(summary)
    assert not {"alpha", "open_world_bound", "warnings", "coverage_low", "coverage_high"} & set(shown.columns)
    assert len(shown.columns) <= 10 and list(shown["confidence"]) == [0.8, 0.9]
    assert "open_world_bound" in calibration_table(replace(summary, miss_policy="exclude")).columns


def test_table_height_shows_every_row():
    assert table_height(pd.DataFrame({"a": range(3)})) == 35 * 4 + 3
    assert table_height(pd.DataFrame({"a": range(30)})) > 400  # taller than Streamlit's default: no inner scroll


def test_the_flagged_table_has_a_group_column_only_with_groups():
    ungrouped = small_audit(1)
    assert ungrouped.test_split.groups is None
    work = worklist(ungrouped.certificate(0.8), ReleasePolicy(5), ungrouped.config.config_id)
    assert len(work) and "group" in work.columns  # the worklist export keeps its columns
    assert "group" not in flagged_table(work).columns  # the display hides an empty one
    grouped = audited_groups()[0]
    work = worklist(grouped.certificate(0.8), ReleasePolicy(5), grouped.config.config_id)
    assert "group" in flagged_table(work).columns and flagged_table(work)["group"].notna().all()
