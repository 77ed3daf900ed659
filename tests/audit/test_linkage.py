"""The linkage probability: the label-free description of an attack (hand-computed), the fit that never reads a
document's own label, the small-calibration fallback to the certainty, and a release where the certainty cannot tell
documents apart but the description can."""

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from tables import hub_release, table_from_matrix

from cpa_core.attack.candidates import CandidateTable
from cpa_core.audit.linkage import (
    FEATURES,
    MIN_CALIBRATING,
    NEIGHBOUR_STATISTICS,
    NEIGHBOURS,
    PEER_DEPTH,
    PEER_FEATURES,
    Neighbourhood,
    ReleaseContext,
    ReleaseTexts,
    attack_features,
    feature_names,
    fit_linkage,
    peer_features,
)
from cpa_core.audit.stratification import certainty
from cpa_core.conformal.venn_abers import statistic_levels, venn_abers


def toy():
    """Three documents over three candidates; d0 and d1 both guess p0 first."""
    weights = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.7, 0.2, 0.1]])
    candidates = np.array([[0, 1, 2], [0, 2, 1], [2, 1, 0]])
    return CandidateTable(np.array(["d0", "d1", "d2"], dtype=object), candidates, weights, np.full(3, 3),
                          np.array(["p0", "p1", "p2"], dtype=object), ("abc", "a", "abcdefg"))


def test_the_description_of_the_attack_hand_computed():
    table = toy()
    features = dict(zip(FEATURES, attack_features(table, ReleaseContext.of([table])).T))
    assert features["certainty"] == pytest.approx([0.3, 0.1, 0.5])
    assert features["first_weight"] == pytest.approx([0.6, 0.5, 0.7])
    assert features["log_ratio"] == pytest.approx([math.log(2), math.log(1.25), math.log(3.5)])
    assert features["second_gap"] == pytest.approx([0.2, 0.3, 0.1])
    entropy = [-sum(w * math.log(w) for w in row) for row in table.weights]
    assert features["entropy"] == pytest.approx(entropy)
    assert features["first_guess_of"].tolist() == [2, 2, 1]  # p0 is the first guess of d0 and d1
    assert features["shortlisted_by"].tolist() == [3, 3, 3]  # every candidate is on every shortlist of five
    # claims on p0: 0.6 (d0), 0.5 (d1), 0.1 (d2); on p2: 0.7 (d2), 0.4 (d1), 0.1 (d0)
    assert features["stronger_claims"].tolist() == [0, 1, 0]
    assert features["below_strongest"] == pytest.approx([0.0, -0.1, 0.0])
    assert features["local_scaling"] == pytest.approx([1.2 - 0.4, 1.0 - 0.4, 1.4 - 0.4])
    assert features["characters"] == pytest.approx(np.log1p([3, 1, 7]))


def test_a_new_document_is_described_against_the_release():
    """An edited text attacked again: its first candidate's standing is read from the release's context, by id
    (its table may list the candidates in another order)."""
    release = toy()
    context = ReleaseContext.of([release])
    edited = CandidateTable(np.array(["d0"], dtype=object), np.array([[1, 0, 2]]), np.array([[0.55, 0.25, 0.2]]),
                            np.array([3]), np.array(["p2", "p0", "p1"], dtype=object), ("ab",))
    features = dict(zip(FEATURES, attack_features(edited, context)[0]))
    assert features["first_guess_of"] == 2 and features["stronger_claims"] == 1  # p0: d0's 0.6 is above 0.55
    assert features["below_strongest"] == pytest.approx(-0.05)


def neighbour_release():
    """Five documents: d0 and d1 read alike, so do d2 and d3 (cosine 1 within a pair, 0 across); d4 shares no word
    with any. d0 and d1 guess p0 first; d2 guesses p1, d3 p2 (with 0.3 on p1)."""
    weights = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.8, 0.1, 0.1]])
    candidates = np.array([[0, 1, 2], [0, 2, 1], [1, 0, 2], [2, 1, 0], [0, 1, 2]])
    texts = ("apple banana", "banana apple", "cherry durian", "durian cherry durian cherry", "zebra")
    return CandidateTable(np.array(["d0", "d1", "d2", "d3", "d4"], dtype=object), candidates, weights, np.full(5, 3),
                          np.array(["p0", "p1", "p2"], dtype=object), texts)


def test_what_a_documents_nearest_documents_make_of_its_first_guess_hand_computed():
    table = neighbour_release()
    features = dict(zip(FEATURES, attack_features(table, ReleaseContext.of([table])).T))
    nan = float("nan")
    # d0's one neighbour is d1 (cosine 1), which also guesses p0 first, with weight 0.5
    # d2 and d3 neighbour each other: d3 guesses p2 first but gives p1 0.3, d2 gives p2 0.1; d4 has no neighbour
    assert features["neighbours_agreeing"] == pytest.approx([1, 1, 0, 0, nan], nan_ok=True)
    assert features["agreeing_similarity"] == pytest.approx([1, 1, 0, 0, nan], nan_ok=True)
    assert features["neighbours_weight"] == pytest.approx([0.5, 0.6, 0.3, 0.1, nan], nan_ok=True)
    assert features["nearest_similarity"] == pytest.approx([1, 1, 1, 1, nan], nan_ok=True)
    assert features["neighbour_similarity"] == pytest.approx([1, 1, 1, 1, nan], nan_ok=True)


def test_what_a_first_stage_says_of_the_neighbours_and_claimants_hand_computed():
    table = neighbour_release()  # first guesses: d0 p0, d1 p0, d2 p1, d3 p2, d4 p0
    context = ReleaseContext.of([table])
    near = context.neighbourhood(table)
    assert near.agreeing.any(axis=1).tolist() == [True, True, False, False, False]
    first_stage = np.array([2.0, -1.0, 5.0, 7.0, 9.0])  # by release row
    said = dict(zip(NEIGHBOUR_STATISTICS, near.statistics(first_stage).T))
    s = {row: 1 / (1 + math.exp(-value)) for row, value in enumerate(first_stage)}
    # d0's one agreeing neighbour is d1 (cosine 1) and d1's is d0; d2 and d3 disagree, d4 has no neighbour
    assert said["nearest_first_stage_highest"] == pytest.approx([s[1], s[0], 0, 0, 0])
    assert said["nearest_first_stage_weighted"] == pytest.approx([s[1], s[0], 0, 0, 0])
    # p0 is the first guess of d0, d1 and d4, each of whose claimants are the two others; p1 and p2 have one each
    assert said["claimants_first_stage_highest"] == pytest.approx([s[4], s[4], 0, 0, s[0]])
    assert said["claimants_first_stage_sum"] == pytest.approx([s[1] + s[4], s[0] + s[4], 0, 0, s[0] + s[1]])
    # a new document falling on p0 is claimed beside all three; d4 edited to fall on p1 beside d2 (its original,
    # which fell on p0, is never its own claimant)
    new = CandidateTable(np.array(["new", "d4"], dtype=object), np.array([[0, 1, 2], [1, 0, 2]]),
                         np.array([[0.6, 0.3, 0.1], [0.5, 0.3, 0.2]]), np.full(2, 3), table.candidate_ids,
                         ("zebra", "zebra"))
    said = context.neighbourhood(new).statistics(first_stage)
    assert said[:, 2:] == pytest.approx(np.array([[s[4], s[0] + s[1] + s[4]], [s[2], s[2]]]))


def test_an_edited_text_never_finds_its_own_original_among_its_neighbours():
    table = neighbour_release()
    texts = ReleaseTexts.of(tuple(table.queries), tuple(table.doc_ids))
    rows, similarities = texts.nearest(["apple banana"], ["d0"])
    assert rows[0].tolist() == [1] + [-1] * (NEIGHBOURS - 1)
    assert similarities[0, 0] == pytest.approx(1.0)
    rows, _ = texts.nearest(["apple banana"], ["a new document"])
    assert rows[0, :3].tolist() == [0, 1, -1]  # a tie goes to the lower row


def test_a_release_without_shared_words_has_no_neighbours():
    table = neighbour_release()
    assert ReleaseTexts.of(("one", "two", "three"), ("a", "b", "c")) is None  # no word in two texts
    lone = CandidateTable(table.doc_ids[:1], table.candidates[:1], table.weights[:1], table.pool_sizes[:1],
                          table.candidate_ids)  # no texts recorded
    features = attack_features(lone, ReleaseContext.of([lone]))
    assert np.isnan(features[:, FEATURES.index("neighbours_agreeing"):]).all()


def test_the_nearest_documents_are_the_brute_force_ones_alone_or_together_on_any_number_of_cores(monkeypatch):
    """Against cosines computed densely, wherever the tenth and eleventh similarities differ (a tie at the last
    place is the kernel's to break); each text searched alone finds what it finds among the others, on one core or
    two."""
    import cpa_core.audit.linkage as linkage

    rng = np.random.default_rng(3)
    vocabulary = [f"w{i}" for i in range(40)]
    texts = tuple(" ".join(rng.choice(vocabulary, size=rng.integers(2, 12))) for _ in range(120))
    ids = tuple(f"d{i}" for i in range(120))
    release = ReleaseTexts.of(texts, ids)
    rows, similarities = release.nearest(texts, ids)
    vectors = release.index.profiles_.toarray().astype(float)
    cosine = vectors @ vectors.T
    checked = 0
    for i in range(len(texts)):
        others = [(-cosine[i, j], j) for j in range(len(texts)) if j != i and cosine[i, j] > 0]
        others.sort()
        if len(others) > NEIGHBOURS and math.isclose(others[NEIGHBOURS - 1][0], others[NEIGHBOURS][0], rel_tol=1e-5):
            continue
        expected = [j for _, j in others[:NEIGHBOURS]]
        assert [r for r in rows[i] if r >= 0] == expected
        assert similarities[i, :len(expected)] == pytest.approx(cosine[i, expected], rel=1e-5)
        checked += 1
    assert checked > 100
    for threads in (1, 2):
        monkeypatch.setattr(linkage, "kernel_threads", lambda: threads)
        for i in (0, 57, 119):
            alone, _ = release.nearest([texts[i]], [ids[i]])
            assert alone[0].tolist() == rows[i].tolist()
        fresh = ReleaseTexts(texts, ids, release.index)  # no cached search of the release's own texts
        assert fresh.nearest(list(texts), list(ids))[0].tolist() == rows.tolist()


def test_ranks_and_empty_pools_give_missing_features_not_errors():
    weights = np.array([[-1.0, -2.0], [-1.0, -2.0]])
    table = CandidateTable(np.array(["d0", "d1"], dtype=object), np.array([[0, 1], [-1, -1]]), weights,
                           np.array([2, 0]), np.array(["p0", "p1"], dtype=object), weight_kind="rank")
    features = attack_features(table, ReleaseContext.of([table]))
    assert features.shape == (2, len(FEATURES))
    assert np.isnan(features[1, 1:]).all() and features[1, 0] == 0.0  # an empty pool: certainty 0, nothing else
    assert np.isnan(features[:, FEATURES.index("log_ratio")]).all()  # ratios of ranks mean nothing


def test_too_few_calibrating_documents_calibrate_the_certainty_alone():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.full(8, 0.3), size=60)
    table = table_from_matrix(probabilities)
    events = rng.random(60) < 0.5
    calibrating = rng.random(60) < 0.7
    fit, model = fit_linkage([table], events, calibrating, seed=0)
    expected = venn_abers(statistic_levels(certainty(table)), events, calibrating)
    assert fit.low == pytest.approx(expected.low) and fit.high == pytest.approx(expected.high)
    assert model.describe()["method"] == "inductive Venn-Abers"
    assert model.predict(table).p[~calibrating] == pytest.approx(fit.p[~calibrating])


def test_the_description_tells_apart_what_the_certainty_cannot():
    table, _, linked = hub_release(1)
    calibrating = np.random.default_rng(2).random(linked.size) < 0.6
    fit, model = fit_linkage([table], linked, calibrating, seed=3)
    withheld = ~calibrating
    assert model.describe()["method"] == "cross Venn-Abers"
    assert roc_auc_score(linked[withheld], certainty(table)[withheld]) < 0.6
    assert roc_auc_score(linked[withheld], fit.p[withheld]) > 0.95
    assert fit.p[withheld & ~linked].max() < 0.1  # a document nobody can place reads near chance


def test_no_probability_reads_its_own_label():
    """Flipping a calibrating document's label changes other documents' probabilities, never its own."""
    table, _, linked = hub_release(4, n=900)
    calibrating = np.arange(linked.size) % 3 != 0
    assert calibrating.sum() >= MIN_CALIBRATING
    fit, model = fit_linkage([table], linked, calibrating, seed=5)
    assert model.describe()["method"] == "cross Venn-Abers"
    for row in np.flatnonzero(calibrating)[:6]:
        flipped = linked.copy()
        flipped[row] = not flipped[row]
        again, _ = fit_linkage([table], flipped, calibrating, seed=5)
        assert (again.low[row], again.high[row]) == (fit.low[row], fit.high[row])
    assert not np.allclose(again.p, fit.p)  # the label is read, by the others


def test_the_stored_fit_places_a_document_that_does_not_calibrate_where_the_fit_did():
    table, _, linked = hub_release(6, n=1000)
    calibrating = np.random.default_rng(7).random(linked.size) < 0.6
    fit, model = fit_linkage([table], linked, calibrating, seed=8)
    assert model.describe()["method"] == "cross Venn-Abers"
    predicted = model.predict(table)
    assert predicted.low[~calibrating] == pytest.approx(fit.low[~calibrating])
    assert predicted.high[~calibrating] == pytest.approx(fit.high[~calibrating])
    assert predicted.p.min() >= model.floor - 1e-12


def test_what_a_peer_makes_of_the_first_guess_hand_computed():
    """The peer lists its candidates in another order (matched by id); d2's first guess p2 is not in its pool."""
    table = toy()  # first guesses: d0 p0, d1 p0, d2 p2
    peer = CandidateTable(np.array(["d0", "d1", "d2"], dtype=object), np.array([[1, 0, 2], [0, 2, 1], [2, 1, -1]]),
                          np.array([[0.5, 0.3, 0.2], [0.8, 0.1, 0.1], [0.4, 0.35, 0.0]]), np.array([3, 3, 2]),
                          np.array(["p2", "p0", "p1"], dtype=object))
    features = dict(zip(PEER_FEATURES, peer_features(table, [peer]).T))
    assert features["rank_of_first_guess"] == pytest.approx(np.log([1, 3, PEER_DEPTH + 1]))
    assert features["weight_on_first_guess"] == pytest.approx([0.5, 0.1, 0.0])
    below = features["below_its_first"]
    assert below[:2] == pytest.approx([0.0, 0.7]) and np.isnan(below[2])
    assert features["certainty"] == pytest.approx([0.2, 0.7, 0.05])
    both = attack_features(table, ReleaseContext.of([table]), [peer, peer])
    assert both.shape == (3, len(feature_names(("a", "b")))) == (3, len(FEATURES) + 2 * len(PEER_FEATURES))
    assert feature_names(("a",))[len(FEATURES):] == [f"a:{name}" for name in PEER_FEATURES]
    with pytest.raises(ValueError, match="2 documents"):
        peer_features(table, [peer.rows([0, 1])])


def peer_release(seed: int, n: int = 1000, m: int = 300):
    """Half the documents are placed on their subject by the member, the other half on someone else, with the same
    spread of margins and no hub: the member's attack alone cannot tell them apart. A peer always places the
    subject first: it agrees with the member exactly where the member is right. Returns the member's table, the
    peer's and whether the member's first guess is the subject."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, m, size=n)
    right = rng.random(n) < 0.5
    wrong = (truth + rng.integers(1, m, size=n)) % m

    def attack(top):
        probabilities = rng.dirichlet(np.full(m, 0.5), size=n) * 0.2
        probabilities[np.arange(n), top] += rng.uniform(0.1, 0.8, size=n)
        return table_from_matrix(probabilities / probabilities.sum(axis=1, keepdims=True))
    member, peer = attack(np.where(right, truth, wrong)), attack(truth)
    return member, peer, member.candidates[:, 0] == truth


def test_a_peer_tells_apart_what_the_member_alone_cannot():
    member, peer, linked = peer_release(9)
    calibrating = np.random.default_rng(10).random(linked.size) < 0.6
    withheld = ~calibrating
    alone, _ = fit_linkage([member], linked, calibrating, seed=11)
    fit, model = fit_linkage([member], linked, calibrating, seed=11, peers=[("peer", [peer])])
    assert roc_auc_score(linked[withheld], alone.p[withheld]) < 0.65
    assert roc_auc_score(linked[withheld], fit.p[withheld]) > 0.95
    assert model.peers == ("peer",) and model.describe()["peers"] == ["peer"]
    assert model.describe()["features"] == [*feature_names(("peer",)), *NEIGHBOUR_STATISTICS]
    predicted = model.predict(member, [peer])  # an edited text is read with its peers' attacks of it
    assert predicted.low[withheld] == pytest.approx(fit.low[withheld])
    assert predicted.high[withheld] == pytest.approx(fit.high[withheld])
    with pytest.raises(ValueError, match="1 peers"):
        model.predict(member)


def pair_release(seed: int, pairs: int = 500):
    """Documents in pairs that read alike and guess the same first candidate, their subject in half the pairs (no
    two pairs guess the same candidate; ``2 * pairs`` candidates).
    The first of a pair shows it in the shape of its weights (its third weight close to its second when the guess
    is wrong); the second's weights, and every margin and weight on the shared first guess, are alike either way:
    only what is learned of its neighbour tells its pair apart. Returns the table, whether each first guess is the
    subject, and which documents are the second of their pair."""
    rng = np.random.default_rng(seed)
    n = 2 * pairs
    right = np.repeat(rng.random(pairs) < 0.5, 2)
    second = np.arange(n) % 2 == 1
    m = 2 * pairs
    truth = np.repeat(rng.permutation(pairs), 2)
    guess = np.where(right, truth, truth + pairs)
    probabilities = np.zeros((n, m))
    rows = np.arange(n)
    others = (guess[:, None] + 1 + np.argsort(rng.random((n, m - 1)), axis=1)) % m
    first = np.repeat(rng.uniform(0.35, 0.45, size=pairs), 2)
    third = np.where(second, rng.uniform(0.02, 0.19, size=n), np.where(right, 0.02, 0.19))
    probabilities[rows, guess] = first
    probabilities[rows, others[:, 0]] = 0.2
    probabilities[rows, others[:, 1]] = third
    rest = (1 - first - 0.2 - third) / (m - 3)
    probabilities[rows[:, None], others[:, 2:]] = rest[:, None]
    table = table_from_matrix(probabilities)
    table = CandidateTable(table.doc_ids, table.candidates, table.weights, table.pool_sizes, table.candidate_ids,
                           tuple(f"pair{i // 2}a pair{i // 2}b" for i in range(n)))
    return table, table.candidates[:, 0] == truth, second


def test_what_is_learned_of_the_neighbours_tells_apart_what_the_document_alone_cannot(monkeypatch):
    """The second document of a pair is told apart only through its neighbour's first-stage statistic: as its nearest
    document, and as its claimant (with no texts)."""
    table, linked, second = pair_release(12)
    calibrating = np.random.default_rng(13).random(linked.size) < 0.6
    withheld = ~calibrating & second
    fit, model = fit_linkage([table], linked, calibrating, seed=14)
    assert model.describe()["features"][-len(NEIGHBOUR_STATISTICS):] == list(NEIGHBOUR_STATISTICS)
    assert len(model.first_stage) == len(model.scorers)
    assert roc_auc_score(linked[withheld], fit.p[withheld]) > 0.9
    predicted = model.predict(table)  # the stored fit reads the stored first stage of the neighbours
    assert predicted.low[~calibrating] == pytest.approx(fit.low[~calibrating])
    assert predicted.high[~calibrating] == pytest.approx(fit.high[~calibrating])
    textless = CandidateTable(table.doc_ids, table.candidates, table.weights, table.pool_sizes, table.candidate_ids)
    claimed, _ = fit_linkage([textless], linked, calibrating, seed=14)
    assert roc_auc_score(linked[withheld], claimed.p[withheld]) > 0.8
    with monkeypatch.context() as patched:  # the first stage unread: nothing else tells the second documents apart
        patched.setattr(Neighbourhood, "statistics", lambda near, first: np.zeros((near.rows.shape[0], 4)))
        alone, _ = fit_linkage([table], linked, calibrating, seed=14)
    assert roc_auc_score(linked[withheld], alone.p[withheld]) < 0.65


def test_no_probability_reads_its_own_label_through_its_neighbours():
    """A document's label trains the first stage its calibration fold never reads: flipping it leaves its own
    probability as it was, its neighbour's changes."""
    table, linked, _ = pair_release(15, pairs=300)
    calibrating = np.arange(linked.size) % 5 != 0
    fit, _ = fit_linkage([table], linked, calibrating, seed=16)
    for row in np.flatnonzero(calibrating)[:4]:
        flipped = linked.copy()
        flipped[row] = not flipped[row]
        again, _ = fit_linkage([table], flipped, calibrating, seed=16)
        assert (again.low[row], again.high[row]) == (fit.low[row], fit.high[row])
    assert not np.allclose(again.p, fit.p)


@pytest.mark.parametrize("seed", range(5))
def test_the_claimants_are_the_brute_force_ones(seed):
    """Random first guesses with ties in the statistic; new documents, edits of release documents (their original
    never a claimant) and release documents themselves."""
    rng = np.random.default_rng(seed)
    n, m = 40, 6
    weights = rng.dirichlet(np.ones(m), size=n)
    weights[rng.random(n) < 0.2, :] = 1 / m  # rows whose ranking is a tie; some without a first guess below
    table = table_from_matrix(weights)
    table.candidates[rng.random(n) < 0.1, :] = -1
    context = ReleaseContext.of([table])
    statistic = rng.choice([-1.0, 0.0, 0.5, 2.0], size=n)
    ids = np.array([f"d{i}" if rng.random() < 0.6 else f"new{i}" for i in rng.integers(0, n, size=30)], dtype=object)
    asked = CandidateTable(ids, rng.integers(-1, m, size=(30, 1)), np.ones((30, 1)), np.ones(30, dtype=np.int64),
                           table.candidate_ids)
    for read in (table, asked):
        said = context.neighbourhood(read).statistics(statistic)[:, 2:]
        names = np.asarray(read.candidate_ids).astype(str)
        release_names = np.asarray(table.candidate_ids).astype(str)
        for row in range(len(read.doc_ids)):
            first = read.candidates[row, 0]
            odds = [1 / (1 + math.exp(-statistic[r])) for r in range(n)
                    if first >= 0 and table.candidates[r, 0] >= 0 and table.doc_ids[r] != read.doc_ids[row]
                    and release_names[table.candidates[r, 0]] == names[first]]
            assert said[row] == pytest.approx([max(odds, default=0.0), sum(odds)])
