"""The dashboard's redaction loop: suggestions in the drill-down, the edited text re-scored against the stored
calibration, the redacted release downloaded and audited again, before and after side by side."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from apptest import assert_clean, calibrate, metric, new_app, shown

from cpa_ui import nav


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _core(at):
    """The session's run, data and certificate at the level the pages show."""
    run, data = at.session_state["cpa.run"], at.session_state["cpa.data"]
    return run, data, run.result.certificate(at.session_state["cpa.confidence"])


@pytest.fixture(scope="module")
def flagged_page(sample_paths):
    at = calibrate(new_app().run())
    at.switch_page(nav.FLAGGED).run()
    assert_clean(at)
    return at


def test_the_drill_down_suggests_edits_and_rescores_the_edited_text(flagged_page):
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.redaction.suggestions import apply_edits, rescorer, suggest_redactions

    at = flagged_page
    run, data, cert = _core(at)
    doc_id = at.selectbox(key="w.flagged.drilldown").value
    row = list(cert.split.table.doc_ids.astype(str)).index(doc_id)
    certified = int(cert.set_sizes[row])
    k = at.session_state["cpa.flag_below"]
    assert certified < k  # the first flagged document opens
    texts = dict(zip(data.documents.frame["doc_id"].astype(str), data.documents.frame["text"]))
    expected = suggest_redactions(run.result, run.attacker, data.registry, texts, policy=ReleasePolicy(k),
                                  confidence=cert.confidence, strategy="placeholder", doc_ids=[doc_id])[0]
    assert expected.edits
    # every suggested edit is listed, accepted, and the text area starts from the redacted text
    text_key = f"flagged.edited.{doc_id}"
    assert at.text_area(key=text_key).value == apply_edits(texts[doc_id], expected.edits)
    assert _number(metric(at, "Certified |C| of the released text")) == certified
    assert _number(metric(at, "|C| of the edited text (indicative)")) == expected.set_size_after
    assert "Indicative" in " ".join(shown(w) for w in at.warning)
    # the curator's own edit: the text re-scored against the stored threshold, as the core counts it
    own = texts[doc_id][: len(texts[doc_id]) // 3]
    at.text_area(key=text_key).set_value(own).run()
    assert_clean(at)
    size, _ = rescorer(run.result, cert, row, run.attacker, data.registry)(own)
    assert _number(metric(at, "|C| of the edited text (indicative)")) == size


def test_a_clicked_row_opens_its_drill_down(flagged_page):
    from cpa_core.report.worklist import worklist

    at = flagged_page
    run, data, cert = _core(at)
    ids = worklist(cert, _policy(at), run.result.config.config_id)["doc_id"].astype(str).tolist()
    assert len(ids) > 2
    at.session_state["flagged.table"] = {"selection": {"rows": [2], "columns": []}}  # what a click on row 3 sends
    at.run()
    assert_clean(at)
    assert at.selectbox(key="w.flagged.drilldown").value == ids[2]
    # choosing another document in the box is not undone by the row still selected in the table
    at.selectbox(key="w.flagged.drilldown").set_value(ids[0]).run()
    assert at.selectbox(key="w.flagged.drilldown").value == ids[0]


def test_a_long_release_lists_the_riskiest_documents_and_opens_any_clicked_one(flagged_page, monkeypatch):
    from cpa_core.report.worklist import worklist
    from cpa_ui import analysis

    monkeypatch.setattr(analysis, "DRILLDOWN_CHOICES", 3)
    at = flagged_page
    run, data, cert = _core(at)
    ids = worklist(cert, _policy(at), run.result.config.config_id)["doc_id"].astype(str).tolist()
    assert len(ids) > 5
    at.session_state["flagged.table"] = {"selection": {"rows": [], "columns": []}}
    at.selectbox(key="w.flagged.drilldown").set_value(ids[0]).run()
    assert [o.split(" · ")[0] for o in at.selectbox(key="w.flagged.drilldown").options] == ids[:3]
    at.session_state["flagged.table"] = {"selection": {"rows": [5], "columns": []}}  # a row beyond the list
    at.run()
    assert_clean(at)
    box = at.selectbox(key="w.flagged.drilldown")
    assert box.value == ids[5] and [o.split(" · ")[0] for o in box.options] == ids[:3] + [ids[5]]


def _policy(at):
    from cpa_core.audit.policy import ReleasePolicy
    return ReleasePolicy(at.session_state["cpa.flag_below"], at.session_state["cpa.leakage_threshold"])


def test_redact_the_release_and_audit_it_again(sample_paths, downloads):  # noqa: F811 (fixture)
    at = calibrate(new_app().run())
    at.switch_page(nav.REDACT).run()
    assert_clean(at)
    run, data, cert = _core(at)
    flagged_before = int(_policy(at).flags_by_set(cert.set_sizes).sum())  # the search lifts sets
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    suggestions = at.session_state["cpa.redaction"].suggestions
    assert len(suggestions) == flagged_before == _number(metric(at, "Documents with a suggestion"))
    assert _number(metric(at, "Reach k (indicative)")) == sum(s.reaches_k for s in suggestions)
    # the redacted release: the input file, same columns, each suggestion's edits applied, nothing else changed
    name = next(n for n in downloads if n.endswith(".csv"))
    released = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    redacted = pd.read_csv(io.BytesIO(downloads[name]), dtype=str, keep_default_na=False)
    assert list(redacted.columns) == list(released.columns) and len(redacted) == len(released)
    changed = {d for d, a, b in zip(released["doc_id"], released["text"], redacted["text"]) if a != b}
    assert changed == {s.doc_id for s in suggestions if s.edits}
    log = json.loads(downloads["redactions.json"])
    assert [d["doc_id"] for d in log["documents"]] == [s.doc_id for s in suggestions]
    # one click: the same threat model on the redacted release, calibrated again; before and after side by side
    at.button(key="redact.reaudit").click().run()
    assert_clean(at)
    after = at.session_state["cpa.redaction"].after
    assert after.result.config.knowledge == run.result.config.knowledge
    assert after.result.config.attacker == run.result.config.attacker
    assert after.result.inputs["documents"]["sha256"] != run.result.inputs["documents"]["sha256"]
    flagged_after = _number(metric(at, "Flagged after (recalibrated)"))
    assert _number(metric(at, "Flagged before")) == flagged_before
    assert flagged_after == int(_policy(at).flags(after.result.certificate(cert.confidence).set_sizes).sum())
    sides = at.dataframe[-1].value
    assert int(sides["flagged_after"].sum()) == flagged_after
    assert int(sides["flagged_before"].sum()) == flagged_before
    still = sides[sides["flagged_after"]]
    assert (still["still_flagged_because"].str.len() > 0).any()
    figure = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert [trace["name"] for trace in figure["data"]] == ["before", "after redaction"]
