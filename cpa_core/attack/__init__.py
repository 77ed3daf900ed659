"""The attack: the attacker protocol, its declaration and registry, the built-in attackers, the ranked candidate
table they produce, the temperature fit, explainers of a match, models and the Dask engine."""
