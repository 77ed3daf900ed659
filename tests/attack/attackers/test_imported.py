"""Bring your own attacker (cpa_core.attack.attackers.imported): the long table doc_id, candidate_id, score and
the CandidateTable it yields, checked on hand-computed toy cases and against a document-by-document reference on
random tables (both ways of filling the matrices, the three kinds, ties, documents without rows, candidates outside
the registry)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

import cpa_core.attack.attackers.imported as imported
from cpa_core.attack.attackers.imported import load_candidate_scores, ranked_pools
from cpa_core.attack.candidates import softmax_rows
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import ProjectConfig, declare_audit
from cpa_core.audit.results import ScoredSplit, certify
from cpa_core.common.errors import ConfigError, DataError
from cpa_core.conformal.calibration import calibrate
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.metrics import certificate_metrics

LEVEL = KnowledgeLevel("L", ("city",))
SCORES_HEADER = "doc_id,candidate_id,score\n"


@pytest.fixture
def registry():
    return load_registry(b"identity_id,city\na,York\nb,Leeds\nc,Hull\nd,Bath\n", name="registry.csv")


def scores(text: str, kind: str = "probability", **kwargs):
    return load_candidate_scores((SCORES_HEADER + text).encode(), kind=kind, name="scores.csv", **kwargs)


def attack(attacker, registry, doc_ids):
    return attacker.attack(doc_ids, [f"text of {d}" for d in doc_ids], registry, LEVEL)


def ids(table, row):
    return table.candidate_ids[table.candidates[row, : table.pool_sizes[row]]].tolist()


# -------------------------------------------------------------------------------------- table building

def test_probability_kind_orders_and_normalises(registry):
    attacker = scores("d1,c,1\nd1,a,2\nd1,b,5\nd1,d,2\n"   # b 0.5, then a and d tied at 0.2 (registry order), c 0.1
                      "d2,d,0.3\nd2,a,0.1\n")              # d 0.75, a 0.25
    table = attack(attacker, registry, ["d1", "d2"])
    assert table.weight_kind == "probability"
    assert ids(table, 0) == ["b", "a", "d", "c"]
    np.testing.assert_allclose(table.weights[0], [0.5, 0.2, 0.2, 0.1])
    assert ids(table, 1) == ["d", "a"]
    np.testing.assert_allclose(table.weights[1, :2], [0.75, 0.25])
    assert table.weights[1, 2:].sum() == 0 and (table.candidates[1, 2:] == -1).all()
    assert table.pool_sizes.tolist() == [4, 2]
    assert table.queries == ("text of d1", "text of d2")
    np.testing.assert_allclose(table.weights.sum(axis=1), 1.0)


def test_score_kind_is_a_temperature_softmax(registry):
    attacker = scores("d1,a,2\nd1,b,1\nd1,c,0\n", kind="score", temperature=0.5)
    table = attack(attacker, registry, ["d1"])
    expected = np.exp([4.0, 2.0, 0.0]) / np.exp([4.0, 2.0, 0.0]).sum()
    assert ids(table, 0) == ["a", "b", "c"]
    np.testing.assert_allclose(table.weights[0], expected)
    hot = attack(scores("d1,a,2\nd1,b,1\nd1,c,0\n", kind="score", temperature=2.0), registry, ["d1"])
    np.testing.assert_allclose(hot.weights[0], np.exp([1.0, 0.5, 0.0]) / np.exp([1.0, 0.5, 0.0]).sum())
    assert attacker.params()["temperature"] == 0.5
    assert scores("d1,a,1\n").params()["temperature"] is None  # temperature only matters for kind score


def test_rank_kind_keeps_the_ranking(registry):
    attacker = scores("d1,c,3\nd1,a,1\nd1,d,2\n", kind="rank")
    table = attack(attacker, registry, ["d1"])
    assert table.weight_kind == "rank"
    assert ids(table, 0) == ["a", "d", "c"]
    assert table.weights[0].tolist() == [-1.0, -2.0, -3.0]


def test_documents_absent_from_the_table_have_an_empty_pool(registry):
    attacker = scores("d1,a,0.6\nd1,b,0.4\n")
    table = attack(attacker, registry, ["d1", "ghost", "d2"])
    assert table.pool_sizes.tolist() == [2, 0, 0]
    assert (table.candidates[1:] == -1).all()
    split = ScoredSplit.build(table, ["a", "a", "b"], None, "aps")
    assert split.in_pool.tolist() == [True, False, False]
    assert split.truth_scores[1:].tolist() == [math.inf, math.inf]
    assert split.truth_ranks.tolist() == [1, 0, 0]
    cert = certify(split, calibrate(np.array([0.6, 1.0, 1.0, 1.0]), [0.5]), 0.5)
    assert cert.set_sizes.tolist() == [2, 0, 0] and cert.covered.tolist() == [True, False, False]
    metrics = certificate_metrics(cert)
    assert metrics.candidate_miss_rate == pytest.approx(2 / 3)
    assert metrics.coverage == pytest.approx(1 / 3) and metrics.coverage_conditional == 1.0


def test_candidates_outside_the_registry_are_allowed(registry):
    attacker = scores("d1,zed,0.7\nd1,a,0.3\nd2,b,1\n")
    table = attack(attacker, registry, ["d1", "d2"])
    assert table.candidate_ids.tolist() == ["a", "b", "c", "d", "zed"]
    assert ids(table, 0) == ["zed", "a"]
    split = ScoredSplit.build(table, ["zed", "b"], None, "aps")  # an open-world identity the attacker named
    assert split.in_pool.tolist() == [True, True]
    assert split.score.to_method(split.truth_scores).tolist() == pytest.approx([0.7, 1.0])


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_every_format_and_column_mapping(tmp_path, registry, suffix):
    frame = pd.DataFrame({"doc": ["d1", "d1"], "person": ["a", "b"], "p": [0.25, 0.75]})
    path = tmp_path / f"scores.{suffix}"
    if suffix == "csv":
        frame.to_csv(path, index=False)
    elif suffix == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path, index=False)
    attacker = load_candidate_scores(path, columns={"doc_id": "doc", "candidate_id": "person", "score": "p"})
    table = attack(attacker, registry, ["d1"])
    assert ids(table, 0) == ["b", "a"]
    np.testing.assert_allclose(table.weights[0], [0.75, 0.25])
    assert attacker.file == str(path) and len(attacker.scores.sha256) == 64


# ------------------------------------------------------------------------------- hand-computed audit

def test_hand_computed_calibration_and_sets(registry):
    """Calibration truths' APS scores: 0.5, 0.8, 1.0 and +inf (absent document)."""
    attacker = scores("c1,a,0.5\nc1,b,0.3\nc1,c,0.2\n"
                      "c2,a,0.5\nc2,b,0.3\nc2,c,0.2\n"
                      "c3,a,0.5\nc3,b,0.3\nc3,c,0.2\n"
                      "t1,a,0.6\nt1,b,0.3\nt1,c,0.1\n"
                      "t2,d,0.95\nt2,a,0.05\n")
    cal = ScoredSplit.build(attack(attacker, registry, ["c1", "c2", "c3", "c4"]), ["a", "b", "c", "a"], None, "aps")
    assert cal.score.to_method(cal.truth_scores).tolist() == pytest.approx([0.5, 0.8, 1.0, math.inf])
    calibration = calibrate(cal.calibration_scores("infinite")[0], [0.5, 0.6, 0.7])
    # n = 4: k = ceil(5 * c) = 3, 3, 4
    aps = cal.score.to_method
    assert aps(calibration.q_hat(0.5)) == pytest.approx(1.0)
    assert aps(calibration.q_hat(0.6)) == pytest.approx(1.0)
    assert calibration.q_hat(0.7) == math.inf
    excluded = calibrate(cal.calibration_scores("exclude")[0], [0.5])  # n = 3: k = ceil(2) = 2
    assert aps(excluded.q_hat(0.5)) == pytest.approx(0.8)
    test = ScoredSplit.build(attack(attacker, registry, ["t1", "t2"]), ["b", "a"], None, "aps")
    # t1: APS 0.6, 0.9, 1.0 ; t2: APS 0.95, 1.0
    assert certify(test, excluded, 0.5).set_sizes.tolist() == [1, 0]
    assert certify(test, calibration, 0.5).set_sizes.tolist() == [3, 2]
    assert certify(test, excluded, 0.5).covered.tolist() == [False, False]
    assert certify(test, calibration, 0.5).covered.tolist() == [True, True]


def test_imported_attacker_through_run_audit(tmp_path, registry):
    rng = np.random.default_rng(3)
    truth = rng.choice(["a", "b", "c", "d"], size=40)
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(40)], "text": [f"note {i}" for i in range(40)],
                         "identity_id": truth})
    rows = []
    for i, t in enumerate(truth):
        if i % 10 == 9:
            continue  # absent from the table: an empty pool, a candidate miss
        for cand in "abcd":
            rows.append({"doc_id": f"d{i}", "candidate_id": cand, "score": 3.0 if cand == t else rng.random()})
    docs.to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame(rows).to_csv(tmp_path / "s.csv", index=False)
    documents = load_documents(tmp_path / "d.csv")
    attacker = load_candidate_scores(tmp_path / "s.csv", kind="score", temperature=0.5)
    config, chosen = declare_audit(ProjectConfig(), registry, scores=attacker.scores, attacker_params={'kind': attacker.kind, 'temperature': attacker.temperature},
                                   overrides={"protocol": "split", "n_cal": 20, "n_test": 20, "confidence": [0.8]})
    assert chosen.scores is attacker.scores and config.attacker.name == "imported"
    assert config.attacker.params["kind"] == "score" and config.attacker.details["sha256"] == attacker.scores.sha256
    result = run_audit(documents, registry, chosen, config)
    absent = np.array([int(d[1:]) % 10 == 9 for d in result.test_split.table.doc_ids])
    assert (~result.test_split.in_pool == absent).all()
    metrics = certificate_metrics(result.certificate(0.8))
    assert metrics.candidate_miss_rate == pytest.approx(absent.mean())
    assert metrics.top1 == pytest.approx(1 - absent.mean())


# -------------------------------------------------------------------------------------- invalid rows

@pytest.mark.parametrize("kind,body,row,column,parts", [
    ("probability", "d1,a,0.5\nd1,b,nan\n", 2, "score", ["invalid score", "expected a finite number", "'nan'"]),
    ("probability", "d1,a,0.5\nd1,b,\n", 2, "score", ["invalid score", "expected a finite number", "''"]),
    ("score", "d1,a,0.5\nd1,b,inf\n", 2, "score", ["invalid score", "expected a finite number", "'inf'"]),
    ("score", "d1,a,high\n", 1, "score", ["invalid score", "'high'"]),
    ("probability", "d1,a,0.5\nd1,b,-0.1\n", 2, "score", ["negative probability", "expected a non-negative weight",
                                                           "'-0.1'"]),
    ("rank", "d1,a,1\nd1,b,0\n", 2, "score", ["invalid rank", "expected an integer rank >= 1", "'0'"]),
    ("rank", "d1,a,1.5\n", 1, "score", ["invalid rank", "'1.5'"]),
    ("probability", "d1,a,0.5\n,b,0.5\n", 2, "doc_id", ["invalid identifier", "expected a non-empty text"]),
    ("probability", "d1,a,0.5\nd1,,0.5\n", 2, "candidate_id", ["invalid identifier"]),
])
def test_invalid_rows_name_row_and_column(kind, body, row, column, parts):
    with pytest.raises(DataError) as info:
        scores(body, kind=kind)
    message = str(info.value)
    for part in ["scores.csv", f"row {row}", f"column '{column}'", *parts]:
        assert part in message, f"{part!r} not in {message!r}"
    assert (info.value.row, info.value.column) == (row, column)


def test_duplicate_pair_names_row_and_column():
    with pytest.raises(DataError) as info:
        scores("d1,a,0.5\nd1,b,0.2\nd1,a,0.3\n")
    message = str(info.value)
    for part in ["scores.csv", "row 3", "'a'", "'d1'", "the same pair in row 1"]:
        assert part in message, f"{part!r} not in {message!r}"
    assert info.value.row == 3
    assert info.value.column in ("candidate_id", "doc_id"), f"no column named in {message!r}"
    assert "column '" in message


def test_unknown_kind_and_bad_temperature():
    with pytest.raises(ConfigError) as info:
        scores("d1,a,1\n", kind="logit")
    assert "'logit'" in str(info.value) and "probability, score, rank" in str(info.value)
    for temperature in (0, -1.0, float("nan")):
        with pytest.raises(ConfigError):
            scores("d1,a,1\n", kind="score", temperature=temperature)


# ------------------------------------------------------------------------------ rank kind vs score

@pytest.mark.parametrize("score", ["aps", "probability"])
def test_rank_kind_needs_the_rank_score(registry, score):
    attacker = scores("d1,a,1\nd1,b,2\n", kind="rank")
    with pytest.raises(ConfigError) as info:
        declare_audit(ProjectConfig(), registry, scores=attacker.scores, attacker_params={'kind': attacker.kind, 'temperature': attacker.temperature}, overrides={"score": score})
    assert f"'{score}'" in str(info.value) and "rank" in str(info.value)
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker=AttackerConfig("imported", weight_kind=attacker.weight_kind), score=score)


def test_rank_kind_with_the_rank_score(registry):
    attacker = scores("c1,a,1\nc1,b,2\nc1,c,3\nc2,b,1\nc2,a,2\nt1,c,1\nt1,a,2\nt1,b,3\n", kind="rank")
    config, _ = declare_audit(ProjectConfig(), registry, scores=attacker.scores, attacker_params={'kind': attacker.kind, 'temperature': attacker.temperature}, overrides={"score": "rank"})
    assert config.score == "rank"
    cal = ScoredSplit.build(attack(attacker, registry, ["c1", "c2"]), ["b", "b"], None, "rank")
    assert cal.truth_scores.tolist() == [2.0, 1.0]
    test = ScoredSplit.build(attack(attacker, registry, ["t1"]), ["a"], None, "rank")
    # n = 2, confidence 0.6: k = ceil(3 * 0.6) = 2, q_hat = 2: the top two ranks
    cert = certify(test, calibrate(cal.truth_scores, [0.6]), 0.6)
    assert cert.set_sizes.tolist() == [2] and cert.members(0).tolist() == ["c", "a"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("kind, values, row, problem, expected, found", [
    ("probability", [0.5, 0.2, -0.1], 3, "negative probability", "a non-negative weight", ("'-0.1'", "-0.1")),
    ("rank", [1, 2, 2.5], 3, "invalid rank", "an integer rank >= 1", ("'2.5'", "2.5")),
    ("rank", [2, 0, 1], 2, "invalid rank", "an integer rank >= 1", ("'0.0'", "0.0")),
])
def test_a_score_the_kind_refuses_is_one_line_as_written(fmt, kind, values, row, problem, expected, found):
    frame = pd.DataFrame({"doc_id": "d1", "candidate_id": ["a", "b", "c"], "score": np.array(values, dtype=float)})
    if fmt == "csv":
        data = frame.to_csv(index=False).encode()
    elif fmt == "jsonl":
        data = frame.to_json(orient="records", lines=True).encode()
    else:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        data = buffer.getvalue()
    with pytest.raises(DataError) as info:
        load_candidate_scores(data, kind=kind, name=f"s.{fmt}")
    assert str(info.value) == (f"s.{fmt}, row {row}, column 'score': {problem}; expected {expected}, "
                               f"found {found[0] if fmt == 'csv' else found[1]}")


def test_the_score_kind_takes_any_finite_number(registry):
    attacker = scores("d1,a,-3\nd1,b,0.5\nd1,c,-0.5\n", kind="score")
    assert ids(attack(attacker, registry, ["d1"]), 0) == ["b", "c", "a"]


# ------------------------------------------------------------------------------------- vs a reference

def reference(rows, doc_ids, registry_ids, kind, temperature):
    """Document by document: its rows sorted by (decreasing score, or increasing rank; then candidate position),
    padded, weighted as the kind says."""
    universe = list(registry_ids) + [c for c in dict.fromkeys(r[1] for r in rows) if c not in set(registry_ids)]
    position = {c: i for i, c in enumerate(universe)}
    pools = []
    for doc in doc_ids:
        mine = [(position[c], v) for d, c, v in rows if d == doc]
        mine.sort(key=lambda item: (item[1] if kind == "rank" else -item[1], item[0]))
        pools.append(mine)
    width = max((len(p) for p in pools), default=0)
    candidates = np.full((len(doc_ids), width), -1, dtype=np.int64)
    raw = np.full((len(doc_ids), width), -np.inf)
    for i, pool in enumerate(pools):
        for j, (pos, value) in enumerate(pool):
            candidates[i, j], raw[i, j] = pos, (-value if kind == "rank" else value)
    if kind == "probability":
        raw = np.where(np.isfinite(raw), raw, 0.0)
        total = raw.sum(axis=1, keepdims=True)
        weights = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
    elif kind == "score":
        weights = softmax_rows(raw, temperature) if width else raw.copy()
    else:
        weights = np.where(np.isfinite(raw), raw, 0.0)
    return universe, candidates, weights, np.array([len(p) for p in pools], dtype=np.int64)


@hst.composite
def tables(draw):
    n_docs, n_candidates = draw(hst.integers(1, 6)), draw(hst.integers(1, 9))
    pairs = draw(hst.lists(hst.tuples(hst.integers(0, n_docs - 1), hst.integers(0, n_candidates - 1)),
                           min_size=1, max_size=40, unique=True))
    ties = draw(hst.booleans())
    value = hst.sampled_from([1.0, 2.0, 3.0]) if ties else hst.floats(0, 5, allow_subnormal=False)
    values = draw(hst.lists(value, min_size=len(pairs), max_size=len(pairs)))
    if draw(hst.booleans()):  # the table grouped by document, or not
        order = sorted(range(len(pairs)), key=lambda i: pairs[i][0])
        pairs, values = [pairs[i] for i in order], [values[i] for i in order]
    rows = [(f"d{d}", f"c{c}", v) for (d, c), v in zip(pairs, values)]
    registry_ids = draw(hst.lists(hst.sampled_from([f"c{c}" for c in range(n_candidates + 2)]), unique=True,
                                  min_size=1))
    asked = draw(hst.lists(hst.sampled_from([f"d{d}" for d in range(n_docs + 2)]), min_size=1, max_size=10))
    return rows, registry_ids, asked


@pytest.mark.parametrize("dense", [None, True, False])
@pytest.mark.parametrize("kind", ["probability", "score", "rank"])
def test_the_same_as_document_by_document(kind, dense, monkeypatch):
    if dense is not None:
        monkeypatch.setattr(imported, "DENSE", 10**9 if dense else 0)
    monkeypatch.setattr(imported, "ROWS_AT_ONCE", 2)

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(tables())
    def check(table):
        rows, registry_ids, asked = table
        if kind == "rank":
            rows = [(d, c, float(math.floor(v) + 1)) for d, c, v in rows]
        data = (SCORES_HEADER + "".join(f"{d},{c},{v!r}\n" for d, c, v in rows)).encode()
        attacker = load_candidate_scores(data, kind=kind, name="s.csv", temperature=0.7)
        registry_file = load_registry(("identity_id\n" + "\n".join(registry_ids) + "\n").encode(), name="r.csv")
        table = attacker.attack(asked, [""] * len(asked), registry_file, LEVEL)
        universe, candidates, weights, sizes = reference(rows, asked, registry_ids, kind, 0.7)
        assert table.candidate_ids.tolist() == universe
        assert np.array_equal(table.candidates, candidates) and table.candidates.dtype == np.int64
        assert np.array_equal(table.weights, weights)  # bitwise: the same operations on the same matrix
        assert np.array_equal(table.pool_sizes, sizes) and table.pool_sizes.dtype == np.int64
        assert table.doc_ids.tolist() == asked

    check()


def test_similarities_for_documents_without_rows(registry):
    table = attack(scores("d1,a,2\n", kind="score"), registry, ["ghost", "other"])
    assert table.weights.shape == (2, 0) and table.pool_sizes.tolist() == [0, 0]


def test_ranked_pools_by_hand():
    """Ties in candidate order; a document asked twice, one without rows; both ways of filling the matrices."""
    attacker = load_candidate_scores(b"doc_id,candidate_id,score\nd2,x,1\nd1,b,2\nd1,a,2\nd2,a,3\nd1,x,5\n",
                                     name="s.csv")
    position = {"a": 0, "b": 1, "x": 2}
    said = []
    for dense in (True, False):
        candidates, signed, sizes = ranked_pools(attacker.scores, ["d1", "ghost", "d2", "d1"], position, 3,
                                                 progress=lambda *a: said.append(a), dense=dense)
        assert candidates.tolist() == [[2, 0, 1], [-1, -1, -1], [0, 2, -1], [2, 0, 1]]
        assert signed.tolist() == [[5, 2, 2], [-np.inf] * 3, [3, 1, -np.inf], [5, 2, 2]]
        assert sizes.tolist() == [3, 0, 2, 3]
        ranks, signed, _ = ranked_pools(attacker.scores, ["d1"], position, 3, ascending=True, dense=dense)
        assert ranks.tolist() == [[0, 1, 2]] and signed.tolist() == [[-2, -2, -5]]
    assert said[-1] == (4, 4, "reading imported candidate scores")
    none, signed, sizes = ranked_pools(attacker.scores, ["ghost"], position, 3)
    assert none.shape == (1, 0) and signed.shape == (1, 0) and sizes.tolist() == [0]


def test_a_large_table_is_built_without_a_python_loop_per_row(registry):
    """200,000 rows (2,000 documents x 100 candidates, 96 outside the registry): well under a second each way."""
    import time

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"doc_id": np.repeat([f"d{i}" for i in range(2000)], 100),
                          "candidate_id": np.tile([f"c{i}" for i in range(96)] + ["a", "b", "c", "d"], 2000),
                          "score": rng.random(200_000)}).sample(frac=1, random_state=1)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    started = time.perf_counter()
    attacker = load_candidate_scores(buffer.getvalue(), name="s.parquet", kind="score")
    table = attack(attacker, registry, [f"d{i}" for i in range(2000)])
    assert time.perf_counter() - started < 5  # the row-by-row reading took about 12 s
    assert table.width == 100 and (table.pool_sizes == 100).all() and len(table.candidate_ids) == 100
    assert (np.diff(table.weights, axis=1) <= 0).all()
