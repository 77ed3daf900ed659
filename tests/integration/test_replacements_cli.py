"""``cpa redact --strategy generalize`` on the sample: a curator's table of cities, edits at their offsets of the
released text, fewer flags after a new audit; a bad table, or a table without ``--strategy generalize``, is
refused in one line (the replacements themselves: tests/redaction/test_replacements.py)."""

from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest
from generalization_tables import table_file

from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS
from cpa_core.redaction.suggestions import Edit, apply_edits

CITIES = {"Bristol": "South West England", "Exeter": "South West England", "Cardiff": "Wales",
          "Edinburgh": "Scotland", "Glasgow": "Scotland", "Inverness": "Scotland", "Leeds": "Yorkshire",
          "Sheffield": "Yorkshire", "York": "Yorkshire", "Manchester": "North West England",
          "Newcastle": "North East England", "Norwich": "East of England"}


@pytest.fixture(scope="module")
def sample_audit(sample_paths, tmp_path_factory):
    from conftest import run_cli

    out = tmp_path_factory.mktemp("replacements") / "before"
    done = run_cli("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                   "--config", sample_paths["config"], "--attacker", "tfidf", "--no-history", "--out", out)
    assert done.returncode == 0, done.describe()
    return out


def test_cpa_redact_generalize_end_to_end_on_the_sample(sample_paths, sample_audit, tmp_path):
    from conftest import run_cli

    table = tmp_path / "cities.csv"
    table.write_text("value,general,field\n" + "".join(f"{c},{r},city\n" for c, r in CITIES.items()),
                     encoding="utf-8")
    redact = run_cli("redact", "--audit", sample_audit, "--out", tmp_path / "redacted", "--strategy", "generalize",
                     "--generalization", table)
    assert redact.returncode == 0, redact.describe()
    plan = json.loads((tmp_path / "redacted" / "redactions.json").read_text(encoding="utf-8"))
    assert plan["strategy"] == "generalize"
    assert plan["generalization"] == {"file": str(table), "sha256": hashlib.sha256(table.read_bytes()).hexdigest(),
                                      "entries": len(CITIES)}
    assert plan["derived"]["age_band_field"] == "age_band"
    original = pd.read_csv(sample_paths["documents"])
    texts = dict(zip(original["doc_id"], original["text"]))
    edits = [(document["doc_id"], edit) for document in plan["documents"] for edit in document["edits"]]
    for doc_id, edit in edits:
        assert texts[doc_id][edit["offset"]:edit["offset"] + edit["length"]] == edit["original"]
        assert edit["kind"] in ("placeholder", "generalize")
        if edit["kind"] == "placeholder":
            assert any(re.fullmatch(p, edit["replacement"]) for p in DEFAULT_PLACEHOLDERS)
        if edit["original"] in CITIES:
            assert edit["replacement"] == CITIES[edit["original"]]
        if re.fullmatch(r"(19|20)\d\d", edit["original"]):
            assert edit["replacement"] in (f"the {edit['original'][:3]}0s", f"{edit['original'][:3]}0s")
    kinds = {kind: sum(e["kind"] == kind for _, e in edits) for kind in ("placeholder", "generalize")}
    assert kinds["generalize"] > 0 and kinds["placeholder"] > 0 and plan["edits_by_kind"]["generalize"] == \
        kinds["generalize"]
    withheld = set(plan["decisions"]["withheld"])
    # the command counts the edits in the release: a withheld document's are not
    released = sum(e["kind"] == "generalize" and d not in withheld for d, e in edits)
    assert f"{released} generalize" in redact.stderr
    printed = redact.output  # counts and paths, never the words of the release (beyond the command's own words)
    own = run_cli("redact", "--help").stdout
    assert not [e["original"] for _, e in edits
                if len(e["original"]) > 6 and e["original"] in printed and e["original"] not in own]
    edited = pd.read_csv(tmp_path / "redacted" / "documents-redacted.csv")
    assert list(edited.columns) == list(original.columns)
    by_doc = {d["doc_id"]: [Edit(**e) for e in d["edits"]] for d in plan["documents"]}
    assert [apply_edits(t, by_doc.get(d, [])) for d, t in zip(original["doc_id"], original["text"])
            if d not in withheld] == edited["text"].tolist()
    after = run_cli("audit", "--documents", tmp_path / "redacted" / "documents-redacted.csv", "--registry",
                    sample_paths["registry"], "--config", tmp_path / "redacted" / "audit.toml", "--no-history",
                    "--out", tmp_path / "after")
    assert after.returncode == 0, after.describe()
    before = json.loads((sample_audit / "worklist.json").read_text())
    assert {w["doc_id"] for w in before} == {d["doc_id"] for d in plan["documents"]}  # every flagged document
    summary = json.loads((tmp_path / "after" / "summary.json").read_text())
    held_out = summary["panel"]["attackers"][-1]  # the panel and the attacker the search never consulted
    assert summary["members"][held_out]["confidence"]["0.9"]["n_test"] == len(edited)  # the generalised release


def test_cpa_redact_refuses_a_bad_table_or_a_table_without_generalize(sample_audit, tmp_path):
    from conftest import run_cli_inprocess

    bad = table_file(tmp_path, "value,general\nLeeds,Yorkshire\n,Scotland\n", "bad.csv")
    done = run_cli_inprocess("redact", "--audit", sample_audit, "--out", tmp_path / "out", "--strategy",
                             "generalize", "--generalization", bad)
    assert done.returncode == 2 and len(done.stderr_lines) == 1, done.describe()
    assert "bad.csv, row 2, column 'value'" in done.stderr and "Traceback" not in done.output
    assert not (tmp_path / "out" / "redactions.json").exists()
    wrong = run_cli_inprocess("redact", "--audit", sample_audit, "--out", tmp_path / "out2", "--generalization", bad)
    assert wrong.returncode == 2 and len(wrong.stderr_lines) == 1, wrong.describe()
    assert "applies to --strategy generalize only" in wrong.stderr and not (tmp_path / "out2").exists()


def test_cpa_redact_refuses_a_rewrite_it_cannot_make_in_one_line(sample_audit, tmp_path):
    """--rewrite with a reviewed table, --rewrite-max without --rewrite or below 1, and --rewrite without an endpoint
    are refused in one line that says what to give, before anything is written."""
    from conftest import run_cli_inprocess

    base = ("redact", "--audit", sample_audit)
    cases = [(("--rewrite", "--decisions", tmp_path / "d.csv"), "give one or the other"),
             (("--rewrite-max", "3"), "expected --rewrite with a count of at least 1, found --rewrite-max 3 alone"),
             (("--rewrite", "--rewrite-max", "0"), "found --rewrite-max 0"),
             (("--rewrite",), "--rewrite needs an endpoint: declare [llm] base_url and model")]
    for i, (options, said) in enumerate(cases):
        done = run_cli_inprocess(*base, "--out", tmp_path / f"out{i}", *options)
        assert done.returncode == 2 and len(done.stderr_lines) == 1 and said in done.stderr, done.describe()
        assert "Traceback" not in done.output and not (tmp_path / f"out{i}").exists()
