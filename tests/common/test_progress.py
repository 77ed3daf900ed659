"""The command line's progress bar: counts and the step's name, drawn on a stream, never any content."""

from __future__ import annotations

import io

import pytest
from conftest import toy_frames

from cpa_core.common import progress
from cpa_core.common.progress import ProgressBar

STEP = "ranking"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def clock(monkeypatch):
    """The bar's clock, set by hand: ``clock.now = t``."""
    class Clock:
        now = 1000.0

    monkeypatch.setattr(progress.time, "monotonic", lambda: Clock.now)
    return Clock


def line(done: int, total: int, filled: int, width: int = 10, step: str = STEP) -> str:
    return f"{step}{' ' * (32 - len(step))} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def test_a_file_gets_a_line_at_the_start_of_a_step_and_at_its_end(clock):
    out = io.StringIO()
    bar = ProgressBar(out, width=10)
    bar(0, 4, STEP)
    bar(1, 4, STEP)  # less than 5 seconds later, not finished: not drawn in a file
    bar(3, 4, STEP)
    bar(4, 4, STEP)
    bar(2, 8, "writing")  # another step is drawn at once
    assert out.getvalue() == "\n".join([line(0, 4, 0), line(4, 4, 10), line(2, 8, 2, step="writing")]) + "\n"


def test_a_terminal_redraws_one_line_and_ends_it_when_done(clock):
    out = Terminal()
    bar = ProgressBar(out, width=10, min_interval=0.0)
    for done in range(5):
        bar(done, 4, STEP)
    # int(10 * done / 4): 0, 2, 5, 7, 10 marks
    assert out.getvalue() == "".join("\r" + line(done, 4, filled) for done, filled in
                                     ((0, 0), (1, 2), (2, 5), (3, 7), (4, 10))) + "\n"


def test_a_terminal_waits_the_minimum_interval_between_drawings(clock):
    out = Terminal()
    bar = ProgressBar(out, width=4, min_interval=1.0)
    drawn = []
    for now, done in ((1000.0, 0), (1000.5, 1), (1001.2, 2), (1001.3, 3), (1001.4, 4)):
        clock.now = now
        before = out.getvalue()
        bar(done, 4, STEP)
        drawn.append(out.getvalue() != before)
    # drawn at once, skipped within the interval, drawn after it, skipped again, drawn when finished
    assert drawn == [True, False, True, False, True]
    assert out.getvalue().endswith("\r" + line(4, 4, 4, width=4) + "\n")


def test_a_file_gets_a_line_every_five_seconds(clock):
    out = io.StringIO()
    bar = ProgressBar(out, width=10, min_interval=0.0)  # the interval of a terminal only
    for now, done in ((1000.0, 1), (1004.9, 2), (1005.1, 3)):
        clock.now = now
        bar(done, 10, STEP)
    assert out.getvalue() == line(1, 10, 1) + "\n" + line(3, 10, 3) + "\n"


def test_an_empty_step_is_finished_at_once():
    out = io.StringIO()
    ProgressBar(out, width=3)(0, 0, STEP)
    assert out.getvalue() == line(0, 0, 0, width=3) + "\n"


def test_an_attack_reported_on_the_bar_prints_counts_never_its_documents():
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_registry

    documents, registry = toy_frames(n_people=6, docs_per_person=2)
    texts = [f"{text} confidential-{i}" for i, text in enumerate(documents["text"])]
    out = io.StringIO()
    TfidfAttacker(temperature=1.0, chunk_size=5).attack(
        documents["doc_id"].tolist(), texts, load_registry(registry.to_csv(index=False).encode(), name="r.csv"),
        KnowledgeLevel("K", ("city", "occupation", "keywords")), ProgressBar(out, width=10))
    printed = out.getvalue()
    assert printed.endswith(" 12/12\n") and "#" * 10 in printed
    for word in ("confidential", *registry["secret"], *registry["keywords"].str.split().sum(), *documents["doc_id"]):
        assert word not in printed
