"""An outside attacker's output, read as a long table ``doc_id, candidate_id, score`` (CSV, JSONL or Parquet).

What the scores mean (probabilities, similarities or ranks) is declared by the imported attacker's ``kind``
(:mod:`cpa_core.attack.attackers.imported`).

The table is read column by column: CSV and Parquet with pyarrow (multi-threaded, only the three columns used),
the ids as dictionary codes, the scores as float64, and checked with array operations; nothing is kept per row but
two int32 codes and a float64 (16 bytes a row). A file pyarrow cannot read as such (a malformed CSV row, a header
with a column named twice, text that is not UTF-8, a Parquet column that is not text or numbers) and JSONL files
are read by :func:`~cpa_core.io.reading.read_table`, so that every file is refused with the same one-line message
(naming the file, row, column, what was expected and what was found) and every table read gives the same result
whichever way it was read. The SHA-256 is of the file's bytes, read in blocks.
"""

from __future__ import annotations

import codecs
import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from cpa_core.common.errors import DataError
from cpa_core.io.columns import _apply_mapping, check_columns
from cpa_core.io.reading import _format_of, read_table, short
from cpa_core.io.tables import _as_id, _describe

COLUMNS = ("doc_id", "candidate_id", "score")
BLOCK = 1 << 22
"""Bytes read at a time for the checksum (4 MiB)."""


def not_finite(values: np.ndarray) -> np.ndarray:
    """The scores that are no number or infinite (NaN stands for a cell that is no number)."""
    return ~np.isfinite(values)


def negative(values: np.ndarray) -> np.ndarray:
    """The scores that are no weight (kind ``probability``): below 0."""
    return values < 0


def not_ranks(values: np.ndarray) -> np.ndarray:
    """The scores that are no rank (kind ``rank``): below 1 or not an integer."""
    return (values < 1) | (values != np.floor(values))


REFUSALS = (negative, not_ranks)
"""What a kind of scores may refuse in a valid table (:class:`~cpa_core.attack.attackers.imported.ImportedAttacker`):
the first row each refuses keeps its score as the file wrote it, to be quoted."""

ROWS_AT_ONCE = 1 << 20
"""Rows scanned at a time when looking for a first one (a scan stops at the block that has it)."""


def first_refused(refused: Callable[[np.ndarray], np.ndarray], values: np.ndarray) -> int | None:
    """The first position (from 0) of ``values`` that ``refused`` refuses, ``None`` if none; scanned in blocks."""
    for start in range(0, values.shape[0], ROWS_AT_ONCE):
        mask = refused(values[start:start + ROWS_AT_ONCE])
        if mask.any():
            return start + int(mask.argmax())
    return None


@dataclass(frozen=True, eq=False)
class CandidateScores:
    """A validated long table of candidate scores, column by column.

    Row ``i`` of the file (``i + 1`` counting from 1, the header excluded) scores the candidate
    ``candidate_ids[candidate_codes[i]]`` for the document ``doc_ids[doc_codes[i]]`` with ``scores[i]``. Ids are
    trimmed text, listed in the order of their first row; each (doc_id, candidate_id) pair has one row.
    """

    doc_codes: np.ndarray = field(repr=False)  # int32 (n,)
    doc_ids: np.ndarray = field(repr=False)  # object (documents,)
    candidate_codes: np.ndarray = field(repr=False)  # int32 (n,)
    candidate_ids: np.ndarray = field(repr=False)  # object (candidates,)
    scores: np.ndarray = field(repr=False)  # float64 (n,), finite
    file: str
    sha256: str
    written: Mapping[int, str] = field(default_factory=dict, repr=False)
    """The score as the file wrote it (quoted, ``repr``) of the first row each of :data:`REFUSALS` refuses."""

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @property
    def frame(self) -> pd.DataFrame:
        """The table as a frame: doc_id and candidate_id (categorical), score; indexed by the row in the file
        (from 1). Built on each call from the columns (the scores are not copied)."""
        def categorical(codes, ids):
            return pd.Categorical.from_codes(codes, categories=pd.Index(ids, dtype=object), validate=False)

        return pd.DataFrame({"doc_id": categorical(self.doc_codes, self.doc_ids),
                             "candidate_id": categorical(self.candidate_codes, self.candidate_ids),
                             "score": self.scores}, index=pd.RangeIndex(1, len(self) + 1, name="row"), copy=False)

    def found(self, row: int) -> str:
        """The score of ``row`` (from 1) as the file wrote it, quoted for a message."""
        return self.written.get(row, repr(float(self.scores[row - 1])))


class _Unread(Exception):
    """The fast reader leaves this file to :func:`read_table` (which refuses it, or reads what pyarrow did not)."""


@dataclass
class _Ids:
    """An id column: ``codes`` (int32, -1 for a missing cell) into ``values`` (as read: text, or any value)."""

    codes: np.ndarray
    values: list
    raw: Callable[[int], object]  # the cell of a row (from 0), as read


@dataclass
class _Scores:
    values: np.ndarray  # float64, NaN where not a number
    raw: Callable[[int], object]  # the cell of a row (from 0) as the file wrote it


def _quotable(values: np.ndarray, cell: Callable[[int], object]) -> _Scores:
    """The scores, with the cells of the only rows a message may quote (the first that is no finite number, the
    first each of :data:`REFUSALS` refuses) read now, so that the column of cells need not be kept."""
    rows = {first_refused(refused, values) for refused in (not_finite, *REFUSALS)}
    return _Scores(values, {row: cell(row) for row in rows if row is not None}.__getitem__)


def read_candidate_scores(source: str | Path | bytes, *, name: str | None = None,
                          columns: Mapping[str, str] | None = None, fmt: str | None = None) -> CandidateScores:
    """Read and validate a long table ``doc_id, candidate_id, score`` (CSV, JSONL or Parquet).

    What the scores mean (probabilities, similarities or ranks) is declared by the attacker's ``kind``.
    ``columns`` maps our column names to the file's (``{"doc_id": "doc", ...}``).
    """
    name = name or ("<upload>" if isinstance(source, (bytes, bytearray)) else str(source))
    try:
        kind = _format_of(name, fmt)
    except DataError:
        kind = None  # refused by read_table, after the errors it says first (a missing file)
    try:
        if kind not in ("csv", "parquet"):
            raise _Unread  # JSONL: read line by line
        with ThreadPoolExecutor(1) as pool:  # the checksum while pyarrow reads
            hashing = pool.submit(_digest, source)
            try:
                read, problem = (_parquet if kind == "parquet" else _csv)(source, name, columns), None
            except (_Unread, DataError) as error:
                read, problem = None, error
            digest, text = hashing.result()  # first: a file that cannot be opened, is empty or not UTF-8 text
        if kind == "csv" and not text:
            raise _Unread
        if problem is not None:
            raise problem
        doc, cand, score = read
    except _Unread:
        frame, digest = read_table(source, name, fmt)  # refuses what it cannot read, naming where
        doc, cand, score = _from_frame(_apply_mapping(name, frame, columns, COLUMNS))
    return _validated(name, digest, doc, cand, score)


# ------------------------------------------------------------------------------------------ reading

def _digest(source) -> tuple[str, bool]:
    """The SHA-256 of the file's bytes (read in blocks) and whether they are UTF-8 text. A file that cannot be
    opened or has nothing in it is left to :func:`read_table`, which says why."""
    sha = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    text_ok, content = True, False

    def feed(block) -> None:
        nonlocal text_ok, content
        sha.update(block)
        content = content or bool(block.strip())
        if text_ok and not (block.isascii() and not decoder.getstate()[0]):
            try:
                decoder.decode(block)
            except UnicodeDecodeError:
                text_ok = False

    if isinstance(source, (bytes, bytearray)):
        view = memoryview(source)
        for start in range(0, len(view), BLOCK):
            feed(view[start:start + BLOCK].tobytes() if len(view) > BLOCK else source)
    else:
        try:
            with open(source, "rb") as handle:
                while block := handle.read(BLOCK):
                    feed(block)
        except OSError:
            raise _Unread from None
    if not content:
        raise _Unread  # the file is empty
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        text_ok = False
    return sha.hexdigest(), text_ok


def _arrow_source(source):
    import pyarrow as pa

    return pa.BufferReader(pa.py_buffer(source)) if isinstance(source, (bytes, bytearray)) else str(source)


def _file_columns(name: str, names: list[str], columns: Mapping[str, str] | None) -> list[str]:
    """The file's column holding each of ours, checked as :func:`_apply_mapping` checks them."""
    check_columns(name, names, columns, COLUMNS)
    mapping = dict(columns or {})
    return [mapping.get(ours, ours) for ours in COLUMNS]


def _csv(source, name: str, columns: Mapping[str, str] | None) -> tuple[_Ids, _Ids, _Scores]:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        with pcsv.open_csv(_arrow_source(source)) as reader:
            names = reader.schema.names
    except (pa.ArrowException, OSError):
        raise _Unread from None
    if len(set(names)) < len(names) or "" in names:
        raise _Unread  # a column named twice is refused, an unnamed one named as pandas names it
    wanted = _file_columns(name, names, columns)
    text = pa.dictionary(pa.int32(), pa.string())
    convert = pcsv.ConvertOptions(column_types={wanted[0]: text, wanted[1]: text, wanted[2]: pa.string()},
                                  include_columns=wanted, strings_can_be_null=False, quoted_strings_can_be_null=False)
    table = None
    for newlines in (False, True):  # line breaks inside quoted cells need the slower chunker
        try:
            table = pcsv.read_csv(_arrow_source(source), convert_options=convert,
                                  parse_options=pcsv.ParseOptions(newlines_in_values=newlines))
            break
        except (pa.ArrowException, OSError):
            continue
    if table is None:
        raise _Unread
    _rows(name, table.num_rows)
    score = _quotable(_text_floats(table.column(wanted[2])), lambda row: table.column(wanted[2])[row].as_py())
    table = table.select(wanted[:2])  # the text of the scores can go
    return _arrow_ids(table.column(wanted[0])), _arrow_ids(table.column(wanted[1])), score


def _parquet(source, name: str, columns: Mapping[str, str] | None) -> tuple[_Ids, _Ids, _Scores]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(_arrow_source(source))
    except (pa.ArrowException, OSError):
        raise _Unread from None
    index = [c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)]
    names = [c for c in schema.names if c not in index]  # pandas reads a stored index as the index
    if len(set(names)) < len(names):
        raise _Unread
    wanted = _file_columns(name, names, columns)
    types = [schema.field(c).type for c in wanted]

    def text(t):
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    def numbers(t):
        return (pa.types.is_floating(t) and not pa.types.is_float16(t)) or pa.types.is_integer(t)

    if not all(text(t) or (pa.types.is_dictionary(t) and text(t.value_type)) for t in types[:2]) \
            or not numbers(types[2]):
        raise _Unread  # ids that are not text, scores that are not numbers: refused as pandas reads them
    try:
        table = pq.read_table(_arrow_source(source), columns=wanted, read_dictionary=wanted[:2])
    except (pa.ArrowException, OSError):
        raise _Unread from None
    _rows(name, table.num_rows)
    numbers_column = table.column(wanted[2])

    def raw(row):
        value = numbers_column[row].as_py()
        return float("nan") if value is None else value  # pandas reads a missing number as NaN

    values = np.empty(table.num_rows)
    start = 0
    for chunk in numbers_column.chunks:
        values[start:start + len(chunk)] = chunk.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        start += len(chunk)
    return _arrow_ids(table.column(wanted[0])), _arrow_ids(table.column(wanted[1])), _quotable(values, raw)


def _rows(name: str, n: int) -> None:
    if n == 0:
        raise DataError(name, "the table has no rows", expected="at least one row", found="only a header")


def _arrow_ids(column) -> _Ids:
    """Codes of a pyarrow text column (dictionary-encoded or not); the values in the order of their first row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    column = column.unify_dictionaries()
    codes = np.empty(len(column), dtype=np.int32)
    start = 0
    for chunk in column.chunks:
        indices = chunk.indices
        if indices.null_count:
            indices = pc.fill_null(indices, -1)
        codes[start:start + len(chunk)] = indices.to_numpy(zero_copy_only=False)
        start += len(chunk)
    values = column.chunks[0].dictionary.to_pylist() if column.num_chunks else []
    codes, values = _first_row_order(codes, values)
    return _Ids(codes, values, lambda row: None if codes[row] < 0 else values[codes[row]])


def _first_row_order(codes: np.ndarray, values: list) -> tuple[np.ndarray, list]:
    """The codes renumbered so that the values come in the order of their first row, unused values dropped."""
    present = codes[codes >= 0] if (codes < 0).any() else codes
    if present.size == 0:
        return codes, []
    top = -1  # the largest code so far: in that order, each code is at most one more
    for start in range(0, present.size, ROWS_AT_ONCE):
        block = present[start:start + ROWS_AT_ONCE]
        before = np.empty_like(block)
        before[0] = top
        np.maximum.accumulate(block[:-1], out=before[1:])
        np.maximum(before, top, out=before)
        if (block > before + 1).any():
            break
        top = max(top, int(block.max()))
    else:
        return codes, values[: top + 1]
    order = pd.unique(present)
    renumber = np.full(len(values) + 1, -1, dtype=np.int32)  # the last entry maps a missing cell (-1) to -1
    renumber[order] = np.arange(order.size, dtype=np.int32)
    return renumber[codes], [values[i] for i in order.tolist()]


def _text_floats(column) -> np.ndarray:
    """The numbers of a column of text as Python's ``float`` reads them (NaN where it does not): pyarrow's
    conversion (correctly rounded, as ``float``) for chunks it reads whole, ``float`` for the others (cells with
    spaces, underscores, text)."""
    import pyarrow as pa

    out = np.empty(len(column))
    start = 0
    for chunk in column.chunks:
        try:
            out[start:start + len(chunk)] = chunk.cast(pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowException:
            out[start:start + len(chunk)] = np.fromiter((_number(v) for v in chunk.to_pylist()), dtype=np.float64,
                                                        count=len(chunk))
        start += len(chunk)
    return out


def _number(value) -> float:
    """A cell's number as the score column takes it; NaN for what is none (booleans, text, missing)."""
    if isinstance(value, bool):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _from_frame(frame: pd.DataFrame) -> tuple[_Ids, _Ids, _Scores]:
    """The columns of a frame read by :func:`read_table` (cells of any type)."""
    def ids(series: pd.Series) -> _Ids:
        text = [v if isinstance(v, str) else None for v in series.tolist()]  # any other value is no id
        codes, values = pd.factorize(np.asarray(text, dtype=object), use_na_sentinel=True)
        return _Ids(codes.astype(np.int32), list(values), lambda row: series.iloc[[row]].tolist()[0])

    score = frame["score"]
    if pd.api.types.is_numeric_dtype(score.dtype) and not pd.api.types.is_bool_dtype(score.dtype):
        values = score.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        values = np.fromiter((_number(v) for v in score.tolist()), dtype=np.float64, count=len(score))
    return ids(frame["doc_id"]), ids(frame["candidate_id"]), _Scores(values, lambda row: score.iloc[[row]].tolist()[0])


# ------------------------------------------------------------------------------------------ checking

def _canonical(ids: _Ids) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Each row's code into the distinct ids (trimmed text, in the order of their first row), and the first row
    (from 0) whose id is none (``None`` when every row has one)."""
    position = np.full(len(ids.values) + 1, -1, dtype=np.int32)  # the last entry maps a missing cell (-1) to -1
    distinct: dict[str, int] = {}
    for i, value in enumerate(ids.values):
        ident = _as_id(value)
        if ident is not None:
            position[i] = distinct.setdefault(ident, len(distinct))
    if len(distinct) == len(ids.values) and (ids.codes >= 0).all():  # every value an id, none trimmed to another
        codes, bad = ids.codes, None
    else:
        codes = position[ids.codes]
        invalid = codes < 0
        bad = int(invalid.argmax()) if invalid.any() else None
    return codes, np.array(list(distinct), dtype=object), bad


def _first_repeat(doc: np.ndarray, cand: np.ndarray, n_cand: int) -> tuple[int, int] | None:
    """The first row (from 0) whose (doc, cand) pair an earlier row has, and that earlier row; ``None`` if none."""
    n = doc.shape[0]
    if n < 2:
        return None
    keys = doc.astype(np.int64)
    keys *= max(n_cand, 1)
    keys += cand
    span = int(keys.max()) + 1
    if span <= max(8 * n, 1 << 24):  # a byte per possible pair: every pair marked, then counted
        seen = np.zeros(span, dtype=bool)
        seen[keys] = True
        if np.count_nonzero(seen) == n:
            return None
        del seen
    elif not (np.diff(np.sort(keys)) == 0).any():
        return None
    repeated = pd.Series(keys).duplicated(keep="first").to_numpy()
    row = int(repeated.argmax())
    return row, int(np.flatnonzero(keys[:row] == keys[row])[0])


def _validated(name: str, digest: str, doc: _Ids, cand: _Ids, score: _Scores) -> CandidateScores:
    """The rows checked in the file's order: each row's doc_id, candidate_id and score, then whether an earlier row
    has its pair; the first problem raises, naming the file, row, column, what was expected and what was found."""
    n = score.values.shape[0]
    doc_codes, doc_ids, bad_doc = _canonical(doc)
    cand_codes, cand_ids, bad_cand = _canonical(cand)
    bad_score = first_refused(not_finite, score.values)
    first = min((r for r in (bad_doc, bad_cand, bad_score) if r is not None), default=n)
    repeat = _first_repeat(doc_codes[:first], cand_codes[:first], len(cand_ids))
    if repeat is not None:
        row, earlier = repeat
        raise DataError(name, f"candidate '{short(cand_ids[cand_codes[row]])}' listed twice for document "
                        f"'{short(doc_ids[doc_codes[row]])}'", row=row + 1, column="candidate_id",
                        expected="one row per (doc_id, candidate_id)", found=f"the same pair in row {earlier + 1}")
    for column, ids, bad in (("doc_id", doc, bad_doc), ("candidate_id", cand, bad_cand)):
        if bad == first:
            raise DataError(name, "invalid identifier", column=column, row=first + 1,
                            expected="a non-empty text id", found=_describe(ids.raw(first)))
    if bad_score == first:
        raise DataError(name, "invalid score", column="score", row=first + 1, expected="a finite number",
                        found=repr(score.raw(first)))
    written = {}
    for refused in REFUSALS:
        row = first_refused(refused, score.values)
        if row is not None:
            written[row + 1] = repr(score.raw(row))
    return CandidateScores(doc_codes, doc_ids, cand_codes, cand_ids, score.values, name, digest, written)
