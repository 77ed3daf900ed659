"""A stored audit result, rebuilt later without attacking again.

A snapshot holds what the attack produced (each split's :class:`~cpa_core.attack.candidates.CandidateTable`, the
true identities and groups) and the declared :class:`~cpa_core.audit.configuration.AuditConfig`; everything derived from
them (scores, truth positions and ranks, the calibration) is recomputed by the functions :func:`run_audit`
uses, so a rebuilt result certifies, and summarises, exactly as the original did.

It is one ``.npz`` file read with ``allow_pickle=False``: the numeric arrays as they are, the ids, texts
and configuration as one JSON member. Nothing in it is ever unpickled, and :func:`read_snapshot` checks its
SHA-256 against the one recorded at write time before it parses anything.

The file holds the query each document was attacked with, that is the released text (with LLM clues when
the knowledge level adds them): it is written owner-only (mode 600), atomically (a crash leaves no
half-written snapshot under its name: at most a ``.snapshot-*.part`` temporary, which ``cpa history prune``
removes), and must be handled like the release itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import asdict, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from cpa_core.attack.candidates import CandidateTable
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.results import AuditResult, ScoredSplit, score_table
from cpa_core.common.errors import HistoryError
from cpa_core.conformal.calibration import calibrate
from cpa_core.io.knowledge import KnowledgeLevel

FORMAT = 1
META = "meta"  # the JSON member: format, configuration, inputs and each split's ids, texts and labels
SPLITS = {"test": "test_split", "calibration": "calibration_split"}  # test first: calibration rows may be its rows
ARRAYS = ("candidates", "weights", "pool_sizes", "tail_mass", "cut_ties", "cut_below")  # CandidateTable's numeric fields
SUFFIX = ".npz"  # a snapshot's name: a unique stem and this suffix
PARTIAL = (".snapshot-", ".part")  # a snapshot being written is named with this prefix and suffix until it is whole


def json_default(value):
    """What ``json`` cannot write by itself (its ``default``): numpy scalars, exact fractions, sets, anything
    else as its text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


def _ids(values) -> list:
    """Ids, labels or texts as JSON values (numpy scalars become Python ones; ``None`` stays)."""
    return [None if v is None else v.item() if isinstance(v, np.generic) else v for v in np.asarray(values, dtype=object)]


def _same_rows(part: ScoredSplit, whole: ScoredSplit) -> np.ndarray | None:
    """The rows of ``whole`` that ``part`` consists of, when it does (under the release protocol the calibration
    documents are audited documents too: their rows are stored once), else ``None``."""
    position = {doc: row for row, doc in enumerate(whole.table.doc_ids.tolist())}
    index = np.array([position.get(doc, -1) for doc in part.table.doc_ids.tolist()], dtype=np.int64)
    if (index < 0).any():
        same = False
    elif not part.with_candidates:  # the documents' own facts: those of their rows
        same = all(np.array_equal(getattr(part, field), getattr(whole, field)[index])
                   for field in ("truth_positions", "truth_scores", "truth_ranks"))
    else:
        ours, theirs = part.table, whole.table.rows(index)
        same = ours.weight_kind == theirs.weight_kind and np.array_equal(ours.candidate_ids, theirs.candidate_ids)
        same = same and all(np.array_equal(getattr(ours, field), getattr(theirs, field))
                            for field in ("candidates", "weights", "pool_sizes"))
        same = same and ours.queries == theirs.queries and ours.clues == theirs.clues and \
            (ours.tail_mass is None) == (theirs.tail_mass is None) and \
            (ours.tail_mass is None or np.array_equal(ours.tail_mass, theirs.tail_mass)) and \
            (ours.cut_ties is None) == (theirs.cut_ties is None) and \
            (ours.cut_ties is None or np.array_equal(ours.cut_ties, theirs.cut_ties)) and \
            (ours.cut_below is None) == (theirs.cut_below is None) and \
            (ours.cut_below is None or np.array_equal(ours.cut_below, theirs.cut_below))
    if not same and not part.with_candidates:
        raise ValueError("a split without its candidates is stored only as rows of the audited split")
    return index if same else None


def snapshot_arrays(result: AuditResult) -> dict[str, np.ndarray]:
    """The members of the snapshot of ``result``: the numeric arrays as they are (not copied), and the JSON."""
    arrays: dict[str, np.ndarray] = {}
    splits = {}
    for name, attribute in SPLITS.items():
        split: ScoredSplit = getattr(result, attribute)
        table = split.table
        labels = {"truth_ids": _ids(split.truth_ids), "groups": None if split.groups is None else _ids(split.groups),
                  "strata": None if split.strata is None else _ids(split.strata)}
        rows = None if name == "test" else _same_rows(split, result.test_split)
        if rows is not None:
            arrays[f"{name}.rows"] = rows
            splits[name] = {"rows_of": "test", **labels}
            continue
        for field in ARRAYS:
            value = getattr(table, field)
            if value is not None:
                arrays[f"{name}.{field}"] = np.asarray(value)
        splits[name] = {"doc_ids": _ids(table.doc_ids), "candidate_ids": _ids(table.candidate_ids),
                        "queries": None if table.queries is None else list(table.queries),
                        "clues": None if table.clues is None else [list(c) for c in table.clues],
                        "weight_kind": table.weight_kind, **labels}
    meta = {"format": FORMAT, "config": asdict(result.config), "inputs": result.inputs, "splits": splits}
    text = json.dumps(meta, default=json_default, ensure_ascii=False)
    arrays[META] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    return arrays


def file_sha256(stream) -> str:
    """SHA-256 of an open binary file, read from its start in blocks (never the whole file in memory)."""
    stream.seek(0)
    return hashlib.file_digest(stream, "sha256").hexdigest()


def folder_error(folder: Path, error: OSError) -> HistoryError:
    """The one message for a snapshot folder that cannot be written: the folder, the system's reason (a full disk,
    a permission denied), and what was expected."""
    return HistoryError(f"audit snapshot folder {folder}: cannot be written ({error.strerror or error}); "
                        "expected a writable folder, with free space, next to the audit history")


def prepare_folder(folder: str | Path) -> Path:
    """The snapshot folder, created owner-only (700) if needed; a folder that cannot be made raises
    :class:`~cpa_core.common.errors.HistoryError` naming it."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as error:
        raise folder_error(folder, error) from None
    return folder


def write_snapshot(result: AuditResult, folder: str | Path) -> tuple[Path, str]:
    """Write the snapshot of ``result`` into ``folder`` (created owner-only) under a new unique name.

    Returns
    -------
    (path, sha256) : the file written (mode 600) and the SHA-256 of its bytes
    """
    folder = prepare_folder(folder)
    arrays = snapshot_arrays(result)
    try:
        handle, temporary = tempfile.mkstemp(prefix=PARTIAL[0], suffix=PARTIAL[1], dir=folder)  # mode 600
        try:
            with os.fdopen(handle, "w+b") as stream:
                np.savez(stream, **arrays)  # written straight to the file: no copy of the arrays in memory
                stream.flush()
                os.fsync(stream.fileno())
                sha256 = file_sha256(stream)
            final = folder / f"{Path(temporary).stem.removeprefix(PARTIAL[0])}{SUFFIX}"
            os.replace(temporary, final)  # the name appears only once the file is whole
        except BaseException:
            with contextlib.suppress(OSError):  # the first error is the one to say; a file left is an orphan
                Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise folder_error(folder, error) from None
    return final, sha256


def read_snapshot(path: str | Path, sha256: str) -> AuditResult:
    """The audit result stored in the snapshot ``path``, after checking its bytes against ``sha256``.

    Raises :class:`~cpa_core.common.errors.HistoryError` naming the file when it is missing, has changed since it
    was written, or is not a snapshot of this format.
    """
    path = Path(path)
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        raise HistoryError(f"audit snapshot {path}: not found; expected the file written when the audit was "
                           "recorded (its summary is still in the history)") from None
    except OSError as error:
        raise HistoryError(f"audit snapshot {path}: cannot be read ({error.strerror or error})") from None
    with stream:
        try:
            found = file_sha256(stream)
        except OSError as error:
            raise HistoryError(f"audit snapshot {path}: cannot be read ({error.strerror or error})") from None
        if found != sha256:
            raise HistoryError(f"audit snapshot {path}: changed since it was recorded; expected SHA-256 "
                               f"{sha256[:12]}…, found {found[:12]}… (its summary is still in the history)")
        try:
            stream.seek(0)  # parsed from the same open file whose bytes were just checked
            with np.load(stream, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
            meta = json.loads(arrays.pop(META).tobytes().decode("utf-8"))
            if meta.get("format") != FORMAT:
                raise ValueError(f"format {meta.get('format')!r}")
            return _result(meta, arrays)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
            raise HistoryError(f"audit snapshot {path}: not a readable snapshot of format {FORMAT} ({error})") from None


def _config(stored: dict) -> AuditConfig:
    knowledge = stored.pop("knowledge")
    attacker = stored.pop("attacker")
    return AuditConfig(knowledge=KnowledgeLevel(**{**knowledge, "fields": tuple(knowledge["fields"])}),
                       attacker=AttackerConfig(**attacker), **{**stored, "confidences": tuple(stored["confidences"])})


def _table(name: str, stored: dict, arrays: dict) -> CandidateTable:
    return CandidateTable(np.array(stored["doc_ids"], dtype=object), arrays[f"{name}.candidates"],
                           arrays[f"{name}.weights"], arrays[f"{name}.pool_sizes"],
                           np.array(stored["candidate_ids"], dtype=object),
                           None if stored["queries"] is None else tuple(stored["queries"]), stored["weight_kind"],
                           arrays.get(f"{name}.tail_mass"),
                           None if stored.get("clues") is None else tuple(tuple(c) for c in stored["clues"]),
                           arrays.get(f"{name}.cut_ties"), arrays.get(f"{name}.cut_below"))


def _split(name: str, stored: dict, arrays: dict, config: AuditConfig, splits: dict) -> ScoredSplit:
    rows_of = stored.get("rows_of")
    if rows_of:  # documents of another split (the release protocol's calibration documents): their facts, as there
        splits[name] = splits[rows_of].documents(arrays[f"{name}.rows"])
    else:
        groups = None if stored["groups"] is None else np.array(stored["groups"], dtype=object)
        # the stored table is already cut to top_k: scoring it again is what run_audit did after the attack
        split = score_table(_table(name, stored, arrays), np.array(stored["truth_ids"], dtype=object), groups, config)
        if stored.get("strata") is not None:
            split = replace(split, strata=np.array(stored["strata"], dtype=object))
        splits[name] = split
    return splits[name]


def _result(meta: dict, arrays: dict) -> AuditResult:
    config = _config(dict(meta["config"]))
    splits: dict[str, ScoredSplit] = {}
    test_split, calibration_split = (_split(name, meta["splits"][name], arrays, config, splits) for name in SPLITS)
    scores, strata = calibration_split.calibration_scores(config.miss_policy)
    return AuditResult(config, calibration_split, test_split, calibrate(scores, config.confidences, strata),
                       meta["inputs"])
