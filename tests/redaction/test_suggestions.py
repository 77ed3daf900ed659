"""Suggested redactions: greedy on the evidence, re-scored against the stored threshold, as edits of the
released text; applying them and auditing again lowers the flagged count."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.attack.explainers import TermExplainer
from cpa_core.redaction.suggestions import Edit, apply_edits, released_offsets, suggest
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


def test_edits_apply_from_the_end_and_keep_the_rest():
    text = "Zoë drove a bus in Gdańsk"
    edits = [Edit(0, 3, "Zoë", "[REDACTED]", "zoe"), Edit(19, 6, "Gdańsk", "", "gdansk")]
    assert apply_edits(text, edits) == "[REDACTED] drove a bus in "
    assert apply_edits(text, []) == text


def test_greedy_removes_the_heaviest_term_everywhere_until_the_set_reaches_k():
    text = "alpha beta gamma, Beta again; delta"
    weights = {"alpha": 1.0, "beta": 3.0, "gamma": 2.0, "delta": 0.5}
    explainer = TermExplainer(lambda query, rows: {t: w for t, w in weights.items() if t in query.lower()}, str.lower)
    # the set grows by 4 people per redacted word occurrence (a hand-made attacker)
    rescore = lambda edited: (2 + 4 * edited.count("[REDACTED]"), [0])  # noqa: E731
    done = suggest("d1", text, rescore, explainer, flag_below=11)
    assert (done.set_size_before, done.set_size_after, done.reaches_k) == (2, 14, True)
    assert [(e.original, e.term) for e in done.edits] == [("beta", "beta"), ("gamma", "gamma"), ("Beta", "beta")]
    assert all(text[e.offset:e.offset + e.length] == e.original for e in done.edits)
    assert apply_edits(text, done.edits) == "alpha [REDACTED] [REDACTED], [REDACTED] again; delta"
    assert done.characters == 13
    # nothing more to remove: it stops, and says k is not reached
    stuck = suggest("d2", text, lambda edited: (1, [0]), explainer, flag_below=11, strategy="delete")
    assert not stuck.reaches_k and {e.term for e in stuck.edits} == set(weights)
    assert all(e.replacement == "" for e in stuck.edits)
    assert suggest("d3", text, lambda edited: (20, [0]), explainer, flag_below=11).edits == ()  # not flagged


@pytest.mark.integration
def test_the_sample_release_redacted_and_audited_again_flags_fewer_documents(sample_paths):
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit
    from cpa_core.redaction.suggestions import suggest_redactions

    project, documents, registry, config, attacker, result, texts = audited_sample(sample_paths)
    suggestions = suggest_redactions(result, attacker, registry, texts)
    cert = result.certificate(config.policy_confidence)
    stored = dict(zip(cert.split.table.doc_ids, cert.set_sizes))
    flagged = int(config.policy.flags(cert.set_sizes).sum())
    assert len(suggestions) == flagged > 0
    for s in suggestions:
        assert s.set_size_before == stored[s.doc_id]  # re-scoring the unedited text gives the certified set
        assert all(texts[s.doc_id][e.offset:e.offset + e.length] == e.original for e in s.edits)
    assert sum(s.reaches_k for s in suggestions) > flagged / 2
    frame = documents.frame.copy()
    edits = {s.doc_id: s.edits for s in suggestions}
    frame["text"] = [apply_edits(t, edits.get(d, ())) for d, t in zip(frame["doc_id"], frame["text"])]
    redacted = replace(documents, frame=frame, sha256="0" * 64)
    again, attacker = declare_audit(project, registry, documents=redacted)
    after = run_audit(redacted, registry, attacker, again)  # a new release: calibrated again
    assert summarize(after).level(again.policy_confidence)["n_flagged"] < flagged / 2


@pytest.mark.integration
def test_cpa_redact_writes_edits_and_a_release_that_audits_with_fewer_flags(sample_paths, tmp_path):
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
    for row in work:
        assert row["suggested_edits"] == planned[row["doc_id"]]["edits"]
        assert row["set_size_after_edits"] == planned[row["doc_id"]]["set_size_after"]
    printed = redact.stdout + redact.stderr  # counts and paths, never the words of the release
    assert not any(edit["original"] in printed for document in plan["documents"][:20] for edit in document["edits"]
                   if len(edit["original"]) > 6)
    after = run_cli("audit", "--documents", release, "--config", tmp_path / "redacted" / "audit.toml", *common,
                    "--out", tmp_path / "after")
    assert after.returncode == 0, after.describe()
    before_flagged = len(json.loads((tmp_path / "before" / "worklist.json").read_text()))
    after_flagged = len(json.loads((tmp_path / "after" / "worklist.json").read_text()))
    assert before_flagged == len(plan["documents"]) and after_flagged < before_flagged / 2


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcé ,.", min_size=1, max_size=40), st.data())
def test_a_span_of_the_edited_text_maps_back_to_the_released_text(text, data):
    """Brute force: every span of the edited text that misses the replacements is the same text in the release."""
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=6)))
    edits = [Edit(a, b - a, text[a:b], data.draw(st.sampled_from(["", "[X]", "ü"])), "t")
             for a, b in zip(cuts[::2], cuts[1::2])]
    edited = apply_edits(text, edits)
    # which characters of the edited text an edit wrote, and where each kept character came from
    origin, position = [], 0
    for edit in edits:
        origin += list(range(position, edit.offset)) + [None] * len(edit.replacement)
        position = edit.offset + edit.length
    origin += list(range(position, len(text)))
    assert len(origin) == len(edited)
    for start in range(len(edited) + 1):
        for end in range(start + 1, len(edited) + 1):
            where = released_offsets(edits, start, end)
            kept = origin[start:end]
            contiguous = None not in kept and kept == list(range(kept[0], kept[0] + len(kept)))
            assert (where is not None) == contiguous
            if where is not None:
                assert where == (kept[0], kept[-1] + 1) and text[where[0]:where[1]] == edited[start:end]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_the_redacted_file_from_the_bytes_read_is_the_release_written(tmp_path, suffix):
    from cpa_core.io.tables import load_documents
    from cpa_core.redaction.suggestions import Suggestion, redacted_file, redacted_release

    frame = pd.DataFrame({"doc_id": ["a", "b"], "text": ["seen in Gdańsk in 2014", "nothing here"],
                          "identity_id": ["P1", "P2"]})
    source = tmp_path / f"docs{suffix}"
    if suffix == ".csv":
        frame.to_csv(source, index=False)
    else:
        source.write_text(frame.to_json(orient="records", lines=True, force_ascii=False), encoding="utf-8")
    documents = load_documents(source.read_bytes(), name=source.name)
    edits = (Edit(8, 6, "Gdańsk", "[CITY]", "gdansk"), Edit(18, 4, "2014", "the 2010s", "2014", "generalize"))
    suggestions = [Suggestion("a", 1, 12, edits, True)]
    name, payload = redacted_file(source.read_bytes(), documents, suggestions)
    (tmp_path / "out").mkdir()
    written = redacted_release(source, documents, suggestions, tmp_path / "out")
    assert name == source.name and written == tmp_path / "out" / source.name
    assert payload == written.read_bytes() and written.stat().st_mode & 0o777 == 0o600
    again = load_documents(payload, name=name)
    assert again.frame["text"].tolist() == ["seen in [CITY] in the 2010s", "nothing here"]


def test_a_replacement_the_releases_encoding_cannot_write_is_refused_naming_the_file(tmp_path):
    from cpa_core.common.errors import DataError
    from cpa_core.io.tables import load_documents
    from cpa_core.redaction.suggestions import Suggestion, redacted_file

    data = "doc_id,text,identity_id\na,from Lodz,P1\n".encode("latin-1")
    documents = load_documents(data, name="docs.csv", encoding="latin-1")
    suggestion = Suggestion("a", 1, 12, (Edit(5, 4, "Lodz", "Łódź Voivodeship", "lodz", "generalize"),), True)
    with pytest.raises(DataError, match=r"docs.csv: the redacted release cannot be written in its encoding.*U\+0141"):
        redacted_file(data, documents, [suggestion])


@pytest.mark.integration
def test_suggestions_for_some_documents_and_each_strategy_on_the_sample(sample_paths):
    from cpa_core.redaction.suggestions import suggest_redactions

    project, documents, registry, config, attacker, result, texts = audited_sample(sample_paths)
    full = {s: suggest_redactions(result, attacker, registry, texts, strategy=s)[:12]
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


@pytest.mark.integration
def test_under_the_split_protocol_calibration_documents_are_redacted_alike(sample_paths):
    """The redacted release is one release mechanism: the rule "redact what the stored thresholds flag" applies
    to the calibration documents as to the audited ones, or a new calibration would not certify it."""
    from cpa_core.redaction.suggestions import release_flags, suggest_redactions

    _, documents, registry, config, attacker, result, texts = audited_sample(
        sample_paths, {"protocol": "split", "n_cal": 500, "n_test": 500})
    level = config.policy_confidence
    audited, calibration = result.certificate(level), result.calibration_certificate(level)
    expected = {str(c.split.table.doc_ids[r]) for c in (audited, calibration)
                for r in np.flatnonzero(config.policy.flags(c.set_sizes))}
    flagged = release_flags(result)
    assert {str(c.split.table.doc_ids[r]) for c, r in flagged} == expected
    assert {c.split is result.test_split for c, _ in flagged} == {True, False}  # both splits have flags
    sizes = [int(c.set_sizes[r]) for c, r in flagged]
    assert sizes == sorted(sizes)
    some = [str(c.split.table.doc_ids[r]) for c, r in flagged if c.split is result.calibration_split][:3]
    suggestions = suggest_redactions(result, attacker, registry, texts, doc_ids=some)
    stored = {str(c.split.table.doc_ids[r]): int(c.set_sizes[r]) for c, r in flagged
              if c.split is result.calibration_split}
    assert [s.doc_id for s in suggestions] == some
    assert all(s.set_size_before == stored[s.doc_id] for s in suggestions)  # under its stored threshold


def test_the_worklist_carries_each_documents_suggested_edits_as_offsets():
    from cpa_core.redaction.suggestions import Suggestion, suggested_worklist
    from cpa_core.report.worklist import worklist_csv, worklist_json

    work = pd.DataFrame({"doc_id": ["a", "b"], "set_size": [2, 5], "evidence": [[], []], "config_id": ["c", "c"],
                         "confidence": [0.9, 0.9]})
    edits = (Edit(3, 5, "Leeds", "[CITY]", "leeds"), Edit(12, 4, "2014", "the 2010s", "2014"))
    frame = suggested_worklist(work, [Suggestion("a", 2, 12, edits, True)])
    assert list(frame.columns)[-2:] == ["config_id", "confidence"]
    assert frame["set_size_after_edits"].tolist()[0] == 12 and pd.isna(frame["set_size_after_edits"].tolist()[1])
    assert frame["suggested_edits"].tolist()[1] == []
    assert [e["replacement"] for e in json.loads(worklist_json(frame))[0]["suggested_edits"]] == ["[CITY]", "the 2010s"]
    row = pd.read_csv(io.StringIO(worklist_csv(frame)), dtype=str, keep_default_na=False).iloc[0]
    assert row["suggested_edits"] == "3+5=[CITY]; 12+4=the 2010s" and row["reaches_k"] == "True"
