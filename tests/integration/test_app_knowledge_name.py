"""One name for one knowledge level: the Home page and the Threat model page's preview name the declared level as the
declared configuration does (the Calibrate page, the exports and the history): a field list of every registry field
is the level ``full``, wherever it was chosen."""

from __future__ import annotations

import re

from apptest import assert_clean, new_app, shown

from cpa_ui import nav


def preview_names(at) -> list[str]:
    """The knowledge levels the Threat model page's preview names."""
    return [re.match(r"Knowledge level (\S+?)[:.]", shown(c)).group(1) for c in at.caption
            if shown(c).startswith("Knowledge level ")]


def test_threat_model_declared_level_is_named_in_its_preview(sample_paths):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    assert_clean(at)
    assert preview_names(at) == ["K2"]  # the sample's declared level
    at.radio(key="w.threat.knowledge").set_value("K1").run()
    assert preview_names(at) == ["K1"]


def test_home_threat_model_and_calibrate_name_the_same_knowledge_level(sample_paths):
    at = new_app().run()
    fields = list(at.session_state["cpa.data"].registry.fields)
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value("custom").run()
    at.multiselect(key="w.threat.custom_fields").set_value(fields).run()
    assert_clean(at)
    assert preview_names(at) == ["full"]
    assert any(": knowledge full (" in shown(c) or "(knowledge level full)" in shown(c) for c in at.info)
    at.switch_page(nav.CALIBRATE).run()
    assert_clean(at)
    assert any(shown(c).startswith("Declared configuration ") and ": knowledge full (" in shown(c) for c in at.caption)
    at.switch_page("app.py").run()
    labels = [shown(link) for link in at.get("page_link")]
    assert any(label.startswith("knowledge level full, ") for label in labels), labels
    assert not any("custom" in label for label in labels), labels

    at.switch_page(nav.THREAT).run()  # a field list of some fields is the level the core names custom
    at.multiselect(key="w.threat.custom_fields").set_value(fields[:2]).run()
    assert preview_names(at) == ["custom"]
    at.switch_page("app.py").run()
    assert any(shown(link).startswith("knowledge level custom, ") for link in at.get("page_link"))
