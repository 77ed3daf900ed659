"""The files an audit writes, read back and checked against each other (shared by the records tests and their run
on the sample data)."""

from __future__ import annotations

import json

from cpa_core.store.records import EVIDENCE_FIELDS, record_splits


def as_json(value):
    """``value`` as a JSON file gives it back (anything JSON cannot write, as its text)."""
    return json.loads(json.dumps(value, default=str))


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_records_carry_the_worklist_evidence(result, paths, texts: dict[str, str]) -> int:
    """Every flagged document's record has the worklist's evidence fields, equal to worklist.json's; no other
    record has them; every span is the released text at its offset. Returns the number of spans checked."""
    work = {str(entry["doc_id"]): entry for entry in json.loads(paths["worklist.json"].read_text(encoding="utf-8"))}
    spans = 0
    for name in record_splits(result):
        for record in read_jsonl(paths[f"{name}.jsonl"]):
            doc_id = str(record["doc_id"])
            if doc_id not in work or name == "calibration":
                assert not set(EVIDENCE_FIELDS) & set(record), doc_id
                continue
            for field in EVIDENCE_FIELDS:
                assert record[field] == work[doc_id][field], (doc_id, field)
            for span in record["evidence"]:
                assert texts[doc_id][span["offset"]:span["offset"] + span["length"]] == span["text"]
                spans += 1
            assert set(record["driving_terms"]) == {span["text"] for span in record["evidence"]}
    audited = {str(r["doc_id"]) for name in record_splits(result) if name != "calibration"
               for r in read_jsonl(paths[f"{name}.jsonl"]) if "evidence" in r}
    assert audited == set(work)  # every flagged document has its record's evidence, and only those
    return spans


# ------------------------------------------------------------------------------------ a toy release (fast)
