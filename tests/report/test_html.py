"""The HTML certificate report: self-contained, complete, escaped, and free of document text."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from html.parser import HTMLParser

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from cpa_core.attack.explainers import TermExplainer
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import ProjectConfig, declare_audit
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.synthetic import generate_sample_data
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.formatting import fmt_coverage, fmt_percent
from cpa_core.report.html import GUARANTEE, verdict_block
from cpa_core.report.metrics import confidence_curve, summarize
from cpa_core.report.verdict import Check, Verdict, release_verdict
from cpa_core.report.worklist import worklist
from cpa_core.store.records import manifest
from cpa_ui.figures import certificate_report

HOSTILE_GROUP = '<img src=x onerror="alert(1)">'
HOSTILE_FILE = "<b>notes</b>.csv"
CONFIDENCE = 0.8


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


GENERATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
POLICY = ReleasePolicy(30, 0.2)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Small synthetic documents whose group labels and file name are hostile markup, and their registry."""
    folder = tmp_path_factory.mktemp("report-data")
    paths = generate_sample_data(folder, seed=5, n_people=80, n_documents=400)
    frame = pd.read_csv(paths["documents"], dtype=str, keep_default_na=False)
    frame.loc[frame["group"] == "ner_masking", "group"] = HOSTILE_GROUP
    documents = load_documents(frame.to_csv(index=False).encode("utf-8"), name=HOSTILE_FILE)
    return documents, load_registry(paths["registry"])


def build_report(inputs, miss_policy: str = "infinite") -> dict:
    """A split-protocol audit of ``inputs`` and its report, on screen (the dashboard's, interactive) and for
    print."""
    documents, registry = inputs
    project = ProjectConfig(levels={"K2": KnowledgeLevel("K2", ("age_band", "gender", "occupation", "city",
                                                                 "keywords", "events"), "direct", "medium")},
                            attackers={"tfidf": {"temperature": 0.04}})
    config, attacker = declare_audit(project, registry, knowledge="K2",
                                     overrides={"protocol": "split", "n_cal": 150, "n_test": 200, "seed": 3,
                                                "group_column": "group", "confidence": [0.8, 0.9],
                                                "miss_policy": miss_policy})
    result = run_audit(documents, registry, attacker, config).with_policy(CONFIDENCE, POLICY)
    work = worklist(result.certificate(CONFIDENCE), POLICY, result.config.config_id,
                    explain=TermExplainer(lambda query, rows: {"golf": 1.0, "script": 0.5}, str.lower))
    work.at[0, "driving_terms"] = ["golf", "<script>"]  # escaped like any value from the data
    arguments = dict(curve=confidence_curve(result), worklist=work, manifest=manifest(result), generated_at=GENERATED)
    return {"result": result, "html": certificate_report(result, **arguments),
            "print": certificate_report(result, **arguments, for_print=True), "worklist": work,
            "documents": documents, "entry": summarize(result, [CONFIDENCE], POLICY).level(CONFIDENCE),
            "verdict": release_verdict(summarize(result, [CONFIDENCE], POLICY), CONFIDENCE)}


@pytest.fixture(scope="module")
def audit(inputs):
    """The audit under the conservative miss policy (the default)."""
    return build_report(inputs)


@pytest.fixture(scope="module")
def audit_exclude(inputs):
    """The same documents certified under the 'exclude' miss policy."""
    return build_report(inputs, "exclude")


def test_report_is_one_complete_html_document(audit):
    html = audit["html"]
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    parser = _Tags()
    parser.feed(html)
    tags = [tag for tag, _ in parser.tags]
    assert tags.count("html") == 1 and tags.count("body") == 1 and "title" in tags


def test_report_is_self_contained(audit):
    html = audit["html"]
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert "src" not in attrs or tag not in ("script", "img", "iframe"), (tag, attrs)
        assert tag != "link", attrs
    # plotly.js is inlined exactly once (its defaults name URLs it never loads for these charts) ...
    bundle = get_plotlyjs()
    assert html.count(bundle[:200]) == 1
    outside = html.replace(bundle, "")
    assert "http://" not in outside and "https://" not in outside
    # ... and every figure is drawn from data in the page
    assert html.count("Plotly.newPlot") >= 3
    for div in ("fig-histogram", "fig-curve", "fig-groups"):
        assert f'id="{div}"' in html


def test_report_states_what_was_audited_and_the_configuration(audit):
    html, result = audit["html"], audit["result"]
    config = result.config
    for text in (config.config_id, "K2", "age_band, gender, occupation, city, keywords, events", "aps",
                 "whole registry", "80 %", "flag |C| &lt; 30 or leakage &gt; 0.2 or linkage &gt; 0.0333", "2026-01-02T03:04:05+00:00",
                 result.inputs["documents"]["sha256"], result.inputs["registry"]["sha256"]):
        assert text in html, text
    for section in ("What was audited", "The declared threat configuration", "The guarantee, in plain words",
                    "exchangeable", "do not mean", "not</b> a probability of\nre-identification",
                    "Flagged documents", "Data checksums and versions", "numpy"):
        assert section in html, section


def test_report_numbers_match_the_core(audit):
    html, result = audit["html"], audit["result"]
    cert = result.certificate(CONFIDENCE)
    by_set = (cert.set_sizes < 30) | (1 / cert.set_sizes.clip(min=1) > 0.2)
    flagged = int((by_set | (cert.linkage > 1 / 30)).sum())  # the acceptable linkage rate: 1/k by default
    assert len(audit["worklist"]) == flagged
    assert f"<b>{flagged:,}</b> of {len(cert.set_sizes):,}" in html
    for doc_id in audit["worklist"]["doc_id"].head(20):
        assert f"<td>{doc_id}</td>" in html


def test_report_escapes_data_and_contains_no_document_text(audit):
    html = audit["html"]
    assert HOSTILE_GROUP not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert HOSTILE_FILE not in html and "&lt;b&gt;notes&lt;/b&gt;.csv" in html
    assert "<script>," not in html and "&lt;script&gt;" in html
    texts = audit["documents"].frame["text"]
    longest = texts[texts.str.len().idxmax()]
    for snippet in (longest[:60], longest[-60:]):
        assert snippet not in html


def test_confidence_curve_of_the_report_matches_the_certificates(audit):
    from cpa_core.report.metrics import certificate_metrics

    result = audit["result"]
    curve = confidence_curve(result, confidences=(0.5, 0.8, 0.9, 0.95))
    assert list(curve["confidence"]) == [0.5, 0.8, 0.9, 0.95]
    for row in curve.itertuples():
        metrics = certificate_metrics(result.certificate(row.confidence))
        assert row.coverage == metrics.coverage and row.median_set_size == metrics.median_set_size
    # thresholds grow with the confidence level, so sets are nested: coverage and sizes never decrease
    assert curve["coverage"].is_monotonic_increasing and curve["mean_set_size"].is_monotonic_increasing


# --- the verdict, the sign-off and what a privacy officer must read in the main text -----------------------------

def _flat(html: str) -> str:
    """The page with every run of whitespace as one space (the source wraps its sentences)."""
    return " ".join(html.split())


def _between(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end)]


@pytest.mark.parametrize("version", ["html", "print"])
def test_report_opens_with_the_verdict_and_the_sign_off(audit, version):
    html, verdict = audit[version], audit["verdict"]
    body = html[html.index("<body>"):]
    # the title, then the verdict, then the sign-off, then everything else
    assert body.index("<h1>") < body.index('id="verdict"') < body.index('id="signoff"') < body.index(
        "<h2>Summary</h2>")
    assert "<h2" not in body[:body.index('id="verdict"')]
    block = _between(body, 'id="verdict"', 'id="signoff"')
    assert f"Verdict: {escape(verdict.title)}" in block
    assert f'<p class="headline">{escape(verdict.headline)}</p>' in block
    assert (f"{verdict.n_flagged:,} of 200 held-out test documents flagged at 80 % confidence" in verdict.headline or
            "Every one of the 200 held-out test documents is flagged at 80 % confidence" in verdict.headline)
    assert "first guess is the right person for" in verdict.headline and "attack" in block
    for check in verdict.checks:
        result = {True: "passed", False: "FAILED", None: "not a test"}[check.passed]
        assert f"<td>{escape(check.name)}</td><td class='" in block
        assert f"'>{result}</td><td>{escape(check.reason)}</td>" in block
    for action in verdict.actions:
        assert f"<li>{escape(action)}</li>" in block


def test_sign_off_names_what_is_signed(audit):
    html, result = audit["html"], audit["result"]
    block = _between(html, 'id="signoff"', "<h2>Summary</h2>")
    for text in ("Reviewed by", "Role", "Date", "Signature", "Decision", result.config.config_id,
                 result.inputs["documents"]["sha256"], result.inputs["registry"]["sha256"], "80 %",
                 "flag |C| &lt; 30 or leakage &gt; 0.2", "2026-01-02T03:04:05+00:00",
                 f"cpa-core {manifest(result)['versions']['cpa-core']}", escape(audit["verdict"].title)):
        assert text in block, text


def test_coverage_is_shown_with_its_interval(audit):
    html, entry = _flat(audit["html"]), audit["entry"]
    low, high = entry.coverage_low, entry.coverage_high
    assert low < entry.coverage < high
    shown = f"{fmt_percent(entry.coverage)} (95 % CI {100 * low:.1f}–{100 * high:.1f} %)"
    assert shown == fmt_coverage(entry.coverage, low, high)
    assert f"Empirical coverage on the test split is {shown}" in html
    assert f"<td>{100 * low:.1f}–{100 * high:.1f} %</td>" in html  # and in the table per level
    assert "<th>coverage 95 % CI</th>" in html


def test_only_the_guarantee_of_the_audit_miss_policy_is_stated(audit, audit_exclude):
    infinite, exclude = _flat(audit["html"]), _flat(audit_exclude["html"])
    assert ("coverage is unconditional: P(truth ∈ C) ≥ 1 − α = 80 % over all documents, including those whose "
            "subject is not in the candidate pool.") in infinite
    for other in ("(1 − ρ)(1 − α)", "conditional on the subject being in the pool", "open-world bound",
                  GUARANTEE["exclude"][:60]):
        assert other not in infinite, other
    entry = audit_exclude["entry"]
    assert ("the guarantee is conditional on the subject being in the pool: P(truth ∈ C | truth in pool) ≥ 1 − α = "
            f"80 %; unconditionally, coverage is at least (1 − ρ)(1 − α) = {fmt_percent(entry.open_world_bound)}, "
            f"where ρ = {fmt_percent(entry.candidate_miss_rate)} is the candidate-miss rate.") in exclude
    for other in ("coverage is unconditional", "including those whose subject is not in the candidate pool",
                  GUARANTEE["infinite"][:60]):
        assert other not in exclude, other
    assert exclude.count("(1 − ρ)(1 − α)") == 1


def test_empty_and_whole_pool_sets_are_explained_in_the_text_with_their_counts(audit):
    html, entry = _flat(audit["html"]), audit["entry"]
    n = entry.n_test
    n_empty, n_whole = round(entry.empty_rate * n), round(entry.whole_pool_rate * n)
    section = _between(html, "<h2>Empty and whole-pool sets</h2>", "<h2>What was audited</h2>")
    assert (f"<p><b>{n_empty:,}</b> of {n:,} held-out test documents have an <b>empty set</b> at 80 % confidence. "
            "|C| = 0: the attacker is more certain of its top candidate than the certificate needs — the highest "
            "risk; flagged.</p>") in section
    assert (f"<p><b>{n_whole:,}</b> of {n:,} held-out test documents have a <b>whole-pool set</b> (at least 90 % of "
            "their candidate pool): the method could not narrow anything down — not evidence of safety.") in section
    assert html.index("<h2>Empty and whole-pool sets</h2>") < html.index("<h2>Results</h2>")


def test_print_version_runs_no_script_and_draws_static_figures(audit):
    html = audit["print"]
    assert "<script" not in html and "Plotly" not in html and "js-plotly" not in html
    assert "http://" not in html and "https://" not in html  # no URL at all: nothing a PDF engine could fetch
    assert html.count("<svg ") == 2 and "@page" in html and "size: A4" in html and "@media print" in html
    # the histogram's bars are the set sizes of the certificate: in each bin, its flagged documents in red (by set
    # size or by linkage probability, as the verdict counts them), the others in blue
    from cpa_core.report.formatting import FLAGGED_COLOR, SAFE_COLOR, set_size_bins
    from cpa_core.report.html import bin_counts

    cert = audit["result"].certificate(CONFIDENCE)
    bins = set_size_bins(cert.set_sizes, POLICY.flag_below)
    red = bin_counts(bins, cert.set_sizes, cert.flags(POLICY))
    histogram = _between(html, "<svg ", "</svg>")
    assert histogram.count(f'fill="{FLAGGED_COLOR}"/>') == int((red > 0).sum())
    assert histogram.count(f'fill="{SAFE_COLOR}"/>') == int((bins["count"] > red).sum())
    assert escape(f"red: flagged, {POLICY.rule}") in histogram
    # data stays escaped in the print version too
    assert HOSTILE_GROUP not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert HOSTILE_FILE not in html


def test_verdict_block_escapes_its_text():
    hostile = '<script>alert("x")</script>'
    verdict = Verdict("inconclusive", "Inconclusive", f"headline {hostile}",
                      (Check("a threshold per group", False, f"group '{hostile}' has no calibration document"),),
                      (f"Add calibration documents of group '{hostile}'",), (f"warning {hostile}",), "id",
                      0.9, "|C| < 11", 0, 10)
    block = verdict_block(verdict)
    assert "<script>" not in block and block.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") == 4
    assert "<td class='fail'>FAILED</td>" in block


# --- the release protocol, without groups ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def release(inputs):
    """The documents without their group column, certified under the release protocol (the default), at k = 100 so
    that the histogram's k line and its last bin sit at the right edge; the print version."""
    documents, registry = inputs
    ungrouped = load_documents(documents.frame.drop(columns=["group"]).to_csv(index=False).encode("utf-8"),
                               name="release.csv")
    project = ProjectConfig(levels={"K2": KnowledgeLevel("K2", ("age_band", "gender", "occupation", "city",
                                                                 "keywords", "events"))},
                            attackers={"tfidf": {"temperature": 0.04}})
    config, attacker = declare_audit(project, registry, knowledge="K2", overrides={"confidence": [0.8, 0.9]})
    policy = ReleasePolicy(100)
    result = run_audit(ungrouped, registry, attacker, config).with_policy(CONFIDENCE, policy)
    assert result.config.protocol == "release" and result.test_split.groups is None
    work = worklist(result.certificate(CONFIDENCE), policy, result.config.config_id)
    html = certificate_report(result, curve=confidence_curve(result), worklist=work, manifest=manifest(result),
                              generated_at=GENERATED, for_print=True)
    return {"result": result, "print": html, "worklist": work}


def _text(html: str) -> str:
    """What the page says: its text without tags, styles or whitespace runs."""
    import re

    body = html[html.index("<body>"):]
    return " ".join(re.sub(r"<[^>]+>", " ", body).split())


def test_a_release_report_speaks_of_certified_documents_not_of_a_test_split(release, audit):
    """Under the release protocol every document is certified and the labelled ones calibrate each other: no test
    document, test split or held-out document anywhere (the split protocol's report says them)."""
    said = _text(release["print"]).lower()
    for wording in ("test document", "test split", "held-out", "split seed", "test set"):
        assert wording not in said, (wording, said[max(0, said.find(wording) - 200):said.find(wording) + 100])
    assert "certified document ids sha-256" in said and "calibrating / certified documents" in said
    split_said = _text(audit["print"]).lower()
    assert "held-out test documents" in split_said and "split seed" in split_said


def test_a_release_report_draws_set_size_against_confidence_and_says_why(release, audit):
    """A coverage curve is the diagonal by construction under the release protocol: the print version draws how the
    sets grow with the confidence level instead, and says why; the split protocol's keeps its coverage curve."""
    html = release["print"]
    assert "Coverage versus confidence" not in html and "Certified set size versus confidence" in html
    assert "by construction (a chart of it would be the diagonal)" in _text(html)
    curve = confidence_curve(release["result"])
    figure = html[html.index('aria-label="Certified set size versus confidence"'):].split("</svg>", 1)[0]
    assert figure.count("<polyline") == 2 and "k = 100 (flagged below)" in figure
    assert curve["median_set_size"].iloc[-1] > curve["median_set_size"].iloc[0]  # it says something: sets grow
    assert "Coverage versus confidence" in audit["print"] and "Certified set size versus" not in audit["print"]


def test_no_group_column_without_groups(release):
    flagged = _between(release["print"], "<h2>Flagged documents", "<h2>Data checksums")
    assert len(release["worklist"]) and "<th>group</th>" not in flagged and "<th>document</th>" in flagged
    assert "Per group" not in release["print"]


def _text_boxes(svg: str):
    """Each text of a static figure with its left and right edges, measured with the font the PDF uses."""
    import re
    from html import unescape

    from PIL import ImageFont

    font_file = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    try:
        fonts = {size: ImageFont.truetype(font_file, size) for size in (9, 10, 12)}
    except OSError:
        pytest.skip(f"no {font_file} to measure the labels with")
    pattern = re.compile(r'<text x="([-\d.]+)" y="[-\d.]+" font-size="(\d+)" text-anchor="(\w+)"[^>]*>([^<]*)</text>')
    for x, size, anchor, text in pattern.findall(svg):
        width = fonts[int(size)].getlength(unescape(text))
        left = {"start": float(x), "middle": float(x) - width / 2, "end": float(x) - width}[anchor]
        yield unescape(text), left, left + width, anchor


@pytest.mark.parametrize("flag_below", [5, 30, 100, 373])
def test_every_label_of_the_histogram_fits_inside_the_figure(release, flag_below):
    """The last bin's label and "k = ..." used to run past the right edge (cut off in the PDF), whatever k."""
    from cpa_core.report.html import svg_set_size_histogram

    sizes = release["result"].certificate(CONFIDENCE).set_sizes
    svg = svg_set_size_histogram(sizes, flag_below, "Certified set sizes at 80 %")
    width = float(svg.split('width="', 1)[1].split('"', 1)[0])
    boxes = list(_text_boxes(svg))
    assert any(text == f"k = {flag_below}" for text, *_ in boxes)
    assert any(text.endswith(str(int(sizes.max()))) for text, *_ in boxes)  # the last bin is labelled
    for text, left, right, _ in boxes:
        assert 0 <= left and right <= width, (text, left, right, width)
    ticks = sorted((left, right) for text, left, right, anchor in boxes if text[:1].isdigit() and anchor == "middle")
    assert all(a[1] <= b[0] for a, b in zip(ticks, ticks[1:])), ticks  # tick labels never overlap


# --- an attacker panel's report -------------------------------------------------------------------------------

class _Tables(HTMLParser):
    """Every table's rows as the text of their cells (``tables[id]``: the table of that id), and every link."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.links: list[str] = []
        self.texts: dict[str, str] = {}  # the text of each element with an id
        self._table, self._cell, self._ids = None, None, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = ""
        elif tag == "a":
            self.links.append(attrs.get("href"))
        if "id" in attrs and tag != "table":
            self._ids.append((tag, attrs["id"]))
            self.texts[attrs["id"]] = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        for _, name in self._ids:
            self.texts[name] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(self._cell.strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        if self._ids and self._ids[-1][0] == tag:
            self._ids.pop()


def parsed(document: str) -> _Tables:
    parser = _Tables()
    parser.feed(document)
    return parser


def test_the_panel_report_states_each_attacker_as_the_panel_s_verdict_reads_it():
    from toy_panel import toy_panel

    from cpa_core.report.formatting import fmt_interval
    from cpa_core.report.html import panel_report
    from cpa_core.report.verdict import panel_verdict
    from cpa_core.report.worklist import panel_worklist

    panel = toy_panel()
    confidence = panel.config.policy_confidence
    verdict = panel_verdict(panel, confidence)
    first, second = panel.names
    assert verdict.decided_by == first and verdict.remainder_bound is not None  # what the toy release gives
    work = panel_worklist(panel.certificate(confidence), panel.config.policy, panel.config_id)
    links = {name: f"members/{name}/report.html" for name in panel.names}
    document = panel_report(panel, worklist=work, manifest={"versions": {"cpa-core": "9.9"}}, member_links=links,
                            generated_at=GENERATED)
    found = parsed(document)
    header, *rows = found.tables["members"]
    assert header[:4] == ["attacker", "first guess right", "95 % CI", "flagged"]
    assert "98.75 % bound, corrected for 2" in header[5]
    for row, member in zip(rows, verdict.members, strict=True):
        own = member.own
        assert row[:6] == [member.attacker, fmt_percent(own.first_guess_rate),
                           fmt_interval(own.first_guess_low, own.first_guess_high), f"{member.n_flagged:,}",
                           fmt_percent(member.remainder_first_guess), fmt_percent(member.remainder_bound)]
        assert row[6] == own.title and row[7] == ("decided" if member.attacker == first else "")
    assert rows[0][6] != rows[1][6]  # each attacker's own verdict, side by side
    assert f"Decided by {first}: its bound on what the panel leaves, {fmt_percent(verdict.remainder_bound)}" in \
        found.texts["decided-by"]
    assert verdict.headline in found.texts["verdict"] and escape(verdict.title) in document
    correction = found.texts["correction"]
    assert "one-sided 98.75 % Clopper–Pearson upper bound (1 − 0.025/2" in correction
    assert "2 × 0.025/2 = 0.025" in correction and "Bonferroni" in correction
    assert [link for link in found.links if link.startswith("members/")] == [links[first], links[second]] * 2
    flagged = found.tables[next(name for name, table in found.tables.items()
                                if table and "smallest set by" in table[0])]
    assert [row[0] for row in flagged[1:]] == [str(d) for d in work["doc_id"]]
    assert "<script" not in document and REDACTION_TITLE_TEXT not in document  # no redaction given, none shown


REDACTION_TITLE_TEXT = "A redacted release"


def test_the_panel_report_renders_a_redaction_verified_outside_its_search():
    from toy_panel import REDACTION, toy_panel

    from cpa_core.report.html import REDACTION_TITLE, panel_report, rate_text
    from cpa_core.report.worklist import panel_worklist

    panel = toy_panel()
    confidence = panel.config.policy_confidence
    work = panel_worklist(panel.certificate(confidence), panel.config.policy, panel.config_id)
    document = panel_report(panel, worklist=work, manifest={}, redaction=REDACTION, generated_at=GENERATED)
    assert REDACTION_TITLE == REDACTION_TITLE_TEXT and f"<h2>{REDACTION_TITLE}</h2>" in document
    found = parsed(document)
    section = found.texts["redaction"]
    assert "bm25" in section and "abc123def456" in section and "never consulted" in section
    table = next(table for table in found.tables.values() if table and table[0][:2] == ["attacker", "role"])
    assert table[1:] == [
        ["tfidf", "consulted by the search", "31.0 % (27.0–35.0 %, 500 documents)",
         "6.0 % (4.0–9.0 %, 480 documents)"],
        ["<img src=x onerror=alert(1)>", "consulted by the search", "25.0 % (21.0–29.0 %, 500 documents)",
         "5.0 % (3.0–8.0 %, 480 documents)"],
        ["bm25", "held out: never consulted by the search", "not audited", "8.0 % (5.0–11.0 %, 480 documents)"]]
    assert "<img" not in document and "&lt;img src=x onerror=alert(1)&gt;" in document  # a name from the data: text
    assert rate_text(None, None, None, None) == "not audited"
    # where it comes from, what was done to it, and both files in the sign-off
    assert ("made from the audit of configuration abc123def456 of ward<b>7</b>.csv (120 documents): 7 documents "
            "withheld, 30 edited by 52 edits (410 characters removed), 83 released untouched") in " ".join(
        section.split())
    assert "f" * 64 in section and "d" * 64 in section and "<b>7</b>" not in document
    signoff = " ".join(found.texts["signoff"].split())
    assert "redacted from" in signoff and "the audit of configuration abc123def456 of ward<b>7</b>.csv" in signoff
    assert "7 documents withheld" in signoff and "f" * 64 in signoff and "d" * 64 in signoff
    assert document.index('id="redaction"') < document.index('id="signoff"')  # read before it is signed


def test_nothing_left_to_release_is_decided_by_no_attacker():
    from toy_panel import toy_panel

    from cpa_core.report.html import decided_sentence, deciding_member, member_frame
    from cpa_core.report.verdict import panel_verdict

    panel = toy_panel(acceptable_linkage=1e-6)  # every linkage probability above it: every document flagged
    verdict = panel_verdict(panel, panel.config.policy_confidence)
    assert verdict.remainder_bound is None and verdict.status != "inconclusive"
    assert deciding_member(verdict) is None and not member_frame(verdict)["decided"].any()
    assert decided_sentence(verdict).startswith("No attacker's bound decides it")


def test_a_redacted_release_s_report_is_its_own_certificate_naming_where_it_comes_from(audit):
    from cpa_core.redaction.decisions import decisions_summary, decisions_table, redaction_lineage
    from cpa_core.redaction.suggestions import WITHHOLD

    result, work = audit["result"], audit["worklist"]
    ids = [str(d) for d in audit["documents"].frame["doc_id"][:5]]
    table = decisions_table([])
    rows = [{"doc_id": ids[0], "action": "edit", "offset": 0, "length": 4, "original": "abcd", "replacement": "[X]",
             "term": "abcd", "kind": "placeholder", "source": "curator", "reason": "", "accept": True},
            {"doc_id": ids[1], "action": "edit", "offset": 2, "length": 3, "original": "xyz", "replacement": "[X]",
             "term": "xyz", "kind": "placeholder", "source": "curator", "reason": "", "accept": True},
            {"doc_id": ids[1], "action": "edit", "offset": 9, "length": 5, "original": "wwwww", "replacement": "[X]",
             "term": "w", "kind": "placeholder", "source": "curator", "reason": "", "accept": True},
            {"doc_id": ids[2], "action": "edit", "offset": 0, "length": 2, "original": "qq", "replacement": "[X]",
             "term": "q", "kind": "placeholder", "source": "curator", "reason": "", "accept": True},
            {"doc_id": ids[2], "action": WITHHOLD, "source": "suggested", "reason": "too risky", "accept": True},
            {"doc_id": ids[3], "action": "edit", "offset": 0, "length": 2, "original": "rr", "replacement": "[X]",
             "term": "r", "kind": "placeholder", "source": "curator", "reason": "", "accept": False}]
    table = pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
    source = {"file": "<i>ward</i>.csv", "sha256": "a" * 64, "rows": 400}
    lineage = redaction_lineage(source, "parent123456", decisions_summary(table, "parent123456"), from_audit=7,
                                attackers=[{"attacker": "tfidf", "held_out": False,
                                            "before": {"first_guess": 0.5, "low": 0.4, "high": 0.6, "n": 100},
                                            "after": {"first_guess": 0.1, "low": 0.05, "high": 0.2, "n": 90}}])
    # the edit of the withheld document is not in the release, nor counted; the rejected one neither
    assert lineage["counts"] == {"withheld": 1, "edited": 2, "untouched": 397, "edits": 3, "characters": 12}
    assert lineage["decisions"]["applied_edits"] == 3 and lineage["decisions"]["withheld"] == [ids[2]]
    redacted = result.with_inputs(redaction=lineage)
    html = certificate_report(redacted, curve=confidence_curve(result), worklist=work, manifest=manifest(redacted),
                              generated_at=GENERATED, for_print=True)
    found = parsed(html)
    section = " ".join(found.texts["redaction"].split())
    assert ("made from audit 7, configuration parent123456 of <i>ward</i>.csv (400 documents): 1 document withheld, 2 "
            "edited by 3 edits (12 characters removed), 397 released untouched") in section
    assert "a" * 64 in section and lineage["decisions"]["sha256"] in section
    assert "50.0 %" in section and "10.0 %" in section  # the first-guess rate before and after
    signoff = " ".join(found.texts["signoff"].split())
    assert "(the redacted release)" in signoff and "<i>ward</i>.csv" in signoff and "a" * 64 in signoff
    assert "<i>ward</i>" not in html  # a file name from the data is text
    plain = certificate_report(result, curve=confidence_curve(result), worklist=work, manifest=manifest(result),
                               generated_at=GENERATED, for_print=True)
    assert 'id="redaction"' not in plain and "redacted from" not in plain  # a release as given says nothing of it


def test_a_configuration_list_goes_to_the_appendix_as_a_count_and_a_hash(audit):
    import hashlib

    result, work = audit["result"], audit["worklist"]
    fold = [f"doc-{i}" for i in range(200)]
    listed = result.with_inputs(learned={"temperature": 0.05, "tuning fold": fold})
    html = certificate_report(listed, curve=confidence_curve(result), worklist=work, manifest=manifest(listed),
                              generated_at=GENERATED, for_print=True)
    assert "doc-17" not in html  # no id of the fold is listed
    appendix = " ".join(parsed(html).texts["appendix"].split())
    digest = hashlib.sha256("\n".join(fold).encode()).hexdigest()
    assert "tuning fold" in appendix and "200 items" in appendix and digest in appendix
    assert "200 items (appendix 1)" in html and "0.05" in html  # a scalar stays in the configuration table


def test_the_worklist_of_the_report_carries_an_excerpt_around_each_evidence_span(audit):
    from cpa_core.report.evidence import evidence_excerpt

    result, work = audit["result"], audit["worklist"]
    texts = audit["documents"].texts()
    html = certificate_report(result, curve=confidence_curve(result), worklist=work, manifest=manifest(result),
                              generated_at=GENERATED, for_print=True, texts=texts)
    flagged = next(table for table in parsed(html).tables.values() if table and "excerpt" in table[0])
    column = flagged[0].index("excerpt")
    shown = [i for i, spans in enumerate(work["evidence"]) if spans]
    assert shown and len(shown) < len(work)  # documents with evidence and without it
    for i in (shown[0], next(i for i in range(len(work)) if i not in shown)):
        expected = evidence_excerpt(texts[str(work.iloc[i]["doc_id"])], work.iloc[i]["evidence"])
        assert flagged[1 + i][column] == expected and ("«" in expected) == (i in shown)
    assert "this report holds document text" in html
    assert "Document text is not included" in audit["print"]  # without the texts, none


def test_an_excerpt_marks_each_span_in_its_context_and_merges_close_ones():
    from cpa_core.report.evidence import evidence_excerpt

    text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj"
    spans = [{"offset": 5, "length": 4}, {"offset": 15, "length": 4}, {"offset": 40, "length": 4}]
    assert evidence_excerpt(text, spans, context=5) == "aaaa «bbbb» cccc «dddd» eeee… …hhhh «iiii» jjjj"
    assert evidence_excerpt(text, spans, context=5, most=1) == "aaaa «bbbb» cccc…"
    assert evidence_excerpt(text, [{"offset": 0, "length": 4}], context=100) == "«aaaa» bbbb cccc dddd eeee ffff " \
                                                                                "gggg hhhh iiii jjjj"
    assert evidence_excerpt(text, []) == ""


def test_the_counts_of_a_redacted_release_agree_with_their_numbers():
    from cpa_core.report.html import redaction_counts_text

    one = {"counts": {"withheld": 1, "edited": 1, "edits": 1, "characters": 1, "untouched": 0}}
    assert redaction_counts_text(one) == ("1 document withheld, 1 edited by 1 edit (1 character removed), "
                                          "0 released untouched")
    assert redaction_counts_text({"counts": {}}) == "0 documents withheld, 0 edited by 0 edits (0 characters removed)"
