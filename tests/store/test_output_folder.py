"""An output folder is the previous run's or this run's, whole: claimed before any work, written aside, put in
place in one step; foreign folders, a run's own inputs and a second writer are refused."""

from __future__ import annotations

import errno
import json
import os

import pytest

from cpa_core.common.errors import OutputError
from cpa_core.store import output_folder as module
from cpa_core.store.output_folder import CONTENTS_FILE, OutputFolder, complete_folder, output_kind


def _write(folder: OutputFolder, files: dict[str, str], config_id: str = "cfg-b") -> dict:
    for name, text in files.items():
        path = folder.staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder.complete(config_id)


def _audit(out, files=None, config_id="cfg-a", kind="audit") -> None:
    with OutputFolder(out, kind) as folder:
        _write(folder, files or {"manifest.json": "{}", "summary.json": "{}", "documents.jsonl": "a\n"}, config_id)


def _beside(out) -> list[str]:
    """What lies beside ``out`` in its parent, other than ``out`` and its lock."""
    return sorted(p.name for p in out.parent.iterdir() if p.name not in (out.name, f".{out.name}.lock"))


def test_a_new_folder_holds_exactly_the_run_s_files_and_their_record(tmp_path):
    out = tmp_path / "deep" / "out"
    with OutputFolder(out, "audit") as folder:
        assert not out.exists(), "nothing appears under --out before the run is complete"
        contents = _write(folder, {"summary.json": "{}", "sub/records.jsonl": "x\n"}, "cfg-1")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        [CONTENTS_FILE, "sub/records.jsonl", "summary.json"]
    assert contents["kind"] == "audit" and contents["config_id"] == "cfg-1"
    assert contents["files"]["summary.json"]["bytes"] == 2
    assert json.loads((out / CONTENTS_FILE).read_text()) == contents
    assert (out.stat().st_mode & 0o777) == 0o700
    assert _beside(out) == []
    assert complete_folder(out, "audit", verify=["summary.json"])["config_id"] == "cfg-1"


def test_a_replaced_folder_keeps_nothing_of_the_earlier_run(tmp_path):
    out = tmp_path / "out"
    _audit(out, {"manifest.json": "{}", "summary.json": "{}", "calibration.jsonl": "old\n", "test.jsonl": "old\n"})
    with OutputFolder(out, "audit") as folder:
        _write(folder, {"manifest.json": "{}", "summary.json": "{\"new\": 1}", "documents.jsonl": "new\n"})
    assert sorted(p.name for p in out.iterdir()) == [CONTENTS_FILE, "documents.jsonl", "manifest.json", "summary.json"]
    assert complete_folder(out, "audit")["config_id"] == "cfg-b"
    assert _beside(out) == []


@pytest.mark.parametrize("failure", [RuntimeError("the attack failed"), KeyboardInterrupt()])
def test_a_run_that_stops_before_completing_leaves_the_folder_as_it_was(tmp_path, failure):
    out = tmp_path / "out"
    _audit(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(type(failure)):
        with OutputFolder(out, "audit") as folder:
            (folder.staging / "summary.json").write_text("half", encoding="utf-8")
            raise failure
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _beside(out) == []


def test_a_full_disk_names_the_file_and_leaves_the_folder_as_it_was(tmp_path):
    out = tmp_path / "out"
    _audit(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(OutputError) as raised:
        with OutputFolder(out, "audit") as folder:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder.staging / "documents.jsonl"))
    message = str(raised.value)
    assert message.startswith(f"{out / 'documents.jsonl'}: cannot be written (No space left on device)")
    assert f"{out} is left as it was" in message and ".staging" not in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert _beside(out) == []


def test_an_error_reading_an_input_is_not_said_as_an_output_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        with OutputFolder(tmp_path / "out", "audit"):
            (tmp_path / "missing.csv").read_text()


def test_a_second_run_on_the_same_folder_is_refused_while_the_first_holds_it(tmp_path):
    out = tmp_path / "out"
    with OutputFolder(out, "audit") as first:
        with pytest.raises(OutputError, match="another cpa run is writing it now"):
            with OutputFolder(out, "audit"):
                pass
        _write(first, {"summary.json": "{}"})
    with OutputFolder(out, "audit") as again:  # released once the first is done
        _write(again, {"summary.json": "{}"})


@pytest.mark.parametrize("content, expected", [
    ({"notes.txt": "mine"}, "holds files that no cpa run wrote (e.g. 'notes.txt')"),
    ({"decisions.csv": "", "redactions.json": "{}"}, "holds the output of a redaction run"),
])
def test_a_folder_cpa_did_not_write_or_of_another_kind_is_never_replaced(tmp_path, content, expected):
    out = tmp_path / "out"
    out.mkdir()
    for name, text in content.items():
        (out / name).write_text(text, encoding="utf-8")
    with pytest.raises(OutputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        with OutputFolder(out, "audit"):
            pass
    assert sorted(p.name for p in out.iterdir()) == sorted(content)


def test_an_empty_folder_or_an_earlier_version_s_output_may_be_used(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    _audit(empty)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for name in ("manifest.json", "summary.json", "worklist.csv"):
        (earlier / name).write_text("{}", encoding="utf-8")
    assert output_kind(earlier) == "audit"
    _audit(earlier)
    assert not (earlier / "worklist.csv").exists()


def test_an_output_folder_holding_an_input_of_the_run_or_inside_one_is_refused(tmp_path):
    audit = tmp_path / "audit"
    _audit(audit)
    with pytest.raises(OutputError, match="holds .*an input of this run"):
        with OutputFolder(audit, "redaction", inputs=[audit]):
            pass
    with pytest.raises(OutputError, match="is inside .*an input of this run"):
        with OutputFolder(audit / "redacted", "redaction", inputs=[audit]):
            pass
    documents = tmp_path / "release" / "documents.csv"
    documents.parent.mkdir()
    documents.write_text("doc_id,text\n", encoding="utf-8")
    with pytest.raises(OutputError, match="holds .*documents.csv"):
        with OutputFolder(tmp_path / "release", "audit", inputs=[documents, None]):
            pass
    assert complete_folder(audit, "audit")["config_id"] == "cfg-a"


def test_a_kill_between_the_two_renames_is_undone_by_the_next_run(tmp_path, monkeypatch):
    """Where folders cannot be exchanged in one step, the previous folder is moved aside first; a process that
    dies right then leaves no folder under the name, and the next run puts the previous one back."""
    out = tmp_path / "out"
    _audit(out)
    monkeypatch.setattr(module, "_exchange", lambda a, b: False)
    renames = []
    real_rename = os.rename

    def dying_rename(source, target):
        renames.append((source, target))
        if len(renames) == 2:
            raise KeyboardInterrupt  # the process dies after moving the previous folder aside
        real_rename(source, target)

    monkeypatch.setattr(module.os, "rename", dying_rename)
    with pytest.raises(KeyboardInterrupt):
        with OutputFolder(out, "audit") as folder:
            _write(folder, {"manifest.json": "{}", "summary.json": "{}"}, "cfg-b")
    monkeypatch.setattr(module.os, "rename", real_rename)
    assert not out.exists()
    with OutputFolder(out, "audit") as folder:  # recovers before anything else
        assert complete_folder(out, "audit")["config_id"] == "cfg-a"
        _write(folder, {"manifest.json": "{}", "summary.json": "{}"}, "cfg-c")
    assert complete_folder(out, "audit")["config_id"] == "cfg-c"
    assert _beside(out) == []


def test_the_fallback_without_an_atomic_exchange_replaces_the_folder_too(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _audit(out)
    monkeypatch.setattr(module, "_exchange", lambda a, b: False)
    _audit(out, config_id="cfg-d")
    assert complete_folder(out, "audit")["config_id"] == "cfg-d"
    assert _beside(out) == []


def test_leftover_staging_folders_of_a_killed_run_are_removed(tmp_path):
    out = tmp_path / "out"
    _audit(out)
    leftover = tmp_path / ".out.staging-0123456789ab"
    leftover.mkdir()
    (leftover / "documents.jsonl").write_text("released text\n", encoding="utf-8")
    _audit(out, config_id="cfg-e")
    assert _beside(out) == []


def test_the_exchange_is_atomic_on_this_platform(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not module._exchange(a, b):
        pytest.skip("this platform cannot exchange two folders in one step (the fallback is tested above)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


@pytest.mark.parametrize("damage, expected", [
    (lambda out: (out / "documents.jsonl").unlink(), "documents.jsonl: missing since cpa audit wrote the folder"),
    (lambda out: (out / "documents.jsonl").write_text("cut"), "documents.jsonl: changed since cpa audit wrote"),
    (lambda out: (out / "manifest.json").write_text("[]"), "manifest.json: changed since it was recorded"),
    (lambda out: (out / CONTENTS_FILE).unlink(), "incomplete or written by an earlier version"),
    (lambda out: (out / CONTENTS_FILE).write_text("{}"), "incomplete or written by an earlier version"),
])
def test_an_incomplete_or_edited_folder_is_refused_by_its_reader(tmp_path, damage, expected):
    out = tmp_path / "out"
    _audit(out)
    damage(out)
    with pytest.raises(OutputError, match=expected):
        complete_folder(out, "audit", verify=["manifest.json"])


def test_a_reader_refuses_a_foreign_folder_or_one_of_another_kind(tmp_path):
    with pytest.raises(OutputError, match="not found"):
        complete_folder(tmp_path / "nothing", "audit")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "manifest.json").write_text("{}")
    with pytest.raises(OutputError, match="not the output folder of a cpa audit run"):
        complete_folder(tmp_path / "mine", "audit")
    _audit(tmp_path / "redacted", {"decisions.csv": "", "redactions.json": "{}"}, kind="redaction")
    with pytest.raises(OutputError, match="the output of a redaction run"):
        complete_folder(tmp_path / "redacted", "audit")
