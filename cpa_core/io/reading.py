"""Reading a table file (CSV, JSONL, Parquet) in a declared text encoding.

A file that does not decode is refused with the byte, line and row where it fails, never read with
replaced characters; checksums are of the raw bytes. Parquet stores its text as UTF-8.

A field (a document's text, an id, a profile field) may be up to :data:`MAX_FIELD_CHARS` characters long
(10 million), far beyond the csv module's default limit of 131,072 characters: long documents are read whole.
A longer field is refused by the loaders (:mod:`cpa_core.io.tables`), naming its file, row and column, or its
row is dropped with the other invalid rows. A JSONL line whose object has a key twice is refused, naming the line
and the key: a JSON reader keeps the last value, so the first would be silently lost.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cpa_core.common.errors import ConfigError, DataError


MAX_FIELD_CHARS = 10_000_000
"""The stated bound on a field's length in characters, in CSV, JSONL and Parquet alike: a document of up to 10
million characters (thousands of pages) is read whole; a longer field is refused, or its row dropped."""

ID_SHOWN = 40
"""Ids quoted in messages are cut to this many characters (a long "id" may be document text)."""


def short(text) -> str:
    """A value quoted in a message, cut to :data:`ID_SHOWN` characters."""
    text = str(text)
    return text if len(text) <= ID_SHOWN else text[:ID_SHOWN] + "…"


FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
ENCODINGS = {"utf-8": "UTF-8", "latin-1": "Latin-1 (ISO-8859-1)", "cp1252": "Windows-1252"}
"""The usual encodings of text files, by the name recorded on loaded tables (any Python text codec is accepted)."""


ENCODING_HINT = "if the file is in another encoding, declare it, e.g. latin-1 or cp1252"


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


UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def _declared_by_bom(data: bytes, encoding: str) -> str:
    """The encoding to read a text file in: UTF-16 when the file starts with its byte-order mark and UTF-8 (the
    default) is declared, which such a file can never be (a spreadsheet's "Unicode" export); else the declared
    one."""
    return "utf-16" if encoding == "utf-8" and data.startswith(UTF16_BOMS) else encoding


def _decode(name: str, data: bytes, encoding: str, kind: str) -> str:
    codec = "utf-8-sig" if encoding == "utf-8" else encoding
    try:
        text = data.decode(codec)
        return text[1:] if text.startswith("\ufeff") else text  # a byte-order mark the codec leaves (utf-16-le)
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
    default, with or without a byte-order mark; a file that starts with UTF-16's byte-order mark is read as UTF-16
    unless another encoding is declared); Parquet ignores it.
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
    if kind != "parquet":
        encoding = _declared_by_bom(data, encoding)
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


# a released document can be longer than the csv module's default field limit (131,072 characters): public judgments
# run to hundreds of thousands. The table reader (pandas) has no such limit, and this reader's is far above
# MAX_FIELD_CHARS, so that a longer field is read and then refused (or its row dropped) by the loaders, naming its row
# and column, instead of failing the whole file here
csv.field_size_limit(2**31 - 1)


def _check_row_widths(name: str, records, width: int) -> None:
    """Refuse a CSV row with fewer fields than the header: a table reader pads it with empty cells, which would
    silently turn, e.g., a document with a cut-off line into one with no identity (a line break inside an
    unquoted field cuts a row in two). A row the CSV reader cannot read is refused, naming it."""
    row = 0
    while True:
        try:
            record = next(records, None)
        except csv.Error as error:
            raise DataError(name, f"not a well-formed CSV table (row {row + 1}: {error})",
                            expected="a CSV row", found="a row the CSV reader cannot read") from None
        if record is None:
            return
        if not record:  # a blank line: skipped, as the table reader does
            continue
        row += 1
        if len(record) < width:
            raise DataError(name, f"not a well-formed CSV table (row {row} has {len(record)} of the header's {width} "
                            "fields: a line break inside an unquoted field, or missing separators)",
                            expected=f"{width} fields per row, as in the header", found=f"{len(record)} fields")


class _RepeatedKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _object(pairs: list) -> dict:
    """A JSON object, refused when a key appears twice (a dict keeps the last value and loses the first)."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return record


_JSON = json.JSONDecoder(object_pairs_hook=_object)  # one decoder for every line (json.loads with a hook makes one
# per call); the hook costs one length comparison per object


def _read_jsonl(name: str, text: str) -> pd.DataFrame:
    records = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = _JSON.decode(line)
        except json.JSONDecodeError as error:
            raise DataError(name, f"line {line_no} is not valid JSON ({error.msg})",
                            expected="one JSON object per line") from None
        except _RepeatedKey as repeated:
            raise DataError(name, f"line {line_no}: key '{short(repeated.key)}' appears twice",
                            expected="each key once") from None
        if not isinstance(record, dict):
            raise DataError(name, f"line {line_no} is not a JSON object", expected="one JSON object per line",
                            found=type(record).__name__)
        records.append(record)
    return pd.DataFrame.from_records(records)
