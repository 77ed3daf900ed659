"""Column mapping: which column of a file holds each of ours.

:func:`guess_columns` proposes a mapping from the file's column names (for a form to show, never
applied silently); :func:`check_columns` refuses a mapping that misses a required column.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

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
