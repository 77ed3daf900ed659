"""No silent vacuous certificate: every case that turns sets into the whole pool is said, with what to change."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from conftest import run_cli_inprocess
from tables import LEVEL, documents_and_registry, probability_matrix, sample_truth, table_from_matrix, toy_attacker

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import DataError
from cpa_core.io.tables import check_release, load_documents, load_registry
from cpa_core.report.metrics import summarize


def open_world(n=800, m=40, missing=0.04, seed=1, groups=None):
    """Documents of which a share ``missing`` are about people outside the registry."""
    rng = np.random.default_rng(seed)
    probabilities = probability_matrix(n, m, rng, concentration=0.2)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    for i in rng.choice(n, int(missing * n), replace=False):
        truth[i] = f"x{i}"
    documents, registry = documents_and_registry(truth, groups=groups, m=m)
    return documents, registry, table_from_matrix(probabilities)


def warnings_at(result, confidence):
    return summarize(result, [confidence]).level(confidence).warnings


def test_a_miss_rate_above_alpha_under_the_conservative_policy_is_said():
    documents, registry, table = open_world(missing=0.04)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.9, 0.99),
                         protocol="split", certainty_bins=1)  # one stratum (misses gather where the attacker is unsure)
    result = run_audit(documents, registry, None, config, table=table)
    assert not warnings_at(result, 0.9)  # a miss rate below alpha = 10 %: a real certificate
    [warning] = warnings_at(result, 0.99)
    assert "of the 400 calibration documents" in warning and "outside the candidate pool" in warning
    assert "the threshold is the 397th smallest of the 400 scores, so at most 3 of them may be infinite" in warning
    assert "miss_policy = 'exclude'" in warning
    assert summarize(result, [0.99]).level(0.99).whole_pool_rate == 1.0
    assert summarize(result, [0.99]).level(0.99).threshold == "infinite"
    excluded = run_audit(documents, registry, None, replace(config, miss_policy="exclude"), table=table)
    assert not any("outside the candidate pool" in w for w in warnings_at(excluded, 0.99))


def test_a_shortlist_that_cuts_too_many_truths_is_said():
    documents, registry, table = open_world(missing=0.0)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.95,),
                         top_k=2, protocol="split")
    result = run_audit(documents, registry, None, config, table=table)
    warnings = warnings_at(result, 0.95)
    assert any("outside the candidate pool" in w and "larger top-K" in w for w in warnings)
    assert any("release policy k = 11 is at least the candidate pool size (2" in w for w in warnings)


def test_a_group_without_calibration_documents_is_said():
    groups = np.array(["a"] * 400 + ["b"] * 400)
    documents, registry, table = open_world(missing=0.0, groups=groups)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.9,),
                         group_column="group", protocol="split", certainty_bins=1)
    result = run_audit(documents, registry, None, config, table=table)
    assert not warnings_at(result, 0.9)
    calibrated_on_a = result.calibration.__class__(result.calibration.confidences,
                                                   {k: {"a": v["a"]} for k, v in result.calibration.q_hat_.items()},
                                                   {"a": result.calibration.n_["a"]})
    only_a = replace(result, calibration=calibrated_on_a)
    assert any("group 'b' has 200 audited documents but no calibration document" in w
               for w in warnings_at(only_a, 0.9))


def test_mostly_whole_pool_sets_are_said_whatever_the_cause():
    documents, registry, table = open_world(missing=0.0, m=10)
    flat = replace(table, weights=np.full_like(table.weights, 0.1))  # an attacker that knows nothing
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.9,),
                         flag_below=3, protocol="split")
    warnings = warnings_at(run_audit(documents, registry, None, config, table=flat), 0.9)
    assert any("certify nothing about these documents" in w for w in warnings)


def test_few_subjects_in_the_registry_are_said_and_none_is_an_error(tmp_path):
    documents, registry, table = open_world(missing=0.6)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.5,),
                         miss_policy="exclude", protocol="split")
    result = run_audit(documents, registry, None, config, table=table)
    assert any("only 40.0 % of the documents' subjects are in the registry" in w for w in warnings_at(result, 0.5))
    docs = load_documents(b"doc_id,text,identity_id\nd1,some text,007\nd2,other text,008\n", name="docs.csv")
    reg = load_registry(b"identity_id,city\n7,Leeds\n8,York\n", name="registry.csv")
    with pytest.raises(DataError) as info:
        check_release(docs, reg)  # ids that mean the same but differ as text: said, never silently unmatched
    message = str(info.value)
    assert "docs.csv" in message and "only in leading zeros" in message and "'007' here and '7'" in message
    other = load_registry(b"identity_id,city\nZ1,Leeds\nZ2,York\n", name="registry.csv")
    with pytest.raises(DataError) as info:
        check_release(docs, other)
    assert "no document's identity is in the registry" in str(info.value) and "'007'" in str(info.value)


def test_the_command_line_says_it_on_the_sample_data(sample_paths, tmp_path):
    """The sample data at K3 and 99 % (a level the sample does not declare): its identities outside the registry,
    scored infinite under the conservative policy, make the sets of the strata where they gather (the attacker unsure)
    the whole registry; the run says so once, naming every such stratum, on stderr and in summary.json."""
    out = tmp_path / "k3"
    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--attacker", "tfidf", "--knowledge", "K3",
                             "--confidence", "0.9", "--confidence", "0.99", "--out", out)
    assert done.returncode == 0, done.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    entry = summary["confidence"]["0.99"]
    infinite = [label for label, q in entry["strata_thresholds"].items() if q is None]
    assert infinite and entry["whole_pool_rate"] > 0.2 and entry["warnings"]
    [said] = [w for w in entry["warnings"] if "outside the candidate pool" in w]  # one warning for every stratum
    assert all(f"'{label}'" in said for label in infinite), (infinite, said)
    assert not summary["confidence"]["0.9"]["warnings"]
    assert any(line.startswith("cpa: warning:") and "outside the candidate pool" in line for line in done.stderr_lines)
    assert "q_hat per stratum (" in done.stderr and " infinite" in done.stderr
    assert None in entry["strata_thresholds"].values()


def test_the_command_line_refuses_a_registry_that_matches_no_document(sample_paths, tmp_path):
    registry = tmp_path / "registry.csv"
    registry.write_text("identity_id,city\nZ1,Leeds\nZ2,York\n", encoding="utf-8")
    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", registry,
                             "--out", tmp_path / "out")
    assert done.returncode == 2 and len(done.stderr_lines) == 1
    assert "no document's identity is in the registry" in done.stderr


def test_documents_without_any_candidate_row_do_not_crash(sample_paths, tmp_path):
    scores = tmp_path / "scores.csv"
    scores.write_text("doc_id,candidate_id,score\nnot-a-document,P0001,0.9\n", encoding="utf-8")
    out = tmp_path / "out"
    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--scores", scores, "--out", out)
    assert done.returncode == 0, done.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["confidence"]["0.9"]["candidate_miss_rate"] == 1.0 and summary["confidence"]["0.9"]["warnings"]


def test_an_attacker_that_ties_every_candidate_certifies_the_whole_pool_not_an_empty_set():
    documents, registry, table = open_world(missing=0.0, m=10)
    weights = table.weights.copy()
    weights[:50] = 0.1  # the attacker knows nothing about the first 50 documents: every candidate tied
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=400, n_test=400, confidences=(0.8,),
                         protocol="split", seed=3)
    result = run_audit(documents, registry, None, config, table=replace(table, weights=weights))
    cert = result.certificate(0.8)
    tied = np.isin(result.test_split.table.doc_ids, [f"d{i}" for i in range(50)])
    assert (cert.set_sizes[tied] == 10).all() and cert.covered[tied].all()  # no information: the whole pool
    assert not [w for w in warnings_at(result, 0.8) if "release policy k" not in w]  # a document's own tie is no reason to doubt the release's certificate


def test_the_command_line_says_a_short_shortlist_and_a_group_without_labels(sample_paths, tmp_path):
    import pandas as pd

    done = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--attacker", "tfidf", "--top-k", 1,
                             "--confidence", 0.9, "--out", tmp_path / "top1")
    assert done.returncode == 0, done.describe()
    assert any("outside the candidate pool" in line and "larger top-K" in line for line in done.stderr_lines)
    assert any("release policy k = 11 is at least the candidate pool size (1" in line for line in done.stderr_lines)
    documents = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    documents.loc[documents["group"] == "ner_masking", "identity_id"] = ""  # subjects unknown in one group
    path = tmp_path / "documents.csv"
    documents.to_csv(path, index=False)
    done = run_cli_inprocess("audit", "--documents", path, "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--attacker", "tfidf", "--confidence", 0.9,
                             "--out", tmp_path / "groups")
    assert done.returncode == 0, done.describe()
    unknown = int((documents["group"] == "ner_masking").sum())
    assert any(f"group 'ner_masking' has {unknown:,} audited documents but no calibration document" in line
               for line in done.stderr_lines)
    summary = json.loads((tmp_path / "groups" / "summary.json").read_text(encoding="utf-8"))
    assert summary["confidence"]["0.9"]["groups"]["ner_masking"]["threshold"] == "infinite"
    labelled = len(documents) - unknown
    assert summary["confidence"]["0.9"]["n_test"] == len(documents)
    assert summary["confidence"]["0.9"]["n_cal"] == labelled - round(labelled / 5)  # a fifth tunes the temperature


@pytest.mark.parametrize("labelled, groups", [(9, None), (10, None), (18, ("a", "b"))])
def test_a_release_one_labelled_document_short_is_said_and_fails_the_verdict(labelled, groups):
    """Under the release protocol each labelled document is calibrated by the other n - 1: at 0.9 a finite threshold
    needs 9 scores, so 9 labelled documents give the unlabelled ones a finite threshold and every labelled one an
    infinite one (the whole pool). The summary says so (threshold per document, the share of infinite thresholds,
    10 needed), a warning names the cause, and the verdict fails both checks; 10 labelled documents pass them."""
    from cpa_core.report.verdict import release_verdict

    rng = np.random.default_rng(1)
    n = labelled + 3
    probabilities = probability_matrix(n, 8, rng)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    truth[labelled:] = [None] * 3  # three documents whose subject is unknown
    group_of = None if groups is None else [groups[i % 2] for i in range(n)]
    documents, registry = documents_and_registry(truth, groups=group_of, m=8)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=(0.9,),
                         group_column=None if groups is None else "group")
    result = run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))
    cert = result.certificate(0.9)
    short = labelled // (1 if groups is None else 2) == 9
    assert np.isinf(cert.q_hat[:labelled]).all() == short
    assert np.isfinite(cert.q_hat[labelled:]).all()
    summary = summarize(result, [0.9])
    entry = summary.level(0.9)
    assert entry.n_cal_needed == 10
    assert entry.infinite_threshold_rate == pytest.approx(labelled / n if short else 0.0)
    assert entry.threshold == "per document (leave-one-out)"
    said = [w for w in entry.warnings if "labelled documents are infinite" in w]
    assert len(said) == short and (not short or f"thresholds of {labelled} labelled documents" in said[0])
    failed = {check.name for check in release_verdict(summary, 0.9).failed}
    assert ({"calibration size", "finite threshold"} <= failed) == short
    assert not short or release_verdict(summary, 0.9).status == "inconclusive"
    if not short:
        assert not failed & {"calibration size", "finite threshold"}


def test_whole_pool_sets_and_the_warnings_of_one_certificate_by_hand():
    from tables import toy_audit

    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.report.diagnostics import NEARLY_WHOLE, certificate_warnings, whole_pool

    result = toy_audit()  # pools of 3: (nearly) whole from ceil(0.9 x 3) = 3 members on
    assert NEARLY_WHOLE == 0.9
    assert whole_pool(result.certificate(0.9)).tolist() == [True, True]    # infinite threshold: sizes 3 and 3
    assert whole_pool(result.certificate(0.5)).tolist() == [False, False]  # sizes 2 and 2
    assert whole_pool(result.certificate(0.3)).tolist() == [False, False]  # sizes 1 and 0
    said = certificate_warnings(result, result.certificate(0.9), ReleasePolicy(2))
    assert any("needs at least 9" in warning for warning in said)  # 2 calibration documents; 1 / 0.1 - 1 = 9
    assert tuple(said) == warnings_at(replace(result, config=replace(result.config, flag_below=2)), 0.9)


def _release(truth, groups=None, confidences=(0.9, 0.99), m=20, seed=5):
    """A release-protocol audit of documents whose subjects are ``truth`` (``x...``: outside the registry, ``None``:
    unknown), calibrated per group when ``groups`` are given, in one certainty stratum each."""
    rng = np.random.default_rng(seed)
    probabilities = probability_matrix(len(truth), m, rng)
    documents, registry = documents_and_registry(truth, groups=groups, m=m)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=confidences, certainty_bins=1,
                         group_column=None if groups is None else "group")
    return run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))


def _known(n, m=20, seed=5):
    rng = np.random.default_rng(seed)
    return [f"p{t}" for t in sample_truth(probability_matrix(n, m, rng), rng)]


def test_one_identity_outside_the_pool_is_said_in_the_singular():
    """150 labelled documents at 99 %: the threshold is the 150th smallest of the other 149 scores plus one, so no
    score may be infinite; one document's identity is outside the registry."""
    truth = _known(150)
    truth[7] = "x7"
    [said] = [w for w in warnings_at(_release(truth), 0.99) if "outside the candidate pool" in w]
    assert "1 of the 150 calibration documents (0.7 %) has its identity outside the candidate pool, and its score " \
           "is infinite" in said, said
    assert "the 150th smallest of the 150 scores, so at most 0 of them may be infinite" in said
    assert "1 of the 150 calibration documents (0.7 %) have" not in said and "-th" not in said


def test_the_strata_of_one_cause_are_said_in_one_warning():
    """Two groups whose identities outside the registry are more than 99 % allows: one warning names both, with
    their counts and what the level allows, instead of one box per group repeating the same advice."""
    truth, groups = _known(300), ["a"] * 200 + ["b"] * 100
    for i in (*range(0, 16, 2), 250):  # eight outsiders in group a, one in group b
        truth[i] = f"x{i}"
    warnings = warnings_at(_release(truth, groups), 0.99)
    said = [w for w in warnings if "outside the candidate pool" in w]
    assert len(said) == 1, warnings
    assert "in groups 'a' and 'b'" in said[0] and "'a': 8 of 200, at most 1 allowed" in said[0]
    assert "'b': 1 of 100, at most 0 allowed" in said[0] and said[0].count("miss_policy = 'exclude'") == 1
    assert not warnings_at(_release(truth, groups), 0.9)  # 90 % allows them: nothing to say


def test_a_group_without_calibration_documents_is_said_alike_at_every_level():
    """A group whose subjects are all unknown has no threshold at any level: the warning names no level, so the
    pages that show every level's warnings (once each) say it once; one audited document is said in the singular."""
    truth, groups = _known(201) + [None], ["a"] * 201 + ["b"]
    summary = summarize(_release(truth, groups, confidences=(0.8, 0.9)))
    per_level = [entry.warnings for entry in summary.levels.values()]
    assert per_level[0] == per_level[1] and len(per_level[0]) == 1, per_level
    [said] = per_level[0]
    assert said.startswith("group 'b' has 1 audited document but no calibration document"), said
    assert "confidence" not in said


def test_a_thousand_one_document_groups_are_said_in_a_few_lines_with_their_counts():
    """1,000 one-document groups, a fifth of them unlabelled: each cause is one short warning with its count and a few
    of the groups (the summary's warnings, so the command line, the dashboard and the report say it alike), not a line
    naming all of them."""
    truth = _known(1000)
    truth[::5] = [None] * 200
    result = _release(truth, [f"g{i}" for i in range(1000)], confidences=(0.9, 0.99))
    said = list(summarize(result, [0.9]).level(0.9).warnings)
    assert len(said) == 2, said
    assert said[0] == ("confidence 0.9: 800 groups ('g1', 'g2', 'g3', …) have fewer than 9 calibration documents "
                       "(n = 1 each), the least that gives a finite threshold: their thresholds are infinite and every "
                       "set in them is the whole pool. Add labelled documents or lower the confidence level")
    assert said[1].startswith("200 groups ('g0', 'g10', 'g100', …) have audited documents (200 audited documents in "
                              "all) but no calibration document"), said[1]
    assert all(len(w) < 400 for w in said)
    assert len(result.calibration.notes_) == 2 * 800  # the notes themselves keep every group (the manifest's list)
