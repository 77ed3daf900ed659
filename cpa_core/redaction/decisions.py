"""The curator's decisions on a release's redactions: one table across documents, a row per edit (suggested by
the search, forced by the allow list, or typed by the curator) and a row per document to withhold, each accepted
or rejected. The redacted release is built from the accepted rows only.

Columns (:data:`COLUMNS`): ``doc_id``; ``action`` (``edit`` or ``withhold``); for an edit its ``offset`` and
``length`` in the *released* text, the ``original`` text there, its ``replacement``, the evidence ``term`` and the
``kind`` of replacement; the ``source`` (``suggested``, ``allow list`` or ``curator``); the document's risk under
the stored calibration before and after (``set_size_*``, ``linkage_*``: for a suggested edit, once its term and
every earlier one is redacted; indicative); the ``reason`` (why to withhold, or why an edit is not accepted by
default); and ``accept``. The table is written and read as CSV (:func:`decisions_csv`, :func:`read_decisions`),
so a pipeline can apply a reviewed table (``cpa redact --decisions``, :func:`review_decisions`).

A written table is for a curator to open in a spreadsheet: every row also names the configuration id of the audit
it decides (:data:`CONFIG_COLUMN`), and a cell a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, ...)
is written with an apostrophe before it, as the worklist's are, and so is a cell that starts with an apostrophe
(:func:`~cpa_core.report.worklist.neutralise_cell`); reading takes that apostrophe off again, so writing, editing in a
spreadsheet and reading back gives the values written.

An applied edit must redact: a *no-op* (its replacement is its original) changes nothing and is not applied; an
edit whose replacement writes words its original does not have (an inserted name) is refused unless it is a
generalisation the tool gives for that original (a region, an age band, a decade, an entry of the curator's
table), or the curator's own or an LLM rewrite's (kind ``rewrite``, :mod:`cpa_core.redaction.rewrite`), applied as
written and said; placeholders the tool writes (``[CITY]``, ``[REDACTED]``: :data:`PLACEHOLDER_FORM`) add no words; an edit
that keeps words of its original is applied and counted apart (:func:`edit_words`, :func:`decisions_summary`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.attack.explainers import Span, find_clue, fold
from cpa_core.attack.function_words import COMMON_SHARE, FunctionWords, function_words
from cpa_core.audit.rescoring import PanelStoredRisk
from cpa_core.common.errors import DataError
from cpa_core.io.reading import FORMATS, read_table, short
from cpa_core.redaction.replacements import GeneralizationTable, Replacer
from cpa_core.redaction.suggestions import (
    WITHHOLD,
    Edit,
    Replacement,
    Suggestion,
    apply_edits,
    chooser,
    edit_kinds,
    replacement_for,
    panel_members,
    reachable,
    suggest_redactions,
)
from cpa_core.redaction.rewrite import Rewriter, rewrite_withheld
from cpa_core.report.worklist import neutralise_cell, restore_cell

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.audit.panel import PanelResult
    from cpa_core.audit.results import AuditResult
    from cpa_core.io.tables import Registry

COLUMNS = ("doc_id", "action", "offset", "length", "original", "replacement", "term", "kind", "source",
           "set_size_before", "set_size_after", "linkage_before", "linkage_after", "reason", "accept")
TEXT_COLUMNS = ("doc_id", "action", "original", "replacement", "term", "kind", "source", "reason")
EDIT = "edit"
SUGGESTED, ALLOW_LIST, CURATOR = "suggested", "allow list", "curator"
SOURCES = (SUGGESTED, ALLOW_LIST, CURATOR)
_TRUE, _FALSE = {"true", "yes", "1", "y", "t"}, {"false", "no", "0", "n", "f"}
CONFIG_COLUMN = "config_id"
"""The column of a written table (:func:`decisions_csv`) that names, on every row, the configuration id of the audit
the decisions are about; :func:`review_decisions` refuses a row that names another."""
HELD_OUT_COLUMN = "held_out_attacker"
"""The column of a written table that names, on every row, the attacker the redaction search never consulted: the
redacted release is audited again with the panel and it (read back, the column is ignored)."""
PLACEHOLDER_FORM = re.compile(r"\[[A-Z0-9]+(?:_[A-Z0-9]+)*\]")
"""The form of every placeholder the tool writes (``[CITY]``, ``[AGE_BAND]``, ``[REDACTED]``): an upper-case label in
square brackets, never a word of the released text."""
KEPT_LIMIT = 5
"""Doc ids or rows said in one line; the log lists them all."""
RAISES_RISK = "the allow list's edits would raise this document's risk (indicative, under the stored calibration)"
OVERLAPS = "overlaps a suggested edit"
"""Why an allow-list edit is not accepted."""
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
_ANY_WORD = re.compile(r"\w+")


def _row(doc_id: str, action: str, edit: Edit | None, source: str, before, after, reason: str,
         accept: bool) -> dict:
    return {"doc_id": doc_id, "action": action,
            "offset": None if edit is None else edit.offset, "length": None if edit is None else edit.length,
            "original": "" if edit is None else edit.original, "replacement": "" if edit is None else edit.replacement,
            "term": "" if edit is None else edit.term, "kind": "" if edit is None else edit.kind, "source": source,
            "set_size_before": None if before is None else before.set_size,
            "set_size_after": None if after is None else after.set_size,
            "linkage_before": None if before is None else before.linkage,
            "linkage_after": None if after is None else after.linkage,
            "reason": reason, "accept": accept}


def decisions_table(suggestions: Sequence[Suggestion], extra: Sequence[dict] = ()) -> pd.DataFrame:
    """The review table of a search's suggestions: every suggested edit (accepted: each lowers its document's
    risk), a ``withhold`` row (accepted) for each document no safe redaction makes acceptable, then the ``extra``
    rows (:func:`allow_rows`, :func:`curator_rows`)."""
    rows = []
    for suggestion in suggestions:
        for edit in suggestion.edits:
            rows.append(_row(suggestion.doc_id, EDIT, edit, SUGGESTED, suggestion.before,
                             suggestion.risk_after(edit.term), "", True))
        if suggestion.action == WITHHOLD:
            rows.append(_row(suggestion.doc_id, WITHHOLD, None, SUGGESTED, suggestion.before, suggestion.after,
                             suggestion.reason, True))
    return typed(pd.DataFrame(list(rows) + list(extra), columns=list(COLUMNS)))


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with its columns' types (nullable integers and floats, text, booleans)."""
    frame = frame.reindex(columns=list(COLUMNS)).copy()
    for name in ("offset", "length", "set_size_before", "set_size_after"):
        frame[name] = pd.array(pd.to_numeric(frame[name]), dtype="Int64")
    for name in ("linkage_before", "linkage_after"):
        frame[name] = pd.to_numeric(frame[name]).astype(float)
    for name in TEXT_COLUMNS:
        frame[name] = frame[name].astype(object).fillna("").astype(str)
    frame["accept"] = frame["accept"].astype(bool)
    return frame.reset_index(drop=True)


def row_keys(table: pd.DataFrame) -> list[tuple]:
    """What names each row of a decisions table across searches: an edit by its document, offset and length in the
    released text; a document to withhold by its document. A decision on a row holds for the row of the same key
    that a later search proposes (its replacement or evidence may differ: the text it redacts is the same)."""
    withhold = (table["action"] == WITHHOLD).to_numpy()
    return [(str(d), WITHHOLD, None, None) if w else (str(d), EDIT, int(o), int(n))
            for d, w, o, n in zip(table["doc_id"], withhold, table["offset"].fillna(-1), table["length"].fillna(-1))]


def word_rows(table: pd.DataFrame, words: Iterable[str]) -> dict[str, np.ndarray]:
    """For each word or phrase of a deny or allow list, the edit rows of ``table`` it names: its evidence term is
    the word, or the text it redacts holds the word whole (case and accents aside, as the lists match the texts)."""
    is_edit = (table["action"] == EDIT).to_numpy()
    out = {}
    for word in dict.fromkeys(str(w).strip() for w in words):
        if not word:
            continue
        folded = fold(word)
        originals = {text: bool(find_clue(text, word)) for text in table.loc[is_edit, "original"].unique()}
        terms = {term: fold(term) == folded for term in table.loc[is_edit, "term"].unique()}
        out[word] = is_edit & (table["original"].map(originals).fillna(False).to_numpy(dtype=bool)
                               | table["term"].map(terms).fillna(False).to_numpy(dtype=bool))
    return out


def allow_edits(texts: Mapping[str, str], words: Iterable[str], choose) -> dict[str, list[Edit]]:
    """Every whole-word occurrence (case and accents aside) of each word or phrase of an allow list, in every
    text, as edits (``choose(span, text)`` gives the replacement and its kind); overlapping occurrences keep the
    first (the longer phrase when both start together)."""
    wanted = [w for w in dict.fromkeys(str(w).strip() for w in words) if w]
    out: dict[str, list[Edit]] = {}
    for doc_id, text in texts.items():
        found = sorted(((start, -end, word) for word in wanted for start, end in find_clue(text, word)))
        edits, reach = [], -1
        for start, minus_end, word in found:
            end = -minus_end
            if start < reach:
                continue
            choice = choose(Span(start, end, text[start:end], word, 0.0), text)
            edits.append(Edit(start, end - start, text[start:end], choice.replacement, word, choice.kind))
            reach = end
        if edits:
            out[str(doc_id)] = edits
    return out


def allow_rows(edits: Mapping[str, Sequence[Edit]], before: Mapping[str, object] | None = None,
               after: Mapping[str, object] | None = None) -> list[dict]:
    """Rows of allow-list edits, each with its document's risk before and after them all (when known; before: the
    document as it will be released without them, its suggested edits made): accepted unless they would raise that
    risk (:data:`RAISES_RISK`)."""
    rows = []
    for doc_id, document in edits.items():
        was = None if before is None else before.get(doc_id)
        now = None if after is None else after.get(doc_id)
        raises = was is not None and now is not None and not now.no_higher_than(was)
        for edit in document:
            rows.append(_row(doc_id, EDIT, edit, ALLOW_LIST, was, now, RAISES_RISK if raises else "", not raises))
    return rows


def allow_list_kept(table: pd.DataFrame) -> dict[str, list[str]]:
    """Where words of the allow list stay in the redacted release, by reason (the row's ``reason``, that the row
    was not accepted, or that its edit is a no-op): the documents not withheld with an allow-list edit that is not
    applied and whose span no applied edit covers, in the table's order."""
    edits, withheld = accepted(table)
    rows = table[(table["action"] == EDIT) & (table["source"] == ALLOW_LIST)]
    out: dict[str, list[str]] = {}
    for row in rows.itertuples(index=False):
        start, end = int(row.offset), int(row.offset) + int(row.length)
        applied = row.accept and row.original != row.replacement
        if applied or row.doc_id in withheld or any(e.offset <= start and end <= e.offset + e.length
                                                    for e in edits.get(row.doc_id, ())):
            continue
        reason = (row.reason or "not accepted in the decisions table") if not row.accept else \
            "its edit is a no-op (the replacement is the original)"
        found = out.setdefault(reason, [])
        if row.doc_id not in found:
            found.append(row.doc_id)
    return out


def text_edits(released: str, edited: str, term: str = "") -> list[Edit]:
    """The edits that turn ``released`` into ``edited``: a word-level difference (words, spaces and punctuation
    as tokens), each change as an edit of the released text."""
    a, b = _TOKEN.findall(released), _TOKEN.findall(edited)
    starts_a = [0]
    for token in a:
        starts_a.append(starts_a[-1] + len(token))
    out = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        offset, length = starts_a[i1], starts_a[i2] - starts_a[i1]
        replacement = "".join(b[j1:j2])
        out.append(Edit(offset, length, released[offset:offset + length], replacement, term or "curator",
                        "delete" if replacement == "" else "placeholder"))
    return out


def curator_rows(table: pd.DataFrame, doc_id: str, released: str, edited: str) -> pd.DataFrame:
    """The table once the curator has written ``edited`` for document ``doc_id``: its edit rows that the text
    keeps stay (accepted), the others are rejected, and each other change becomes an accepted ``curator`` row
    (earlier curator rows of the document are replaced)."""
    changes = text_edits(released, edited)
    keys = {(e.offset, e.length, e.replacement) for e in changes}
    mine = (table["doc_id"] == str(doc_id)) & (table["action"] == EDIT)
    kept = table[~(mine & (table["source"] == CURATOR))].copy()
    own = (kept["doc_id"] == str(doc_id)) & (kept["action"] == EDIT)
    present = [(int(o), int(n), r) in keys for o, n, r in zip(kept["offset"].fillna(-1), kept["length"].fillna(-1),
                                                                kept["replacement"])]
    kept.loc[own, "accept"] = pd.Series(present, index=kept.index)[own]
    covered = {(int(o), int(n), r) for o, n, r, a in zip(kept.loc[own, "offset"], kept.loc[own, "length"],
                                                          kept.loc[own, "replacement"], kept.loc[own, "accept"]) if a}
    new = [_row(str(doc_id), EDIT, e, CURATOR, None, None, "", True) for e in changes
           if (e.offset, e.length, e.replacement) not in covered]
    return typed(pd.concat([kept, pd.DataFrame(new, columns=list(COLUMNS))], ignore_index=True)) if new \
        else typed(kept)


@dataclass(frozen=True)
class DecisionRows:
    """What each row of a decisions table is, apart from whether it is accepted: its document (``doc_ids``; as
    ``codes`` into ``documents``), whether it is an edit or a document to withhold, whether the edit changes the text
    (a no-op does not), and the characters it redacts. Read once per table and kept while only its accept column
    changes: what the accept column decides is then counted from arrays, at the speed of a tick on a table of tens
    of thousands of rows."""

    doc_ids: np.ndarray
    codes: np.ndarray
    documents: np.ndarray
    is_edit: np.ndarray
    is_withhold: np.ndarray
    changes: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, table: pd.DataFrame) -> DecisionRows:
        doc_ids = table["doc_id"].astype(str).to_numpy(dtype=object)
        action = table["action"].to_numpy(dtype=object)
        codes, documents = pd.factorize(pd.Series(doc_ids, dtype=object))
        return cls(doc_ids, codes, np.asarray(documents, dtype=object), action == EDIT, action == WITHHOLD,
                   table["original"].to_numpy(dtype=object) != table["replacement"].to_numpy(dtype=object),
                   table["length"].to_numpy(dtype=np.int64, na_value=0))

    def withheld_documents(self, accept: np.ndarray) -> np.ndarray:
        """Per document (``documents``), whether it is withheld (its withhold row accepted)."""
        withheld = np.zeros(len(self.documents), dtype=bool)
        withheld[self.codes[np.asarray(accept, dtype=bool) & self.is_withhold]] = True
        return withheld

    def withheld_edits(self, accept: np.ndarray) -> np.ndarray:
        """The edit rows of documents withheld: not in the release, nor counted."""
        return self.is_edit & self.withheld_documents(accept)[self.codes]

    def accepted_rows(self, accept: np.ndarray) -> np.ndarray:
        """The rows of the edits the release makes: accepted, of a document released, changing its text."""
        return np.flatnonzero(np.asarray(accept, dtype=bool) & self.is_edit & self.changes
                              & ~self.withheld_edits(accept))

    def accepted_lengths(self, accept: np.ndarray) -> tuple[dict[str, int], set[str]]:
        """What ``accept`` decides, in characters: those the accepted edits redact in each document, and the
        documents to withhold."""
        rows = self.accepted_rows(accept)
        removed = np.bincount(self.codes[rows], weights=self.lengths[rows], minlength=len(self.documents))
        edited = np.bincount(self.codes[rows], minlength=len(self.documents)) > 0
        return ({str(d): int(n) for d, n in zip(self.documents[edited], removed[edited])},
                set(self.documents[self.withheld_documents(accept)].tolist()))


def withheld_edits(table: pd.DataFrame) -> np.ndarray:
    """The edit rows of documents withheld (an accepted ``withhold`` row): not in the release, nor counted."""
    return DecisionRows.of(table).withheld_edits(table["accept"].to_numpy(dtype=bool))


def accepted(table: pd.DataFrame) -> tuple[dict[str, list[Edit]], set[str]]:
    """The accepted edits by document (a no-op, whose replacement is its original, is no edit) and the documents
    to withhold; the edits of a document withheld are none: they are not in the release, nor counted."""
    facts, accept = DecisionRows.of(table), table["accept"].to_numpy(dtype=bool)
    rows = facts.accepted_rows(accept)
    columns = (facts.doc_ids, table["offset"].to_numpy(dtype=np.int64, na_value=-1), facts.lengths,
               table["original"].to_numpy(dtype=object), table["replacement"].to_numpy(dtype=object),
               table["term"].astype(str).to_numpy(dtype=object),
               table["kind"].fillna("").astype(str).to_numpy(dtype=object))
    edits: dict[str, list[Edit]] = {}
    for doc_id, offset, length, was, becomes, term, kind in zip(*(c[rows].tolist() for c in columns)):
        edits.setdefault(doc_id, []).append(Edit(offset, length, was, becomes, term, kind))
    return edits, set(facts.documents[facts.withheld_documents(accept)].tolist())


def accepted_lengths(table: pd.DataFrame) -> tuple[dict[str, int], set[str]]:
    """What :func:`accepted` decides, in characters: those the accepted edits redact in each document, and the
    documents to withhold (no edit is built)."""
    return DecisionRows.of(table).accepted_lengths(table["accept"].to_numpy(dtype=bool))


def decisions_csv(table: pd.DataFrame, config_id: str, held_out: str | None = None) -> str:
    """The table as CSV text for a spreadsheet: the :data:`COLUMNS`, then :data:`CONFIG_COLUMN` (``config_id``,
    the audit's, on every row) and, with ``held_out``, :data:`HELD_OUT_COLUMN` (the attacker the search never
    consulted, which verifies the redacted release); text cells neutralised (see the module's docstring)."""
    frame = typed(table)
    for column in TEXT_COLUMNS:
        frame[column] = frame[column].map(neutralise_cell)
    frame[CONFIG_COLUMN] = neutralise_cell(config_id)
    if held_out is not None:
        frame[HELD_OUT_COLUMN] = neutralise_cell(held_out)
    return frame.to_csv(index=False, lineterminator="\r\n")  # lines as a spreadsheet ends them: a cell holding
    # either line break is quoted


def read_decisions(source: str | Path | bytes, texts: Mapping[str, str], *, name: str | None = None,
                   encoding: str = "utf-8") -> pd.DataFrame:
    """Read a decisions table (CSV, JSONL or Parquet with the :data:`COLUMNS`; CSV and JSONL in ``encoding``) and
    check it against the released ``texts`` (doc id -> text): each row's document is in the release, its action,
    source and ``accept`` are valid, an edit's offset and length lie in its text and its ``original`` is what the
    text holds there, and no two accepted edits of a document overlap or repeat. A CSV file's cells are read as
    :func:`decisions_csv` wrote them (one leading apostrophe taken off). A bad table raises
    :class:`~cpa_core.common.errors.DataError` naming the file, row (from 1, header excluded) and column, what was
    expected and what was found (never the released text)."""
    return _read_checked(source, texts, name, encoding)[0]


def _read_checked(source, texts: Mapping[str, str], name: str | None, encoding: str
                  ) -> tuple[pd.DataFrame, list[str] | None]:
    """The checked table (:func:`read_decisions`) and each row's configuration id as the file gives it (blank when
    its cell is empty; ``None`` when the file has no :data:`CONFIG_COLUMN`)."""
    name = name or (str(source) if not isinstance(source, (bytes, bytearray)) else "<upload>")
    frame, _ = read_table(source, name, encoding=encoding)
    if FORMATS.get(Path(name).suffix.lower()) == "csv":
        frame = frame.map(restore_cell)
    columns = {str(c).strip().lower(): c for c in frame.columns}
    missing = [c for c in ("doc_id", "action", "offset", "length", "original", "replacement", "accept")
               if c not in columns]
    if missing:
        raise DataError(name, f"missing column '{missing[0]}'", expected="the columns " + ", ".join(COLUMNS),
                        found=f"{len(frame.columns)} columns")
    frame = frame.rename(columns={v: k for k, v in columns.items()})
    for column in COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    rows = []
    for number, record in enumerate(frame.to_dict(orient="records"), start=1):
        rows.append(_checked(name, number, record, texts))
    table = typed(pd.DataFrame(rows, columns=list(COLUMNS)))
    _check_overlaps(name, table)
    if CONFIG_COLUMN not in frame.columns:
        return table, None
    return table, ["" if _blank(v) else str(v).strip() for v in frame[CONFIG_COLUMN]]


def review_decisions(source: str | Path | bytes, texts: Mapping[str, str], config_id: str, *,
                     name: str | None = None, encoding: str = "utf-8", generalizer: Replacer | None = None
                     ) -> tuple[pd.DataFrame, list[str]]:
    """A reviewed table to apply to the release of the audit of configuration ``config_id``: read and checked
    (:func:`read_decisions`), each row naming that configuration (:data:`CONFIG_COLUMN`) and each accepted edit
    redacting (see the module's docstring; ``generalizer``: the ``generalize`` strategy of the audit's registry and
    the curator's table, whose generalisations may write new words). Returns the table and what to warn about:
    rows that name no configuration (an older table without the column) are applied, and said. A row that names
    another configuration, or an edit that writes words of its own (but for the curator's own rewording, applied and
    said), raises
    :class:`~cpa_core.common.errors.DataError` (file, row, column, expected, found)."""
    name = name or (str(source) if not isinstance(source, (bytes, bytearray)) else "<upload>")
    table, ids = _read_checked(source, texts, name, encoding)
    notes = []
    if ids is None:
        notes.append(f"{name}: no column '{CONFIG_COLUMN}' (a table written before decisions named their audit): "
                     f"applied without checking that it decides audit {config_id}")
    else:
        for number, found in enumerate(ids, start=1):
            if found and found != config_id:
                raise DataError(name, "decisions of another audit", row=number, column=CONFIG_COLUMN,
                                expected=f"this audit's configuration id {config_id}", found=f"'{short(found)}'")
        unnamed = [number for number, found in enumerate(ids, start=1) if not found]
        if unnamed:
            notes.append(f"{name}: {_rows_text(unnamed)} name{'s' if len(unnamed) == 1 else ''} no configuration "
                         f"(column '{CONFIG_COLUMN}' empty): applied as decisions of audit {config_id}")
    take = table[(table["action"] == EDIT) & table["accept"] & (table["original"] != table["replacement"])]
    rewritten = []
    for index, offset, length, original, replacement in zip(take.index, take["offset"], take["length"],
                                                            take["original"], take["replacement"]):
        added, _ = edit_words(original, replacement)
        if added and not _generalises(generalizer, texts[table.at[index, "doc_id"]], int(offset), int(length),
                                      replacement):
            if table.at[index, "source"] == CURATOR or table.at[index, "kind"] == "rewrite":
                # the curator's own rewording ("a doctor" for a name), or an LLM rewrite the attack kept
                rewritten.append(index + 1)
                continue
            raise DataError(name, "the edit writes words its original does not have", row=index + 1,
                            column="replacement",
                            expected="a deletion, a placeholder such as [CITY] or [REDACTED], words of the original, "
                                     "or a generalisation the registry or a generalisation table (--generalization) "
                                     "gives for it",
                            found=f"{added} new word{'s' if added > 1 else ''}")
    if rewritten:
        notes.append(f"{name}: {_rows_text(rewritten)} of the curator or of an LLM rewrite "
                     f"write{'s' if len(rewritten) == 1 else ''} words the original does not have: applied as written; "
                     "audit the redacted release again to judge them")
    return table, notes


def _generalises(generalizer: Replacer | None, text: str, offset: int, length: int, replacement: str) -> bool:
    """Whether ``replacement`` is what ``generalizer`` makes of the span of ``text`` (as the search asks it)."""
    if generalizer is None:
        return False
    span = Span(offset, offset + length, text[offset:offset + length], "", 0.0)
    return generalizer.generalization(span, text) == replacement


def edit_words(original: str, replacement: str) -> tuple[int, int]:
    """The distinct words (case and accents aside) that ``replacement`` writes and ``original`` does not have,
    outside the tool's placeholders (:data:`PLACEHOLDER_FORM`), and those of ``original`` it keeps."""
    had = set(_ANY_WORD.findall(fold(original)))
    written = set(_ANY_WORD.findall(fold(PLACEHOLDER_FORM.sub(" ", replacement))))
    return len(written - had), len(written & had)


def _rows_text(rows: Sequence[int]) -> str:
    """``row 3`` or ``4 rows (3, 9, 12, ...)``: the first :data:`KEPT_LIMIT` of them."""
    if len(rows) == 1:
        return f"row {rows[0]}"
    shown = ", ".join(map(str, rows[:KEPT_LIMIT])) + (", ..." if len(rows) > KEPT_LIMIT else "")
    return f"{len(rows)} rows ({shown})"


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip())


def _checked(name: str, number: int, record: dict, texts: Mapping[str, str]) -> dict:
    doc_id = "" if _blank(record["doc_id"]) else str(record["doc_id"]).strip()
    if doc_id not in texts:
        raise DataError(name, "a document that is not in the release", row=number, column="doc_id",
                        expected="a doc_id of the released documents",
                        found="an empty cell" if not doc_id else f"'{doc_id[:40]}'")
    action = "" if _blank(record["action"]) else str(record["action"]).strip().lower()
    if action not in (EDIT, WITHHOLD):
        raise DataError(name, "unknown action", row=number, column="action", expected=f"{EDIT} or {WITHHOLD}",
                        found=f"'{action[:20]}'")
    accept = str(record["accept"]).strip().lower() if not _blank(record["accept"]) else ""
    if accept not in _TRUE | _FALSE:
        raise DataError(name, "not a decision", row=number, column="accept", expected="true or false",
                        found="an empty cell" if not accept else f"'{accept[:20]}'")
    source = "" if _blank(record["source"]) else str(record["source"]).strip().lower()
    if source and source not in SOURCES:
        raise DataError(name, "unknown source", row=number, column="source", expected=", ".join(SOURCES),
                        found=f"'{source[:20]}'")
    out = {column: record.get(column) for column in COLUMNS}
    out.update(doc_id=doc_id, action=action, accept=accept in _TRUE, source=source or CURATOR)
    if action == WITHHOLD:
        return out
    text = texts[doc_id]
    place = {}
    for column in ("offset", "length"):
        value = record[column]
        try:
            number_of = float(value)
            place[column] = int(number_of) if not _blank(value) and number_of == int(number_of) else None
        except (TypeError, ValueError, OverflowError):
            place[column] = None
        if place[column] is None or place[column] < 0:
            raise DataError(name, f"not a valid {column}", row=number, column=column,
                            expected="a whole number of characters, 0 or more", found=_shown(value))
    offset, length = place["offset"], place["length"]
    if offset + length > len(text):
        raise DataError(name, "beyond the end of the document", row=number, column="offset",
                        expected=f"offset + length within its {len(text):,} characters",
                        found=f"{offset:,} + {length:,}")
    original = "" if _blank(record["original"]) and length == 0 else str(record["original"] if
                                                                          record["original"] is not None else "")
    if text[offset:offset + length] != original:
        raise DataError(name, "the original is not what the document holds at this offset", row=number,
                        column="original", expected="the released text at offset, length (was the release edited "
                                                    "since?)", found=f"{len(original)} characters that differ")
    replacement = "" if _blank(record["replacement"]) else str(record["replacement"])
    kind = "" if _blank(record["kind"]) else str(record["kind"]).strip()
    try:
        Edit(offset, length, original, replacement, "", kind)
    except ValueError as error:
        raise DataError(name, str(error), row=number, column="kind") from None
    out.update(offset=offset, length=length, original=original, replacement=replacement, kind=kind or
               ("delete" if replacement == "" else "placeholder"), term="" if _blank(record["term"]) else
               str(record["term"]))
    return out


def _shown(value) -> str:
    return "an empty cell" if _blank(value) else f"'{str(value)[:20]}'"


def _check_overlaps(name: str, table: pd.DataFrame) -> None:
    take = table[(table["action"] == EDIT) & table["accept"]]
    for doc_id, rows in take.groupby("doc_id", sort=False):
        ordered = rows.sort_values(["offset", "length"], kind="stable")
        reach, last = -1, None
        for index, offset, length in zip(ordered.index, ordered["offset"], ordered["length"]):
            if (int(offset), int(length)) == last:
                raise DataError(name, f"two accepted edits of document '{str(doc_id)[:40]}' edit the same span",
                                row=index + 1, column="offset", expected="each span of a document edited once",
                                found=f"offset {int(offset):,}, length {int(length):,} twice")
            if int(offset) < reach:
                raise DataError(name, f"two accepted edits of document '{str(doc_id)[:40]}' overlap", row=index + 1,
                                column="offset", expected="accepted edits of one document that do not overlap",
                                found=f"offset {int(offset):,} before the end ({reach:,}) of another")
            reach, last = max(reach, int(offset) + int(length)), (int(offset), int(length))


def proposed_decisions(result: AuditResult | PanelResult, attacker: Attacker | Sequence[Attacker], registry: Registry, texts: Mapping[str, str], *,
                       policy: ReleasePolicy | None = None, confidence=None,
                       strategy: str | Replacement | Replacer = "placeholder", generalization=None,
                       deny: Iterable[str] = (), allow: Iterable[str] = (), common_share: float | None = COMMON_SHARE,
                       progress=None, rewriter: Rewriter | None = None) -> tuple[pd.DataFrame, list[Suggestion]]:
    """The review table a search proposes, and its suggestions: every flagged document searched
    (:func:`~cpa_core.redaction.suggestions.suggest_redactions`, never redacting a ``deny`` word nor, in a document,
    a function word of the release: a word in more than ``common_share`` of the released documents or of those of
    its language, :func:`~cpa_core.attack.function_words.function_words`), then every occurrence of an ``allow``
    word in any document of the release, accepted unless it overlaps a suggested edit or raises its document's risk
    under the stored calibration: the risk of the document with its suggested edits made, the text the release
    will hold, against that text with the allow list's edits made too. With a ``rewriter``, every document the search
    would withhold is offered to an LLM rewrite, kept only when it is safe (:func:`~cpa_core.redaction.rewrite.
    rewrite_withheld`, under the same target as the search)."""
    replacer = replacement_for(strategy, registry, generalization) if isinstance(strategy, str) else strategy
    suggestions = suggest_redactions(result, attacker, registry, dict(texts), policy=policy, confidence=confidence,
                                     strategy=replacer, deny=tuple(deny), progress=progress,
                                     function_words=function_words(texts.values(), common_share))
    if rewriter is not None:
        members = panel_members(result, attacker)
        stored = PanelStoredRisk(members, registry, confidence)
        target = reachable(policy or members[0][0].config.policy, stored.linkage_floor)
        pools = stored.certificates()
        names = {doc_id: (part, row) for doc_id, (part, row) in stored.documents().items()
                 if pools[part].split.table.pool_sizes[row] >= target.flag_below}  # no rewrite gives a set of k else
        suggestions = rewrite_withheld(suggestions, names, dict(texts), stored.of, rewriter, target)
    rows = []
    allow = [w for w in allow if str(w).strip()]
    if allow:
        found = allow_edits(texts, allow, chooser(replacer))
        suggested = {s.doc_id: list(s.edits) for s in suggestions}

        def overlaps(doc_id: str, edit: Edit) -> bool:
            return any(e.offset < edit.offset + edit.length and edit.offset < e.offset + e.length
                       for e in suggested.get(doc_id, ()))
        free = {d: [e for e in edits if not overlaps(d, e)] for d, edits in found.items()}
        stored = PanelStoredRisk(panel_members(result, attacker), registry, confidence)
        where = stored.documents()
        ids = [d for d in found if d in where and free[d]]
        released = [apply_edits(texts[d], suggested.get(d, [])) for d in ids]
        before = stored.of([where[d] for d in ids], released)
        after = stored.of([where[d] for d in ids], [apply_edits(texts[d], suggested.get(d, []) + free[d]) for d in ids])
        rows = allow_rows(found, {d: b.risk for d, b in zip(ids, before)}, {d: a.risk for d, a in zip(ids, after)})
        for row in rows:
            if overlaps(row["doc_id"], Edit(row["offset"], row["length"], row["original"], row["replacement"], "")):
                row.update(accept=False, reason=OVERLAPS)
    return decisions_table(suggestions, rows), suggestions


def redaction_log(config: AuditConfig, strategy: str | Replacement, suggestions: Sequence[Suggestion],
                  policy: ReleasePolicy | None = None, confidence=None,
                  generalization: GeneralizationTable | None = None, *, decisions: pd.DataFrame | None = None,
                  deny: Sequence[str] = (), allow: Sequence[str] = (), applied: str | None = None,
                  common_share: float | None = None, notes: Sequence[str] = (), config_id: str | None = None,
                  held_out: str | None = None, function_words: FunctionWords | None = None,
                  rewrite: Mapping | None = None) -> dict:
    """The machine-readable record of a redaction (``redactions.json``): the configuration, strategy and
    generalisation table (file and sha256) used, what the replacer derived from the registry (field names:
    hierarchies, the age band field, the category fields), the policy, the deny and allow lists, counts of edits by
    kind, per searched document its action, risk before and after (indicative) and its edits (offset, length,
    original, replacement, kind), the share of documents above which a word was never proposed
    (``common_share``), and the decisions (:func:`decisions_summary`; ``applied``: the reviewed file applied, if
    any, and ``notes``: what was said about it). ``config_id``: the audit's (an attacker panel's; default
    ``config``'s); ``held_out``: the attacker the search never consulted, named in the decisions table;
    ``function_words``: the search's (:meth:`~cpa_core.attack.function_words.FunctionWords.describe`); ``rewrite``:
    the LLM rewrite's settings (:meth:`~cpa_core.redaction.rewrite.Rewriter.params`) when one was offered."""
    policy = policy or config.policy
    config_id = config_id or config.config_id
    confidence = config.policy_confidence if confidence is None else confidence
    derived = None
    if isinstance(strategy, Replacer):
        generalization = generalization or strategy.table
        name = strategy.strategy
        derived = None if name == "delete" else strategy.vocabulary.to_dict()
    else:
        name = strategy if isinstance(strategy, str) else "custom"
    return {"config_id": config_id, "strategy": name, "held_out": held_out,
            "generalization": None if generalization is None else generalization.to_dict(),
            "derived": derived,
            "rule": policy.rule, "confidence": float(confidence),
            "note": "set sizes after are indicative: the redacted release is a new release mechanism and needs its "
                    "own calibration",
            "deny": list(deny), "allow": list(allow), "common_share": common_share,
            "function_words": None if function_words is None else function_words.describe(),
            "rewrite": None if rewrite is None else dict(rewrite),
            "n_documents": len(suggestions), "n_reach_k": sum(s.reaches_k for s in suggestions),
            "n_withhold": sum(s.action == WITHHOLD for s in suggestions),
            "edits_by_kind": edit_kinds(suggestions),
            "decisions": None if decisions is None else decisions_summary(decisions, config_id, applied, notes,
                                                                           held_out),
            "documents": [s.to_dict() for s in suggestions]}


@dataclass(frozen=True)
class EditCounts:
    """The accepted edit rows of a decisions table that do not redact as asked, by row (from 1, header excluded):
    ``no_ops`` (the replacement is the original: not applied) and ``keeping_words`` (the replacement keeps words
    of the original: applied)."""

    no_ops: tuple[int, ...]
    keeping_words: tuple[int, ...]

    @classmethod
    def of(cls, table: pd.DataFrame) -> "EditCounts":
        """Those of the released documents (a withheld document's edits are not in the release: not counted)."""
        take = table[((table["action"] == EDIT) & table["accept"].astype(bool)).to_numpy() & ~withheld_edits(table)]
        no_ops, keeping = [], []
        for index, original, replacement in zip(take.index, take["original"], take["replacement"]):
            if original == replacement:
                no_ops.append(int(index) + 1)
            elif edit_words(original, replacement)[1]:
                keeping.append(int(index) + 1)
        return cls(tuple(no_ops), tuple(keeping))

    def said(self) -> list[str]:
        """What a summary line says of them (nothing when there are none)."""
        out = []
        if self.no_ops:
            out.append(f"{len(self.no_ops)} no-op edit{'s' if len(self.no_ops) > 1 else ''} not applied (the "
                       f"replacement is the original: {_rows_text(self.no_ops)})")
        if self.keeping_words:
            one = len(self.keeping_words) == 1
            out.append(f"{len(self.keeping_words)} edit{'' if one else 's'} keep{'s' if one else ''} words of the "
                       f"original ({_rows_text(self.keeping_words)})")
        return out


def decisions_summary(table: pd.DataFrame, config_id: str, applied: str | None = None,
                      notes: Sequence[str] = (), held_out: str | None = None) -> dict:
    """What a decisions table decides: its sha256 (as :func:`decisions_csv` writes it for the audit of
    configuration ``config_id``), its rows accepted and rejected by source, the edits applied and the accepted ones
    that are no-ops (not applied) or keep words of their original (:class:`EditCounts`), the documents withheld,
    where words of the allow list stay (:func:`allow_list_kept`), the file it was read from (``applied``) and what
    was said about it (``notes``)."""
    edits, withheld = accepted(table)
    counts = {}
    for (source, take), n in table[table["action"] == EDIT].groupby(["source", "accept"]).size().items():
        counts.setdefault(source, {"accepted": 0, "rejected": 0})["accepted" if take else "rejected"] = int(n)
    checked = EditCounts.of(table)
    return {"sha256": hashlib.sha256(decisions_csv(table, config_id, held_out).encode("utf-8")).hexdigest(),
            "file": applied,
            "config_id": config_id, "rows": len(table), "edits": counts,
            "applied_edits": sum(len(document) for document in edits.values()),
            "no_op_edits": {"count": len(checked.no_ops), "rows": list(checked.no_ops)},
            "edits_keeping_words": {"count": len(checked.keeping_words), "rows": list(checked.keeping_words)},
            "documents_edited": len(edits), "withheld": sorted(withheld),
            "characters": sum(e.length for document in edits.values() for e in document),
            "allow_list_kept": [{"reason": reason, "documents": len(ids), "doc_ids": ids}
                                for reason, ids in allow_list_kept(table).items()],
            "notes": list(notes)}


def redaction_lineage(source: Mapping, source_config_id: str, decisions: Mapping, *, from_audit=None,
                      attackers: Sequence[Mapping] = (), held_out: str | None = None,
                      kept: Mapping | None = None) -> dict:
    """What the audit of a redacted release records of where it comes from (its inputs' and summary's
    ``redaction``), read by its report, its sign-off and the History: the release it was redacted from (``source``:
    its documents' ``file``, ``sha256`` and ``rows``; ``source_config_id``, and ``from_audit``, the audit's id in the
    history when it has one), the ``decisions`` (their :func:`decisions_summary`) and what they did to its documents
    (``counts``: withheld, edited, untouched, edits applied, characters removed, read from that summary), each
    attacker's first-guess rate before and after (``attackers``: ``attacker``, ``held_out``, ``before``, ``after``, as
    :func:`~cpa_core.report.metrics.first_guess_figures` gives them), the attacker the search never consulted
    (``held_out``) and what the release keeps (``kept``)."""
    summary = dict(decisions)
    withheld, edited = len(summary["withheld"]), summary["documents_edited"]
    rows = int(source.get("rows") or 0)
    return {"from_audit": from_audit, "source_config_id": source_config_id,
            "source": {"file": source.get("file"), "sha256": source.get("sha256"), "rows": rows},
            "counts": {"withheld": withheld, "edited": edited, "untouched": rows - withheld - edited if rows else None,
                       "edits": summary["applied_edits"], "characters": summary["characters"]},
            "decisions": summary, "attackers": [dict(a) for a in attackers], "held_out": held_out, "kept": kept}


def redacted_config(config: AuditConfig, frame: pd.DataFrame) -> AuditConfig:
    """The declared configuration to audit the redacted release (its documents' table ``frame``) with: the same
    threat model and release policy, unbound from the original documents; under the split protocol, a declared
    ``n_cal`` and ``n_test`` that the release's labelled documents (some withheld) no longer hold are scaled down in
    proportion."""
    labelled = int(frame["identity_id"].notna().sum()) if "identity_id" in frame else len(frame)
    out = replace(config, data={})
    n_cal, n_test = config.n_cal, config.n_test
    if config.protocol != "split" or (n_cal or 0) + (n_test or 0) <= labelled:
        return out
    share = labelled / ((n_cal or 0) + (n_test or 0))
    return replace(out, n_cal=None if n_cal is None else max(1, int(n_cal * share)),
                   n_test=None if n_test is None else max(1, int(n_test * share)))
