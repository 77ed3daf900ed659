"""The audit history: every audit run, from the command line or the dashboard, recorded in one SQLite file.

The file is ``$CPA_HISTORY`` when set and not empty, else ``~/.local/share/cpa/history.sqlite``
(:func:`history_path`). Each audit is one row of ``audits`` (when and where it ran, the declared
configuration and its id, the input checksums, the summary every surface shows, the records folder, the
package versions) plus one row of ``set_sizes`` per (confidence level, audited document): its certified set
size and whether the declared release policy flags it. The worklist is the flagged rows at the flagging
confidence, smallest set first, as :func:`~cpa_core.report.worklist.worklist` orders it.

The history holds ids, checksums and figures, never document text. Next to it, ``<name>.snapshots/`` (the file's
whole name: ``history.sqlite.snapshots/``) holds
one snapshot per audit (:mod:`cpa_core.store.snapshot`): the attack's candidate tables, queries included, so that a
past audit can be reopened without attacking again (:func:`load_result`). Snapshots hold the released
text and are written owner-only, like the history file (600) and its folder (700).

Writes are safe under concurrency and crashes: the file is in WAL mode with a busy timeout, and each audit
is written in one ``BEGIN IMMEDIATE`` transaction, so a reader sees either all of an audit's rows or none,
two processes recording at once wait for each other, and a process killed while recording leaves the
audits recorded before it intact.

Nothing is recorded into a damaged file: recording (and :func:`check_history`, which ``cpa audit`` runs before
any work) first runs SQLite's ``PRAGMA quick_check``, and a file that fails it is refused with one line naming it
(0.12 s on 300 audits of 1,000 documents at two levels, a 36 MB file; ``integrity_check`` also compares every
index with its table and takes 4 to 5 times as long). Every failure of the file or of its folders (a full disk, a
permission denied) is a :class:`~cpa_core.common.errors.HistoryError` naming the file or folder, and so is a row
the tool cannot read.

:func:`prune_history` removes audits with their snapshots, and the orphan files of the snapshot folder: the
snapshot of a recording killed between writing it and committing its row, and the temporary of a snapshot whose
writing was killed. Recordings hold the snapshot folder with a shared lock from writing their snapshot to
committing, a prune holds it exclusively, so that a prune never takes a snapshot about to be committed for an
orphan; a recording removes the temporaries left by killed ones when no other recording is under way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.common.errors import HistoryError
from cpa_core.conformal.calibration import confidence_label, exact_fraction
from cpa_core.report.verdict import summary_document
from cpa_core.store.records import PANEL_FOLDER, package_versions
from cpa_core.store.snapshot import (
    PARTIAL,
    SUFFIX,
    folder_error,
    json_default,
    prepare_folder,
    read_snapshot,
    write_snapshot,
)

try:
    import fcntl
except ImportError:  # not POSIX: recordings and prunes are not kept apart
    fcntl = None

if TYPE_CHECKING:
    from cpa_core.audit.results import AuditResult

ENV_VAR = "CPA_HISTORY"
DEFAULT_PATH = Path("~/.local/share/cpa/history.sqlite")
SOURCES = ("cli", "dashboard")
BUSY_TIMEOUT_S = 60.0  # another process's transaction is short (no attack, no snapshot inside it)
LOCK_WAIT_S = BUSY_TIMEOUT_S  # how long a prune waits for recordings under way, and a recording for a prune
INTEGRITY_CHECK = "PRAGMA quick_check(1)"  # its first problem only: the message is one line
SQLITE_IDS = range(-(2**63), 2**63)  # what an SQLite INTEGER holds: any other id is no audit's
APPLICATION_ID = 0x43504148  # "CPAH" in the SQLite header: tells an audit history from any other database
SCHEMA_VERSION = 1
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS audits (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        source TEXT NOT NULL,
        config_id TEXT NOT NULL,
        config TEXT NOT NULL,
        checksums TEXT NOT NULL,
        summary TEXT NOT NULL,
        flag_confidence TEXT NOT NULL,
        out_dir TEXT,
        versions TEXT NOT NULL,
        snapshot TEXT,
        snapshot_sha256 TEXT)""",
    """CREATE TABLE IF NOT EXISTS set_sizes (
        audit_id INTEGER NOT NULL REFERENCES audits(id) ON DELETE CASCADE,
        confidence TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        set_size INTEGER NOT NULL,
        flagged INTEGER NOT NULL,
        PRIMARY KEY (audit_id, confidence, doc_id))""",
)
LIST_COLUMNS = ("id", "created_at", "source", "config_id", "knowledge", "attacker", "protocol", "documents_sha256",
                "registry_sha256", "n_documents", "flag_confidence", "k", "first_guess_rate", "verdict", "n_flagged",
                "median_set_size", "redacted_from", "documents_kept", "characters_kept_share", "meaning", "panel",
                "panel_attackers", "out_dir", "unreadable")
SHORT_SHA = 12


def history_path() -> Path:
    """The history file: ``$CPA_HISTORY`` when set and not empty, else ``~/.local/share/cpa/history.sqlite``."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured or DEFAULT_PATH).expanduser()


def snapshot_folder(file: Path) -> Path:
    """Where the snapshots of the history ``file`` are kept: ``<name>.snapshots`` next to it, the whole name
    (``x.sqlite.snapshots``), so that two histories in one folder (``x.sqlite``, ``x.db``) keep theirs apart."""
    return file.with_name(f"{file.name}.snapshots")


def _is_history(path: Path) -> bool:
    """Whether ``path`` is an audit history (an SQLite file whose header carries :data:`APPLICATION_ID`)."""
    try:
        with path.open("rb") as stream:
            header = stream.read(72)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\0" and int.from_bytes(header[68:72], "big") == APPLICATION_ID


def _orphan_folders(file: Path) -> list[Path]:
    """The snapshot folders whose files no audit refers to are this history's orphans: its own, and the folder an
    earlier version named by the stem (``x.snapshots`` for ``x.sqlite``) unless another history of that stem lies
    beside it (``x.db``), whose snapshots it may hold."""
    folders = [snapshot_folder(file)]
    earlier = file.with_name(f"{file.stem}.snapshots")
    if earlier != folders[0] and earlier.is_dir():
        own = {file.name, *(f"{file.name}{companion}" for companion in ("-wal", "-shm", "-journal"))}
        try:
            others = [p for p in file.parent.iterdir() if p.name.startswith(f"{file.stem}.") and p.name not in own
                      and p.is_file() and _is_history(p)]
        except OSError:
            others = [earlier]  # not known to be ours alone
        if not others:
            folders.append(earlier)
    return folders


def _dumps(value) -> str:
    return json.dumps(value, default=json_default, sort_keys=True)


def _damaged(file: Path, problem: str) -> HistoryError:
    """The one message for a history that fails SQLite's integrity check, or that SQLite finds malformed."""
    problem = " ".join(str(problem).split())  # SQLite's report spans lines
    problem = problem if len(problem) <= 160 else problem[:160] + "…"
    return HistoryError(f"audit history {file}: is damaged ({problem}); expected an intact SQLite file, and nothing "
                        f"is recorded into a damaged one: restore the file from a copy, or start a new history "
                        f"with --history FILE (or ${ENV_VAR})")


def _unusable(file: Path, error: Exception) -> HistoryError:
    """The one message for a file SQLite cannot use: what it is, and what was expected."""
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    if "malformed" in reason:
        return _damaged(file, f"SQLite: {reason}")
    if "not a database" in reason:
        reason = "not an SQLite database"
    if "disk is full" in reason or (isinstance(error, OSError) and error.errno == errno.ENOSPC):
        return HistoryError(f"audit history {file}: cannot be written ({reason}); expected free space on its disk: "
                            f"free some, or set {ENV_VAR} or --history to a file on another disk")
    return HistoryError(f"audit history {file}: cannot be used ({reason}); expected an audit history file "
                        f"(SQLite) in a writable folder; set {ENV_VAR} or --history to another file")


def _check_location(file: Path, create: bool) -> bool:
    """Whether the file exists; with ``create``, its folder is made (700) and the file created (600)."""
    try:
        return _locate(file, create)
    except OSError as error:  # a folder that cannot be searched (permission denied), a failing disk
        raise _unusable(file, error) from None


def _locate(file: Path, create: bool) -> bool:
    if file.is_dir():
        raise HistoryError(f"audit history {file}: is a folder; expected the path of a file, "
                           f"e.g. {file / 'history.sqlite'}")
    if file.exists():
        return True
    if not create:
        return False
    blocked = next((folder for folder in file.parents if folder.exists()), None)
    if blocked is not None and not blocked.is_dir():
        raise _unusable(file, OSError(0, f"its folder {blocked} is a file"))
    try:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o600))  # SQLite gives its -wal and -shm files this mode
    except OSError as error:
        raise _unusable(file, error) from None
    return True


def _check_schema(connection: sqlite3.Connection, file: Path) -> bool:
    """Whether the file already holds an audit history (raises when it holds something else)."""
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                   "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    if application_id == 0 and not tables:
        return False  # a new, empty database
    if application_id != APPLICATION_ID:
        raise HistoryError(f"audit history {file}: is another SQLite database (tables {', '.join(tables) or 'none'}); "
                           f"expected an audit history file; set {ENV_VAR} or --history to another file")
    if version > SCHEMA_VERSION:
        raise HistoryError(f"audit history {file}: written by a newer version of the tool (schema {version}); "
                           f"expected schema {SCHEMA_VERSION} or older")
    return True


def _check_integrity(connection: sqlite3.Connection, file: Path) -> None:
    """Raise when the file fails SQLite's ``quick_check`` (every page, record and free list is well formed).

    ``quick_check`` rather than ``integrity_check``: it reads the whole file once and skips comparing each index
    with its table, 4 to 5 times as fast (on 300 audits of 1,000 documents at two levels, a 36 MB file: 0.12 s
    against 0.55 s), and a damaged page is what a crash or a failing disk leaves.
    """
    problems = [row[0] for row in connection.execute(INTEGRITY_CHECK).fetchall()]
    if problems != ["ok"]:
        raise _damaged(file, f"SQLite's quick_check: {problems[0] if problems else 'no answer'}")


@contextlib.contextmanager
def _open(file: Path, *, create: bool, check: bool = False) -> Iterator[sqlite3.Connection | None]:
    """A connection to the history (``None`` when reading a file that does not exist yet).

    Creating one sets WAL mode and the schema, in a transaction of its own so that processes opening a new
    file at once agree on it. With ``check``, a file that fails SQLite's integrity check is refused before
    anything is written to it. Every SQLite failure becomes a :class:`HistoryError` naming the file.
    """
    if not _check_location(file, create):
        yield None
        return
    try:
        # the timeout is SQLite's busy timeout; no implicit transactions: each one is begun explicitly
        connection = sqlite3.connect(file, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as error:
        raise _unusable(file, error) from None
    try:
        connection.execute("PRAGMA foreign_keys = ON")
        if check:
            _check_integrity(connection, file)
        if create:
            connection.execute("PRAGMA journal_mode = WAL")  # persistent: readers never block the writer
            connection.execute("BEGIN IMMEDIATE")
            if not _check_schema(connection, file):
                for statement in SCHEMA:
                    connection.execute(statement)
                connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("COMMIT")
        elif not _check_schema(connection, file):
            yield None
            return
        yield connection
    except sqlite3.Error as error:
        raise _unusable(file, error) from None
    finally:
        connection.close()


def check_history(path: str | Path | None = None, *, create: bool = True) -> Path:
    """Create the history (and its folder) if needed, check it can be written and passes SQLite's integrity
    check; returns its path. Without ``create``, an existing history is checked and an absent one left absent.

    Callers run it before an audit, so that an unusable or damaged history is said before any work is spent.
    """
    file = Path(path) if path is not None else history_path()
    with _open(file, create=create, check=True):
        pass
    return file


@contextlib.contextmanager
def _snapshot_lock(folder: Path, *, exclusive: bool, wait: bool = True) -> Iterator[bool]:
    """Hold the snapshot folder: shared by a recording from writing its snapshot to committing its row, exclusive
    by a prune, so that a prune never takes the snapshot of a recording under way for an orphan.

    Yields whether it is held: ``False`` only without ``wait``, when another process holds it. An advisory lock
    of the system (``flock`` on the folder): a process killed while holding it releases it.
    """
    if fcntl is None:
        yield True
        return
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError as error:
        raise folder_error(folder, error) from None
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, mode)
                held = True
            except BlockingIOError:
                held = False
            except OSError:  # a file system without locks: nothing to keep apart from
                held = True
            if held or not wait:
                break
            if time.monotonic() > deadline:
                raise HistoryError(f"audit snapshot folder {folder}: still in use after {LOCK_WAIT_S:g} s by "
                                   f"{'an audit being recorded' if exclusive else 'a prune'} in another process; "
                                   "expected it to finish: try again")
            time.sleep(0.05)
        yield held
    finally:
        os.close(handle)


def _files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The snapshots (``*.npz``) and the temporaries of snapshots being written (``.snapshot-*.part``) in the
    folder, regular files only (none when the folder is absent)."""
    snapshots, partial = [], []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    continue
                if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                    snapshots.append(Path(entry.path))
                elif entry.name.startswith(PARTIAL[0]) and entry.name.endswith(PARTIAL[1]):
                    partial.append(Path(entry.path))
    except FileNotFoundError:
        pass
    except OSError as error:
        raise HistoryError(f"audit snapshot folder {folder}: cannot be read ({error.strerror or error})") from None
    return sorted(snapshots), sorted(partial)


def _remove_partial(folder: Path) -> None:
    """Remove the temporaries of snapshots whose writing was killed, when no recording is under way (best effort:
    the audit is recorded whatever happens here; ``cpa history prune`` removes what is left)."""
    with contextlib.suppress(HistoryError, OSError), _snapshot_lock(folder, exclusive=True, wait=False) as held:
        if held:
            for path in _files(folder)[1]:
                path.unlink(missing_ok=True)


def _level_rows(result: AuditResult) -> list[tuple[str, str, int, int]]:
    """``(confidence, doc_id, set size, flagged)`` of every audited document at every audited level."""
    config = result.config
    doc_ids = [str(d) for d in result.test_split.table.doc_ids.tolist()]
    rows = []
    for level in config.confidences:
        cert = result.certificate(level)
        sizes, flagged = cert.set_sizes, cert.flags(config.policy)
        label = confidence_label(level)
        rows.extend((label, doc, int(size), int(flag)) for doc, size, flag in zip(doc_ids, sizes, flagged))
    return rows


def record_audit(result: AuditResult, *, source: str, out_dir: str | Path | None = None,
                 path: str | Path | None = None, before_commit: Callable[[int], None] | None = None) -> int:
    """Record one audit in the history; returns its id.

    Parameters
    ----------
    result : the audit
    source : ``"cli"`` or ``"dashboard"``, where it ran
    out_dir : the folder its records were written to, if any
    path : the history file (default :func:`history_path`)
    before_commit : called with the new id inside the transaction, after every row is written and before
        the commit; tests interrupt a recording there to check that nothing of it is left behind

    The history must pass SQLite's integrity check (a damaged one is refused before anything is written). The
    snapshot is written first, outside the transaction (other writers do not wait for it), and removed again
    if the audit cannot be recorded; only a process killed while recording leaves its snapshot behind,
    referenced by no audit (:func:`prune_history` removes it).
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, found {source!r}")
    file = Path(path) if path is not None else history_path()
    config = result.config
    row = {"created_at": datetime.now(UTC).isoformat(timespec="seconds"), "source": source,
           "config_id": config.config_id, "config": _dumps(config.to_dict()),
           "checksums": _dumps({k: result.inputs[k] for k in ("documents", "registry") if k in result.inputs}),
           "summary": _dumps(summary_document(result)),
           "flag_confidence": confidence_label(config.policy_confidence),
           "out_dir": None if out_dir is None else str(Path(out_dir).resolve()), "versions": _dumps(package_versions())}
    levels = _level_rows(result)
    folder = snapshot_folder(file)
    with _open(file, create=True, check=True) as connection, \
            _snapshot_lock(prepare_folder(folder), exclusive=False):
        snapshot, sha256 = write_snapshot(result, folder)
        row.update(snapshot=str(snapshot.relative_to(file.parent)), snapshot_sha256=sha256)
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                audit_id = connection.execute(
                    f"INSERT INTO audits ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                    tuple(row.values())).lastrowid
                connection.executemany("INSERT INTO set_sizes VALUES (?, ?, ?, ?, ?)",
                                       [(audit_id, *level) for level in levels])
                if before_commit is not None:
                    before_commit(audit_id)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except BaseException:
            with contextlib.suppress(OSError):  # the first error is the one to say; a file left is an orphan
                snapshot.unlink(missing_ok=True)  # an audit that is not recorded keeps no snapshot
            raise
    _remove_partial(folder)
    return audit_id


@dataclass(frozen=True)
class HistoryEntry:
    """One recorded audit.

    Attributes
    ----------
    id : its number in the history
    created_at : when it was recorded (UTC, ISO 8601)
    source : ``"cli"`` or ``"dashboard"``
    config_id, config : the declared configuration's id and the manifest's ``config``
    checksums : the manifest's ``inputs`` of the documents and registry (file, sha256, rows)
    summary : ``summary.json`` (:func:`~cpa_core.report.verdict.summary_document`: the figures and the verdict)
    flag_confidence : the level (label) at which the release policy flags
    set_sizes : ``{confidence label: {doc_id: certified set size}}`` at each audited level
    flagged : the worklist's doc ids at ``flag_confidence``, smallest set first
    out_dir : the records folder (command line), else ``None``
    versions : the package versions it ran with
    snapshot, snapshot_sha256 : the snapshot file (absolute) and its SHA-256, ``None`` when absent
    """

    id: int
    created_at: str
    source: str
    config_id: str
    config: dict
    checksums: dict
    summary: dict
    flag_confidence: str
    set_sizes: dict[str, dict[str, int]] = field(repr=False)
    flagged: tuple[str, ...] = field(repr=False)
    out_dir: str | None
    versions: dict
    snapshot: str | None
    snapshot_sha256: str | None

    @property
    def knowledge(self) -> str:
        return self.summary.get("knowledge", "")

    @property
    def attacker(self) -> str:
        return self.summary.get("attacker", "")

    @property
    def policy(self) -> ReleasePolicy:
        """The release policy its worklist was drawn under."""
        return ReleasePolicy(**self.summary["policy"])

    def set_sizes_at(self, level: str) -> np.ndarray:
        """The certified set sizes of its documents at one audited level (a label)."""
        return np.fromiter(self.set_sizes.get(level, {}).values(), dtype=np.int64)

    @property
    def levels(self) -> list[str]:
        """The audited confidence levels (labels), lowest first."""
        return sorted(self.set_sizes, key=exact_fraction)

    def to_dict(self) -> dict:
        """Every field, as JSON values (ids and figures only, never document text)."""
        return {"id": self.id, "created_at": self.created_at, "source": self.source, "config_id": self.config_id,
                "config": self.config, "checksums": self.checksums, "summary": self.summary,
                "flag_confidence": self.flag_confidence, "flagged": list(self.flagged), "set_sizes": self.set_sizes,
                "out_dir": self.out_dir, "versions": self.versions, "snapshot": self.snapshot,
                "snapshot_sha256": self.snapshot_sha256}


def _short(checksums: dict, role: str) -> str | None:
    sha = (checksums.get(role) or {}).get("sha256")
    return sha[:SHORT_SHA] if sha else None


JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false",
              type(None): "null"}


def _json_object(text, what: str) -> dict:
    """A JSON column of a row as the object the tool wrote; ``ValueError`` saying what it is instead."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):  # not JSON, or not even text
        raise ValueError(f"its stored {what} is not JSON") from None
    if not isinstance(value, dict):
        raise ValueError(f"its stored {what} is JSON but {JSON_KINDS.get(type(value), 'not an object')}, "
                         "not an object")
    return value


def _summary(text) -> dict:
    """The stored summary, of the form the tool writes: ``confidence`` an object of objects, ``policy`` an object."""
    summary = _json_object(text, "summary")
    levels, policy = summary.get("confidence", {}), summary.get("policy", {})
    if not (isinstance(levels, dict) and all(isinstance(v, dict) for v in levels.values())
            and isinstance(policy, dict)):
        raise ValueError("its stored summary is not of the form the tool records")
    return summary


def _unreadable(file: Path, audit_id: int, reason) -> HistoryError:
    return HistoryError(f"audit history {file}: audit {audit_id} cannot be read ({reason}); expected the row the "
                        f"tool recorded: 'cpa history prune {audit_id}' removes it")


def _figures(summary, checksums, flag_confidence) -> dict:
    """A row's columns of :func:`list_audits` read from its stored summary and checksums."""
    summary, checksums = _summary(summary), _json_object(checksums, "checksums")
    try:
        level = summary.get("confidence", {}).get(flag_confidence, {})
        verdict = summary.get("verdict")
        return {"knowledge": summary.get("knowledge"), "attacker": summary.get("attacker"),
                "protocol": summary.get("protocol"), "documents_sha256": _short(checksums, "documents"),
                "registry_sha256": _short(checksums, "registry"), "n_documents": level.get("n_test"),
                "k": (summary.get("policy") or {}).get("flag_below"), "first_guess_rate": level.get("first_guess_rate"),
                "verdict": verdict.get("status") if isinstance(verdict, dict) else None,
                "n_flagged": level.get("n_flagged"), "median_set_size": level.get("median_set_size"),
                "redacted_from": (summary.get("redaction") or {}).get("from_audit"),
                **_kept((summary.get("redaction") or {}).get("kept") or {}),
                "panel": (summary.get("panel") or {}).get("config_id"),
                "panel_attackers": tuple((summary.get("panel") or {}).get("attackers") or ()) or None}
    except (AttributeError, TypeError):  # a member of another type than the tool writes
        raise ValueError("its stored summary or checksums are not of the form the tool records") from None


def _kept(kept: dict) -> dict:
    """What a redacted release keeps (``summary.json``'s ``redaction.kept``) as a history row's columns: the documents
    kept, the share of characters kept and the mean meaning score of the edited texts (``None`` when not measured)."""
    return {"documents_kept": kept.get("documents_kept"), "characters_kept_share": kept.get("characters_kept_share"),
            "meaning": kept.get("meaning_edited_mean")}


def list_audits(path: str | Path | None = None) -> pd.DataFrame:
    """Every recorded audit, oldest first, one row each (:data:`LIST_COLUMNS`; figures at the flagging level).

    An absent history file has no audits. A row whose stored summary or checksums the tool cannot read is listed
    with its id, time, source and configuration id, and ``unreadable`` saying why (``None`` on every other row).
    """
    file = Path(path) if path is not None else history_path()
    rows = []
    with _open(file, create=False) as connection:
        records = [] if connection is None else connection.execute(
            "SELECT id, created_at, source, config_id, summary, checksums, flag_confidence, out_dir "
            "FROM audits ORDER BY id").fetchall()
    for audit_id, created_at, source, config_id, summary, checksums, flag_confidence, out_dir in records:
        row = {"id": audit_id, "created_at": created_at, "source": source, "config_id": config_id,
               "flag_confidence": flag_confidence, "out_dir": out_dir, "unreadable": None}
        try:
            row.update(_figures(summary, checksums, flag_confidence))
        except ValueError as error:
            row["unreadable"] = str(error)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LIST_COLUMNS))


def panel_entries(audits: pd.DataFrame) -> list[tuple[int, ...]]:
    """The audits of :func:`list_audits` as entries, in order: an audit alone, or the members of one run of an
    attacker panel together (recorded one after the other in the panel's order, each marked as of its panel: its
    ``panel`` id and ``panel_attackers``). A run whose other members were pruned is an entry of the members left."""
    entries: list[list[int]] = []
    open_panel: tuple | None = None  # the panel id and attackers of the last entry, while it may take more members
    for row in audits.itertuples(index=False):
        attackers = row.panel_attackers if isinstance(row.panel_attackers, tuple) else ()
        if row.panel is None or not isinstance(row.panel, str) or row.attacker not in attackers:
            entries.append([int(row.id)])
            open_panel = None
            continue
        if open_panel is not None and open_panel[0] == row.panel and open_panel[1] == attackers:
            done = open_panel[2]
            if row.attacker not in done and attackers.index(row.attacker) > max(attackers.index(a) for a in done):
                entries[-1].append(int(row.id))
                done.add(row.attacker)
                continue
        entries.append([int(row.id)])
        open_panel = (row.panel, attackers, {row.attacker})
    return [tuple(entry) for entry in entries]


def recorded_panel_summary(entry: HistoryEntry) -> dict | None:
    """The ``summary.json`` of the attacker panel a recorded member was written with (the folder its own folder,
    ``members/<attacker>/``, is in), when it is still there and still that panel's; else ``None``."""
    panel = entry.summary.get("panel")
    if not isinstance(panel, dict) or not entry.out_dir or Path(entry.out_dir).parent.name != PANEL_FOLDER:
        return None
    try:
        found = json.loads((Path(entry.out_dir).parent.parent / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or (found.get("panel") or {}).get("config_id") != panel.get("config_id"):
        return None
    return found


def _no_audit(file: Path, audit_id, connection: sqlite3.Connection | None) -> HistoryError:
    known = None if connection is None else connection.execute("SELECT min(id), max(id) FROM audits").fetchone()
    return HistoryError(f"audit history {file}: no audit {audit_id}; expected "
                        + (f"an id from {known[0]} to {known[1]}" if known and known[1] is not None
                           else "a recorded audit (none yet)") + " (see 'cpa history list')")


def load_audit(audit_id: int, path: str | Path | None = None) -> HistoryEntry:
    """The recorded audit ``audit_id``; raises :class:`HistoryError` when the history has no such audit (any
    integer, however large, is an id to look for) or its row cannot be read."""
    file = Path(path) if path is not None else history_path()
    audit_id = int(audit_id)
    with _open(file, create=False) as connection:
        record = None if connection is None or audit_id not in SQLITE_IDS else connection.execute(
            "SELECT id, created_at, source, config_id, config, checksums, summary, flag_confidence, out_dir, "
            "versions, snapshot, snapshot_sha256 FROM audits WHERE id = ?", (audit_id,)).fetchone()
        if record is None:
            raise _no_audit(file, audit_id, connection)
        sizes = connection.execute("SELECT confidence, doc_id, set_size, flagged FROM set_sizes WHERE audit_id = ? "
                                   "ORDER BY rowid", (audit_id,)).fetchall()  # the audit's document order
    (audit_id, created_at, source, config_id, config, checksums, summary, flag_confidence, out_dir, versions,
     snapshot, snapshot_sha256) = record
    try:
        config, checksums, versions = (_json_object(text, what) for text, what in
                                       ((config, "configuration"), (checksums, "checksums"), (versions, "versions")))
        summary = _summary(summary)
    except ValueError as error:
        raise _unreadable(file, audit_id, error) from None
    set_sizes: dict[str, dict[str, int]] = {}
    for level, doc_id, size, _ in sizes:
        set_sizes.setdefault(level, {})[doc_id] = size
    flagged = tuple(doc_id for _, doc_id in sorted((size, doc_id) for level, doc_id, size, flag in sizes
                                                   if flag and level == flag_confidence))  # as the worklist
    return HistoryEntry(audit_id, created_at, source, config_id, config, checksums, summary, flag_confidence,
                        set_sizes, flagged, out_dir, versions,
                        None if snapshot is None else str(file.parent / snapshot), snapshot_sha256)


def load_result(audit_id: int, path: str | Path | None = None) -> AuditResult:
    """The :class:`~cpa_core.audit.results.AuditResult` of a recorded audit, rebuilt from its snapshot (no attack).

    The snapshot's SHA-256 is checked against the one recorded first; a missing or changed snapshot raises
    :class:`HistoryError` naming it (the entry itself, :func:`load_audit`, stays readable).
    """
    entry = load_audit(audit_id, path)
    if entry.snapshot is None or entry.snapshot_sha256 is None:
        raise HistoryError(f"audit {entry.id}: no snapshot was recorded; only its summary can be shown")
    result = read_snapshot(entry.snapshot, entry.snapshot_sha256)
    if result.config.config_id != entry.config_id:
        raise HistoryError(f"audit snapshot {entry.snapshot}: holds configuration {result.config.config_id}; "
                           f"expected {entry.config_id}, the one audit {entry.id} recorded")
    return result


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune_history` removed from a history (with ``dry_run``: what it would remove).

    Attributes
    ----------
    file : the history
    audits : the ids of the audits removed, with their rows of set sizes
    snapshots : their snapshot files (those present)
    orphans : files of the snapshot folder no audit refers to: the snapshot of a recording killed before it
        committed its row, the ``.snapshot-*.part`` temporary of a snapshot whose writing was killed
    snapshot_bytes, orphan_bytes : the sizes of those files
    dry_run : nothing was removed
    """

    file: Path
    audits: tuple[int, ...]
    snapshots: tuple[Path, ...]
    snapshot_bytes: int
    orphans: tuple[Path, ...]
    orphan_bytes: int
    dry_run: bool

    def to_dict(self) -> dict:
        return {"history": str(self.file), "dry_run": self.dry_run, "audits": list(self.audits),
                "snapshots": [str(p) for p in self.snapshots], "snapshot_bytes": self.snapshot_bytes,
                "orphans": [str(p) for p in self.orphans], "orphan_bytes": self.orphan_bytes}


def _real(file: Path, snapshot) -> str | None:
    """Where a row's stored snapshot is, symbolic links resolved (``None`` for a row without one)."""
    return os.path.realpath(file.parent / snapshot) if isinstance(snapshot, str) and snapshot else None


def _size(path: Path) -> int | None:
    """A regular file's size (``None`` when there is none at ``path``)."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise HistoryError(f"audit snapshot {path}: cannot be read ({error.strerror or error})") from None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def _orphans(connection: sqlite3.Connection, file: Path, folders: list[Path]) -> list[Path]:
    """The files of the snapshot folders no audit of the history refers to (call it holding the folders
    exclusively, and inside a transaction: no recording adds a snapshot or a row meanwhile)."""
    referenced = {_real(file, snapshot) for (snapshot,) in connection.execute("SELECT snapshot FROM audits")}
    found = []
    for folder in folders:
        snapshots, partial = _files(folder)
        found += [path for path in snapshots if os.path.realpath(path) not in referenced] + partial
    return found


@contextlib.contextmanager
def _holding(folders: list[Path], *, wait: bool) -> Iterator[bool]:
    """Every folder held exclusively (:func:`_snapshot_lock`); yields whether all are held."""
    with contextlib.ExitStack() as stack:
        yield all(stack.enter_context(_snapshot_lock(folder, exclusive=True, wait=wait)) for folder in folders)


def orphan_files(path: str | Path | None = None) -> tuple[tuple[Path, ...], int]:
    """The orphan files of the history's snapshot folders (:class:`PruneReport`) and their size in bytes; none
    when a recording is under way (its snapshot is not an orphan) or the history is absent. Nothing is removed."""
    file = Path(path) if path is not None else history_path()
    folders = [folder for folder in _orphan_folders(file) if folder.is_dir()]
    if not folders:
        return (), 0
    with _open(file, create=False) as connection, _holding(folders, wait=False) as held:
        if connection is None or not held:
            return (), 0
        connection.execute("BEGIN")
        try:
            orphans = _orphans(connection, file, folders)
        finally:
            connection.execute("ROLLBACK")
    sizes = [_size(path) for path in orphans]
    return tuple(p for p, size in zip(orphans, sizes) if size is not None), sum(size or 0 for size in sizes)


def _chosen(rows: list[tuple], file: Path, ids: tuple[int, ...], before: datetime | None,
            keep: int | None) -> list[int]:
    """The ids of the audits to remove among ``rows`` (``(id, created_at)``, oldest first)."""
    known = {row[0] for row in rows}
    unknown = [str(i) for i in ids if i not in known]
    if unknown:
        lowest, highest = (min(known), max(known)) if known else (None, None)
        raise HistoryError(f"audit history {file}: no audit {', '.join(unknown)}; expected "
                           + (f"ids from {lowest} to {highest}" if known else "a recorded audit (none yet)")
                           + " (see 'cpa history list'); nothing was removed")
    chosen = set(ids)
    if before is not None or keep is not None:
        kept = {row[0] for row in rows[max(0, len(rows) - keep):]} if keep else set()
        for audit_id, created_at in rows:
            if audit_id in kept:
                continue
            if before is not None:
                try:
                    recorded = datetime.fromisoformat(created_at)
                except (TypeError, ValueError):
                    continue  # a time the tool did not write: not known to be older
                if (recorded if recorded.tzinfo else recorded.replace(tzinfo=UTC)) >= before:
                    continue
            chosen.add(audit_id)
    return sorted(chosen)


def prune_history(path: str | Path | None = None, *, ids: Iterable[int] = (), before: datetime | None = None,
                  keep: int | None = None, dry_run: bool = False) -> PruneReport:
    """Remove audits from the history with their snapshots, and every orphan file of its snapshot folder.

    Parameters
    ----------
    path : the history file (default :func:`history_path`)
    ids : audits to remove, by id; an id the history does not hold raises :class:`HistoryError` and nothing is
        removed
    before : also remove the audits recorded before this time (a time without a zone is UTC, like ``created_at``)
    keep : also remove every audit but the newest ``keep`` (the last recorded); with ``before``, those recorded
        before it except the newest ``keep``
    dry_run : remove nothing; the report says what would be removed

    With no ``ids``, ``before`` or ``keep``, only the orphan files are removed. The history must pass SQLite's
    integrity check. The rows go in one transaction; their snapshots are removed once it is committed (a file
    left by a failure is an orphan the next prune removes). An absent history has nothing to remove.
    """
    file = Path(path) if path is not None else history_path()
    ids = tuple(sorted({int(i) for i in ids}))
    if keep is not None and keep < 0:
        raise ValueError(f"keep must be 0 or more, found {keep}")
    if before is not None and before.tzinfo is None:
        before = before.replace(tzinfo=UTC)
    with _open(file, create=False, check=True) as connection:
        if connection is None:
            return PruneReport(file, (), (), 0, (), 0, dry_run)
        # absent: no orphan; a recording that makes one now adds none that is ours
        folders = [folder for folder in _orphan_folders(file) if folder.is_dir()]
        with _holding(folders, wait=True):
            connection.execute("BEGIN" if dry_run else "BEGIN IMMEDIATE")
            try:
                rows = connection.execute("SELECT id, created_at, snapshot FROM audits ORDER BY id").fetchall()
                chosen = _chosen([row[:2] for row in rows], file, ids, before, keep)
                removed = set(chosen)
                kept_files = {_real(file, snapshot) for audit_id, _, snapshot in rows if audit_id not in removed}
                snapshots = sorted({file.parent / snapshot for audit_id, _, snapshot in rows if audit_id in removed
                                    and (real := _real(file, snapshot)) is not None and real not in kept_files
                                    and real.endswith(SUFFIX)})  # never a file an audit kept refers to
                orphans = _orphans(connection, file, folders)
                if chosen and not dry_run:
                    connection.executemany("DELETE FROM set_sizes WHERE audit_id = ?", [(i,) for i in chosen])
                    connection.executemany("DELETE FROM audits WHERE id = ?", [(i,) for i in chosen])
                    connection.execute("COMMIT")
                else:
                    connection.execute("ROLLBACK")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            sizes = {path: _size(path) for path in (*snapshots, *orphans)}
            snapshots = [path for path in snapshots if sizes[path] is not None]  # already gone: nothing to remove
            orphans = [path for path in orphans if sizes[path] is not None]
            if not dry_run:
                for path in (*snapshots, *orphans):
                    try:
                        path.unlink(missing_ok=True)
                    except OSError as error:
                        raise HistoryError(f"audit snapshot {path}: cannot be removed ({error.strerror or error}); "
                                           f"expected a writable snapshot folder; the audits are removed from the "
                                           f"history, and 'cpa history prune' removes the file once it can") from None
    return PruneReport(file, tuple(chosen), tuple(snapshots), sum(sizes[p] for p in snapshots), tuple(orphans),
                       sum(sizes[p] for p in orphans), dry_run)


COMPARED_METRICS = ("coverage", "median_set_size", "n_flagged")


@dataclass(frozen=True)
class AuditComparison:
    """Two recorded audits side by side, A then B.

    Attributes
    ----------
    a, b : the audits' ids
    levels : one row per confidence level of either audit: ``confidence`` and, for A and B, ``coverage``,
        ``median_set_size`` and ``n_flagged`` (suffixes ``_a``, ``_b``; empty where an audit lacks the level)
    flagged_added, flagged_removed, flagged_kept : doc ids on B's worklist only, on A's only, on both (each
        audit's worklist at its own flagging level)
    set_sizes : one row per (level of both, document of both): ``confidence``, ``doc_id``, ``set_size_a``,
        ``set_size_b``
    """

    a: int
    b: int
    levels: pd.DataFrame = field(repr=False)
    flagged_added: tuple[str, ...]
    flagged_removed: tuple[str, ...]
    flagged_kept: tuple[str, ...]
    set_sizes: pd.DataFrame = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        """The per-level table."""
        return self.levels.copy()

    def flagged_frame(self) -> pd.DataFrame:
        """``doc_id`` and ``change`` (``added``, ``removed``, ``kept``) of every document on either worklist."""
        rows = [(doc, change) for change, docs in (("added", self.flagged_added), ("removed", self.flagged_removed),
                                                   ("kept", self.flagged_kept)) for doc in docs]
        return pd.DataFrame(rows, columns=["doc_id", "change"])

    def changes_frame(self) -> pd.DataFrame:
        """Per level of both audits: the documents in both, and how many have a smaller, the same or a larger
        set in B than in A."""
        rows = []
        for confidence, group in self.set_sizes.groupby("confidence", sort=True):
            change = group["set_size_b"] - group["set_size_a"]
            rows.append({"confidence": confidence, "n_documents": len(group), "smaller_in_b": int((change < 0).sum()),
                         "unchanged": int((change == 0).sum()), "larger_in_b": int((change > 0).sum())})
        return pd.DataFrame(rows, columns=["confidence", "n_documents", "smaller_in_b", "unchanged", "larger_in_b"])

    def to_dict(self) -> dict:
        """The per-level table, the worklist changes, the set-size changes and every document's two set sizes."""
        levels = self.levels.astype(object).where(self.levels.notna(), None)
        sizes = {}
        for row in self.set_sizes.itertuples(index=False):
            sizes.setdefault(confidence_label(row.confidence), {})[row.doc_id] = [int(row.set_size_a),
                                                                                  int(row.set_size_b)]
        return {"a": self.a, "b": self.b, "levels": levels.to_dict(orient="records"),
                "flagged": {"added": list(self.flagged_added), "removed": list(self.flagged_removed),
                            "kept": list(self.flagged_kept)},
                "changes": self.changes_frame().to_dict(orient="records"), "set_sizes": sizes}


def release_difference(a: HistoryEntry, b: HistoryEntry) -> str | None:
    """What a comparison of A with B must say first when they audit different data: B redacted from A (or A from
    B), or documents or registry with other checksums (``None`` when both audit the same files)."""
    differ = [role for role in ("documents", "registry")
              if _short(a.checksums, role) and _short(b.checksums, role)
              and _short(a.checksums, role) != _short(b.checksums, role)]
    if not differ:
        return None
    for later, earlier in ((b, a), (a, b)):
        if (later.summary.get("redaction") or {}).get("from_audit") == earlier.id:
            return (f"Audit {later.id} certifies the release redacted from audit {earlier.id}: the documents differ, "
                    "so the two certify different releases; the set sizes of a document are compared across them.")
    named = " and ".join(f"{role} ({_short(a.checksums, role)} in audit {a.id}, {_short(b.checksums, role)} in audit "
                         f"{b.id})" for role in differ)
    return (f"Audits {a.id} and {b.id} certify different data: their {named} differ. Their figures are of two "
            "releases, not of one release under two configurations.")


def compare_audits(a: HistoryEntry, b: HistoryEntry) -> AuditComparison:
    """Compare audit A with audit B: per-level figures, worklist changes and per-document set sizes."""
    labels = sorted(set(a.set_sizes) | set(b.set_sizes) | set(a.summary.get("confidence", {}))
                    | set(b.summary.get("confidence", {})), key=exact_fraction)
    rows = []
    for label in labels:
        row = {"confidence": float(exact_fraction(label))}
        for suffix, entry in (("a", a), ("b", b)):
            level = entry.summary.get("confidence", {}).get(label, {})
            row.update({f"{name}_{suffix}": level.get(name) for name in COMPARED_METRICS})
        rows.append(row)
    columns = ["confidence"] + [f"{name}_{suffix}" for name in COMPARED_METRICS for suffix in ("a", "b")]
    levels = pd.DataFrame(rows, columns=columns)
    before, after = set(a.flagged), set(b.flagged)
    sizes = []
    for label in labels:
        sizes_a, sizes_b = a.set_sizes.get(label, {}), b.set_sizes.get(label, {})
        sizes.extend((float(exact_fraction(label)), doc, sizes_a[doc], sizes_b[doc]) for doc in sizes_a if doc in sizes_b)
    return AuditComparison(
        a.id, b.id, levels,
        flagged_added=tuple(doc for doc in b.flagged if doc not in before),
        flagged_removed=tuple(doc for doc in a.flagged if doc not in after),
        flagged_kept=tuple(doc for doc in b.flagged if doc in before),
        set_sizes=pd.DataFrame(sizes, columns=["confidence", "doc_id", "set_size_a", "set_size_b"]))
