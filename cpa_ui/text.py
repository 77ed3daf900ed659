"""Words for the curator: confidence levels, number formats, the plain-language configuration summary
and the escaped, highlighted document text of the drill-down. Pure functions, no Streamlit.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AuditConfig

ALPHA_PRESETS = (0.01, 0.05, 0.10)
CONFIDENCE_PERCENT_RANGE = (50.0, 99.5)
CONFIDENCE_PERCENT_STEP = 0.5


MARKDOWN_SPECIALS = "\\`*_[]()#!|<>~$:"


def plain(text) -> str:
    """``text`` (from the data: ids, groups, file and column names, messages quoting them) made safe to show
    where Streamlit renders markdown: every markdown character is escaped, so a value such as
    ``![x](http://host/beacon.png)`` shows as written and fetches nothing. Line breaks become spaces."""
    out = str(text).replace("\r", " ").replace("\n", " ")
    return "".join("\\" + c if c in MARKDOWN_SPECIALS else c for c in out)


def confidence_from_percent(percent: float) -> float:
    """The confidence level the curator picked in percent (``95.0``) as a clean decimal (``0.95``).

    Rounding keeps the decimal the curator saw (a slider value such as ``94.99999`` is not a new level).
    """
    return round(float(percent) / 100.0, 4)


def percent_from_confidence(confidence: float) -> float:
    return round(float(confidence) * 100.0, 2)


def confidence_from_alpha(alpha: float) -> float:
    return round(1.0 - float(alpha), 4)


def fmt_percent(value: float | None, digits: int = 1) -> str:
    """``0.953`` -> ``"95.3 %"``; ``None`` -> ``"–"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.{digits}f} %"


def fmt_confidence(confidence: float) -> str:
    percent = percent_from_confidence(confidence)
    return f"{percent:g} %"


def fmt_number(value: float | int | None, digits: int = 3) -> str:
    """A number for a KPI: integers as integers, infinities spelled out, ``None`` as a dash."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        if math.isnan(value):
            return "–"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.{digits}g}"
    return f"{value:,}"


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _value(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return "default" if value is None else str(value)


def configuration_summary(config: AuditConfig, *, n_documents: int, n_profiles: int,
                          groups: Sequence[str] = ()) -> str:
    """One paragraph, in plain language, of what a declared configuration assumes and certifies."""
    spec = get_spec(config.attacker.name)
    shown = [p for p in spec.params if p.kind != "fields" or config.attacker.params.get(p.name)]
    settings = ", ".join(f"{p.label.lower()} {_value(config.attacker.params.get(p.name))}" for p in shown[:4])
    how = f"{spec.description} ({spec.label}{': ' + settings if settings else ''})"
    fields = _join([f"'{f}'" for f in config.knowledge.fields])
    query = ("the released text alone" if config.knowledge.query_mode == "direct"
             else "the released text plus identifying clues an LLM extracts from it")
    pool = "the whole registry" if config.top_k is None else f"a shortlist of its top {config.top_k} candidates"
    if config.protocol == "release":
        protocol = ("every document gets a certified set: each labelled document's threshold is calibrated on the "
                    "other labelled documents (leave-one-out), each unlabelled one's on all of them")
    else:
        n_cal = "half of the labelled documents" if config.n_cal is None else f"{config.n_cal:,} documents"
        n_test = "the remaining ones" if config.n_test is None else f"{config.n_test:,} other documents"
        protocol = (f"{n_cal} with known identities calibrate the threshold and {n_test} test it (split seed "
                    f"{config.seed})")
    score = {"aps": "the probability mass accumulated from the top of the ranking (APS)",
             "rank": "the rank of a candidate in the attacker's list",
             "probability": "one minus the candidate's weight"}.get(config.score, config.score)
    per_group = (f" Thresholds are calibrated separately for each group ({_join([str(g) for g in groups])}), so the "
                 "guarantee holds within each group." if config.group_column else "")
    miss = ("calibration documents whose identity is missing from the pool count as infinitely nonconforming "
            "(conservative)" if config.miss_policy == "infinite" else
            "calibration documents whose identity is missing from the pool are left out, so the guarantee is "
            "conditional on the identity being in the pool")
    levels = _join([fmt_confidence(float(c)) for c in config.confidences])
    flag = config.policy.sentence
    return (f"The attacker knows the registry fields {fields} (knowledge level {config.knowledge.name}), queries "
            f"with {query}, and {how}; it considers {pool} of the {n_profiles:,} registry profiles. Out of "
            f"{n_documents:,} documents, {protocol}; candidates are scored by {score}, and {miss}.{per_group} Certificates are computed at {levels} confidence and "
            f"{flag}. They are valid only for this exact configuration (id {config.config_id}): any change needs "
            "a new calibration.")


def highlight_spans(text: str, spans) -> str:
    """HTML of ``text`` with each evidence span (:class:`~cpa_core.attack.explainers.Span`, offsets into ``text``) in
    ``<mark>``. Every piece is escaped on its own, so nothing from the text can become markup; spans that do
    not fit the text (e.g. in LLM clues appended to the query) are left out. Line breaks become ``<br>``."""
    pieces, start = [], 0
    for span in sorted(spans, key=lambda s: s.start):
        if span.start < start or span.end > len(text) or text[span.start:span.end] != span.text:
            continue
        pieces.append(html.escape(text[start:span.start]))
        pieces.append(f"<mark>{html.escape(span.text)}</mark>")
        start = span.end
    pieces.append(html.escape(text[start:]))
    return "".join(pieces).replace("\r\n", "\n").replace("\n", "<br>")
