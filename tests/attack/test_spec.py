"""How an attacker declares itself: its typed parameters resolved from a declared table (defaults filled, unknown
keys and bad values refused naming the table), and the context it is built from (the LLM client built once and
only when asked, the clue extractor of a clue level, another attacker built from its own section)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from word_registry import WORDS, make_registry

from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.attack.spec import AttackerSpec, BuildContext
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.io.knowledge import KnowledgeLevel

CLUES = KnowledgeLevel("C", ("words",), "direct_plus_clues")


@dataclass
class Built:
    params: dict
    context: BuildContext


SPEC = AttackerSpec(
    name="toy", label="Toy", description="ranks by hand",
    params=(Param("depth", "int", 3, "Depth", "How deep.", min=1),
            Param("mode", "choice", "fast", "Mode", "How.", choices=("fast", "slow"))),
    build=lambda params, context: Built(params, context))


def context(level=WORDS, **kwargs) -> BuildContext:
    return BuildContext(make_registry({"P1": "alpha", "P2": "beta"}), level, **kwargs)


def test_a_spec_declares_its_parameters_and_their_defaults():
    assert SPEC.param("mode").choices == ("fast", "slow")
    with pytest.raises(KeyError):
        SPEC.param("speed")
    assert SPEC.defaults() == {"depth": 3, "mode": "fast"}
    assert not (SPEC.sends_text or SPEC.needs_scores or SPEC.uses_clues or SPEC.runs_on_cluster)
    assert SPEC.required_score is None


def test_a_declared_table_is_resolved_against_the_parameters():
    assert SPEC.resolve({}) == {"depth": 3, "mode": "fast"}
    assert SPEC.resolve({"mode": "slow"}) == {"depth": 3, "mode": "slow"}
    with pytest.raises(ConfigError, match=r"^unknown key 'speed' in \[attacker.toy\]; expected one of depth, mode$"):
        SPEC.resolve({"speed": 2})
    with pytest.raises(ConfigError, match=r"^\[attacker.toy\] depth: expected .*found 0$"):
        SPEC.resolve({"depth": 0})
    built = SPEC.build(SPEC.resolve({"depth": 5}), context(top_k=7))
    assert built.params == {"depth": 5, "mode": "fast"} and built.context.top_k == 7


def test_the_llm_client_is_built_once_and_only_when_asked():
    made = []
    ctx = context(make_llm_client=lambda: made.append(object()) or made[-1])
    assert made == []
    first = ctx.llm_client()
    assert ctx.llm_client() is first and len(made) == 1
    with pytest.raises(ConfigError, match=r"^an LLM attacker needs an endpoint: declare \[llm\] base_url and model "
                                          r"\(or --llm-url and --llm-model\)$"):
        context().llm_client()


def test_the_clue_extractor_of_a_clue_level():
    assert context(make_llm_client=lambda: pytest.fail("no client for a direct level")).clue_extractor() is None
    client = object()
    ctx = context(CLUES, sections={"clues": {"max_clues": 3, "retries": 0}}, make_llm_client=lambda: client)
    extractor = ctx.clue_extractor()
    assert isinstance(extractor, LLMClueExtractor) and extractor.client is client
    assert (extractor.max_clues, extractor.retries, extractor.seed) == (3, 0, 0)
    assert ctx.clue_extractor() is extractor  # built once
    with pytest.raises(ConfigError, match=r"\[attacker.clues\]"):
        context(CLUES, sections={"clues": {"max_clues": 0}}, make_llm_client=lambda: client).clue_extractor()


def test_another_attacker_is_built_from_its_own_section():
    ctx = context(sections={"toy": {"mode": "slow"}}, specs={"toy": SPEC}.__getitem__)
    other = ctx.attacker("toy", depth=9)
    assert other.params == {"depth": 9, "mode": "slow"} and other.context is ctx
    with pytest.raises(ConfigError, match="the attacker 'toy' is needed, but no attacker registry was given"):
        context().attacker("toy")
