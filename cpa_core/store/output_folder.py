"""An output folder that is always either the previous run's or this run's, whole: never a mix, never a part.

A run writes into a *staging* folder beside ``--out`` (``.<name>.staging-<random>``, owner-only) and, once every
file is written and flushed, records the folder's contents (:data:`CONTENTS_FILE`: its kind, its configuration
id and every file with its size and SHA-256) and puts it in place in one step: on Linux the two folders are
exchanged atomically (``renameat2`` with ``RENAME_EXCHANGE``), so a reader, or a kill at any moment, sees the
previous folder or the new one. Elsewhere the previous folder is first moved aside and put back by the next run
if the process died in between. The previous folder is then removed: nothing of an earlier run stays beside the
new files. A failure or an interrupt before that point removes the staging folder and leaves ``--out`` as it was.

A lock beside the folder (``.<name>.lock``, the maintained ``filelock``) is held from before any work until the
folder is in place, so a second run on the same ``--out`` is refused at once with one line instead of mixing its
files with the first's.

Only what a cpa run wrote is ever replaced. In a folder a run wrote, the files its :data:`CONTENTS_FILE` does not
list (a curator's notes, a reviewed copy of ``decisions.csv``) are kept: linked into the new folder before it is
put in place, and any the curator added meanwhile moved over before the previous folder goes. Refused before any
work: an ``--out`` that holds files no cpa run wrote, an output of another kind (an audit's folder for ``cpa
redact``), a file the previous run wrote and someone changed since, one of the run's own inputs, or a path the run
writes elsewhere (the audit history, the cache); the working directory or a folder holding it, a mount point, and a
name too long to be written beside itself. :func:`complete_folder` is how a reader (``cpa redact``) checks that a
folder is whole and of the expected kind.

A run killed after it wrote its staging folder leaves that folder (owner-only, holding document text) beside
``--out``; the next run in the same parent folder removes every such leftover whose run no longer holds its lock,
and says so (:attr:`OutputFolder.recovered`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fnmatch
import hashlib
import json
import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from filelock import FileLock, Timeout

from cpa_core.common.errors import OutputError

CONTENTS_FILE = "contents.json"
"""Written last into a complete output folder: ``{"kind", "config_id", "completed_at", "files": {name: {"bytes",
"sha256"}}}``. A folder without it, or whose files differ from it, is incomplete."""
KINDS = ("audit", "redaction")
EARLIER_OUTPUTS = {"audit": ("manifest.json", "summary.json"), "redaction": ("decisions.csv", "redactions.json")}
"""Files that mark a folder written by an earlier version of the tool (before :data:`CONTENTS_FILE`) as an output of
that kind: such a folder may be replaced by a run of the same kind."""
OUTPUT_NAMES = {"audit": ("summary.json", "documents.jsonl", "calibration.jsonl", "test.jsonl", "worklist.csv",
                            "worklist.json", "manifest.json", "audit.toml", "report.html", "attribute_sets.jsonl",
                            "members"),
                "redaction": ("decisions.csv", "redactions.json", "worklist.csv", "worklist.json", "audit.toml",
                              "*-redacted.*", "audit")}
"""Names (``fnmatch`` patterns) a run of each kind writes (``members``: the folder of an attacker panel's members;
``audit``: a redaction's audit of the redacted release). In a folder an earlier version wrote (no
:data:`CONTENTS_FILE`), these are the tool's and every other file is kept; a file the tool did not write under one
of these names is refused, since a new run could write it."""
_STAGING = ".staging-"
_PREVIOUS = ".previous-"
_TOKEN = 12  # hexadecimal characters of a staging or previous folder's random suffix
_LONGEST_SUFFIX = max(len(_STAGING), len(_PREVIOUS)) + _TOKEN + 1  # the dot before the name, and what follows it
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    except OSError:  # pragma: no cover - no C library to load
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Exchange two folders in one atomic step (Linux ``renameat2``); ``False`` where the platform cannot."""
    libc = _libc()
    renameat2 = getattr(libc, "renameat2", None) if libc is not None else None
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system or kernel cannot exchange
        return False
    raise OSError(code, os.strerror(code), str(b))


def _sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _fsync_folder(folder: Path) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - a platform without folder handles
        return
    try:
        os.fsync(handle)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(handle)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != CONTENTS_FILE)


def read_contents(folder: str | Path) -> dict | None:
    """The contents record of ``folder``, or ``None`` when it has none (or an unreadable one)."""
    try:
        found = json.loads((Path(folder) / CONTENTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("kind") not in KINDS or not isinstance(found.get("files"), dict):
        return None
    return found


def output_kind(folder: str | Path) -> str | None:
    """What a cpa run wrote in ``folder``: ``audit``, ``redaction``, or ``None`` (not a cpa output folder)."""
    found = read_contents(folder)
    if found is not None:
        return found["kind"]
    for kind, names in EARLIER_OUTPUTS.items():
        if all((Path(folder) / name).is_file() for name in names):
            return kind
    return None


def complete_folder(folder: str | Path, kind: str, *, verify: Iterable[str] = ()) -> dict:
    """The contents record of a complete output folder of ``kind``, after checking that every file it lists is
    there with its recorded size, and that the files named in ``verify`` have their recorded SHA-256 too.

    Raises :class:`~cpa_core.common.errors.OutputError` naming the folder (and the file) when it is not a cpa
    output folder, is of another kind, or is incomplete or changed since it was written."""
    folder = Path(folder)
    command = {"audit": "cpa audit", "redaction": "cpa redact"}[kind]
    if not folder.is_dir() and _leftovers(folder.resolve().parent, folder.resolve().name):
        recover_interrupted(folder)  # a run killed between moving the previous folder aside and putting its own
    if not folder.is_dir():
        raise OutputError(f"{folder}: not found; expected the output folder of a {command} run")
    contents = read_contents(folder)
    if contents is None:
        found = output_kind(folder)
        if found is None:
            raise OutputError(f"{folder}: not the output folder of a {command} run (no {CONTENTS_FILE})")
        raise OutputError(f"{folder}: incomplete or written by an earlier version (no {CONTENTS_FILE}); "
                          f"run {command} again")
    if contents["kind"] != kind:
        raise OutputError(f"{folder}: the output of a {contents['kind']} run; expected the output folder of a "
                          f"{command} run")
    for name, facts in contents["files"].items():
        path = folder / name
        size = path.stat().st_size if path.is_file() else None
        if size is None or not isinstance(facts, dict) or size != facts.get("bytes"):
            raise OutputError(f"{path}: {'missing' if size is None else 'changed'} since {command} wrote the folder "
                              f"{contents.get('completed_at', '')}; the folder is incomplete: run {command} again")
    for name in verify:
        facts = contents["files"].get(name)
        path = folder / name
        if facts is None or _sha256(path) != facts.get("sha256"):
            raise OutputError(f"{path}: {'not listed in' if facts is None else 'changed since it was recorded in'} "
                              f"{CONTENTS_FILE}; the folder is incomplete or was edited: run {command} again")
    return contents


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _entries(folder: Path) -> list[str]:
    """Every file, symbolic link and empty folder under ``folder`` (relative, POSIX), :data:`CONTENTS_FILE` aside."""
    found = []
    for root, folders, names in os.walk(folder):
        base = Path(root)
        for name in names + [f for f in folders if os.path.islink(base / f)]:
            found.append((base / name).relative_to(folder).as_posix())
        folders[:] = [f for f in folders if not os.path.islink(base / f)]
        if not names and not folders and base != folder:
            found.append(base.relative_to(folder).as_posix() + "/")
    return sorted(name for name in found if name != CONTENTS_FILE)


def _written_by_cpa(kind: str, name: str) -> bool:
    """Whether a file of that name is one a run of ``kind`` writes (:data:`OUTPUT_NAMES`)."""
    top = name.split("/")[0]  # a file under a folder of such a name, or an empty one, is in the way too
    return any(fnmatch.fnmatchcase(top, pattern) for pattern in OUTPUT_NAMES[kind])


def curators_files(folder: str | Path, kind: str) -> list[str]:
    """What in an output folder no run wrote (relative names; an empty folder ends with ``/``): the files its
    :data:`CONTENTS_FILE` does not list, or, in a folder an earlier version wrote, those not named as a run of
    ``kind`` names its files (:data:`OUTPUT_NAMES`). These are kept when the folder is replaced."""
    folder = Path(folder)
    contents = read_contents(folder)
    if contents is not None:
        return [name for name in _entries(folder) if name not in contents["files"]]
    return [name for name in _entries(folder) if not _written_by_cpa(kind, name)]


def _keep(source: Path, target: Path) -> None:
    """``source`` (a curator's file, link or empty folder) at ``target`` as well: a hard link where the file system
    allows one, else a copy (a symbolic link stays one)."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    elif source.is_dir():
        target.mkdir(exist_ok=True, mode=0o700)
    else:
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError:
            shutil.copy2(source, target, follow_symlinks=False)


def _leftovers(parent: Path, name: str | None = None) -> list[tuple[Path, str, str]]:
    """The staging and previous folders beside ``parent``'s output folders (of ``name`` only when given):
    ``(path, the output folder's name, marker)``."""
    found = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        for marker in (_STAGING, _PREVIOUS):
            head, _, token = entry.name.rpartition(marker)
            if entry.name.startswith(".") and head and len(token) == _TOKEN and entry.is_dir(follow_symlinks=False) \
                    and all(c in "0123456789abcdef" for c in token) and (name is None or head[1:] == name):
                found.append((Path(entry.path), head[1:], marker))
    return sorted(found)


def _lock_for(out: Path) -> FileLock:
    return FileLock(str(out.parent / f".{out.name}.lock"), timeout=0)


def _undo_interrupted(out: Path, leftovers: list[tuple[Path, str, str]]) -> list[Path]:
    """Undo what a run killed while writing ``out`` left beside it (call it holding ``out``'s lock): a previous
    folder moved aside goes back when nothing took its place, else goes; staging folders go (a staging folder is
    never the only copy of a complete output: putting it in place is one step, or undone here). Returns the
    folders removed."""
    removed = []
    for path, _, marker in leftovers:
        if marker == _PREVIOUS and not out.exists():
            os.rename(path, out)
            continue
        if marker == _PREVIOUS:  # the new folder is in place: what the curator kept there is in it already
            _move_kept(path, out)
        shutil.rmtree(path)
        removed.append(path)
    return removed


def _move_kept(previous: Path, out: Path) -> None:
    """Move into ``out`` what of ``previous`` no run wrote and ``out`` lacks (what a curator added while the run
    worked, after its files were linked over)."""
    contents = read_contents(out)
    kind = contents["kind"] if contents is not None else None
    if kind is None:
        return
    for name in curators_files(previous, kind):
        source, target = previous / name.rstrip("/"), out / name.rstrip("/")
        if not target.exists() and not target.is_symlink() and name.rstrip("/") not in contents["files"]:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.rename(source, target)


def recover_interrupted(folder: str | Path) -> list[Path]:
    """Undo what runs killed while writing an output folder left beside ``folder`` and beside the folders next
    to it (each only when no run holds its lock). Returns the staging and previous folders removed."""
    out = Path(folder).resolve()
    removed = []
    by_name: dict[str, list] = {}
    for leftover in _leftovers(out.parent):
        by_name.setdefault(leftover[1], []).append(leftover)
    for name, leftovers in by_name.items():
        lock = _lock_for(out.parent / name)
        try:
            lock.acquire()
        except (Timeout, OSError):
            continue  # a run is writing it now, or the lock cannot be taken: nothing of it is touched
        try:
            removed.extend(_undo_interrupted(out.parent / name, leftovers))
        finally:
            lock.release()
    return removed


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):  # pragma: no cover - a platform without pathconf
        return 255


class OutputFolder:
    """The output folder of one run, claimed before any work and put in place whole (see the module docstring).

    ``with OutputFolder(out, "audit", inputs=[...], writes={...}) as folder:`` claims it (the lock, the checks, a
    fresh staging folder); the run writes into ``folder.staging`` and calls ``folder.complete(config_id)``. Leaving
    the block without completing (an error, an interrupt) removes the staging folder: ``out`` is unchanged.

    ``inputs`` are the files the run reads, ``writes`` the paths it writes besides ``out`` by what they are (``{"the
    audit history": path}``): neither may lie inside ``out``. ``recovered`` lists the leftovers of killed runs
    removed when the folder was claimed, ``kept`` what of the previous folder no run wrote (kept in the new one).

    Raises :class:`~cpa_core.common.errors.OutputError` naming the folder when it cannot be used: another run
    holds it, it holds files no cpa run wrote, an output of another kind, a file changed since a run wrote it, one
    of ``inputs`` or ``writes``; it is the working directory or holds it, is a mount point, or has a name too long;
    or it cannot be written."""

    def __init__(self, out: str | Path, kind: str, *, inputs: Iterable[str | Path | None] = (),
                 writes: dict[str, str | Path | None] | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, found {kind!r}")
        if not str(out).strip():
            raise OutputError("output folder: expected a folder's name, found an empty one; give --out DIR")
        self.out = Path(out)
        self.kind = kind
        self.inputs = [Path(p) for p in inputs if p is not None]
        self.writes = {what: Path(p) for what, p in (writes or {}).items() if p is not None}
        self.staging: Path | None = None
        self.completed = False
        self.recovered: list[Path] = []
        self.kept: list[str] = []
        self._lock: FileLock | None = None

    # -- claiming -------------------------------------------------------------------------------------------
    def __enter__(self) -> "OutputFolder":
        out = self.out
        resolved = out.resolve()
        self._check_place(resolved)
        parent = resolved.parent
        try:
            parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise OutputError(f"output folder {out}: cannot be written ({error.strerror or error}: {error.filename})"
                              "; choose another --out") from None
        limit = _name_max(parent)
        if len(os.fsencode(resolved.name)) + _LONGEST_SUFFIX > limit:
            raise OutputError(f"output folder {out}: its name is {len(os.fsencode(resolved.name))} bytes long; at "
                              f"most {limit - _LONGEST_SUFFIX} here, because the folder is first written beside it "
                              f"under its name and {_LONGEST_SUFFIX} more characters (.NAME{_PREVIOUS}"
                              f"{'x' * _TOKEN}) and the file system takes names of {limit}; choose a shorter name")
        self._lock = _lock_for(resolved)
        try:
            self._lock.acquire()
        except Timeout:
            self._lock = None
            raise OutputError(f"output folder {out}: another cpa run is writing it now; wait for it to finish or "
                              "choose another --out") from None
        except OSError as error:
            self._lock = None
            raise OutputError(f"output folder {out}: cannot be written ({error.strerror or error}); choose another "
                              "--out") from None
        try:
            try:
                self.recovered = _undo_interrupted(resolved, _leftovers(parent, resolved.name))
            except OSError as error:
                raise OutputError(f"output folder {out}: the leftovers of an interrupted run beside it cannot be "
                                  f"removed ({error.strerror or error}: {error.filename})") from None
            self.recovered += recover_interrupted(resolved)
            self._check(resolved)
            self.staging = parent / f".{resolved.name}{_STAGING}{secrets.token_hex(_TOKEN // 2)}"
            self.staging.mkdir(mode=0o700)
        except BaseException:
            self._release()
            raise
        return self

    def _check_place(self, resolved: Path) -> None:
        """What no run may replace, whatever it holds: the working directory or a folder holding it, the root, a
        mount point, a folder holding an input or a path the run writes, a folder inside an input."""
        out = self.out
        if resolved == resolved.parent:
            raise OutputError(f"output folder {out}: is the root of the file system; choose a folder inside it")
        here = Path.cwd().resolve()
        if _inside(here, resolved):
            raise OutputError(f"output folder {out}: {'is' if here == resolved else 'holds'} the current working "
                              f"directory ({here}), which the run would replace; choose a folder beside it or inside "
                              "it, e.g. --out out/audit")
        if os.path.ismount(resolved):
            raise OutputError(f"output folder {out}: is a mount point, which cannot be replaced whole as the run "
                              "replaces its folder; choose a folder inside it")
        for given in self.inputs:
            if _inside(given.resolve(), resolved):
                raise OutputError(f"output folder {out}: holds {given}, an input of this run, and would be "
                                  "replaced by its outputs; choose another --out")
            if given.is_dir() and _inside(resolved, given.resolve()):
                raise OutputError(f"output folder {out}: is inside {given}, an input of this run; choose "
                                  "another --out")
        for what, path in self.writes.items():
            if _inside(path.expanduser().resolve(), resolved):
                raise OutputError(f"output folder {out}: holds {path}, {what} this run writes, which would be "
                                  "replaced with the folder; choose another --out, or keep it elsewhere")

    def _check(self, resolved: Path) -> None:
        out = self.out
        if resolved.exists() and not resolved.is_dir():
            raise OutputError(f"output folder {out}: is a file; expected a folder (new, empty, or written by cpa)")
        if not resolved.is_dir() or not any(resolved.iterdir()):
            return
        found = output_kind(resolved)
        if found is None:
            example = next(iter(sorted(p.name for p in resolved.iterdir())))
            raise OutputError(f"output folder {out}: holds files that no cpa run wrote (e.g. '{example}'); expected "
                              "a new or empty folder, or the output folder of an earlier run, which is replaced")
        if found != self.kind:
            raise OutputError(f"output folder {out}: holds the output of a {found} run; a {self.kind} run would "
                              "replace it: choose another --out")
        if not os.access(resolved, os.W_OK | os.X_OK) or not os.access(resolved.parent, os.W_OK | os.X_OK):
            raise OutputError(f"output folder {out}: cannot be replaced (no write permission); choose another --out")
        contents = read_contents(resolved)
        for name, facts in (contents or {"files": {}})["files"].items():
            path = resolved / name
            if path.is_file() and isinstance(facts, dict) and (path.stat().st_size != facts.get("bytes")
                                                               or _sha256(path) != facts.get("sha256")):
                raise OutputError(f"output folder {out}: '{name}' was changed since cpa wrote it (it is not what "
                                  f"{CONTENTS_FILE} recorded); a new run would replace it: move it out of the folder "
                                  "or choose another --out")
        self.kept = curators_files(resolved, self.kind)
        clash = [name for name in self.kept if _written_by_cpa(self.kind, name)]
        if clash:
            raise OutputError(f"output folder {out}: holds '{clash[0]}', which no cpa run wrote but a {self.kind} run "
                              "may write; move it out of the folder or choose another --out")

    # -- writing ----------------------------------------------------------------------------------------------
    def final_path(self, path: str | Path) -> Path:
        """Where a file written into the staging folder will be once the folder is in place."""
        return self.out / Path(path).relative_to(self.staging)

    def complete(self, config_id: str) -> dict:
        """Record the staging folder's contents and put it in place of ``out`` (see the module docstring).
        Returns the contents record."""
        if self.staging is None or self.completed:
            raise RuntimeError("complete() is called once, inside the with block")
        contents = {"kind": self.kind, "config_id": config_id,
                    "completed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "files": {}}
        current = None
        try:
            for path in _files(self.staging):
                current = path
                with path.open("rb") as stream:  # one read: flushed to disk and hashed
                    os.fsync(stream.fileno())
                    sha256 = hashlib.file_digest(stream, "sha256").hexdigest()
                contents["files"][path.relative_to(self.staging).as_posix()] = {
                    "bytes": path.stat().st_size, "sha256": sha256}
            current = self.staging / CONTENTS_FILE
            handle = os.open(current, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(json.dumps(contents, indent=2))
                stream.flush()
                os.fsync(stream.fileno())
            current = None
            self._link_kept()
            _fsync_folder(self.staging)
            self._put_in_place()
        except OSError as error:
            where = self.out if current is None else self.final_path(current)
            raise OutputError(f"{where}: cannot be written ({error.strerror or error}); the output folder "
                              f"{self.out} is left as it was") from None
        self.completed = True
        return contents

    def _link_kept(self) -> None:
        """Link what of the previous folder no run wrote into the staging folder (listed again now: the curator
        may have added files while the run worked); a name the run wrote too is refused, nothing is replaced."""
        out = self.out.resolve()
        if not out.is_dir() or output_kind(out) != self.kind:
            return
        self.kept = curators_files(out, self.kind)
        for name in self.kept:
            target = self.staging / name.rstrip("/")
            if target.exists() or target.is_symlink():
                raise OutputError(f"output folder {self.out}: holds '{name}', which no cpa run wrote and this run "
                                  f"writes too; move it out of the folder and run again (the folder is left as it was)")
            _keep(out / name.rstrip("/"), target)

    def _put_in_place(self) -> None:
        out, staging = self.out.resolve(), self.staging
        if not out.exists():
            os.rename(staging, out)
        elif not _exchange(staging, out):
            previous = out.parent / f".{out.name}{_PREVIOUS}{secrets.token_hex(_TOKEN // 2)}"
            os.rename(out, previous)  # a kill here leaves no folder: the next run, or reader, puts this one back
            os.rename(staging, out)
            staging = previous
        _fsync_folder(out.parent)
        with contextlib.suppress(OSError):  # a file added after the links were made: moved over, not lost
            _move_kept(staging, out)
        shutil.rmtree(staging, ignore_errors=True)  # the previous folder, now beside out: nothing of it stays

    # -- leaving ----------------------------------------------------------------------------------------------
    def __exit__(self, kind, error, traceback) -> None:
        try:
            if not self.completed and self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._release()
        if isinstance(error, OSError) and not isinstance(error, OutputError) and self.staging is not None \
                and not self.completed:
            where = self.out
            if error.filename is not None:
                try:
                    where = self.final_path(os.fsdecode(error.filename))
                except ValueError:  # not a file of the output (an input, say): said as it is
                    return
            raise OutputError(f"{where}: cannot be written ({error.strerror or error}); the output folder "
                              f"{self.out} is left as it was") from None

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
