"""Short help texts for every number the dashboard and the report show: what it is, how to read it.

One dictionary, so the pages, the tables and the HTML report say the same thing: it lives in the core,
:mod:`cpa_core.report.help`, beside the report that quotes it; the pages take it from here.
"""

from __future__ import annotations

from cpa_core.report.help import COLUMNS, HELP, PERCENT, TEXT

__all__ = ["COLUMNS", "HELP", "PERCENT", "TEXT"]
