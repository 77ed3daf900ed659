"""Attackers: each turns documents into a ranked candidate table (see :mod:`.base`)."""

from .base import Attacker, build_queries
from .dense import DenseAttacker
from .imported import ImportedAttacker, load_candidate_scores
from .tfidf import TfidfAttacker, TfidfIndex

__all__ = ["Attacker", "DenseAttacker", "ImportedAttacker", "TfidfAttacker", "TfidfIndex", "build_queries", "load_candidate_scores"]
