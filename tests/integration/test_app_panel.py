"""An attacker panel on the dashboard under Streamlit's AppTest: the Threat model's multiselect and its default panel,
two attackers calibrated on the sample data (one progress line each), the attackers side by side with the one that
decided on every page that shows results, a document's worst over them, the panel's certificate report (its figures
those of the panel's verdict, a redaction verified outside its search), the History's one entry per panel and its
reopening, and the Redact page sending a panel to the command line."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import replace
from html import escape
from html.parser import HTMLParser

import numpy as np
import pytest
from apptest import PAGES, assert_clean, calibrate, choose_attackers, metric, new_app, shown

from cpa_core.audit.panel import default_panel, panel_config_id
from cpa_core.report.formatting import fmt_interval, fmt_percent
from cpa_core.report.verdict import panel_verdict
from cpa_ui import nav

PANEL = ("tfidf", "lexical_fusion")
KNOWLEDGE = "K1"  # the sample's documents no attacker flags are linked within the acceptable rate: one attacker decides


def _members_frame(at):
    """The attackers side by side, as a page shows them."""
    frames = [frame.value for frame in at.dataframe if "corrected_bound" in frame.value.columns]
    assert len(frames) == 1, [list(frame.value.columns) for frame in at.dataframe]
    return frames[0]


def _policy(at):
    """The release policy the pages show the results under."""
    from cpa_core.audit.policy import ReleasePolicy

    return ReleasePolicy(at.session_state["cpa.flag_below"], at.session_state["cpa.leakage_threshold"],
                         at.session_state["cpa.acceptable_linkage"])


def _expected(at):
    """The panel's verdict at the level and under the policy the pages show, as the core computes it."""
    from cpa_ui.analysis import panel_with_policy

    confidence = at.session_state["cpa.confidence"]
    return panel_verdict(panel_with_policy(at.session_state["cpa.run"].panel, confidence, _policy(at)), confidence)


def _assert_side_by_side(at, verdict) -> None:
    table = _members_frame(at)
    assert table["attacker"].tolist() == list(PANEL)
    for row, member in zip(table.to_dict(orient="records"), verdict.members, strict=True):
        own = member.own
        assert row["first_guess_rate"] == pytest.approx(own.first_guess_rate)
        assert row["first_guess_ci"] == fmt_interval(own.first_guess_low, own.first_guess_high)
        assert row["n_flagged"] == member.n_flagged
        assert row["corrected_bound"] == pytest.approx(member.remainder_bound)
        assert row["own_verdict"] == own.title
        assert row["decided"] == (member.attacker == verdict.decided_by)
    said = " ".join(shown(m) for m in at.markdown)
    assert f"Decided by {verdict.decided_by}" in said


@pytest.fixture(scope="module")
def panel_history(tmp_path_factory):
    """An audit history of this module's own."""
    path = tmp_path_factory.mktemp("panel-history") / "history.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CPA_HISTORY", str(path))
        yield path


@pytest.fixture(scope="module")
def panel_app(panel_history, sample_paths):
    """One session with the sample data calibrated by a panel of two attackers."""
    at = calibrate(new_app().run(), knowledge=KNOWLEDGE, attackers=PANEL)
    assert_clean(at)
    return at


def test_the_attacker_choice_is_a_multiselect_whose_default_is_the_default_panel(sample):
    from cpa_core.attack.registry import get_spec
    from cpa_ui.attackers import declare_panel

    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    assert_clean(at)
    expected = default_panel(sample["documents"], sample["profiles"])
    assert len(expected) > 1 and tuple(at.multiselect(key="w.threat.attackers").value) == expected
    data, threat = at.session_state["cpa.data"], at.session_state["cpa.threat"]
    assert threat.attackers == expected
    declared = declare_panel(data, threat)
    for name in expected:  # one form per attacker, each with its parameters
        for param in get_spec(name).params:
            assert f"w.threat.param.{name}.{param.name}" in at.session_state
    assert declared.config_id == panel_config_id(declared.members)
    captions = " ".join(shown(c) for c in at.caption)
    assert f"Configuration id {declared.config_id} (the panel of {len(expected)} attackers" in captions
    for member in declared.members:  # every attacker's id, and its own declared configuration
        assert f"{member.config.attacker.name} {member.config.config_id}" in captions
    assert len(at.info) >= len(expected)

    # one attacker: its own configuration id, as a single attacker's audit always had
    choose_attackers(at, "tfidf")
    assert_clean(at)
    single = declare_panel(at.session_state["cpa.data"], at.session_state["cpa.threat"])
    assert not single.is_panel and single.config_id == single.config.config_id
    assert f"Configuration id {single.config_id}. " in " ".join(shown(c) for c in at.caption)
    # none: said, not a crash
    choose_attackers(at)
    assert not at.exception and any("at least one attacker" in shown(e) for e in at.error)


def test_each_attacker_of_a_panel_runs_with_a_progress_line_of_its_own(sample_paths, monkeypatch):
    """The panel's audit draws one progress bar per attacker, each ending on that attacker's calibration."""
    import streamlit as st

    from cpa_core.audit.project import declare_audit, load_config
    from cpa_ui import cache

    drawn = []

    class Bar:
        def __init__(self, text):
            self.texts = [text]
            drawn.append(self)

        def progress(self, value, text):
            self.texts.append(text)

    monkeypatch.setattr(st, "progress", lambda value, text: Bar(text))
    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    declared = tuple(declare_audit(project, registry, attacker=name, knowledge=KNOWLEDGE, documents=documents)
                     for name in PANEL)
    panel = cache.panel_audit.__wrapped__("progress-test", documents, registry, declared)
    assert panel.names == PANEL and len(drawn) == 2
    for i, (bar, name) in enumerate(zip(drawn, PANEL), 1):
        assert all(text.startswith(f"Attacker {i} of 2, {name}: ") for text in bar.texts)
        assert "calibrated on" in bar.texts[-1] and len(bar.texts) > 2  # the attack's own steps in between


def test_a_panel_of_two_is_calibrated_and_recorded(panel_app, panel_history):
    from cpa_core.store.history import list_audits

    at = panel_app
    run = at.session_state["cpa.run"]
    assert run.is_panel and run.names == PANEL
    assert run.config_id == panel_config_id(run.panel.members) and run.key.endswith(run.config_id)
    assert [member.config.attacker.name for member in run.panel.members] == list(PANEL)
    listed = list_audits(panel_history)
    assert listed["attacker"].tolist() == list(PANEL) and set(listed["panel"]) == {run.config_id}
    assert run.member_ids == tuple(listed["id"])


@pytest.mark.parametrize("page", [nav.CALIBRATE, nav.EXPLORE, nav.FLAGGED, nav.REPORT])
def test_the_attackers_are_side_by_side_with_the_one_that_decided(panel_app, page):
    at = panel_app.switch_page(page).run()
    assert_clean(at)
    verdict = _expected(at)
    assert verdict.remainder_bound is not None and verdict.decided_by == "tfidf"  # what the sample gives at K1
    _assert_side_by_side(at, verdict)
    assert any(verdict.headline in shown(alert) for alert in [*at.warning, *at.success])


def test_every_page_renders_a_panel_and_every_number_has_a_help_text(panel_app):
    at = panel_app
    for page in ["app.py", *PAGES]:
        at.switch_page(page).run()
        assert_clean(at)
        for element in at.metric:
            assert element.help, f"metric '{element.label}' on {page} has no help text"
    at.switch_page("app.py").run()
    assert any("flagged by at least one of the 2 attackers" in shown(i) for i in at.info)
    assert any("a panel of 2 attackers" in re.sub(r"\\(.)", r"\1", link.proto.label) for link in at.get("page_link"))


def test_each_page_shows_the_certificate_of_the_attacker_chosen(panel_app):
    at = panel_app
    run = at.session_state["cpa.run"]
    confidence = at.session_state["cpa.confidence"]
    at.switch_page(nav.EXPLORE).run()
    for name in reversed(PANEL):  # the choice is shared by the pages
        at.selectbox(key="w.explore.member").set_value(name).run()
        assert_clean(at)
        cert = run.panel.member(name).certificate(confidence)
        assert metric(at, "Median set") == f"{int(np.median(cert.set_sizes)):,}"
    at.switch_page(nav.CALIBRATE).run()
    assert at.selectbox(key="w.calibrate.member").value == PANEL[0]  # the last chosen, on every page
    at.selectbox(key="w.calibrate.member").set_value(PANEL[1]).run()
    assert_clean(at)


def test_flagged_documents_are_those_any_attacker_flags_with_the_worst_over_them(panel_app):
    at = panel_app.switch_page(nav.FLAGGED).run()
    assert_clean(at)
    run = at.session_state["cpa.run"]
    confidence = at.session_state["cpa.confidence"]
    policy = _policy(at)
    cert = run.panel.certificate(confidence)
    table = next(frame.value for frame in at.dataframe if "set_size_by" in frame.value.columns)
    ids = cert.members[0].split.table.doc_ids.astype(str)
    assert set(table["doc_id"].astype(str)) == set(ids[cert.flags(policy)])
    for row in table.head(20).to_dict(orient="records"):
        i = int(np.flatnonzero(ids == str(row["doc_id"]))[0])
        assert row["set_size"] == cert.set_sizes[i] and row["set_size_by"] == PANEL[cert.smallest_by[i]]
        assert row["linkage_probability"] == pytest.approx(cert.linkage[i], abs=1e-6)
        assert row["linkage_by"] == PANEL[cert.linkage_by[i]]
        worst = cert.members[cert.linkage_by[i]]  # the interval and the first guess of the attacker that gave it
        assert row["linkage_low"] == pytest.approx(worst.linkage_interval.low[i], abs=1e-6)
        assert row["linkage_high"] == pytest.approx(worst.linkage_interval.high[i], abs=1e-6)
        assert row["linkage_low"] <= row["linkage_probability"] <= row["linkage_high"]
        assert row["first_guess"] == str(worst.split.table.candidate_ids[worst.split.table.candidates[i, 0]])
        assert set(re.findall(r"(\w+) \(", row["flagged_by"])) == {name for name, member in zip(PANEL, cert.members)
                                                                   if member.flags(policy)[i]}
    # the document opened: under each attacker, the worst marked
    doc_id = at.selectbox(key="w.flagged.drilldown").value
    i = int(np.flatnonzero(ids == str(doc_id))[0])
    members = next(frame.value for frame in at.dataframe if "smallest_set" in frame.value.columns)
    assert members["attacker"].tolist() == list(PANEL)
    assert members["set_size"].tolist() == [int(member.set_sizes[i]) for member in cert.members]
    assert members["smallest_set"].tolist() == [j == cert.smallest_by[i] for j in range(len(PANEL))]
    assert members["largest_linkage"].tolist() == [j == cert.linkage_by[i] for j in range(len(PANEL))]
    # the drill-down shows the chosen attacker's certificate; the edited text is re-scored under every attacker
    at.selectbox(key="w.flagged.member").set_value(PANEL[1]).run()
    assert_clean(at)
    assert metric(at, "Set size |C|") == f"{int(cert.members[1].set_sizes[i]):,}"
    rescored = next(frame.value for frame in at.dataframe if "indicative_after" in frame.value.columns)
    assert rescored["attacker"].tolist() == list(PANEL)
    assert rescored["set_size_before"].tolist() == [int(member.set_sizes[i]) for member in cert.members]
    assert any("cpa redact" in shown(i) for i in at.info)  # no suggestion searched against one attacker here


def test_compare_shows_the_panel_s_attackers_side_by_side(panel_app):
    from cpa_ui.analysis import kpis

    at = panel_app.switch_page(nav.COMPARE).run()
    assert_clean(at)
    run = at.session_state["cpa.run"]
    confidence = at.session_state["cpa.confidence"]
    policy = _policy(at)
    table = next(frame.value for frame in at.dataframe if "label" in frame.value.columns)
    assert table["label"].tolist() == list(PANEL)
    assert table["n_flagged"].tolist() == [kpis(member, confidence, policy).n_flagged for member in run.results]
    assert at.selectbox(key="w.compare.attacker").options == list(PANEL)  # one attacker for the comparisons


class _Report(HTMLParser):
    """The members table, the redaction table and the links of a report."""

    def __init__(self):
        super().__init__()
        self.tables, self.links, self.table, self.cell = {}, [], None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table = attrs.get("id") or attrs.get("class", "")
            self.tables[self.table] = []
        elif tag == "tr" and self.table is not None:
            self.tables[self.table].append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = ""
        elif tag == "a":
            self.links.append(attrs["href"])

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.table][-1].append(self.cell.strip())
            self.cell = None
        elif tag == "table":
            self.table = None


REDACTION = {"held_out": "bm25", "source_config_id": "abc123def456",
             "attackers": [{"attacker": "tfidf", "held_out": False,
                            "before": {"first_guess": 0.31, "low": 0.27, "high": 0.35, "n": 500},
                            "after": {"first_guess": 0.06, "low": 0.04, "high": 0.09, "n": 480}},
                           {"attacker": "lexical_fusion", "held_out": False, "before": None,
                            "after": {"first_guess": 0.12, "low": 0.09, "high": 0.15, "n": 480}},
                           {"attacker": "bm25", "held_out": True,
                            "before": {"first_guess": 0.28, "low": 0.24, "high": 0.32, "n": 500},
                            "after": {"first_guess": 0.08, "low": 0.05, "high": 0.11, "n": 480}}]}


def test_the_panel_report_states_the_panel_s_verdict_and_links_each_attacker_s_report(panel_app, downloads):
    at = panel_app.switch_page(nav.REPORT).run()
    assert_clean(at)
    run = at.session_state["cpa.run"]
    verdict = _expected(at)
    name = next(n for n in downloads if n.endswith("-panel-report.html"))
    assert name == f"cpa-{verdict.config_id}-panel-report.html"
    report = downloads[name]().decode("utf-8")
    parser = _Report()
    parser.feed(report)
    header, *rows = parser.tables["members"]
    assert "98.75 % bound, corrected for 2" in header[5]
    for row, member in zip(rows, verdict.members, strict=True):
        own = member.own
        assert row[:7] == [member.attacker, fmt_percent(own.first_guess_rate),
                           fmt_interval(own.first_guess_low, own.first_guess_high), f"{member.n_flagged:,}",
                           fmt_percent(member.remainder_first_guess), fmt_percent(member.remainder_bound), own.title]
        assert row[7] == ("decided" if member.attacker == verdict.decided_by else "")
    assert escape(f"Decided by {verdict.decided_by}: its bound on what the panel leaves, "
                  f"{fmt_percent(verdict.remainder_bound)}, is the highest of the 2 attackers'.") in report
    assert "1 − 0.025/2" in report and "Bonferroni" in report
    assert "A redacted release" not in report  # this audit has none
    links = [f"members/{member}/report.html" for member in PANEL]
    assert [link for link in parser.links if link.startswith("members/")][:2] == links
    with zipfile.ZipFile(io.BytesIO(downloads[f"cpa-{verdict.config_id}-panel-reports.zip"]())) as archive:
        assert sorted(archive.namelist()) == sorted(["report.html", *links])
        for member, link in zip(run.panel.members, links):  # each attacker's own report, at its level and policy
            own = archive.read(link).decode("utf-8")
            assert "Re-identification risk certificate" in own and member.config.attacker.name in own
    from cpa_ui.pdf import pdf_unavailable

    if pdf_unavailable() is None:  # the same report on paper
        assert downloads[f"cpa-{verdict.config_id}-panel-report.pdf"]().startswith(b"%PDF")
    worklist = next(n for n in downloads if n.endswith("-panel-worklist.csv"))
    assert worklist == f"cpa-{verdict.config_id}-panel-worklist.csv"
    # each attacker's own exports below, behind the choice of attacker
    assert any(n.endswith("-records.jsonl") for n in downloads)


def test_the_report_page_and_the_panel_report_show_a_redaction_verified_outside_its_search(panel_app, downloads):
    from cpa_core.report.html import REDACTION_TITLE, rate_text

    at = panel_app
    run = at.session_state["cpa.run"]
    at.session_state["cpa.run"] = replace(run, redaction=REDACTION)  # as reopened from a redacted release's panel
    try:
        at.switch_page(nav.REPORT).run()
        assert_clean(at)
        assert REDACTION_TITLE in [h.value for h in at.subheader]
        table = next(frame.value for frame in at.dataframe if "held_out" in frame.value.columns)
        assert table["attacker"].tolist() == ["tfidf", "lexical_fusion", "bm25"]
        assert table["held_out"].tolist() == [False, False, True]
        assert table["first_guess_after"].tolist() == pytest.approx([0.06, 0.12, 0.08])
        assert any("bm25" in shown(c) and "never consulted" in shown(c) for c in at.caption)
        report = downloads[next(n for n in downloads if n.endswith("-panel-report.html"))]().decode("utf-8")
        parser = _Report()
        parser.feed(report)
        rows = parser.tables["keep redaction"][1:]
        assert rows == [[item["attacker"],
                         "held out: never consulted by the search" if item["held_out"] else "consulted by the search",
                         rate_text(*(None,) * 4) if item["before"] is None else
                         rate_text(*(item["before"][k] for k in ("first_guess", "low", "high", "n"))),
                         rate_text(*(item["after"][k] for k in ("first_guess", "low", "high", "n")))]
                        for item in REDACTION["attackers"]]
        assert rows[1][2] == "not audited" and rows[0][2] == "31.0 % (27.0–35.0 %, 500 documents)"
        assert "abc123def456" in report
    finally:
        at.session_state["cpa.run"] = run


def test_the_redact_page_sends_a_panel_to_the_command_line(panel_app):
    at = panel_app.switch_page(nav.REDACT).run()
    assert_clean(at)
    assert any("cpa redact" in shown(i) and "attacker panel" in shown(i) for i in at.info)
    assert not at.button  # nothing here redacts against one attacker of the panel


def test_history_lists_the_panel_as_one_entry_and_reopens_it(panel_app, panel_history):
    at = panel_app
    calibrated = at.session_state["cpa.run"]
    at.switch_page(nav.HISTORY).run()
    assert_clean(at)
    listed = at.dataframe[0].value
    assert len(listed) == 1 and listed["attacker"].iloc[0] == f"panel: {', '.join(PANEL)}"
    assert listed["config_id"].iloc[0] == calibrated.config_id
    assert listed["members"].iloc[0] == ", ".join(f"{name} (audit {i})"
                                                  for name, i in zip(PANEL, calibrated.member_ids))
    members = next(frame.value for frame in at.dataframe if "attacker" in frame.value.columns and len(frame.value) == 2)
    assert members["attacker"].tolist() == list(PANEL) and members["id"].tolist() == list(calibrated.member_ids)
    at.button(key="history.reopen").click().run()
    assert_clean(at)
    reopened = at.session_state["cpa.run"]
    assert reopened is not calibrated and reopened.is_panel and reopened.names == PANEL
    assert reopened.config_id == calibrated.config_id and reopened.member_ids == calibrated.member_ids
    for before, after in zip(calibrated.results, reopened.results):
        assert np.array_equal(before.certificate(0.9).set_sizes, after.certificate(0.9).set_sizes)
    assert any(f"Audits {', '.join(map(str, calibrated.member_ids))} are the current audit" in shown(s)
               for s in at.success)
    for page in PAGES:  # every page works on the reopened panel
        at.switch_page(page).run()
        assert not at.exception, (page, [shown(e) for e in at.exception])
    at.switch_page(nav.EXPLORE).run()
    _assert_side_by_side(at, _expected(at))


def test_a_panel_attacks_on_a_local_cluster_with_every_attacker_that_can_run_there(panel_history):
    from cpa_core.attack.registry import get_spec
    from cpa_ui.cache import panel_audit

    panel_audit.clear()  # a panel of the same declared configuration, cached by another test, would be served as is
    names = ("tfidf", "learned")
    assert get_spec("tfidf").runs_on_cluster and not get_spec("learned").runs_on_cluster
    at = choose_attackers(new_app().run(), *names)
    at.switch_page(nav.CALIBRATE).run()
    at.text_input(key="calibrate.scheduler").set_value("local").run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    run = at.session_state["cpa.run"]
    assert run.is_panel and run.names == names
    engines = {name: run.panel.member(name).inputs.get("engine", {}) for name in names}
    assert engines["tfidf"].get("scheduler") == "local" and engines["learned"].get("engine") != "dask"
