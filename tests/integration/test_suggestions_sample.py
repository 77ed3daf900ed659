"""Suggested redactions on the sample release: re-scored against the stored threshold, as edits of the released
text, for the documents the set rule flags, some documents and each strategy, under both protocols; applying them
(in this process and with ``cpa redact``) gives a release that audits again. The suggestions by hand:
tests/redaction/test_suggestions.py.

Known defect, kept visible: the greedy search lifts each set under the stored calibration, but it can leave the
attacker surer of a redacted document's subject, so that a new calibration of the redacted release flags more
documents by set size (strict expected failure below).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from cpa_core.redaction.suggestions import apply_edits
from cpa_core.report.metrics import summarize


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
    texts = dict(zip(documents.frame["doc_id"], documents.frame["text"]))
    return project, documents, registry, config, attacker, result, texts


def redacted_sample(sample_paths):
    """The sample audited, its set-flagged documents redacted as suggested, and the redacted release audited again:
    (configuration, result, suggestions, the re-audit's configuration, its result)."""
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit
    from cpa_core.redaction.suggestions import suggest_redactions

    project, documents, registry, config, attacker, result, texts = audited_sample(sample_paths)
    suggestions = suggest_redactions(result, attacker, registry, texts)
    frame = documents.frame.copy()
    edits = {s.doc_id: s.edits for s in suggestions}
    frame["text"] = [apply_edits(t, edits.get(d, ())) for d, t in zip(frame["doc_id"], frame["text"])]
    redacted = replace(documents, frame=frame, sha256="0" * 64)
    again, attacker = declare_audit(project, registry, documents=redacted)
    return config, result, suggestions, again, run_audit(redacted, registry, attacker, again), texts


def test_the_sample_release_redacted_as_suggested_audits_again(sample_paths):
    config, result, suggestions, again, after, texts = redacted_sample(sample_paths)
    cert = result.certificate(config.policy_confidence)
    stored = dict(zip(cert.split.table.doc_ids, cert.set_sizes))
    flagged = int(config.policy.flags_by_set(cert.set_sizes).sum())  # the search lifts sets: the set rule's flags
    assert len(suggestions) == flagged > 0
    for s in suggestions:
        assert s.set_size_before == stored[s.doc_id]  # re-scoring the unedited text gives the certified set
        assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits)
    assert sum(s.reaches_k for s in suggestions) > flagged / 2
    assert summarize(after).level(again.policy_confidence).n_test == len(cert.set_sizes)


@pytest.mark.xfail(strict=True, reason="the greedy redaction can leave the attacker surer of a redacted document's "
                                       "subject: a new calibration then flags more documents by set size")
def test_the_sample_release_redacted_as_suggested_flags_fewer_documents_by_set_size(sample_paths):
    config, result, suggestions, again, after, _ = redacted_sample(sample_paths)
    before = int(config.policy.flags_by_set(result.certificate(config.policy_confidence).set_sizes).sum())
    assert summarize(after).level(again.policy_confidence).n_flagged_by_set < before


def test_cpa_redact_writes_edits_and_a_release_that_audits_again(sample_paths, tmp_path):
    from conftest import run_cli

    common = ["--registry", sample_paths["registry"], "--no-history"]
    first = run_cli("audit", "--documents", sample_paths["documents"], "--config", sample_paths["config"], *common,
                    "--out", tmp_path / "before")
    assert first.returncode == 0, first.describe()
    redact = run_cli("redact", "--audit", tmp_path / "before", "--out", tmp_path / "redacted", "--strategy", "delete")
    assert redact.returncode == 0, redact.describe()
    release = tmp_path / "redacted" / "documents.csv"
    original, edited = pd.read_csv(sample_paths["documents"]), pd.read_csv(release)
    assert list(edited.columns) == list(original.columns) and len(edited) == len(original)
    plan = json.loads((tmp_path / "redacted" / "redactions.json").read_text(encoding="utf-8"))
    texts = dict(zip(original["doc_id"], original["text"]))
    for document in plan["documents"]:
        for edit in document["edits"]:
            assert texts[document["doc_id"]][edit["offset"]:edit["offset"] + edit["length"]] == edit["original"]
            assert edit["replacement"] == ""
    # the worklist of the redaction: the audit's worklist, each document with the edits redactions.json lists
    before_work = json.loads((tmp_path / "before" / "worklist.json").read_text(encoding="utf-8"))
    work = json.loads((tmp_path / "redacted" / "worklist.json").read_text(encoding="utf-8"))
    planned = {d["doc_id"]: d for d in plan["documents"]}
    assert [w["doc_id"] for w in work] == [w["doc_id"] for w in before_work]
    assert [w["evidence"] for w in work] == [w["evidence"] for w in before_work]
    for row in work:  # a document flagged by its linkage probability alone has no suggestion (nothing to lift)
        assert row["suggested_edits"] == planned.get(row["doc_id"], {}).get("edits", [])
        assert row["set_size_after_edits"] == planned.get(row["doc_id"], {}).get("set_size_after")
    assert set(planned) == {w["doc_id"] for w in work if w["flagged_by"] != "linkage"}
    printed = redact.stdout + redact.stderr  # counts and paths, never the words of the release
    assert not any(edit["original"] in printed for document in plan["documents"][:20] for edit in document["edits"]
                   if len(edit["original"]) > 6)
    after = run_cli("audit", "--documents", release, "--config", tmp_path / "redacted" / "audit.toml", *common,
                    "--out", tmp_path / "after")
    assert after.returncode == 0, after.describe()
    summary = json.loads((tmp_path / "after" / "summary.json").read_text())
    assert summary["confidence"]["0.9"]["n_test"] == len(original)  # the redacted release, audited again


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
                for r in np.flatnonzero(config.policy.flags_by_set(c.set_sizes))}
    flagged = release_flags(result)
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
