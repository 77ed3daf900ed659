"""A declared placeholder list and a tiny release whose texts hold it: shared by the tests of the placeholder list,
of the evidence that respects it and of the snapshot that keeps it."""

from __future__ import annotations

import json

CUSTOM = (r"\bNURSE_[A-Z]\b", r"\{\{[^}]*\}\}", "«[^»]+»", r'"[A-Z]+"')
"""A declared placeholder list other than the default."""

REGISTRY_CSV = ("identity_id,city,job\n"
                "P1,Leeds,nurse\nP2,Leeds,baker\nP3,York,pilot\nP4,Hull,nurse\nP5,York,baker\n")


DOCUMENTS_CSV = ("doc_id,text,identity_id\n"
                 "d1,Our NURSE_A from Leeds works as a nurse. {{York}} was not visited.,P1\n"
                 "d2,A baker in Leeds; «Hull» is redacted.,P2\n"
                 "d3,A pilot from York.,P3\n"
                 "d4,A nurse in Hull.,P4\n"
                 "d5,A baker in York.,P5\n")
"""Five documents whose texts hold the custom placeholders, about the five people of :data:`REGISTRY_CSV`."""


def toml_list(patterns) -> str:
    """A TOML array of the patterns (``[evidence] placeholders = ...``)."""
    return "[" + ", ".join(json.dumps(p) for p in patterns) + "]"
