"""A session keeps only the audits it shows: adopting a new audit lets go of the one it replaces (session state, review,
cache entries) and gives its memory back; pages hand widgets no function of their own (a widget keeps it, and with it
the page's variables). The helpers work on a plain dict standing in for ``st.session_state``."""

from __future__ import annotations

import ast
import gc
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import REPO_ROOT

import cpa_ui.memory as memory
import cpa_ui.state as ui_state
from cpa_ui import cache
from cpa_ui.state import AuditRun, Comparison, Review, state


class Result:
    """Stands in for an audit's result (only its identity matters here)."""


def run_of(key: str, result=None) -> AuditRun:
    return AuditRun(result if result is not None else Result(), key, key, "data", 0.0, attacker=None)


@pytest.fixture
def session(monkeypatch) -> SimpleNamespace:
    """A plain dict as the session state, the cache entries dropped and the memory given back, as recorded."""
    fake: dict = {}
    monkeypatch.setattr(ui_state, "st", SimpleNamespace(session_state=fake))
    seen = SimpleNamespace(state=fake, forgotten=[], released=0)
    monkeypatch.setattr(memory, "forget_cached", lambda run: seen.forgotten.append(run.key))

    def release():
        seen.released += 1
        gc.collect()
    monkeypatch.setattr(memory, "release_memory", release)
    return seen


def test_a_new_audit_lets_go_of_the_one_it_replaces(session):
    first = run_of("data:a")
    memory.adopt_run(first)
    assert state.run is first and session.forgotten == [] and session.released == 0  # nothing replaced
    memory.adopt_run(replace(first, audit_id=3))  # the same audit, now recorded: nothing let go
    assert state.run.audit_id == 3 and session.forgotten == [] and session.released == 0
    del first
    memory.adopt_run(run_of("data:b"))
    assert state.run.key == "data:b" and session.forgotten == ["data:a"]
    assert session.released == 1 and state.letting_go == ()  # the old result is gone: nothing to wait for


def test_an_audit_still_held_is_waited_for_a_few_runs(session):
    first = run_of("data:a")
    memory.adopt_run(first)
    memory.adopt_run(run_of("data:b"))  # ``first`` is still held here (by another session, say)
    assert session.released == 1 and len(state.letting_go) == 1
    for _ in range(memory.WAIT_RUNS - 1):
        assert memory.give_back() is True  # the end of a run of the app: collected again
    assert state.letting_go == () and memory.give_back() is False
    assert session.released == memory.WAIT_RUNS


def test_the_review_stays_only_beside_its_own_audit(session):
    before, after = run_of("data:a"), run_of("redacted:a")
    memory.adopt_run(before)
    state.review = Review(("data:a",), before, data=None, after=after)
    memory.adopt_run(after)  # the redacted release becomes the current audit: its review stays
    assert state.review.before is before and state.review.after is after
    assert session.forgotten == ["data:a"] and state.letting_go == ()  # the review still holds the audit before
    reopened = run_of("redacted:a")  # the same audit reopened from the history: the review points at it
    memory.adopt_run(reopened)
    assert state.review.after is reopened and state.review.before is before
    memory.adopt_run(run_of("data:b"))  # another audit: the review of the old one is let go
    assert state.review is None


def test_a_new_comparison_lets_go_of_the_old_ones_audits(session):
    current = run_of("data:a")
    memory.adopt_run(current)
    memory.adopt_comparison(Comparison(runs=(current, run_of("data:b"))))
    assert session.released == 0
    memory.adopt_comparison(Comparison(runs=(run_of("data:c"),)))
    assert session.released == 1 and state.letting_go == ()  # data:b is gone; data:a is the current audit


def test_new_data_forgets_every_audit(session):
    before = run_of("data:a")
    memory.adopt_run(before)
    state.comparison = Comparison(runs=(run_of("data:b"),))
    state.review = Review(("data:a",), before, data=None)
    del before
    memory.forget_results()
    assert state.run is None and state.comparison == Comparison() and state.review is None
    assert sorted(session.forgotten) == ["data:a", "data:a", "data:b"] and session.released == 1
    assert state.letting_go == ()


def test_forgetting_an_audit_drops_its_cache_entries_only(monkeypatch):
    computed = []
    monkeypatch.setattr(cache, "confidence_curve", lambda result: computed.append(result) or len(computed))
    result = Result()
    for key in ("memory-test:a", "memory-test:b", "memory-test:a"):
        cache.curve(key, result)
    assert len(computed) == 2  # the second call of a key is cached
    memory.forget_cached(run_of("memory-test:a", result))
    cache.curve("memory-test:a", result)
    cache.curve("memory-test:b", result)
    assert len(computed) == 3  # a's curve computed again, b's still cached


def test_memory_is_given_back_to_the_system_where_the_c_library_is_glibc(monkeypatch):
    trims = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: trims.append)
    memory.release_memory()
    assert trims == [0]  # malloc_trim(0): every arena, every free page


def test_elsewhere_the_memory_is_only_collected(monkeypatch):
    def no_glibc(name):
        raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(memory, "ctypes", SimpleNamespace(CDLL=no_glibc))
    assert memory._malloc_trim() is None
    memory.release_memory()  # no error: the collection only
    monkeypatch.setattr(memory, "ctypes", SimpleNamespace(CDLL=lambda name: SimpleNamespace()))  # no malloc_trim
    assert memory._malloc_trim() is None


WIDGET_FUNCTIONS = ("format_func", "on_change", "on_click")


def page_functions_given_to_widgets(source: str) -> list[str]:
    """``line: keyword`` of each widget argument that is a function of the page itself (a lambda, or a function the
    page defines)."""
    tree = ast.parse(source)
    defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg in WIDGET_FUNCTIONS and (
                        isinstance(value, ast.Lambda) or isinstance(value, ast.Name) and value.id in defined):
                    found.append(f"{node.lineno}: {keyword.arg}")
    return found


def test_pages_give_widgets_no_function_of_their_own():
    example = ("def label(x):\n    return x\n\nst.selectbox('a', [1], format_func=lambda x: str(x))\n"
               "st.radio('b', [1], format_func=label)\nst.radio('c', [1], format_func=LABELS.get)\n"
               "st.button('d', on_click=set_widget)\n")
    assert page_functions_given_to_widgets(example) == ["4: format_func", "5: format_func"]
    pages = [REPO_ROOT / "app.py", *sorted((REPO_ROOT / "pages").glob("*.py"))]
    assert len(pages) > 5
    found = {path.name: page_functions_given_to_widgets(path.read_text(encoding="utf-8")) for path in pages}
    assert not {name: places for name, places in found.items() if places}, (
        "a widget keeps its format_func and callbacks after its page is left, and a page's function keeps the page's "
        "variables (the audit it showed): use a dict's get or a function of cpa_ui")


def test_an_attacker_panel_is_let_go_with_every_attacker_s_result(session):
    from types import SimpleNamespace as Panel

    results = (Result(), Result())
    panel = Panel(members=results, names=("a", "b"), config_id="p")
    memory.adopt_run(replace(run_of("data:panel", results[0]), panel=panel))
    assert state.run.results == results
    memory.adopt_run(run_of("data:b"))  # both results still held here (by another session, say): both waited for
    assert session.forgotten == ["data:panel"]
    assert sorted(id(ref()) for ref, _ in state.letting_go) == sorted(map(id, results))
    del results, panel
    memory.give_back()
    assert state.letting_go == ()  # once gone, nothing is waited for
