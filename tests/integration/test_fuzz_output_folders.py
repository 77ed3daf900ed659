"""Fuzz of what an output folder may hold and how ``--out`` is spelled, through real ``cpa audit`` runs on a small
release: a curator's files of every shape beside the audit, records edited or removed, ``--out`` given relative,
with ``..``, a trailing slash, through a symbolic link, as the working directory; the audit history and the cache
inside or outside it.

Every case ends in a complete new audit that kept, byte for byte, everything no run wrote, or in a one-line error
that left the folder, the history and the working directory exactly as they were. Bounded (derandomised examples on
a release of 60 documents) so that it runs in ``make test`` in well under two minutes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import run_cli_inprocess
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cpa_core.io.synthetic import generate_sample_data
from cpa_core.store.output_folder import CONTENTS_FILE, complete_folder

CURATORS = ["NOTES.txt", "review/reviewed.csv", "a b;c.csv", "名前.txt", ".hidden", "sub/deep/f.txt",
            "contents.json.bak", "=cmd.csv", "x" * 200 + ".txt", "worklist.csv.orig"]
CLASHING = ["foo.html", "test.jsonl"]  # a curator's file under no name an audit writes ... and one it may write
SHAPES = ["file", "empty folder", "link", "broken link"]
OUT_SPELLINGS = ["relative", "absolute", "trailing slash", "dot-dot", "through a link", "working directory"]
PLACES = ["elsewhere", "inside", "none"]

curators_files = st.lists(st.tuples(st.sampled_from(CURATORS + CLASHING), st.sampled_from(SHAPES),
                                    st.binary(max_size=64)), max_size=5, unique_by=lambda item: item[0])
edits = st.lists(st.tuples(st.sampled_from(["summary.json", "worklist.csv", "manifest.json", "report.html"]),
                           st.sampled_from(["append", "remove", "same bytes"])), max_size=2, unique_by=lambda e: e[0])


@pytest.fixture(scope="module")
def small_release(tmp_path_factory):
    """A release of 60 documents and its first audit, copied for each case."""
    base = tmp_path_factory.mktemp("release")
    paths = generate_sample_data(base, seed=5, n_people=30, n_documents=60)
    audit = base / "first"
    done = run_cli_inprocess("audit", "--documents", paths["documents"], "--registry", paths["registry"],
                             "--attacker", "tfidf", "--out", audit, "--no-history")
    assert done.returncode == 0, done.describe()
    return paths, audit


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder as ``/``."""
    found = {}
    for root, folders, names in os.walk(folder):
        for name in names + folders:
            path = Path(root) / name
            key = path.relative_to(folder).as_posix()
            found[key] = ("-> " + os.readlink(path)) if path.is_symlink() else "/" if path.is_dir() else \
                path.read_bytes()
    return found


def _place(out: Path, name: str, shape: str, data: bytes) -> None:
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if shape == "file":
        path.write_bytes(data)
    elif shape == "empty folder":
        path.mkdir(exist_ok=True)
    elif shape == "link":
        path.symlink_to(os.path.relpath(out / CONTENTS_FILE, path.parent))
    else:
        path.symlink_to("nowhere/at/all")


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(mine=curators_files, edited=edits, spelling=st.sampled_from(OUT_SPELLINGS),
       history=st.sampled_from(PLACES), cache=st.sampled_from(PLACES[:2]))
def test_an_audit_into_a_folder_keeps_what_no_run_wrote_or_changes_nothing(small_release, tmp_path_factory,
                                                                          monkeypatch, mine, edited, spelling,
                                                                          history, cache):
    paths, first = small_release
    base = tmp_path_factory.mktemp("case")
    out = base / "work" / "audit"
    out.parent.mkdir()
    shutil.copytree(first, out, symlinks=True)
    for name, shape, data in mine:
        _place(out, name, shape, data)
    for name, how in edited:
        if how == "append":
            with (out / name).open("ab") as stream:
                stream.write(b"a curator's remark")
        elif how == "remove":
            (out / name).unlink()
        else:
            (out / name).write_bytes((out / name).read_bytes())
    history_file = {"inside": out / "h.sqlite", "elsewhere": base / "h.sqlite", "none": None}[history]
    monkeypatch.setenv("CPA_CACHE_DIR", str(out / "cache" if cache == "inside" else base / "cache"))
    (base / "link").symlink_to(out.parent)
    given_out = {"relative": "audit", "absolute": str(out), "trailing slash": "audit/", "dot-dot": "../work/audit",
                 "through a link": str(base / "link" / "audit"), "working directory": "."}[spelling]
    monkeypatch.chdir(out if spelling == "working directory" else out.parent)
    before, mine_before = _snapshot(out), {k: v for k, v in _snapshot(out).items()
                                            if k.split("/")[0] not in complete_folder(first, "audit")["files"]
                                            and k != CONTENTS_FILE}
    args = ["audit", "--documents", paths["documents"], "--registry", paths["registry"], "--attacker", "tfidf",
            "--out", given_out] + (["--history", history_file] if history_file else ["--no-history"])
    result = run_cli_inprocess(*args)
    event(f"exit status {result.returncode}")
    assert "Traceback" not in result.output, result.describe()
    assert result.returncode in (0, 2), result.describe()
    if result.returncode == 2:
        assert len(result.stderr_lines) == 1 and result.stderr_lines[0].startswith("cpa: error:"), result.describe()
        assert _snapshot(out) == before, "a refused run changes nothing"
        return
    refusable = (any(how == "append" for _, how in edited) or history == "inside" or cache == "inside"
                 or spelling == "working directory" or any(name in CLASHING[1:] for name, _, _ in mine))
    assert not refusable, f"this case must be refused:\n{result.describe()}"
    contents = complete_folder(out, "audit", verify=["manifest.json"])
    after = _snapshot(out)
    for key, value in mine_before.items():
        assert after.get(key) == value, f"{key} was not kept as it was"
    assert set(contents["files"]).isdisjoint(mine_before)
    assert not [p for p in out.parent.iterdir() if ".staging-" in p.name or ".previous-" in p.name]
