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

N_FLAGGED = 30  # flagged documents searched; the first withheld ones are rewritten
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
    flagged = cert.split.table.doc_ids[cert.flags(config.policy)].astype(str)[:N_FLAGGED]
    suggestions = suggest_redactions(result, attacker, registry, texts, doc_ids=flagged)
    stored = PanelStoredRisk(panel_members(result, attacker), registry)
    target = reachable(config.policy, stored.linkage_floor)
    return [s for s in suggestions if s.action == WITHHOLD][:N_REWRITTEN], stored, texts, target


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
