"""The dashboard's redaction loop: suggestions in the drill-down, the edited text re-scored against the stored
calibration and kept as the curator's decision, the review table decided in bulk, the release its accepted rows
make downloaded and audited in place (recorded in the history as redacted from the audit, made the current audit,
reported and reproduced), before and after side by side, and the review table ticked row by row (in a real browser
too: the browser tests)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from apptest import assert_clean, calibrate, metric, new_app, shown

from cpa_core.report.formatting import counted
from cpa_ui import nav
from cpa_ui.redaction import PAGE_ROWS, VIEWS, review_counts, review_positions


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


def test_the_drill_down_suggests_edits_rescores_the_edited_text_and_keeps_it_for_the_release(flagged_page):
    from cpa_core.attack.function_words import function_words
    from cpa_core.audit.rescoring import StoredRisk
    from cpa_core.redaction.decisions import accepted
    from cpa_core.redaction.suggestions import apply_edits, suggest_redactions

    at = flagged_page
    run, data, cert = _core(at)
    policy = _policy(at)
    doc_id = at.selectbox(key="w.flagged.drilldown").value
    row = list(cert.split.table.doc_ids.astype(str)).index(doc_id)
    certified = int(cert.set_sizes[row])
    assert cert.flags(policy)[row]  # the first flagged document opens
    texts = dict(zip(data.documents.frame["doc_id"].astype(str), data.documents.frame["text"]))
    # the search the Redact page runs, with its defaults: no deny list, the release's function words at 0.1
    expected = suggest_redactions(run.result, run.attacker, data.registry, texts, policy=policy,
                                  confidence=cert.confidence, strategy="placeholder", doc_ids=[doc_id],
                                  function_words=function_words(texts.values()))[0]
    assert expected.edits
    # every suggested edit is listed, accepted, and the text area starts from the redacted text
    text_key = f"flagged.edited.{doc_id}"
    assert at.text_area(key=text_key).value == apply_edits(texts[doc_id], expected.edits)
    assert _number(metric(at, "Certified |C| of the released text")) == certified
    assert _number(metric(at, "|C| of the edited text (indicative)")) == expected.set_size_after
    assert "Indicative" in " ".join(shown(w) for w in at.warning)
    # the curator's own edit: the text re-scored under the stored calibration, as the core counts it
    own = texts[doc_id][: len(texts[doc_id]) // 3]
    at.text_area(key=text_key).set_value(own).run()
    assert_clean(at)
    stored = StoredRisk(run.result, run.attacker, data.registry, cert.confidence)
    assert _number(metric(at, "|C| of the edited text (indicative)")) == stored.of([(cert, row)], [own])[0].risk.set_size
    # kept for the release: the review table's rows of this document make exactly this text
    at.button(key=f"flagged.use.{doc_id}").click().run()
    assert_clean(at)
    review = at.session_state["cpa.review"]
    edits, withheld = accepted(review.table)
    assert apply_edits(texts[doc_id], edits[doc_id]) == own and not withheld
    assert set(review.table["source"]) == {"curator"}
    at.session_state["cpa.review"] = None


def test_the_drill_down_proposes_the_edits_the_search_proposed(sample_paths):
    """After a search of the Redact page (its own deny list and share of function words), the drill-down of a flagged
    document shows the search's suggestion for it: the same edits, the same verdict."""
    from cpa_core.redaction.suggestions import apply_edits

    at = calibrate(new_app().run())
    at.switch_page(nav.REDACT).run()
    at.text_input(key="w.redact.deny").set_value("urlLink, the").run()
    at.number_input(key="w.redact.common").set_value(0.3).run()
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    review = at.session_state["cpa.review"]
    by_id = {s.doc_id: s for s in review.suggestions}
    at.switch_page(nav.FLAGGED).run()
    assert_clean(at)
    for doc_id in [s.doc_id for s in review.suggestions[:3]]:
        at.selectbox(key="w.flagged.drilldown").set_value(doc_id).run()
        assert_clean(at)
        found = by_id[doc_id]
        text = at.text_area(key=f"flagged.edited.{doc_id}").value
        original = dict(zip(at.session_state["cpa.data"].documents.frame["doc_id"].astype(str),
                            at.session_state["cpa.data"].documents.frame["text"]))[doc_id]
        assert text == apply_edits(original, found.edits)
        said = " ".join(m.value for m in at.markdown if "**Suggested:**" in m.value)
        if found.edits:
            assert f"**Suggested:** {counted(len(found.edits), 'edit')}, {found.characters:,} characters" in said
            assert ("Not enough: withhold it" in said) == (found.action == "withhold")


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
    return ReleasePolicy(at.session_state["cpa.flag_below"], at.session_state["cpa.leakage_threshold"],
                         at.session_state["cpa.acceptable_linkage"])


def test_review_the_redactions_build_the_release_and_certify_it_in_place(sample_paths, downloads):  # noqa: F811
    from cpa_core.redaction.decisions import accepted, read_decisions
    from cpa_core.store.history import list_audits

    at = calibrate(new_app().run())
    at.switch_page(nav.REDACT).run()
    assert_clean(at)
    run, data, cert = _core(at)
    assert run.audit_id is not None  # the calibration was recorded
    flagged_before = int(cert.flags(_policy(at)).sum())  # both rules
    at.text_input(key="w.redact.deny").set_value("the, and").run()
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    review = at.session_state["cpa.review"]
    suggestions = review.suggestions
    assert len(suggestions) == flagged_before == _number(metric(at, "Flagged documents searched"))
    assert not {"the", "and"} & set(review.table["term"])
    withhold = {s.doc_id for s in suggestions if s.action == "withhold"}
    assert _number(metric(at, "To withhold")) == len(withhold)
    # the what-if over acceptable rates and k, from the stored search: the declared policy withholds what it withholds
    what = next(frame.value for frame in at.dataframe if "documents_kept" in frame.value.columns)
    declared = what[what["policy"] == "declared"].iloc[0]
    assert int(declared["withheld"]) == len(withhold) and int(declared["edited"]) == len(suggestions) - len(withhold)
    assert set(what["acceptable_linkage"].round(2)) >= {0.05, 0.1, 0.2}
    # reject every edit of one evidence term, in bulk
    term = review.table.loc[review.table["action"] == "edit", "term"].value_counts().index[0]
    at.selectbox(key="redact.term").set_value(term).run()
    at.button(key="redact.reject_term").click().run()
    assert_clean(at)
    table = at.session_state["cpa.review"].table
    assert not table.loc[table["term"] == term, "accept"].any()
    edits, withheld = accepted(table)
    assert withheld == withhold
    # the redacted release: the input file named -redacted, the accepted edits made, the withheld documents out
    name = next(n for n in downloads if n.endswith("-redacted.csv"))
    released = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    redacted = pd.read_csv(io.BytesIO(downloads[name]()), dtype=str, keep_default_na=False)
    assert list(redacted.columns) == list(released.columns) and len(redacted) == len(released) - len(withheld)
    before_texts = dict(zip(released["doc_id"], released["text"]))
    changed = {d for d, t in zip(redacted["doc_id"], redacted["text"]) if t != before_texts[d]}
    assert changed == set(edits) - withheld
    decisions = read_decisions(downloads["decisions.csv"]().encode("utf-8"), before_texts, name="decisions.csv")
    assert accepted(decisions) == (edits, withheld)
    log = json.loads(downloads["redactions.json"]())
    assert log["deny"] == ["the", "and"] and log["decisions"]["withheld"] == sorted(withheld)
    assert log["function_words"]["share"] == 0.1 and log["function_words"]["documents_by_language"] == {"en": 1000}
    assert log["rewrite"] is None  # no rewrite offered
    # one click: the same threat model and policy on the redacted release, calibrated again, recorded as redacted
    at.button(key="redact.reaudit").click().run()
    assert_clean(at)
    after = at.session_state["cpa.review"].after
    assert after.result.config.knowledge == run.result.config.knowledge
    assert after.result.config.attacker == run.result.config.attacker
    assert after.result.config.policy == run.result.config.policy
    assert after.result.inputs["documents"]["sha256"] != run.result.inputs["documents"]["sha256"]
    audits = list_audits()
    assert int(audits.iloc[-1]["id"]) == after.audit_id and int(audits.iloc[-1]["redacted_from"]) == run.audit_id
    flagged_after = _number(metric(at, "Flagged after (recalibrated)"))
    assert _number(metric(at, "Flagged before")) == flagged_before
    assert flagged_after == int(after.result.certificate(cert.confidence).flags(_policy(at)).sum())
    assert flagged_after < flagged_before
    sides = at.dataframe[-1].value
    assert int(sides["flagged_after"].sum()) == flagged_after and set(sides["redaction"]) <= {"edited", "withheld",
                                                                                                "unchanged"}
    # what the redacted release keeps: per document in the table, overall on the page, in the summary and the History
    texts = dict(zip(data.documents.frame["doc_id"].astype(str), data.documents.frame["text"]))
    by_id = sides.set_index("doc_id")
    for doc_id in withheld:
        assert by_id.at[doc_id, "characters_kept"] == 0 and pd.isna(by_id.at[doc_id, "meaning"])
    for doc_id in set(edits) - withheld:
        removed = sum(edit.length for edit in edits[doc_id])
        assert by_id.at[doc_id, "characters_kept"] == len(texts[doc_id]) - removed
        assert (by_id.at[doc_id, "meaning"] < 1) == (removed > 0) and 0.3 < by_id.at[doc_id, "meaning"] <= 1 + 1e-6
    kept = after.result.inputs["redaction"]["kept"]
    assert kept["documents_kept"] == len(texts) - len(withheld) and kept["edited"] == len(set(edits) - withheld)
    assert any(f"**Kept:** {kept['documents_kept']:,} of {len(texts):,} documents kept" in m.value for m in at.markdown)
    assert audits.iloc[-1]["documents_kept"] == kept["documents_kept"]
    assert audits.iloc[-1]["meaning"] == pytest.approx(kept["meaning_edited_mean"])
    figure = json.loads(at.get("plotly_chart")[-1].proto.spec)
    names = {trace.get("name") for trace in figure["data"]}
    flagged_before_after = {f"flagged (before): {flagged_before}", f"flagged (after redaction): {flagged_after}"}
    assert flagged_before_after <= names  # each release's flagged documents, as its metrics count them
    # the current audit, on every page: the report certifies it, beside the audit before, and reproduces the chain
    at.button(key="redact.adopt").click().run()
    assert_clean(at)
    assert at.session_state["cpa.run"].key == after.key
    assert at.session_state["cpa.data"].documents.file == name
    at.switch_page(nav.REPORT).run()
    assert_clean(at)
    assert any("Before and after redaction" in h.value for h in at.subheader)
    report = downloads[next(n for n in downloads if n.endswith("-report.html"))]
    report = (report() if callable(report) else report)
    report = report.decode() if isinstance(report, bytes) else report
    assert f"made from audit {run.audit_id}, configuration {run.result.config.config_id}" in " ".join(report.split())
    assert f"{len(withheld):,} documents withheld" in " ".join(report.split())
    assert "What the redacted release keeps" in report
    import zipfile
    bundle = downloads[next(n for n in downloads if n.endswith("-reproduce.zip"))]
    archive = zipfile.ZipFile(io.BytesIO(bundle() if callable(bundle) else bundle))
    assert {"audit.toml", "original/audit.toml", "decisions.csv", "reproduce.sh"} <= set(archive.namelist())
    script = archive.read("reproduce.sh").decode()
    assert "cpa redact --audit out/original --decisions decisions.csv" in script


def searched_redact_page():
    """The Redact page of the calibrated sample, its search run."""
    at = calibrate(new_app().run())
    at.switch_page(nav.REDACT).run()
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    return at


def test_the_deny_list_decides_the_table_s_rows_at_once_and_every_decision_survives_a_new_search(sample_paths):
    at = searched_redact_page()
    review = at.session_state["cpa.review"]
    edits = review.table[review.table["action"] == "edit"]
    word = edits["term"].value_counts().index[0]  # the commonest evidence term
    other = next(t for t in edits["term"].value_counts().index[1:] if t != word)
    # a bulk decision on one term ...
    at.selectbox(key="redact.term").set_value(other).run()
    at.button(key="redact.reject_term").click().run()
    assert_clean(at)
    # ... then a word on the deny list: its rows are rejected at once, with no new search
    at.text_input(key="w.redact.deny").set_value(word).run()
    assert_clean(at)
    denied = at.session_state["cpa.review"]
    assert denied.suggestions is review.suggestions and denied.ask == review.ask  # the search is not run again
    table = denied.table
    of_word = (table["action"] == "edit") & (table["term"].str.casefold() == word.casefold())
    assert of_word.any() and not table.loc[of_word, "accept"].any()
    assert not table.loc[table["term"] == other, "accept"].any()
    assert "applied to the table's rows" in " ".join(shown(i) for i in at.info)
    # a new search with another replacement keeps every decision taken (the deny list now also shapes the search)
    at.selectbox(key="w.redact.strategy").set_value("delete").run()
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    again = at.session_state["cpa.review"]
    assert again.suggestions is not review.suggestions and again.ask != denied.ask
    table = again.table
    decided = denied.decided
    rows = [i for i, key in enumerate(again.keys) if key in decided]
    assert rows and table["term"].iloc[rows].eq(other).any()  # rows of the bulk decision the new search proposes too
    assert [bool(a) for a in table["accept"].iloc[rows]] == [decided[again.keys[i]][0] for i in rows]
    of_word = (table["action"] == "edit") & (table["term"].str.casefold() == word.casefold())
    assert not table.loc[of_word, "accept"].any()
    fresh = [i for i, key in enumerate(again.keys) if key not in decided]
    assert table["accept"].iloc[fresh].tolist() == list(again.proposed[fresh])  # the others, as the search proposes
    # taking the decisions back gives the search's own rows
    at.button(key="redact.reset").click().run()
    assert_clean(at)
    reset = at.session_state["cpa.review"]
    assert reset.table["accept"].tolist() == [bool(a) and not denied_row for a, denied_row in zip(
        reset.proposed, (reset.table["action"] == "edit") & (reset.table["term"].str.casefold() == word.casefold()))]


def test_a_tick_decides_its_row_alone_and_keeps_every_checkbox_of_the_page(sample_paths):
    at = searched_redact_page()
    review = at.session_state["cpa.review"]
    boxes = [box for box in at.checkbox if str(box.key).startswith("redact.row.")]
    assert 1 < len(boxes) <= PAGE_ROWS and all(box.value for box in boxes)  # a page, every row proposed accepted
    accepted_before = _number(metric(at, f"Edits accepted (of {review_counts(review)['edits']:,})"))
    first = boxes[0]
    position = int(review_positions(review, VIEWS[0])[0])
    first.uncheck().run()
    assert_clean(at)
    ticked = at.session_state["cpa.review"]
    assert ticked.version == review.version  # a tick is not a change of the table's rows
    assert [bool(a) for a in ticked.table["accept"]] == [p != position for p in range(len(ticked.table))]
    assert ticked.decided == {ticked.keys[position]: (False, "you")}
    assert _number(metric(at, f"Edits accepted (of {review_counts(review)['edits']:,})")) == accepted_before - 1
    after = [box for box in at.checkbox if str(box.key).startswith("redact.row.")]
    assert [box.key for box in after] == [box.key for box in boxes] and not after[0].value
    assert after[0].label.endswith("decided by you")
    after[0].check().run()  # ticked again: accepted, decided by the curator
    assert bool(at.session_state["cpa.review"].table["accept"].iloc[position])
    # a bulk action: the page's checkboxes show it in place
    at.button(key="redact.reject_all").click().run()
    assert_clean(at)
    shown_now = [box for box in at.checkbox if str(box.key).startswith("redact.row.")]
    rejected = at.session_state["cpa.review"]  # documents to withhold released too: their edits unfold
    rows = review_positions(rejected, VIEWS[0])[:PAGE_ROWS]
    assert [box.key for box in shown_now] == [f"redact.row.{place}" for place in range(len(rows))]
    assert not any(box.value for box in shown_now) and not rejected.table["accept"].any()
    shown_now[1].check().run()  # the second row shown now
    table = at.session_state["cpa.review"].table
    assert table["accept"].sum() == 1 and bool(table["accept"].iloc[rows[1]])
    at.button(key="redact.accept_all").click().run()
    assert all(box.value for box in at.checkbox if str(box.key).startswith("redact.row."))
