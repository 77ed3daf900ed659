"""Venn-Abers probabilities: hand-computed cases, brute force against scikit-learn's isotonic regression on the
individual pairs, leave-one-out for calibration documents, and calibration on withheld labels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression

from cpa_core.conformal.venn_abers import LEVELS, isotonic_at, level_cuts, statistic_levels, venn_abers


def test_hand_computed():
    # calibration: level 0 a miss, level 1 a hit; a new document at level 1
    out = venn_abers(np.array([0, 1, 1]), np.array([0, 1, 0], dtype=bool), np.array([True, True, False]))
    assert out.low[2] == pytest.approx(0.5) and out.high[2] == pytest.approx(1.0)
    assert out.p[2] == pytest.approx(2 / 3)
    # a calibration document is predicted without its own pair: the level-1 hit sees only the level-0 miss
    assert out.low[1] == pytest.approx(0.0) and out.high[1] == pytest.approx(1.0) and out.p[1] == pytest.approx(0.5)


@pytest.mark.parametrize("n, cuts", [
    # N = 25: the j-th cut is the ceil(j / 2)-th smallest: 1, 1, 2, 2, ..., 25 -> every value its own level
    (25, list(range(1, 26))),
    # N = 50: the j-th cut is the j-th smallest, 49 cuts (floating point gave 46, from the 8th up one too high)
    (50, list(range(1, 50))),
    # N = 75: ceil(1.5 j): 2, 3, 5, 6, 8, 9, ..., 21 (j = 14), 23, 24, ..., 72, 74
    (75, sorted({-(-3 * j // 2) for j in range(1, 50)})),
    (100, list(range(2, 100, 2))),  # the (2j)-th smallest
    (51, sorted({-(-51 * j // 50) for j in range(1, 50)})),  # ceil(1.02 j): 2, 3, ..., 49, 50
])
def test_levels_cut_at_the_intended_order_statistic(n, cuts):
    """The j-th of the 49 inner cuts of the 50 levels is the ceil(N j / 50)-th smallest value (hand-worked at N = 25, 50,
    75, 100, 51 with values 1..N, so the k-th smallest is k); a value equal to a cut stays below it."""
    values = np.random.default_rng(n).permutation(np.arange(1.0, n + 1))
    assert LEVELS == 50 and level_cuts(values).tolist() == cuts
    levels = statistic_levels(values)  # a level holds the values above the previous cut up to its own
    assert np.bincount(levels, minlength=len(cuts) + 1).tolist() == np.diff([0, *cuts, n]).tolist()


def test_pool_adjacent_violators_hand_computed():
    hits, totals = np.array([1.0, 0.0, 3.0]), np.array([1.0, 1.0, 4.0])  # rates 1, 0, .75: the first two pool
    assert isotonic_at(hits, totals, 0) == pytest.approx(0.5) and isotonic_at(hits, totals, 1) == pytest.approx(0.5)
    assert isotonic_at(hits, totals, 2) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        isotonic_at(hits, np.array([1.0, 1.0, 0.0]), 2)  # a level beyond every weighted one


def _brute(levels, events, calibrating, row):
    """Isotonic regression (scikit-learn) on the other calibration pairs plus this one labelled 0, then 1."""
    others = calibrating.copy()
    others[row] = False
    out = []
    for label in (0, 1):
        x = np.append(levels[others], levels[row]).astype(float)
        y = np.append(events[others], label).astype(float)
        out.append(float(IsotonicRegression(increasing=True).fit(x, y).predict([float(levels[row])])[0]))
    return out


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_brute_force_against_isotonic_regression_on_the_pairs(triples):
    levels = np.array([t[0] for t in triples])
    events = np.array([t[1] for t in triples], dtype=bool)
    calibrating = np.array([t[2] for t in triples], dtype=bool)
    out = venn_abers(levels, events, calibrating)
    for row in range(len(triples)):
        low, high = _brute(levels, events, calibrating, row)
        assert out.low[row] == pytest.approx(low, abs=1e-12) and out.high[row] == pytest.approx(high, abs=1e-12)
        assert 0 <= out.low[row] <= out.p[row] <= out.high[row] <= 1


def test_levels_are_quantiles_over_every_document():
    assert statistic_levels(np.arange(100.0), levels=4).tolist() == [0] * 25 + [1] * 25 + [2] * 25 + [3] * 25
    assert statistic_levels(np.zeros(7)).tolist() == [0] * 7
    assert statistic_levels(np.zeros(0)).tolist() == []


def test_the_probability_is_calibrated_on_documents_whose_labels_were_withheld():
    """A statistic that raises the chance of the event: over many documents whose labels are withheld, the observed
    rate in each decile of the predicted probability is the predicted one, within sampling error."""
    rng = np.random.default_rng(0)
    n = 20_000
    statistic = rng.random(n)
    truth_probability = statistic ** 2
    events = rng.random(n) < truth_probability
    calibrating = rng.random(n) < 0.5
    predicted = venn_abers(statistic_levels(statistic), events, calibrating).p
    withheld = ~calibrating
    deciles = np.quantile(predicted[withheld], np.linspace(0, 1, 11))
    codes = np.clip(np.searchsorted(deciles, predicted[withheld], side="right") - 1, 0, 9)
    for d in range(10):
        inside = codes == d
        if inside.sum() < 200:
            continue
        observed, expected = events[withheld][inside].mean(), predicted[withheld][inside].mean()
        standard_error = np.sqrt(max(expected * (1 - expected), 1e-3) / inside.sum())
        assert abs(observed - expected) < 4 * standard_error + 0.02, (d, observed, expected)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans(), st.booleans()), min_size=1, max_size=40),
       st.lists(st.floats(-0.5, 1.5), min_size=1, max_size=5))
def test_the_stored_model_places_a_new_document_as_the_fit_places_a_non_calibrating_one(triples, new):
    """A new document (an edited text) at some certainty gets the pair :func:`venn_abers` gives a non-calibrating
    document at the same level, among the same calibration documents."""
    from cpa_core.conformal.venn_abers import VennAbersModel, level_cuts, level_of

    statistic = np.array([t[0] for t in triples])
    events = np.array([t[1] for t in triples], dtype=bool)
    calibrating = np.array([t[2] for t in triples], dtype=bool)
    model = VennAbersModel.fit(statistic, events, calibrating, levels=5)
    predicted = model.predict(np.array(new))
    cuts = level_cuts(statistic, 5)
    levels = np.append(level_of(cuts, statistic), level_of(cuts, np.array(new)))
    with_new = venn_abers(levels, np.append(events, np.zeros(len(new), dtype=bool)),
                          np.append(calibrating, np.zeros(len(new), dtype=bool)))
    n = len(triples)
    assert predicted.low == pytest.approx(with_new.low[n:], abs=1e-12)
    assert predicted.high == pytest.approx(with_new.high[n:], abs=1e-12)
    assert np.array_equal(levels[:n], statistic_levels(statistic, 5))  # the same levels as the audit's


def test_cross_venn_abers_hand_computed():
    """Two folds of two calibration documents each, one document that does not calibrate (the last)."""
    from cpa_core.conformal.venn_abers import cross_venn_abers

    events = np.array([0, 1, 0, 1, 0], dtype=bool)
    folds = np.array([0, 0, 1, 1, -1])
    # fold 0's statistic puts its miss at level 0 and its hit at level 1; fold 1's puts both at level 0
    levels = [np.array([0, 1, 1, 0, 1]), np.array([1, 0, 0, 0, 0])]
    out = cross_venn_abers(levels, events, folds)
    # the new document: fold 0 at level 1 -> (0.5, 1); fold 1 at level 0 beside a miss and a hit -> (1/3, 2/3)
    low = 1 - np.sqrt((1 - 0.5) * (1 - 1 / 3))
    high = np.sqrt(1.0 * 2 / 3)
    assert out.low[4] == pytest.approx(low) and out.high[4] == pytest.approx(high)
    assert out.p[4] == pytest.approx(np.sqrt(2 / 3) / (np.sqrt(0.5 * 2 / 3) + np.sqrt(2 / 3)))
    # a calibration document takes its own fold's pair alone, without its own label: fold 0's hit sees the miss
    assert (out.low[1], out.high[1]) == pytest.approx((0.0, 1.0))
    # fold 1's miss sees fold 1's hit at its own level 0: with itself labelled 0, 1/2; labelled 1, 1
    assert (out.low[2], out.high[2]) == pytest.approx((0.5, 1.0))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_cross_venn_abers_with_one_fold_is_the_inductive_predictor(triples):
    from cpa_core.conformal.venn_abers import cross_venn_abers

    levels = np.array([t[0] for t in triples])
    events = np.array([t[1] for t in triples], dtype=bool)
    calibrating = np.array([t[2] for t in triples], dtype=bool)
    one = cross_venn_abers([levels], events, np.where(calibrating, 0, -1))
    single = venn_abers(levels, events, calibrating)
    assert one.low == pytest.approx(single.low, abs=1e-12) and one.high == pytest.approx(single.high, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.booleans(), st.integers(-1, 1)), min_size=1,
                max_size=40),
       st.lists(st.tuples(st.floats(-0.5, 1.5), st.floats(-0.5, 1.5)), min_size=1, max_size=5))
def test_the_stored_cross_model_places_a_new_document_as_the_fit_places_a_non_calibrating_one(rows, new):
    """Two folds, each with its own statistic: a new document gets the merged pair a document that does not calibrate
    gets, and never less than the floor."""
    from cpa_core.conformal.venn_abers import CrossVennAbersModel, VennAbersModel, cross_venn_abers, level_of

    statistics = [np.array([r[0] for r in rows]), np.array([r[1] for r in rows])]
    events = np.array([r[2] for r in rows], dtype=bool)
    folds = np.array([r[3] for r in rows])
    models = tuple(VennAbersModel.fit(s, events, folds == k, levels=5) for k, s in enumerate(statistics))
    fresh = [np.array([x[k] for x in new]) for k in range(2)]
    predicted = CrossVennAbersModel(models).predict(fresh)
    levels = [np.append(level_of(m.cuts, s), level_of(m.cuts, f)) for m, s, f in zip(models, statistics, fresh)]
    with_new = cross_venn_abers(levels, np.append(events, np.zeros(len(new), dtype=bool)),
                                np.append(folds, -np.ones(len(new), dtype=int)))
    n = len(rows)
    assert predicted.low == pytest.approx(with_new.low[n:], abs=1e-12)
    assert predicted.high == pytest.approx(with_new.high[n:], abs=1e-12)
    assert (predicted.p >= CrossVennAbersModel(models).floor - 1e-12).all()
