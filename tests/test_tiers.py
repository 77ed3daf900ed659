"""The two test tiers are chosen by folder: a test is in the integration tier if and only if it lives under
``tests/integration`` (``tests/conftest.py`` marks every test there). So no test module outside that folder uses
the integration marker (a decorator on a test or a class, a module-level ``pytestmark``, the marks of a
parameter), and, as the test folders are not packages, no two test modules share a basename.

The unit tests mirror the package tree: every module ``cpa_core/<package>/<module>.py`` has its own test module
``tests/<package>/test_<module>.py`` (subpackages mirrored), in the unit tier, naming the module it tests; module
names are unique across the package, so the test basenames are too.
"""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
INTEGRATION = TESTS / "integration"
MARKER = "integration"
PACKAGE = TESTS.parent / "cpa_core"


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


def package_modules() -> list[Path]:
    """Every module of the package, ``__init__.py`` and ``__main__.py`` aside."""
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def mirrored_test(module: Path) -> Path:
    """``tests/<package path>/test_<module>.py`` of ``cpa_core/<package path>/<module>.py``."""
    relative = module.relative_to(PACKAGE)
    return TESTS / relative.parent / f"test_{module.stem}.py"


def names_its_module(test: Path, module: Path) -> bool:
    """The test module imports the module it tests (``cpa_core.a.b`` written out, or ``from cpa_core.a import b``)."""
    dotted = ".".join(("cpa_core", *module.relative_to(PACKAGE).with_suffix("").parts))
    package, _, name = dotted.rpartition(".")
    text = test.read_text(encoding="utf-8")
    return re.search(rf"\b{re.escape(dotted)}\b", text) is not None or \
        re.search(rf"^\s*from {re.escape(package)} import [^\n]*\b{name}\b", text, re.M) is not None


def test_every_module_of_the_package_has_its_own_test_module():
    modules = package_modules()
    assert len(modules) > 50, f"only {len(modules)} modules found under {PACKAGE}"
    shared = {stem: count for stem, count in Counter(module.stem for module in modules).items() if count > 1}
    assert not shared, f"module names are unique across the package (their tests' basenames must be): {shared}"
    # the rule, by hand
    assert mirrored_test(PACKAGE / "attack" / "attackers" / "tfidf.py") == TESTS / "attack" / "attackers" / "test_tfidf.py"
    assert mirrored_test(PACKAGE / "common" / "errors.py") == TESTS / "common" / "test_errors.py"
    missing, unnamed = [], []
    for module in modules:
        test = mirrored_test(module)
        if not test.is_file():
            missing.append(f"{module.relative_to(TESTS.parent)} -> {test.relative_to(TESTS.parent)}")
        elif not names_its_module(test, module):
            unnamed.append(f"{test.relative_to(TESTS.parent)} never imports {module.relative_to(TESTS.parent)}")
    assert not missing, ("unit tests mirror the package tree (tests/<package>/test_<module>.py); these modules have "
                         "no test module of their own: " + "; ".join(missing))
    assert not unnamed, "; ".join(unnamed)
    assert not any(INTEGRATION in mirrored_test(m).parents for m in modules)  # the unit tier


def test_a_test_module_names_the_module_it_tests(tmp_path):
    module = PACKAGE / "attack" / "attackers" / "tfidf.py"
    test = tmp_path / "test_tfidf.py"
    for text, named in (("from cpa_core.attack.attackers.tfidf import SPEC\n", True),
                        ("from cpa_core.attack.attackers import dense, tfidf\n", True),
                        ("    from cpa_core.attack.attackers.tfidf import SPEC\n", True),
                        ("import cpa_core.attack.attackers.tfidf as t\n", True),
                        ("from cpa_core.attack.attackers.tfidf_index import x\n", False),
                        ("from cpa_core.attack.attackers import dense\n", False),
                        ("# nothing imported\n", False)):
        test.write_text(text, encoding="utf-8")
        assert names_its_module(test, module) == named, text
