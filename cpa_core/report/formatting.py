"""How the certificate report and the dashboard present the core's numbers: number, percent, confidence and
interval formats, the plain-language configuration summary, the colours and set-size bins of the figures, and
the columns of the tables. Pure functions, no Streamlit, no plotly (:mod:`cpa_ui.text`, :mod:`cpa_ui.figures`
and :mod:`cpa_ui.analysis` take them from here, so the pages and the report say the same thing).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.linkage import NEIGHBOUR_STATISTICS

FLAGGED_COLOR = "#c0392b"
SAFE_COLOR = "#2e86c1"
TARGET_COLOR = "#7f8c8d"
MAX_BINS = 40

GROUP_COLUMNS = ["group", "n_test", "n_cal", "threshold", "coverage", "coverage_conditional", "candidate_miss_rate",
                 "median_set_size", "mean_leakage", "n_flagged", "top1"]
"""The columns of a per-group table (the Explore page's and the report's)."""


# --- numbers -------------------------------------------------------------------------------------------------

def percent_from_confidence(confidence: float) -> float:
    return round(float(confidence) * 100.0, 2)


def fmt_percent(value: float | None, digits: int = 1) -> str:
    """``0.953`` -> ``"95.3 %"``; ``None`` -> ``"–"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.{digits}f} %"


def fmt_confidence(confidence: float) -> str:
    percent = percent_from_confidence(confidence)
    return f"{percent:g} %"


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """A count with its noun agreeing: ``1 document``, ``2 documents`` (``plural`` for irregular nouns)."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``257th``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


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


def fmt_interval(low, high) -> str:
    """``0.89, 0.931`` -> ``"89.0–93.1 %"``; ``"–"`` when unknown."""
    if low is None or high is None:
        return "–"
    return f"{100 * low:.1f}–{100 * high:.1f} %"


def fmt_coverage(value, low, high) -> str:
    """``"91.2 % (95 % CI 89.0–93.1 %)"``: a coverage with its Clopper–Pearson interval."""
    if value is None:
        return "–"
    return f"{fmt_percent(value)} (95 % CI {fmt_interval(low, high)})" if low is not None else fmt_percent(value)


# --- the declared configuration in words ---------------------------------------------------------------------

def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _value(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return "default" if value is None else str(value)


def _declared(config: AuditConfig, name: str):
    """A declared attacker parameter; one left at ``None`` as the built attacker resolved it (its ``details``)."""
    value = config.attacker.params.get(name)
    return config.attacker.details.get(name) if value is None else value


def configuration_summary(config: AuditConfig, *, n_documents: int, n_profiles: int,
                          groups: Sequence[str] = ()) -> str:
    """One paragraph, in plain language, of what a declared configuration assumes and certifies."""
    spec = get_spec(config.attacker.name)
    shown = [p for p in spec.params if p.kind != "fields" or config.attacker.params.get(p.name)]
    settings = ", ".join(f"{p.label.lower()} {_value(_declared(config, p.name))}" for p in shown[:4])
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
    if config.certainty_bins > 1:
        per_group += (f" Within {'each group' if config.group_column else 'the release'}, documents are calibrated "
                      f"against documents on which the attacker is about as sure (up to {config.certainty_bins} "
                      "strata of its top-1 margin, cut at its quantiles over all the documents and merged until each "
                      "is expected to hold enough labelled documents, whichever those are), so the guarantee holds "
                      "within each stratum, for labelled and unlabelled documents alike.")
    miss = ("calibration documents whose identity is missing from the pool count as infinitely nonconforming "
            "(conservative)" if config.miss_policy == "infinite" else
            "calibration documents whose identity is missing from the pool are left out, so the guarantee is "
            "conditional on the identity being in the pool")
    levels = _join([fmt_confidence(float(c)) for c in config.confidences])
    flag = config.policy.sentence
    return (f"The attacker knows the registry fields {fields} (knowledge level {config.knowledge.name}), queries "
            f"with {query}, and {how}; it considers {pool} of the {n_profiles:,} registry profiles. Out of "
            f"{n_documents:,} documents, {protocol}; candidates are scored by {score}, and {miss}.{per_group} "
            f"Certificates are computed at {levels} confidence; {flag}. They are valid only for this exact configuration (id {config.config_id}): any change needs "
            "a new calibration.")


# --- figures and tables --------------------------------------------------------------------------------------

def kept_text(kept: dict) -> str:
    """What a redacted release keeps (:meth:`~cpa_core.redaction.utility.ReleaseUtility.summary`), in one sentence:
    documents and characters kept and the meaning score of the edited texts."""
    meaning = ("" if kept.get("meaning_edited_mean") is None else
               f"; meaning kept in the edited texts {kept['meaning_edited_mean']:.3f} on average, "
               f"{kept['meaning_lowest']:.3f} at the lowest (cosine of the packaged model's embeddings, 1 = unchanged)")
    return (f"{kept['documents_kept']:,} of {kept['documents']:,} documents kept ({kept['edited']:,} edited), "
            f"{kept['characters_kept']:,} of {kept['characters']:,} characters "
            f"({fmt_percent(kept['characters_kept_share'])}){meaning}")


def linkage_method(description: dict) -> str:
    """How the linkage probability was estimated, in words (from :meth:`LinkageModel.describe`)."""
    calibrating = counted(int(description["calibrating"]), "calibrating document")
    if description["method"] == "inductive Venn-Abers":
        return (f"inductive Venn-Abers on the attacker's certainty (top-1 margin), {calibrating}: too few labelled "
                "documents of each outcome for a learned description of the attack")
    peers = description.get("peers") or []
    read = (f", and of its peers' attacks of the same document ({', '.join(peers)}: where they rank its first guess, "
            "their weight on it and their certainty)" if peers else "")
    own = [name for name in description["features"] if ":" not in name and name not in NEIGHBOUR_STATISTICS]
    neighbours = (", then what a first stage of the same kind, learned without the labels of the document's fold, "
                  "says of the release's other documents that guess the same first candidate, the nearest ones "
                  "and all of them")
    return (f"cross Venn-Abers over {len(description['features'])} label-free features of the attack on each document "
            f"({', '.join(own)}){read}{neighbours}, a gradient-boosted statistic cross-fitted in "
            f"{description['folds']} folds, {calibrating}; no document's probability reads its own label")


def set_size_bins(set_sizes: np.ndarray, flag_below: int) -> pd.DataFrame:
    """Bins of set sizes: one bin per size up to just past ``k``, then widening bins up to the largest set.

    Returns a table with ``lower``, ``upper`` (inclusive), ``label``, ``count`` and ``cumulative``
    (share of documents with a set of at most ``upper``).
    """
    sizes = np.asarray(set_sizes, dtype=np.int64)
    top = int(sizes.max()) if sizes.size else 0
    unit_end = min(top, max(int(flag_below) + 4, 15))
    uppers = list(range(0, unit_end + 1))
    if top > unit_end:
        n_wide = max(1, MAX_BINS - len(uppers))
        edges = np.unique(np.round(np.geomspace(unit_end + 1, top, n_wide + 1)).astype(np.int64))
        uppers += [int(e) for e in edges if e > unit_end]
        if uppers[-1] != top:
            uppers.append(top)
    lowers = [0] + [u + 1 for u in uppers[:-1]]
    counts = _per_bin(np.asarray(uppers), sizes)
    labels = [str(lo) if lo == hi else f"{lo}–{hi}" for lo, hi in zip(lowers, uppers)]
    cumulative = np.cumsum(counts) / max(sizes.size, 1)
    return pd.DataFrame({"lower": lowers, "upper": uppers, "label": labels, "count": counts[: len(uppers)],
                         "cumulative": cumulative})


def bin_counts(bins: pd.DataFrame, set_sizes: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
    """How many documents fall in each bin of :func:`set_size_bins` (``bins``), counting only those of the mask
    ``among`` when given (e.g. the flagged ones)."""
    sizes = np.asarray(set_sizes, dtype=np.int64)
    return _per_bin(bins["upper"].to_numpy(), sizes if among is None else sizes[np.asarray(among, dtype=bool)])


def _per_bin(uppers: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Documents per bin of inclusive upper bounds ``uppers`` (each size counted in the first bin that holds it)."""
    return np.bincount(np.searchsorted(uppers, sizes), minlength=len(uppers))[: len(uppers)]


def without_empty(frame: pd.DataFrame, columns: Sequence[str] = ("q_hat",)) -> pd.DataFrame:
    """``frame`` without those of ``columns`` that hold no value (e.g. q̂ when it differs per group)."""
    def empty(value) -> bool:
        return value is None or (isinstance(value, float) and np.isnan(value)) or \
            (isinstance(value, (str, list, tuple)) and len(value) == 0)
    return frame.drop(columns=[c for c in columns if c in frame.columns and all(map(empty, frame[c]))])
