"""The command line reads a latin-1 release when told, and otherwise refuses it in one line naming the file, the
row and the option to use (loading and validating tables: tests/io/test_tables.py)."""

from __future__ import annotations

from conftest import toy_frames


def test_the_command_line_reads_a_latin1_release_when_told(tmp_path):
    from conftest import run_cli_inprocess

    documents, registry = toy_frames(n_people=8, docs_per_person=3)
    documents["text"] = documents["text"] + " Zoë Müller, Bézier."
    registry["city"] = registry["city"] + " Zürich"
    (tmp_path / "documents.csv").write_bytes(documents.to_csv(index=False).encode("latin-1"))
    (tmp_path / "registry.csv").write_bytes(registry.to_csv(index=False).encode("latin-1"))
    common = ["audit", "--documents", tmp_path / "documents.csv", "--registry", tmp_path / "registry.csv",
              "--attacker", "tfidf"]
    result = run_cli_inprocess(*common, "--documents-encoding", "latin-1", "--registry-encoding", "latin1",
                               "--out", tmp_path / "out")
    assert result.returncode == 0, result.describe()
    refused = run_cli_inprocess(*common, "--registry-encoding", "latin-1", "--out", tmp_path / "out2")
    assert refused.returncode == 2 and len(refused.stderr_lines) == 1, refused.describe()
    line = refused.stderr_lines[0]
    for part in (str(tmp_path / "documents.csv"), "row 1", "not valid UTF-8", "line 2", "--documents-encoding",
                 "latin-1"):
        assert part in line, line
    assert "Zo" not in line
    refused = run_cli_inprocess(*common, "--documents-encoding", "latin-1", "--out", tmp_path / "out3")
    assert refused.returncode == 2 and "--registry-encoding" in refused.stderr_lines[0], refused.describe()
    unknown = run_cli_inprocess(*common, "--documents-encoding", "klingon", "--out", tmp_path / "out4")
    assert unknown.returncode == 2 and "unknown encoding 'klingon'" in unknown.stderr, unknown.describe()
