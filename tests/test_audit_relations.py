"""Audits of the default DP-SGD / DP-GD / estimator paths under both neighbouring
relations, and the mutation tests of dperm issue #10 (bug classes that broke the
privacy claims of the default paths):

(a) a normaliser or step count computed from |D| under add/remove neighbours;
(b) a replace-one claim accounted with an add/remove event (noise for the
    sensitivity C while replacing a record moves the sum by 2C);
(c) a label set read off the data (``classes_ = np.unique(y)``).

Each mutation is a run function written here (never in the library) that makes
exactly the mistake of its bug class through the public API; each must be
caught (ε_LB > ε = 1) and its correct counterpart, audited on the same pair,
must not be.  Seeds are fixed, so every audit is deterministic; the run counts
follow from the μ each configuration reaches (comments) and the width of the
Clopper–Pearson limits (≈ 5/√(runs/2) in μ at the central threshold).
"""

from __future__ import annotations

import dataclasses
import json
import zlib

import numpy as np
import pytest
from scipy import stats

from dperm.audit import (
    CanaryPair,
    Runner,
    audit,
    get_runner,
    make_canary_pair,
    projection,
    release_statistic,
)
from dperm.audit.fits import _AR_SIZE, _fit_default
from dperm.exceptions import DpermError

EPSILON, DELTA = 1.0, 1e-5
N_JOBS = 2


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _require(name: str) -> Runner:
    r = get_runner(name)
    if not r.available():
        pytest.skip(
            f"runner {name!r} needs {r.module}.fit with {r.requires} (not in this version yet)"
        )
    return r


def _audit(runner, runs, seed, **kw):
    return audit(
        runner, epsilon=EPSILON, delta=DELTA, runs=runs, random_state=seed, n_jobs=N_JOBS, **kw
    )


# ============================================================================ statistics
def test_projection_and_release_statistic():
    e = np.array([0.0, 1.0])
    assert projection(np.array([3.0, 2.0]), e) == 2.0
    assert projection(np.array([[3.0, 9.0], [2.0, 9.0]]), e) == 2.0  # (d, k): first column
    with pytest.raises(DpermError, match="shape"):
        projection(np.zeros(3), e)
    # an estimator's coef_ (k, d): last row projected, plus 10⁶ per extra row
    assert release_statistic(np.array([[1.0, 0.5]]), e) == 0.5
    assert release_statistic(np.array([[1.0, 0.5], [0, 0], [2.0, -0.25]]), e) == 2e6 - 0.25
    with pytest.raises(DpermError, match="coef"):
        release_statistic(np.zeros((1, 3)), e)


def test_runner_requiring_an_api_is_unavailable_without_it():
    r = Runner(
        name="needs-api",
        fn=projection,
        module="dperm.audit.runners",
        requires=("no_such_parameter",),
    )
    assert not r.available()  # dperm.audit.runners has no fit at all
    r2 = dataclasses.replace(get_runner("dp-sgd"), requires=("no_such_parameter",))
    assert not r2.available()
    with pytest.raises(DpermError, match="no_such_parameter="):
        r2.require()


# ============================================================================ default paths
#: runner → (module, extra keywords of its default fit)
_GRADIENT_RUNNERS = {
    "dp-gd": ("dp_gd", {}),
    "dp-gd-add-remove": ("dp_gd", {"neighbouring": "add-remove", "dataset_size": _AR_SIZE}),
    "dp-sgd": ("dp_sgd", {"neighbouring": "add-remove", "dataset_size": _AR_SIZE}),
    "dp-sgd-replace-one": ("dp_sgd", {"neighbouring": "replace-one"}),
}


def _predicted_mu(name: str, pair: CanaryPair) -> float:
    """μ of the audit score from the default fit's own constants: the canary adds
    its clipped gradient (C, or 2C between canary and anti-canary) with
    probability q to each of T noisy sums whose noise is z times that
    sensitivity, so μ = q√T / √(z² + q(1 − q)) (√T/z for full batches; the
    Poisson case is the Gaussian approximation of the binomial count)."""
    import importlib

    from dperm.losses import Hinge

    module, kw = _GRADIENT_RUNNERS[name]
    fit = importlib.import_module(f"dperm.algorithms.{module}").fit
    d = fit(
        Hinge(),
        pair.X_prime,
        pair.y_prime,
        epsilon=EPSILON,
        delta=DELTA,
        data_norm=1.0,
        learning_rate=1e-3,
        random_state=0,
        **kw,
    ).diagnostics
    z, T, q = d["noise_multiplier"], d["steps"], d.get("sampling_rate", 1.0)
    return q * np.sqrt(T) / np.sqrt(z**2 + q * (1 - q))


@pytest.mark.parametrize("name", sorted(_GRADIENT_RUNNERS))
def test_default_gradient_paths_are_audited_with_gdp_tightly_and_not_refuted(name):
    """Each default path, under its relation: not refuted, and the audit sees the
    whole μ its own constants imply (so the GDP bound has the power the claim
    allows: ε_LB ≈ 0.6–0.7 at the default 20 000 runs).  The tolerance is 4
    standard deviations of μ̂ = Φ⁻¹(1 − FPR̂) − Φ⁻¹(FNR̂) by the delta method."""
    r = _require(name)
    assert r.noise == "gaussian"
    res = _audit(r, 1000, _seed(name))
    assert res.method == "gdp" and res.neighbouring == r.neighbouring
    assert not res.violated and not res.violated_assumption_free, res.summary()
    m = res.evaluation_runs
    sd = np.hypot(
        *(
            np.sqrt(p * (1 - p) / m) / stats.norm.pdf(stats.norm.ppf(p))
            for p in (res.gdp_fpr, res.gdp_fnr)
        )
    )
    mu = _predicted_mu(name, r.make_pair())
    assert 0.15 < mu < 0.35  # a claim of ε = 1 at δ = 1e-5 is μ ≈ 0.27
    assert abs(res.mu_estimate - mu) <= 4 * sd, (res.mu_estimate, mu, sd)


def test_default_add_remove_pair_has_sizes_where_defaults_would_change():
    """|D| = 100, |D′| = 101: with b = round(√n) clipped at 16 the sampling rate
    16/n and T = ⌈epochs/q⌉ differ between the two sizes (0.16 vs 0.158, 25 vs
    26 steps at ε = 1), which is what the add/remove runners test."""
    from dperm.algorithms.dp_sgd import default_hyperparameters

    pair = get_runner("dp-sgd").make_pair()
    assert pair.X.shape[0] == _AR_SIZE and pair.X_prime.shape[0] == _AR_SIZE + 1
    h0 = default_hyperparameters(_AR_SIZE, 2, EPSILON, clipping_norm=1.0)
    h1 = default_hyperparameters(_AR_SIZE + 1, 2, EPSILON, clipping_norm=1.0)
    q0, q1 = h0["batch_size"] / _AR_SIZE, h1["batch_size"] / (_AR_SIZE + 1)
    assert q0 != q1
    assert np.ceil(round(h0["epochs"] / q0, 6)) != np.ceil(round(h1["epochs"] / q1, 6))


@pytest.mark.slow
def test_estimator_dp_sgd_default_path_is_not_refuted():
    """DPLogisticRegression(mechanism="dp-sgd") with every default, replace-one.

    Few runs: each fit runs the estimator's own calibration and accounting
    (≈ 0.1 s, most of it the PLD ε it reports), so this checks the path end to
    end rather than the tightness (the function-API runners do that)."""
    r = _require("estimator-dp-sgd")
    res = _audit(r, 60, _seed("estimator-dp-sgd"))
    assert res.method == "gdp" and res.neighbouring == "replace-one"
    assert not res.violated and not res.violated_assumption_free, res.summary()


# ============================================================================ mutation (a)
def _dp_sgd_add_remove(X, y, epsilon, delta, rng, *, dataset_size):
    """The default DP-SGD path under add/remove with the given public size."""
    from dperm.algorithms import dp_sgd

    return _fit_default(
        "dp-sgd[add-remove]",
        dp_sgd.fit,
        X,
        y,
        epsilon,
        delta,
        rng,
        neighbouring="add-remove",
        dataset_size=dataset_size,
    )


def _dp_sgd_size_from_data(X, y, epsilon, delta, rng):
    """Bug (a): under add/remove the run's public size is read off the data —
    ``dataset_size=X.shape[0]`` — so the normaliser q·|D|, the batch size, q and T
    all follow |D| (D: 100 rows, 25 steps; D′: 101 rows, 26 steps)."""
    return _dp_sgd_add_remove(X, y, epsilon, delta, rng, dataset_size=X.shape[0])


def _dp_sgd_public_size(X, y, epsilon, delta, rng):
    """Correct counterpart of (a): the public ``dataset_size`` = 100 for both."""
    return _dp_sgd_add_remove(X, y, epsilon, delta, rng, dataset_size=_AR_SIZE)


def _copies_pair() -> CanaryPair:
    """D = 100 copies of (e₁, +1), D′ = 101 copies (the issue's pair): every
    record pulls θ the same way, so one more step moves the mean by a whole
    step of the joint gradient."""
    return make_canary_pair(_AR_SIZE + 1, 1, neighbouring="add-remove", base="copies")


def test_mutation_size_read_from_data_under_add_remove_is_caught():
    base = _require("dp-sgd")
    pair = _copies_pair()
    broken = base.mutate(_dp_sgd_size_from_data, "dp-sgd[size-from-data]")
    # liveness: on D′ the mutant really runs with other constants than on D
    a = _dp_sgd_size_from_data(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    b = _dp_sgd_public_size(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    assert not np.allclose(a, b)
    # measured μ̂ ≈ 0.71 (one extra step of drift against ≈ 1.5 steps of noise):
    # ε_LB(GDP) ≈ 2.07 at 2000 runs (the assumption-free bound, 0.70, would need
    # ≈ 15 000 runs to pass 1)
    res = _audit(broken, 2000, 201, data=pair)
    assert res.violated and res.epsilon_lower_bound > 1.3, res.summary()
    assert res.verdict != "not refuted"


def test_public_size_under_add_remove_is_not_refuted_on_the_same_pair():
    base = _require("dp-sgd")
    honest = dataclasses.replace(base, name="dp-sgd[public-size]", fn=_dp_sgd_public_size)
    res = _audit(honest, 1000, 201, data=_copies_pair())
    assert not res.violated and not res.violated_assumption_free, res.summary()


# ============================================================================ mutation (b)
def _dp_sgd_replace_one_accounted_as_add_remove(X, y, epsilon, delta, rng):
    """Bug (b): the claim is replace-one (n public), but the run is calibrated and
    accounted as the add/remove event: noise z·C for a sum that replacing one
    record moves by 2C (the estimators' DP-SGD before issue #10).  The run is the
    one of (a) — ``neighbouring="add-remove"``, ``dataset_size=X.shape[0]`` — audited
    against the replace-one claim, on the replace-one pair."""
    return _dp_sgd_add_remove(X, y, epsilon, delta, rng, dataset_size=X.shape[0])


def test_mutation_replace_one_claim_with_add_remove_accounting_is_caught():
    base = _require("dp-sgd-replace-one")
    _require("dp-sgd")  # the add/remove API the mutant uses
    pair = base.make_pair()
    broken = base.mutate(_dp_sgd_replace_one_accounted_as_add_remove, "dp-sgd[ar-for-ro]")
    a = broken(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    b = base(pair.X_prime, pair.y_prime, EPSILON, DELTA, np.random.default_rng(0))
    assert not np.allclose(a, b)
    # μ doubles (μ̂ ≈ 0.58 against 0.27 for the claim): ε_LB(GDP) ≈ 1.52 at 3000
    # runs.  The correct counterpart — the default replace-one path on the same
    # pair — is audited (not refuted) in test_default_gradient_paths_... above.
    res = _audit(broken, 3000, 202)
    assert res.neighbouring == "replace-one"
    assert res.violated, res.summary()


# ============================================================================ mutation (c)
_THIRD = 2.0


def _label_pair() -> CanaryPair:
    """Replace-one: D has labels {−1, +1}; in D′ the canary carries a third label."""
    p = make_canary_pair(20, 2, neighbouring="replace-one")
    y_prime = p.y_prime.copy()
    y_prime[-1] = _THIRD
    return dataclasses.replace(p, y_prime=y_prime)


def _estimator(classes, X, y, epsilon, delta, rng):
    from dperm.estimators import DPLogisticRegression

    # objective perturbation (δ = 0, one-vs-rest), as the test below states: the leak
    # is the shape of the release, whatever the mechanism
    est = DPLogisticRegression(
        epsilon=epsilon, classes=classes, mechanism="objective", multi_class="ovr",
        random_state=rng,
    )  # fmt: skip
    return est.fit(X, y).coef_


def _labels_read_from_data(X, y, epsilon, delta, rng):
    """Bug (c): ``classes_ = np.unique(y)``: 2 classes on D, 3 on D′, so the
    release has 1 row on D and 3 on D′ (and the budget split changes)."""
    return _estimator(np.unique(y), X, y, epsilon, delta, rng)


def _labels_public(X, y, epsilon, delta, rng):
    """Correct counterpart: the public label set {−1, +1, 2} for both."""
    return _estimator([-1.0, 1.0, _THIRD], X, y, epsilon, delta, rng)


def _label_runner(fn, name):
    return Runner(name=name, fn=fn, module="dperm.estimators", statistic=release_statistic)


def test_mutation_label_set_read_from_data_is_caught():
    pair = _label_pair()
    r = _label_runner(_labels_read_from_data, "estimator[classes=unique(y)]")
    shapes = {
        _labels_read_from_data(X, y, EPSILON, 0.0, np.random.default_rng(0)).shape
        for X, y in ((pair.X, pair.y), (pair.X_prime, pair.y_prime))
    }
    assert shapes == {(1, 2), (3, 2)}  # the leak itself
    res = audit(r, epsilon=EPSILON, runs=100, data=pair, random_state=203, n_jobs=N_JOBS)
    # the default estimator (objective perturbation, δ = 0): Clopper–Pearson, and
    # the shape separates every run: ε_LB = ln((1 − u)/u), u = 1 − 0.025^(1/50)
    assert res.method == "clopper-pearson" and res.fpr == 0.0 and res.fnr == 0.0
    u = 1 - 0.025 ** (1 / 50)
    assert res.epsilon_lower_bound == pytest.approx(np.log((1 - u) / u))
    assert res.violated_assumption_free and res.verdict == "refuted", res.summary()


def test_public_label_set_is_not_refuted_on_the_same_pair():
    r = _label_runner(_labels_public, "estimator[classes=public]")
    res = audit(r, epsilon=EPSILON, runs=150, data=_label_pair(), random_state=203, n_jobs=N_JOBS)
    assert not res.violated, res.summary()


# ============================================================================ CLI
def test_cli_audit_reports_both_bounds_the_relation_and_the_method():
    from dperm.cli.audit import audit_command, render

    out = audit_command("gaussian", 1.0, None, 400, 3, 1, True)
    payload = json.loads(render(out, json_output=True))
    for key in (
        "epsilon_lower_bound",
        "epsilon_lower_bound_gdp",
        "epsilon_lower_bound_cp",
        "mu_lower_bound",
        "neighbouring",
        "method",
        "assumption",
        "verdict",
    ):
        assert key in payload
    assert payload["method"] == "gdp" and payload["neighbouring"] == "add-remove"
    assert payload["epsilon_lower_bound"] == payload["epsilon_lower_bound_gdp"]
    text = render(out)
    assert "add-remove" in text and "μ-GDP" in text and "assumption-free" in text
    out_cp = audit_command("gaussian", 1.0, None, 40, 3, 1, True, method="clopper-pearson")
    assert out_cp["method"] == "clopper-pearson" and out_cp["epsilon_lower_bound_gdp"] is None
    assert "VERDICT" in render(out_cp)
