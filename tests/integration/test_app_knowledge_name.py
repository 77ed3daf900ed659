"""One name for one knowledge level: the Home page names the declared level as the declared configuration does (the
Calibrate page, the exports and the history): a field list of every registry field is the level ``full``, wherever
it was chosen."""

from __future__ import annotations

from apptest import assert_clean, new_app, shown

from cpa_ui import nav


def test_home_and_calibrate_name_the_same_knowledge_level(sample_paths):
    at = new_app().run()
    fields = list(at.session_state["cpa.data"].registry.fields)
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value("custom").run()
    at.multiselect(key="w.threat.custom_fields").set_value(fields).run()
    assert_clean(at)
    at.switch_page(nav.CALIBRATE).run()
    assert_clean(at)
    assert any(shown(c).startswith("Declared configuration ") and ": knowledge full (" in shown(c) for c in at.caption)
    at.switch_page("app.py").run()
    labels = [shown(link) for link in at.get("page_link")]
    assert any(label.startswith("knowledge level full, ") for label in labels), labels
    assert not any("custom" in label for label in labels), labels

    at.switch_page(nav.THREAT).run()  # a field list of some fields is the level the core names custom
    at.multiselect(key="w.threat.custom_fields").set_value(fields[:2]).run()
    at.switch_page("app.py").run()
    assert any(shown(link).startswith("knowledge level custom, ") for link in at.get("page_link"))
