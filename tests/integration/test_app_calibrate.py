"""The Calibrate page under Streamlit's AppTest: its words follow the protocol in use, each cause of an uncertified
level is said once, tables without groups show no group column, and the bundled sample calibrates without a warning
at the levels it declares."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from apptest import assert_clean, calibrate, choose_attackers, metric, new_app, shown

from cpa_ui import nav

SPLIT_WORDING = ("test document", "test split", "held-out", "test set")


def _said(at) -> str:
    """Everything the page says in words: text, captions, alerts, the metrics' labels and help, the tables' column
    labels and help."""
    parts = [shown(e) for e in (*at.markdown, *at.caption, *at.info, *at.warning, *at.success)]
    parts += [f"{m.label} {m.help}" for m in at.metric]
    for frame in at.dataframe:
        parts += [f"{c.get('label', '')} {c.get('help', '')}" for c in json.loads(frame.proto.columns or "{}").values()]
    return " ".join(" ".join(parts).split())


def _column_labels(frame) -> list[str]:
    return [c.get("label") for c in json.loads(frame.proto.columns or "{}").values()]


def test_a_release_calibration_speaks_of_certified_documents(calibrated):
    at = calibrated.switch_page(nav.CALIBRATE).run()
    assert at.session_state["cpa.run"].result.config.protocol == "release"
    said = _said(at).lower()
    for wording in SPLIT_WORDING:
        assert wording not in said, (wording, said[max(0, said.find(wording) - 200):said.find(wording) + 100])
    assert "every document is certified" in said and "by construction" in said
    assert metric(at, "Certified documents")
    assert "certified" in _column_labels(at.dataframe[-1])  # the per-group table: the documents each group certifies


def test_a_split_calibration_speaks_of_test_documents(sample_paths):
    at = choose_attackers(new_app().run(), "tfidf")
    at.radio(key="w.threat.protocol").set_value("split").run()
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    said = _said(at)
    assert "the held-out test documents check it" in said and "a test split of n documents fluctuates" in said
    assert metric(at, "Test documents") and "coverage 95 % CI" in _column_labels(at.dataframe[0])
    assert "n_test" in _column_labels(at.dataframe[-1])


def test_each_cause_of_an_uncertified_level_is_said_once(calibrated):
    """At 99 %, a level the sample does not declare, its identities outside the registry leave strata without a
    finite threshold: one warning names them all, in agreeing numbers."""
    at = calibrated
    at.session_state["cpa.confidence"] = 0.99
    at.switch_page(nav.CALIBRATE).run()
    warnings = [shown(w) for w in at.warning]
    assert warnings and len(warnings) == len(set(warnings))
    assert sum("outside the candidate pool" in w for w in warnings) <= 1
    assert sum("too small" in w for w in warnings) <= 1
    for warning in warnings:
        assert not re.search(r"\b1 (documents|scores|sets|audited documents|labelled documents)\b", warning), warning
        assert not re.search(r"\b1 of the [\d,]+ calibration documents \([^)]*\) have", warning), warning
        assert not re.search(r"\d-th\b", warning), warning
    at.session_state["cpa.confidence"] = 0.95


def test_no_group_column_without_groups(sample_paths):
    """Documents uploaded without a group column: no table shows an empty (grey 'None') group column."""
    documents = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False).drop(columns=["group"])
    at = new_app().run()
    at.switch_page(nav.DATA).run()
    at.file_uploader(key="upload.documents").set_value(
        ("notes.csv", documents.to_csv(index=False).encode("utf-8"), "text/csv")).run()
    at.file_uploader(key="upload.registry").set_value(
        ("people.csv", sample_paths["registry"].read_bytes(), "text/csv")).run()
    at.button(key="upload.load").click().run()
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert at.session_state["cpa.run"].result.test_split.groups is None
    assert "Per-group thresholds" not in [h.value for h in at.subheader]
    for page in (nav.CALIBRATE, nav.EXPLORE, nav.FLAGGED, nav.REPORT):
        at.switch_page(page).run()
        assert not at.exception, page
        for frame in at.dataframe:
            assert "group" not in frame.value.columns, (page, list(frame.value.columns))


@pytest.mark.parametrize("knowledge", ["K1", "K2", "K3"])
def test_the_sample_calibrates_without_a_warning_at_its_levels(sample, knowledge):
    """A newcomer's first calibration on the bundled sample: every declared level (and the pages' default 95 %) has a
    finite threshold in every stratum, so the page opens on results, not on warnings (which stay for real data:
    test_each_cause_of_an_uncertified_level_is_said_once)."""
    at = calibrate(new_app().run(), knowledge=knowledge)
    assert at.session_state["cpa.confidence"] in sample["confidences"]
    verdicts = [shown(w) for w in [*at.warning, *at.success] if shown(w).startswith("Verdict: ")]
    assert len(verdicts) == 1 and "Verdict" in [shown(h) for h in at.subheader]  # the verdict, not a caption's end
    assert not [w for w in at.warning if not shown(w).startswith("Verdict: ")], [shown(w) for w in at.warning]
    flagged, of = metric(at, "Flagged").split(" of ")
    assert any(shown(m).startswith(f"Flagged: {flagged} of {of} certified documents (") for m in at.markdown)
    table = at.dataframe[0].value
    assert list(table["confidence"]) == sample["confidences"]
    assert "infinite" not in set(table["threshold"])


def test_groups_that_are_their_own_strata_are_said_so(sample_paths):
    """Calibrated per group without certainty strata: the page says each group is a stratum, never that every
    document is calibrated against every other."""
    config = sample_paths["config"].read_text(encoding="utf-8").replace("certainty_bins = 2", "certainty_bins = 1")
    assert "certainty_bins = 1" in config
    at = new_app().run()
    at.switch_page(nav.DATA).run()
    at.file_uploader(key="upload.config").set_value(("audit.toml", config.encode("utf-8"), "application/toml")).run()
    at.button(key="upload.load").click().run()
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert_clean(at)
    assert not at.session_state["cpa.run"].result.strata and at.session_state["cpa.run"].result.config.group_column
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Each declared group is one stratum, calibrated on its own labelled documents")
               for c in captions), captions
    assert not any("every document calibrated against every other" in c for c in captions)
