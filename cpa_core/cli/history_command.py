"""The command line of the audit history: ``cpa audit --history/--no-history`` and ``cpa history``.

::

    cpa history list [--history FILE] [--json]
    cpa history show ID [--history FILE] [--json]
    cpa history compare ID_A ID_B [--history FILE] [--json]
    cpa history prune [ID ...] [--before DATE] [--keep N] [--dry-run] [--history FILE] [--json]

What is printed is ids, checksums, file names and figures, never document text. Errors raise
:class:`~cpa_core.common.errors.HistoryError`, which ``cpa`` prints as one line with exit status 2: among them a
history that fails SQLite's integrity check, refused by every action and by ``cpa audit`` before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from cpa_core.common.errors import CPAError
from cpa_core.report.formatting import counted
from cpa_core.store.history import (
    DEFAULT_PATH,
    ENV_VAR,
    SHORT_SHA,
    AuditComparison,
    HistoryEntry,
    PruneReport,
    check_history,
    compare_audits,
    history_path,
    list_audits,
    load_audit,
    orphan_files,
    prune_history,
    record_audit,
    snapshot_folder,
)
from cpa_core.store.snapshot import json_default

SHOWN_IDS = 20  # doc ids listed in text output; --json lists all
LIST_SHOWN = ("id", "created_at", "source", "config_id", "knowledge", "attacker", "documents_sha256", "n_flagged",
              "median_set_size")
LEVEL_SHOWN = ("coverage", "median_set_size", "n_flagged", "threshold")
DEFAULT_LOCATION = f"default: ${ENV_VAR} when set, else {DEFAULT_PATH}"


def _say(text: str) -> None:
    print(f"cpa: {text}", file=sys.stderr)


def _file(args) -> Path | None:
    return Path(args.history) if args.history is not None else None


def add_audit_history_options(parser: argparse.ArgumentParser) -> None:
    """``--history FILE`` and ``--no-history`` on ``cpa audit``."""
    group = parser.add_argument_group("audit history")
    group.add_argument("--history", metavar="FILE", help=f"record the run in this audit history file ({DEFAULT_LOCATION})")
    group.add_argument("--no-history", action="store_true", help="do not record the run in the audit history")


def _moment(text: str) -> datetime:
    """``--before``: a date or an ISO 8601 time, UTC unless it says its zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD or an ISO 8601 time, found {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _count(text: str) -> int:
    """``--keep``: an integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer of at least 0, found {text!r}")
    return value


PRUNE_TEXT = ("remove audits (by ID, recorded before a date, or all but the newest N) with their snapshots, and "
              "always the orphan files of the snapshot folder: snapshots no audit refers to and temporaries, left "
              "by recordings interrupted before they committed; says what it removed (files and bytes). With no "
              "ID, --before or --keep, only the orphan files are removed.")


def add_history_command(commands) -> None:
    """The ``cpa history`` subcommand and its actions."""
    text = "past audits (every 'cpa audit' run and dashboard calibration): list, show one, compare two, prune"
    history = commands.add_parser("history", help=text, description=text)
    actions = history.add_subparsers(dest="action", required=True, metavar="ACTION")
    specs = {"list": "every recorded audit, oldest first",
             "show": "one audit: configuration, input checksums, figures per level, worklist",
             "compare": "two audits: figures per level, flagged documents added and removed, set-size changes",
             "prune": PRUNE_TEXT}
    for name, description in specs.items():
        short = "remove audits with their snapshots, and orphan snapshot files" if name == "prune" else description
        action = actions.add_parser(name, help=short, description=description)
        if name == "show":
            action.add_argument("id", type=int, metavar="ID", help="the audit's id (see 'cpa history list')")
        if name == "compare":
            action.add_argument("a", type=int, metavar="ID_A", help="audit A (the reference)")
            action.add_argument("b", type=int, metavar="ID_B", help="audit B (compared with A)")
        if name == "prune":
            action.add_argument("ids", type=int, nargs="*", metavar="ID",
                                help="remove these audits (see 'cpa history list'), whatever --before and --keep say")
            action.add_argument("--before", type=_moment, metavar="DATE",
                                help="remove the audits recorded before DATE (YYYY-MM-DD or an ISO 8601 time; UTC "
                                     "unless it says its zone)")
            action.add_argument("--keep", type=_count, metavar="N",
                                help="remove every audit but the newest N; with --before, keep the newest N "
                                     "whatever their date")
            action.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
        action.add_argument("--history", metavar="FILE", help=f"the audit history file ({DEFAULT_LOCATION})")
        action.add_argument("--json", action="store_true", help="machine-readable output (JSON)")


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return counted(n, "byte")


def history_paths(args) -> dict[str, Path]:
    """What recording the audit writes, by what it is (none with ``--no-history``): the history file, its SQLite
    companions and its snapshot folder. An output folder may hold none of them."""
    if args.no_history:
        return {}
    file = _file(args) or history_path()
    return {"the audit history": file, "the audit history's snapshot folder": snapshot_folder(file)}


def _folders(files) -> str:
    """The folders of some files, as one text."""
    return " and ".join(sorted({str(Path(path).parent) for path in files}))


def check_audit_history(args) -> None:
    """Before an audit: the history it will be recorded in can be written and is intact (unless ``--no-history``);
    orphan files of its snapshot folder are pointed out (``cpa history prune`` removes them)."""
    if args.no_history:
        return
    file = check_history(_file(args))
    orphans, size = orphan_files(file)
    if orphans:
        _say(f"note: {counted(len(orphans), 'file')} ({_bytes(size)}) in {_folders(orphans)} belong to no recorded "
             f"audit (recordings interrupted before they committed); 'cpa history prune --history {file}' removes "
             "them")


def record_cli_audit(args, result, out_dir=None) -> None:
    """After an audit has written its folder (``out_dir``, default ``--out``): record it; a failure is a warning (the
    folder is complete)."""
    if args.no_history:
        return
    file = _file(args) or history_path()
    try:
        audit_id = record_audit(result, source="cli", out_dir=out_dir or args.out, path=file)
    except CPAError as error:
        _say(f"warning: the audit was not recorded in the history: {error}")
        return
    attacker = result.inputs.get("panel", {}).get("attacker")
    _say(f"recorded{f' {attacker} of the panel' if attacker else ''} as audit {audit_id} in {file}")


def _print_json(value) -> None:
    print(json.dumps(value, indent=2, default=json_default))


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")


def _table(frame: pd.DataFrame) -> str:
    return frame.astype(object).where(frame.notna(), "–").to_string(index=False)


def _ids(ids, sizes: dict[str, int] | None = None) -> str:
    shown = [f"{doc} ({sizes[doc]})" if sizes and doc in sizes else str(doc) for doc in ids[:SHOWN_IDS]]
    more = len(ids) - SHOWN_IDS
    return ", ".join(shown) + (f" and {more} more (--json lists all)" if more > 0 else "")


def _input(entry: HistoryEntry, role: str) -> str:
    facts = entry.checksums.get(role)
    if not facts:
        return "–"
    return f"{facts.get('file')} ({facts.get('rows')} rows, sha256 {str(facts.get('sha256'))[:SHORT_SHA]}…)"


def _heading(entry: HistoryEntry) -> str:
    return (f"audit {entry.id}: {entry.knowledge}, {entry.attacker}, configuration {entry.config_id}, "
            f"recorded {entry.created_at} ({entry.source})")


def show(entry: HistoryEntry) -> str:
    """The text of ``cpa history show``."""
    levels = pd.DataFrame([{"confidence": label, **{k: entry.summary["confidence"][label].get(k) for k in LEVEL_SHOWN}}
                           for label in entry.summary.get("confidence", {})])
    versions = ", ".join(f"{name} {entry.versions[name]}" for name in ("cpa-core", "python") if name in entry.versions)
    worklist = (f"worklist at {entry.flag_confidence} ({entry.policy.rule}): {len(entry.flagged)} documents, "
                "smallest set first"
                + (f": {_ids(entry.flagged, entry.set_sizes.get(entry.flag_confidence))}" if entry.flagged else ""))
    lines = [_heading(entry),
             (f"  protocol   {entry.summary.get('protocol')}, score {entry.summary.get('score')}, "
              f"miss policy {entry.summary.get('miss_policy')}"),
             f"  documents  {_input(entry, 'documents')}",
             f"  registry   {_input(entry, 'registry')}",
             f"  records    {entry.out_dir or '–'}",
             f"  snapshot   {entry.snapshot or 'none'}",
             f"  versions   {versions}",
             "", _table(levels), "", worklist]
    return "\n".join(lines)


def compare(a: HistoryEntry, b: HistoryEntry, comparison: AuditComparison) -> str:
    """The text of ``cpa history compare``."""
    lines = [f"A = {_heading(a)}", f"B = {_heading(b)}", "", _table(comparison.to_frame()), "",
             (f"worklist (A at {a.flag_confidence}, B at {b.flag_confidence}): {len(comparison.flagged_added)} "
              f"added, {len(comparison.flagged_removed)} removed, {len(comparison.flagged_kept)} kept")]
    if comparison.flagged_added:
        lines.append(f"  added: {_ids(comparison.flagged_added)}")
    if comparison.flagged_removed:
        lines.append(f"  removed: {_ids(comparison.flagged_removed)}")
    changes = comparison.changes_frame()
    if len(changes):
        lines += ["", "set sizes of the documents in both audits:", _table(changes)]
    return "\n".join(lines)


def pruned(report: PruneReport) -> list[str]:
    """The lines of ``cpa history prune``: the audits and the orphan files removed, their counts and bytes."""
    verb = "would remove" if report.dry_run else "removed"
    lines = []
    if report.audits:
        lines.append(f"{verb} {counted(len(report.audits), 'audit')} ({_ids(report.audits)}) from {report.file} "
                     f"and {counted(len(report.snapshots), 'snapshot')} ({_bytes(report.snapshot_bytes)})")
    if report.orphans:
        partial = sum(path.suffix == ".part" for path in report.orphans)
        kinds = " and ".join(text for n, text in ((len(report.orphans) - partial, counted(len(report.orphans) - partial,
                                                                                            "orphan snapshot")),
                                                  (partial, counted(partial, "temporary file"))) if n)
        lines.append(f"{verb} {kinds} ({_bytes(report.orphan_bytes)}) from {_folders(report.orphans)}: no audit "
                     "refers to them (recordings interrupted before they committed)")
    return lines or [f"nothing to remove in {report.file}: no audit chosen, no orphan file"]


def cmd_history(args) -> int:
    file = _file(args)
    if args.action == "prune":
        report = prune_history(file, ids=args.ids, before=args.before, keep=args.keep, dry_run=args.dry_run)
        if args.json:
            _print_json(report.to_dict())
        else:
            for line in pruned(report):
                _say(line)
        return 0
    check_history(file, create=False)  # a damaged history is said in one line, whatever is read of it
    if args.action == "list":
        frame = list_audits(file)
        if args.json:
            _print_json(_records(frame))
        elif frame.empty:
            _say(f"no audit recorded in {file or history_path()}")
        else:
            print(_table(frame[list(LIST_SHOWN)]))
            for row in frame[frame["unreadable"].notna()].itertuples():
                _say(f"audit {row.id} cannot be read ({row.unreadable}); 'cpa history prune {row.id}' removes it")
    elif args.action == "show":
        entry = load_audit(args.id, file)
        if args.json:
            _print_json(entry.to_dict())
        else:
            print(show(entry))
    else:
        a, b = load_audit(args.a, file), load_audit(args.b, file)
        comparison = compare_audits(a, b)
        if args.json:
            _print_json(comparison.to_dict())
        else:
            print(compare(a, b, comparison))
    return 0
