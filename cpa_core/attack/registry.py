"""The attackers the tool offers, by name.

Adding an attacker is one module that defines an :class:`~.spec.AttackerSpec` and one line below (or a
call to :func:`register` from any module, e.g. a plug-in). Everything else (``[attacker.<name>]`` in the
TOML file, ``--attacker`` and its options on the command line, the dashboard's form, the configuration
summary, the manifest) is derived from the spec.
"""

from __future__ import annotations

from cpa_core.attack.attackers import dense, forced_choice, imported, profile, tfidf
from cpa_core.attack.spec import AttackerSpec

_SPECS: dict[str, AttackerSpec] = {}


def register(spec: AttackerSpec) -> AttackerSpec:
    """Offer an attacker under ``spec.name`` (a second spec of the same name replaces the first)."""
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Stop offering an attacker (e.g. a plug-in a test registered)."""
    _SPECS.pop(name, None)


def get_spec(name: str) -> AttackerSpec:
    from cpa_core.common.errors import ConfigError

    if name not in _SPECS:
        raise ConfigError(f"unknown attacker '{name}'; expected one of {', '.join(_SPECS)}")
    return _SPECS[name]


def attacker_specs() -> list[AttackerSpec]:
    """Every registered attacker, in registration order."""
    return list(_SPECS.values())


register(tfidf.SPEC)
register(dense.SPEC)
register(forced_choice.SPEC)
register(profile.SPEC)
register(imported.SPEC)
