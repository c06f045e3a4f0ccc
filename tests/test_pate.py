"""PATE (dperm.algorithms.pate): vote counting, sensitivity, the aggregators' noise and
privacy claims checked against independent computations, calibration, utility, bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from dperm.accounting import compute_rdp, epsilon_spent
from dperm.accounting.events import (
    Composed,
    EpsilonDelta,
    Gaussian,
    Laplace,
    SelfComposed,
)
from dperm.algorithms import pate
from dperm.exceptions import (
    DpermError,
    InvalidDataError,
    InvalidPrivacyParameter,
    LabelError,
    PrivacyLeakWarning,
    UnknownNameError,
    UnsupportedEventError,
)


def _blobs(rng, n, n_classes=3, d=4, spread=1.0):
    centers = 3.0 * rng.standard_normal((n_classes, d))
    y = rng.integers(0, n_classes, n)
    X = centers[y] + spread * rng.standard_normal((n, d))
    return X, y


def _tree():
    return DecisionTreeClassifier(max_depth=3, random_state=0)


# ============================================================================ teachers and votes
def test_partition_is_a_random_partition_with_public_sizes():
    parts = pate.partition_indices(103, 10, 7)
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(103))  # disjoint, covering
    assert sorted({p.size for p in parts}) == [10, 11]
    again = pate.partition_indices(103, 10, 7)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    other = pate.partition_indices(103, 10, 8)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other, strict=True))


def test_vote_counting_equals_a_loop(rng):
    X, y = _blobs(rng, 120, n_classes=4, spread=2.5)
    teachers = pate.train_teachers(X, y, 7, teacher_factory=_tree, random_state=1)
    Xq = rng.standard_normal((50, 4)) * 3.0
    votes = pate.teacher_votes(teachers, Xq, classes=np.arange(4))
    loop = np.zeros((50, 4), dtype=np.int64)
    for t in teachers:
        p = t.predict(Xq)
        for i in range(50):
            loop[i, int(p[i])] += 1
    assert votes.dtype == np.int64 and votes.shape == (50, 4)
    assert np.array_equal(votes, loop)
    assert np.all(votes.sum(axis=1) == 7)
    # classes=None: the union of the teachers' classes_ (here all four)
    assert np.array_equal(pate.teacher_votes(teachers, Xq), loop)


def test_vote_counting_with_string_labels(rng):
    X, y = _blobs(rng, 90, n_classes=3)
    names = np.array(["cat", "dog", "emu"])[y]
    teachers = pate.train_teachers(X, names, 5, teacher_factory=_tree, random_state=0)
    Xq = X[:20]
    votes = pate.teacher_votes(teachers, Xq, classes=["emu", "cat", "dog"])  # sorted inside
    preds = np.stack([t.predict(Xq) for t in teachers])
    for j, c in enumerate(["cat", "dog", "emu"]):
        assert np.array_equal(votes[:, j], (preds == c).sum(axis=0))
    with pytest.raises(LabelError, match="outside classes"):
        pate.teacher_votes(teachers, Xq, classes=["cat", "dog"])


def test_single_class_teacher_votes_its_only_class(rng):
    """k = n: every part holds one record, so each teacher votes its own label on every
    query and the histogram is the label count, whatever the query."""
    X, y = _blobs(rng, 12, n_classes=3)
    teachers = pate.train_teachers(X, y, 12, random_state=0)  # default LR factory
    votes = pate.teacher_votes(teachers, rng.standard_normal((5, 4)), classes=np.arange(3))
    assert np.array_equal(votes, np.tile(np.bincount(y, minlength=3), (5, 1)))


@pytest.mark.parametrize("factory", [None, _tree], ids=["logreg", "tree"])
def test_sensitivity_one_record_moves_at_most_one_vote_per_query(factory):
    """Brute force [PATE-1]: replace one record (same partition, same position) → on every
    query the histograms differ by 0 or by e_b − e_a (≤ 1 in ≤ 2 bins; ℓ1 ≤ 2, ℓ2 ≤ √2),
    and only one teacher's predictions change."""
    n_changed = 0
    for trial in range(6 if factory is None else 25):
        rng = np.random.default_rng(100 + trial)
        X, y = _blobs(rng, 60, n_classes=3, spread=2.0)
        Xq = 3.0 * rng.standard_normal((80, 4))
        X2, y2 = X.copy(), y.copy()
        i = rng.integers(60)
        X2[i] = 3.0 * rng.standard_normal(4)
        y2[i] = (y[i] + 1 + rng.integers(2)) % 3
        t1 = pate.train_teachers(X, y, 6, teacher_factory=factory, random_state=trial)
        t2 = pate.train_teachers(X2, y2, 6, teacher_factory=factory, random_state=trial)
        p1 = np.stack([t.predict(Xq) for t in t1])
        p2 = np.stack([t.predict(Xq) for t in t2])
        assert (p1 != p2).any(axis=1).sum() <= 1
        diff = pate.teacher_votes(t2, Xq, np.arange(3)) - pate.teacher_votes(t1, Xq, np.arange(3))
        assert np.all(np.abs(diff) <= 1)
        assert np.all(np.abs(diff).sum(axis=1) <= 2)
        assert np.all(diff.sum(axis=1) == 0)
        assert np.all((diff == 1).sum(axis=1) == (diff == -1).sum(axis=1))
        n_changed += int(np.abs(diff).sum() > 0)
    assert n_changed > 0  # the check is not vacuous


# ============================================================================ GNMax / LNMax noise
def _argmax_probabilities(h, pdf, cdf):
    """P[argmax_j (h_j + Z_j) = j] by numerical integration, Z_j i.i.d. with pdf/cdf."""
    out = []
    for j in range(len(h)):

        def f(x, j=j):
            p = pdf(x - h[j])
            for i in range(len(h)):
                if i != j:
                    p *= cdf(x - h[i])
            return p

        lo, hi = min(h) - 60.0, max(h) + 60.0
        out.append(integrate.quad(f, lo, hi, points=sorted(set(h)), limit=200)[0])
    return np.array(out)


def _check_frequencies(labels, p, n_classes):
    counts = np.bincount(labels, minlength=n_classes)
    N = labels.size
    assert abs(p.sum() - 1.0) < 1e-6
    tol = 5.0 * np.sqrt(p * (1 - p) / N) + 1e-12  # 5 binomial standard deviations
    np.testing.assert_array_less(np.abs(counts / N - p), tol)


def test_gnmax_noise_is_gaussian_and_argmax_law_matches_integration():
    sigma, N = 2.0, 20000
    h = np.array([10.0, 9.0, 7.0, 3.0])
    votes = np.tile(h, (N, 1))
    labels, noisy = pate.gnmax(votes, sigma, np.random.default_rng(11), return_noisy_votes=True)
    assert np.array_equal(labels, np.argmax(noisy, axis=1))
    ks = stats.kstest(((noisy - votes) / sigma).ravel(), "norm")
    assert ks.pvalue > 1e-3
    p = _argmax_probabilities(h, lambda x: stats.norm.pdf(x, scale=sigma), stats.norm(0, sigma).cdf)
    _check_frequencies(labels, p, 4)


def test_lnmax_noise_is_laplace_and_argmax_law_matches_integration():
    b, N = 1.5, 20000
    h = np.array([6.0, 5.0, 2.0])
    votes = np.tile(h, (N, 1))
    labels, noisy = pate.lnmax(votes, b, np.random.default_rng(12), return_noisy_votes=True)
    assert np.array_equal(labels, np.argmax(noisy, axis=1))
    assert stats.kstest(((noisy - votes) / b).ravel(), "laplace").pvalue > 1e-3
    lap = stats.laplace(scale=b)
    p = _argmax_probabilities(h, lap.pdf, lap.cdf)
    _check_frequencies(labels, p, 3)


def _lap_diff_sf(t, b):
    """P[L₁ − L₂ > t] for i.i.d. Laplace(b): ½e^{−t/b}(1 + t/(2b)) for t ≥ 0."""
    t = np.asarray(t, dtype=float)
    pos = 0.5 * np.exp(-np.abs(t) / b) * (1 + np.abs(t) / (2 * b))
    return np.where(t >= 0, pos, 1.0 - pos)


def test_lnmax_per_query_epsilon_is_two_over_b_and_tight():
    """[PATE-3] exactly, two classes: P[label 0 | h] = P[L₁ − L₀ < n₀ − n₁]; a moved vote
    shifts the gap by 2.  The log-ratio never exceeds 2/b, approaches it far in the tail,
    and exceeds the monotone (Dwork–Roth add/remove) 1/b."""
    b = 1.0
    gaps = np.arange(-40, 41)
    # P[label 0] = P[L₁ − L₀ < g] = P[L₁ − L₀ > −g] (symmetry), P[label 1] = P[L₁ − L₀ > g];
    # moving one vote from class 0 to class 1 turns g into g − 2
    p0, p0_moved = _lap_diff_sf(-gaps, b), _lap_diff_sf(2 - gaps, b)
    p1, p1_moved = _lap_diff_sf(gaps, b), _lap_diff_sf(gaps - 2, b)
    log_ratios = np.concatenate([np.log(p0 / p0_moved), np.log(p1_moved / p1)])
    assert log_ratios.max() <= 2.0 / b + 1e-12
    assert log_ratios.max() > 0.9 * 2.0 / b
    assert log_ratios.max() > 1.0 / b
    # the event says the same: pure ε = 2/b per query, 2m/b for m queries
    assert epsilon_spent(pate.lnmax_event(b, 1), 0.0, "basic") == pytest.approx(2.0 / b)
    assert epsilon_spent(pate.lnmax_event(b, 7), 0.0, "basic") == pytest.approx(14.0 / b)
    # closed form vs integration
    x = 1.7
    num = integrate.quad(lambda u: stats.laplace.pdf(u) * stats.laplace.sf(u + x), -60, 60)[0]
    assert _lap_diff_sf(x, 1.0) == pytest.approx(num, rel=1e-7)


def test_gnmax_event_is_gaussian_with_sensitivity_sqrt2():
    """Proposition 8 of Papernot et al. 2018: RDP λ/σ² per query; the noise multiplier
    is σ/√2 rounded down (never claims more noise than is added)."""
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    for sigma in (0.7, 3.0, 40.0, 1e3 / 7):
        ev = pate.gnmax_event(sigma, 5)
        assert isinstance(ev, SelfComposed) and ev.count == 5
        z = ev.event.noise_multiplier
        assert 2 * Fraction(z) ** 2 <= Fraction(sigma) ** 2
        assert z == pytest.approx(sigma / math.sqrt(2), rel=1e-15)
        np.testing.assert_allclose(compute_rdp(ev.event, orders), orders / sigma**2, rtol=1e-12)
    ev = pate.confident_gnmax_event(5.0, 3.0, 4)
    assert ev == SelfComposed(Composed((Gaussian(5.0), pate.gnmax_event(3.0).event)), 4)


# ============================================================================ PTR
def _release_probability(d, eps0, delta0):
    """P[d + Lap(1/ε₀) > T], T = ln(1/(2δ₀))/ε₀ (independent of dperm's code)."""
    T = max(0.0, math.log(1 / (2 * delta0)) / eps0)
    return stats.laplace(scale=1 / eps0).sf(T - np.asarray(d, dtype=float))


def test_distance_to_instability_brute_force():
    """Over every histogram of k ≤ 7 votes in 3 classes: d = ⌈g/2⌉ − 1 has sensitivity 1
    under a moved vote, d ≥ 1 ⇒ the argmax of every neighbour is the same, and d + 1 is at
    most the number of moved votes needed to change the argmax (and at least half of it)."""

    def moves(h):
        for a, b in itertools.permutations(range(len(h)), 2):
            if h[a] > 0:
                g = list(h)
                g[a] -= 1
                g[b] += 1
                yield tuple(g)

    for k in range(1, 8):
        hs = [h for h in itertools.product(range(k + 1), repeat=3) if sum(h) == k]
        d = dict(zip(hs, pate.distance_to_instability(np.array(hs)), strict=True))
        for h in hs:
            top2 = sorted(h)[-2:]
            assert d[h] == math.ceil((top2[1] - top2[0]) / 2) - 1
            for g in moves(h):
                assert abs(int(d[h]) - int(d[g])) <= 1
                if d[h] >= 1:
                    assert np.argmax(g) == np.argmax(h)
            # breadth-first search: fewest moved votes that change the argmax
            frontier, seen, steps = {h}, {h}, 0
            while all(np.argmax(x) == np.argmax(h) for x in frontier):
                steps += 1
                frontier = {g for x in frontier for g in moves(x)} - seen
                seen |= frontier
            assert d[h] + 1 <= steps <= 2 * (d[h] + 1) + 1


def test_ptr_answers_on_huge_gap_and_abstains_on_a_tie():
    rng = np.random.default_rng(5)
    votes = np.tile([2, 500, 0], (5000, 1))
    assert np.all(pate.ptr_argmax(votes, 1.0, 1e-6, rng) == 1)
    tie = np.tile([250, 250, 3], (5000, 1))
    # release probability ½e^{−ε₀(T + 1)} = δ₀e^{−1}/1 ≈ 3.7e-7 per query
    assert np.all(pate.ptr_argmax(tie, 1.0, 1e-6, rng) == pate.ABSTAIN)


def test_ptr_release_probability_matches_laplace_tail():
    eps0, delta0, N = 1.0, 0.05, 20000
    rng = np.random.default_rng(6)
    for gap in range(0, 13):
        votes = np.tile([10 + gap, 10, 1], (N, 1))
        labels, dist = pate.ptr_argmax(votes, eps0, delta0, rng, return_distance=True)
        assert np.all(dist == math.ceil(gap / 2) - 1)
        assert set(np.unique(labels)) <= {0, pate.ABSTAIN}
        p = float(_release_probability(dist[0], eps0, delta0))
        freq = np.mean(labels == 0)
        assert abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / N) + 1e-9, (gap, freq, p)


def _ptr_output_law(h, eps0, delta0, T_shift=0.0):
    top2 = sorted(h)[-2:]
    d = math.ceil((top2[1] - top2[0]) / 2) - 1
    T = max(0.0, math.log(1 / (2 * delta0)) / eps0) + T_shift
    p = float(stats.laplace(scale=1 / eps0).sf(T - d))
    law = np.zeros(len(h) + 1)  # last entry: ⊥
    law[int(np.argmax(h))] = p
    law[-1] = 1.0 - p
    return law


def _worst_violation(eps0, delta0, T_shift=0.0):
    """max over neighbouring histograms and output sets S of P(S) − e^{ε₀}P′(S)."""
    worst = -np.inf
    for k in range(1, 9):
        for h in (h for h in itertools.product(range(k + 1), repeat=3) if sum(h) == k):
            P = _ptr_output_law(h, eps0, delta0, T_shift)
            for a, b in itertools.permutations(range(3), 2):
                if h[a] == 0:
                    continue
                g = list(h)
                g[a] -= 1
                g[b] += 1
                Q = _ptr_output_law(g, eps0, delta0, T_shift)
                # the worst S is {outputs where P > e^ε Q}
                worst = max(worst, np.clip(P - math.exp(eps0) * Q, 0, None).sum() - delta0)
    return worst


@pytest.mark.parametrize(("eps0", "delta0"), [(0.5, 1e-3), (1.0, 0.05), (2.0, 1e-6)])
def test_ptr_is_epsilon0_delta0_dp_on_every_neighbouring_histogram(eps0, delta0):
    """Exact output laws, all histograms of ≤ 8 votes in 3 classes, every moved vote:
    (ε₀, δ₀)-DP holds; a threshold one unit lower breaks it (the check has teeth)."""
    assert _worst_violation(eps0, delta0) <= 1e-12
    assert _worst_violation(eps0, delta0, T_shift=-1.0) > 0


def test_ptr_threshold_formula():
    assert pate.ptr_threshold(1.0, 1e-6) == pytest.approx(math.log(5e5), rel=1e-15)
    assert pate.ptr_threshold(1.0, 1e-6) >= math.log(5e5)
    assert pate.ptr_threshold(2.0, 0.6) == 0.0  # δ₀ ≥ ½: no threshold needed
    assert pate.ptr_event(0.3, 1e-7, 9) == SelfComposed(EpsilonDelta(0.3, 1e-7), 9)


def test_confident_gnmax_abstains_without_consensus():
    rng = np.random.default_rng(8)
    votes = np.array([[100, 0, 0]] * 500 + [[34, 33, 33]] * 500)
    labels = pate.confident_gnmax(votes, 70.0, 5.0, 5.0, rng)
    assert np.all(labels[:500] == 0)
    assert np.all(labels[500:] == pate.ABSTAIN)


# ============================================================================ calibration
@pytest.mark.parametrize(
    ("aggregator", "accountant"),
    [
        ("gnmax", "rdp"),
        ("gnmax", "pld"),
        ("lnmax", "optimal"),
        ("lnmax", "rdp"),
        ("lnmax", "basic"),
        ("ptr", "optimal"),
        ("ptr", "advanced"),
        ("ptr", "basic"),
        ("confident-gnmax", "rdp"),
    ],
)
def test_calibrated_event_meets_the_target(aggregator, accountant):
    eps, delta, m = 2.0, 1e-5, 3 if accountant == "pld" else 40
    if aggregator == "gnmax":
        ev = pate.gnmax_event(pate.calibrate_gnmax(eps, delta, m, accountant=accountant), m)
    elif aggregator == "lnmax":
        ev = pate.lnmax_event(pate.calibrate_lnmax(eps, delta, m, accountant=accountant), m)
    elif aggregator == "ptr":
        ev = pate.ptr_event(*pate.calibrate_ptr(eps, delta, m, accountant=accountant), m)
    else:
        ev = pate.confident_gnmax_event(*pate.calibrate_confident_gnmax(eps, delta, m), m)
    spent = epsilon_spent(ev, delta, accountant)
    assert spent <= eps
    assert spent >= 0.99 * eps  # and not needlessly conservative
    assert ev.count == m


def test_lnmax_pure_dp_and_ptr_basic_closed_forms():
    m = 25
    b = pate.calibrate_lnmax(1.0, 0.0, m)
    assert 2 * m / b <= 1.0 and b == pytest.approx(2 * m, rel=1e-3)  # ε = 2m/b
    eps0, delta0 = pate.calibrate_ptr(1.0, 1e-5, m, accountant="basic")
    assert delta0 == pytest.approx(1e-5 / m) and eps0 == pytest.approx(1.0 / m, rel=1e-3)
    assert m * eps0 <= 1.0


def test_fit_event_and_diagnostics(rng):
    X, y = _blobs(rng, 200, n_classes=3)
    Xpub = _blobs(np.random.default_rng(1), 30, n_classes=3)[0]
    for agg in pate.AGGREGATORS:
        res = pate.fit(
            X, y, Xpub, epsilon=3.0, delta=1e-5, n_teachers=10, aggregator=agg,
            n_queries=8 if agg == "ptr" else None, classes=[0, 1, 2],
            teacher_factory=_tree, random_state=3,
        )  # fmt: skip
        d = res.diagnostics
        m = 8 if agg == "ptr" else 30
        assert res.labels.shape == (m,) and res.labels.dtype == np.int64
        assert np.all((res.labels >= -1) & (res.labels < 3))
        assert d["n_answered"] + d["n_abstained"] == m == d["n_queries"]
        assert d["n_answered"] == res.answered.sum() == res.released_labels.size
        assert d["n_teachers"] == 10 and d["teacher_part_sizes"] == (20, 20)
        assert d["neighbouring"] == "replace-one"
        assert d["noise_scale"] > 0
        assert d["epsilon_spent"] == epsilon_spent(res.event, 1e-5, d["accountant"]) <= 3.0
        assert d["accountant"] == {"gnmax": "rdp", "lnmax": "optimal"}.get(
            agg, "optimal" if agg == "ptr" else "rdp"
        )
    # the event is exactly the one of the released noise
    res = pate.fit(X, y, Xpub, epsilon=3.0, delta=1e-5, n_teachers=10, classes=[0, 1, 2],
                   random_state=0)  # fmt: skip
    assert res.event == pate.gnmax_event(res.diagnostics["sigma"], 30)
    res = pate.fit(X, y, Xpub, epsilon=3.0, delta=0.0, n_teachers=10, aggregator="lnmax",
                   classes=[0, 1, 2], random_state=0)  # fmt: skip
    assert res.event == SelfComposed(SelfComposed(Laplace(res.diagnostics["scale"]), 2), 30)
    assert res.diagnostics["epsilon_spent"] <= 3.0


def test_fit_is_reproducible_and_sparse_matches_dense(rng):
    X, y = _blobs(rng, 150, n_classes=2, spread=0.5)
    Xpub = X[:40] + 0.1
    kw = dict(epsilon=4.0, delta=1e-5, n_teachers=5, classes=[0, 1], random_state=9)
    a = pate.fit(X, y, Xpub, **kw)
    b = pate.fit(X, y, Xpub, **kw)
    c = pate.fit(sp.csr_matrix(X), y, sp.csr_matrix(Xpub), **kw)
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.labels, c.labels)
    assert np.array_equal(a.predict(Xpub), c.predict(sp.csr_matrix(Xpub)))


# ============================================================================ utility
@pytest.fixture(scope="module")
def cancer_split():
    X, y = load_breast_cancer(return_X_y=True)
    perm = np.random.default_rng(0).permutation(y.size)
    X, y = X[perm], y[perm]
    return X[:300], y[:300], X[300:], y[300:]


def test_student_utility_on_breast_cancer(cancer_split):
    """300 private / 269 public rows; the first 50 public rows are queried, the other 219
    are the test set; k = 50 teachers of 6 records, δ = 1e-5.  Measured (mean of seeds
    0–2): non-private model on all 300 private rows 0.968; student on the 50 *true* labels
    0.936; GNMax student 0.865 at ε = 2 and 0.927 at ε = 8; LNMax 0.845 / 0.927."""
    Xpr, ypr, Xpu, ypu = cancer_split
    Xte, yte = Xpu[50:], ypu[50:]
    ref = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xpr, ypr)
    nonprivate = ref.score(Xte, yte)
    oracle = pate._default_teacher().fit(Xpu[:50], ypu[:50]).score(Xte, yte)
    assert nonprivate > 0.95 and oracle > 0.9
    acc = {}
    for agg in ("gnmax", "lnmax"):
        for eps in (2.0, 8.0):
            scores = []
            for seed in range(3):
                res = pate.fit(Xpr, ypr, Xpu, epsilon=eps, delta=1e-5, n_teachers=50,
                               n_queries=50, aggregator=agg, classes=[0, 1],
                               random_state=seed)  # fmt: skip
                assert res.diagnostics["n_answered"] == 50
                scores.append(res.student.score(Xte, yte))
            acc[agg, eps] = np.mean(scores)
    assert acc["gnmax", 8.0] >= 0.89 and acc["lnmax", 8.0] >= 0.89
    assert acc["gnmax", 2.0] >= 0.8 and acc["lnmax", 2.0] >= 0.8
    assert acc["gnmax", 8.0] > acc["gnmax", 2.0] and acc["lnmax", 8.0] > acc["lnmax", 2.0]
    assert max(acc.values()) <= oracle + 0.02


def test_ptr_labels_few_queries_exactly(cancer_split):
    """PTR with data-independent composition only pays off for few queries: at ε = 8,
    10 queries, the release threshold is d > 16.4 (a gap of ≥ 35 of the 50 votes).
    Measured: 9 of 10 answered at seed 0 (7–10 over seeds 0–9), each equal to the
    teachers' plurality (and to the true label).  At 20 queries T = 34.5 > k/2: none."""
    Xpr, ypr, Xpu, ypu = cancer_split
    res = pate.fit(Xpr, ypr, Xpu, epsilon=8.0, delta=1e-5, n_teachers=50, n_queries=10,
                   aggregator="ptr", classes=[0, 1], random_state=0)  # fmt: skip
    teachers = pate.train_teachers(
        Xpr, ypr, 50, random_state=np.random.default_rng(0)
    )  # fit draws the partition first from the same stream
    plurality = np.argmax(pate.teacher_votes(teachers, Xpu[:10], classes=[0, 1]), axis=1)
    ans = res.answered
    assert ans.sum() >= 8
    assert np.array_equal(res.labels[ans], plurality[ans])
    assert np.array_equal(res.released_labels, ypu[:10][ans])
    assert res.diagnostics["threshold"] == pytest.approx(16.4, abs=0.1)


def test_all_abstained_gives_no_student(rng):
    X, y = _blobs(rng, 40, n_classes=2)
    res = pate.fit(X, y, X[:30], epsilon=0.5, delta=1e-6, n_teachers=4, aggregator="ptr",
                   classes=[0, 1], teacher_factory=_tree, random_state=0)  # fmt: skip
    assert res.student is None and res.diagnostics["n_answered"] == 0
    with pytest.raises(InvalidDataError, match="no student"):
        res.predict(X)


# ============================================================================ bad input
def _data():
    rng = np.random.default_rng(0)
    X, y = _blobs(rng, 40, n_classes=2)
    return X, y, X[:10] + 0.5


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter, "epsilon"),
        ({"epsilon": -1.0}, InvalidPrivacyParameter, "epsilon"),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter, "epsilon"),
        ({"epsilon": "1"}, InvalidPrivacyParameter, "epsilon"),
        ({"delta": 1.0}, InvalidPrivacyParameter, "delta"),
        ({"delta": -0.1}, InvalidPrivacyParameter, "delta"),
        ({"delta": 0.0}, InvalidPrivacyParameter, "delta"),  # GNMax
        ({"delta": 0.0, "aggregator": "ptr"}, InvalidPrivacyParameter, "delta"),
        ({"delta": 0.0, "aggregator": "confident-gnmax"}, InvalidPrivacyParameter, "delta"),
        ({"n_teachers": 1}, InvalidPrivacyParameter, "n_teachers"),
        ({"n_teachers": 41}, InvalidPrivacyParameter, "n_teachers"),
        ({"n_teachers": 2.5}, InvalidPrivacyParameter, "n_teachers"),
        ({"n_queries": 0}, InvalidPrivacyParameter, "n_queries"),
        ({"n_queries": 11}, InvalidPrivacyParameter, "n_queries"),
        ({"aggregator": "median"}, UnknownNameError, "aggregator"),
        ({"accountant": "nope"}, UnknownNameError, "accountant"),
        ({"aggregator": "ptr", "accountant": "rdp"}, UnsupportedEventError, "EpsilonDelta|δ"),
        ({"teacher_factory": 3}, InvalidPrivacyParameter, "teacher_factory"),
        ({"student_factory": "lr"}, InvalidPrivacyParameter, "student_factory"),
        ({"classes": [0]}, LabelError, "two classes"),
        ({"classes": [1, 2]}, LabelError, "outside classes"),
        ({"aggregator": "confident-gnmax", "sigma_ratio": 0.0}, InvalidPrivacyParameter, "ratio"),
        (
            {"aggregator": "confident-gnmax", "confidence_threshold": float("inf")},
            InvalidPrivacyParameter,
            "threshold",
        ),
        ({"random_state": "seed"}, InvalidPrivacyParameter, "random_state"),
    ],
)
def test_fit_bad_parameters(kwargs, exc, match):
    X, y, Xpub = _data()
    kw = {"epsilon": 1.0, "delta": 1e-5, "n_teachers": 4, "classes": [0, 1]}
    kw.update(kwargs)
    with pytest.raises(exc, match=match):
        pate.fit(X, y, Xpub, **kw)


def test_fit_bad_data():
    X, y, Xpub = _data()
    kw = {"epsilon": 1.0, "delta": 1e-5, "n_teachers": 4, "classes": [0, 1]}
    with pytest.raises(InvalidDataError):
        pate.fit(X, y, np.empty((0, 4)), **kw)  # empty public set
    with pytest.raises(InvalidDataError, match="features"):
        pate.fit(X, y, Xpub[:, :3], **kw)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(InvalidDataError, match="NaN"):
        pate.fit(Xn, y, Xpub, **kw)
    with pytest.raises(InvalidDataError, match="NaN"):
        pate.fit(X, y, np.full((3, 4), np.inf), **kw)
    with pytest.raises(InvalidDataError, match="inconsistent"):
        pate.fit(X, y[:-1], Xpub, **kw)
    with pytest.warns(PrivacyLeakWarning), pytest.raises(LabelError, match="two classes"):
        pate.fit(X, np.zeros(40), Xpub, epsilon=1.0, delta=1e-5, classes=None)
    with pytest.warns(PrivacyLeakWarning, match="classes"):
        res = pate.fit(X, y, Xpub, epsilon=1.0, delta=1e-5, n_teachers=4, random_state=0)
    assert list(res.classes) == [0.0, 1.0]


def test_pure_functions_bad_input():
    rng = np.random.default_rng(0)
    v = np.array([[3, 1], [0, 4]])
    for bad in (np.array([1, 2, 3]), np.ones((3, 1)), np.array([[1, -1]]), np.array([[1, np.nan]])):
        with pytest.raises(InvalidDataError):
            pate.gnmax(bad, 1.0, rng)
    with pytest.raises(InvalidDataError, match="integer"):
        pate.ptr_argmax(np.array([[1.5, 2.0]]), 1.0, 1e-5, rng)
    for fn, arg in ((pate.gnmax, 0.0), (pate.lnmax, -1.0), (pate.gnmax, float("inf"))):
        with pytest.raises(InvalidPrivacyParameter):
            fn(v, arg, rng)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon0"):
        pate.ptr_argmax(v, 0.0, 1e-5, rng)
    with pytest.raises(InvalidPrivacyParameter, match="delta0"):
        pate.ptr_argmax(v, 1.0, 0.0, rng)
    with pytest.raises(InvalidPrivacyParameter, match="n_queries"):
        pate.gnmax_event(1.0, 0)
    with pytest.raises(InvalidPrivacyParameter, match="n_teachers"):
        pate.partition_indices(5, 6, rng)
    with pytest.raises(InvalidDataError, match="non-empty"):
        pate.teacher_votes([], np.ones((2, 2)))


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("aggregator", pate.AGGREGATORS)
def test_fit_bad_input_battery_raises_only_dperm_errors(aggregator):
    """The battery of tests/test_bad_input.py, for PATE's signature: every bad ε, δ, seed
    and data shape gives the specific dperm error, never a bare traceback."""
    X, y, Xpub = _data()
    kw = {"epsilon": 1.0, "delta": 1e-5, "n_teachers": 4, "classes": [0, 1],
          "aggregator": aggregator, "n_queries": 3, "teacher_factory": _tree}  # fmt: skip

    def expect(exc, *args, **over):
        args = args or (X, y, Xpub)
        with pytest.raises(exc) as info:
            pate.fit(*args, **{**kw, **over})
        assert isinstance(info.value, DpermError)

    for eps in (NAN, INF, -INF, -1.0, 0.0, "1.0", None, 1 + 2j, True):
        expect(InvalidPrivacyParameter, epsilon=eps)
    for delta in (NAN, INF, -0.1, 1.0, 1.5, "1e-5", 2j):
        expect(InvalidPrivacyParameter, delta=delta)
    for seed in ("seed", -1, 1.5):
        expect(InvalidPrivacyParameter, random_state=seed)
    for bad in (X[:, 0], X[None], X[:, :0], np.full(X.shape, "a")):
        expect(InvalidDataError, bad, y, Xpub)
        expect(InvalidDataError, X, y, bad if bad.ndim != 2 or bad.shape[1] else Xpub[:, :0])
    expect(InvalidDataError, X[:0], y[:0], Xpub)
    expect(InvalidDataError, X[:1], y[:1], Xpub)  # one private record
    expect(InvalidDataError, sp.csr_matrix(np.where(X > 0, np.nan, X)), y, Xpub)
    yn = y.astype(float)
    yn[2] = np.nan
    expect(InvalidDataError, X, yn, Xpub)
    expect(LabelError, X, np.where(y == 0, "a", "b"), Xpub)  # labels outside [0, 1]
    res = pate.fit(X, np.where(y == 0, "a", "b"), Xpub, **{**kw, "classes": ["a", "b"]})
    assert set(res.released_labels) <= {"a", "b"}
