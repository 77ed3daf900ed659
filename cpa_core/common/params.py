"""Declared parameters: a typed schema (type, default, bounds, label, help, command-line option).

Attackers, the ``[audit]`` and ``[llm]`` tables declare their parameters with :class:`Param`; the TOML
reader, the command line and the dashboard's forms all validate and present them from these
declarations, so a value is checked once, with the same message on every surface.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from cpa_core.common.errors import ConfigError

PARAM_KINDS = ("float", "int", "text", "choice", "bool", "fields", "floats")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Param:
    """One declared parameter: its type, default, bounds, and the words the surfaces show.

    ``kind`` is one of ``float``, ``int``, ``text``, ``choice`` (one of ``choices``), ``bool``,
    ``fields`` (a list of registry fields) or ``floats`` (a non-empty list of numbers, each within the
    bounds). Bounds are inclusive (``min``, ``max``) except ``above`` and ``below``, strict bounds (a
    temperature must be > 0, a confidence level < 1). ``optional`` admits ``None`` (the built object's
    own default); ``special`` lists other accepted words (a temperature may be ``"auto"``). ``option`` is
    the command-line option that sets it (``None``: set it with
    ``--param name=value``); with ``flag`` the option takes no value and sets ``flag``.
    ``step`` is the dashboard widget's increment.
    """

    name: str
    kind: str
    default: Any
    label: str
    help: str
    min: float | None = None
    max: float | None = None
    above: float | None = None
    below: float | None = None
    choices: tuple = ()
    optional: bool = False
    special: tuple = ()
    option: str | None = None
    flag: Any = None
    step: float | None = None

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"parameter '{self.name}': unknown kind '{self.kind}'")

    @property
    def expected(self) -> str:
        """What a valid value is, in words (for error messages and help)."""
        if self.kind == "choice":
            return "one of " + ", ".join(f"'{c}'" for c in self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "text":
            return "a text"
        if self.kind == "fields":
            return "a list of registry field names"
        what = {"int": "an integer", "float": "a number", "floats": "a non-empty list of numbers"}[self.kind]
        bounds = []
        if self.above is not None:
            bounds.append(f"greater than {self.above:g}")
        if self.min is not None:
            bounds.append(f"at least {self.min:g}")
        if self.max is not None:
            bounds.append(f"at most {self.max:g}")
        if self.below is not None:
            bounds.append(f"less than {self.below:g}")
        if bounds and self.kind == "floats":
            what += ", each"
        words = "".join(f" or '{word}'" for word in self.special)
        return what + (" " + " and ".join(bounds) if bounds else "") + words

    def accepts(self, value) -> bool:
        if value is None:
            return self.optional
        if isinstance(value, str) and value in self.special:
            return True
        if self.kind == "choice":
            return value in self.choices
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "text":
            return isinstance(value, str)
        if self.kind == "fields":
            return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        if self.kind == "floats":
            return isinstance(value, (list, tuple)) and len(value) > 0 and all(self._in_bounds(v) for v in value)
        return self._in_bounds(value)

    def _in_bounds(self, value) -> bool:
        if not (_is_int(value) if self.kind == "int" else _is_number(value)):
            return False
        try:
            if not math.isfinite(value):
                return False
        except OverflowError:  # an integer beyond the float range
            return False
        return ((self.above is None or value > self.above) and (self.min is None or value >= self.min)
                and (self.max is None or value <= self.max) and (self.below is None or value < self.below))

    def check(self, value, where: str):
        """``value`` when it is valid (lists become tuples), else a :class:`ConfigError` naming ``where``."""
        if not self.accepts(value):
            raise ConfigError(f"{where} {self.name}: expected {self.expected}, found {value!r}")
        if self.kind == "fields":
            return tuple(value)
        if self.kind == "floats":
            return tuple(float(v) for v in value)
        if self.kind == "float" and value is not None and value not in self.special:
            return float(value)
        return value


def check_table(params: tuple[Param, ...], declared: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The declared values, each checked (``where`` names the table, e.g. ``[audit]``); unknown keys are errors."""
    by_name = {p.name: p for p in params}
    for name in declared:
        if name not in by_name:
            raise ConfigError(f"unknown key '{name}' in {where}; expected one of {', '.join(sorted(by_name))}")
    return {name: by_name[name].check(value, where) for name, value in declared.items()}


def resolve_params(params: tuple[Param, ...], declared: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Every parameter's value: the declared one (checked) or its default."""
    checked = check_table(params, declared, where)
    return {p.name: checked.get(p.name, p.default) for p in params}
