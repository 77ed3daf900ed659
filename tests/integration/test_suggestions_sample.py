"""Suggested redactions on the sample release: re-scored against the stored calibration, as edits of the released
text, for every flagged document, some documents and each strategy, under both protocols; each step lowers the
document's risk, and the release built from the accepted decisions (edits made, documents to withhold left out)
audits again with fewer flagged documents at every level, in this process and with ``cpa redact``. The
suggestions by hand: tests/redaction/test_suggestions.py."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest



def audited_sample(sample_paths, overrides=None):
    """The sample release audited as its configuration declares (``overrides`` of ``[audit]``): project,
    documents, registry, configuration, attacker, result and the texts by doc id."""
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit, load_config

    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    config, attacker = declare_audit(project, registry, documents=documents, overrides=overrides)
    result = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    return project, documents, registry, config, attacker, result, texts


def decided_release(documents, table):
    """The release the accepted rows of a decisions table make: edits applied, documents to withhold left out."""
    from cpa_core.redaction.decisions import accepted
    from cpa_core.redaction.suggestions import decided_frame

    edits, withheld = accepted(table)
    return replace(documents, frame=decided_frame(documents.frame, edits, withheld), sha256="0" * 64)


def redacted_sample(sample_paths):
    """The sample audited, the proposed decisions accepted as they are, and the release they make audited again:
    (configuration, result, suggestions, decisions, the re-audit's configuration, its result, texts)."""
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit
    from cpa_core.redaction.decisions import proposed_decisions

    project, documents, registry, config, attacker, result, texts = audited_sample(sample_paths)
    table, suggestions = proposed_decisions(result, attacker, registry, texts)
    redacted = decided_release(documents, table)
    again, attacker = declare_audit(project, registry, documents=redacted)
    return config, result, suggestions, table, again, run_audit(redacted, registry, attacker, again), texts


def test_every_step_lowers_the_risk_and_the_decided_release_flags_fewer_documents_at_every_level(sample_paths):
    config, result, suggestions, table, again, after, texts = redacted_sample(sample_paths)
    cert = result.certificate(config.policy_confidence)
    stored = dict(zip(cert.split.table.doc_ids.astype(str), cert.set_sizes))
    flagged = int(cert.flags(config.policy).sum())  # both rules: the set and the linkage probability
    assert len(suggestions) == flagged > 0
    for s in suggestions:
        assert s.set_size_before == stored[s.doc_id]  # re-scoring the unedited text gives the certified set
        assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits)
        risks = [s.before] + [step.risk for step in s.steps]
        # every step lowers the risk (whom the attacker names first is no reason to take one)
        assert all(b.lower_than(a) for a, b in zip(risks, risks[1:]))
        assert s.set_size_after >= s.set_size_before  # no suggestion shrinks a set
        assert (s.action == "withhold") == bool(s.reason)
    assert sum(s.action == "redact" for s in suggestions) > flagged / 4
    withheld = set(table.loc[table["action"] == "withhold", "doc_id"])
    assert withheld == {s.doc_id for s in suggestions if s.action == "withhold"}
    assert len(after.test_split) == len(texts) - len(withheld)
    for level in config.confidences:  # fewer flagged documents, by either rule, at every level
        before_cert, after_cert = result.certificate(level), after.certificate(level)
        assert int(after_cert.flags(again.policy).sum()) < int(before_cert.flags(config.policy).sum()) * 0.8, level
        assert int(again.policy.flags_by_set(after_cert.set_sizes).sum()) <= \
            int(config.policy.flags_by_set(before_cert.set_sizes).sum()), level
    assert after.first_guess_right.mean() < result.first_guess_right.mean() / 2


def test_cpa_redact_writes_decisions_and_a_release_that_audits_again_and_applies_a_reviewed_table(sample_paths,
                                                                                                     tmp_path):
    from conftest import run_cli

    common = ["--registry", sample_paths["registry"], "--no-history"]
    first = run_cli("audit", "--documents", sample_paths["documents"], "--config", sample_paths["config"], *common,
                    "--attacker", "tfidf", "--attacker", "lexical_fusion", "--out", tmp_path / "before")
    assert first.returncode == 0, first.describe()
    redact = run_cli("redact", "--audit", tmp_path / "before", "--out", tmp_path / "redacted", "--strategy", "delete",
                     "--deny", "the,and")
    assert redact.returncode == 0, redact.describe()
    release = tmp_path / "redacted" / "documents-redacted.csv"
    original, edited = pd.read_csv(sample_paths["documents"]), pd.read_csv(release)
    decisions = pd.read_csv(tmp_path / "redacted" / "decisions.csv", keep_default_na=False)
    withheld = set(decisions.loc[decisions["action"] == "withhold", "doc_id"])
    assert list(edited.columns) == list(original.columns) and len(edited) == len(original) - len(withheld)
    assert not withheld & set(edited["doc_id"])
    plan = json.loads((tmp_path / "redacted" / "redactions.json").read_text(encoding="utf-8"))
    texts = dict(zip(original["doc_id"], original["text"]))
    for document in plan["documents"]:
        for edit in document["edits"]:
            assert texts[document["doc_id"]][edit["offset"]:edit["offset"] + edit["length"]] == edit["original"]
            assert edit["replacement"] == "" and edit["term"] not in ("the", "and")  # denied words stay
    assert plan["deny"] == ["the", "and"] and plan["decisions"]["withheld"] == sorted(withheld)
    # the worklist of the redaction: the audit's worklist, each flagged document with its suggested edits
    before_work = json.loads((tmp_path / "before" / "worklist.json").read_text(encoding="utf-8"))
    work = json.loads((tmp_path / "redacted" / "worklist.json").read_text(encoding="utf-8"))
    planned = {d["doc_id"]: d for d in plan["documents"]}
    assert [w["doc_id"] for w in work] == [w["doc_id"] for w in before_work]
    assert set(planned) == {w["doc_id"] for w in work}  # every flagged document, by either rule
    for row in work:
        assert row["suggested_edits"] == planned[row["doc_id"]]["edits"]
    printed = redact.stdout + redact.stderr  # counts and paths, never the words of the release
    assert not any(edit["original"] in printed for document in plan["documents"][:20] for edit in document["edits"]
                   if len(edit["original"]) > 6)
    # searched against the panel (tfidf, lexical_fusion), verified by an attacker it never consulted: the decisions
    # name it, the redacted release is audited again with the panel and it, each one's first guess before and after
    assert set(decisions["held_out_attacker"]) == {"learned"} and plan["held_out"] == "learned"
    verified = json.loads((tmp_path / "redacted" / "audit" / "summary.json").read_text())
    assert verified["panel"]["attackers"] == ["tfidf", "lexical_fusion", "learned"]
    assert verified["redaction"]["held_out"] == "learned"
    figures = {entry["attacker"]: entry for entry in verified["redaction"]["attackers"]}
    before_summary = json.loads((tmp_path / "before" / "summary.json").read_text())
    for name in ("tfidf", "lexical_fusion"):
        member = before_summary["members"][name]["confidence"]["0.9"]
        assert figures[name]["before"]["first_guess"] == pytest.approx(member["first_guess_rate"])
        assert 0 < figures[name]["after"]["n"] <= len(edited) and figures[name]["after"]["first_guess"] is not None
    assert figures["learned"]["held_out"] and \
        figures["learned"]["before"]["n"] == before_summary["members"]["tfidf"]["confidence"]["0.9"]["n_labelled"]
    assert plan["verification"]["verdict"]["status"] == verified["verdict"]["status"]
    assert "learned (held out of the search): first guess right before" in redact.stderr
    # the what-if from the stored search: the declared policy keeps what the decisions keep
    what = pd.read_csv(tmp_path / "redacted" / "whatif.csv")
    declared = what[what["declared"]].iloc[0]
    assert int(declared["documents_kept"]) == len(edited) and int(declared["withheld"]) == len(withheld)
    assert int(declared["released_as_is"]) + int(declared["edited"]) + int(declared["withheld"]) == len(original)
    at_k = what[what["flag_below"] == declared["flag_below"]].sort_values("acceptable_linkage")
    assert at_k["acceptable_linkage"].min() == 0.05 and at_k["acceptable_linkage"].max() == 0.2
    assert (at_k["documents_kept"].diff().dropna() >= 0).all()  # a laxer rate never keeps fewer
    assert [row["documents_kept"] for row in plan["what_if"]] == what["documents_kept"].tolist()
    assert "what-if (the stored search, no new attack)" in redact.stderr
    # the function words the search left alone, stated; no rewrite asked
    assert plan["function_words"]["documents_by_language"] == {"en": len(original)} and plan["rewrite"] is None
    assert plan["function_words"]["release_words"] > 20 and "its language" in plan["function_words"]["rule"]
    # what the redacted release keeps: documents, characters and the meaning of each edited text
    kept = plan["utility"]
    assert kept["documents_kept"] == len(edited) and kept["documents"] == len(original)
    removed = sum(len(e["original"]) for d in plan["documents"] if d["doc_id"] not in withheld for e in d["edits"]
                  if e.get("accepted", True))
    assert kept["characters"] == int(original["text"].str.len().sum())
    assert kept["characters_kept"] <= kept["characters"] - int(original.loc[original["doc_id"].isin(withheld),
                                                                            "text"].str.len().sum())
    assert removed >= 0 and 0.5 < kept["meaning_edited_mean"] < 1 and kept["meaning_lowest"] <= kept["meaning_edited_mean"]
    assert f"kept: {len(edited):,} of {len(original):,} documents" in redact.stderr
    # the verified release's report says what it keeps
    assert verified["redaction"]["kept"] == {k: v for k, v in kept.items() if k != "per_document"}
    report = (tmp_path / "redacted" / "audit" / "report.html").read_text(encoding="utf-8")
    assert f"What the redacted release keeps: {len(edited):,} of {len(original):,} documents kept" in report
    after = run_cli("audit", "--documents", release, "--config", tmp_path / "redacted" / "audit.toml", *common,
                    "--out", tmp_path / "after")
    assert after.returncode == 0, after.describe()
    summary = json.loads((tmp_path / "after" / "summary.json").read_text())
    assert summary["members"]["learned"]["confidence"]["0.9"]["n_test"] == len(edited)  # the redacted release
    # audited again from what the redaction wrote: the same panel, the same configuration, the same verdict
    assert summary["panel"]["config_id"] == verified["panel"]["config_id"]
    assert summary["verdict"] == verified["verdict"]
    # a reviewed table: reject every edit of the first document, keep every document; applied as it is
    first_doc = decisions.loc[decisions["action"] == "edit", "doc_id"].iloc[0]
    decisions.loc[decisions["doc_id"] == first_doc, "accept"] = False
    decisions.loc[decisions["action"] == "withhold", "accept"] = False
    decisions.to_csv(tmp_path / "reviewed.csv", index=False)
    applied = run_cli("redact", "--audit", tmp_path / "before", "--out", tmp_path / "applied", "--decisions",
                      tmp_path / "reviewed.csv")
    assert applied.returncode == 0, applied.describe()
    edited = pd.read_csv(tmp_path / "applied" / "documents-redacted.csv")
    assert len(edited) == len(original)
    texts_after = dict(zip(edited["doc_id"], edited["text"]))
    assert texts_after[first_doc] == texts[first_doc]
    others = decisions[(decisions["action"] == "edit") & (decisions["doc_id"] != first_doc)]
    assert all(texts_after[d] != texts[d] for d in set(others["doc_id"]))
    log = json.loads((tmp_path / "applied" / "redactions.json").read_text(encoding="utf-8"))
    assert log["decisions"]["file"] == str(tmp_path / "reviewed.csv") and log["decisions"]["withheld"] == []
    # a reviewed table that no longer matches the release is refused, naming the row and column
    decisions.loc[0, "original"] = decisions.loc[0, "original"] + "x"
    decisions.to_csv(tmp_path / "stale.csv", index=False)
    stale = run_cli("redact", "--audit", tmp_path / "before", "--out", tmp_path / "stale", "--decisions",
                    tmp_path / "stale.csv")
    assert stale.returncode != 0 and "row 1, column 'original'" in stale.stderr and "Traceback" not in stale.stderr


def test_suggestions_for_some_documents_and_each_strategy_on_the_sample(sample_paths):
    from cpa_core.redaction.suggestions import suggest_redactions

    project, documents, registry, config, attacker, result, texts = audited_sample(sample_paths)
    full = {s: suggest_redactions(result, attacker, registry, texts, strategy=s)[:40]
            for s in ("delete", "placeholder", "generalize")}
    some = [s.doc_id for s in full["generalize"][::3]]
    assert suggest_redactions(result, attacker, registry, texts, strategy="generalize", doc_ids=some) == \
        [s for s in full["generalize"] if s.doc_id in some]
    for strategy, suggestions in full.items():
        kinds = {e.kind for s in suggestions for e in s.edits}
        assert kinds <= ({"delete"} if strategy == "delete" else {"placeholder", "generalize"}), strategy
        for s in suggestions:
            assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits)
    placeholders = {e.replacement for s in full["placeholder"] for e in s.edits}
    assert placeholders - {"[REDACTED]"} and all(p.startswith("[") and p.endswith("]") for p in placeholders)
    assert any(e.kind == "generalize" for s in full["generalize"] for e in s.edits)


def test_under_the_split_protocol_calibration_documents_are_redacted_alike(sample_paths):
    """The redacted release is one release mechanism: the rule "redact what the stored thresholds flag" applies
    to the calibration documents as to the audited ones, or a new calibration would not certify it."""
    from cpa_core.redaction.suggestions import release_flags, suggest_redactions

    _, documents, registry, config, attacker, result, texts = audited_sample(
        sample_paths, {"protocol": "split", "n_cal": 500, "n_test": 500})
    level = config.policy_confidence
    audited, calibration = result.certificate(level), result.calibration_certificate(level)
    expected = {str(c.split.table.doc_ids[r]) for c in (audited, calibration)
                for r in np.flatnonzero(c.flags(config.policy))}
    from cpa_core.audit.rescoring import PanelStoredRisk

    panel = PanelStoredRisk([(result, attacker)], registry)
    certificates = panel.certificates()
    flagged = [(certificates[part], row) for part, row in release_flags(panel)]
    assert {str(c.split.table.doc_ids[r]) for c, r in flagged} == expected
    assert {c.split is result.test_split for c, _ in flagged} == {True, False}  # both splits have flags
    from cpa_core.report.worklist import risk_order
    keys = [risk_order(c, r) for c, r in flagged]
    assert keys == sorted(keys)  # riskiest first
    some = [str(c.split.table.doc_ids[r]) for c, r in flagged if c.split is result.calibration_split][:3]
    suggestions = suggest_redactions(result, attacker, registry, texts, doc_ids=some)
    stored = {str(c.split.table.doc_ids[r]): int(c.set_sizes[r]) for c, r in flagged
              if c.split is result.calibration_split}
    assert [s.doc_id for s in suggestions] == some
    assert all(s.set_size_before == stored[s.doc_id] for s in suggestions)  # under its stored threshold


def test_an_allow_list_edit_is_judged_on_the_text_the_release_will_hold(sample_paths, monkeypatch):
    """A document's risk before the allow list's edits is that of its text with its suggested edits made (one edit of
    the text before the allowed word stands in for the search here), not that of the released text; a document with
    no suggested edit is judged on its released text."""
    import cpa_core.redaction.decisions as decisions
    from cpa_core.audit.rescoring import PanelStoredRisk
    from cpa_core.redaction.suggestions import Edit, Suggestion, apply_edits, panel_members

    _, _, registry, config, attacker, result, texts = audited_sample(sample_paths)
    naming = [d for d, t in texts.items() if t.find("Kraków") > 40]
    assert len(naming) >= 2
    searched, untouched = naming[:2]
    text = texts[searched]
    cut = text.index("Kraków") - 1
    edit = Edit(0, cut, text[:cut], "[REDACTED]", "stand-in", "placeholder")
    stored = PanelStoredRisk(panel_members(result, attacker), registry)
    where = stored.documents()
    with_suggested, as_released = (r.risk for r in stored.of([where[searched]] * 2, [apply_edits(text, [edit]), text]))
    assert (with_suggested.set_size, with_suggested.linkage) != (as_released.set_size, as_released.linkage)
    suggestion = Suggestion(searched, as_released, with_suggested, (edit,), config.policy.flag_below)
    monkeypatch.setattr(decisions, "suggest_redactions", lambda *args, **kwargs: [suggestion])
    table, _ = decisions.proposed_decisions(result, attacker, registry, texts, allow=["Kraków"])
    allowed = table[table["source"] == "allow list"].set_index("doc_id")
    row = allowed.loc[searched]
    assert (row["set_size_before"], row["linkage_before"]) == (with_suggested.set_size, with_suggested.linkage)
    unedited = stored.of([where[untouched]], [texts[untouched]])[0].risk
    row = allowed.loc[untouched]
    assert (row["set_size_before"], row["linkage_before"]) == (unedited.set_size, unedited.linkage)
