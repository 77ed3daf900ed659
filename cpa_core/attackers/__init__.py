"""Attackers: each turns documents into a ranked candidate table (see :mod:`.base`)."""

from .base import Attacker, build_queries
from .dense import DenseAttacker
from .forced_choice import ForcedChoiceAttacker
from .imported import ImportedAttacker, load_candidate_scores
from .llm_clues import LLMClueExtractor
from .profile import Attribute, AttributeSet, ProfileAttacker, attributes_from_registry, certified_attribute_sets
from .tfidf import TfidfAttacker, TfidfIndex

__all__ = ["Attacker", "Attribute", "AttributeSet", "DenseAttacker", "ForcedChoiceAttacker", "ImportedAttacker",
           "LLMClueExtractor", "ProfileAttacker", "TfidfAttacker", "TfidfIndex", "attributes_from_registry",
           "build_queries", "certified_attribute_sets", "load_candidate_scores"]
