"""An audit of 1,000 one-document groups says each cause of a vacuous certificate in one line with its count and a
few of the groups, on ``cpa audit``'s stderr as in summary.json (the warnings themselves: tests/report/)."""

from __future__ import annotations

import json
import re

from cli_checks import ok
from conftest import run_cli, toy_frames, write_table


def test_a_thousand_one_document_groups_give_a_few_warning_lines_with_their_counts(tmp_path):
    documents, registry = toy_frames(n_people=250, docs_per_person=4, groups=tuple(f"g{i}" for i in range(1000)))
    assert documents["group"].nunique() == 1000
    out = tmp_path / "out"
    done = ok(run_cli("audit", "--documents", write_table(documents, tmp_path / "documents.csv"),
                      "--registry", write_table(registry, tmp_path / "registry.csv"), "--attacker", "tfidf",
                      "--group-column", "group",
                      "--certainty-bins", 1, "--confidence", 0.9, "--out", out))
    warnings = [line for line in done.stderr_lines if line.startswith("cpa: warning:")]
    assert 1 <= len(warnings) <= 5, done.describe()
    for line in warnings:
        assert re.search(r"\b\d[\d,]* groups \('g\d+', 'g\d+', 'g\d+', …\)", line), line  # a count and examples
        assert len(line) < 500, line
    counts = sorted(int(re.search(r"(\d[\d,]*) groups", line).group(1).replace(",", "")) for line in warnings)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    n_cal = summary["confidence"]["0.9"]["n_cal"]
    assert counts == sorted([1000 - n_cal, n_cal]), warnings  # groups without a calibration document; with too few
    assert all(warning in {f"cpa: warning: {w}" for entry in summary["confidence"].values() for w in entry["warnings"]}
               for warning in warnings)
