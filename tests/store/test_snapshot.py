"""A stored audit result rebuilt without attacking again: the snapshot's file (owner-only, atomic, its SHA-256,
nothing pickled), every protocol certifying as the original at any level, the declared placeholders kept, a
missing, changed or foreign file refused with a message naming it, and a full disk said naming the folder."""

from __future__ import annotations

import errno
import hashlib
import json
import stat
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from audit_files import as_json
from placeholder_release import CUSTOM, DOCUMENTS_CSV, REGISTRY_CSV, toml_list
from tables import audited_groups, small_audit, toy_audit

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, parse_config
from cpa_core.common.errors import HistoryError
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.metrics import summarize
from cpa_core.store.history import load_result, record_audit
from cpa_core.store import snapshot as snapshot_module
from cpa_core.store.snapshot import (
    FORMAT,
    META,
    PARTIAL,
    json_default,
    read_snapshot,
    snapshot_arrays,
    write_snapshot,
)

AUDITS = {"release": lambda: small_audit(3), "release-unknown": lambda: small_audit(3, unknown_every=4),
          "split": toy_audit}


@pytest.mark.parametrize("name", sorted(AUDITS))
def test_a_snapshot_read_back_is_the_audit(tmp_path, name):
    result = AUDITS[name]()
    path, sha256 = write_snapshot(result, tmp_path / "snapshots")
    assert path.parent == tmp_path / "snapshots" and path.suffix == ".npz"
    assert sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    restored = read_snapshot(path, sha256)
    assert restored.config == result.config and restored.inputs == as_json(result.inputs)
    for level in (0.3, 0.5, 0.8, 0.9):
        assert np.array_equal(restored.certificate(level).set_sizes, result.certificate(level).set_sizes)
        assert np.array_equal(restored.certificate(level).covered, result.certificate(level).covered)
    for split in ("calibration_split", "test_split"):
        ours, theirs = getattr(restored, split), getattr(result, split)
        assert ours.table.doc_ids.tolist() == theirs.table.doc_ids.tolist()
        assert ours.truth_ids.tolist() == theirs.truth_ids.tolist()
        assert np.array_equal(ours.truth_scores, theirs.truth_scores)
    assert restored.test_split.table.queries == result.test_split.table.queries


def test_the_file_is_private_whole_and_holds_no_pickle(tmp_path):
    result = small_audit(3)
    folder = tmp_path / "snapshots"
    first, _ = write_snapshot(result, folder)
    second, _ = write_snapshot(result, folder)
    assert first != second  # a new name for every snapshot
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(first.stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == sorted([first.name, second.name])  # no temporary file left
    with np.load(first, allow_pickle=False) as stored:  # every member reads without unpickling
        members = {name: stored[name] for name in stored.files}
    assert all(array.dtype != object for array in members.values())
    meta = json.loads(members[META].tobytes().decode("utf-8"))
    assert meta["format"] == FORMAT == 1 and meta["config"]["flag_below"] == result.config.flag_below


def test_release_calibration_documents_are_stored_as_rows_of_the_audited_ones():
    release = snapshot_arrays(small_audit(3, unknown_every=4))
    assert "calibration.rows" in release and "calibration.candidates" not in release
    assert release["calibration.rows"].tolist() == [i for i in range(120) if (i - 1) % 4 != 0]  # the labelled
    split = snapshot_arrays(toy_audit())
    assert "calibration.rows" not in split and split["calibration.candidates"].shape == (2, 3)


def test_a_missing_changed_or_foreign_file_is_refused_naming_it(tmp_path):
    result = toy_audit()
    path, sha256 = write_snapshot(result, tmp_path)
    with pytest.raises(HistoryError, match=rf"^audit snapshot {path}: changed since it was recorded; expected "
                                           rf"SHA-256 {'0' * 12}…, found {sha256[:12]}…"):
        read_snapshot(path, "0" * 64)
    with pytest.raises(HistoryError, match=rf"^audit snapshot {tmp_path / 'gone.npz'}: not found"):
        read_snapshot(tmp_path / "gone.npz", sha256)
    foreign = tmp_path / "foreign.npz"
    foreign.write_bytes(b"not a zip file at all")
    with pytest.raises(HistoryError, match=r"not a readable snapshot of format 1"):
        read_snapshot(foreign, hashlib.sha256(foreign.read_bytes()).hexdigest())
    arrays = snapshot_arrays(result)  # a snapshot of another format
    meta = json.loads(arrays[META].tobytes().decode("utf-8"))
    arrays[META] = np.frombuffer(json.dumps({**meta, "format": 2}).encode("utf-8"), dtype=np.uint8)
    later = tmp_path / "later.npz"
    np.savez(later, **arrays)
    with pytest.raises(HistoryError, match=r"not a readable snapshot of format 1 \(format 2\)"):
        read_snapshot(later, hashlib.sha256(later.read_bytes()).hexdigest())


def test_an_unwritable_folder_is_a_history_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(HistoryError, match="cannot be written"):
        write_snapshot(toy_audit(), blocker / "snapshots")


@pytest.mark.parametrize("removable", [True, False], ids=["temporary-removed", "temporary-left"])
def test_a_full_disk_names_the_folder_and_its_own_reason(tmp_path, monkeypatch, removable):
    """A disk that fills while the snapshot is written (simulated): the folder and the system's reason are said, even
    when the temporary cannot be removed either (it is then an orphan, which ``cpa history prune`` removes)."""
    folder = tmp_path / "snapshots"

    def full(stream, **arrays):
        stream.write(b"PK\x03\x04" + b"\0" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snapshot_module.np, "savez", full)
    if not removable:
        def denied(path, *args, **kwargs):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        monkeypatch.setattr(Path, "unlink", denied)
    with pytest.raises(HistoryError) as error:
        write_snapshot(toy_audit(), folder)
    assert str(error.value) == (f"audit snapshot folder {folder}: cannot be written (No space left on device); "
                                "expected a writable folder, with free space, next to the audit history")
    left = [path.name for path in folder.iterdir()]
    if removable:
        assert left == []
    else:  # an orphan, which 'cpa history prune' removes
        assert len(left) == 1 and left[0].startswith(PARTIAL[0]) and left[0].endswith(PARTIAL[1])


def test_what_json_cannot_write_by_itself():
    assert json_default(np.int64(3)) == 3 and type(json_default(np.int64(3))) is int
    assert json_default(np.float32(0.5)) == 0.5 and json_default(Fraction(3, 4)) == 0.75
    assert json_default((1, 2)) == [1, 2] and json_default({7}) == [7] and json_default(frozenset()) == []
    assert json_default(tmp := object()) == str(tmp)


def test_a_snapshot_keeps_the_declared_placeholders(tmp_path):
    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    documents = load_documents(DOCUMENTS_CSV.encode(), name="documents.csv")
    project = parse_config(f"[evidence]\nplaceholders = {toml_list(CUSTOM)}\n", "audit.toml")
    config, attacker = declare_audit(project, registry, documents=documents)
    result = run_audit(documents, registry, attacker, config)
    path, sha256 = write_snapshot(result, tmp_path)
    restored = read_snapshot(path, sha256)
    assert restored.config.placeholders == CUSTOM and restored.config.config_id == config.config_id


@pytest.mark.parametrize("make", [lambda: small_audit(3), lambda: small_audit(3, unknown_every=4),
                                  lambda: audited_groups()[0]], ids=["release", "release-unknown", "split-groups"])
def test_a_reopened_audit_is_the_same_audit(make, tmp_path):
    history = tmp_path / "cpa" / "history.sqlite"
    result = make()
    audit_id = record_audit(result, source="dashboard", path=history)
    reopened = load_result(audit_id, history)
    assert json.dumps(summarize(reopened).to_dict()) == json.dumps(summarize(result).to_dict())
    assert reopened.config == result.config and reopened.config.config_id == result.config.config_id
    assert reopened.inputs == as_json(result.inputs)
    for level in (0.5, 0.85, 0.9):  # any level, not only the audited ones: the stored attack is complete
        assert np.array_equal(reopened.certificate(level).set_sizes, result.certificate(level).set_sizes)
    assert reopened.test_split.table.queries == result.test_split.table.queries
    assert np.array_equal(reopened.calibration_split.truth_scores, result.calibration_split.truth_scores)
    assert reopened.calibration_split.table.doc_ids.tolist() == result.calibration_split.table.doc_ids.tolist()
    assert reopened.calibration_split.with_candidates == (result.config.protocol == "split")


def test_the_candidates_a_shortlist_cut_below_are_stored(tmp_path):
    """A reopened audit reads its shortlists as the audit did: how many candidates each cut below its last kept one
    (a kept tie above cut candidates of weight 0 is then no wholly tied pool)."""
    from dataclasses import replace

    result = small_audit(3)
    below = np.arange(len(result.test_split.table), dtype=np.int64) % 3
    result = replace(result, test_split=replace(result.test_split,
                                                table=replace(result.test_split.table, cut_below=below)))
    path, sha256 = write_snapshot(result, tmp_path / "snapshots")
    assert np.array_equal(read_snapshot(path, sha256).test_split.table.cut_below, below)
