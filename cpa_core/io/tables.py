"""The released documents and the profile registry, loaded and validated once, here, at the boundary.

Problems with the file as a whole (unreadable, undecodable, not a table, required column missing) raise
:class:`~cpa_core.common.errors.DataError` (reading and decoding: :mod:`cpa_core.io.reading`; which column holds
what: :mod:`cpa_core.io.columns`). Problems with single rows (missing or duplicate id, empty text, wrong type)
either raise (the default, ``on_invalid="error"``) or drop the row (``on_invalid="drop"``); dropped rows are listed
in the :class:`ValidationReport` with the reason. Rows are numbered from 1, the header excluded. The encoding is
recorded on the loaded table; checksums are of the raw bytes. A field longer than
:data:`~cpa_core.io.reading.MAX_FIELD_CHARS` characters (10 million) is such a row problem, in every format: its
row is refused (or dropped), naming the column and the field's length, never its text.

Documents whose identity is not in the registry are kept: the audit is open-world, and such
documents are counted as candidate misses. A blank ``identity_id`` marks a document whose subject is
unknown (unlabelled): it is certified, never used for calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from cpa_core.common.errors import ConfigError, DataError
from cpa_core.io.columns import DOCUMENT_COLUMNS, REGISTRY_ID, _apply_mapping
from cpa_core.io.reading import MAX_FIELD_CHARS, _read, short


@dataclass(frozen=True)
class Rejection:
    row: int
    column: str
    reason: str


@dataclass(frozen=True)
class ValidationReport:
    """What was read from a file, what was kept and what was rejected, and why."""

    file: str
    n_read: int
    n_kept: int
    rejected: tuple[Rejection, ...] = ()
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.rejected], columns=["row", "column", "reason"])

    def to_dict(self) -> dict:
        return {"file": self.file, "n_read": self.n_read, "n_kept": self.n_kept,
                "rejected": [r.__dict__ for r in self.rejected], "notes": list(self.notes)}


@dataclass(frozen=True)
class _Table:
    frame: pd.DataFrame
    file: str
    sha256: str  # of the raw bytes
    report: ValidationReport
    encoding: str = "utf-8"  # how the text was decoded ("utf-8", "latin-1", "cp1252", ...; Parquet: "utf-8")
    columns: Mapping[str, str] = field(default_factory=dict)  # the mapping read: {our name: the file's column}

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True)
class Documents(_Table):
    """Released documents: ``frame`` has columns doc_id, text, identity_id and optionally group."""

    @property
    def has_groups(self) -> bool:
        return "group" in self.frame.columns

    def texts(self) -> dict[str, str]:
        """The released texts by doc id (as text)."""
        return dict(zip(self.frame["doc_id"].astype(str), self.frame["text"].astype(str)))


@dataclass(frozen=True)
class Registry(_Table):
    """A profile registry: ``frame`` has an identity_id column and any profile fields."""

    @property
    def fields(self) -> list[str]:
        return [c for c in self.frame.columns if c != REGISTRY_ID]

    @property
    def ids(self) -> np.ndarray:
        return self.frame[REGISTRY_ID].to_numpy(dtype=object)


@dataclass
class _Checker:
    """Collects row rejections, or raises on the first one when ``strict``."""

    file: str
    strict: bool
    rejected: list[Rejection] = field(default_factory=list)

    def reject(self, row: int, column: str, problem: str, expected: str, found: str) -> None:
        if self.strict:
            raise DataError(self.file, problem, column=column, row=row, expected=expected, found=found)
        self.rejected.append(Rejection(row, column, f"{problem}; expected {expected}, found {found}"))


def _is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return value is pd.NA or value is pd.NaT


MISSING_MARKERS = frozenset({"nan", "none", "null", "na", "n/a", "<na>", "nat"})
"""Texts that mean "missing" (pandas and other tools write them): never an id."""


def _as_id(value) -> str | None:
    """An identifier: a non-empty text that is not a missing-value marker. Ids are compared as text, so a
    number (from JSONL or Parquet) is not one: 7 and "007" would silently differ."""
    if isinstance(value, str):
        value = value.strip()
        return value if value and value.lower() not in MISSING_MARKERS else None
    return None


def _describe(value) -> str:
    if _is_missing(value):
        return "an empty cell"
    if isinstance(value, str):
        if not value.strip():
            return "an empty string"
        return f"the missing-value marker '{value.strip()}'" if value.strip().lower() in MISSING_MARKERS else "text"
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return f"the number {value}"
    return f"a value of type {type(value).__name__}"


def _is_blank(value) -> bool:
    return _is_missing(value) or (isinstance(value, str) and not value.strip())


def _check_field_sizes(checker: _Checker, frame: pd.DataFrame, columns) -> set[int]:
    """The rows (from 1) with a text field of ``columns`` longer than :data:`MAX_FIELD_CHARS`, each rejected once
    (at its first such column); their other fields are not checked."""
    too_long: dict[int, tuple[str, int]] = {}
    for column in columns:
        values = frame[column].tolist()
        lengths = np.fromiter((len(v) if isinstance(v, str) else 0 for v in values), dtype=np.int64, count=len(values))
        for position in np.flatnonzero(lengths > MAX_FIELD_CHARS).tolist():
            too_long.setdefault(position + 1, (column, int(lengths[position])))
    for row in sorted(too_long):
        column, length = too_long[row]
        checker.reject(row, column, "field too long", f"at most {MAX_FIELD_CHARS:,} characters in a field",
                       f"{length:,} characters")
    return set(too_long)


def _validate_ids(checker: _Checker, frame: pd.DataFrame, column: str, unique: bool,
                  optional: bool = False, skip: set[int] = frozenset()) -> list[str | None]:
    """Each row's id as text; ``None`` for an invalid one (rejected) or, when ``optional``, a blank one. Rows in
    ``skip`` (already rejected) are ``None`` without a check."""
    ids: list[str | None] = []
    first_row: dict[str, int] = {}
    for row, value in enumerate(frame[column].tolist(), start=1):
        if row in skip:
            ids.append(None)
            continue
        ident = None if _is_missing(value) else _as_id(value)
        if ident is None and optional and _is_blank(value):
            ids.append(None)
            continue
        if ident is None:
            checker.reject(row, column, "invalid identifier",
                           "a non-empty text id (ids are compared as text: write numbers as text)", _describe(value))
        elif unique and ident in first_row:
            checker.reject(row, column, f"duplicate id '{short(ident)}'", "unique ids",
                           f"the same id in row {first_row[ident]}")
            ident = None
        elif unique:
            first_row[ident] = row
        ids.append(ident)
    return ids


def _check_mode(on_invalid: str) -> None:
    if on_invalid not in ("error", "drop"):
        raise ConfigError(f"unknown on_invalid mode '{on_invalid}'; expected 'error' or 'drop'")


def _validated(table: type, row_kind: str, kept: pd.DataFrame, n_read: int, checker: _Checker, read,
               columns: Mapping[str, str] | None):
    """The loaded table of the rows that passed validation, with its report; refused when none is left."""
    kept = kept.reset_index(drop=True).astype(object)
    if len(kept) == 0:
        raise DataError(checker.file, f"no valid {row_kind} remains after validation",
                        found=f"{len(checker.rejected)} rejected rows")
    report = ValidationReport(checker.file, n_read, len(kept), tuple(checker.rejected), read.notes)
    return table(kept, checker.file, read.sha256, report, read.encoding,
                 {ours: theirs for ours, theirs in (columns or {}).items() if ours != theirs})


def load_documents(source: str | Path | bytes, *, name: str | None = None, columns: Mapping[str, str] | None = None,
                   group_column: str | None = None, on_invalid: str = "error", fmt: str | None = None,
                   encoding: str = "utf-8") -> Documents:
    """Load released documents.

    Parameters
    ----------
    source : path or bytes
    name : display name of the file (defaults to the path)
    columns : ``{our_name: their_name}`` for doc_id, text, identity_id (and group)
    group_column : a column of the file holding the stratum (category, release mechanism); it
        becomes the ``group`` column. Without it, a column named ``group`` is used if present.
    on_invalid : ``"error"`` (raise on the first invalid row) or ``"drop"`` (drop and report it)
    encoding : how a CSV or JSONL file's text is encoded ("utf-8", "latin-1", "cp1252", ...); recorded
        on the result, with notes in its report when the bytes suggest another encoding
    """
    _check_mode(on_invalid)
    read = _read(source, name, fmt, encoding)
    frame, name = read.frame, name or str(source)
    mapping = dict(columns or {})
    if group_column and group_column != "group":  # a column already named 'group' needs no mapping
        mapping["group"] = group_column
    frame = _apply_mapping(name, frame, mapping, DOCUMENT_COLUMNS + (("group",) if group_column else ()))
    checker = _Checker(name, strict=(on_invalid == "error"))
    too_long = _check_field_sizes(checker, frame, [c for c in (*DOCUMENT_COLUMNS, "group") if c in frame.columns])
    doc_ids = _validate_ids(checker, frame, "doc_id", unique=True, skip=too_long)
    identity_ids = _validate_ids(checker, frame, "identity_id", unique=False, optional=True, skip=too_long)
    invalid_identity = [i is None and not _is_blank(v) for i, v in zip(identity_ids, frame["identity_id"].tolist())]
    keep = [d is not None and not bad and row not in too_long
            for row, (d, bad) in enumerate(zip(doc_ids, invalid_identity), start=1)]
    texts = frame["text"].tolist()
    for row, value in enumerate(texts, start=1):
        if not isinstance(value, str) or not value.strip():
            if keep[row - 1]:
                checker.reject(row, "text", "invalid document text", "non-empty text", _describe(value))
            keep[row - 1] = False
    out = pd.DataFrame({"doc_id": doc_ids, "text": texts, "identity_id": identity_ids}, dtype=object)
    if "group" in frame.columns:
        groups = frame["group"].tolist()
        for row, value in enumerate(groups, start=1):
            label = None if _is_missing(value) else (value.strip() if isinstance(value, str) else _as_id(value))
            if not label:
                if keep[row - 1]:
                    checker.reject(row, "group", "missing group", "a group label", _describe(value))
                keep[row - 1] = False
            groups[row - 1] = label
        out["group"] = groups
    return _validated(Documents, "document", out[np.array(keep, dtype=bool)], len(frame), checker, read, columns)


def load_registry(source: str | Path | bytes, *, name: str | None = None, columns: Mapping[str, str] | None = None,
                  on_invalid: str = "error", fmt: str | None = None, encoding: str = "utf-8") -> Registry:
    """Load a profile registry: an ``identity_id`` column (or its mapping) and any profile fields (the other
    parameters as for :func:`load_documents`)."""
    _check_mode(on_invalid)
    read = _read(source, name, fmt, encoding)
    frame, name = read.frame, name or str(source)
    frame = _apply_mapping(name, frame, columns, (REGISTRY_ID,))
    checker = _Checker(name, strict=(on_invalid == "error"))
    too_long = _check_field_sizes(checker, frame, list(frame.columns))
    ids = _validate_ids(checker, frame, REGISTRY_ID, unique=True, skip=too_long)
    keep = np.array([i is not None for i in ids], dtype=bool)
    out = frame.copy()
    out[REGISTRY_ID] = ids
    return _validated(Registry, "profile", out[keep], len(frame), checker, read, columns)


def registry_share(documents: Documents, registry: Registry) -> float:
    """Share of the labelled documents whose identity is in the registry (the others are candidate misses)."""
    known = set(registry.ids.tolist())
    labelled = [i for i in documents.frame["identity_id"] if i is not None]
    return float(np.mean([i in known for i in labelled])) if labelled else 1.0


def _canonical(ident: str) -> str:
    """An id without case, spaces and leading zeros: two ids equal here but different as text mean the same."""
    text = "".join(ident.split()).lower()
    return text.lstrip("0") or "0"


def check_release(documents: Documents, registry: Registry) -> float:
    """The share of the documents' subjects in the registry; an error when it is none of them."""
    share = registry_share(documents, registry)
    known = set(registry.ids.tolist())
    absent = {i for i in documents.frame["identity_id"] if i is not None and i not in known}
    canonical = {_canonical(i): i for i in known}
    near = [(i, canonical[_canonical(i)]) for i in sorted(absent) if _canonical(i) in canonical]
    if near:
        ours, theirs = near[0]
        raise DataError(documents.file, f"{len(near)} identity ids differ from registry ids only in leading zeros, "
                        "case or spaces, so they would never match", column="identity_id",
                        expected=f"the ids exactly as {registry.file} writes them",
                        found=f"'{short(ours)}' here and '{short(theirs)}' in the registry")
    if share == 0:
        examples = [short(ident) for ident in documents.frame["identity_id"].dropna().head(3)]
        raise DataError(documents.file, "no document's identity is in the registry", column="identity_id",
                        expected=f"identity ids that appear in the column '{REGISTRY_ID}' of {registry.file}",
                        found=f"{len(documents):,} documents whose ids (e.g. {', '.join(map(repr, examples))}) are "
                              "all absent from it")
    return share
