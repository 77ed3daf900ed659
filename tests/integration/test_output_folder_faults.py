"""Faults of an output folder, on real ``cpa`` processes: a run killed at any point of writing leaves the previous
audit or the new one, whole; two runs on one ``--out`` never mix; a full disk names its file and changes nothing;
``cpa redact`` reads only a complete audit folder, and never writes into it."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_checks import assert_one_line_error, ok
from conftest import _env, run_cli, run_cli_inprocess
from tables import small_audit

from cpa_core.store.history import list_audits, load_result, record_audit
from cpa_core.store.output_folder import CONTENTS_FILE, OutputFolder, complete_folder


def _audit_args(sample_paths, out, knowledge="K1", *extra):
    return ("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
            "--config", sample_paths["config"], "--attacker", "tfidf", "--knowledge", knowledge, "--out", out,
            "--no-history", *extra)


def _start(args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cpa_core.cli", *map(str, args)], env=_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _whole(out: Path) -> str:
    """The config id of a complete audit folder, every file checked against its record and naming that id."""
    contents = complete_folder(out, "audit", verify=[p.name for p in out.iterdir() if p.name != CONTENTS_FILE])
    config_id = contents["config_id"]
    assert sorted(p.name for p in out.iterdir()) == sorted([CONTENTS_FILE, *contents["files"]])
    for path in out.iterdir():
        assert config_id in path.read_text(encoding="utf-8"), f"{path.name} does not name configuration {config_id}"
    return config_id


def _staging(out: Path) -> list[Path]:
    return [p for p in out.parent.glob(f".{out.name}.staging-*") if p.is_dir()]


def _writing(out: Path, seconds: float = 120.0) -> None:
    """Wait until the run writes its first file into its staging folder."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for folder in _staging(out):
            try:
                if any(folder.iterdir()):
                    return
            except FileNotFoundError:
                pass
        time.sleep(0.002)
    raise AssertionError("the run never started writing")


@pytest.fixture(scope="module")
def first_audit(sample_paths, tmp_path_factory):
    """A complete audit at knowledge level K1, kept as it was written."""
    out = tmp_path_factory.mktemp("first") / "audit"
    ok(run_cli(*_audit_args(sample_paths, out)))
    return out, _whole(out)


def test_a_run_killed_at_any_point_of_writing_leaves_the_old_audit_or_the_new_one(sample_paths, first_audit,
                                                                                     tmp_path):
    out = tmp_path / "audit"
    shutil.copytree(first_audit[0], out)
    old = first_audit[1]
    started = time.monotonic()
    ok(run_cli(*_audit_args(sample_paths, tmp_path / "reference", "K2")))  # the new audit, unkilled
    new = _whole(tmp_path / "reference")
    assert new != old
    rng = random.Random(20261126)
    seen = set()
    delays = [0.0] + sorted(rng.uniform(0.0, 1.0) for _ in range(5))  # from the first file written to the end
    for delay in delays:
        process = _start(_audit_args(sample_paths, out, "K2"))
        try:
            _writing(out)
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
        finally:
            process.wait(timeout=60)
        seen.add(_whole(out))  # either audit, whole: nothing half-written, nothing mixed
        assert seen <= {old, new}
    ok(run_cli(*_audit_args(sample_paths, out, "K2")))  # a later run cleans up what the killed ones left
    assert _whole(out) == new
    assert _staging(out) == []
    assert old in seen, "the earliest kill, before any file was complete, must leave the previous audit"
    assert time.monotonic() - started < 900  # a hang guard that holds on a loaded machine


def test_two_runs_on_one_output_folder_never_mix(sample_paths, tmp_path):
    out = tmp_path / "audit"
    runs = [_start(_audit_args(sample_paths, out, level)) for level in ("K1", "K2")]
    results = [(process.wait(timeout=300), process.stderr.read()) for process in runs]
    for process in runs:
        process.stderr.close()
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    lines = [line for line in refused.splitlines() if line.strip()]
    assert len(lines) == 1 and "another cpa run is writing it now" in lines[0], refused
    done = next(err for code, err in results if code == 0)
    written = _whole(out)
    assert f"results in {out}" in done
    assert written in {json.loads((out / "manifest.json").read_text())["config_id"]}


def _unshare_available() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


def test_a_full_disk_names_the_file_and_leaves_the_folder_as_it_was(sample_paths, first_audit, tmp_path):
    if not _unshare_available():
        pytest.skip("this platform cannot mount a small file system for the test (unshare --user --mount)")
    disk = tmp_path / "disk"
    disk.mkdir()
    report = tmp_path / "report"
    small = sum(p.stat().st_size for p in first_audit[0].iterdir()) + 400_000  # the old audit fits, not two
    command = " ".join([
        f"mount -t tmpfs -o size={small} tmpfs {disk} &&",
        f"cp -a {first_audit[0]} {disk}/audit &&",
        f"{sys.executable} -m cpa_core.cli " + " ".join(map(str, _audit_args(sample_paths, disk / "audit", "K2"))),
        f"2> {report}.err; echo $? > {report}.rc;",
        f"{sys.executable} -c \"import sys; sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parents[1])]!r};"
        f"import test_output_folder_faults as t; from pathlib import Path; print(t._whole(Path('{disk}/audit')));"
        f"print(len(t._staging(Path('{disk}/audit'))))\" > {report}.after 2>&1",
    ])
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command], env=_env(), timeout=300,
                   check=True)
    assert (Path(f"{report}.rc").read_text().strip()) == "2"
    said = Path(f"{report}.err").read_text()
    lines = [line for line in said.splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in said and said.rstrip().endswith(lines[0]), said
    assert lines[0].startswith(f"cpa: error: {disk}/audit/") and "No space left on device" in lines[0], lines
    assert f"the output folder {disk}/audit is left as it was" in lines[0]
    assert Path(f"{report}.after").read_text().split() == [first_audit[1], "0"]


def test_a_reused_output_folder_holds_nothing_of_the_earlier_audit(sample_paths, first_audit, tmp_path):
    out = tmp_path / "audit"
    ok(run_cli(*_audit_args(sample_paths, out, "K1", "--protocol", "split")))
    assert {"calibration.jsonl", "test.jsonl"} <= {p.name for p in out.iterdir()}
    split = _whole(out)
    ok(run_cli(*_audit_args(sample_paths, out, "K1")))
    names = {p.name for p in out.iterdir()}
    assert "calibration.jsonl" not in names and "test.jsonl" not in names and "documents.jsonl" in names
    assert _whole(out) == first_audit[1] != split


def _redact(audit, out, *extra):
    return run_cli_inprocess("redact", "--audit", audit, "--out", out, *extra)


def test_redact_never_writes_into_the_audit_it_reads(first_audit, tmp_path):
    audit = tmp_path / "audit"
    shutil.copytree(first_audit[0], audit)
    before = {p.name: p.read_bytes() for p in audit.iterdir()}
    assert_one_line_error(_redact(audit, audit), "an input of this run")
    assert_one_line_error(_redact(audit, audit / "redacted"), "is inside", "an input of this run")
    assert {p.name: p.read_bytes() for p in audit.iterdir()} == before


@pytest.mark.parametrize("damage, expected", [
    (lambda audit: (audit / "documents.jsonl").write_text("cut"), "documents.jsonl: changed since cpa audit"),
    (lambda audit: (audit / "worklist.csv").unlink(), "worklist.csv: missing since cpa audit"),
    (lambda audit: (audit / "manifest.json").write_text((audit / "manifest.json").read_text().replace('"seed": 7',
                                                                                                    '"seed": 8')),
     "manifest.json: changed since it was recorded"),
    (lambda audit: (audit / CONTENTS_FILE).unlink(), "incomplete or written by an earlier version"),
    (lambda audit: [p.unlink() for p in audit.iterdir() if p.name != "manifest.json"],
     "not the output folder of a cpa audit run"),
])
def test_redact_refuses_an_incomplete_or_foreign_audit_folder(first_audit, tmp_path, damage, expected):
    audit = tmp_path / "audit"
    shutil.copytree(first_audit[0], audit)
    damage(audit)
    assert_one_line_error(_redact(audit, tmp_path / "redacted"), str(audit), expected)
    assert not (tmp_path / "redacted").exists()


@pytest.mark.parametrize("manifest, expected", [
    ("{}", "expected 'inputs' naming the audit's documents and registry files, found NoneType"),
    ("[]", "expected 'inputs' naming the audit's documents and registry files, found NoneType"),
    ('{"inputs": {"documents": {"file": "d.csv"}}}', "found ['documents']"),
    ('{"inputs": {"documents": {"file": "d.csv"}, "registry": {"file": "r.csv"}}}', "expected the audit's 'config_id'"),
    ("not json", "not readable JSON"),
])
def test_redact_says_what_a_malformed_manifest_lacks(first_audit, tmp_path, manifest, expected):
    audit = tmp_path / "audit"
    with OutputFolder(audit, "audit") as folder:  # complete as recorded, yet not what cpa audit writes
        for path in first_audit[0].iterdir():
            if path.name != CONTENTS_FILE:
                shutil.copy(path, folder.staging / path.name)
        (folder.staging / "manifest.json").write_text(manifest, encoding="utf-8")
        folder.complete(first_audit[1])
    assert_one_line_error(_redact(audit, tmp_path / "redacted"), "manifest.json", expected)


def test_a_new_audit_into_a_folder_keeps_the_curator_s_files(sample_paths, first_audit, tmp_path):
    out = tmp_path / "audit"
    shutil.copytree(first_audit[0], out)
    (out / "NOTES.txt").write_text("asked by the board", encoding="utf-8")
    (out / "review").mkdir()
    (out / "review" / "reviewed.csv").write_text("doc_id\n7\n", encoding="utf-8")
    done = ok(run_cli_inprocess(*_audit_args(sample_paths, out, "K3")))
    assert "keeping in" in done.stderr and "NOTES.txt" in done.stderr
    assert (out / "NOTES.txt").read_text() == "asked by the board"
    assert (out / "review" / "reviewed.csv").read_text() == "doc_id\n7\n"
    assert complete_folder(out, "audit")["config_id"] != first_audit[1]
    assert "NOTES.txt" not in complete_folder(out, "audit")["files"]


def test_a_changed_record_of_the_earlier_audit_is_never_replaced(sample_paths, first_audit, tmp_path):
    out = tmp_path / "audit"
    shutil.copytree(first_audit[0], out)
    with (out / "worklist.csv").open("a", encoding="utf-8") as stream:
        stream.write("a curator's remark\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_one_line_error(run_cli_inprocess(*_audit_args(sample_paths, out, "K3")),
                          "'worklist.csv' was changed since cpa wrote it")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_audit_history_inside_the_output_folder_is_refused_and_stays_whole(sample_paths, first_audit, tmp_path,
                                                                               monkeypatch):
    out = tmp_path / "audit"
    shutil.copytree(first_audit[0], out)
    history = out / "history.sqlite"
    audit_id = record_audit(small_audit(3), source="cli", path=history)
    monkeypatch.setenv("CPA_HISTORY", str(history))
    args = [a for a in _audit_args(sample_paths, out, "K3") if a != "--no-history"]
    assert_one_line_error(run_cli_inprocess(*args), f"holds {history}, the audit history this run writes")
    assert_one_line_error(run_cli_inprocess(*args, "--history", out / "h2.sqlite"), "the audit history this run writes")
    assert list_audits(history)["id"].tolist() == [audit_id]
    assert load_result(audit_id, history).config.config_id
    assert complete_folder(out, "audit")["config_id"] == first_audit[1]


def test_the_working_directory_is_never_the_output_folder(sample_paths, first_audit, tmp_path):
    """An empty working directory, or one holding an earlier audit, would be replaced whole: refused, with the
    reason, before any work."""
    empty, audit = tmp_path / "empty", tmp_path / "audit"
    empty.mkdir()
    shutil.copytree(first_audit[0], audit)
    before = {p.name: p.read_bytes() for p in audit.iterdir()}
    for work in (empty, audit):
        for out, expected in ((".", "is the current working directory"), ("", "found an empty one"),
                              (str(tmp_path), "holds the current working directory")):
            assert_one_line_error(run_cli(*_audit_args(sample_paths, out), cwd=work), expected)
    assert list(empty.iterdir()) == [] and {p.name: p.read_bytes() for p in audit.iterdir()} == before


def test_a_new_redaction_into_its_folder_keeps_the_curator_s_reviewed_table(first_audit, tmp_path):
    out = tmp_path / "redacted"
    ok(_redact(first_audit[0], out))
    reviewed = (out / "decisions.csv").read_bytes()
    (out / "reviewed.csv").write_bytes(reviewed)
    ok(_redact(first_audit[0], out, "--deny", "the,and"))
    assert (out / "reviewed.csv").read_bytes() == reviewed
    assert complete_folder(out, "redaction")


def test_a_mount_point_as_the_output_folder_is_refused_before_the_attack(sample_paths, tmp_path):
    if not _unshare_available():
        pytest.skip("this platform cannot mount a file system for the test (unshare --user --mount)")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    report = tmp_path / "report"
    command = " ".join([
        f"mount -t tmpfs -o size=1000000 tmpfs {mounted} &&",
        f"{sys.executable} -m cpa_core.cli " + " ".join(map(str, _audit_args(sample_paths, mounted))),
        f"> {report}.out 2> {report}.err; echo $? > {report}.rc",
    ])
    subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command], env=_env(), timeout=300,
                   check=True)
    said = Path(f"{report}.err").read_text()
    assert Path(f"{report}.rc").read_text().strip() == "2" and "Traceback" not in said
    assert said.strip().splitlines() == [f"cpa: error: output folder {mounted}: is a mount point, which cannot be "
                                         "replaced whole as the run replaces its folder; choose a folder inside it"]
