"""Words for the curator: confidence levels, number formats, the plain-language configuration summary
and the escaped, highlighted document text of the drill-down. Pure functions, no Streamlit. The number formats
and the configuration summary are the report's (:mod:`cpa_core.report.formatting`), taken from there.
"""

from __future__ import annotations

import html

from cpa_core.report.formatting import (
    configuration_summary,
    fmt_confidence,
    fmt_number,
    fmt_percent,
    percent_from_confidence,
)

ALPHA_PRESETS = (0.01, 0.05, 0.10)
CONFIDENCE_PERCENT_RANGE = (50.0, 99.5)
CONFIDENCE_PERCENT_STEP = 0.5

__all__ = ["ALPHA_PRESETS", "CONFIDENCE_PERCENT_RANGE", "CONFIDENCE_PERCENT_STEP", "MARKDOWN_SPECIALS",
           "confidence_from_alpha", "confidence_from_percent", "configuration_summary", "fmt_confidence", "fmt_number",
           "fmt_percent", "highlight_spans", "percent_from_confidence", "plain"]


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


def confidence_from_alpha(alpha: float) -> float:
    return round(1.0 - float(alpha), 4)


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
