"""Loading and validating released documents and profile registries.

Validation happens once, here, at the boundary. Problems with the file as a whole (unreadable,
undecodable, not a table, required column missing) raise :class:`~cpa_core.errors.DataError`.
Problems with single rows (missing or duplicate id, empty text, wrong type) either raise (the
default, ``on_invalid="error"``) or drop the row (``on_invalid="drop"``); dropped rows are listed in
the :class:`ValidationReport` with the reason. Rows are numbered from 1, the header excluded.

Documents whose identity is not in the registry are kept: the audit is open-world, and such
documents are counted as candidate misses. A blank ``identity_id`` marks a document whose subject is
unknown (unlabelled): it is certified, never used for calibration.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import ConfigError, DataError

DOCUMENT_COLUMNS = ("doc_id", "text", "identity_id")
OPTIONAL_DOCUMENT_COLUMNS = ("group",)
REGISTRY_ID = "identity_id"
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


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
    sha256: str
    report: ValidationReport

    def __len__(self) -> int:
        return len(self.frame)


@dataclass(frozen=True)
class Documents(_Table):
    """Released documents: ``frame`` has columns doc_id, text, identity_id and optionally group."""

    @property
    def has_groups(self) -> bool:
        return "group" in self.frame.columns


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


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _format_of(name: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in set(FORMATS.values()):
            raise DataError(name, "unknown format", expected="csv, jsonl or parquet", found=repr(fmt))
        return fmt
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(name, "unsupported file type", expected="a .csv, .jsonl or .parquet file",
                        found=f"'{suffix or 'no extension'}'")
    return FORMATS[suffix]


def _decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataError(name, f"text is not valid UTF-8 (line {line}, byte {error.start})",
                        expected="UTF-8 encoded text", found=f"byte 0x{data[error.start]:02x}") from None


def read_table(source: str | Path | bytes, name: str | None = None, fmt: str | None = None) -> tuple[pd.DataFrame, str]:
    """Read a CSV, JSONL or Parquet table from a path or from bytes (an upload).

    Returns the frame and the SHA-256 of the raw bytes. Cells keep their types (JSONL, Parquet) or
    are strings (CSV); missing values are ``None``/NaN.
    """
    if isinstance(source, (bytes, bytearray)):
        data, name = bytes(source), name or "<upload>"
    else:
        path = Path(source)
        name = name or str(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise DataError(name, "file not found") from None
        except IsADirectoryError:
            raise DataError(name, "is a directory", expected="a file") from None
        except OSError as error:
            raise DataError(name, f"cannot be read ({error.strerror})") from None
    kind = _format_of(name, fmt)
    if not data.strip():
        raise DataError(name, "the file is empty", expected="a header and at least one row", found="no content")
    if kind == "parquet":
        try:
            frame = pd.read_parquet(io.BytesIO(data))
        except Exception as error:  # pyarrow raises many types for a corrupt file
            raise DataError(name, "not a readable Parquet file", found=type(error).__name__) from None
    elif kind == "jsonl":
        frame = _read_jsonl(name, _decode(name, data))
    else:
        text = _decode(name, data)
        header = next(csv.reader(io.StringIO(text)), [])
        repeated = [column for i, column in enumerate(header) if column in header[:i]]
        if repeated:
            raise DataError(name, f"column '{short(repeated[0])}' appears more than once in the header",
                            expected="unique column names", found=f"{header.count(repeated[0])} columns of that name")
        try:
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
        except pd.errors.ParserError as error:
            raise DataError(name, f"not a well-formed CSV table ({str(error).strip()})") from None
        except pd.errors.EmptyDataError:
            raise DataError(name, "the file is empty", expected="a header and at least one row",
                            found="no columns") from None
        if not isinstance(frame.index, pd.RangeIndex):  # pandas took surplus fields as an index
            raise DataError(name, "not a well-formed CSV table (rows have more fields than the header)",
                            expected=f"{len(frame.columns)} fields per row, as in the header",
                            found=f"{len(frame.columns) + frame.index.nlevels} fields")
    frame.columns = [str(c) for c in frame.columns]
    if len(frame) == 0:
        raise DataError(name, "the table has no rows", expected="at least one row", found="only a header")
    return frame, sha256_of(data)


def _read_jsonl(name: str, text: str) -> pd.DataFrame:
    records = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(name, f"line {line_no} is not valid JSON ({error.msg})",
                            expected="one JSON object per line") from None
        if not isinstance(record, dict):
            raise DataError(name, f"line {line_no} is not a JSON object", expected="one JSON object per line",
                            found=type(record).__name__)
        records.append(record)
    return pd.DataFrame.from_records(records)


def _apply_mapping(name: str, frame: pd.DataFrame, mapping: Mapping[str, str] | None,
                   required: Sequence[str]) -> pd.DataFrame:
    """Rename user columns to ours: ``mapping`` is ``{our_name: their_name}``."""
    if mapping:
        for ours, theirs in mapping.items():
            if theirs not in frame.columns:
                raise DataError(name, f"mapped column '{theirs}' (for '{ours}') is missing", column=theirs,
                                expected=f"one of the columns {list(frame.columns)}", found="no such column")
        # a column already named like a mapping target is replaced by the mapped one
        shadowed = [ours for ours, theirs in mapping.items()
                    if ours != theirs and ours in frame.columns and ours not in mapping.values()]
        frame = frame.drop(columns=shadowed).rename(columns={theirs: ours for ours, theirs in mapping.items()})
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(name, f"required column '{missing[0]}' is missing", column=missing[0],
                        expected=f"columns {list(required)} (or a column mapping)",
                        found=f"columns {list(frame.columns)}")
    return frame


def _is_missing(value) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return value is pd.NA or value is pd.NaT


MISSING_MARKERS = frozenset({"nan", "none", "null", "na", "n/a", "<na>", "nat"})
"""Texts that mean "missing" (pandas and other tools write them): never an id."""
ID_SHOWN = 40
"""Ids quoted in messages are cut to this many characters (a long "id" may be document text)."""


def _as_id(value) -> str | None:
    """An identifier: a non-empty text that is not a missing-value marker. Ids are compared as text, so a
    number (from JSONL or Parquet) is not one: 7 and "007" would silently differ."""
    if isinstance(value, str):
        value = value.strip()
        return value if value and value.lower() not in MISSING_MARKERS else None
    return None


def short(text) -> str:
    """A value quoted in a message, cut to :data:`ID_SHOWN` characters."""
    text = str(text)
    return text if len(text) <= ID_SHOWN else text[:ID_SHOWN] + "…"


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


def _validate_ids(checker: _Checker, frame: pd.DataFrame, column: str, unique: bool,
                  optional: bool = False) -> list[str | None]:
    """Each row's id as text; ``None`` for an invalid one (rejected) or, when ``optional``, a blank one."""
    ids: list[str | None] = []
    first_row: dict[str, int] = {}
    for row, value in enumerate(frame[column].tolist(), start=1):
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


def load_documents(source: str | Path | bytes, *, name: str | None = None, columns: Mapping[str, str] | None = None,
                   group_column: str | None = None, on_invalid: str = "error", fmt: str | None = None) -> Documents:
    """Load released documents.

    Parameters
    ----------
    source : path or bytes
    name : display name of the file (defaults to the path)
    columns : ``{our_name: their_name}`` for doc_id, text, identity_id (and group)
    group_column : a column of the file holding the stratum (category, release mechanism); it
        becomes the ``group`` column. Without it, a column named ``group`` is used if present.
    on_invalid : ``"error"`` (raise on the first invalid row) or ``"drop"`` (drop and report it)
    """
    _check_mode(on_invalid)
    frame, digest = read_table(source, name, fmt)
    name = name or str(source)
    mapping = dict(columns or {})
    if group_column and group_column != "group":  # a column already named 'group' needs no mapping
        mapping["group"] = group_column
    frame = _apply_mapping(name, frame, mapping, DOCUMENT_COLUMNS + (("group",) if group_column else ()))
    checker = _Checker(name, strict=(on_invalid == "error"))
    doc_ids = _validate_ids(checker, frame, "doc_id", unique=True)
    identity_ids = _validate_ids(checker, frame, "identity_id", unique=False, optional=True)
    invalid_identity = [i is None and not _is_blank(v) for i, v in zip(identity_ids, frame["identity_id"].tolist())]
    keep = [d is not None and not bad for d, bad in zip(doc_ids, invalid_identity)]
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
    out = out[np.array(keep, dtype=bool)].reset_index(drop=True).astype(object)
    if len(out) == 0:
        raise DataError(name, "no valid document remains after validation",
                        found=f"{len(checker.rejected)} rejected rows")
    report = ValidationReport(name, len(frame), len(out), tuple(checker.rejected))
    return Documents(out, name, digest, report)


def load_registry(source: str | Path | bytes, *, name: str | None = None, columns: Mapping[str, str] | None = None,
                  on_invalid: str = "error", fmt: str | None = None) -> Registry:
    """Load a profile registry: an ``identity_id`` column (or its mapping) and any profile fields."""
    _check_mode(on_invalid)
    frame, digest = read_table(source, name, fmt)
    name = name or str(source)
    frame = _apply_mapping(name, frame, columns, (REGISTRY_ID,))
    checker = _Checker(name, strict=(on_invalid == "error"))
    ids = _validate_ids(checker, frame, REGISTRY_ID, unique=True)
    keep = np.array([i is not None for i in ids], dtype=bool)
    out = frame.copy()
    out[REGISTRY_ID] = ids
    out = out[keep].reset_index(drop=True).astype(object)
    if len(out) == 0:
        raise DataError(name, "no valid profile remains after validation",
                        found=f"{len(checker.rejected)} rejected rows")
    report = ValidationReport(name, len(frame), len(out), tuple(checker.rejected))
    return Registry(out, name, digest, report)


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
