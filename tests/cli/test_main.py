"""The ``cpa`` command line in this process (``main()``, the code path of the process): the parser (every option
in the help, values refused before any file is read, one line each), and a toy audit from the command to its
output folder, its summary on stderr and its record in the history (in processes, on the sample data:
tests/integration/test_cli.py; bad input across the commands: tests/cli/test_hardening.py)."""

from __future__ import annotations

import json

import pytest
from cli_checks import OUTPUT_FILES, assert_one_line_error, ok

from cpa_core.audit.configuration import AUDIT_PARAMS
from cpa_core.cli.main import build_parser
from cpa_core.store.history import list_audits


def audit_args(paths, out, *extra) -> list:
    """A TF-IDF audit of the toy release (the attacker declared: with none, ``cpa audit`` runs a panel)."""
    return ["audit", "--documents", paths["documents"], "--registry", paths["registry"], "--config", paths["config"],
            "--attacker", "tfidf", "--out", out, *extra]


def toy_audit_args(paths, out, *extra) -> list:
    return audit_args(paths, out, "--protocol", "split", "--n-cal", "20", "--n-test", "28", "--confidence", "0.8",
                      "--temperature", "0.5", *extra)


def test_audit_help_mentions_every_option(cli_inprocess):
    result = cli_inprocess("audit", "--help")  # the same text as a process prints (argparse, no I/O before)
    ok(result)
    parser = build_parser()
    audit = parser._subparsers._group_actions[0].choices["audit"]
    declared = {s for action in audit._actions for s in action.option_strings if s.startswith("--")}
    spec = {"--documents", "--registry", "--config", "--drop-invalid", "--knowledge", "--fields", "--attacker",
            "--scores", "--scores-kind", "--temperature", "--top-k", "--score", "--confidence", "--n-cal",
            "--n-test", "--group-column", "--seed", "--miss-policy", "--flag-below", "--leakage-threshold", "--out"}
    assert spec <= declared
    for option in declared:
        assert option in result.stdout, option
    for output in OUTPUT_FILES:
        assert output in result.stdout


def test_the_parser_has_an_option_for_every_declared_audit_parameter():
    audit = build_parser()._subparsers._group_actions[0].choices["audit"]
    declared = {s for action in audit._actions for s in action.option_strings}
    assert {param.option for param in AUDIT_PARAMS if param.option} <= declared
    assert {"--history", "--no-history", "--dry-run", "--param", "--scheduler"} <= declared


def test_the_commands_are_listed(cli_inprocess):
    result = ok(cli_inprocess("--help"))
    for command in ("audit", "stress", "history", "redact", "sample-data"):
        assert command in result.stdout
    assert_one_line_error(cli_inprocess(), "the following arguments are required: COMMAND", "(see 'cpa --help')")
    assert_one_line_error(cli_inprocess("certify"), "invalid choice: 'certify'")


@pytest.mark.parametrize("args, fragments", [
    (["stress", "topk", "--documents", "d.csv", "--registry", "r.csv", "--ks", "5,x"],
     ["argument --ks: expected comma-separated integers, found '5,x'"]),
    (["stress", "seeds", "--documents", "d.csv", "--registry", "r.csv", "--seeds", "0,-1"],
     ["argument --seeds: expected comma-separated integers of at least 0, found '0,-1'"]),
    (["stress", "budget", "--documents", "d.csv", "--registry", "r.csv", "--ms", ","],
     ["argument --ms: expected comma-separated integers of at least 0, found ','"]),
    (["audit", "--documents", "d.csv", "--registry", "r.csv", "--out", "o", "--documents-encoding", "klingon"],
     ["argument --documents-encoding: unknown encoding 'klingon'"]),
    (["audit", "--documents", "d.csv", "--registry", "r.csv", "--out", "o", "--attacker", "oracle"],
     ["argument --attacker: invalid choice: 'oracle'"]),
    (["audit", "--documents", "d.csv", "--registry", "r.csv", "--out", "o", "--seed", "one"],
     ["argument --seed: invalid int value: 'one'"]),
    (["audit", "--documents", "d.csv", "--registry", "r.csv"], ["the following arguments are required: --out"]),
])
def test_bad_values_are_refused_before_any_file_is_read(cli_inprocess, tmp_path, args, fragments):
    result = cli_inprocess(*args)  # d.csv and r.csv do not exist: the parser stops first
    line = assert_one_line_error(result, *fragments)
    assert "not found" not in line and not (tmp_path / "o").exists()


def test_a_toy_audit_from_the_command_to_its_folder(toy_data, tmp_path, cli_inprocess, audit_history):
    paths = toy_data()
    out = tmp_path / "out"
    before = len(list_audits(audit_history))
    result = ok(cli_inprocess(*toy_audit_args(paths, out)))
    split_files = set(OUTPUT_FILES) - {"documents.jsonl"} | {"calibration.jsonl", "test.jsonl", "report.html"}
    assert split_files <= {path.name for path in out.iterdir()}  # the split protocol's records: one file per split
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    level = summary["confidence"]["0.8"]
    lines = result.stderr_lines
    said = [line for line in lines if line.startswith("cpa: confidence 0.8: coverage ")]
    assert len(said) == 1 and f"coverage {level['coverage']:.3f} " in said[0] and "n_cal 20, n_test 28" in said[0]
    assert (f"cpa: {level['n_flagged']} documents flagged (|C| < 11 or linkage > 0.0909 at confidence 0.8: "
            f"{level['n_flagged_by_set']} by set size, {level['n_flagged_by_linkage']} by linkage probability); results "
            f"in {out}") in lines
    rate = level["first_guess_rate"]
    assert any(line.startswith(f"cpa: attack: the attacker's first guess is the right person for {100 * rate:.1f} %")
               for line in lines)
    assert any(line.startswith("cpa: verdict (") for line in lines)
    assert lines[-1] == f"cpa: recorded as audit {before + 1} in {audit_history}"
    assert len(list_audits(audit_history)) == before + 1
    assert result.stdout == ""  # the figures go to stderr, the files hold the rest


def test_no_history_and_a_dry_run(toy_data, tmp_path, cli_inprocess, audit_history):
    paths = toy_data()
    before = len(list_audits(audit_history))
    ok(cli_inprocess(*toy_audit_args(paths, tmp_path / "out", "--no-history")))
    assert len(list_audits(audit_history)) == before
    dry = ok(cli_inprocess(*toy_audit_args(paths, tmp_path / "dry", "--dry-run")))
    assert dry.stdout == "0 LLM calls needed (answers already cached are not counted)\n"
    assert not (tmp_path / "dry").exists() and len(list_audits(audit_history)) == before


@pytest.mark.parametrize("extra, fragments", [
    (["--param", "temperature"], ["--param: expected NAME=VALUE, found 'temperature'"]),
    (["--scores-kind", "rank"], ["--scores-kind applies to the imported attacker(s), not to 'tfidf'; add --attacker"]),
    (["--param", "chunk_size=0"], ["[attacker.tfidf] chunk_size", "found 0"]),
    (["--knowledge", "K9"], ["'K9'"]),
])
def test_attacker_parameters_are_checked_for_the_chosen_attacker(toy_data, tmp_path, cli_inprocess, extra, fragments):
    assert_one_line_error(cli_inprocess(*audit_args(toy_data(), tmp_path / "out", *extra)), *fragments)
    assert not (tmp_path / "out" / "summary.json").exists()


def test_sample_data_is_written_where_asked(tmp_path, cli_inprocess):
    result = ok(cli_inprocess("sample-data", "--out", tmp_path / "sample", "--seed", "3"))
    assert result.stderr_lines == [f"cpa: wrote {tmp_path / 'sample' / 'registry.csv'}",
                                   f"cpa: wrote {tmp_path / 'sample' / 'documents.csv'}"]
    assert len((tmp_path / "sample" / "documents.csv").read_text(encoding="utf-8").splitlines()) > 1000


def test_a_stress_table_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import errno

    import pandas as pd

    from cpa_core.cli.main import _write_table

    path = tmp_path / "tables" / "topk.csv"
    _write_table(pd.DataFrame({"top_k": [1, 5], "coverage": [0.9, 0.95]}), path)
    before = path.read_bytes()
    assert before.startswith(b"top_k,coverage\n")

    def full_disk(self, stream, **kwargs):
        stream.write("top_k,cov")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    with pytest.raises(OSError) as raised:
        _write_table(pd.DataFrame({"top_k": [10]}), path)
    assert raised.value.filename == str(path) and raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["topk.csv"]


def test_levels_that_leave_out_the_files_flagging_level_say_both_remedies_and_each_works(sample_paths, tmp_path,
                                                                                         cli_inprocess):
    """The sample's configuration flags at 90 %; --confidence 0.95 alone audits 95 % only: refused before any attack,
    in one line naming both ways out, and each way out is a valid declaration."""
    base = audit_args(sample_paths, tmp_path / "out", "--confidence", "0.95")
    line = assert_one_line_error(cli_inprocess(*base), "the flagging confidence 0.9 is not among the audited levels "
                                 "['0.95']", "--flag-confidence 0.95", "--confidence 0.9 --confidence 0.95")
    assert "Traceback" not in line and not (tmp_path / "out").exists()
    for remedy in (["--flag-confidence", "0.95"], ["--confidence", "0.9"]):
        ok(cli_inprocess(*base, *remedy, "--dry-run"))
