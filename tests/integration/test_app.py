"""The dashboard under Streamlit's AppTest: every page, the curator's full flow, bad uploads, and the
pure helpers behind the pages.

The audit of the sample data is cached by ``st.cache_data`` for the whole test process, so only the
first calibration attacks anything.
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from apptest import PAGES, RESULT_PAGES, assert_clean, calibrate, choose_attackers, metric, new_app, shown

from cpa_ui import nav

# --- every page ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", ["app.py", *PAGES])
def test_every_page_renders_before_calibration(page, sample_paths):
    at = new_app().run()
    if page != "app.py":
        at.switch_page(page).run()
    assert_clean(at)
    if page in RESULT_PAGES:
        assert any("No calibrated audit yet" in shown(i) for i in at.info)


@pytest.mark.parametrize("page", ["app.py", *PAGES])
def test_every_page_renders_after_calibration(page, calibrated):
    calibrated.switch_page(page).run()
    assert_clean(calibrated)
    assert not any("No calibrated audit yet" in shown(i) for i in calibrated.info)


def test_home_explains_cpa_and_shows_the_audit_state(calibrated):
    calibrated.switch_page("app.py").run()
    text = " ".join(m.value for m in calibrated.markdown)
    assert "certified set" in text and "exchangeable" in text
    assert any("released documents" in shown(i) and "coverage" in shown(i) for i in calibrated.info)


def test_sample_data_is_loaded_by_default(sample):
    at = new_app().run()
    at.switch_page(nav.DATA).run()
    assert_clean(at)
    assert any(f"{sample['documents']:,} documents against {sample['profiles']:,} profiles" in s.value
               for s in at.success)
    assert metric(at, "Kept") == f"{sample['documents']:,}"
    # the preview never shows the released text
    preview = at.dataframe[1].value
    assert "text" not in preview.columns and "text_characters" in preview.columns


def test_every_number_has_a_help_text(calibrated):
    for page in PAGES:
        calibrated.switch_page(page).run()
        for element in calibrated.metric:
            assert element.help, f"metric '{element.label}' on {page} has no help text"


# --- the full flow -------------------------------------------------------------------------------------------

def test_full_flow_sample_k2_calibrate_slide_flag_export(sample, downloads):
    at = choose_attackers(new_app().run(), "tfidf")
    at.radio(key="w.threat.knowledge").set_value("K2").run()
    summary = at.info[0].value
    assert "knowledge level K2" in summary and "'keywords'" in summary and "'profile'" not in summary
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert metric(at, "Calibration documents") == f"{sample['n_cal']:,}"
    assert metric(at, "Certified documents") == f"{sample['n_test']:,}"
    table = at.dataframe[0].value
    assert list(table["confidence"]) == sorted(set(sample["confidences"]) | {0.95})

    at.switch_page(nav.EXPLORE).run()
    assert_clean(at)
    at.slider(key="w.explore.confidence_percent").set_value(95.0).run()
    at_95 = (metric(at, "Documents at risk"), metric(at, "Median set"))
    at.slider(key="w.explore.confidence_percent").set_value(60.0).run()
    assert_clean(at)
    at_60 = (metric(at, "Documents at risk"), metric(at, "Median set"))
    # smaller sets at a lower level: the set rule flags more (the linkage rule does not depend on the level, and on
    # the sample it flags nearly every document under K2)
    assert int(at_60[0].replace(",", "")) >= int(at_95[0].replace(",", ""))
    assert float(at_60[1]) < float(at_95[1])
    from cpa_ui.analysis import kpis

    run, policy = at.session_state["cpa.run"], at.session_state["cpa.run"].result.config.policy
    assert kpis(run.result, 0.6, policy).n_flagged_by_set > kpis(run.result, 0.95, policy).n_flagged_by_set
    # the α presets move the slider
    at.button(key="explore.preset.0.05").click().run()
    assert at.slider(key="w.explore.confidence_percent").value == 95.0
    at.slider(key="w.explore.confidence_percent").set_value(60.0).run()

    at.switch_page(nav.FLAGGED).run()
    assert_clean(at)
    flagged_k11 = at.dataframe[0].value
    assert len(flagged_k11) == int(at_60[0].replace(",", ""))
    risk = list(zip(-flagged_k11["linkage_probability"], flagged_k11["set_size"]))
    assert risk == sorted(risk)  # riskiest first: the linkage probability, then the set
    assert metric(at, "First guess right").endswith("%") and metric(at, "Flagged").startswith(f"{len(flagged_k11):,} of")
    # the set rule alone: an acceptable linkage rate no document exceeds
    at.number_input(key="w.flagged.acceptable_linkage").set_value(0.999).run()
    by_set = at.dataframe[0].value
    assert len(by_set) < len(flagged_k11) and (by_set["set_size"] < 11).all() and set(by_set["flagged_by"]) == {"set"}
    at.slider(key="w.flagged.flag_below").set_value(2).run()
    flagged_k2 = at.dataframe[0].value
    assert set(flagged_k2["set_size"]) <= {0, 1}
    at.slider(key="w.flagged.flag_below").set_value(30).run()
    flagged_k30 = at.dataframe[0].value
    assert len(flagged_k2) < len(flagged_k30) and (flagged_k30["set_size"] < 30).all()
    assert metric(at, "Flagged").startswith(f"{len(flagged_k30):,} of")
    # the drill-down shows the escaped text of the first flagged document, with highlights
    shown = at.get("html")[0].proto.body
    assert "cpa-document" in shown and "<mark>" in shown

    at.switch_page(nav.REPORT).run()
    assert_clean(at)
    worklist_name = next(name for name in downloads if name.endswith("-worklist.csv"))
    worklist = pd.read_csv(io.BytesIO(downloads[worklist_name]))
    assert list(worklist["doc_id"]) == list(flagged_k30["doc_id"])
    assert worklist["driving_terms"].notna().any()
    work_json = json.loads(downloads[next(n for n in downloads if n.endswith("-worklist.json"))])
    assert len(work_json) == len(worklist) and work_json[0]["confidence"] == 0.6
    manifest = json.loads(downloads[next(n for n in downloads if n.endswith("-manifest.json"))])
    # the choices made after calibration are the declared configuration of every export, never a side view
    assert "dashboard_view" not in manifest
    declared = manifest["config"]
    assert (declared["flag_below"], declared["leakage_threshold"], declared["flag_confidence"]) == (30, None, "0.6")
    assert declared["acceptable_linkage"] == 0.999
    assert "0.6" in declared["confidences"]
    assert set(worklist["config_id"]) == {manifest["config_id"]}
    assert manifest["inputs"]["documents"]["sha256"]
    records = downloads[next(n for n in downloads if n.endswith("-records.jsonl"))]().decode("utf-8").splitlines()
    assert len(records) == sample["n_test"]  # one record per released document
    assert {json.loads(line)["split"] for line in records} == {"documents"}
    assert {json.loads(line)["config_id"] for line in records} == {manifest["config_id"]}
    report = downloads[next(n for n in downloads if n.endswith("-report.html"))]().decode("utf-8")
    assert report.startswith("<!DOCTYPE html>") and manifest["config_id"] in report
    assert "|C| &lt; 30" in report and "|C| &lt; 11" not in report and "fewer than 11" not in report


def test_leakage_threshold_adds_flags(calibrated):
    at = calibrated
    at.session_state["cpa.confidence"] = 0.6  # small sets, so that the two rules differ
    at.switch_page(nav.FLAGGED).run()
    at.number_input(key="w.flagged.acceptable_linkage").set_value(0.999).run()  # the set rules alone
    at.slider(key="w.flagged.flag_below").set_value(2).run()
    by_size = at.dataframe[0].value
    at.checkbox(key="w.flagged.use_leakage").check().run()
    at.number_input(key="w.flagged.leakage_threshold").set_value(0.1).run()
    assert_clean(at)
    both = at.dataframe[0].value
    assert len(both) > len(by_size) and set(both["set_size"]) <= set(range(10))
    at.checkbox(key="w.flagged.use_leakage").uncheck().run()
    at.slider(key="w.flagged.flag_below").set_value(11).run()
    at.number_input(key="w.flagged.acceptable_linkage").set_value(None).run()
    at.session_state["cpa.confidence"] = 0.95


def test_compare_runs_levels_on_matched_splits_and_the_drift_test(calibrated, sample):
    at = calibrated
    at.switch_page(nav.COMPARE).run()
    at.button(key="compare.run").click().run()
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["label"]) == ["K1", "K2", "K3"]
    assert set(table["n_test"]) == {sample["n_test"]}
    # matched splits: the same test documents for every level
    runs = at.session_state["cpa.comparison"].runs
    assert len({tuple(r.result.test_split.table.doc_ids) for r in runs}) == 1
    at.button(key="drift.run").click().run()
    assert_clean(at)
    drift = at.dataframe[1].value
    assert set(drift["calibration"]) == {"drift (calibrated on A)", "own (recalibrated on B)"}
    assert any("recalibrating on B restores coverage" in shown(i) for i in at.info)
    at.radio(key="w.drift.mode").set_value("groups").run()
    at.button(key="drift.run").click().run()
    assert_clean(at)


def test_a_changed_threat_model_is_flagged_as_not_calibrated(calibrated, sample):
    at = calibrated
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.miss_policy").set_value("exclude").run()
    at.switch_page(nav.EXPLORE).run()
    assert any("has not been calibrated yet" in shown(w) for w in at.warning)
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.miss_policy").set_value("infinite").run()
    at.switch_page(nav.EXPLORE).run()
    assert not any("has not been calibrated yet" in shown(w) for w in at.warning)


def test_custom_knowledge_level_shows_the_fields_the_attacker_sees(sample_paths):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value("custom").run()
    at.multiselect(key="w.threat.custom_fields").set_value(["occupation", "city"]).run()
    assert_clean(at)
    sees = at.dataframe[0].value.set_index("registry field")["the attacker sees it"]
    assert sees[["occupation", "city"]].all() and not sees.drop(["occupation", "city"]).any()
    assert "'occupation' and 'city' (knowledge level custom)" in shown(at.info[0])
    at.multiselect(key="w.threat.custom_fields").set_value([]).run()
    assert any("at least one registry field" in shown(e) for e in at.error)
    assert not at.exception


def test_clue_query_mode_without_llm_is_refused_with_a_message(sample_paths):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value("custom").run()
    at.radio(key="w.threat.query_mode").set_value("direct_plus_clues").run()
    assert any("No LLM endpoint is configured" in shown(w) for w in at.warning)
    assert any("needs an endpoint" in shown(e) for e in at.error)
    at.switch_page(nav.CALIBRATE).run()
    assert not at.exception


# --- uploads -------------------------------------------------------------------------------------------------

def _upload(at, key: str, name: str, data: bytes, mime: str = "text/csv"):
    at.switch_page(nav.DATA).run()
    at.file_uploader(key=key).set_value((name, data, mime)).run()
    return at


def _assert_sample_kept(at, sample) -> None:
    data = at.session_state["cpa.data"]
    assert data.source == "sample"
    assert (len(data.documents), len(data.registry)) == (sample["documents"], sample["profiles"])


BAD_DOCUMENTS = {
    "wrong columns": ("docs.csv", b"a,b\n1,2\n", "no column chosen for 'doc_id', 'text', 'identity_id'"),
    "bad encoding": ("docs.csv", "doc_id,text,identity_id\nD1,café au lait,P0001\n".encode("latin-1"),
                     "not valid UTF-8"),
    "empty file": ("docs.csv", b"", "the file is empty"),
    "header only": ("docs.csv", b"doc_id,text,identity_id\n", "the table has no rows"),
    "duplicate ids": ("docs.csv", b"doc_id,text,identity_id\nD1,first text,P0001\nD1,second text,P0002\n",
                      "duplicate id 'D1'"),
    "not parquet": ("docs.parquet", b"\x89PNG\r\n\x1a\n" + bytes(range(200)), "not a readable Parquet file"),
    "not json lines": ("docs.jsonl", b'[{"doc_id": "D1"}]\n', "line 1 is not a JSON object"),
    "ragged csv": ("docs.csv", b'doc_id,text,identity_id\nD1,"unclosed,P0001\n', "not a well-formed CSV table"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_document_upload_gives_a_message_and_keeps_the_data(case, sample):
    name, data, message = BAD_DOCUMENTS[case]
    at = _upload(new_app().run(), "upload.documents", name, data)
    waits = at.button(key="upload.load").disabled  # the form says what it still needs, in place of a load
    if not at.error and not waits:  # the file reads as a table: the problem shows when it is loaded
        at.button(key="upload.load").click().run()
    assert not at.exception
    errors = " ".join(shown(e) for e in (*at.error, *(at.caption if waits else ())))
    assert message in errors and "Traceback" not in errors
    _assert_sample_kept(at, sample)
    at.switch_page(nav.EXPLORE).run()
    assert not at.exception


def test_bad_registry_upload_keeps_the_data(sample):
    at = _upload(new_app().run(), "upload.registry", "people.csv", b"identity_id,age\nP1,30\nP1,40\n")
    at.button(key="upload.load").click().run()
    assert any("duplicate id 'P1'" in shown(e) for e in at.error)
    _assert_sample_kept(at, sample)


def test_dropping_invalid_rows_reports_them(sample):
    at = _upload(new_app().run(), "upload.documents", "docs.csv",
                 b"doc_id,text,identity_id\nD1,some text,P0001\nD1,dup,P0002\nD3,,P0003\nD4,more text,P0004\n")
    at.radio(key="upload.on_invalid").set_value("drop").run()
    at.button(key="upload.load").click().run()
    assert_clean(at)
    data = at.session_state["cpa.data"]
    assert data.source == "upload" and len(data.documents) == 2 and len(data.registry) == sample["profiles"]
    assert metric(at, "Rejected") == "2"
    rejected = at.dataframe[0].value
    assert list(rejected["row"]) == [2, 3]
    assert "duplicate id 'D1'" in rejected["reason"].iloc[0] and "empty" in rejected["reason"].iloc[1]


def test_column_mapping_loads_other_column_names_and_clears_results(calibrated, sample_paths, sample):
    at = calibrated
    frame = pd.read_csv(sample_paths["documents"]).rename(
        columns={"doc_id": "note_id", "text": "note", "identity_id": "person", "group": "mechanism"})
    _upload(at, "upload.documents", "notes.csv", frame.to_csv(index=False).encode("utf-8"))
    assert_clean(at)
    at.selectbox(key="map.documents.doc_id").set_value("note_id")
    at.selectbox(key="map.documents.text").set_value("note")
    at.selectbox(key="map.documents.identity_id").set_value("person")
    at.selectbox(key="map.documents.group").set_value("mechanism").run()
    at.button(key="upload.load").click().run()
    assert_clean(at)
    data = at.session_state["cpa.data"]
    assert data.source == "upload" and len(data.documents) == sample["documents"] and data.documents.has_groups
    assert data.group_column == "mechanism"
    assert at.session_state["cpa.run"] is None
    at.switch_page(nav.EXPLORE).run()
    assert any("No calibrated audit yet" in shown(i) for i in at.info)
    # the uploaded data audits like the sample, calibrated per 'mechanism'; it does not inherit the sample's
    # configuration (knowledge levels, temperature, k): the attacker sees every registry field
    calibrate(at, knowledge="custom")
    assert at.session_state["cpa.run"].result.config.group_column == "mechanism"
    at.switch_page(nav.DATA).run()
    at.button(key="data.reset_sample").click().run()
    _assert_sample_kept(at, sample)


def test_imported_scores_attacker(sample_paths, tmp_path):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(["imported"]).run()
    assert any("needs a table of candidate scores" in shown(e) for e in at.error)
    documents = pd.read_csv(sample_paths["documents"])
    pairs = list(zip(documents["doc_id"], documents["identity_id"]))
    rows = [{"doc_id": d, "candidate_id": i, "score": 0.9} for d, i in pairs]
    rows += [{"doc_id": d, "candidate_id": "P0001" if i != "P0001" else "P0002", "score": 0.1} for d, i in pairs]
    at.file_uploader(key="upload.scores").set_value(
        ("scores.csv", pd.DataFrame(rows).to_csv(index=False).encode("utf-8"), "text/csv")).run()
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert at.session_state["cpa.run"].result.config.attacker.name == "imported"


# --- pure helpers behind the pages ---------------------------------------------------------------------------

def test_highlighting_escapes_the_text_and_marks_the_spans():
    from cpa_core.attack.explainers import term_spans
    from cpa_ui.text import highlight_spans

    text = 'Lives in Leeds <script>alert("x")</script> & plays golf; golfer.\nAmp ok'
    spans = term_spans(text, {"golf": 1.0, "leeds": 1.0, "amp": 1.0, "quot": 1.0, "lt": 1.0, "script": 1.0},
                       str.lower)
    out = highlight_spans(text, spans)
    assert "<script>" not in out and "&lt;/<mark>script</mark>&gt;" in out
    assert "&lt;script&gt;alert" in out  # '<script>' has the shape of a placeholder such as '<NAME>': no evidence
    assert "<mark>Leeds</mark>" in out and "plays <mark>golf</mark>;" in out and "golfer" in out
    assert "<mark>golfer" not in out
    # a span is of the text, never of an entity produced by escaping
    assert "&amp; plays" in out and "&quot;x&quot;" in out and "<mark>lt</mark>" not in out
    assert "<br><mark>Amp</mark> ok" in out
    assert highlight_spans("a < b", []) == "a &lt; b"


def test_confidence_conversions_are_exact_decimals():
    from cpa_core.report.formatting import fmt_confidence, percent_from_confidence
    from cpa_ui.text import confidence_from_alpha, confidence_from_percent

    assert confidence_from_percent(95.0) == 0.95 and confidence_from_percent(99.5) == 0.995
    assert confidence_from_alpha(0.1) == 0.9 and confidence_from_alpha(0.05) == 0.95
    assert percent_from_confidence(0.995) == 99.5 and fmt_confidence(0.9) == "90 %"


def test_attacker_forms_follow_the_registry():
    from cpa_core.attack.registry import attacker_specs
    from cpa_ui.attackers import needs_endpoint, offered_specs

    assert [spec.name for spec in offered_specs()] == [spec.name for spec in attacker_specs()]
    assert {"tfidf", "dense", "forced_choice", "profile", "imported"} <= {spec.name for spec in offered_specs()}
    assert {spec.name for spec in offered_specs() if needs_endpoint(spec, "direct")} == {"forced_choice", "profile"}
    assert {spec.name for spec in offered_specs() if needs_endpoint(spec, "direct_plus_clues")} == {
        "tfidf", "dense", "lexical_fusion", "learned", "bm25", "forced_choice", "profile"}


def test_declared_configuration_follows_the_choices(sample_paths):
    from dataclasses import replace

    from cpa_core.audit.project import load_config
    from cpa_core.io.tables import load_documents, load_registry
    from cpa_ui.attackers import declare, default_threat
    from cpa_ui.state import DataSet

    project = load_config(sample_paths["config"])
    data = DataSet(load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"]), project,
                   "sample", "x", "group")
    threat = default_threat(data).alone("tfidf")  # the sample declares no attacker: its default panel's first
    config, attacker = declare(data, threat)
    assert config.knowledge.name == project.audit["knowledge"] and config.group_column == "group"
    assert attacker.temperature == project.attackers["tfidf"]["temperature"]
    assert (config.protocol, config.n_cal, config.n_test, config.seed) == ("release", None, None,
                                                                           project.audit["seed"])
    other, _ = declare(data, replace(threat, per_group=False, top_k=20, score="rank"))
    assert other.group_column is None and other.top_k == 20 and other.score == "rank"
    assert other.config_id != config.config_id


def test_own_data_without_the_declared_levels_audits_end_to_end(sample_paths, tmp_path):
    """A registry whose fields fit no declared level: the threat model falls back to a custom level."""
    from cpa_core.io.synthetic import generate_sample_data

    paths = generate_sample_data(tmp_path, seed=3, n_people=60, n_documents=240)
    registry = pd.read_csv(paths["registry"]).rename(columns={"age_band": "age", "keywords": "interests"})
    at = _upload(new_app().run(), "upload.registry", "people.csv", registry.to_csv(index=False).encode("utf-8"))
    at.file_uploader(key="upload.documents").set_value(("notes.csv", paths["documents"].read_bytes(), "text/csv"))
    at.run()
    at.button(key="upload.load").click().run()
    assert_clean(at)
    at.switch_page(nav.THREAT).run()
    assert_clean(at)
    assert at.radio(key="w.threat.knowledge").value == "custom"
    assert at.radio(key="w.threat.knowledge").options == ["Custom field list"]  # nothing of the sample's levels
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert at.session_state["cpa.run"].result.config.knowledge.fields == tuple(registry.columns[1:])
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [shown(e) for e in at.exception])


def test_llm_attacker_shows_estimated_calls_before_running(sample_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path))  # an empty cache: every call counts
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(["forced_choice"]).run()
    at.text_input(key="w.threat.llm.model").set_value("any-model").run()
    assert not at.exception
    assert any("sends document text" in shown(w) for w in at.warning)
    metric = next(m for m in at.metric if m.label == "Estimated LLM calls")
    assert metric.value == f"{len(at.session_state['cpa.data'].documents) * 5:,}"  # m = 5 samples per document


def test_clue_mode_with_an_endpoint_estimates_one_call_per_document(sample_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path))
    at = choose_attackers(new_app().run(), "tfidf")
    at.radio(key="w.threat.query_mode").set_value("direct_plus_clues").run()
    assert any("No LLM endpoint is configured" in shown(w) for w in at.warning)
    at.text_input(key="w.threat.llm.model").set_value("any-model").run()
    assert not at.exception and not any("No LLM endpoint" in shown(w) for w in at.warning)
    metric = next(m for m in at.metric if m.label == "Estimated LLM calls")
    threat = at.session_state["cpa.threat"]
    assert threat.query_mode == "direct_plus_clues"
    assert metric.value == f"{len(at.session_state['cpa.data'].documents):,}"  # one clue request per document


# --- one audit, one set of figures on every surface ----------------------------------------------------------

def test_cli_dashboard_and_report_show_identical_figures(sample_paths, tmp_path, downloads):
    """The sample audit of the TF-IDF attacker through ``cpa audit`` and through the dashboard at its other defaults:
    the same configuration id, and summary.json's figures are the ones the Calibrate tables, the KPIs and the HTML
    report show."""
    from html.parser import HTMLParser

    from conftest import run_cli_inprocess

    from cpa_core.report.formatting import fmt_percent

    out = tmp_path / "cli"
    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--attacker", "tfidf", "--out", out)
    assert done.returncode == 0, done.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))

    at = choose_attackers(new_app().run(), "tfidf")
    at.session_state["cpa.confidence"] = 0.9  # the flagging level, where documents are flagged
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert at.session_state["cpa.run"].result.config.config_id == summary["config_id"]
    levels = at.dataframe[0].value.set_index("confidence")
    columns = ("coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "n_cal", "n_cal_needed")
    for label, entry in summary["confidence"].items():
        for column in columns:
            assert levels.loc[float(label), column] == pytest.approx(entry[column]), (label, column)
    strata = next(frame.value for frame in at.dataframe if "calibrating" in frame.value.columns)
    assert strata.to_dict("records") == [{k: v for k, v in s.items() if k in strata.columns or k == "label"}
                                         | {"stratum": s["label"]} for s in summary["strata"]] or \
        list(strata["stratum"]) == [s["label"] for s in summary["strata"]]
    groups = next(frame.value for frame in at.dataframe if "threshold" in frame.value.columns and "group" in
                  frame.value.columns).set_index("group")
    for group, metrics in summary["confidence"]["0.9"]["groups"].items():
        for column in ("n_cal", "n_test", "coverage", "candidate_miss_rate"):
            assert groups.loc[group, column] == pytest.approx(metrics[column]), (group, column)
        assert groups.loc[group, "threshold"] == metrics["threshold"]

    at.switch_page(nav.EXPLORE).run()
    entry = summary["confidence"]["0.9"]
    assert entry["n_flagged"] > 0
    assert metric(at, "Documents at risk") == f"{entry['n_flagged']:,}"
    assert metric(at, "Coverage (release)") == fmt_percent(entry["coverage"])
    assert metric(at, "Median set") == f"{int(entry['median_set_size']):,}"

    at.switch_page(nav.REPORT).run()
    assert_clean(at)
    report = downloads[next(n for n in downloads if n.endswith("-report.html"))]().decode("utf-8")

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(self.cell)
                self.cell = None

    parser = Tables()
    parser.feed(report)
    header = next(row for row in parser.rows if row[:3] == ["confidence", "α", "coverage"] or
                  (row and row[0] == "confidence" and "open-world bound" in row))
    rows = {row[0]: dict(zip(header, row)) for row in parser.rows if len(row) == len(header) and row[0].endswith("%")}
    for label, level in summary["confidence"].items():
        shown = rows[fmt_percent(float(label))]
        assert shown["coverage"] == fmt_percent(level["coverage"])
        assert shown["miss rate ρ"] == fmt_percent(level["candidate_miss_rate"])
        assert shown["median |C|"] == f"{int(level['median_set_size']):,}"
    assert f"<b>{entry['n_flagged']:,}</b> of {entry['n_test']:,}" in report


def test_dashboard_exports_reproduce_through_the_command_line(sample_paths, tmp_path, downloads):
    """One dashboard audit with a confidence and a k chosen after calibration: the report, the manifest, the
    worklist and the exported bundle's command-line run show one configuration id and the same figures."""
    import shutil
    import zipfile

    from conftest import run_cli

    at = calibrate(new_app().run(), "K2")
    at.switch_page(nav.EXPLORE).run()
    at.slider(key="w.explore.confidence_percent").set_value(93.0).run()
    at.switch_page(nav.FLAGGED).run()
    at.slider(key="w.flagged.flag_below").set_value(25).run()
    at.switch_page(nav.REPORT).run()
    assert_clean(at)
    manifest = json.loads(downloads[next(n for n in downloads if n.endswith("-manifest.json"))])
    config_id = manifest["config_id"]
    assert config_id != at.session_state["cpa.run"].result.config.config_id  # k and the level are declared
    worklist = json.loads(downloads[next(n for n in downloads if n.endswith("-worklist.json"))])
    assert worklist and {row["config_id"] for row in worklist} == {config_id}
    report = downloads[next(n for n in downloads if n.endswith("-report.html"))]().decode("utf-8")
    assert config_id in report and "|C| &lt; 25" in report and "|C| &lt; 11" not in report
    bundle = downloads[next(n for n in downloads if n.endswith("-reproduce.zip"))]()
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        archive.extractall(tmp_path)
    for role in ("documents", "registry"):
        shutil.copy(sample_paths[role], tmp_path / Path(sample_paths[role]).name)
    command = (tmp_path / "reproduce.sh").read_text().splitlines()[-1].split()
    done = run_cli(*command[1:], cwd=tmp_path)
    assert done.returncode == 0, done.describe()
    out = tmp_path / "out" / "reproduced"
    cli_manifest = json.loads((out / "manifest.json").read_text())
    assert cli_manifest["config_id"] == config_id and cli_manifest["config"] == manifest["config"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads((tmp_path / "expected-summary.json").read_text())
    verdict = summary["verdict"]  # the command line's verdict is the one the Report page and the report state
    assert any(f"Verdict: {verdict['title']}. {verdict['headline']}" == shown(alert) for alert in [*at.warning, *at.success])
    assert html.escape(verdict["headline"]) in report
    assert summary["confidence"]["0.93"]["n_flagged"] == len(worklist)
    cli_worklist = json.loads((out / "worklist.json").read_text())
    assert [row["doc_id"] for row in cli_worklist] == [row["doc_id"] for row in worklist]
    assert [row["evidence"] for row in cli_worklist] == [row["evidence"] for row in worklist]
    # the drill-down highlights exactly the worklist's evidence spans of the document it opens
    at.switch_page(nav.FLAGGED).run()
    first = worklist[0]
    assert first["evidence"] and at.selectbox(key="w.flagged.drilldown").value == first["doc_id"]
    marked = re.findall(r"<mark>(.*?)</mark>", at.get("html")[0].proto.body)
    assert marked == [span["text"] for span in first["evidence"]]
    text = at.session_state["cpa.data"].documents.frame.set_index("doc_id").loc[first["doc_id"], "text"]
    assert all(text[span["offset"]:span["offset"] + span["length"]] == span["text"] for span in first["evidence"])


# --- every attacker form ---------------------------------------------------------------------------------------

def _registered_attackers() -> list[str]:
    from cpa_core.attack.registry import attacker_specs
    return [spec.name for spec in attacker_specs()]


@pytest.mark.parametrize("name", _registered_attackers())
def test_every_attacker_form_declares_and_runs(name, sample_paths, tmp_path, monkeypatch):
    """Select the attacker, keep the form's defaults, declare; calibrate where it runs on this machine (an LLM
    attacker shows its estimated calls instead; its runs are tested against a real server)."""
    from cpa_core.attack.registry import get_spec
    from cpa_ui.attackers import needs_endpoint

    spec = get_spec(name)
    if needs_endpoint(spec, "direct"):
        monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path))  # an empty answer cache: nothing is called anyway
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value([name]).run()
    assert not at.exception, [shown(e) for e in at.exception]
    for param in spec.params:  # one widget per declared parameter, keyed by attacker and name
        assert f"w.threat.param.{name}.{param.name}" in at.session_state
    if spec.needs_scores:
        documents = pd.read_csv(sample_paths["documents"])
        rows = [{"doc_id": d, "candidate_id": i, "score": 0.9} for d, i in zip(documents["doc_id"], documents["identity_id"])]
        at.file_uploader(key="upload.scores").set_value(
            ("scores.csv", pd.DataFrame(rows).to_csv(index=False).encode("utf-8"), "text/csv")).run()
    if needs_endpoint(spec, "direct"):
        at.text_input(key="w.threat.llm.model").set_value("any-model").run()
        assert_clean(at)
        assert metric(at, "Estimated LLM calls") != "0"
        at.switch_page("app.py").run()  # the sidebar no longer claims that no data leaves
        assert any("sends document text to http://127.0.0.1:8080/v1" in shown(c) for c in at.sidebar.caption)
        assert not any("no data leaves" in shown(c) for c in at.sidebar.caption)
        return
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    config = at.session_state["cpa.run"].result.config
    assert config.attacker.name == name and config.attacker.params == at.session_state["cpa.threat"].params
    at.switch_page("app.py").run()
    assert any("no data leaves" in shown(c) for c in at.sidebar.caption)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [shown(e) for e in at.exception])


# --- no silent vacuous certificate ---------------------------------------------------------------------------

def test_a_registry_matching_no_document_is_refused_when_loaded(sample):
    at = _upload(new_app().run(), "upload.registry", "people.csv", b"identity_id,age\nZ1,30\nZ2,40\n")
    at.button(key="upload.load").click().run()
    assert any("no document's identity is in the registry" in shown(e) for e in at.error)
    _assert_sample_kept(at, sample)


def test_whole_pool_certificates_are_said_on_every_page(sample_paths):
    """K2 at 99 %, a level the sample does not declare: its identities outside the registry, scored infinite under
    the conservative policy, leave most strata without a finite threshold and most sets the whole registry.
    Calibrate, Explore, Flagged and Compare say why, and '0 at risk' is not shown as good news."""
    at = calibrate(new_app().run(), knowledge="K2")
    at.session_state["cpa.confidence"] = 0.99
    for page in (nav.CALIBRATE, nav.EXPLORE, nav.FLAGGED):
        at.switch_page(page).run()
        assert not at.exception
        assert any("outside the candidate pool" in shown(w) and "miss_policy = 'exclude'" in shown(w)
                   for w in at.warning), page
    at.switch_page(nav.EXPLORE).run()
    at_risk = next(m for m in at.metric if m.label == "Documents at risk")
    assert "not evidence of safety" in at_risk.proto.delta
    at.switch_page(nav.COMPARE).run()
    at.multiselect(key="w.compare.levels").set_value(["K2", "K3"]).run()
    at.button(key="compare.run").click().run()
    assert any("K3" in shown(w) and "outside the candidate pool" in shown(w) for w in at.warning)


def test_a_shortlist_that_cuts_the_truths_is_said_on_the_pages(sample_paths):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.checkbox(key="w.threat.whole_pool").uncheck().run()
    at.number_input(key="w.threat.top_k").set_value(1).run()
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    at.session_state["cpa.confidence"] = 0.9
    for page in (nav.CALIBRATE, nav.EXPLORE, nav.FLAGGED):
        at.switch_page(page).run()
        assert any("larger top-K" in shown(w) for w in at.warning), page
        assert any("at least the candidate pool size (1" in shown(w) for w in at.warning), page


@pytest.mark.parametrize("toml,part", [
    ("[audit]\nseed = -1\n", "[audit] seed: expected an integer at least 0, found -1"),
    ("[audit]\nn_cal = -5\n", "[audit] n_cal"),
    ("[audit]\ntop_k = -3\n", "[audit] top_k"),
    ("[audit]\nscore = 'entropy'\n", "[audit] score"),
    ("[audit]\nmiss_policy = 'ignore'\n", "[audit] miss_policy"),
    ("[audit]\nconfidence = [1.5]\n", "[audit] confidence"),
    ("[attacker.tfidf]\ntemperature = 0\n", "[attacker.tfidf] temperature"),
])
def test_an_uploaded_configuration_with_invalid_values_is_refused(sample, toml, part):
    """Never silently replaced (seed -1 -> 0, temperature 0 -> 0.001, ...): the same message as the CLI's."""
    at = _upload(new_app().run(), "upload.config", "audit.toml", toml.encode("utf-8"))
    at.button(key="upload.load").click().run()
    assert not at.exception
    assert any(part in shown(e) for e in at.error), [shown(e) for e in at.error]
    _assert_sample_kept(at, sample)


HOSTILE_ID = "![x](http://127.0.0.1:9/beacon.png)"
HOSTILE_GROUP = "[click](javascript:alert(1))"


def test_values_from_the_data_are_shown_as_text_on_every_page(sample_paths):
    """A document id and a group that are markdown (an image that would fetch a URL, a javascript link): every
    markdown element of every page shows them escaped, never as markup."""
    frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    registry = pd.read_csv(sample_paths["registry"], dtype=str, keep_default_na=False).set_index("identity_id")
    frame.loc[0, "doc_id"] = HOSTILE_ID
    frame.loc[0, "text"] = " ".join(registry.loc[frame.loc[0, "identity_id"]])  # its subject's whole profile: flagged
    frame.loc[frame["group"] == "ner_masking", "group"] = HOSTILE_GROUP
    at = _upload(new_app().run(), "upload.documents", "docs.csv", frame.to_csv(index=False).encode("utf-8"))
    at.button(key="upload.load").click().run()
    assert_clean(at)
    at = calibrate(at, knowledge="custom")
    at.session_state["w.flagged.drilldown"] = HOSTILE_ID
    for page in ["app.py", *PAGES]:
        at.switch_page(page).run()
        assert not at.exception, page
        for kind in ("markdown", "caption", "info", "warning", "error", "success"):
            for element in getattr(at, kind):
                raw = element.value
                assert "![" not in raw and "](http" not in raw and "](javascript" not in raw, (page, kind, raw)
    at.switch_page(nav.FLAGGED).run()
    shown_texts = [shown(m) for m in at.markdown]
    assert any(HOSTILE_ID in t or HOSTILE_GROUP in t for t in shown_texts), shown_texts  # shown, as text
