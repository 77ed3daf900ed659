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


# --- an attacker panel ------------------------------------------------------------------------------------------

def test_an_attacker_panel_s_tables_arrange_the_core_s_figures():
    import numpy as np
    from toy_panel import toy_panel

    from cpa_core.report.formatting import fmt_interval
    from cpa_core.report.verdict import panel_verdict
    from cpa_ui.analysis import document_members, members_table, panel_flagged_table, panel_with_policy

    panel = toy_panel()
    policy = ReleasePolicy(3, None, 0.5)
    viewed = panel_with_policy(panel, 0.8, policy)
    assert viewed.config.policy == policy and viewed.config_id != panel.config_id  # the policy is declared
    assert np.array_equal(viewed.certificate(0.8).set_sizes, panel.certificate(0.8).set_sizes)  # no set changes
    verdict = panel_verdict(viewed, 0.8)
    table = members_table(verdict)
    assert table["attacker"].tolist() == list(panel.names)
    assert table["decided"].tolist() == [name == verdict.decided_by for name in panel.names]
    assert table["first_guess_ci"].tolist() == [fmt_interval(m.own.first_guess_low, m.own.first_guess_high)
                                                for m in verdict.members]
    assert table["corrected_bound"].tolist() == [m.remainder_bound for m in verdict.members]
    flagged = panel_flagged_table(panel, 0.8, policy, "id")
    cert = panel.certificate(0.8)
    assert len(flagged) == cert.flags(policy).sum() and "group" not in flagged.columns  # no groups: no column
    row = int(np.flatnonzero(cert.members[0].set_sizes != cert.members[1].set_sizes)[0])
    one = document_members(cert, row, policy)
    assert one["set_size"].tolist() == [int(m.set_sizes[row]) for m in cert.members]
    smallest = int(np.argmin([m.set_sizes[row] for m in cert.members]))
    assert one["smallest_set"].tolist() == [i == smallest for i in range(2)]
    assert one["largest_linkage"].sum() == 1 and one.loc[one["largest_linkage"], "linkage_probability"].item() == \
        max(float(m.linkage[row]) for m in cert.members)
    assert one["flagged_by"].tolist() == [str(m.flag_reasons(policy)[row]) for m in cert.members]


def test_an_edited_text_under_each_attacker_says_whether_it_reaches_k():
    from cpa_ui.analysis import rescored_members

    table = rescored_members(("a", "b"), [2, 5], [11, 4], 11)
    assert table.to_dict(orient="records") == [
        {"attacker": "a", "set_size_before": 2, "indicative_after": 11, "reaches_k": "yes"},
        {"attacker": "b", "set_size_before": 5, "indicative_after": 4, "reaches_k": "no"}]
