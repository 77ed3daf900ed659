"""What a dashboard session keeps in memory: the current audit (calibrated, or reopened from the History page), the
comparison of the Compare page and the redaction under review, and nothing of the audits they replaced.

An audit's result holds every document's ranked candidates (hundreds of megabytes for a release of a few thousand
documents against a few thousand profiles). A new audit replaces the current one through :func:`adopt_run`, which
lets go of every reference the session had to the old one: the session state, the review of its redactions, and the
entries the caches of :mod:`cpa_ui.cache` and :mod:`cpa_ui.redaction` hold for it (its result, its explainer of
matches, its figures and worklists); :func:`give_back` then collects the freed objects and returns the freed heap to
the operating system, so that the process does not keep the peak of every audit (with the audits in the heap, and
glibc's heap never shrinking by itself, a session grew by a whole audit at each new one).

A widget keeps its ``format_func`` (and callbacks) after its page is left, and with a function defined in a page, the
page's variables, the audit it showed among them: pages give widgets no function of their own (a dict's ``get``, or a
function of ``cpa_ui``, instead).
"""

from __future__ import annotations

import ctypes
import gc
import weakref
from dataclasses import replace

from cpa_ui import cache
from cpa_ui.redaction import document_suggestion
from cpa_ui.state import AuditRun, Comparison, Review, state

WAIT_RUNS = 3
"""Runs of the app that :func:`give_back` waits for a let-go audit to be gone (another session may hold it: a cached
result is shared), collecting at the end of each."""


def adopt_run(run: AuditRun | None) -> None:
    """Make ``run`` the current audit, letting go of the one it replaces (unless it is the same audit), and give its
    memory back.

    The review of redactions is kept when it is about the new audit (the audit it redacts, or the audit of its
    redacted release, as when that release becomes the current audit), and dropped otherwise."""
    _wait_for(_replace_run(run))


def adopt_comparison(comparison: Comparison) -> None:
    """Make ``comparison`` the Compare page's, letting go of the audits of the one it replaces."""
    _wait_for(_replace_comparison(comparison))


def forget_results() -> None:
    """Drop every audit of the session (after new data is loaded) and what the caches hold for them."""
    _wait_for(_forget_all())


def forget_cached(run: AuditRun) -> None:
    """Drop what the caches hold for ``run``: its result, its explainer of matches and its figures by its key; the
    worklists and the suggested redactions, whose entries are not found by the key alone, all at once (any session's
    are computed again on their next use)."""
    for cached in (cache.audit, cache.panel_audit, cache.explainer, cache.curve, cache.sizes_by_level):
        cached.clear(run.key)
    for key in run.member_keys():  # an attacker panel's members, each shown as an audit of its own
        for cached in (cache.explainer, cache.curve, cache.sizes_by_level):
            cached.clear(key)
    cache.explained_worklist.clear()
    cache.panel_verdict_at.clear()
    document_suggestion.clear()


def give_back() -> bool:
    """While an audit let go is not gone: collect the freed objects (a page's variables are held in reference cycles)
    and return the freed heap to the operating system. Whether it did.

    Called when an audit is let go, and at the end of every run of the app: an audit still held then (by the variables
    of the run that let it go, or by another session that shares its cached result) is waited for at the end of the
    next runs, :data:`WAIT_RUNS` at most."""
    waiting = state.letting_go
    if not waiting:
        return False
    release_memory()
    state.letting_go = tuple((result, runs - 1) for result, runs in waiting if result() is not None and runs > 1)
    return True


def release_memory() -> None:
    """Collect unreachable objects and hand the heap's free pages back to the operating system (glibc's
    ``malloc_trim``; elsewhere only the collection)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    """glibc's ``malloc_trim``, ``None`` where the C library is not glibc (macOS, Windows, musl)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _session_runs() -> list[AuditRun]:
    """The audits the session holds: the current one, the comparison's and the review's."""
    review = state.review
    runs = (state.run, *state.comparison.runs, *(() if review is None else (review.before, review.after)))
    return [run for run in runs if run is not None]


def _replace_run(run: AuditRun | None) -> tuple:
    old, review = state.run, state.review
    state.run = run
    state.review = _review_for(review, run)
    if old is not None and (run is None or set(map(id, old.results)) != set(map(id, run.results))):
        forget_cached(old)
    return _let_go(old, *(() if review is None else (review.before, review.after)))


def _replace_comparison(comparison: Comparison) -> tuple:
    old = state.comparison
    state.comparison = comparison
    return _let_go(*old.runs)


def _forget_all() -> tuple:
    held = _session_runs()
    state.forget_results()
    for run in held:
        forget_cached(run)
    return _let_go(*held)


def _let_go(*runs: AuditRun | None) -> tuple:
    """Weak references to the results of ``runs`` that the session no longer holds, each with :data:`WAIT_RUNS`."""
    held = {id(result) for run in _session_runs() for result in run.results}
    gone = {id(result): result for run in runs if run is not None for result in run.results if id(result) not in held}
    return tuple((weakref.ref(result), WAIT_RUNS) for result in gone.values())


def _wait_for(letting_go: tuple) -> None:
    """Wait for these results to be gone, and give back their memory now (the frames that held them have returned)."""
    if letting_go:
        state.letting_go = (*state.letting_go, *letting_go)
        give_back()


def _review_for(review: Review | None, run: AuditRun | None) -> Review | None:
    """The review kept beside the current audit ``run``: the same review when it is about ``run`` (pointing at
    ``run`` itself, so that a reopened copy of the audit is not held twice), else ``None``."""
    if review is None or run is None:
        return None
    if review.before.key == run.key:
        return review if review.before.result is run.result else replace(review, before=run)
    if review.after is not None and review.after.key == run.key:
        return review if review.after.result is run.result else replace(review, after=run)
    return None
