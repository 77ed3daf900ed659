"""The dashboard's side of redaction: the review table a search proposes, the curator's own text as rows of it,
the release the accepted rows make as a data set of its own, its audit (recorded with what it was redacted from),
and the before/after table of the two audits.

Everything computed here comes from :mod:`cpa_core.redaction` and :mod:`cpa_core.audit.rescoring`; risks of edited
texts are indicative (an edited release is a new release mechanism, and only a new calibration certifies it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import streamlit as st

from cpa_core.attack.base import Attacker
from cpa_core.attack.explainers import Span, fold
from cpa_core.attack.function_words import COMMON_SHARE, function_words
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import StoredRisk
from cpa_core.audit.results import Certificate
from cpa_core.common.errors import CPAError, DataError
from cpa_core.io.columns import redacted_columns
from cpa_core.redaction.decisions import (
    ALLOW_LIST,
    CURATOR,
    EDIT,
    SUGGESTED,
    DecisionRows,
    accepted,
    curator_rows,
    decisions_summary,
    decisions_table,
    redacted_config,
    redaction_lineage,
    row_keys,
    typed,
    word_rows,
)
from cpa_core.redaction.suggestions import (
    REPLACEMENTS,
    WITHHOLD,
    Suggestion,
    apply_edits,
    decided_frame,
    redacted_file,
    redacted_name,
    suggest_redactions,
)
from cpa_core.redaction.utility import ReleaseUtility, characters_utility, packaged_embedder, release_utility
from cpa_core.report.formatting import counted
from cpa_core.report.metrics import first_guess_figures
from cpa_core.store.reopen import declared_attacker
from cpa_ui.analysis import row_of
from cpa_ui.attackers import declare_panel
from cpa_ui.cache import audit_run, fingerprint
from cpa_ui.state import AuditRun, DataSet, Review, state, widget_value
from cpa_ui.text import plain

STRATEGY_LABELS = {"placeholder": "a placeholder ([REDACTED], or its category where the registry says)",
                   "generalize": "a generalisation where the data allows (city → region, year → decade)",
                   "delete": "nothing (delete the words)"}
STRATEGIES = tuple(sorted(REPLACEMENTS, key=lambda s: (list(STRATEGY_LABELS).index(s) if s in STRATEGY_LABELS
                                                         else len(STRATEGY_LABELS), s)))
REVIEW_COLUMNS = {"accept": "accept", "doc_id": "doc_id", "action": "action", "original": "original",
                  "replacement": "replacement", "term": "term", "source": "origin", "set_size_before": "set_size_before",
                  "set_size_after": "indicative_after", "linkage_before": "linkage_before",
                  "linkage_after": "linkage_after_indicative", "reason": "reason"}
"""The review table's columns as shown, and their names there (the decisions table's others go to the download)."""


def strategy_label(strategy: str) -> str:
    """How a replacement strategy is offered (its name when it has no label of its own)."""
    return STRATEGY_LABELS.get(strategy, strategy)


@dataclass(frozen=True)
class Rescored:
    """An edited text's set size under the stored calibration (indicative) and its remaining evidence (offsets
    into the edited text)."""

    set_size: int
    evidence: tuple[Span, ...]


def reaudit_attacker(run: AuditRun, data: DataSet, threat, scores) -> Attacker:
    """A fresh attacker of the run's declared threat model for the re-audit (the run's own keeps what it learned
    from the release it audited): the one declared on the Threat model page when it still declares the run's
    configuration (its LLM endpoint included), else the run's attacker rebuilt from its parameters."""
    if threat is not None:
        try:
            members = declare_panel(data, threat, scores).members
        except CPAError:
            members = ()
        for member in members:
            if member.config.config_id == run.result.config.config_id:
                return member.attacker
    return declared_attacker(run.result.config, data.registry)


@st.cache_data(show_spinner="Finding the fewest words whose redaction makes this document acceptable…",
               max_entries=256)
def document_suggestion(key: str, doc_id: str, strategy: str, confidence: float, policy: ReleasePolicy,
                        deny: tuple[str, ...], share: float | None, _run: AuditRun, _data: DataSet
                        ) -> Suggestion | None:
    """The suggested redaction of one flagged document, by the search the Redact page runs (``deny``: words never
    redacted; ``share``: of its function words); ``None`` when the attacker cannot explain its matches."""
    found = suggest_redactions(_run.result, _run.attacker, _data.registry, _data.documents.texts(),
                               policy=policy, confidence=confidence, strategy=strategy, doc_ids=[doc_id], deny=deny,
                               function_words=function_words(_data.documents.texts().values(), share))
    return found[0] if found else None


def rewrite_endpoint(data: DataSet) -> dict | None:
    """The LLM endpoint a rewrite would use: the configuration file's ``[llm]`` settings with the endpoint declared on
    the Threat model page; ``None`` when no base URL and model are declared."""
    settings = {**data.project.llm, **{k: v for k, v in dict(state.threat.llm if state.threat else ()).items() if v}}
    return settings if settings.get("base_url") and settings.get("model") else None


def redaction_settings(run: AuditRun) -> dict:
    """The settings of a redaction search, as the Redact page shows them and the drill-down uses them (one set for
    both): the replacement ``strategy``, the ``deny`` and ``allow`` lists and the ``common`` share of function
    words, from the review under way (its lists as applied to its rows, the rest as its last search asked), else
    the defaults."""
    review = current_review(run)
    settings = {"strategy": STRATEGIES[0], "deny": (), "allow": (), "common": COMMON_SHARE}
    search = None if review is None else asked(review.ask)
    if search is not None:
        settings.update(strategy=search["strategy"], common=float(search["common"]))
    if review is not None:  # the lists as applied to its rows, which a search reads too (cleared ones included)
        settings.update(deny=tuple(review.lists[0]), allow=tuple(review.lists[1]))
    return settings


def drill_down_suggestion(run: AuditRun, data: DataSet, doc_id: str, confidence: float,
                          policy: ReleasePolicy) -> Suggestion | None:
    """What the drill-down suggests for a flagged document, with the Redact page's settings
    (:func:`redaction_settings`): the search's suggestion when the Redact page's search went through the document
    with those settings, else the same search of this document alone; both pages propose the same edits."""
    settings = redaction_settings(run)
    review = current_review(run)
    search = None if review is None else asked(review.ask)
    if search is not None:
        same = (search["strategy"], search["confidence"], search["policy"], tuple(search["deny"]),
                float(search["common"]))
        if same == (settings["strategy"], float(confidence), policy, settings["deny"], settings["common"]):
            found = next((s for s in review.suggestions if s.doc_id == str(doc_id)), None)
            if found is not None:
                return found
    return document_suggestion(run.key, doc_id, settings["strategy"], float(confidence), policy, settings["deny"],
                               settings["common"] or None, run, data)


SEARCH_ASK = ("run", "strategy", "confidence", "policy", "deny", "allow", "common", "rewrite")
"""What a search of the Redact page was asked (:attr:`~cpa_ui.state.Review.ask`), in order."""


def asked(ask: tuple) -> dict | None:
    """What a search of the Redact page was asked, by name (:data:`SEARCH_ASK`); ``None`` for a review no search
    made (the curator's own text first)."""
    return dict(zip(SEARCH_ASK, ask)) if len(ask) == len(SEARCH_ASK) else None


def edits_table(suggestion: Suggestion) -> pd.DataFrame:
    """The edits of a suggestion, each to accept or not (all accepted to start with), with the set size once its
    term is redacted."""
    return pd.DataFrame({"accept": True, "offset": [e.offset for e in suggestion.edits],
                         "original": [e.original for e in suggestion.edits],
                         "replacement": [e.replacement for e in suggestion.edits],
                         "evidence": [e.term for e in suggestion.edits],
                         "set_size_after": [getattr(suggestion.risk_after(e.term), "set_size", None)
                                            for e in suggestion.edits]},
                        columns=["accept", "offset", "original", "replacement", "evidence", "set_size_after"])


def rescore(run: AuditRun, data: DataSet, confidence: float, doc_id: str, text: str, explain) -> Rescored:
    """Attack an edited text of a document again and count its set under the stored calibration."""
    cert = run.result.certificate(confidence)
    found = StoredRisk(run.result, run.attacker, data.registry, confidence).of([(cert, row_of(cert, doc_id))],
                                                                              [text], with_linkage=False)[0]
    return Rescored(found.risk.set_size, tuple(explain.spans(text, list(found.rows))) if explain is not None else ())


BY_YOU, SEARCH = "you", "search"
"""Who decided a row the curator ticked, or decided in bulk, and a row as proposed (the review table's
``decided by``)."""
NEVER, ALWAYS = "never redact: ", "always redact: "
"""How a row decided by a word of the deny or allow list names it (the word follows)."""
PAGE_ROWS = 50
"""Rows of the review table shown at once: no page sends the browser the whole table."""
VIEWS = ("rows to review", "documents to withhold", "accepted edits", "rejected rows",
         "edits of documents withheld (folded)")
"""Which rows of the decisions table the review table shows; the edits of a document withheld are folded under its
withhold row (not in the release) and shown only on their own."""


def review_positions(review: Review, view: str, term: str | None = None, doc_id: str = "") -> np.ndarray:
    """The rows of the decisions table the review table shows, in order: those of the ``view``
    (:data:`VIEWS`), of edits of ``term`` only when one is chosen, of one document when ``doc_id`` is given."""
    table, rows = review.table, review.rows
    accept = table["accept"].to_numpy(dtype=bool)
    hidden = rows.withheld_edits(accept)
    shown = {VIEWS[0]: ~hidden, VIEWS[1]: rows.is_withhold, VIEWS[2]: rows.is_edit & accept & ~hidden,
             VIEWS[3]: ~accept & ~hidden, VIEWS[4]: hidden}[view]
    if term is not None:
        shown = shown & rows.is_edit & (table["term"] == term).to_numpy()
    if doc_id:
        shown = shown & (rows.doc_ids == str(doc_id))
    return np.flatnonzero(shown)


def review_page(review: Review, positions: np.ndarray) -> pd.DataFrame:
    """The rows at ``positions`` as the review table shows them: the columns of :data:`REVIEW_COLUMNS`, who decided
    each (``decided by``: the search, you, or a word of the deny or allow list) and, on a withhold row, the edits of
    the document folded under it."""
    table = review.table
    rows = table.iloc[positions]
    page = rows[list(REVIEW_COLUMNS)].rename(columns=REVIEW_COLUMNS).reset_index(drop=True)
    page.insert(1, "decided_by", [review.decided.get(review.keys[p], (None, SEARCH))[1] for p in positions])
    facts = review.rows
    withhold = facts.is_withhold[positions]
    if withhold.any():
        edits = np.bincount(facts.codes[facts.is_edit], minlength=len(facts.documents))[facts.codes[positions]]
        page["folded_edits"] = pd.array([int(n) if w and a else None for n, w, a in
                                         zip(edits, withhold, rows["accept"])], dtype="Int64")
    return page


def review_rows(review: Review, positions: np.ndarray) -> list[tuple[int, str, bool, str]]:
    """The rows at ``positions`` as the review table shows them, each a checkbox: its position in the decisions
    table, the checkbox's key (named by its place on the page), whether the row is accepted, and its label
    (:func:`row_label`). Each checkbox shows its row as decided (:func:`~cpa_ui.state.widget_showing`), so that a bulk
    action, a list, a search or another page updates the page's checkboxes in place."""
    page = review_page(review, positions)
    return [(int(p), f"redact.row.{place}", bool(row["accept"]), row_label(row))
            for place, (p, row) in enumerate(zip(positions, page.to_dict("records")))]


def _number(value, digits: int = 0) -> str | None:
    """A set size or a linkage probability as the review table says it (``None`` when it has none)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return f"{int(value):,}" if digits == 0 else f"{float(value):.{digits}f}"


ORIGINS = {SUGGESTED: "suggested", ALLOW_LIST: "from the allow list", CURATOR: "your own edit"}
"""Where a row of the review table comes from, as its line says it."""


def _change(name: str, before: str | None, after: str | None) -> str:
    """``name before → after``, or what of it is known (nothing when neither is)."""
    if before is None and after is None:
        return ""
    return f"{name} {before or '?'}" + ("" if after is None else f" → {after}")


def row_label(row: dict) -> str:
    """A review table's row in one line (a row of :func:`review_page`), every value from the data shown as text:
    the document, what is done to it (the words and what they become, or withholding it, with its edits folded),
    the evidence term, the document's |C| and linkage probability before and once its term is redacted
    (indicative), where the row comes from and who decided it when not as proposed."""
    withhold = row["action"] == WITHHOLD
    sizes = _number(row["set_size_before"]), None if withhold else _number(row["indicative_after"])
    linkages = _number(row["linkage_before"], 3), None if withhold else _number(row["linkage_after_indicative"], 3)
    if withhold:
        folded = row.get("folded_edits")
        folded = 0 if folded is None or folded is pd.NA else int(folded)
        what = "withhold the document" + (f" ({counted(folded, 'edit')} folded)" if folded else "")
    else:
        what = f"«{row['original']}» → {row['replacement'] or '(deleted)'}"
    parts = [what, "" if withhold or not row["term"] else f"evidence: {row['term']}",
             ", ".join(p for p in (_change("|C|", *sizes), _change("linkage", *linkages)) if p),
             row["reason"] if withhold else "", ORIGINS.get(row["origin"], row["origin"]),
             "" if row["decided_by"] == SEARCH else f"decided by {row['decided_by']}"]
    return f"**{plain(row['doc_id'])}** · " + plain(" · ".join(part for part in parts if part))


def tick_row(position: int, key: str) -> None:
    """The review table's tick: the row at ``position`` accepted or not as its checkbox ``key`` says (a
    checkbox's callback)."""
    state.review = with_ticks(state.review, [position], [bool(widget_value(key))])


def evidence_terms(review: Review, work: pd.DataFrame) -> list[str]:
    """The evidence terms the review table can show the edits of: those of its edits, those the search found no use
    in redacting, and every driving term of the worklist (the drill-down's evidence), case and accents aside as the
    edits name them."""
    table = review.table
    terms = set(table.loc[table["action"] == EDIT, "term"]) | {t for s in review.suggestions for t in s.rejected}
    if "driving_terms" in work.columns:
        terms |= {fold(t) for listed in work["driving_terms"] for t in (listed or ())}
    return sorted(t for t in terms if t)


def review_counts(review: Review) -> dict[str, int]:
    """What the decisions put in the release, in numbers: documents to withhold, edits accepted of the edits
    proposed (a withheld document's are not counted: not in the release), documents edited."""
    rows = review.rows
    accept = review.table["accept"].to_numpy(dtype=bool)
    hidden = rows.withheld_edits(accept)
    kept_edits = rows.is_edit & accept & ~hidden
    return {"withheld": int((rows.is_withhold & accept).sum()), "edits_accepted": int(kept_edits.sum()),
            "edits": int((rows.is_edit & ~hidden).sum()), "folded": int(hidden.sum()),
            "edited": len(np.unique(rows.codes[kept_edits]))}


def kept_now(review: Review, texts) -> dict:
    """What the release the review's decisions make keeps of the ``texts``, in characters (its summary)."""
    return characters_utility(texts, *review.rows.accepted_lengths(review.table["accept"].to_numpy(dtype=bool))
                              ).summary()


def _decided(review: Review, proposed: pd.DataFrame, decided: dict, **changes) -> Review:
    """The review with the decisions table ``proposed`` (its accept column as proposed) and the decisions
    ``decided`` over it; the audit of the release an earlier table made is dropped."""
    keys = tuple(row_keys(proposed))
    wanted = proposed["accept"].to_numpy(dtype=bool)
    accept = wanted.copy()
    for row, key in enumerate(keys):
        if key in decided:
            accept[row] = decided[key][0]
    table = proposed.copy()
    table["accept"] = accept
    return replace(review, table=table, proposed=wanted, keys=keys, decided=decided, rows=DecisionRows.of(table),
                   after=None, after_data=None, utility=None, **changes)


def proposed_table(review: Review) -> pd.DataFrame:
    """The decisions table with its accept column as proposed (by the search, the allow list or the curator's own
    text), before any decision over it."""
    table = review.table.copy()
    if review.proposed is not None:
        table["accept"] = review.proposed
    return table


def with_ticks(review: Review, positions, accept) -> Review:
    """The review once the curator has ticked or unticked the rows at ``positions`` of the review table."""
    positions = np.asarray(positions, dtype=np.int64)
    values = np.asarray(accept, dtype=bool)
    column = review.table["accept"].to_numpy(dtype=bool).copy()
    column[positions] = values
    table = review.table.assign(accept=column)
    decided = {**review.decided, **{review.keys[p]: (bool(v), BY_YOU) for p, v in zip(positions, values)}}
    return replace(review, table=table, decided=decided, after=None, after_data=None, utility=None)


def with_bulk(review: Review, rows: np.ndarray, accept: bool) -> Review:
    """The review with every row of the mask ``rows`` decided at once (accept all, reject all, reject the edits of a
    term)."""
    rows = np.asarray(rows, dtype=bool)
    decided = dict(review.decided)
    decided.update(dict.fromkeys(map(review.keys.__getitem__, np.flatnonzero(rows).tolist()), (bool(accept), BY_YOU)))
    table = review.table.assign(accept=np.where(rows, bool(accept), review.table["accept"].to_numpy(dtype=bool)))
    return replace(review, table=table, decided=decided, version=review.version + 1, after=None, after_data=None,
                   utility=None)


def decide_rows(rows: np.ndarray, accept: bool) -> None:
    """The review table's bulk action: every row of the mask ``rows`` accepted or rejected (a button's callback)."""
    state.review = with_bulk(state.review, rows, accept)


def reset_decisions() -> None:
    """The review table's reset: every decision taken back (a button's callback)."""
    state.review = without_decisions(state.review)


def without_decisions(review: Review) -> Review:
    """The review with every decision taken back: the rows as proposed, then the deny and allow lists applied."""
    deny, allow = review.lists
    undecided = _decided(review, proposed_table(review), {}, version=review.version + 1, lists=((), ()))
    return with_lists(undecided, deny, allow)


def with_lists(review: Review, deny: tuple[str, ...], allow: tuple[str, ...]) -> Review:
    """The review with the deny and allow lists applied to its rows at once, no new search: each row of a word
    added to the deny list rejected, of a word added to the allow list accepted (a later tick decides it again); the
    rows a word taken off a list decided go back to as proposed."""
    if (tuple(deny), tuple(allow)) == tuple(review.lists):
        return review
    old_deny, old_allow = review.lists
    gone = {NEVER + w for w in old_deny if w not in deny} | {ALWAYS + w for w in old_allow if w not in allow}
    decided = {key: value for key, value in review.decided.items() if value[1] not in gone}
    table = review.table
    for words, accept, origin in ((tuple(w for w in allow if w not in old_allow), True, ALWAYS),
                                  (tuple(w for w in deny if w not in old_deny), False, NEVER)):
        for word, rows in word_rows(table, words).items():
            decided.update({review.keys[p]: (accept, origin + word) for p in np.flatnonzero(rows)})
    return _decided(review, proposed_table(review), decided, version=review.version + 1,
                    lists=(tuple(deny), tuple(allow)))


def with_curator_text(review: Review, doc_id: str, released: str, edited: str) -> Review:
    """The review once the curator has written ``edited`` for a document (the drill-down): its rows follow the
    text (:func:`~cpa_core.redaction.decisions.curator_rows`)."""
    table = proposed_table(review) if review.table is not None else decisions_table([])
    return _decided(review, curator_rows(table, doc_id, released, edited), review.decided,
                    version=review.version + 1)


def current_review(run: AuditRun) -> Review | None:
    """The review of this run's redactions, if one is under way."""
    review = state.review
    return review if review is not None and review.before.key == run.key else None


def new_review(run: AuditRun, data: DataSet) -> Review:
    """An empty review of the run's redactions (the curator's own edits come first)."""
    return _decided(Review((run.key,), run, data), decisions_table([]), {})


def curator_rows_of(review: Review | None) -> pd.DataFrame:
    """The rows the curator wrote in the drill-down (kept when a new search replaces the table), as proposed."""
    if review is None or review.table is None:
        return decisions_table([])
    table = proposed_table(review)
    return table[table["source"] == CURATOR]


def with_search(ask: tuple, run: AuditRun, data: DataSet, suggestions, total: int, table: pd.DataFrame,
                previous: Review | None, rewrite: dict | None = None) -> Review:
    """A review of a (possibly stopped) search, with the curator's rows of the previous review kept and every
    decision taken on it (a row of the same key is decided as before; the deny and allow lists as applied)
    (``rewrite``: the LLM rewrite's settings when the search used one)."""
    decided, lists = ({}, ((), ())) if previous is None else (previous.decided, previous.lists)
    search = asked(ask)
    if search is not None:  # the lists the search read are those its table reflects
        lists = (tuple(search["deny"]), tuple(search["allow"]))
    review = Review(ask, run, data, tuple(suggestions), total, rewrite=rewrite,
                    version=0 if previous is None else previous.version + 1)
    return _decided(review, typed(pd.concat([table, curator_rows_of(previous)], ignore_index=True)), dict(decided),
                    lists=lists)


def has_rows(review: Review, doc_id: str) -> bool:
    return review.table is not None and bool((review.table["doc_id"] == str(doc_id)).any())


def document_text(review: Review | None, doc_id: str, released: str) -> str:
    """A document's text as the review's accepted rows make it (the released text without a review)."""
    if review is None or review.table is None:
        return released
    edits, _ = accepted(review.table[review.table["doc_id"] == str(doc_id)])
    return apply_edits(released, edits.get(str(doc_id), ()))


def redacted_data(data: DataSet, table: pd.DataFrame) -> DataSet:
    """The release the accepted rows make, as a data set of its own: the edits applied, the documents to withhold
    left out, named ``<input>-redacted`` (with the file as written, when the input's file is at hand). Raises
    :class:`~cpa_core.common.errors.DataError` when every document is withheld."""
    edits, withheld = accepted(table)
    documents = data.documents
    frame = decided_frame(documents.frame, edits, withheld)
    if frame.empty:
        raise DataError(str(documents.file), "every document is withheld: the redacted release is empty",
                        expected="at least one document released", found=f"{len(withheld):,} withheld")
    digest = hashlib.sha256()
    for doc_id, text in zip(frame["doc_id"].astype(str), frame["text"]):
        digest.update(doc_id.encode("utf-8", "surrogatepass") + b"\x00" + text.encode("utf-8", "surrogatepass") + b"\x00")
    name = redacted_name(str(documents.file))
    payload = None if data.documents_source is None else \
        redacted_file(data.documents_source, documents, edits, withheld)[1]
    # the checksum of the file as written, so that `cpa redact --decisions` on the input file writes the release
    # this audit certifies; of the texts when the input's file is not at hand
    sha256 = hashlib.sha256(payload).hexdigest() if payload is not None else digest.hexdigest()
    released = replace(documents, frame=frame, file=name, sha256=sha256, report=replace(documents.report, file=name),
                       columns=redacted_columns(documents.columns))  # row-number ids are the file's own column
    return replace(data, documents=released, source="redacted", documents_source=payload,
                   fingerprint=fingerprint(data.fingerprint, "redacted", sha256))


def reaudit(review: Review, threat, scores) -> Review:
    """The review with the audit of the release its accepted rows make (the same declared threat model and release
    policy, calibrated on the redacted release, recording what it was redacted from and what it keeps) and that
    release's utility."""
    before = review.before
    utility = release_utility(review.data.documents.texts(), *accepted(review.table), packaged_embedder())
    after_data = redacted_data(review.data, review.table)
    attacker = reaudit_attacker(before, review.data, threat, scores)
    run = audit_run(after_data, redacted_config(before.result.config, after_data.documents.frame), attacker,
                    label=f"{before.label} · redacted" + (f" from audit {before.audit_id}" if before.audit_id else ""))
    attacker_figures = {"attacker": before.result.config.attacker.name, "held_out": False,
                        "before": first_guess_figures(before.result), "after": first_guess_figures(run.result)}
    config_id = before.result.config.config_id
    lineage = redaction_lineage(before.result.inputs.get("documents") or {}, config_id,
                                decisions_summary(review.table, config_id), from_audit=before.audit_id,
                                attackers=[attacker_figures], kept=utility.summary())
    return replace(review, after=replace(run, result=run.result.with_inputs(redaction=lineage)), after_data=after_data,
                   utility=utility)


def before_after(before: Certificate, after: Certificate, policy: ReleasePolicy, table: pd.DataFrame,
                 utility: ReleaseUtility | None = None) -> pd.DataFrame:
    """Per document of the release before: its certified |C| and linkage probability before and after (each under
    its own calibration), what the decisions did to it (edited, withheld or unchanged), whether it is flagged
    before and after and, with the release's ``utility``, the characters it keeps and its meaning score;
    flagged-before documents first."""
    edits, withheld = accepted(table)
    ids_before = before.split.table.doc_ids.astype(str)
    ids_after = after.split.table.doc_ids.astype(str)
    size_after = dict(zip(ids_after, after.set_sizes.tolist()))
    linkage_after = dict(zip(ids_after, [None] * len(ids_after) if after.linkage is None else after.linkage.tolist()))
    flag_after = dict(zip(ids_after, after.flags(policy).tolist()))
    frame = pd.DataFrame({
        "doc_id": ids_before,
        "redaction": ["withheld" if d in withheld else "edited" if d in edits else "unchanged" for d in ids_before],
        "set_size_before": before.set_sizes.astype(np.int64),
        "set_size_after": pd.array([size_after.get(d) for d in ids_before], dtype="Int64"),
        "linkage_before": before.linkage if before.linkage is not None else np.nan,
        "linkage_after": pd.array([linkage_after.get(d) for d in ids_before], dtype="Float64"),
        "flagged_before": before.flags(policy),
        "flagged_after": [bool(flag_after.get(d, False)) for d in ids_before],
    })
    if utility is not None:
        kept = {d.doc_id: d for d in utility.documents}
        frame["characters_kept"] = pd.array([kept[d].characters_kept if d in kept else None for d in ids_before],
                                            dtype="Int64")
        frame["meaning"] = pd.array([kept[d].meaning if d in kept else None for d in ids_before], dtype="Float64")
    order = np.lexsort((frame["doc_id"].to_numpy(), frame["set_size_before"].to_numpy(),
                        ~frame["flagged_after"].to_numpy(), ~frame["flagged_before"].to_numpy()))
    return frame.iloc[order].reset_index(drop=True)


def change_counts(sides: pd.DataFrame) -> dict[str, int]:
    """What the before/after table says, in numbers: flagged before and after (the withheld ones are not
    released), no longer flagged, newly flagged, and documents whose certified set is smaller after."""
    kept = sides["redaction"] != "withheld"
    smaller = kept & sides["set_size_after"].notna() & (sides["set_size_after"].fillna(0) < sides["set_size_before"])
    return {"flagged_before": int(sides["flagged_before"].sum()), "flagged_after": int(sides["flagged_after"].sum()),
            "withheld": int((~kept).sum()), "cleared": int((sides["flagged_before"] & ~sides["flagged_after"] & kept).sum()),
            "newly_flagged": int((~sides["flagged_before"] & sides["flagged_after"]).sum()),
            "smaller_set": int(smaller.sum()),
            "smaller_set_unchanged": int((smaller & (sides["redaction"] == "unchanged")).sum())}
