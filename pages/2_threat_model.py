"""Step 2: declare the threat configuration the certificate will be valid for."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from cpa_core.common.errors import CPAError
from cpa_core.conformal.scores import SCORES
from cpa_core.io.knowledge import QUERY_MODES, profile_texts
from cpa_core.report.formatting import configuration_summary
from cpa_core.report.help import HELP
from cpa_ui import nav
from cpa_ui.attackers import (
    ENDPOINT,
    default_attackers,
    default_threat,
    endpoint_defaults,
    form_defaults,
    needs_endpoint,
    offered_specs,
    usable_levels,
)
from cpa_ui.cache import llm_calls, scores_from_upload
from cpa_ui.components import declared, param_widgets, require_data, show_error
from cpa_ui.state import CUSTOM_LEVEL, ThreatChoice, state, widget_key
from cpa_ui.text import plain

CONFIDENCE_CHOICES = (0.80, 0.90, 0.95, 0.975, 0.99, 0.995)
QUERY_MODE_LABELS = {"direct": "Direct: the released text is the query",
                     "direct_plus_clues": "Direct + clues: an LLM appends identifying clues (needs an LLM endpoint)"}
PROTOCOLS = {"release": "Certify every document (leave-one-out on the labelled documents; default)",
             "split": "Calibration/test split (matched comparisons, published protocols)"}
MISS_POLICIES = {"infinite": "Count them as infinitely nonconforming (conservative; default)",
                 "exclude": "Leave them out (guarantee conditional on the identity being in the pool)"}

data = require_data()
if state.threat is None:
    state.threat = default_threat(data)
threat: ThreatChoice = state.threat
n_documents = len(data.documents)

st.title("Threat model")
st.markdown("Declare what the attacker knows and how it works. The certificate is valid for exactly this "
            "configuration: change anything and the audit must be calibrated again.")

# --- attackers -----------------------------------------------------------------------------------------------
st.subheader("Attackers")
specs = {spec.name: spec for spec in offered_specs()}
labels = {name: s.label for name, s in specs.items()}
attackers = st.multiselect(
    "Attacker panel", list(specs), format_func=labels.get, key=widget_key(
        "threat.attackers", [name for name in threat.attackers if name in specs] or ["tfidf"]),
    help="Every attacker chosen is run and calibrated on its own on the same documents (its own certificate, strata "
         "and linkage probability); a document's risk is the worst over them, and the release is judged against each "
         "of them. One attacker: a single attacker's audit. The default is the panel the command line runs for a "
         f"release of this size ({', '.join(default_attackers(data))}).")
if len(attackers) > 1:
    st.caption(f"A panel of {len(attackers)} attackers: a document is flagged when any of them flags it, and the "
               "release is certified only when every one's first-guess rate on what is left is within the acceptable "
               "rate, with bounds corrected for testing several attackers.")
if not attackers:
    st.error("Choose at least one attacker.", icon=":material/error:")
members = {}
for name in attackers:
    spec = specs[name]
    with st.expander(f"{spec.label}: parameters", expanded=len(attackers) == 1):
        st.caption(spec.description[0].upper() + spec.description[1:] + ".")
        current = threat.params_of(name) if name in threat.attackers else form_defaults(spec, data)
        members[name] = param_widgets(spec.params, current, f"threat.param.{name}", data.registry.fields)
if any(specs[name].needs_scores for name in attackers):
    scores_file = st.file_uploader("Candidate scores: doc_id, candidate_id, score (CSV, JSONL or Parquet)",
                                   type=["csv", "jsonl", "ndjson", "parquet", "pq"], key="upload.scores")
    if scores_file is not None:
        try:
            state.scores = scores_from_upload(scores_file.getvalue(), scores_file.name)
            st.caption(f"{len(state.scores.frame):,} candidate scores for "
                       f"{state.scores.frame['doc_id'].nunique():,} documents read from {plain(scores_file.name)}.")
        except CPAError as error:
            show_error(error)
            state.scores = None

# --- knowledge ----------------------------------------------------------------------------------------------
st.subheader("Knowledge")
levels = usable_levels(data)
unusable = [name for name in data.project.levels if name not in levels]
options = levels + [CUSTOM_LEVEL]
knowledge = st.radio("Knowledge level", options, horizontal=True,
                     format_func={**{name: plain(name) for name in levels}, CUSTOM_LEVEL: "Custom field list"}.get,
                     key=widget_key("threat.knowledge",
                                    threat.knowledge if threat.knowledge in options else options[0]),
                     help="Which registry fields the attacker sees. K1 (weak) to K3 (strong) are declared in the "
                          "audit configuration; a custom list declares your own.")
if unusable:
    st.caption(f"Levels {plain(', '.join(unusable))} need fields the loaded registry does not have.")
custom_fields = tuple(threat.custom_fields)
query_mode = threat.query_mode
if knowledge == CUSTOM_LEVEL:
    custom_fields = tuple(st.multiselect("Registry fields the attacker sees", data.registry.fields,
                                         key=widget_key("threat.custom_fields",
                                                        [f for f in custom_fields if f in data.registry.fields])))
query_mode = st.radio("Query mode", QUERY_MODES, format_func=QUERY_MODE_LABELS.get, horizontal=True,
                      key=widget_key("threat.query_mode", query_mode if query_mode in QUERY_MODES else "direct"),
                      help="The clue-augmented mode asks an LLM for identifying clues and appends them to the query.")
# the level as the declared configuration names it (every registry field is `full`, however chosen): drawn here once
# the whole configuration below is declared
knowledge_preview = st.container()
llm = dict(threat.llm) or endpoint_defaults(data)
sending = [specs[name] for name in attackers if needs_endpoint(specs[name], query_mode)]
if sending:
    st.subheader("LLM endpoint")
    st.warning("This configuration sends document text to the LLM endpoint below.", icon=":material/cloud_upload:")
    llm = param_widgets(ENDPOINT, llm, "threat.llm", ())
    if not (llm.get("base_url") and llm.get("model")):
        st.warning("No LLM endpoint is configured: enter the endpoint and the model to run "
                   + ("this attacker" if len(attackers) == 1 else ", ".join(spec.label for spec in sending))
                   + ("" if any(spec.sends_text for spec in sending) else ", or choose the direct query mode") + ".",
                   icon=":material/block:")

# --- pool, score, protocol ------------------------------------------------------------------------------------
st.subheader("Candidate pool and score")
left, right = st.columns(2)
scoring_itself = {name: specs[name].required_score for name in attackers if specs[name].required_score}
score = left.selectbox("Nonconformity score", list(SCORES), key=widget_key("threat.score", threat.score),
                       format_func={name: f"{name}: {s.description}" for name, s in SCORES.items()}.get,
                       disabled=bool(attackers) and len(scoring_itself) == len(attackers),
                       help="How nonconforming a candidate is for a document; every score gives valid sets, "
                            "they differ in set sizes. APS is the default.")
if attackers and len(scoring_itself) == len(attackers) == 1:
    score = scoring_itself[attackers[0]]
    left.caption(f"This attacker scores candidates itself: the score is '{score}'.")
elif scoring_itself:
    left.caption("; ".join(f"{labels[name]} scores candidates itself: its score is '{own}'"
                           for name, own in scoring_itself.items()) + ".")
whole = right.checkbox("Rank the whole registry", key=widget_key("threat.whole_pool", threat.top_k is None),
                       help="Otherwise the attacker keeps a top-K shortlist; identities cut from it count as "
                            "candidate misses.")
top_k = None if whole else int(right.number_input(
    "Top-K shortlist", min_value=1, max_value=max(len(data.registry), 1), step=1,
    key=widget_key("threat.top_k", threat.top_k or min(50, len(data.registry)))))

st.subheader("Calibration protocol")
protocol = st.radio("Protocol", list(PROTOCOLS), format_func=PROTOCOLS.get, horizontal=True,
                    key=widget_key("threat.protocol", threat.protocol), help=HELP["protocol"])
columns = st.columns(4)
n_cal = n_test = None
if protocol == "split":
    n_cal = int(columns[0].number_input("Calibration documents n_cal", min_value=1, max_value=n_documents, step=50,
                                        key=widget_key("threat.n_cal", threat.n_cal or n_documents // 2),
                                        help=HELP["n_cal"]))
    n_test = int(columns[1].number_input("Test documents n_test", min_value=1, max_value=n_documents, step=50,
                                         key=widget_key("threat.n_test",
                                                        threat.n_test or n_documents - n_documents // 2),
                                         help=HELP["n_test"]))
    if n_cal + n_test > n_documents:
        st.error(f"n_cal + n_test = {n_cal + n_test:,} exceeds the {n_documents:,} documents loaded.",
                 icon=":material/error:")
seed = int(columns[2].number_input("Split seed", min_value=0, step=1, key=widget_key("threat.seed", threat.seed),
                                   disabled=protocol != "split",
                                   help="Seed of the random calibration/test split; part of the configuration."))
per_group = columns[3].checkbox("Calibrate per group", disabled=not data.documents.has_groups,
                                key=widget_key("threat.per_group", threat.per_group and data.documents.has_groups),
                                help="Mondrian calibration: one threshold per group (e.g. per release mechanism), "
                                     "so the guarantee holds within each group."
                                     + ("" if data.documents.has_groups else " The documents have no group column."))
miss_policy = st.radio("Calibration documents whose identity is not in the pool", list(MISS_POLICIES),
                       format_func=MISS_POLICIES.get, key=widget_key("threat.miss_policy", threat.miss_policy))
confidences = st.multiselect("Confidence levels to certify and export", CONFIDENCE_CHOICES,
                             key=widget_key("threat.confidences", [c for c in threat.confidences
                                                                   if c in CONFIDENCE_CHOICES] or [0.95]),
                             format_func={c: f"{100 * c:g} %" for c in CONFIDENCE_CHOICES}.get,
                             help=HELP["confidence"] +
                             " The Explore page shows any other level without a new attack.")

state.threat = ThreatChoice(
    attackers=tuple(attackers),
    attacker_params=tuple((name, tuple(params.items())) for name, params in members.items()),
    llm=tuple(llm.items()), knowledge=knowledge, custom_fields=custom_fields,
    query_mode=query_mode, score=score, top_k=top_k, protocol=protocol, n_cal=n_cal, n_test=n_test, seed=seed,
    per_group=per_group,
    miss_policy=miss_policy, confidences=tuple(sorted(confidences)) or (0.95,))

# --- summary ------------------------------------------------------------------------------------------------
st.subheader("Declared configuration")
declaration = declared(data)
if declaration is not None:
    level = declaration.config.knowledge
    with knowledge_preview:
        st.caption(plain(f"Knowledge level {level.name}"
                         + (f": {level.description.rstrip('.')}." if level.description else ".")))
        visible = set(level.fields)
        st.dataframe(pd.DataFrame({"registry field": data.registry.fields,
                                   "the attacker sees it": [f in visible for f in data.registry.fields]}),
                     hide_index=True, column_config={"the attacker sees it": st.column_config.CheckboxColumn()})
        with st.expander("The profile text the attacker builds for the first registry entry"):
            st.text(profile_texts(data.registry, level)[0])
    places = st.tabs([labels[name] for name in declaration.names]) if declaration.is_panel else [st.container()]
    for place, member in zip(places, declaration.members):
        place.info(plain(configuration_summary(member.config, n_documents=n_documents, n_profiles=len(data.registry),
                                               groups=data.groups if per_group else ())), icon=":material/gavel:")
    st.caption((f"Configuration id {declaration.config_id}"
                + (f" (the panel of {len(declaration.members)} attackers: "
                   + ", ".join(f"{m.config.attacker.name} {m.config.config_id}" for m in declaration.members) + ")"
                   if declaration.is_panel else "")
                + f". {HELP['config_id']}"))
    sending = [member for member in declaration.members
               if needs_endpoint(specs[member.config.attacker.name], member.config.knowledge.query_mode)]
    if sending:
        try:
            calls = sum(llm_calls(data, member.config, member.attacker) for member in sending)
        except CPAError as error:
            show_error(error, "The LLM calls could not be estimated: ")
        else:
            st.metric("Estimated LLM calls" if len(sending) == 1 else "Estimated LLM calls (at most)", f"{calls:,}",
                      help=HELP["llm_calls"] + ("" if len(sending) == 1 else " The attackers of the panel that send "
                                                "text, counted together: those asking the same question (the same "
                                                "clues) share its cached answer, so fewer calls may be made."))
    st.page_link(nav.CALIBRATE, label="Next: run the attack and calibrate", icon=":material/arrow_forward:")
