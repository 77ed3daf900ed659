"""Declared parameters: accepted values per kind and bound, error messages, defaults, and the TOML schema
of every registered attacker derived from its spec."""

import json
import math

import pytest

from cpa_core.attack.registry import attacker_specs
from cpa_core.audit.project import parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import PARAM_KINDS, Param, check_table, resolve_params


def param(kind, default=None, **kwargs):
    return Param("x", kind, default, "X", "help", **kwargs)


# (param, accepted values, rejected values)
CASES = {
    "float above 0, max 10": (param("float", 1.0, above=0, max=10),
                              [1e-9, 0.5, 1, 10, 10.0], [0, 0.0, -1, 10.000001, None, "1", [1.0]]),
    "float min 0, below 1": (param("float", 0.5, min=0, below=1),
                             [0, 0.0, 0.999], [1, 1.0, -1e-12, 2]),
    "int min 1 max 5": (param("int", 1, min=1, max=5),
                        [1, 3, 5], [0, 6, 1.0, 2.5, "2", None]),
    "int unbounded": (param("int", 0), [-7, 0, 10**12], [0.0, "0"]),
    "text": (param("text", ""), ["", "abc", "with space"], [1, None, ["a"], b"abc"]),
    "choice": (param("choice", "a", choices=("a", "b")), ["a", "b"], ["A", "c", "", None, ["a"]]),
    "bool": (param("bool", True), [True, False], [1, 0, "true", None]),
    "fields": (param("fields", ()), [[], ["age"], ("age", "city")], ["age", ["age", 1], None, [None]]),
    "floats in (0, 1)": (param("floats", (0.9,), above=0, below=1),
                         [[0.5], (0.5, 0.9), [0.1, 0.2, 0.3]], [[], [0.5, 1], [0], [0.5, None], "0.5", 0.5, None]),
    "optional float": (param("float", None, min=0, optional=True), [None, 0, 2.5], [-1, "x"]),
    "optional text": (param("text", None, optional=True), [None, "x"], [3]),
    "optional choice": (param("choice", None, choices=("a",), optional=True), [None, "a"], ["b"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_accepts_exactly_the_valid_values(name):
    p, good, bad = CASES[name]
    for value in good:
        assert p.accepts(value), (name, value)
    for value in bad:
        assert not p.accepts(value), (name, value)


def test_every_kind_is_covered_and_an_unknown_kind_is_refused():
    assert {p.kind for p, _, _ in CASES.values()} == set(PARAM_KINDS)
    with pytest.raises(ValueError, match="unknown kind 'complex'"):
        param("complex")


@pytest.mark.parametrize("kind", ["float", "int", "floats"])
def test_bools_are_not_numbers(kind):
    p = param(kind)
    assert not p.accepts(True) and not p.accepts(False)
    if kind == "floats":
        assert not p.accepts([True]) and not p.accepts([0.5, False])


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("kind", ["float", "floats"])
def test_nan_and_infinities_are_rejected_even_without_bounds(kind, value):
    p = param(kind)
    assert not p.accepts([value] if kind == "floats" else value)
    assert p.accepts([1.5] if kind == "floats" else 1.5)


def test_none_is_accepted_only_when_optional():
    for kind, choices in (("float", ()), ("int", ()), ("text", ()), ("choice", ("a",)), ("bool", ()),
                          ("fields", ()), ("floats", ())):
        assert not param(kind, choices=choices).accepts(None), kind
        assert param(kind, choices=choices, optional=True).accepts(None), kind


@pytest.mark.parametrize("p, expected", [
    (param("float", above=0, max=1000.0), "a number greater than 0 and at most 1000"),
    (param("float", min=0.5, below=2), "a number at least 0.5 and less than 2"),
    (param("int", min=1), "an integer at least 1"),
    (param("int"), "an integer"),
    (param("floats", above=0, below=1), "a non-empty list of numbers, each greater than 0 and less than 1"),
    (param("floats"), "a non-empty list of numbers"),
    (param("choice", choices=("aps", "rank")), "one of 'aps', 'rank'"),
    (param("bool"), "true or false"),
    (param("text"), "a text"),
    (param("fields"), "a list of registry field names"),
])
def test_expected_in_words(p, expected):
    assert p.expected == expected


def test_check_converts_lists_to_tuples_and_ints_to_floats():
    assert param("fields").check(["a", "b"], "[k]") == ("a", "b")
    floats = param("floats").check([1, 0.5], "[k]")
    assert floats == (1.0, 0.5) and all(type(v) is float for v in floats)
    value = param("float").check(3, "[k]")
    assert value == 3.0 and type(value) is float
    assert param("int").check(3, "[k]") == 3 and type(param("int").check(3, "[k]")) is int
    assert param("float", optional=True).check(None, "[k]") is None
    assert param("choice", choices=("a",)).check("a", "[k]") == "a"
    assert param("bool").check(False, "[k]") is False


@pytest.mark.parametrize("p, value, parts", [
    (Param("temperature", "float", 1.0, "T", "", above=0), 0,
     ["[attacker.tfidf]", "temperature", "a number greater than 0", "found 0"]),
    (Param("n_cal", "int", None, "N", "", min=1, optional=True), 2.5,
     ["[attacker.tfidf]", "n_cal", "an integer at least 1", "found 2.5"]),
    (Param("score", "choice", "aps", "S", "", choices=("aps", "rank")), "apss",
     ["[attacker.tfidf]", "score", "one of 'aps', 'rank'", "found 'apss'"]),
    (Param("shuffle", "bool", True, "S", ""), "yes",
     ["[attacker.tfidf]", "shuffle", "true or false", "found 'yes'"]),
    (Param("confidence", "floats", (0.9,), "C", "", above=0, below=1), [0.9, 1.5],
     ["[attacker.tfidf]", "confidence", "each greater than 0 and less than 1", "found [0.9, 1.5]"]),
])
def test_check_message_names_table_key_expectation_and_value(p, value, parts):
    with pytest.raises(ConfigError) as raised:
        p.check(value, "[attacker.tfidf]")
    message = str(raised.value)
    assert message.startswith(f"[attacker.tfidf] {p.name}: expected ")
    for part in parts:
        assert part in message, (part, message)


SCHEMA = (Param("alpha", "float", 0.5, "A", "", above=0, below=1),
          Param("beta", "int", 3, "B", "", min=1),
          Param("gamma", "text", None, "G", "", optional=True))


def test_check_table_returns_only_the_declared_values_checked():
    assert check_table(SCHEMA, {}, "[t]") == {}
    value = check_table(SCHEMA, {"beta": 4, "alpha": 0.25}, "[t]")
    assert value == {"beta": 4, "alpha": 0.25} and list(value) == ["beta", "alpha"]


def test_check_table_rejects_unknown_keys_naming_the_table_and_the_expected_keys():
    with pytest.raises(ConfigError) as raised:
        check_table(SCHEMA, {"alpha": 0.2, "delta": 1}, "[my.table]")
    assert str(raised.value) == "unknown key 'delta' in [my.table]; expected one of alpha, beta, gamma"


def test_check_table_checks_every_value():
    with pytest.raises(ConfigError, match=r"\[t\] beta: expected an integer at least 1, found 0"):
        check_table(SCHEMA, {"alpha": 0.2, "beta": 0}, "[t]")


def test_resolve_params_fills_defaults_in_declared_order():
    resolved = resolve_params(SCHEMA, {"gamma": "g"}, "[t]")
    assert resolved == {"alpha": 0.5, "beta": 3, "gamma": "g"}
    assert list(resolved) == ["alpha", "beta", "gamma"]
    assert resolve_params(SCHEMA, {}, "[t]") == {"alpha": 0.5, "beta": 3, "gamma": None}
    with pytest.raises(ConfigError, match=r"\[t\] alpha"):
        resolve_params(SCHEMA, {"alpha": 1.0}, "[t]")


# ------------------------------------------------------------------------------------------------
# the [attacker.<name>] schema comes from the registered specs


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(value)


SPECS = attacker_specs()


def test_every_expected_attacker_is_registered():
    assert {"tfidf", "dense", "forced_choice", "profile", "imported"} <= {spec.name for spec in SPECS}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_table_of_every_default_parses(spec):
    declared = {p.name: p.default for p in spec.params if p.default is not None}
    assert declared, spec.name
    text = f"[attacker.{spec.name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in declared.items())
    project = parse_config(text, "audit.toml")
    assert project.attackers[spec.name] == {k: tuple(v) if isinstance(v, list) else v for k, v in declared.items()}
    assert spec.resolve(project.attackers[spec.name]) == spec.defaults()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_an_unknown_key_lists_the_spec_parameters(spec):
    with pytest.raises(ConfigError) as raised:
        parse_config(f"[attacker.{spec.name}]\nno_such_param = 1\n", "audit.toml")
    message = str(raised.value)
    assert message.startswith("audit.toml: unknown key 'no_such_param'")
    assert f"[attacker.{spec.name}]" in message
    assert message.endswith("expected one of " + ", ".join(sorted(p.name for p in spec.params)))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_value_of_the_wrong_type_is_rejected_by_the_spec(spec):
    p = next(p for p in spec.params if p.kind in ("int", "float", "choice", "bool", "text"))
    bad = {"int": "'seven'", "float": "'seven'", "choice": "'no-such-choice'", "bool": "'yes'", "text": "7"}[p.kind]
    with pytest.raises(ConfigError) as raised:
        parse_config(f"[attacker.{spec.name}]\n{p.name} = {bad}\n", "audit.toml")
    message = str(raised.value)
    assert f"[attacker.{spec.name}] {p.name}: expected {p.expected}" in message


def test_an_unknown_attacker_table_is_rejected():
    with pytest.raises(ConfigError, match=r"unknown attacker \[attacker.nope\]; expected one of tfidf"):
        parse_config("[attacker.nope]\nx = 1\n", "audit.toml")


def test_an_integer_beyond_the_float_range_is_a_config_error():
    from cpa_core.audit.project import parse_config

    with pytest.raises(ConfigError, match=r"\[audit\] seed: expected an integer at least 0"):
        parse_config("[audit]\nseed = 1" + "0" * 400 + "\n", "audit.toml")
