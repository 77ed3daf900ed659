"""Short help texts for every number the dashboard and the report show: what it is, how to read it, and how
every table labels and formats its columns.

One dictionary, so the pages, the tables and the HTML report
(:mod:`cpa_core.report.html`) say the same thing. Its texts hold under either protocol; where the protocol in use is
known, :func:`help_texts` and :func:`column_label` say it in its own terms (the release protocol certifies every
document, its labelled ones calibrating each other; the split protocol certifies held-out test documents).
"""

from __future__ import annotations

UPPER_BOUND = "97.5 % upper bound (the top of the two-sided 95 % interval)"
"""What the remainder's bound is, wherever it is named: the upper end of the exact (Clopper–Pearson) two-sided 95 %
interval, which is a one-sided 97.5 % upper confidence bound."""
UPPER_BOUND_SHORT = "97.5 % upper bound"
""":data:`UPPER_BOUND` where a table has no room for the whole phrase."""

HELP: dict[str, str] = {
    # certificate
    "confidence": "The confidence level 1 − α of the certificate: each certified set contains the true identity "
                  "with at least this probability, if calibration and audited documents are exchangeable.",
    "alpha": "α = 1 − confidence: the miscoverage the audit tolerates. Smaller α gives larger, more conservative sets.",
    "set_size": "|C|, the size of the certified ambiguity set: how many registry profiles remain statistically "
                "plausible for this document after the attack. Small is risky: 1 means the attacker is certifiably "
                "down to one person. 0 (empty set) means the attacker's top candidate is more certain than the "
                "threshold allows: the highest risk. A document that gives the attacker nothing (every candidate "
                "ties) gets the whole pool, never an empty set.",
    "leakage": "Leakage proxy L = 1 / max(1, |C|). Not a re-identification probability: L = 0.1 means the attacker "
               "is certifiably down to 10 people.",
    "mean_leakage": "Mean of the leakage proxy 1 / max(1, |C|) over the audited documents. Not a probability of "
                    "re-identification; larger means smaller sets on average.",
    "at_risk": "Documents flagged under the release policy: a certified set smaller than k (or a leakage proxy above "
               "the leakage threshold), or a linkage probability above the acceptable linkage rate: candidates for "
               "withholding or further redaction.",
    "min_set": "The smallest certified set among the audited documents.",
    "median_set": "Median certified set size over the audited documents: half of them have a set at most this "
                  "large.",
    "mean_set": "Mean certified set size over the audited documents.",
    "coverage": "Coverage: the share of the labelled audited documents whose true identity is in their certified set "
                "(unconditional: documents whose identity is missing from the pool count as misses). Under the split "
                "protocol it is measured on held-out test documents, an empirical check that should be close to, and "
                "on average at least, the confidence level; under the release protocol each labelled document's set "
                "leaves its own score out, and coverage is about ⌈n(1 − α)⌉/n by construction, a property of the "
                "method, not a validation of it.",
    "coverage_ci": "Exact (Clopper–Pearson) 95 % confidence interval of the coverage over the labelled test "
                   "documents: the range of true coverages consistent with the observed share. Coverage below the "
                   "target by more than this interval suggests calibration and audited documents are not "
                   "exchangeable.",
    "verdict": "The verdict reads the attack first. Not releasable: even after the flagged documents are withheld, "
               "the rest would be linked (named at first guess) above the acceptable linkage rate, by the "
               f"{UPPER_BOUND}. Inconclusive: a validity check failed, so the certificate may certify nothing and a "
               "count of flagged documents is no evidence of safety. Release after redacting or withholding the "
               "flagged documents: some are flagged, every check passed and the rest is within the acceptable rate. "
               "Release: nothing is flagged, every check passed and the documents are within the acceptable rate.",
    "first_guess": "First-guess rate: the share of labelled documents whose subject is the declared attacker's first "
                   "candidate (ties count as misses), with its exact (Clopper–Pearson) 95 % interval. It is what the "
                   "attacker achieves on this release, whatever the set sizes: a certified set covers the truth on "
                   "average over documents and is sized by the documents the attacker cannot place.",
    "top_k_rate": "Share of labelled documents whose subject is among the attacker's first k candidates (k of the "
                  "release policy), with its exact 95 % interval.",
    "acceptable_linkage": "Acceptable linkage rate a: the share of documents an attacker may name correctly at first "
                          "guess. A document whose linkage probability exceeds a is flagged; the release is "
                          "acceptable only when what is left after the flagged documents is linked at most at a "
                          f"({UPPER_BOUND}). Default 1/k (0.09 at k = 11, the per-record threshold of Ontario's "
                          "privacy commissioner and the EMA).",
    "linkage_probability": "Linkage probability: the calibrated chance that the attacker's first guess is the "
                           "document's subject, given a label-free description of the attack on it (how sure the "
                           "attacker is, how its first candidate stands among the release's other documents, the "
                           "text's length), learnt from the labelled documents by cross Venn–Abers calibration "
                           "without the document's own label. It holds on average over documents described alike: "
                           "it is not a certificate about one document, and a low value does not prove a document "
                           "is safe.",
    "linkage_interval": "The Venn–Abers interval of the linkage probability: the probability the calibration gives "
                        "when the document's own outcome is taken to be a miss (from) or a first-guess hit (to). A "
                        "wide interval means few labelled documents are described like this one.",
    "first_guess_candidate": "The attacker's first guess: the registry identity it ranks first for this document "
                             "(for several attackers, the one that gave the largest linkage probability).",
    "flagged_by": "Which rule flagged the document: set (its certified set has fewer than k members), linkage (its "
                  "linkage probability exceeds the acceptable rate) or both.",
    "remainder_bound": "What is left after the flagged documents are withheld or redacted: the exact "
                       f"{UPPER_BOUND} of its first-guess rate (labelled documents), weighted with the mean linkage "
                       "probability of the unlabelled ones. The verdict compares it with the acceptable linkage rate.",
    "strata": "Certainty strata: documents are calibrated against documents on which the attacker is about as sure "
              "(bins of its top-1 margin within each group, cut at the margin's quantiles over all the group's "
              "documents, labelled or not, and merged until each is expected to hold enough labelled documents, "
              "whichever those are), so a document the attacker is sure about is certified against documents it is "
              "sure about. The guarantee holds within each stratum, for labelled and unlabelled documents alike; a "
              "stratum that holds too few labelled documents for a level gets an infinite threshold there, and says so.",
    "uninformative": "The attacker ranks every candidate of the document equally (nothing in it matches a profile "
                     "more than another): no information, so its set is the whole pool, never an empty set (an "
                     "empty set is the highest risk). Check such documents by hand (an image, code, another "
                     "language) or withhold them.",
    "coverage_conditional": "Coverage among the labelled audited documents whose true identity is in the candidate "
                            "pool. "
                            "The guarantee is about this quantity when missing identities are excluded from "
                            "calibration.",
    "miss_rate": "Candidate-miss rate ρ: the share of the labelled audited documents whose true identity is not in "
                 "the attacker's pool (absent from the registry, or cut by the top-K shortlist). No set can cover "
                 "them.",
    "open_world_bound": "Open-world lower bound (1 − ρ)(1 − α) on unconditional coverage.",
    "q_hat": "q̂, the conformal threshold: the ⌈(n + 1)(1 − α)⌉-th smallest of n calibration scores. A candidate "
             "enters a document's set when its nonconformity score is at most q̂. Infinite: too few calibration "
             "documents for this confidence, or too many of them with their identity outside the pool; every set is "
             "then the whole pool.",
    "protocol": "Release (default): every released document gets a certified set; each labelled document's "
                "threshold comes from the other labelled documents (leave-one-out), each unlabelled one's from all "
                "of them, so the guarantee holds for every document. Split: a disjoint calibration/test split, to "
                "compare configurations on matched documents or reproduce published protocols.",
    "n_cal": "Calibration documents (with known identity) used to compute q̂.",
    "n_test": "Audited documents, those the certificate is reported on: every released document under the release "
              "protocol, the held-out test documents under the split protocol.",
    "min_n_cal": "The fewest calibration documents that give a finite threshold at this confidence: ⌈1/α − 1⌉, "
                 "plus one when the whole release is certified (each labelled document is calibrated by the others).",
    "top1": "Top-1 accuracy of the attacker on the labelled audited documents: the share whose true identity is its "
            "first-ranked candidate. A point estimate, with no guarantee.",
    "top5": "Share of the labelled audited documents whose true identity is among the attacker's 5 first candidates "
            "(no guarantee).",
    "mrr": "Mean reciprocal rank of the true identity (0 when it is outside the pool); no guarantee.",
    "whole_pool_rate": "Share of audited documents whose set holds (nearly, 90 % or more) their whole candidate "
                       "pool: such a set certifies nothing, it is no evidence of safety.",
    "empty_rate": "Share of audited documents with an empty set: the attacker is more certain of its top candidate "
                  "than the threshold requires. Counted as the highest risk (a document whose candidates all tie "
                  "gets the whole pool, never an empty set).",
    "what_if": "What another release policy would release, read from the stored attack and search (no new attack): "
               "released as they are (not flagged), edited (flagged, and a stored search step makes it acceptable: "
               "the edits up to that step), withheld (no stored step does, or never searched). A stricter policy may "
               "need steps the stored search never tried; only a new search and a new calibration decide. The "
               "declared policy stays what the verdict uses.",
    "flag_below": "Release policy k: documents whose certified set has fewer than k members are flagged. "
                  "Sets of k − 1 or fewer correspond to a leakage proxy above 1/k (e.g. k = 12 ↔ 0.09).",
    "leakage_threshold": "Optional second rule: also flag documents whose leakage proxy exceeds this value.",
    "true_rank": "Rank of the true identity in the attacker's list (1 = top, ties counted pessimistically); only "
                 "known on labelled data. Empty when the identity is not in the pool.",
    "weight": "The attacker's weight for the candidate (a pseudo-posterior; it need not be a calibrated "
              "probability: the guarantee never depends on it).",
    "score": "Nonconformity score of the candidate: it is in the set when the score is at most q̂.",
    "pool_size": "Number of candidates the attacker ranked for this document.",
    "n_flagged": "Number of flagged documents under the current release policy: a certified set smaller than k (or a "
                 "leakage proxy above the threshold), or a linkage probability above the acceptable linkage rate.",
    "llm_calls": "How many requests the attack would send to the LLM endpoint for the documents it attacks (every "
                 "document under the release protocol, the calibration and test documents under the split protocol; "
                 "m per document and attribute, or one per document for clues and log-probabilities). "
                 "Answers already in the local cache are free and not counted.",
    "config_id": "A short hash of the full declared threat configuration; certificates of different ids are not "
                 "comparable.",
    "n_read": "Rows read from the file (header excluded).",
    "n_kept": "Rows that passed validation and are used.",
    "n_rejected": "Rows dropped by validation; the table lists each with its reason.",
    "group": "Stratum of the document (e.g. the release mechanism); with per-group calibration each group gets its "
             "own threshold and its own guarantee.",
    "drift_coverage": "Coverage on configuration B's test split when the threshold was calibrated on configuration A.",
    "audit_id": "The audit's number in the audit history.",
    "created_at": "When the audit was recorded (UTC).",
    "source": "Where it ran: the dashboard or the command line (cli).",
    "knowledge": "The knowledge level the attacker was declared to have.",
    "attacker": "The declared attacker.",
    "documents_sha256": "The first characters of the documents file's SHA-256 checksum.",
    "audit_a": "Audit A of the comparison, at this confidence level (empty where it did not certify the level).",
    "audit_b": "Audit B of the comparison, at this confidence level (empty where it did not certify the level).",
    "change": "added: flagged in B only; removed: flagged in A only; kept: flagged in both.",
    "driving_terms": "Terms shared by the document and its top candidates' profiles that weigh most in the match: "
                     "where to start redacting.",
    "inferred_clues": "Clues the LLM drew from the document that the text does not write word for word (inferred): "
                      "no span of the text carries them, so redacting words may not remove them.",
    "set_size_before": "|C| certified for the released text, under the audit's calibration.",
    "indicative_after": "|C| of the redacted text attacked again and counted under the document's stored threshold. "
                        "Indicative: the redacted release is a new release mechanism, certified only by a new "
                        "calibration.",
    "set_size_after": "|C| certified for the redacted text by the re-audit (the same threat model, calibrated again "
                      "on the redacted release).",
    "reaches_k": "Whether the suggested edits lift the set to at least k (indicative).",
    "characters": "Characters of the released text the edits replace: the utility cost of the redaction.",
    "characters_kept": "Characters of the released text that no edit replaced (0 for a withheld document).",
    "meaning": "Meaning kept: the cosine similarity of the packaged sentence-transformers model's embeddings of the "
               "original and the edited text (each the mean of its windows). 1 when the edits changed nothing a "
               "reader of meaning sees, lower as more of it is gone; an untouched document scores 1, a withheld one "
               "has none.",
    "edits": "Spans of the released text the suggestion replaces.",
    "flagged_before": "Flagged by the audit of the released text.",
    "flagged_after": "Flagged by the audit of the redacted release.",
    "still_flagged_because": "For a document still flagged after redaction: the words that still drive its match.",
    "action": "edit: replace these words of the released text; withhold: leave the whole document out of the release "
              "(no safe redaction of its evidence makes it acceptable).",
    "original": "The words of the released text the edit replaces.",
    "replacement": "What they become in the redacted release (empty: deleted).",
    "term": "The piece of the attacker's evidence the edit removes (a word, a sentence or an LLM clue).",
    "origin": "Who proposed the row: the search (suggested), the allow list, or you in the drill-down (curator).",
    "linkage_before": "The document's linkage probability under the audit's calibration.",
    "linkage_after": "The document's linkage probability after redaction, from the re-audit's calibration.",
    "linkage_after_indicative": "The document's linkage probability once this term (and every earlier one) is "
                                "redacted, under the stored calibration. Indicative.",
    "reason": "Why the document is to be withheld, or why an edit is not accepted by default.",
    "accept": "Whether the row goes into the redacted release.",
    "redaction": "What the accepted decisions did to the document: edited, withheld (left out of the release) or "
                 "unchanged.",
    "k": "The release policy's k: documents whose certified set has fewer members are flagged.",
    "flag_confidence": "The confidence level the audit flags at: its flagged count and median |C| are at this level.",
    "redacted_from": "For an audit of a redacted release: the audit of the release it was redacted from.",
}

PROTOCOL_HELP: dict[str, dict[str, str]] = {
    "release": {
        "n_test": "Certified documents: under the release protocol every released document gets a certified set, "
                  "labelled or not, and the certificate is reported on all of them.",
        "n_cal": "Labelled documents (with known identity) that calibrate the thresholds. Under the release protocol "
                 "they are certified too: each one's threshold comes from the other labelled documents of its stratum "
                 "(leave-one-out), each unlabelled document's from all of them.",
        "coverage": "Share of the labelled documents whose leave-one-out set holds their true identity "
                    "(unconditional: documents whose identity is missing from the pool count as misses): about "
                    "⌈n(1 − α)⌉/n by construction under the release protocol, a property of the method, not a "
                    "validation of it.",
        "q_hat": "q̂, the conformal threshold. Under the release protocol it varies per document: a labelled "
                 "document's threshold is the ⌈n(1 − α)⌉-th smallest score of the n − 1 other labelled documents of its "
                 "stratum (leave-one-out), an unlabelled one's the ⌈(n + 1)(1 − α)⌉-th smallest of all n. A candidate "
                 "enters a document's set when its nonconformity score is at most q̂. Infinite: too few calibration "
                 "documents for this confidence, or too many of them with their identity outside the pool; every set "
                 "is then the whole pool.",
    },
    "split": {
        "n_test": "Held-out test documents the certificate is evaluated and reported on (split protocol): they never "
                  "calibrate.",
        "n_cal": "Calibration documents (with known identity) used to compute q̂; under the split protocol they are "
                 "disjoint from the test documents.",
        "coverage": "Empirical coverage on the held-out test split: the share of test documents whose true identity "
                    "is in its certified set (unconditional: documents whose identity is missing from the pool count "
                    "as misses). It should be close to, and on average at least, the confidence level.",
    },
}
"""The help texts said in the terms of one protocol (:func:`help_texts`)."""

PROTOCOLS = tuple(PROTOCOL_HELP)


def help_texts(protocol: str | None = None) -> dict[str, str]:
    """:data:`HELP`, with the texts of ``protocol`` (``release`` or ``split``) where they differ; ``None``: the texts
    that hold under either."""
    return HELP if protocol is None else {**HELP, **PROTOCOL_HELP[protocol]}


PERCENT = "percent"
TEXT = None
COLUMNS: dict[str, tuple[str, str | None, str | None]] = {
    # column -> (label, number format or TEXT, HELP key)
    "confidence": ("confidence", PERCENT, "confidence"),
    "alpha": ("α", "%.3f", "alpha"),
    "q_hat": ("q̂", "%.4f", "q_hat"),
    "threshold": ("q̂", TEXT, "q_hat"),
    "whole_pool_rate": ("whole-pool sets", PERCENT, "whole_pool_rate"),
    "coverage": ("coverage", PERCENT, "coverage"),
    "coverage_ci": ("coverage 95 % CI", TEXT, "coverage_ci"),
    "coverage_low": ("coverage CI low", PERCENT, "coverage_ci"),
    "coverage_high": ("coverage CI high", PERCENT, "coverage_ci"),
    "coverage_conditional": ("coverage (in pool)", PERCENT, "coverage_conditional"),
    "candidate_miss_rate": ("miss rate ρ", PERCENT, "miss_rate"),
    "open_world_bound": ("open-world bound", PERCENT, "open_world_bound"),
    "median_set_size": ("median |C|", "%g", "median_set"),
    "mean_set_size": ("mean |C|", "%.1f", "mean_set"),
    "mean_leakage": ("mean leakage", "%.4f", "mean_leakage"),
    "empty_rate": ("empty sets", PERCENT, "empty_rate"),
    "n_cal": ("n_cal", "%d", "n_cal"),
    "n_cal_needed": ("n_cal needed", "%d", "min_n_cal"),
    "n_test": ("audited", "%d", "n_test"),
    "n_flagged": ("flagged", "%d", "n_flagged"),
    "flagged_share": ("flagged share", PERCENT, "at_risk"),
    "top1": ("top-1", PERCENT, "top1"),
    "first_guess_rate": ("first guess right", PERCENT, "first_guess"),
    "remainder_bound": (f"rest linked at most ({UPPER_BOUND_SHORT})", PERCENT, "remainder_bound"),
    "flagged_by": ("flagged by", TEXT, "flagged_by"),
    "verdict": ("verdict", TEXT, "verdict"),
    "linkage_probability": ("linkage probability", "%.3f", "linkage_probability"),
    "linkage_low": ("linkage from", "%.3f", "linkage_interval"),
    "linkage_high": ("linkage to", "%.3f", "linkage_interval"),
    "first_guess": ("first guess", TEXT, "first_guess_candidate"),
    "stratum": ("stratum", TEXT, "strata"),
    "margin_low": ("margin from", "%.3g", "strata"),
    "margin_high": ("margin to", "%.3g", "strata"),
    "documents": ("documents", "%d", None),
    "calibrating": ("calibrating", "%d", "n_cal"),
    "mrr": ("MRR", "%.3f", "mrr"),
    "set_size": ("|C|", "%d", "set_size"),
    "flag_below": ("k", "%d", "flag_below"),
    "acceptable_linkage": ("acceptable rate a", "%.3f", "acceptable_linkage"),
    "released_as_is": ("released as they are", "%d", "what_if"),
    "edited": ("edited", "%d", "what_if"),
    "withheld": ("withheld", "%d", "what_if"),
    "not_searched": ("withheld, not searched", "%d", "what_if"),
    "documents_kept": ("documents kept", "%d", "what_if"),
    "characters_removed": ("characters removed", "%d", "what_if"),
    "leakage": ("leakage L", "%.3f", "leakage"),
    "warnings": ("warning", TEXT, None),
    "group": ("group", TEXT, "group"),
    "label": ("configuration", TEXT, None),
    "config_id": ("config id", TEXT, "config_id"),
    "doc_id": ("document", TEXT, None),
    "top_candidates": ("top candidates", TEXT, None),
    "top_weights": ("their weights", TEXT, "weight"),
    "driving_terms": ("driving terms", TEXT, "driving_terms"),
    "inferred_clues": ("inferred LLM clues", TEXT, "inferred_clues"),
    "set_size_before": ("|C| before", "%d", "set_size_before"),
    "indicative_after": ("|C| after (indicative)", "%d", "indicative_after"),
    "set_size_after": ("|C| after (recalibrated)", "%d", "set_size_after"),
    "reaches_k": ("reaches k", TEXT, "reaches_k"),
    "characters": ("characters redacted", "%d", "characters"),
    "characters_kept": ("characters kept", "%d", "characters_kept"),
    "characters_kept_share": ("characters kept", PERCENT, "characters_kept"),
    "meaning": ("meaning kept", "%.3f", "meaning"),
    "edits": ("edits", "%d", "edits"),
    "flagged_before": ("flagged before", TEXT, "flagged_before"),
    "flagged_after": ("flagged after", TEXT, "flagged_after"),
    "still_flagged_because": ("still flagged because of", TEXT, "still_flagged_because"),
    "id": ("audit", "%d", "audit_id"),
    "created_at": ("when (UTC)", TEXT, "created_at"),
    "source": ("source", TEXT, "source"),
    "knowledge": ("knowledge", TEXT, "knowledge"),
    "attacker": ("attacker", TEXT, "attacker"),
    "documents_sha256": ("documents SHA-256", TEXT, "documents_sha256"),
    "coverage_a": ("coverage A", PERCENT, "audit_a"),
    "coverage_b": ("coverage B", PERCENT, "audit_b"),
    "median_set_size_a": ("median |C| A", "%g", "audit_a"),
    "median_set_size_b": ("median |C| B", "%g", "audit_b"),
    "n_flagged_a": ("flagged A", "%d", "audit_a"),
    "n_flagged_b": ("flagged B", "%d", "audit_b"),
    "change": ("change", TEXT, "change"),
    "action": ("action", TEXT, "action"),
    "original": ("words", TEXT, "original"),
    "replacement": ("become", TEXT, "replacement"),
    "term": ("evidence term", TEXT, "term"),
    "origin": ("from", TEXT, "origin"),
    "linkage_before": ("linkage before", "%.3f", "linkage_before"),
    "linkage_after": ("linkage after (recalibrated)", "%.3f", "linkage_after"),
    "linkage_after_indicative": ("linkage after (indicative)", "%.3f", "linkage_after_indicative"),
    "reason": ("reason", TEXT, "reason"),
    "accept": ("accept", TEXT, "accept"),
    "redaction": ("redaction", TEXT, "redaction"),
    "k": ("k", "%d", "k"),
    "flag_confidence": ("flagged at", TEXT, "flag_confidence"),
    "redacted_from": ("redacted from audit", "%d", "redacted_from"),
}
"""How every table of figures labels, formats and explains its columns (pages and report alike)."""

PROTOCOL_LABELS: dict[str, dict[str, str]] = {"release": {"n_test": "certified"}, "split": {"n_test": "n_test"}}
"""Column labels said in the terms of one protocol (:func:`column_label`)."""


def column_label(column: str, protocol: str | None = None) -> str:
    """The label of a table column, in the terms of ``protocol`` when it is known (``n_test``: the certified
    documents under the release protocol, the test documents under the split protocol, the audited ones either
    way)."""
    return PROTOCOL_LABELS.get(protocol or "", {}).get(column) or COLUMNS.get(column, (column,))[0]
