"""The curator's decisions on a release's redactions: one table across documents, a row per edit (suggested by
the search, forced by the allow list, or typed by the curator) and a row per document to withhold, each accepted
or rejected. The redacted release is built from the accepted rows only.

Columns (:data:`COLUMNS`): ``doc_id``; ``action`` (``edit`` or ``withhold``); for an edit its ``offset`` and
``length`` in the *released* text, the ``original`` text there, its ``replacement``, the evidence ``term`` and the
``kind`` of replacement; the ``source`` (``suggested``, ``allow list`` or ``curator``); the document's risk under
the stored calibration before and after (``set_size_*``, ``linkage_*``: for a suggested edit, once its term and
every earlier one is redacted; indicative); the ``reason`` (why to withhold, or why an edit is not accepted by
default); and ``accept``. The table is written and read as CSV (:func:`decisions_csv`, :func:`read_decisions`),
so a pipeline can apply a reviewed table (``cpa redact --decisions``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from cpa_core.attack.explainers import Span, find_clue, fold
from cpa_core.audit.rescoring import StoredRisk
from cpa_core.common.errors import DataError
from cpa_core.io.reading import read_table
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
    suggest_redactions,
)

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.audit.results import AuditResult
    from cpa_core.io.tables import Registry

COLUMNS = ("doc_id", "action", "offset", "length", "original", "replacement", "term", "kind", "source",
           "set_size_before", "set_size_after", "linkage_before", "linkage_after", "reason", "accept")
EDIT = "edit"
SUGGESTED, ALLOW_LIST, CURATOR = "suggested", "allow list", "curator"
SOURCES = (SUGGESTED, ALLOW_LIST, CURATOR)
_TRUE, _FALSE = {"true", "yes", "1", "y", "t"}, {"false", "no", "0", "n", "f"}
_TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
_WORD = re.compile(r"(?u)\b\w\w+\b")


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
    for name in ("doc_id", "action", "original", "replacement", "term", "kind", "source", "reason"):
        frame[name] = frame[name].fillna("").astype(str)
    frame["accept"] = frame["accept"].astype(bool)
    return frame.reset_index(drop=True)


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
    """Rows of allow-list edits, each with its document's risk before and after them all (when known): accepted
    unless they would raise that risk."""
    rows = []
    for doc_id, document in edits.items():
        was = None if before is None else before.get(doc_id)
        now = None if after is None else after.get(doc_id)
        raises = was is not None and now is not None and not now.no_higher_than(was)
        for edit in document:
            rows.append(_row(doc_id, EDIT, edit, ALLOW_LIST, was, now,
                             "the allow list's edits raise this document's risk" if raises else "", not raises))
    return rows


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


def accepted(table: pd.DataFrame) -> tuple[dict[str, list[Edit]], set[str]]:
    """The accepted edits by document and the documents to withhold."""
    take = table[table["accept"].astype(bool)]
    withheld = set(take.loc[take["action"] == WITHHOLD, "doc_id"].astype(str))
    edits: dict[str, list[Edit]] = {}
    for row in take[take["action"] == EDIT].itertuples(index=False):
        edits.setdefault(str(row.doc_id), []).append(
            Edit(int(row.offset), int(row.length), str(row.original), str(row.replacement), str(row.term),
                 str(row.kind) or ""))
    return edits, withheld


def decisions_csv(table: pd.DataFrame) -> str:
    """The table as CSV text."""
    return typed(table).to_csv(index=False)


def read_decisions(source: str | Path | bytes, texts: Mapping[str, str], *, name: str | None = None
                   ) -> pd.DataFrame:
    """Read a decisions table (CSV, JSONL or Parquet with the :data:`COLUMNS`) and check it against the released
    ``texts`` (doc id -> text): each row's document is in the release, its action, source and ``accept`` are
    valid, an edit's offset and length lie in its text and its ``original`` is what the text holds there, and
    no two accepted edits of a document overlap. A bad table raises :class:`~cpa_core.common.errors.DataError`
    naming the file, row (from 1, header excluded) and column, what was expected and what was found (never the
    released text)."""
    name = name or (str(source) if not isinstance(source, (bytes, bytearray)) else "<upload>")
    frame, _ = read_table(source, name)
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
    return table


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
        ordered = rows.sort_values(["offset", "length"])
        reach = -1
        for index, offset, length in zip(ordered.index, ordered["offset"], ordered["length"]):
            if int(offset) < reach:
                raise DataError(name, f"two accepted edits of document '{str(doc_id)[:40]}' overlap", row=index + 1,
                                column="offset", expected="accepted edits of one document that do not overlap",
                                found=f"offset {int(offset):,} before the end ({reach:,}) of another")
            reach = max(reach, int(offset) + int(length))


COMMON_SHARE = 0.1
"""Words in more than this share of the released documents are never proposed by default: they identify no one
(a link token, the release's function words)."""


def common_words(texts: Iterable[str], share: float | None = COMMON_SHARE) -> list[str]:
    """The words (folded, of two characters or more) that appear in more than ``share`` of the texts, most frequent
    first (none when ``share`` is ``None`` or 0)."""
    texts = list(texts)
    if not share or not texts:
        return []
    counts: dict[str, int] = {}
    for text in texts:
        for word in {fold(w) for w in _WORD.findall(text)}:
            counts[word] = counts.get(word, 0) + 1
    limit = share * len(texts)
    return [w for w, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if n > limit]


def proposed_decisions(result: AuditResult, attacker: Attacker, registry: Registry, texts: Mapping[str, str], *,
                       policy: ReleasePolicy | None = None, confidence=None,
                       strategy: str | Replacement | Replacer = "placeholder", generalization=None,
                       deny: Iterable[str] = (), allow: Iterable[str] = (), common_share: float | None = COMMON_SHARE,
                       progress=None) -> tuple[pd.DataFrame, list[Suggestion]]:
    """The review table a search proposes, and its suggestions: every flagged document searched
    (:func:`~cpa_core.redaction.suggestions.suggest_redactions`, never redacting a ``deny`` word nor a word in more
    than ``common_share`` of the released documents, :func:`common_words`), then every occurrence of an ``allow``
    word in any document of the release, accepted unless it raises its document's risk under the stored
    calibration or overlaps a suggested edit."""
    replacer = replacement_for(strategy, registry, generalization) if isinstance(strategy, str) else strategy
    never = tuple(deny) + tuple(common_words(texts.values(), common_share))
    suggestions = suggest_redactions(result, attacker, registry, dict(texts), policy=policy, confidence=confidence,
                                     strategy=replacer, deny=never, progress=progress)
    rows = []
    allow = [w for w in allow if str(w).strip()]
    if allow:
        found = allow_edits(texts, allow, chooser(replacer))
        stored = StoredRisk(result, attacker, registry, confidence)
        where = stored.documents()
        ids = [d for d in found if d in where]
        before = stored.of([where[d] for d in ids], [texts[d] for d in ids])
        after = stored.of([where[d] for d in ids], [apply_edits(texts[d], found[d]) for d in ids])
        rows = allow_rows(found, {d: b.risk for d, b in zip(ids, before)}, {d: a.risk for d, a in zip(ids, after)})
        suggested = {s.doc_id: [(e.offset, e.offset + e.length) for e in s.edits] for s in suggestions}
        for row in rows:
            end = row["offset"] + row["length"]
            if any(a < end and row["offset"] < b for a, b in suggested.get(row["doc_id"], ())):
                row.update(accept=False, reason="overlaps a suggested edit")
    return decisions_table(suggestions, rows), suggestions


def redaction_log(config: AuditConfig, strategy: str | Replacement, suggestions: Sequence[Suggestion],
                  policy: ReleasePolicy | None = None, confidence=None,
                  generalization: GeneralizationTable | None = None, *, decisions: pd.DataFrame | None = None,
                  deny: Sequence[str] = (), allow: Sequence[str] = (), applied: str | None = None,
                  common_share: float | None = None) -> dict:
    """The machine-readable record of a redaction (``redactions.json``): the configuration, strategy and
    generalisation table (file and sha256) used, what the replacer derived from the registry (field names:
    hierarchies, the age band field, the category fields), the policy, the deny and allow lists, counts of edits by
    kind, per searched document its action, risk before and after (indicative) and its edits (offset, length,
    original, replacement, kind), the share of documents above which a word was never proposed
    (``common_share``), and the decisions: the table's sha256 (of :func:`decisions_csv`), rows accepted
    and rejected by source, documents withheld, and the reviewed file applied (``applied``), if any."""
    policy = policy or config.policy
    confidence = config.policy_confidence if confidence is None else confidence
    derived = None
    if isinstance(strategy, Replacer):
        generalization = generalization or strategy.table
        name = strategy.strategy
        derived = None if name == "delete" else strategy.vocabulary.to_dict()
    else:
        name = strategy if isinstance(strategy, str) else "custom"
    return {"config_id": config.config_id, "strategy": name,
            "generalization": None if generalization is None else generalization.to_dict(),
            "derived": derived,
            "rule": policy.rule, "confidence": float(confidence),
            "note": "set sizes after are indicative: the redacted release is a new release mechanism and needs its "
                    "own calibration",
            "deny": list(deny), "allow": list(allow), "common_share": common_share,
            "n_documents": len(suggestions), "n_reach_k": sum(s.reaches_k for s in suggestions),
            "n_withhold": sum(s.action == WITHHOLD for s in suggestions),
            "edits_by_kind": edit_kinds(suggestions),
            "decisions": None if decisions is None else decisions_summary(decisions, applied),
            "documents": [s.to_dict() for s in suggestions]}


def decisions_summary(table: pd.DataFrame, applied: str | None = None) -> dict:
    """What a decisions table decides: its sha256 (as :func:`decisions_csv` writes it), its rows accepted and
    rejected by source, the documents withheld, and the file it was read from (``applied``)."""
    edits, withheld = accepted(table)
    counts = {}
    for (source, take), n in table[table["action"] == EDIT].groupby(["source", "accept"]).size().items():
        counts.setdefault(source, {"accepted": 0, "rejected": 0})["accepted" if take else "rejected"] = int(n)
    return {"sha256": hashlib.sha256(decisions_csv(table).encode("utf-8")).hexdigest(), "file": applied, "rows": len(table),
            "edits": counts, "documents_edited": len(edits), "withheld": sorted(withheld),
            "characters": sum(e.length for document in edits.values() for e in document)}


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
