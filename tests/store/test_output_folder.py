"""An output folder is the previous run's or this run's, whole: claimed before any work, written aside, put in
place in one step; foreign folders, a run's own inputs and a second writer are refused."""

from __future__ import annotations

import errno
import json
import os

import pytest
from pathlib import Path

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


def _curate(out) -> dict[str, bytes]:
    """A curator's files in an output folder: a note, a reviewed table in a subfolder, an empty folder, a link."""
    (out / "NOTES.txt").write_text("what the board asked", encoding="utf-8")
    (out / "review").mkdir()
    (out / "review" / "reviewed.csv").write_text("doc_id,ok\n1,yes\n", encoding="utf-8")
    (out / "later").mkdir()
    (out / "latest").symlink_to("review/reviewed.csv")
    return {"NOTES.txt": b"what the board asked", "review/reviewed.csv": b"doc_id,ok\n1,yes\n"}


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename-aside"])
def test_a_replaced_folder_keeps_every_file_no_run_wrote(tmp_path, monkeypatch, exchange):
    out = tmp_path / "out"
    _audit(out, {"manifest.json": "{}", "summary.json": "{}", "calibration.jsonl": "old\n"})
    mine = _curate(out)
    if not exchange:
        monkeypatch.setattr(module, "_exchange", lambda a, b: False)
    with OutputFolder(out, "audit") as folder:
        assert folder.kept == ["NOTES.txt", "later/", "latest", "review/reviewed.csv"]
        (out / "added-meanwhile.txt").write_text("while the attack ran", encoding="utf-8")
        _write(folder, {"manifest.json": "{}", "summary.json": "{\"new\": 1}"})
    for name, data in mine.items():
        assert (out / name).read_bytes() == data
    assert (out / "added-meanwhile.txt").read_text() == "while the attack ran"
    assert (out / "later").is_dir() and os.readlink(out / "latest") == "review/reviewed.csv"
    assert not (out / "calibration.jsonl").exists(), "what the earlier run wrote goes"
    contents = complete_folder(out, "audit")
    assert sorted(contents["files"]) == ["manifest.json", "summary.json"], "a curator's files are never listed"
    assert _beside(out) == []
    _audit(out, config_id="cfg-c")  # and again: still kept
    assert (out / "NOTES.txt").read_bytes() == mine["NOTES.txt"]


def test_a_file_a_run_wrote_and_someone_changed_since_is_never_replaced(tmp_path):
    out = tmp_path / "out"
    _audit(out, {"manifest.json": "{}", "summary.json": "{}", "worklist.csv": "doc_id\n1\n"})
    (out / "worklist.csv").write_text("doc_id\n2\n", encoding="utf-8")  # same size, other bytes
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(OutputError, match="'worklist.csv' was changed since cpa wrote it"):
        with OutputFolder(out, "audit"):
            pass
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_curator_s_file_under_a_name_a_run_writes_is_refused(tmp_path):
    out = tmp_path / "redacted"
    _audit(out, {"decisions.csv": "", "redactions.json": "{}"}, kind="redaction")
    (out / "documents-redacted.csv").write_text("mine", encoding="utf-8")
    with pytest.raises(OutputError, match="holds 'documents-redacted.csv', which no cpa run wrote but a redaction run "
                                          "may write"):
        with OutputFolder(out, "redaction"):
            pass
    assert (out / "documents-redacted.csv").read_text() == "mine"


def test_an_earlier_version_s_folder_keeps_what_the_tool_does_not_write(tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for name in ("manifest.json", "summary.json", "worklist.csv"):
        (earlier / name).write_text("{}", encoding="utf-8")
    (earlier / "NOTES.txt").write_text("mine", encoding="utf-8")
    _audit(earlier)
    assert (earlier / "NOTES.txt").read_text() == "mine" and not (earlier / "worklist.csv").exists()


@pytest.mark.parametrize("where", ["history", "snapshots", "cache"])
def test_a_folder_holding_a_path_the_run_writes_is_refused(tmp_path, where):
    out = tmp_path / "out"
    _audit(out)
    inside = {"history": out / "h.sqlite", "snapshots": out / "h.sqlite.snapshots", "cache": out / "cache"}[where]
    with pytest.raises(OutputError, match=f"holds {inside}, the thing this run writes"):
        with OutputFolder(out, "audit", writes={"the thing": inside, "nothing": None}):
            pass
    with OutputFolder(tmp_path / "other", "audit", writes={"the thing": inside}) as folder:  # elsewhere: fine
        _write(folder, {"summary.json": "{}"})


def test_the_working_directory_the_root_and_empty_names_are_refused(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("x", encoding="utf-8")
    monkeypatch.chdir(work)
    for out, expected in ((".", "is the current working directory"),
                          ("", "expected a folder's name, found an empty one"), ("  ", "found an empty one"), (str(tmp_path), "holds the current working directory"),
                          ("/", "is the root of the file system")):
        with pytest.raises(OutputError, match=expected):
            with OutputFolder(out, "audit"):
                pass
    assert (work / "mine.txt").read_text() == "x" and Path.cwd() == work
    with OutputFolder("sub", "audit") as folder:  # a folder inside the working directory is fine
        _write(folder, {"summary.json": "{}"})
    assert (work / "sub" / "summary.json").is_file()


def test_a_mount_point_is_refused_before_any_work(tmp_path, monkeypatch):
    out = tmp_path / "mounted"
    out.mkdir()
    monkeypatch.setattr(module.os.path, "ismount", lambda path: os.fspath(path) == os.fspath(out))
    with pytest.raises(OutputError, match="is a mount point"):
        with OutputFolder(out, "audit"):
            pass


def test_a_name_too_long_to_be_written_beside_itself_is_refused_saying_why(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    longest = limit - module._LONGEST_SUFFIX
    with OutputFolder(tmp_path / ("a" * longest), "audit") as folder:
        _write(folder, {"summary.json": "{}"})
    for length in (longest + 1, limit):
        with pytest.raises(OutputError, match=f"its name is {length} bytes long; at most {longest} here"):
            with OutputFolder(tmp_path / ("b" * length), "audit"):
                pass


def test_leftovers_of_killed_runs_beside_other_folders_are_removed_unless_a_run_holds_them(tmp_path):
    dead = tmp_path / ".other.staging-0123456789ab"
    with OutputFolder(tmp_path / "busy", "audit") as busy:  # a run under way: its staging folder is its own
        dead.mkdir()  # a run killed after it wrote its staging folder
        (dead / "documents.jsonl").write_text("released text\n", encoding="utf-8")
        with OutputFolder(tmp_path / "out", "audit") as folder:
            assert folder.recovered == [dead] and not dead.exists()
            assert busy.staging.is_dir()
            _write(folder, {"summary.json": "{}"})
        _write(busy, {"summary.json": "{}"})
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["busy", "out"]


def test_a_reader_puts_back_a_folder_a_killed_run_had_moved_aside(tmp_path):
    out = tmp_path / "out"
    _audit(out)
    aside = tmp_path / ".out.previous-0123456789ab"
    os.rename(out, aside)  # what a run killed between the two renames leaves, where folders cannot be exchanged
    assert complete_folder(out, "audit")["config_id"] == "cfg-a"
    assert not aside.exists()
