"""The built-in attackers, one module each; :mod:`cpa_core.attack.registry` offers them by name."""
