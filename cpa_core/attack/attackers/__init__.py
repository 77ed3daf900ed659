"""The built-in attackers, one module each; :mod:`cpa_core.attack.registry` offers them by name."""

from cpa_core.attack.attackers import bm25, dense, forced_choice, imported, learned, lexical_fusion, profile, tfidf

BUILTIN = (tfidf.SPEC, dense.SPEC, forced_choice.SPEC, profile.SPEC, imported.SPEC, lexical_fusion.SPEC,
           learned.SPEC, bm25.SPEC)
"""The built-in attackers' specs, in the order the command line and the dashboard list them."""
