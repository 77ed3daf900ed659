"""The two test tiers are chosen by folder: a test is in the integration tier if and only if it lives under
``tests/integration`` (``tests/conftest.py`` marks every test there). So no test module outside that folder uses
the integration marker (a decorator on a test or a class, a module-level ``pytestmark``, the marks of a
parameter), and, as the test folders are not packages, no two test modules share a basename.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
INTEGRATION = TESTS / "integration"
MARKER = "integration"


def all_test_modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def is_integration_mark(node: ast.AST) -> bool:
    """``pytest.mark.<MARKER>`` or ``mark.<MARKER>`` (``from pytest import mark``), called or not."""
    if not (isinstance(node, ast.Attribute) and node.attr == MARKER):
        return False
    owner = node.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (isinstance(owner, ast.Name)
                                                                         and owner.id == "mark")


def integration_marks(source: str, where: str = "<source>") -> list[str]:
    """Each use of the integration marker in a module, as ``where:line``."""
    return [f"{where}:{node.lineno}" for node in ast.walk(ast.parse(source, filename=where))
            if is_integration_mark(node)]


def test_no_test_outside_the_integration_folder_is_marked_integration():
    # the check sees a marked test, class, parameter and module, with pytest imported either way
    example = ("import pytest\nfrom pytest import mark\n\n@pytest.mark.{m}\ndef test_a(): pass\n\n"
               "@mark.{m}()\nclass TestB: pass\n\n@pytest.mark.parametrize('x', [pytest.param(1, marks=mark.{m})])\n"
               "def test_c(x): pass\n\npytestmark = [pytest.mark.{m}]\n").format(m=MARKER)
    assert sorted(int(place.split(":")[1]) for place in integration_marks(example)) == [4, 7, 10, 13]
    assert integration_marks("import pytest\n\n@pytest.mark.slow\ndef test_a(): pass\n") == []

    modules = [path for path in all_test_modules() if INTEGRATION not in path.parents]
    assert len(modules) > 20, f"only {len(modules)} test modules found under {TESTS}"
    marked = [place for path in modules
              for place in integration_marks(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))]
    assert not marked, ("the integration tier is chosen by folder: move these tests to tests/integration (their "
                        "shared helpers to a support module at tests/ root) instead of marking them: "
                        + ", ".join(marked))


def test_every_test_module_basename_is_unique_across_folders():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in all_test_modules():
        by_name[path.name].append(str(path.relative_to(TESTS.parent)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test folders are not packages: modules sharing a basename cannot both be imported: {clashes}"
