"""Loading and validating released documents and profile registries.

Validation happens once, here, at the boundary. Problems with the file as a whole (unreadable,
undecodable, not a table, required column missing) raise :class:`~cpa_core.errors.DataError`.
Problems with single rows (missing or duplicate id, empty text, wrong type) either raise (the
default, ``on_invalid="error"``) or drop the row (``on_invalid="drop"``); dropped rows are listed in
the :class:`ValidationReport` with the reason. Rows are numbered from 1, the header excluded.

Text files (CSV, JSONL) are decoded with a declared ``encoding`` (UTF-8 by default, a byte-order mark
accepted); a file that does not decode is refused with the byte, line and row where it fails, never
read with replaced characters. The encoding is recorded on the loaded table; checksums are of the raw
bytes. Parquet stores its text as UTF-8 and ignores the option.

:func:`guess_columns` proposes a column mapping from the file's column names (for a form to show, never
applied silently).

Documents whose identity is not in the registry are kept: the audit is open-world, and such
documents are counted as candidate misses. A blank ``identity_id`` marks a document whose subject is
unknown (unlabelled): it is certified, never used for calibration.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import math
import re
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
ENCODINGS = {"utf-8": "UTF-8", "latin-1": "Latin-1 (ISO-8859-1)", "cp1252": "Windows-1252"}
"""The usual encodings of text files, by the name recorded on loaded tables (any Python text codec is accepted)."""
ENCODING_HINT = "if the file is in another encoding, declare it, e.g. latin-1 or cp1252"

DOCUMENT_SYNONYMS = {
    "doc_id": ("doc_id", "doc", "document", "document_id", "docid", "id", "note_id", "record_id", "report_id",
               "text_id", "message_id", "post_id"),
    "text": ("text", "body", "note", "content", "document_text", "released_text", "release_text", "anon_text",
             "anonymised_text", "anonymized_text", "redacted_text", "deidentified_text", "masked_text", "clean_text",
             "narrative", "message", "report"),
    "identity_id": ("identity_id", "identity", "subject", "subject_id", "person", "person_id", "patient",
                    "patient_id", "individual", "individual_id", "author", "author_id", "user_id", "pid", "label",
                    "profile_id"),
    "group": ("group", "mechanism", "release_mechanism", "release", "source", "split", "stratum"),
}
"""Column names (compared without case, spaces and punctuation) that :func:`guess_columns` takes for each
column of the documents; no name serves two columns."""
REGISTRY_SYNONYMS = {
    REGISTRY_ID: ("identity_id", "identity", "id", "subject", "subject_id", "person", "person_id", "patient",
                  "patient_id", "individual", "individual_id", "author", "author_id", "user_id", "pid",
                  "profile_id", "label"),
}


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


class EncodingError(DataError):
    """A text file that does not decode under the chosen encoding: ``offset`` is the first byte that fails,
    ``line`` its line and ``row`` its CSV row (``None`` in the header, in JSONL or when not known)."""

    def __init__(self, file: str, encoding: str, offset: int, byte: int, *, line: int, row: int | None = None,
                 hint: str = ENCODING_HINT):
        self.encoding, self.offset, self.byte, self.line, self.hint = encoding, offset, byte, line, hint
        self.in_header = row == 0
        label = ENCODINGS.get(encoding, encoding)
        where = f"{'in the header, ' if self.in_header else ''}line {line}, byte {offset}"
        super().__init__(file, f"text is not valid {label} ({where})", row=row or None,
                         expected=f"{label} encoded text ({hint})", found=f"byte 0x{byte:02x}")

    def with_hint(self, hint: str) -> "EncodingError":
        """The same error with another suggestion (e.g. the command-line option that declares the encoding)."""
        return EncodingError(self.file, self.encoding, self.offset, self.byte, line=self.line,
                             row=0 if self.in_header else self.row, hint=hint)


def encoding_name(encoding: str) -> str:
    """The recorded name of an encoding ("latin1", "ISO-8859-1" -> "latin-1"); ``ConfigError`` if unknown."""
    try:
        codec = codecs.lookup(str(encoding)).name
        try:
            b"    ".decode(codec)  # LookupError for codecs that are not text encodings (base64, rot13, ...)
        except UnicodeDecodeError:
            pass
    except LookupError:
        raise ConfigError(f"unknown encoding '{encoding}'; expected a text encoding such as "
                          f"{', '.join(ENCODINGS)}") from None
    return {"utf-8-sig": "utf-8", "iso8859-1": "latin-1"}.get(codec, codec)


def _failing_row(data: bytes, offset: int, codec: str) -> int | None:
    """The CSV row (0: the header) holding the byte at ``offset``, counting records as pandas does."""
    try:
        before = data[:offset].decode(codec)
        return sum(1 for record in csv.reader(io.StringIO(before + "x")) if record) - 1
    except (UnicodeDecodeError, csv.Error):
        return None


def _decode(name: str, data: bytes, encoding: str, kind: str) -> str:
    codec = "utf-8-sig" if encoding == "utf-8" else encoding
    try:
        return data.decode(codec)
    except UnicodeDecodeError as error:
        offset = error.start + (len(codecs.BOM_UTF8) if codec == "utf-8-sig" and data.startswith(codecs.BOM_UTF8)
                                else 0)  # the decoder counts from after the byte-order mark
        line = data[:offset].count(b"\n") + 1
        row = _failing_row(data, offset, codec) if kind == "csv" else None
        raise EncodingError(name, encoding, offset, data[offset], line=line, row=row) from None


_C1_BYTES = bytes(range(0x80, 0xA0))
_OTHER_BYTES = bytes(b for b in range(256) if b not in _C1_BYTES)


def encoding_notes(data: bytes, encoding: str, name: str, fmt: str | None = None) -> tuple[str, ...]:
    """What to check about the file ``name`` (its format from the suffix or ``fmt``) read under a declared
    encoding: signs that another one was meant. The same notes go into a loaded table's report."""
    return _encoding_notes(data, encoding_name(encoding), _format_of(name, fmt))


def _encoding_notes(data: bytes, encoding: str, kind: str) -> tuple[str, ...]:
    if kind == "parquet":
        return () if encoding == "utf-8" else (f"the encoding {encoding} does not apply to Parquet files, whose "
                                               "text is UTF-8",)
    if encoding == "utf-8" or data.isascii():
        return ()
    notes = []
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        notes.append(f"the file is also valid UTF-8 and has non-ASCII characters: read as {encoding}, they may be "
                     "garbled (e.g. 'é' shows as 'Ã©'); check the encoding")
    controls = len(data.translate(None, _OTHER_BYTES))
    if encoding == "latin-1" and controls:
        notes.append(f"{controls:,} byte{'s' if controls > 1 else ''} between 0x80 and 0x9f read as invisible "
                     "control characters in latin-1; the file is probably Windows-1252 (cp1252)")
    return tuple(notes)


_WORD = re.compile(rb'[^\s,;"]*[\x80-\xff][^\s,;"]*')


def encoding_preview(data: bytes, n: int = 5) -> pd.DataFrame:
    """The first ``n`` distinct words with non-ASCII bytes, as each of :data:`ENCODINGS` reads them (``None``:
    does not decode): for a curator to see which encoding shows the accents right. Words are cut short."""
    words: list[bytes] = []
    for match in _WORD.finditer(data):
        if match.group() not in words:
            words.append(match.group())
        if len(words) == n:
            break
    rows = []
    for word in words:
        row = {}
        for encoding in ENCODINGS:
            try:
                row[encoding] = short(word.decode(encoding))
            except UnicodeDecodeError:
                row[encoding] = None
        rows.append(row)
    return pd.DataFrame(rows, columns=list(ENCODINGS), dtype=object)


@dataclass(frozen=True)
class _Read:
    frame: pd.DataFrame
    sha256: str
    encoding: str  # as recorded
    notes: tuple[str, ...]


def read_table(source: str | Path | bytes, name: str | None = None, fmt: str | None = None,
               encoding: str = "utf-8") -> tuple[pd.DataFrame, str]:
    """Read a CSV, JSONL or Parquet table from a path or from bytes (an upload).

    Returns the frame and the SHA-256 of the raw bytes. Cells keep their types (JSONL, Parquet) or
    are strings (CSV); missing values are ``None``/NaN. ``encoding`` decodes CSV and JSONL (UTF-8 by
    default, with or without a byte-order mark); Parquet ignores it.
    """
    read = _read(source, name, fmt, encoding)
    return read.frame, read.sha256


def _read(source: str | Path | bytes, name: str | None, fmt: str | None, encoding: str) -> _Read:
    encoding = encoding_name(encoding)
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
        frame = _read_jsonl(name, _decode(name, data, encoding, kind))
    else:
        text = _decode(name, data, encoding, kind)
        records = csv.reader(io.StringIO(text, newline=None))  # any line break ends a line, as for the table reader
        header = next(records, [])
        repeated = [column for i, column in enumerate(header) if column in header[:i]]
        if repeated:
            raise DataError(name, f"column '{short(repeated[0])}' appears more than once in the header",
                            expected="unique column names", found=f"{header.count(repeated[0])} columns of that name")
        _check_row_widths(name, records, len(header))
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
    return _Read(frame, sha256_of(data), "utf-8" if kind == "parquet" else encoding,
                 _encoding_notes(data, encoding, kind))


def _check_row_widths(name: str, records, width: int) -> None:
    """Refuse a CSV row with fewer fields than the header: a table reader pads it with empty cells, which would
    silently turn, e.g., a document with a cut-off line into one with no identity (a line break inside an
    unquoted field cuts a row in two)."""
    row = 0
    for record in records:
        if not record:  # a blank line: skipped, as the table reader does
            continue
        row += 1
        if len(record) < width:
            raise DataError(name, f"not a well-formed CSV table (row {row} has {len(record)} of the header's {width} "
                            "fields: a line break inside an unquoted field, or missing separators)",
                            expected=f"{width} fields per row, as in the header", found=f"{len(record)} fields")


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


# ------------------------------------------------------------------------------------------ column mapping

def _normal(name: str) -> str:
    """A column name without case, spaces and punctuation ("Doc ID", "doc-id" and "doc_id" are alike)."""
    return re.sub(r"[\W_]+", "", str(name).casefold())


def _match(column: str, ours: str, names: Sequence[str]) -> int | None:
    """How well a file's column name matches one of our columns: 0 exactly, 1 up to case and punctuation,
    2 a synonym, ``None`` not at all."""
    if column == ours:
        return 0
    if _normal(column) == _normal(ours):
        return 1
    return 2 if _normal(column) in {_normal(name) for name in names} else None


def guess_columns(columns: Sequence[str], synonyms: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """A proposed mapping ``{our_name: their_name or None}`` from the file's column names.

    For each of our columns (the keys of ``synonyms``, e.g. :data:`DOCUMENT_SYNONYMS`) the preference is a
    column of exactly our name, then one alike up to case and punctuation, then one whose name is a
    synonym. ``None`` when no column matches, or when several match equally (ambiguous). No column is
    proposed for two of ours. A guess is a proposal to show, for the curator to check.
    """
    columns = [str(c) for c in columns]
    guess: dict[str, str | None] = dict.fromkeys(synonyms)
    ambiguous: set[str] = set()
    for tier in range(3):
        for ours, names in synonyms.items():
            if guess[ours] is None and ours not in ambiguous:
                taken = set(guess.values())
                matches = [c for c in columns if c not in taken and _match(c, ours, names) == tier]
                if len(matches) == 1:
                    guess[ours] = matches[0]
                elif matches:
                    ambiguous.add(ours)
    return guess


def _chosen_twice(mapping: Mapping[str, str | None]) -> tuple[str, str, str] | None:
    """The first file column mapped to two of ours: ``(their_name, ours_a, ours_b)``."""
    seen: dict[str, str] = {}
    for ours, theirs in mapping.items():
        if theirs is None:
            continue
        if theirs in seen:
            return theirs, seen[theirs], ours
        seen[theirs] = ours
    return None


def mapping_problems(mapping: Mapping[str, str | None], required: Sequence[str]) -> list[str]:
    """Why a mapping chosen in a form cannot be loaded yet: required columns with no file column chosen, a file
    column chosen twice. Empty when it can be."""
    problems = []
    unmapped = [ours for ours in required if not mapping.get(ours)]
    if unmapped:
        problems.append(f"no column chosen for {', '.join(repr(ours) for ours in unmapped)}")
    twice = _chosen_twice(mapping)
    if twice:
        problems.append(f"the column '{short(twice[0])}' is chosen for both '{twice[1]}' and '{twice[2]}'")
    return problems


COLUMNS_SHOWN = 30
"""At most this many column names are listed in a message."""


def _names(columns: Sequence[str]) -> str:
    """Column names for a message: quoted, each cut short, at most :data:`COLUMNS_SHOWN` of them."""
    shown = ", ".join(repr(short(c)) for c in list(columns)[:COLUMNS_SHOWN])
    more = len(columns) - COLUMNS_SHOWN
    return shown + (f", … ({more} more)" if more > 0 else "")


def _mapping_used(mapping: Mapping[str, str], columns: Sequence[str]) -> str:
    return ", ".join(f"{ours} = {short(theirs)!r}" + ("" if theirs in columns else " (no such column)")
                     for ours, theirs in mapping.items())


def check_columns(name: str, columns: Sequence[str], mapping: Mapping[str, str] | None,
                  required: Sequence[str]) -> None:
    """Raise the ``DataError`` that loading a file with these ``columns`` under ``mapping`` (``{our_name:
    their_name}``) would raise about columns: a mapped column the file lacks, a column mapped twice, a
    required column neither present nor mapped. Every message lists the file's columns and the mapping."""
    columns, mapping = [str(c) for c in columns], dict(mapping or {})
    used = f"; mapping used: {_mapping_used(mapping, columns)}" if mapping else ""
    for ours, theirs in mapping.items():
        if theirs not in columns:
            raise DataError(name, f"column '{ours}' (mapped from '{short(theirs)}') is missing; the file has "
                            f"columns: {_names(columns)}{used}", column=short(theirs))
    twice = _chosen_twice(mapping)
    if twice:
        raise DataError(name, f"column '{short(twice[0])}' is mapped to both '{twice[1]}' and '{twice[2]}'",
                        column=short(twice[0]), expected="a different column for each",
                        found=f"the file's columns {_names(columns)}{used}")
    present = (set(columns) - set(mapping.values())) | set(mapping)
    missing = [ours for ours in required if ours not in present]
    if missing:
        raise DataError(name, f"required column '{missing[0]}' is missing", column=missing[0],
                        expected=f"columns {list(required)} (or a column mapping)",
                        found=f"columns [{_names(columns)}]{used}")


def _apply_mapping(name: str, frame: pd.DataFrame, mapping: Mapping[str, str] | None,
                   required: Sequence[str]) -> pd.DataFrame:
    """Rename user columns to ours: ``mapping`` is ``{our_name: their_name}``."""
    check_columns(name, frame.columns, mapping, required)
    if mapping:
        # a column already named like a mapping target is replaced by the mapped one
        shadowed = [ours for ours, theirs in mapping.items()
                    if ours != theirs and ours in frame.columns and ours not in mapping.values()]
        frame = frame.drop(columns=shadowed).rename(columns={theirs: ours for ours, theirs in mapping.items()})
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
    report = ValidationReport(name, len(frame), len(out), tuple(checker.rejected), read.notes)
    return Documents(out, name, read.sha256, report, read.encoding,
                     {ours: theirs for ours, theirs in (columns or {}).items() if ours != theirs})


def load_registry(source: str | Path | bytes, *, name: str | None = None, columns: Mapping[str, str] | None = None,
                  on_invalid: str = "error", fmt: str | None = None, encoding: str = "utf-8") -> Registry:
    """Load a profile registry: an ``identity_id`` column (or its mapping) and any profile fields (the other
    parameters as for :func:`load_documents`)."""
    _check_mode(on_invalid)
    read = _read(source, name, fmt, encoding)
    frame, name = read.frame, name or str(source)
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
    report = ValidationReport(name, len(frame), len(out), tuple(checker.rejected), read.notes)
    return Registry(out, name, read.sha256, report, read.encoding,
                    {ours: theirs for ours, theirs in (columns or {}).items() if ours != theirs})


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
