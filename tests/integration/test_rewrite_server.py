"""The LLM rewrite of documents the search would withhold, against a real OpenAI-compatible server (llama.cpp,
SmolLM2-135M-Instruct) and the real TF-IDF attack of the sample release: every rewrite the model gives is attacked
again, kept exactly when it is within the policy and no riskier than the released text, and refused otherwise; a
rewrite that raises the risk is refused and its document stays withheld. What is tested is the rule, not a 135M
model's skill: it rarely writes a safe rewrite.

Skipped, with the install command, when the server is not installed (see tests/llm_server.py).
"""

from __future__ import annotations

import pytest
from llm_server import client_factory, llm_server  # noqa: F401  (the session fixture)

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, load_config
from cpa_core.audit.rescoring import PanelStoredRisk
from cpa_core.redaction.rewrite import Rewriter, rewrite_edits, rewrite_withheld
from cpa_core.redaction.suggestions import REDACT, WITHHOLD, apply_edits, panel_members, reachable, suggest_redactions

pytestmark = pytest.mark.integration

N_FLAGGED = 30  # flagged documents searched at a time, until N_REWRITTEN are to be withheld: those are rewritten
N_REWRITTEN = 5  # about 6 s a rewrite on one core


@pytest.fixture(scope="module")
def make_client(llm_server, tmp_path_factory):  # noqa: F811
    yield from client_factory(llm_server, max_tokens=256, cache_dir=str(tmp_path_factory.mktemp("llm-cache")))


@pytest.fixture(scope="module")
def withheld(sample_paths):
    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    config, attacker = declare_audit(project, registry, attacker="tfidf", documents=documents)
    result = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    cert = result.certificate(config.policy_confidence)
    flagged = cert.split.table.doc_ids[cert.flags(config.policy)].astype(str)
    to_withhold = []
    for start in range(0, len(flagged), N_FLAGGED):  # until enough documents are to be withheld
        chunk = suggest_redactions(result, attacker, registry, texts, doc_ids=flagged[start:start + N_FLAGGED])
        to_withhold += [s for s in chunk if s.action == WITHHOLD]
        if len(to_withhold) >= N_REWRITTEN:
            break
    stored = PanelStoredRisk(panel_members(result, attacker), registry)
    target = reachable(config.policy, stored.linkage_floor)
    return to_withhold[:N_REWRITTEN], stored, texts, target


def test_a_rewrite_is_kept_exactly_when_safe_and_one_that_raises_risk_is_refused(withheld, make_client):
    suggestions, stored, texts, target = withheld
    assert len(suggestions) == N_REWRITTEN
    names = stored.documents()
    client = make_client()
    rewriter = Rewriter(client, rounds=1, seed=3)
    out = rewrite_withheld(suggestions, names, texts, stored.of, rewriter, target)
    # the model's answers again: the cache gives the same texts without a call
    sent = client.calls_made_
    assert sent == N_REWRITTEN
    ids = [s.doc_id for s in suggestions]
    answers = rewriter.rewrite([texts[d] for d in ids], [[st.term for st in s.steps] + list(s.rejected)
                                                          for s in suggestions], 0)
    assert client.calls_made_ == sent
    released = {d: found.risk for d, found in zip(ids, stored.of([names[d] for d in ids], [texts[d] for d in ids]))}
    raised = 0
    for given, suggestion, answer in zip(suggestions, out, answers):
        doc_id = suggestion.doc_id
        assert answer is not None  # the server answers every request
        risk = stored.of([names[doc_id]], [answer])[0].risk
        safe = risk.acceptable(target) and risk.no_higher_than(released[doc_id])
        if safe:
            assert suggestion.action == REDACT and suggestion.after == risk
            assert apply_edits(texts[doc_id], suggestion.edits).split() == answer.split()
            assert suggestion.edits == rewrite_edits(texts[doc_id], answer)
        else:
            assert suggestion.action == WITHHOLD and suggestion.edits == given.edits  # the search's, as they were
            why = ("its rewrite raises the risk under tfidf" if not risk.no_higher_than(released[doc_id])
                   else "its rewrite is still flagged by the policy")
            assert suggestion.reason.endswith(f"an LLM rewrite was refused: {why}")
            raised += not risk.no_higher_than(released[doc_id])
    assert raised >= 1, "no rewrite of the real model raised the risk: the refusal is not exercised"


def test_the_redact_page_offers_the_riskiest_documents_to_withhold_to_the_rewrite(llm_server, sample_paths,  # noqa: F811
                                                                                  tmp_path, monkeypatch):
    """On the Redact page, with the endpoint the configuration declares: the search's documents to withhold, at most
    the number asked and riskiest first, are offered to the rewrite, each kept or refused with its reason; the page
    says where their text goes. Without an endpoint the option is off."""
    from dataclasses import replace

    from apptest import assert_clean, calibrate, new_app

    from cpa_ui import nav

    monkeypatch.setenv("CPA_LLM_CACHE_DIR", str(tmp_path / "llm-cache"))
    at = calibrate(new_app().run())
    at.switch_page(nav.REDACT).run()
    assert at.checkbox(key="w.redact.rewrite").disabled  # the sample declares no endpoint
    data = at.session_state["cpa.data"]
    endpoint = {"base_url": llm_server.base_url, "model": llm_server.model, "max_tokens": 256, "max_retries": 1,
                "concurrency": 1, "cache_dir": str(tmp_path / "llm-cache")}
    at.session_state["cpa.data"] = replace(data, project=replace(data.project, llm=endpoint))  # as a file declares it
    threat = at.session_state["cpa.threat"]  # as the Threat model page would then show it
    at.session_state["cpa.threat"] = replace(threat, llm=(("base_url", endpoint["base_url"]),
                                                          ("model", endpoint["model"])))
    at.run()
    at.checkbox(key="w.redact.rewrite").check().run()
    at.number_input(key="w.redact.rewrite_max").set_value(2).run()
    assert any(llm_server.base_url.split("//")[1].split("/")[0] in w.value for w in at.warning)
    at.button(key="redact.suggest").click().run()
    assert_clean(at)
    suggestions = at.session_state["cpa.review"].suggestions
    withheld_by_search = [s for s in suggestions
                          if s.action == WITHHOLD or any(e.kind == "rewrite" for e in s.edits)]
    offered = [s for s in withheld_by_search if "an LLM rewrite was refused" in s.reason
               or any(e.kind == "rewrite" for e in s.edits)]
    assert len(offered) == 2 and offered == withheld_by_search[:2]  # the riskiest two, in order
    table = at.session_state["cpa.review"].table
    for s in offered:
        if s.action == REDACT:
            assert set(table.loc[table["doc_id"] == s.doc_id, "kind"]) == {"rewrite"}
