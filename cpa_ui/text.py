"""Words for the curator on screen: confidence levels from sliders and presets, text shown as text (never markdown)
and the escaped, highlighted document text of the drill-down. Pure functions, no Streamlit. Number formats and the
configuration summary are the report's (:mod:`cpa_core.report.formatting`).
"""

from __future__ import annotations

import html

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
