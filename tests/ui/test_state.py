"""The dashboard's session state goes through the typed helpers of ``cpa_ui/state.py`` only; the helpers work on a
plain dict standing in for ``st.session_state``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import REPO_ROOT

import cpa_ui.state as ui_state
from cpa_ui.state import (
    AuditState,
    forget_widgets,
    reseeded_widget,
    set_widget,
    value_changed,
    widget_key,
    widget_value,
)


def _dashboard_sources() -> list:
    files = [REPO_ROOT / "app.py", *sorted((REPO_ROOT / "pages").rglob("*.py")),
             *sorted((REPO_ROOT / "cpa_ui").rglob("*.py"))]
    return [path for path in files if path != REPO_ROOT / "cpa_ui" / "state.py"]


def test_only_the_state_module_touches_session_state():
    sources = _dashboard_sources()
    assert REPO_ROOT / "app.py" in sources and len(sources) > 10
    offenders = []
    for path in sources:
        if "session_state" in path.read_text(encoding="utf-8"):  # code, strings and comments alike
            offenders.append(path.relative_to(REPO_ROOT).as_posix())
    assert not offenders, f"use the helpers of cpa_ui/state.py instead of st.session_state in {offenders}"


@pytest.fixture
def session(monkeypatch) -> dict:
    """A plain dict as the session state the helpers read and write."""
    fake: dict = {}
    monkeypatch.setattr(ui_state, "st", SimpleNamespace(session_state=fake))
    return fake


def test_slots_and_widget_keys_use_their_own_keys(session):
    audit = AuditState()
    assert audit.confidence == 0.95 and session == {"cpa.confidence": 0.95}  # the default is stored on first read
    audit.flag_below = 5
    assert session["cpa.flag_below"] == 5
    assert widget_key("page.k", 3) == "w.page.k" and session["w.page.k"] == 3
    assert widget_key("page.k", 7) == "w.page.k" and session["w.page.k"] == 3  # seeded once only


def test_widget_value_and_set_widget(session):
    assert widget_value("w.page.choice") is None and "w.page.choice" not in session
    set_widget("w.page.choice", "b")
    assert widget_value("w.page.choice") == "b" and session == {"w.page.choice": "b"}
    set_widget("map.documents.text", "note")  # a widget keyed by its page
    assert widget_value("map.documents.text") == "note"


def test_forget_widgets_drops_one_family_only(session):
    session.update({"w.threat.knowledge": "K1", "w.threat.param.tfidf.ngram": 2, "w.threatened": 1,
                    "w.compare.levels": ["K1"], "cpa.data": "kept", 7: "not a string key"})
    forget_widgets("w.threat.")
    assert session == {"w.threatened": 1, "w.compare.levels": ["K1"], "cpa.data": "kept", 7: "not a string key"}
    forget_widgets("map.documents.")  # nothing of the family: nothing changes
    assert len(session) == 4


def test_value_changed_remembers_the_last_value(session):
    assert value_changed("flagged.clicked", None) is False  # nothing remembered reads as None
    assert session == {"flagged.clicked": None}
    assert value_changed("flagged.clicked", "d1") is True
    assert value_changed("flagged.clicked", "d1") is False
    assert value_changed("flagged.clicked", None) is True and session["flagged.clicked"] is None
    assert value_changed("upload.documents.mapped_columns", ["id", "text"]) is True
    assert value_changed("upload.documents.mapped_columns", ["id", "text"]) is False  # compared by equality


def test_reseeded_widget_keeps_edits_until_its_signature_changes(session):
    made = []

    def make(text):
        def value():
            made.append(text)
            return text
        return value

    assert reseeded_widget("flagged.edited.d1", ("mask", ()), make("a")) == "flagged.edited.d1"
    assert session == {"flagged.edited.d1": "a", "flagged.edited.d1.seed": ("mask", ())}
    session["flagged.edited.d1"] = "a, edited by the curator"
    reseeded_widget("flagged.edited.d1", ("mask", ()), make("b"))  # same signature: the edit stays, nothing made
    assert session["flagged.edited.d1"] == "a, edited by the curator" and made == ["a"]
    reseeded_widget("flagged.edited.d1", ("mask", (3,)), make("c"))  # another choice of edits starts again
    assert session == {"flagged.edited.d1": "c", "flagged.edited.d1.seed": ("mask", (3,))}
    del session["flagged.edited.d1"]  # Streamlit forgot the widget (its page was left)
    reseeded_widget("flagged.edited.d1", ("mask", (3,)), make("d"))
    assert session["flagged.edited.d1"] == "d" and made == ["a", "c", "d"]


class RecordingState(dict):
    """A session state that records the keys deleted."""

    def __init__(self):
        super().__init__()
        self.deleted = []

    def __delitem__(self, key):
        self.deleted.append(key)
        super().__delitem__(key)


def test_a_slot_lets_go_of_the_value_it_replaces_at_once(monkeypatch):
    # Streamlit keeps the values of the last run until the next one starts unless the key is deleted: a replaced
    # audit's result would stay in memory until then
    fake = RecordingState()
    monkeypatch.setattr(ui_state, "st", SimpleNamespace(session_state=fake))
    audit = AuditState()
    audit.run = "first"
    assert fake.deleted == [] and fake["cpa.run"] == "first"
    audit.run = "second"
    assert fake.deleted == ["cpa.run"] and fake["cpa.run"] == "second"


# --- an attacker panel ------------------------------------------------------------------------------------------

def test_a_threat_declares_each_attacker_of_its_panel_with_its_parameters():
    from cpa_ui.state import ThreatChoice

    threat = ThreatChoice(attackers=("tfidf", "learned"),
                          attacker_params=(("tfidf", (("ngram_max", 2),)), ("learned", (("ridge", "auto"),))))
    assert threat.attacker == "tfidf" and threat.params == {"ngram_max": 2}
    assert threat.params_of("learned") == {"ridge": "auto"} and threat.params_of("dense") == {}
    alone = threat.alone("learned")
    assert alone.attackers == ("learned",) and alone.params == {"ridge": "auto"} and alone.knowledge == threat.knowledge
    assert threat.alone("dense", {"model": "x"}).params == {"model": "x"}
    assert ThreatChoice(attackers=()).attacker == ""


def test_a_panel_s_run_gives_each_attacker_s_run():
    from toy_panel import toy_panel

    from cpa_ui.state import AuditRun

    panel = toy_panel()
    attackers = (object(), object())
    run = AuditRun(panel.members[0], "data:panel", "K2 · panel", "data", 1.0, attackers[0], 7, panel=panel,
                   attackers=attackers, member_ids=(7, 8))
    assert run.is_panel and run.names == panel.names and run.results == panel.members
    assert run.config_id == panel.config_id != panel.members[0].config.config_id
    second = run.member(panel.names[1])
    assert second.result is panel.members[1] and second.attacker is attackers[1] and second.audit_id == 8
    assert not second.is_panel and second.member(panel.names[1]) is second
    assert second.key in run.member_keys() and len(set(run.member_keys())) == 2 and run.key not in run.member_keys()
    single = AuditRun(panel.members[0], "data:one", "K2", "data", 1.0, attackers[0])
    assert single.names == (panel.names[0],) and single.results == (panel.members[0],) and single.member_keys() == ()
    assert single.config_id == panel.members[0].config.config_id
