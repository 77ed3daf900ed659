"""The attackers the tool offers, by name: a table that a loader fills with the built-in attackers.

:data:`ATTACKERS` is the table every surface reads (``[attacker.<name>]`` in the TOML file, ``--attacker`` and
its options on the command line, the dashboard's form, the configuration summary, the manifest); it is filled
with :data:`cpa_core.attack.attackers.BUILTIN` when first read. Adding an attacker is one module that defines
an :class:`~cpa_core.attack.spec.AttackerSpec` and one entry in that tuple, or a call to :func:`register` from
any module (e.g. a plug-in).
"""

from __future__ import annotations

from typing import Callable, Iterable

from cpa_core.attack.spec import AttackerSpec
from cpa_core.common.errors import ConfigError


class AttackerRegistry:
    """Attacker specs by name, in registration order; ``loader`` gives the specs the table starts with (read
    once, on first use)."""

    def __init__(self, loader: Callable[[], Iterable[AttackerSpec]] = tuple):
        self._loader = loader
        self._specs: dict[str, AttackerSpec] | None = None

    def _table(self) -> dict[str, AttackerSpec]:
        if self._specs is None:
            self._specs = {spec.name: spec for spec in self._loader()}
        return self._specs

    def register(self, spec: AttackerSpec) -> AttackerSpec:
        """Offer an attacker under ``spec.name`` (a second spec of the same name replaces the first)."""
        self._table()[spec.name] = spec
        return spec

    def unregister(self, name: str) -> None:
        """Stop offering an attacker (e.g. a plug-in a test registered)."""
        self._table().pop(name, None)

    def get(self, name: str) -> AttackerSpec:
        """The spec registered under ``name``; a :class:`ConfigError` naming the choices otherwise."""
        table = self._table()
        if name not in table:
            raise ConfigError(f"unknown attacker '{name}'; expected one of {', '.join(table)}")
        return table[name]

    def specs(self) -> list[AttackerSpec]:
        """Every registered attacker, in registration order."""
        return list(self._table().values())


def _builtin() -> tuple[AttackerSpec, ...]:
    from cpa_core.attack.attackers import BUILTIN

    return BUILTIN


ATTACKERS = AttackerRegistry(_builtin)
"""The attackers the tool offers: the built-in ones, then any registered by a plug-in."""

register = ATTACKERS.register
unregister = ATTACKERS.unregister
get_spec = ATTACKERS.get
attacker_specs = ATTACKERS.specs
