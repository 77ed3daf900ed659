"""The Explore page under Streamlit's AppTest, in the terms of the protocol in use: under the release protocol every
document is audited and its coverage is the confidence level by construction, so no coverage curve is offered as
evidence; under the split protocol the test documents are held out and the coverage curve is the check."""

from __future__ import annotations

import json

from dataclasses import replace

from apptest import assert_clean, calibrate, metric, new_app, shown

from cpa_core.report.formatting import FLAGGED_COLOR
from cpa_ui import nav

HISTOGRAM = "Certified set sizes at"
COVERAGE_CURVE = "Coverage and median |C| versus confidence"
BY_LEVEL = "Documents with |C| < k and set sizes versus confidence"


def figures(at) -> dict[str, dict]:
    """The page's plotly figures by the start of their title."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return {spec["layout"]["title"]["text"].split(" at ")[0]: spec for spec in specs}


def red_documents(figure: dict) -> int:
    """The documents a figure draws in red, whether a trace is red as a whole or bar by bar."""
    total = 0
    for trace in figure["data"]:
        if trace["type"] != "bar":
            continue
        colours = trace["marker"]["color"]
        colours = [colours] * len(trace["y"]) if isinstance(colours, str) else colours
        total += sum(int(y) for y, colour in zip(trace["y"], colours) if colour == FLAGGED_COLOR)
    return total


def words(at) -> str:
    """What the page says in its titles, captions and text (not the figures)."""
    return " ".join(shown(e) for e in [*at.title, *at.subheader, *at.caption, *at.markdown])


def explore(protocol: str):
    at = new_app().run()
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.protocol").set_value(protocol).run()
    calibrate(at)
    assert at.session_state["cpa.run"].result.config.protocol == protocol
    at.switch_page(nav.EXPLORE).run()
    assert_clean(at)
    return at


def test_release_protocol_says_audited_documents_and_shows_no_coverage_curve(sample):
    at = explore("release")
    said = words(at)
    assert f"{sample['n_test']:,} audited documents, each calibrated by the others (release protocol)" in said
    assert "test document" not in said
    shown_figures = figures(at)
    assert COVERAGE_CURVE not in shown_figures and set(shown_figures) == {"Certified set sizes", BY_LEVEL}
    assert "coverage equals the confidence level by construction" in said and "is not shown" in said
    histogram = shown_figures["Certified set sizes"]
    assert histogram["layout"]["yaxis"]["title"]["text"] == "audited documents (log scale)"
    # one flag rule: the histogram's red documents are the KPI's flagged ones and the verdict's, under the same rule
    flagged, of = metric(at, "Flagged").split(" of ")
    policy = at.session_state["cpa.run"].result.config.policy
    assert red_documents(histogram) == int(flagged.replace(",", "")) > 0
    assert f"red: flagged, {policy.rule}" in histogram["layout"]["xaxis"]["title"]["text"]
    assert [shown(h) for h in at.subheader][:1] == ["Verdict"]
    verdicts = [shown(a) for a in [*at.warning, *at.success] if shown(a).startswith("Verdict: ")]
    assert len(verdicts) == 1 and f"{flagged} of {of} audited documents" in said
    assert histogram["layout"]["yaxis"]["type"] == "log"
    levels = shown_figures[BY_LEVEL]
    assert levels["data"][0]["name"] == "audited documents with |C| < k = 11"
    assert "coverage" not in " ".join(trace["name"] for trace in levels["data"])
    # the per-group table's heading names the group with the largest share flagged, as text
    groups = at.dataframe[0].value
    share = groups["n_flagged"] / groups["n_test"]
    top = groups.loc[share.idxmax()]
    assert (f"the most flagged is {top['group']}, {top['n_flagged']:,} of {top['n_test']:,} documents "
            f"({100 * share.max():.1f} %)") in said

    # a new k reruns the page: the chart across levels counts with it
    at.slider(key="w.explore.flag_below").set_value(5).run()
    assert_clean(at)
    assert figures(at)[BY_LEVEL]["data"][0]["name"] == "audited documents with |C| < k = 5"
    assert figures(at)["Certified set sizes"]["layout"]["annotations"][0]["text"].startswith("k = 5 ·")
    # a new confidence level redraws the histogram at that level
    at.slider(key="w.explore.confidence_percent").set_value(80.0).run()
    assert_clean(at)
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"] == "Certified set sizes at 80 %"


def test_split_protocol_says_test_documents_and_shows_the_coverage_curve():
    at = explore("split")
    said = words(at)
    n_test = len(at.session_state["cpa.run"].result.test_split)
    assert f"{n_test:,} test documents, held out from calibration (split protocol)" in said
    assert "audited documents" not in said and "is not shown" not in said
    shown_figures = figures(at)
    assert COVERAGE_CURVE in shown_figures and BY_LEVEL not in shown_figures
    assert shown_figures["Certified set sizes"]["layout"]["yaxis"]["title"]["text"] == "test documents (log scale)"
    assert "Coverage should track the dotted diagonal" in said


def test_results_of_other_documents_than_the_loaded_ones_say_so_and_name_one_configuration():
    """The loaded documents change (as when a redacted release's audit is made the current one and the Data page holds
    another release), the declared configuration does not: the notice names the release and one configuration id."""
    at = explore("release")
    run, data = at.session_state["cpa.run"], at.session_state["cpa.data"]
    at.session_state["cpa.data"] = replace(data, fingerprint=f"{data.fingerprint}-other",
                                           documents=replace(data.documents, file="documents-redacted.csv"))
    at.switch_page(nav.EXPLORE).run()
    assert not at.exception
    notices = [shown(w) for w in at.warning if shown(w).startswith("These results are")]
    assert notices == [f"These results are of the release documents.csv ({run.label}), not of documents-redacted.csv, "
                       f"the documents loaded on the Data page. The declared configuration is the same "
                       f"({run.config_id})."]
    assert "has not been calibrated" not in notices[0]
