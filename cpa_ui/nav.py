"""The pages of the curator's workflow, in order: file, title and icon (one place for links and the sidebar)."""

from __future__ import annotations

from typing import NamedTuple


class PageSpec(NamedTuple):
    path: str
    title: str
    icon: str


DATA = "pages/1_data.py"
THREAT = "pages/2_threat_model.py"
CALIBRATE = "pages/3_calibrate.py"
EXPLORE = "pages/4_explore.py"
FLAGGED = "pages/5_flagged_documents.py"
REDACT = "pages/6_redact.py"
COMPARE = "pages/7_compare.py"
REPORT = "pages/8_report_and_export.py"
HISTORY = "pages/9_history.py"

WORKFLOW = (
    PageSpec(DATA, "1 · Data", ":material/upload_file:"),
    PageSpec(THREAT, "2 · Threat model", ":material/shield_person:"),
    PageSpec(CALIBRATE, "3 · Calibrate", ":material/tune:"),
    PageSpec(EXPLORE, "4 · Explore", ":material/query_stats:"),
    PageSpec(FLAGGED, "5 · Flagged documents", ":material/flag:"),
    PageSpec(REDACT, "6 · Redact & re-audit", ":material/ink_eraser:"),
    PageSpec(COMPARE, "7 · Compare", ":material/compare_arrows:"),
    PageSpec(REPORT, "8 · Report & export", ":material/description:"),
    PageSpec(HISTORY, "9 · History", ":material/history:"),
)
