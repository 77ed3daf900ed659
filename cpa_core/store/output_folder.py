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

Only a folder a cpa run wrote is ever replaced: an ``--out`` that holds other files, or an output of another kind
(an audit's folder for ``cpa redact``), or that holds one of the run's own inputs, is refused before any work.
:func:`complete_folder` is how a reader (``cpa redact``) checks that a folder is whole and of the expected kind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
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
_STAGING = ".staging-"
_PREVIOUS = ".previous-"
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


class OutputFolder:
    """The output folder of one run, claimed before any work and put in place whole (see the module docstring).

    ``with OutputFolder(out, "audit", inputs=[...]) as folder:`` claims it (the lock, the checks, a fresh
    staging folder); the run writes into ``folder.staging`` and calls ``folder.complete(config_id)``. Leaving
    the block without completing (an error, an interrupt) removes the staging folder: ``out`` is unchanged.

    Raises :class:`~cpa_core.common.errors.OutputError` naming the folder when it cannot be used: another run
    holds it, it holds files no cpa run wrote, an output of another kind, or one of ``inputs``; or it cannot be
    written."""

    def __init__(self, out: str | Path, kind: str, *, inputs: Iterable[str | Path | None] = ()):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, found {kind!r}")
        self.out = Path(out)
        self.kind = kind
        self.inputs = [Path(p) for p in inputs if p is not None]
        self.staging: Path | None = None
        self.completed = False
        self._lock: FileLock | None = None

    # -- claiming -------------------------------------------------------------------------------------------
    def __enter__(self) -> "OutputFolder":
        out = self.out
        resolved = out.resolve()
        for given in self.inputs:
            if _inside(given.resolve(), resolved):
                raise OutputError(f"output folder {out}: holds {given}, an input of this run, and would be "
                                  "replaced by its outputs; choose another --out")
            if given.is_dir() and _inside(resolved, given.resolve()):
                raise OutputError(f"output folder {out}: is inside {given}, an input of this run; choose "
                                  "another --out")
        parent = resolved.parent
        try:
            parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise OutputError(f"output folder {out}: cannot be written ({error.strerror or error}: {error.filename})"
                              "; choose another --out") from None
        self._lock = FileLock(str(parent / f".{resolved.name}.lock"), timeout=0)
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
            self._recover(resolved)
            self._check(resolved)
            self.staging = parent / f".{resolved.name}{_STAGING}{secrets.token_hex(6)}"
            self.staging.mkdir(mode=0o700)
        except BaseException:
            self._release()
            raise
        return self

    def _leftovers(self, resolved: Path, marker: str) -> list[Path]:
        return sorted(resolved.parent.glob(f".{resolved.name}{marker}*"))

    def _recover(self, resolved: Path) -> None:
        """Undo what a run killed while putting its folder in place left behind (we hold the lock: no run is
        using these): a previous folder moved aside goes back when nothing took its place; staging folders
        go (a staging folder is never the only copy of a complete output: the exchange is one step)."""
        try:
            for previous in self._leftovers(resolved, _PREVIOUS):
                if not resolved.exists():
                    os.rename(previous, resolved)
                else:
                    shutil.rmtree(previous)
            for staging in self._leftovers(resolved, _STAGING):
                shutil.rmtree(staging)
        except OSError as error:
            raise OutputError(f"output folder {self.out}: the leftovers of an interrupted run beside it cannot be "
                              f"removed ({error.strerror or error}: {error.filename})") from None

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
            _fsync_folder(self.staging)
            current = None
            self._put_in_place()
        except OSError as error:
            where = self.out if current is None else self.final_path(current)
            raise OutputError(f"{where}: cannot be written ({error.strerror or error}); the output folder "
                              f"{self.out} is left as it was") from None
        self.completed = True
        return contents

    def _put_in_place(self) -> None:
        out, staging = self.out.resolve(), self.staging
        if not out.exists():
            os.rename(staging, out)
        elif not _exchange(staging, out):
            previous = out.parent / f".{out.name}{_PREVIOUS}{secrets.token_hex(6)}"
            os.rename(out, previous)  # a kill here leaves no folder: the next run puts this one back
            os.rename(staging, out)
            staging = previous
        _fsync_folder(out.parent)
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
