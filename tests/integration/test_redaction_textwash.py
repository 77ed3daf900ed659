"""Suggested redactions on a real slice: TextWash person descriptions (study 1, the slice of test_textwash.py:
30 people, 150 calibration and 150 test documents, TF-IDF over profiles built from other, original descriptions).

audit -> ``cpa redact`` (the proposed decisions: the suggested edits made, the documents to withhold left out) ->
audit of the redacted release under the same declared threat model and policy, calibrated again: fewer documents are
flagged, and every edit is the released text at its offset (character offsets: non-ASCII text before or inside an
edit included).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import run_cli
from test_textwash import textwash_slice  # noqa: F401 (fixture: the slice, audited by the cpa process)

from cpa_core.redaction.suggestions import Edit, apply_edits


@pytest.fixture(scope="module")
def redacted(textwash_slice):  # noqa: F811
    paths, audited, documents = textwash_slice
    assert audited.returncode == 0, audited.describe()
    out = paths["out"].parent
    redact = run_cli("redact", "--audit", paths["out"], "--out", out / "redacted")
    assert redact.returncode == 0, redact.describe()
    release = out / "redacted" / f"{paths['documents'].stem}-redacted{paths['documents'].suffix}"
    again = run_cli("audit", "--documents", release, "--registry", paths["registry"],
                    "--config", out / "redacted" / "audit.toml", "--no-history", "--out", out / "after")
    assert again.returncode == 0, again.describe()
    return paths, documents, redact, release, out / "after", again


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_redacted_release_audited_again_flags_fewer_documents(redacted):
    paths, _, _, _, after, _ = redacted
    before_work, after_work = read_json(paths["out"] / "worklist.json"), read_json(after / "worklist.json")
    plan = read_json(after.parent / "redacted" / "redactions.json")
    # the flagged audited documents, and (split protocol) the calibration documents flagged alike, by either rule
    searched = {d["doc_id"] for d in plan["documents"]}
    assert {str(d["doc_id"]) for d in before_work} < searched
    assert 0 < len(after_work) < len(before_work)
    # the same declared threat model and policy (knowledge, attacker, score, levels, protocol, policy); another
    # release: the documents withheld are out of it, and its split is drawn over the documents left
    # the redacted release is audited by the redaction's attacker and one held out of its search: the attacker's own
    first, second = read_json(paths["out"] / "manifest.json"), read_json(after / "members" / "tfidf" / "manifest.json")
    same = ("knowledge", "attacker", "score", "confidences", "protocol", "seed", "flag_below", "acceptable_linkage",
            "flag_confidence")
    assert {k: first["config"].get(k) for k in same} == {k: second["config"].get(k) for k in same}
    assert first["inputs"]["documents"]["sha256"] != second["inputs"]["documents"]["sha256"]
    assert first["config_id"] != second["config_id"]  # a new release mechanism: certified by its own calibration


def test_every_edit_is_the_released_text_at_its_offset_and_the_release_applies_them(redacted):
    _, documents, _, release, after, _ = redacted
    texts = dict(zip(documents["doc_id"].astype(str), documents["text"]))
    plan = read_json(after.parent / "redacted" / "redactions.json")
    edits, after_non_ascii = {}, 0
    for document in plan["documents"]:
        text = texts[document["doc_id"]]
        for edit in document["edits"]:
            assert text[edit["offset"]:edit["offset"] + edit["length"]] == edit["original"]
            after_non_ascii += any(ord(c) > 127 for c in text[:edit["offset"] + edit["length"]])
        edits[document["doc_id"]] = [Edit(e["offset"], e["length"], e["original"], e["replacement"], e["term"])
                                     for e in document["edits"]]
    assert sum(map(len, edits.values())) > 0
    assert after_non_ascii > 0, "no edit lies after (or on) a non-ASCII character: offsets untested beyond ASCII"
    withheld = {d["doc_id"] for d in plan["documents"] if d["action"] == "withhold"}
    assert set(plan["decisions"]["withheld"]) == withheld
    written = pd.read_csv(release, keep_default_na=False)
    assert list(written.columns) == list(documents.columns) and len(written) == len(documents) - len(withheld)
    assert not withheld & set(written["doc_id"].astype(str))
    for doc_id, text in zip(written["doc_id"].astype(str), written["text"]):
        assert text == apply_edits(texts[doc_id], edits.get(doc_id, ()))  # flagged edited, the others as released


def test_records_of_flagged_documents_carry_the_worklist_evidence(redacted):
    paths, documents, _, _, _, _ = redacted
    texts = dict(zip(documents["doc_id"].astype(str), documents["text"]))
    work = {str(entry["doc_id"]): entry for entry in read_json(paths["out"] / "worklist.json")}
    carried = 0
    for line in (paths["out"] / "test.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if str(record["doc_id"]) not in work:
            assert "evidence" not in record
            continue
        assert record["evidence"] == work[str(record["doc_id"])]["evidence"]
        assert record["driving_terms"] == work[str(record["doc_id"])]["driving_terms"]
        for span in record["evidence"]:
            assert texts[str(record["doc_id"])][span["offset"]:span["offset"] + span["length"]] == span["text"]
        carried += 1
    assert carried == len(work)


def test_nothing_printed_holds_the_released_text(redacted):
    _, documents, redact, _, _, again = redacted
    printed = redact.output + again.output
    assert "Traceback" not in printed
    assert not any(text.strip()[:60] in printed for text in documents["text"])
