"""A fuzz suite that keeps the tool's boundary honest: generated tables (random columns, types, ids, encodings,
and texts with markdown, HTML and formula payloads) through ``cpa audit`` and the dashboard's upload path.

Every case ends in a one-line error (exit status 2) or a result; never a traceback, never earlier data lost.
Bounded (a fixed number of derandomised examples) so that it runs in ``make test`` in well under two minutes.
"""

from __future__ import annotations

import io
import json

import pandas as pd
from apptest import TIMEOUT_S
from conftest import run_cli_inprocess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PAYLOADS = ["![x](http://127.0.0.1:9/beacon.png)", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
            "=HYPERLINK(\"http://x\")", "+1+1", "-2", "@SUM(A1)", "[link](javascript:alert(1))", "NaN", "None",
            "null", "", "   ", "007", "7", "P0001", "D00001", "café", "名前", "a,b", "line\nbreak", "\t", "x" * 300]
COLUMNS = ["doc_id", "text", "identity_id", "group", "note", "doc_id", "person"]

cells = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=20), st.integers(-5, 10**6), st.floats(allow_nan=True),
                  st.none(), st.booleans())
tables = st.lists(st.sampled_from(COLUMNS), min_size=0, max_size=5).flatmap(
    lambda columns: st.lists(st.lists(cells, min_size=len(columns), max_size=len(columns)), max_size=12).map(
        lambda rows: pd.DataFrame(rows, columns=columns) if columns else pd.DataFrame()))
formats = st.sampled_from(["csv", "jsonl", "parquet", "latin-1 csv", "garbage"])


def encode(frame: pd.DataFrame, kind: str) -> tuple[str, bytes]:
    if kind == "csv":
        return "table.csv", frame.to_csv(index=False).encode("utf-8")
    if kind == "latin-1 csv":
        return "table.csv", frame.to_csv(index=False).encode("latin-1", errors="replace")
    if kind == "jsonl":
        lines = [json.dumps({str(k): v for k, v in zip(frame.columns, row)}, default=str) for row in frame.values.tolist()]
        return "table.jsonl", "\n".join(lines).encode("utf-8")
    if kind == "parquet":
        buffer = io.BytesIO()
        try:
            frame.astype(str).to_parquet(buffer, index=False)
        except Exception:  # pandas refuses some frames (repeated columns): the file is what it is
            return "table.parquet", b"PAR1 not really"
        return "table.parquet", buffer.getvalue()
    return "table.csv", bytes(range(256))


def check(result):
    assert "Traceback" not in result.stderr, result.describe()
    assert result.returncode in (0, 2), result.describe()
    if result.returncode == 2:
        assert len(result.stderr_lines) == 1, result.describe()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(documents=tables, registry=tables, documents_format=formats, registry_format=formats)
def test_generated_tables_through_the_command_line(tmp_path_factory, documents, registry, documents_format,
                                                   registry_format):
    base = tmp_path_factory.mktemp("fuzz")
    name, data = encode(documents, documents_format)
    (base / name).write_bytes(data)
    registry_name, registry_data = encode(registry, registry_format)
    registry_path = base / "registry" / registry_name
    registry_path.parent.mkdir()
    registry_path.write_bytes(registry_data)
    check(run_cli_inprocess("audit", "--documents", base / name, "--registry", registry_path, "--attacker", "tfidf",
                            "--out", base / "out"))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(payload=st.sampled_from(PAYLOADS), column=st.sampled_from(["doc_id", "text", "identity_id", "group"]),
       row=st.integers(0, 999))
def test_hostile_values_in_the_sample_release(sample_paths, tmp_path_factory, payload, column, row):
    """One hostile value in an otherwise good release: an error naming it (id columns) or a correct audit."""
    frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    frame.loc[row, column] = payload
    base = tmp_path_factory.mktemp("hostile")
    path = base / "documents.csv"
    path.write_text(frame.to_csv(index=False), encoding="utf-8")
    result = run_cli_inprocess("audit", "--documents", path, "--registry", sample_paths["registry"], "--config",
                               sample_paths["config"], "--attacker", "tfidf", "--knowledge", "K1",
                               "--confidence", "0.9", "--out", base / "o")
    check(result)
    if result.returncode == 0:
        worklist = (base / "o" / "worklist.csv").read_text(encoding="utf-8")
        for line in worklist.splitlines()[1:]:
            for cell in line.split(","):
                assert not cell.startswith(("=", "+", "@")), cell  # formula injection neutralised


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(documents=tables, kind=formats)
def test_generated_uploads_never_replace_the_data(sample_paths, documents, kind):
    from conftest import REPO_ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=TIMEOUT_S).run()
    at.switch_page("pages/1_data.py").run()
    name, data = encode(documents, kind)
    at.file_uploader(key="upload.documents").set_value((name, data, "application/octet-stream")).run()
    if not at.error and not at.button(key="upload.load").disabled:
        at.button(key="upload.load").click().run()
    assert not at.exception, [e.value for e in at.exception]
    loaded = at.session_state["cpa.data"]
    if at.error:  # refused: the sample stays
        assert loaded.source == "sample" and len(loaded.documents) == len(pd.read_csv(sample_paths["documents"]))
