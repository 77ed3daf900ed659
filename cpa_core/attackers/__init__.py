"""Attackers: each turns documents into a ranked candidate table (see :mod:`.base`) and declares itself
with a spec (:mod:`.spec`) in the registry (:mod:`.registry`)."""

from .base import Attacker, AttackerBase, RetrievalAttacker, build_queries, close_clients
from .dense import DenseAttacker
from .forced_choice import ForcedChoiceAttacker
from .imported import CandidateScores, ImportedAttacker, load_candidate_scores, read_candidate_scores
from .llm_clues import LLMClueExtractor
from .profile import Attribute, AttributeSet, ProfileAttacker, attributes_from_registry, certified_attribute_sets
from .registry import attacker_specs, get_spec, register
from .spec import AttackerSpec, BuildContext, Param
from .tfidf import TfidfAttacker, TfidfIndex

__all__ = ["Attacker", "AttackerBase", "AttackerSpec", "Attribute", "AttributeSet", "BuildContext", "CandidateScores",
           "DenseAttacker", "ForcedChoiceAttacker", "ImportedAttacker", "LLMClueExtractor", "Param", "ProfileAttacker",
           "RetrievalAttacker", "TfidfAttacker", "TfidfIndex", "attacker_specs", "attributes_from_registry",
           "build_queries", "certified_attribute_sets", "close_clients", "get_spec", "load_candidate_scores",
           "read_candidate_scores", "register"]
