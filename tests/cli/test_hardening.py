"""Bad and hostile input: one-line errors (exit 2) naming what is wrong, never a traceback, never work lost;
the tool's own files kept private."""

from __future__ import annotations

import stat

import pytest
from conftest import run_cli_inprocess


def audit(sample_paths, out, *extra, config=None):
    """A TF-IDF audit of the sample at K1, unless ``extra`` declares another attacker."""
    attacker = () if "--attacker" in extra else ("--attacker", "tfidf")
    return run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", config or sample_paths["config"], "--knowledge", "K1", *attacker,
                             "--out", out, *extra)


def one_line_error(result, *parts):
    assert result.returncode == 2, result.describe()
    assert len(result.stderr_lines) == 1 and "Traceback" not in result.stderr, result.describe()
    for part in parts:
        assert part in result.stderr, (part, result.stderr)


@pytest.mark.parametrize("extra,parts", [
    (["--seed", "-1"], ["--seed", "at least 0", "-1"]),
    (["--temperature", "inf"], ["--temperature", "found inf"]),
    (["--temperature", "1e-320"], ["--temperature", "at least 0.001"]),
    (["--top-k", "-3"], ["--top-k", "at least 1"]),
    (["--confidence", "1.5"], ["--confidence", "less than 1"]),
    (["--n-cal", "-5", "--protocol", "split"], ["--n-cal", "at least 1"]),
    (["--attacker", "forced_choice", "--llm-url", "http://127.0.0.1:99999/v1", "--llm-model", "m"],
     ["base_url", "port", "65535"]),
    (["--attacker", "forced_choice", "--llm-url", "127.0.0.1:8080/v1", "--llm-model", "m"],
     ["base_url", "http:// or https://"]),
])
def test_bad_options_are_one_line_errors(sample_paths, tmp_path, extra, parts):
    one_line_error(audit(sample_paths, tmp_path / "out", *extra), *parts)


@pytest.mark.parametrize("table,parts", [
    ("[attacker.tfidf]\nchunk_size = 0\n", ["[attacker.tfidf] chunk_size", "at least 1", "found 0"]),
    ("[attacker.tfidf]\nchunk_size = -4\n", ["[attacker.tfidf] chunk_size", "found -4"]),
    ("[llm]\nbackoff_base_s = -1\n", ["[llm] backoff_base_s", "at least 0"]),
    ("[llm]\ntimeout_s = 0\n", ["[llm] timeout_s", "greater than 0"]),
    ("[audit]\nseed = -1\n", ["[audit] seed", "at least 0"]),
    ("[audit]\nmiss_policy = 'ignore'\n", ["[audit] miss_policy", "'infinite', 'exclude'"]),
    ("[audit]\nseed = 1" + "0" * 400 + "\n", ["[audit] seed"]),
])
def test_bad_declared_values_are_one_line_errors(sample_paths, tmp_path, table, parts):
    level = '[knowledge.K1]\nfields = ["age_band", "gender", "occupation", "city"]\n\n'
    config = tmp_path / "audit.toml"
    config.write_text(level + table, encoding="utf-8")
    one_line_error(audit(sample_paths, tmp_path / "out", config=config), *parts)


def test_stress_seeds_must_be_at_least_zero(sample_paths, tmp_path):
    result = run_cli_inprocess("stress", "seeds", "--documents", sample_paths["documents"], "--registry",
                               sample_paths["registry"], "--config", sample_paths["config"], "--seeds", "0,-1")
    one_line_error(result, "--seeds", "at least 0")


def test_an_unusable_output_folder_is_said_before_the_attack(sample_paths, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    result = audit(sample_paths, blocker / "out")
    one_line_error(result, "output folder", "cannot be written")
    assert "ranking the registry" not in result.stderr  # nothing was attacked


def test_records_and_worklists_are_private(sample_paths, tmp_path):
    out = tmp_path / "out"
    result = audit(sample_paths, out)
    assert result.returncode == 0, result.describe()
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    lines = (out / "documents.jsonl").read_text(encoding="utf-8")
    assert "NaN" not in lines and "Infinity" not in lines  # strict JSON


def test_an_id_quoted_in_a_message_is_cut_short(tmp_path):
    """A duplicated "id" that is really a passage of text never reaches the message whole."""
    from cpa_core.common.errors import DataError
    from cpa_core.io.reading import ID_SHOWN
    from cpa_core.io.tables import load_documents

    passage = "Mrs Smith was admitted on 3 May with chest pain and a history of " * 8
    path = tmp_path / "d.csv"
    path.write_text(f'doc_id,text,identity_id\n"{passage}",a,P1\n"{passage}",b,P2\n', encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_documents(path)
    message = str(info.value)
    assert "duplicate id" in message and passage.strip() not in message
    assert passage[:ID_SHOWN] + "…" in message and passage[:ID_SHOWN + 1] not in message


def test_a_stress_table_never_replaces_an_input_or_a_folder(sample_paths, tmp_path):
    documents = tmp_path / "documents.csv"
    documents.write_bytes(sample_paths["documents"].read_bytes())
    before = documents.read_bytes()
    for out, expected in ((documents, "is the run's --documents file"), (tmp_path, "is a folder")):
        result = run_cli_inprocess("stress", "topk", "--documents", documents, "--registry", sample_paths["registry"],
                                   "--config", sample_paths["config"], "--ks", "5", "--out", out)
        one_line_error(result, expected)
    assert documents.read_bytes() == before
