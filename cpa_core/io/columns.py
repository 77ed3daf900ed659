"""Column mapping: which column of a file holds each of ours.

:func:`guess_columns` proposes a mapping from the file's column names, and the text column from the columns'
content when no name matches (for a form to show, never applied silently); :func:`check_columns` refuses a mapping
that misses a required column. A release without a document-id column is numbered only when asked: ``doc_id``
mapped to :data:`ROW_NUMBERS`.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cpa_core.common.errors import DataError
from cpa_core.io.reading import short

DOCUMENT_COLUMNS = ("doc_id", "text", "identity_id")
OPTIONAL_DOCUMENT_COLUMNS = ("group",)
REGISTRY_ID = "identity_id"
DOCUMENT_SYNONYMS = {
    "doc_id": ("doc_id", "doc", "document", "document_id", "docid", "id", "note_id", "record_id", "report_id",
               "text_id", "message_id", "post_id"),
    "text": ("text", "body", "note", "content", "document_text", "released_text", "release_text", "anon_text",
             "anonymised_text", "anonymized_text", "redacted_text", "deidentified_text", "masked_text", "clean_text",
             "narrative", "message", "report", "post", "entry", "comment", "review", "tweet", "essay", "story",
             "transcript", "letter"),
    "identity_id": ("identity_id", "identity", "subject", "subject_id", "person", "person_id", "patient",
                    "patient_id", "individual", "individual_id", "author", "author_id", "user_id", "pid", "label",
                    "profile_id"),
    "group": ("group", "mechanism", "release_mechanism", "release", "source", "split", "stratum"),
}
"""Column names (compared without case, spaces and punctuation) that :func:`guess_columns` takes for each
column of the documents; no name serves two columns."""


ROW_NUMBERS = "<row number>"
"""Mapped to ``doc_id`` (``[columns.documents] doc_id = "<row number>"``, ``cpa audit --number-rows``, the Data page's
"number the rows"), it asks for a release without an id column to be numbered: each document's id is its row
number in the file (:data:`ROW_NUMBERING`). Never done unasked: ids that silently follow the file's order would change
with it."""
ROW_NUMBERED = ("doc_id",)
"""Our columns that row numbers may supply."""
ROW_NUMBERING = "the row number of each document in its file: 1 for the first data row, the header excluded"
"""What ids given by :data:`ROW_NUMBERS` are, as an audit's recorded inputs state it."""
NUMBER_ROWS_HOW = ('number its rows 1, 2, … as ids (cpa audit --number-rows, or doc_id = "<row number>" in '
                   '[columns.documents]; "number the rows" on the Data page)')


REGISTRY_SYNONYMS = {
    REGISTRY_ID: ("identity_id", "identity", "id", "subject", "subject_id", "person", "person_id", "patient",
                  "patient_id", "individual", "individual_id", "author", "author_id", "user_id", "pid",
                  "profile_id", "label"),
}


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


FREE_TEXT_SAMPLE = 1000
"""Rows read from the top of a file to tell which of its columns hold free text."""


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def free_text_lengths(frame: pd.DataFrame) -> dict[str, float]:
    """The mean length in characters of each column of ``frame`` that holds free text (over its first
    :data:`FREE_TEXT_SAMPLE` rows): text values, not numbers written as text, some of them of several words. An id,
    a code or a number column is none of these, however long its values."""
    lengths = {}
    for column in frame.columns:
        values = [v.strip() for v in frame[column].head(FREE_TEXT_SAMPLE).tolist() if isinstance(v, str) and v.strip()]
        if not values or sum(map(_is_number, values)) * 2 > len(values) or not any(len(v.split()) > 1 for v in values):
            continue
        lengths[str(column)] = float(np.mean([len(v) for v in values]))
    return lengths


def guess_columns(columns: Sequence[str], synonyms: Mapping[str, Sequence[str]],
                  text_lengths: Mapping[str, float] | None = None) -> dict[str, str | None]:
    """A proposed mapping ``{our_name: their_name or None}`` from the file's column names.

    For each of our columns (the keys of ``synonyms``, e.g. :data:`DOCUMENT_SYNONYMS`) the preference is a
    column of exactly our name, then one alike up to case and punctuation, then one whose name is a
    synonym. ``None`` when no column matches, or when several match equally (ambiguous). When no name gives the
    ``text`` column, the free-text column with the longest values in ``text_lengths`` (:func:`free_text_lengths`
    of the file) is proposed, unless another of ours took it or another is as long. No column is proposed for two
    of ours. A guess is a proposal to show, for the curator to check.
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
    if "text" in guess and guess["text"] is None and text_lengths:
        guess["text"] = _longest_free_text(columns, text_lengths, set(guess.values()))
    return guess


def _longest_free_text(columns: Sequence[str], text_lengths: Mapping[str, float], taken: set) -> str | None:
    """The free-text column of ``columns`` with the longest values, none of ``taken``; ``None`` on a tie."""
    lengths = {c: text_lengths[c] for c in columns if c in text_lengths and c not in taken}
    if not lengths:
        return None
    longest = max(lengths.values())
    first = [c for c, length in lengths.items() if length == longest]
    return first[0] if len(first) == 1 else None


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
        numbered = [ours for ours in unmapped if ours in ROW_NUMBERED]
        problems.append(f"no column chosen for {', '.join(repr(ours) for ours in unmapped)}"
                        + (f" (a file without {numbered[0]}s: number the rows)" if numbered else ""))
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
    def source(theirs: str) -> str:
        if theirs == ROW_NUMBERS:
            return "the row numbers"
        return f"{short(theirs)!r}" + ("" if theirs in columns else " (no such column)")

    return ", ".join(f"{ours} = {source(theirs)}" for ours, theirs in mapping.items())


def check_columns(name: str, columns: Sequence[str], mapping: Mapping[str, str] | None,
                  required: Sequence[str]) -> None:
    """Raise the ``DataError`` that loading a file with these ``columns`` under ``mapping`` (``{our_name:
    their_name}``, or :data:`ROW_NUMBERS` for an id the rows' numbers give) would raise about columns: a mapped
    column the file lacks, a column mapped twice, row numbers asked for another column than an id (or for a file
    with a column of that name), a required column neither present nor mapped. Every message lists the file's
    columns and the mapping."""
    columns, mapping = [str(c) for c in columns], dict(mapping or {})
    used = f"; mapping used: {_mapping_used(mapping, columns)}" if mapping else ""
    for ours, theirs in mapping.items():
        if theirs == ROW_NUMBERS and ours not in ROW_NUMBERED:
            raise DataError(name, f"row numbers can give only {', '.join(map(repr, ROW_NUMBERED))}, not '{ours}'",
                            column=ours, expected=f"a column of the file for '{ours}'",
                            found=f"the file's columns {_names(columns)}{used}")
        if theirs == ROW_NUMBERS and theirs in columns:
            raise DataError(name, f"the file has a column named '{ROW_NUMBERS}', which also asks for the rows to be "
                            "numbered", column=theirs, expected="another name for that column")
        if theirs != ROW_NUMBERS and theirs not in columns:
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
        remedy = (f": map one of the file's columns to {missing[0]}, or {NUMBER_ROWS_HOW}"
                  if missing[0] in ROW_NUMBERED else "")
        raise DataError(name, f"required column '{missing[0]}' is missing{remedy}", column=missing[0],
                        expected=f"columns {list(required)} (or a column mapping)",
                        found=f"columns [{_names(columns)}]{used}")


def row_numbers(n: int) -> list[str]:
    """The ids :data:`ROW_NUMBERS` gives the ``n`` rows of a file (:data:`ROW_NUMBERING`), as text like every id."""
    return [str(row) for row in range(1, n + 1)]


def redacted_columns(mapping: Mapping[str, str]) -> dict[str, str]:
    """The column mapping of a redacted release written from a file read under ``mapping``: ids that were row numbers
    are the release's own ``doc_id`` column (its withheld rows would renumber the rest)."""
    return {ours: theirs for ours, theirs in mapping.items() if theirs != ROW_NUMBERS}


def _apply_mapping(name: str, frame: pd.DataFrame, mapping: Mapping[str, str] | None,
                   required: Sequence[str]) -> pd.DataFrame:
    """Rename user columns to ours: ``mapping`` is ``{our_name: their_name}``; an id mapped to
    :data:`ROW_NUMBERS` is each row's number."""
    check_columns(name, frame.columns, mapping, required)
    if mapping:
        renamed = {ours: theirs for ours, theirs in mapping.items() if theirs != ROW_NUMBERS}
        # a column already named like a mapping target is replaced by the mapped one (or by the row numbers)
        shadowed = [ours for ours, theirs in mapping.items()
                    if ours != theirs and ours in frame.columns and ours not in renamed.values()]
        frame = frame.drop(columns=shadowed).rename(columns={theirs: ours for ours, theirs in renamed.items()})
        for ours in set(mapping) - set(renamed):
            frame[ours] = row_numbers(len(frame))
    return frame
