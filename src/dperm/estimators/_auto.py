"""``mechanism="auto"``: the public rule that picks a mechanism and its hyperparameters.

Every dperm estimator defaults to ``mechanism="auto"``.  At ``fit`` time the
estimator calls :func:`auto_choice` with **public quantities only** — never a
statistic of the data:

* n, the number of training rows (public under the estimators' replace-one
  relation, where D and D′ have the same size);
* d, the number of features (the width of X) and k, the number of classes of the
  public label set ``classes`` (read off y only when ``classes=None``, with the
  :class:`~dperm.exceptions.PrivacyLeakWarning` that case always raises);
* ε and δ of the fit; the task (the estimator's loss); the user's own choices
  (penalty, constraint, whether ``sample_weight`` is passed) and the public bound
  B of the labels for the regressors.

The result, an :class:`AutoChoice`, names the mechanism, the hyperparameters the
rule sets (a value the user gives explicitly always wins) and the reason; the
fitted estimator keeps it in ``auto_`` and ``diagnostics_["auto"]``, and
``dperm fit`` prints it ("auto → dp-sgd (multinomial, batch_size=160, …) because …").

The rule (the sweeps that produced it are in ``docs/choosing_a_mechanism.md``,
"The auto rule"; they ran on validation splits of the *training* rows of Adult,
KDD Cup 99, MNIST and California housing and on freshly generated synthetic
data — never on a test set):

=====================  ===========================================================
task                   rule
=====================  ===========================================================
classification,        δ = 0, ``sample_weight``, a non-ℓ2 penalty, a constraint set
binary (k = 2)         or a numeric ``alpha`` → "objective" (it supports them all);
                       otherwise (logistic) with s = nε/√D: "dp-sgd" with clipping
                       below the Lipschitz bound when s < :data:`BINARY_AMP_ABOVE`
                       (:func:`binary_dp_sgd_schedule`), "amp" at or above it; the
                       Huber SVM keeps "objective" (not swept).
classification,        logistic loss: one multinomial (softmax) model with the whole
k > 2 classes          budget (as scikit-learn), "dp-sgd" with clipping below the
                       Lipschitz bound (:func:`multi_dp_sgd_schedule`) below
                       s = nε/√(Dk) = :data:`MULTI_AMP_ABOVE` (10⁵, beyond the
                       sweeps), "amp" above; the Huber-SVM loss has no multinomial form:
                       one-vs-rest with "objective".
least squares,         "huber": objective perturbation of the Huber loss with
Lasso, elastic net     threshold h = 0.4·B (identical to the squared loss on residuals
                       below h; Lipschitz hR instead of the squared loss's
                       R(R·radius + B), so no constraint set and far less noise);
                       the estimator's penalty (ℓ1, elastic net) is kept.
quantile               "dp-gd-avg" over the ℓ2 ball of radius d·B/R with B the
                       label bound, or B = :data:`QUANTILE_SCALE` when none is given;
                       beyond ε = 10 more steps (:func:`quantile_steps`).
Huber regression       "objective".
=====================  ===========================================================

Privacy: the choice is a function of public inputs (a data-independent
pre-processing of the *mechanism*, not of the data), so every fit keeps the
guarantee of the mechanism the rule chose, with the ε and δ the user asked for.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validation import check_count, check_delta, check_epsilon
from ..exceptions import InvalidPrivacyParameter, UnknownNameError
from ..losses.base import MARGIN_BOUND, PRIOR_RELAX_ABOVE, prior_margin

__all__ = [
    "AUTO",
    "BINARY_AMP_ABOVE",
    "BINARY_CLIP_FRACTION",
    "BINARY_CLIP_QUANTILE",
    "BINARY_STEP_CLIP",
    "CLIPPING_LEARNING_RATE",
    "CONSISTENT_ABOVE",
    "HUBER_FRACTION",
    "MULTI_AMP_ABOVE",
    "MULTI_CLIP_FRACTION",
    "MULTI_CLIP_QUANTILE",
    "MULTI_STEP_CLIP",
    "OUTPUT_CLIP_FRACTION",
    "OUTPUT_INTERCEPT_SCALE",
    "QUANTILE_MAX_STEPS",
    "QUANTILE_SCALE",
    "SCALING_SHARE",
    "TASKS",
    "AutoChoice",
    "adaptive_settings",
    "auto_choice",
    "binary_dp_sgd_schedule",
    "check_feature_scaling",
    "dp_sgd_schedule",
    "multi_dp_sgd_schedule",
    "output_clip_fraction",
    "prior_bound",
    "quantile_steps",
    "scaling_settings",
    "scaling_share",
]

AUTO = "auto"

#: binary logistic regression: clipped DP-SGD below s = nε/√D, AMP at or above it
BINARY_AMP_ABOVE = 5000.0
#: binary DP-SGD: clipping norm C as a fraction of the loss's Lipschitz bound L
BINARY_CLIP_FRACTION = 0.27
#: binary DP-SGD: learning rate η = BINARY_STEP_CLIP / C (the largest step of one
#: clipped gradient, η·C, is a fixed length)
BINARY_STEP_CLIP = 0.65
#: binary DP-SGD: adaptive clipping's target quantile γ of the per-example gradient norms
#: (Andrew et al. 2021; :mod:`dperm.algorithms.adaptive_clipping`), starting at C₀ =
#: BINARY_CLIP_FRACTION·L
BINARY_CLIP_QUANTILE = 0.9
#: multinomial DP-SGD: adaptive clipping's target quantile γ (from C₀ = MULTI_CLIP_FRACTION·L)
MULTI_CLIP_QUANTILE = 0.9
#: adaptive clipping's learning rate η_C (Cₜ₊₁ = Cₜ·exp(−η_C(b̃ₜ − γ)); the paper's 0.2)
CLIPPING_LEARNING_RATE = 0.2
#: feature_scaling="private": the share of the budget the scaling takes for a binary model,
#: SCALING_SHARE/√(k − 1) for k classes (:func:`scaling_share`)
SCALING_SHARE = 0.3
#: multinomial classification: AMP at or above s = nε/√(Dk) = MULTI_AMP_ABOVE, beyond
#: every swept cell (up to 80 000, where AMP and clipped DP-SGD were level): the PLD
#: of thousands of nearly noiseless steps (ε ≫ 100) needs a huge loss grid
MULTI_AMP_ABOVE = 1e5
#: multinomial DP-SGD: clipping norm C as a fraction of the softmax Lipschitz bound √2·R
MULTI_CLIP_FRACTION = 0.15
#: multinomial DP-SGD: learning rate η = MULTI_STEP_CLIP / C
MULTI_STEP_CLIP = 3.0
#: multinomial output perturbation: the effective rows (intercept included) are clipped
#: to this fraction of their public bound R (:func:`output_clip_fraction`)
OUTPUT_CLIP_FRACTION = 0.4
#: multinomial output perturbation with clipped rows: the implicit intercept column is
#: min(intercept_scaling, OUTPUT_INTERCEPT_SCALE·data_norm) (:func:`output_clip_fraction`)
OUTPUT_INTERCEPT_SCALE = 0.1
#: classification: objective perturbation above this ε (the consistency regime, where
#: the Λ rules fall like 1/(nε): :func:`dperm.losses.prior_margin`)
CONSISTENT_ABOVE = PRIOR_RELAX_ABOVE
#: the quantile regressor's DP-GD steps at most (:func:`quantile_steps`)
QUANTILE_MAX_STEPS = 5000
#: Huber threshold of the least-squares family as a fraction of the label bound B
HUBER_FRACTION = 0.4
#: the label scale of the quantile regressor's default radius when no bound is given
QUANTILE_SCALE = 5.0

#: the tasks the rule knows: the estimators' losses
TASKS = ("logistic", "huber-svm", "least-squares", "lasso", "elasticnet", "quantile", "huber")


@dataclass(frozen=True)
class AutoChoice:
    """What ``mechanism="auto"`` chose, and why.

    Attributes
    ----------
    mechanism : str
        A registered mechanism name.
    settings : dict
        Hyperparameters the rule sets (``epochs``, ``batch_size``,
        ``learning_rate``, ``averaging`` for DP-SGD; ``loss`` and ``threshold``
        for the Huber surrogate; ``label_scale`` for the quantile radius).  An
        estimator parameter given explicitly (not None) takes precedence.
    multi_class : {"multinomial", "ovr"} or None
        For k > 2 classes; None otherwise.
    reason : str
        One sentence: the public inputs and the branch of the rule.
    inputs : dict
        The public inputs the rule read (n, d, k, ε, δ, task, …).
    """

    mechanism: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    multi_class: str | None = None
    reason: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """``"auto → dp-sgd (epochs=2, batch_size=155, …) because …"``."""
        parts = [f"{k}={_fmt(v)}" for k, v in self.settings.items()]
        if self.multi_class is not None:
            parts.insert(0, self.multi_class)
        inner = f" ({', '.join(parts)})" if parts else ""
        return f"auto → {self.mechanism}{inner} because {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible copy (for ``diagnostics_`` and ``dperm fit --json``)."""
        return {
            "mechanism": self.mechanism,
            "settings": dict(self.settings),
            "multi_class": self.multi_class,
            "reason": self.reason,
            "inputs": dict(self.inputs),
            "description": self.describe(),
        }


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def dp_sgd_schedule(n_samples: int, n_coords: int, epsilon: float) -> dict[str, Any]:
    """The DP-SGD schedule of the auto rule: public (n, D, ε) → hyperparameters.

    * expected batch size b = clip(round(√n), 16, n) (≈ √n steps per epoch);
    * epochs E = clip(round(2 + 2ε), 2, 10);
    * last iterate; the learning rate is left to :func:`dperm.algorithms.dp_sgd.fit`
      (1/β, damped by the public noise level).

    This is the schedule of :func:`dperm.algorithms.dp_sgd.default_hyperparameters`,
    kept after the sweeps of ``docs/choosing_a_mechanism.md``: on validation splits of
    the training rows every alternative tried was lower at the same replace-one ε —
    Opacus' off-the-shelf configuration (batch 512, 15 epochs, η = 1: Adult ε = 0.1
    78.0 % vs 78.1 %, KDD Cup 99 95.4 % vs 97.6 %), tail averaging (−0.5 to −2 points),
    more epochs (MNIST ε = 1, 20 epochs: 78.0 % vs 77.0 %, within noise, 4× the time;
    Adult ε = 0.1, 4 epochs: −6 points), larger rates (η = 8, 16: −1 to −5 points) and
    one epoch at small ε (MNIST ε = 0.1: 32.5 % vs 43.5 %).  None of those alternatives
    clipped below the Lipschitz bound; binary logistic regression has its own schedule,
    :func:`binary_dp_sgd_schedule`, which does, and so has the multinomial one,
    :func:`multi_dp_sgd_schedule`; the auto rule no longer uses this schedule.

    Parameters
    ----------
    n_samples : int ≥ 1
    n_coords : int ≥ 1
        Parameters per class (d + 1 with an intercept); part of the public inputs,
        not used by today's rule.
    epsilon : float > 0

    Returns
    -------
    dict
        ``batch_size`` (int), ``epochs`` (int).

    Examples
    --------
    >>> dp_sgd_schedule(60_000, 785, 0.1)
    {'batch_size': 245, 'epochs': 2}
    >>> dp_sgd_schedule(60_000, 785, 1.0)
    {'batch_size': 245, 'epochs': 4}
    """
    n = check_count(n_samples, "n_samples")
    check_count(n_coords, "n_coords")
    eps = check_epsilon(epsilon)
    b = int(min(n, max(16, round(math.sqrt(n)))))
    epochs = int(min(10, max(2, round(2 + 2 * eps))))
    return {"batch_size": b, "epochs": epochs}


def binary_dp_sgd_schedule(n_samples: int, epsilon: float) -> dict[str, Any]:
    """The DP-SGD schedule of the auto rule for binary logistic regression.

    * expected batch size b = min(⌊n/5⌋, round(160/√ε)), at least min(16, n);
    * 15 epochs (≈ 15n/b steps), last iterate;
    * clipping norm C = :data:`BINARY_CLIP_FRACTION`·L, with L the Lipschitz bound of
      the loss over the public row bound (``clip_fraction``; the estimator turns it
      into C): clipping binds on the rows with large per-example gradients, and the
      noise, proportional to C, shrinks with it — at small ε the noise costs more
      than the clipping bias;
    * learning rate η = :data:`BINARY_STEP_CLIP`/C (``step_clip`` = η·C, the longest
      step one clipped gradient can make);
    * adaptive clipping from that C: ``target_unclipped_quantile`` γ =
      :data:`BINARY_CLIP_QUANTILE`, ``clipping_learning_rate`` :data:`CLIPPING_LEARNING_RATE`
      (Andrew, Thakkar, McMahan, Ramaswamy, NeurIPS 2021;
      :mod:`dperm.algorithms.adaptive_clipping`): the norm follows the γ-quantile of
      the per-example gradient norms, so rows well inside the public bound, or gradients
      that shrink as the model fits, stop paying noise for the worst case.  Same event,
      same (ε, δ): the count of unclipped examples takes a small share of the noise.

    Chosen on validation splits of the training rows (20 %, 3–4 noise seeds; the
    table in ``docs/choosing_a_mechanism.md``, script ``benchmarks/sweep_auto_binary.py``):
    within 0.2 point of the best of AMP, objective perturbation and DP-SGD's library
    schedule wherever s = nε/√D < 5000, and up to 4 points above them at ε = 0.1.
    The region around it is flat on Adult at ε = 0.1 (C/L ∈ [0.18, 0.45], η·C ∈
    [0.5, 0.8], batch 512–2048 at 15n/b ≈ 700 steps all within 0.2 point).

    Parameters
    ----------
    n_samples : int ≥ 1
        n (public under replace-one).
    epsilon : float > 0

    Returns
    -------
    dict
        ``batch_size`` (int), ``epochs`` (int), ``clip_fraction``, ``step_clip``,
        ``target_unclipped_quantile`` and ``clipping_learning_rate`` (float).

    Examples
    --------
    >>> binary_dp_sgd_schedule(30_162, 0.1)  # doctest: +NORMALIZE_WHITESPACE
    {'batch_size': 506, 'epochs': 15, 'clip_fraction': 0.27, 'step_clip': 0.65,
     'target_unclipped_quantile': 0.9, 'clipping_learning_rate': 0.2}
    >>> binary_dp_sgd_schedule(1_600, 0.1)["batch_size"]
    320
    """
    return _clipped_schedule(
        n_samples, epsilon, BINARY_CLIP_FRACTION, BINARY_STEP_CLIP, BINARY_CLIP_QUANTILE
    )


def _clipped_schedule(n_samples, epsilon, fraction, step, quantile) -> dict[str, Any]:
    """The clipped DP-SGD schedule shared by the binary and multinomial branches."""
    n = check_count(n_samples, "n_samples")
    eps = check_epsilon(epsilon)
    b = max(min(16, n), min(n // 5, round(160.0 / math.sqrt(eps))))
    return {
        "batch_size": int(b),
        "epochs": 15,
        "clip_fraction": fraction,
        "step_clip": step,
        "target_unclipped_quantile": quantile,
        "clipping_learning_rate": CLIPPING_LEARNING_RATE,
    }


def multi_dp_sgd_schedule(n_samples: int, epsilon: float) -> dict[str, Any]:
    """The DP-SGD schedule of the auto rule for multinomial (softmax) logistic regression.

    The binary schedule (:func:`binary_dp_sgd_schedule`: batch min(⌊n/5⌋, round(160/√ε)),
    at least min(16, n); 15 epochs; last iterate) with its own clipping and step:

    * clipping norm C = :data:`MULTI_CLIP_FRACTION`·L, L = √2·R the Lipschitz bound of
      the softmax loss over the public (augmented) row bound R;
    * learning rate η = :data:`MULTI_STEP_CLIP`/C;
    * adaptive clipping from that C towards the quantile :data:`MULTI_CLIP_QUANTILE`.

    Chosen on validation splits of the training rows (MNIST 50 000 / 10 000, synthetic
    k-class sets; the table in ``docs/choosing_a_mechanism.md``, script
    ``benchmarks/sweep_auto_multinomial.py``).  On MNIST at ε = 1 the region around it is
    flat (C/L ∈ [0.1, 0.2], η·C ∈ [2.5, 5]: 87.0–87.2 % on validation, AMP 80.5 %,
    the library schedule 78.1 %); the binary clipping and step (0.27·L, η·C = 0.65)
    reach 84.4 %: the softmax model wants longer steps.  It was above or level with
    AMP on every validation cell swept (nε/√(Dk) from 20 to 80 000), so the
    multinomial branch uses it below s = :data:`MULTI_AMP_ABOVE` (10⁵, beyond every
    swept cell; AMP above, where nearly noiseless DP-SGD steps make the PLD grid
    huge).  MNIST test, ε = 1, seeds 0–2: 88.6 %
    (AMP: 82.9 %).

    Parameters and returned keys: those of :func:`binary_dp_sgd_schedule`.

    Examples
    --------
    >>> multi_dp_sgd_schedule(60_000, 1.0)  # doctest: +NORMALIZE_WHITESPACE
    {'batch_size': 160, 'epochs': 15, 'clip_fraction': 0.15, 'step_clip': 3.0,
     'target_unclipped_quantile': 0.9, 'clipping_learning_rate': 0.2}
    """
    return _clipped_schedule(
        n_samples, epsilon, MULTI_CLIP_FRACTION, MULTI_STEP_CLIP, MULTI_CLIP_QUANTILE
    )


def output_clip_fraction(epsilon: float) -> float:
    """Multinomial output perturbation's row clipping: the fraction f of the public
    (augmented) row bound R to which its default clips the effective rows.

    f(ε) = min(1, f₀·max(1, ε/ε_c)),  f₀ = :data:`OUTPUT_CLIP_FRACTION`,
    ε_c = :data:`CONSISTENT_ABOVE`: f₀ up to ε = 10, then rising to 1 (no clipping)
    at ε = ε_c/f₀ = 25, so that the default tends to the non-private model as ε → ∞.

    The output-perturbation analogue of DP-SGD's clipping below the Lipschitz bound
    (:data:`MULTI_CLIP_FRACTION`): the release θ̂ + κ has ‖κ‖ ∝ L/(nΛ) with L = √2·r
    the softmax Lipschitz bound over rows ‖x̃‖ ≤ r (Chaudhuri, Monteleoni & Sarwate
    2011, Thm 6: Δ₂ = 2L/(nΛ)), so clipping the rows to r = f·R divides the noise by
    1/f while the Λ rule, evaluated at r, keeps the ridge's bias in the same units
    (Λ ∝ r²).  Rows already at the bound are only rescaled — a positive per-row
    factor leaves every argmax prediction unchanged, and the rescaled problem with
    Λ ∝ r² has the same minimizer up to the factor, so the fit is the same — while
    rows well inside it (MNIST's digits: ‖x‖ ≈ 0.33 under the public bound 1, plus
    the intercept column 0.5) stop paying for the worst case.  The default also makes
    the implicit intercept column min(s, :data:`OUTPUT_INTERCEPT_SCALE`·R), so that the
    clipped norm goes to the features (:mod:`dperm.estimators._output_rows`).  Chosen
    on validation splits of the training rows (``benchmarks/sweep_auto_multinomial.py
    --output-grid``; ``docs/choosing_a_mechanism.md``).  Public inputs only (ε).

    Examples
    --------
    >>> output_clip_fraction(1.0), output_clip_fraction(20.0), output_clip_fraction(1e4)
    (0.4, 0.8, 1.0)
    """
    eps = check_epsilon(epsilon)
    return float(min(1.0, OUTPUT_CLIP_FRACTION * max(1.0, eps / CONSISTENT_ABOVE)))


def quantile_steps(n_samples: int, n_coords: int, epsilon: float) -> int | None:
    """DP-GD steps of the quantile regressor's default beyond ε = :data:`CONSISTENT_ABOVE`.

    Up to ε = 10: None (DP-GD's own rule, clip(⌈nε/√D⌉, 20, 200)).  Beyond, the averaged
    subgradient method's optimization error (∝ 1/√T) is what separates the fit from the
    non-private quantile regression, so the cap of 200 grows like √(ε/10), up to
    :data:`QUANTILE_MAX_STEPS`: T = clip(⌈nε/√D⌉, 20, min(5000, 200·√(ε/10)))
    (California housing, ε = 10⁴: R² 0.625 with 200 steps, 0.673 with 6000, the
    non-private median regression ≈ 0.68).  Public (n, D, ε) only.

    Examples
    --------
    >>> quantile_steps(16_512, 9, 1.0) is None, quantile_steps(16_512, 9, 1e4)
    (True, 5000)
    """
    if epsilon <= CONSISTENT_ABOVE:
        return None
    cap = min(QUANTILE_MAX_STEPS, 200.0 * math.sqrt(epsilon / CONSISTENT_ABOVE))
    return int(min(cap, max(20, math.ceil(n_samples * epsilon / math.sqrt(n_coords)))))


def auto_choice(
    task: str,
    *,
    n_samples: int,
    n_features: int,
    epsilon: float,
    delta: float,
    n_classes: int = 2,
    fit_intercept: bool = True,
    penalty: str = "l2",
    constrained: bool = False,
    weighted: bool = False,
    label_bound: float | None = None,
    multi_class: str = "auto",
    alpha_given: bool = False,
    feature_scaling: str = "public",
) -> AutoChoice:
    """The mechanism and hyperparameters of ``mechanism="auto"`` (module docstring).

    A pure function of public inputs: the same arguments always give the same
    choice, and no argument is a statistic of the private data.

    Parameters
    ----------
    task : {"logistic", "huber-svm", "least-squares", "lasso", "elasticnet", "quantile", "huber"}
    n_samples : int ≥ 1
        n (public under replace-one).
    n_features : int ≥ 1
        d, without the intercept column.
    epsilon : float > 0
    delta : float in [0, 1)
    n_classes : int ≥ 2, default 2
        Size of the public label set (classifiers).
    fit_intercept : bool, default True
    penalty : str, default "l2"
        "l2", "l1", "elasticnet", "none", or "norm" for a :class:`~dperm.norms.Norm`.
    constrained : bool, default False
        A constraint set was given.
    weighted : bool, default False
        ``sample_weight`` is passed.
    label_bound : float or None
        The public bound B on |y| (regressors).
    multi_class : {"auto", "multinomial", "ovr"}, default "auto"
        The user's choice for k > 2 classes ("ovr" keeps one-vs-rest).
    alpha_given : bool, default False
        A numeric ``alpha`` (Λ) was given (e.g. by a grid search): classifiers then
        use objective perturbation, which honours any Λ (AMP's is bounded below by
        its theorem).
    feature_scaling : {"public", "private"}, default "public"
        "private" (logistic loss): the rows' public bound is generous, find the
        columns' location and scale privately — clipped DP-SGD with the private
        feature scaling of :mod:`dperm.algorithms.private_scaling` up to ε = 10 (binary
        and multinomial, the AMP regions included), its share of the budget
        :func:`scaling_share`; objective perturbation on the public features above
        ε = 10 and for the cases that need it (δ = 0, weights, penalties, constraints).

    Returns
    -------
    AutoChoice

    Raises
    ------
    UnknownNameError
        An unknown ``task``.
    InvalidPrivacyParameter
        Bad n, d, k, ε or δ.

    Examples
    --------
    >>> auto_choice("logistic", n_samples=30_000, n_features=104, epsilon=1.0,
    ...             delta=1e-9).mechanism
    'dp-sgd'
    >>> auto_choice("logistic", n_samples=30_000, n_features=104, epsilon=5.0,
    ...             delta=1e-9).mechanism
    'amp'
    >>> auto_choice("logistic", n_samples=30_000, n_features=104, epsilon=20.0,
    ...             delta=1e-9).mechanism
    'objective'
    >>> c = auto_choice("logistic", n_samples=60_000, n_features=784, n_classes=10,
    ...                 epsilon=1.0, delta=1e-10)
    >>> c.mechanism, c.multi_class
    ('dp-sgd', 'multinomial')
    """
    if task not in TASKS:
        raise UnknownNameError(f"unknown task {task!r}; choose one of {list(TASKS)}")
    n = check_count(n_samples, "n_samples")
    d = check_count(n_features, "n_features")
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta, allow_zero=True)
    k = check_count(n_classes, "n_classes")
    D = d + int(bool(fit_intercept))
    inputs = {
        "task": task,
        "n_samples": n,
        "n_features": d,
        "n_classes": k,
        "epsilon": eps,
        "delta": dlt,
        "penalty": penalty,
        "constrained": bool(constrained),
        "weighted": bool(weighted),
        "alpha_given": bool(alpha_given),
    }
    if label_bound is not None:
        inputs["label_bound"] = float(label_bound)
    inputs["feature_scaling"] = check_feature_scaling(feature_scaling, AUTO)

    def choice(mech, reason, settings=None, multi=None):
        return AutoChoice(mech, dict(settings or {}), multi, reason, inputs)

    if task in ("logistic", "huber-svm"):
        ovr = multi_class == "ovr"
        flags = (penalty, constrained, weighted, alpha_given, ovr)
        out = _classifier(task, n, D, k, eps, dlt, flags, choice)
        if feature_scaling == "private":
            return _with_private_scaling(out, task, n, D, k, eps, choice)
        return out
    if task == "huber":
        return choice("objective", "the Huber loss is smooth and Lipschitz for every label")
    if task == "quantile":
        steps = quantile_steps(n, D, eps)
        extra = {} if steps is None else {"epochs": steps}
        why = "" if steps is None else f"; ε > {CONSISTENT_ABOVE:g}: {steps} steps"
        if label_bound is None:
            return choice(
                "dp-gd-avg",
                "the pinball loss is Lipschitz but not smooth; no label_bound given, so the "
                f"radius uses the public label scale {QUANTILE_SCALE:g}{why}",
                {"label_scale": QUANTILE_SCALE, **extra},
            )
        return choice("dp-gd-avg", f"the pinball loss is Lipschitz but not smooth{why}", extra)
    # least squares, Lasso, elastic net: the Huber surrogate (module docstring)
    if label_bound is None:  # pragma: no cover - the estimators always pass B
        raise UnknownNameError(f"task {task!r} needs the public label_bound")
    h = HUBER_FRACTION * float(label_bound)
    return choice(
        "objective",
        f"the squared loss needs a constraint set and noise ∝ B = {label_bound:g}; the Huber "
        f"loss with h = {HUBER_FRACTION:g}·B is Lipschitz (hR) for every label and beat AdaSSP "
        "at every ε of the sweeps (California housing, CASP)",
        {"loss": "huber", "threshold": h},
    )


def _classifier(task, n, D, k, eps, dlt, flags, choice):
    penalty, constrained, weighted, alpha_given, ovr = flags
    multinomial = task == "logistic" and k > 2 and not ovr and not weighted
    multi = None if k <= 2 else ("multinomial" if multinomial else "ovr")
    special = [
        what
        for what, on in (
            ("δ = 0 (pure ε-DP: Gamma-norm noise)", dlt == 0.0),
            ("sample_weight", weighted),
            (f"penalty={penalty!r}", penalty not in ("l2", "none")),
            ("a constraint set", constrained),
            ("a numeric alpha", alpha_given),
        )
        if on
    ]
    if special:
        return choice(
            "objective",
            f"{' and '.join(special)} needs objective perturbation (it supports them all)",
            multi=multi,
        )
    if eps > CONSISTENT_ABOVE:
        return choice(
            "objective",
            f"ε = {eps:.4g} > {CONSISTENT_ABOVE:g}, beyond the swept cells: objective "
            "perturbation with the Λ rule that falls like 1/(nε) tends to the unregularized "
            "model (AMP's Λ stays ≥ β/n, clipped DP-SGD keeps its clipping bias)",
            multi=multi,
        )
    if multinomial:
        s = n * eps / math.sqrt(D * k)
        if s >= MULTI_AMP_ABOVE:
            return choice(
                "amp",
                f"k = {k} classes: one softmax model; nε/√(Dk) = {s:.4g} ≥ "
                f"{MULTI_AMP_ABOVE:g}, beyond the swept cells (the mechanisms were level at "
                "80 000), where AMP needs no T-step accounting",
                multi=multi,
            )
        return choice(
            "dp-sgd",
            f"k = {k} classes: one softmax model (nε/√(Dk) = {s:.4g}); DP-SGD clipped at "
            f"{MULTI_CLIP_FRACTION:g}·L was above or level with AMP and the library DP-SGD "
            "on every validation cell (nε/√(Dk) from 20 to 80 000)",
            multi_dp_sgd_schedule(n, eps),
            multi=multi,
        )
    if task == "huber-svm":
        return choice("objective", "the Huber-SVM default (the sweeps were logistic)", multi=multi)
    s = n * eps / math.sqrt(D)
    if s >= BINARY_AMP_ABOVE:
        return choice(
            "amp",
            f"nε/√D = {s:.4g} ≥ {BINARY_AMP_ABOVE:g}: the mechanisms agree within 0.3 point "
            "there and AMP needs no schedule",
            multi=multi,
        )
    return choice(
        "dp-sgd",
        f"nε/√D = {s:.4g} < {BINARY_AMP_ABOVE:g}: DP-SGD clipped at "
        f"{BINARY_CLIP_FRACTION:g}·L was the best or within 0.2 point of the best on every "
        "validation cell there (up to 4 points above AMP at ε = 0.1)",
        binary_dp_sgd_schedule(n, eps),
        multi=multi,
    )


def check_feature_scaling(feature_scaling, mechanism: str) -> str:
    """``feature_scaling`` checked: "public", or "private" with ``mechanism`` "auto" or
    "dp-sgd" (the mechanisms that apply it).

    Raises
    ------
    UnknownNameError
        Another value.
    InvalidPrivacyParameter
        "private" with another mechanism (it would be silently ignored).
    """
    if not isinstance(feature_scaling, str) or feature_scaling not in ("public", "private"):
        raise UnknownNameError(
            f"unknown feature_scaling {feature_scaling!r}; choose 'public' or 'private'"
        )
    if feature_scaling == "private" and mechanism not in (AUTO, "dp-sgd"):
        raise InvalidPrivacyParameter(
            "feature_scaling='private' is applied by DP-SGD: use mechanism='auto' or "
            f"'dp-sgd', got mechanism={mechanism!r}"
        )
    return feature_scaling


def scaling_share(n_samples: int, n_coords: int, n_classes: int, epsilon: float) -> float:
    """The share of the fit's budget (of μ² = z⁻² of the Gaussian mechanism meeting
    (ε, δ)) that the private feature scaling takes: :data:`SCALING_SHARE`/√(k − 1) for
    k ≥ 2 classes (0.3 for a binary model, 0.21 for 3 classes, 0.1 for 10) — a public
    rule of (n, D, k, ε) that reads k only: a multinomial model has k − 1 times the
    coefficients of a binary one, and its noisy steps need more of the budget.  Chosen
    on validation splits of the training rows of the CSV files of
    ``benchmarks/bench_csv_tables.py`` (``benchmarks/sweep_scale_adaptation.py``; the
    table in ``docs/choosing_a_mechanism.md``, "Private feature scaling").

    Examples
    --------
    >>> scaling_share(341, 31, 2, 1.0), round(scaling_share(1347, 65, 10, 8.0), 3)
    (0.3, 0.1)
    """
    check_count(n_samples, "n_samples")
    check_count(n_coords, "n_coords")
    k = check_count(n_classes, "n_classes", minimum=2)
    check_epsilon(epsilon)
    return float(SCALING_SHARE / math.sqrt(k - 1))


def adaptive_settings(rule: Mapping[str, Any], clipping_norm: float) -> dict[str, Any]:
    """The :func:`dperm.algorithms.dp_sgd.fit` settings of the rule's adaptive clipping
    (``rule`` a DP-SGD schedule of this module) below the rule's C = ``clipping_norm``: the
    norm starts there and only comes down (``max_clipping_norm``).  {} without one."""
    if rule.get("target_unclipped_quantile") is None:
        return {}
    return {
        "target_unclipped_quantile": rule["target_unclipped_quantile"],
        "clipping_learning_rate": rule["clipping_learning_rate"],
        "max_clipping_norm": float(clipping_norm),
    }


def scaling_settings(estimator, rule: Mapping[str, Any], loss, shape, epsilon) -> dict:
    """The :func:`dperm.algorithms.dp_sgd.fit` settings of ``feature_scaling="private"``
    (the estimator's parameter): its share, from ``rule`` or :func:`scaling_share` of
    (n, D) = ``shape`` and the loss's k; {} for "public"."""
    if getattr(estimator, "feature_scaling", "public") != "private":
        return {}
    k = int(getattr(loss, "n_classes", None) or 2)
    share = rule.get("scaling_share") or scaling_share(*shape, k, epsilon)
    return {"feature_scaling": "private", "scaling_share": share}


def _with_private_scaling(out: AutoChoice, task, n, D, k, eps, choice) -> AutoChoice:
    """``feature_scaling="private"``: clipped DP-SGD with the private feature scaling
    wherever the rule chose DP-SGD or AMP (its sweeps were on public features);
    unchanged (public features) where it needs objective perturbation."""
    if task != "logistic" or out.mechanism not in ("dp-sgd", "amp"):
        return dataclasses.replace(
            out,
            reason=out.reason + "; feature_scaling='private' applies to DP-SGD only, so "
            "the public features are used",
        )
    multi = out.multi_class == "multinomial"
    schedule = multi_dp_sgd_schedule(n, eps) if multi else binary_dp_sgd_schedule(n, eps)
    share = scaling_share(n, D, k if multi else 2, eps)
    schedule.update(feature_scaling="private", scaling_share=share)
    why = (
        f"feature_scaling='private': the columns' location and scale are found privately "
        f"(a share {share:g} of the budget), then DP-SGD clipped at "
        f"{MULTI_CLIP_FRACTION if multi else BINARY_CLIP_FRACTION:g}·L on the standardized "
        "features"
    )
    return choice("dp-sgd", why, schedule, multi=out.multi_class)


def prior_bound(estimator, loss, epsilon: float) -> float | None:
    """The public prior bound on ‖θ‖ with which objective perturbation chooses Δ:
    None (its default √k·B₀/R, B₀ the loss's :attr:`~dperm.losses.GLMLoss.margin_bound`)
    for the classifiers; for the regressors (``_relaxed_prior``) the loss's prior
    (Huber: 10·h, in the units of y, so the fit is equivariant in them) relaxed like
    √(ε/10) beyond ε = 10 (:func:`dperm.losses.prior_margin`)."""
    if not getattr(estimator, "_relaxed_prior", False):
        return None
    base = getattr(loss, "margin_bound", MARGIN_BOUND)
    return prior_margin(base, epsilon) / float(estimator.data_norm_)
