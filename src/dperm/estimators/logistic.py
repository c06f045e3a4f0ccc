"""Differentially private logistic regression (scikit-learn API)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import ClassifierMixin

from ..losses import Logistic, Softmax
from ._base import DPLinearClassifierBase

__all__ = ["COMMON_ATTRIBUTES_DOC", "COMMON_PARAMETERS_DOC", "DPLogisticRegression"]

COMMON_PARAMETERS_DOC = """
    epsilon : float > 0, default=1.0
        Total privacy budget ε of the fit (split evenly over the k one-vs-rest
        problems when there are k > 2 classes: basic composition).
    delta : float in [0, 1) or None, default=None
        Total δ.  None → δ = 1/n² (n = number of training rows).  0 → pure ε-DP
        (Gamma-norm noise for "objective" / "output").
    mechanism : str, default="objective"
        A name registered in :mod:`dperm.estimators._mechanisms`: "objective"
        (objective perturbation: Chaudhuri et al. 2011 Alg. 2 for δ = 0, Kifer
        et al. 2012 Alg. 1 for δ > 0), "output" (output perturbation,
        Chaudhuri et al. 2011 Alg. 1 / analytic Gaussian), and those other
        modules register ("dp-gd", "dp-sgd", "amp", …).
    data_norm : float > 0, default=1.0
        Public bound on ‖x‖₂ of a feature row; rows above it are clipped to it
        (``n_clipped_`` counts them).  Never read from the data.
    alpha : float ≥ 0 or "auto", default="auto"
        Regularization strength Λ: the objective is
        (1/n)Σ ℓ + (Λ/2)‖θ‖² (penalty="l2").  "auto" is a public rule of
        (n, d, ε, R) registered with the mechanism (R = ``data_norm_``, the
        effective row bound): for "objective" and "output" the minimizer of
        the mechanism's excess-risk bound at this ε (it grows as ε shrinks),
        floored at R²/n; constants chosen on training splits only.  See
        :func:`dperm.estimators._mechanisms.objective_alpha_rule` and
        :func:`~dperm.estimators._mechanisms.output_alpha_rule`.  The value
        used is ``alpha_``.
    fit_intercept : bool, default=True
        Append a constant feature ``intercept_scaling``; the effective row bound
        becomes √(data_norm² + intercept_scaling²).  The intercept is
        regularized like the other coefficients (by the ℓ2 and ℓ1 terms; a
        Norm penalty leaves it unpenalized).
    intercept_scaling : float > 0, default=0.5
        Value of the constant feature.
    noise : {"auto", "gamma", "gaussian"}, default="auto"
        Noise family of "objective"/"output": Gamma-norm (pure ε) when δ = 0,
        Gaussian otherwise.
    penalty : {"l2", "l1", "elasticnet", "none"} or a dperm.norms.Norm, default="l2"
        "l1": r = Λ‖θ‖₁ (no ℓ2 term); "elasticnet": (Λ(1−l1_ratio)/2)‖θ‖² +
        Λ l1_ratio ‖θ‖₁.  Output perturbation needs an ℓ2 part (strong convexity).
        A :class:`~dperm.norms.Norm` Ω on the n_features coordinates (e.g.
        ``GroupLinfNorm(groups, d)``, ``SubmodularNorm(F, d)``, ``ChainTVNorm(d)``)
        is the elastic-net form with ℓ1 replaced by Ω: (Λ(1−l1_ratio)/2)‖θ‖² +
        Λ l1_ratio Ω(θ), the intercept not penalized by Ω; used by "objective",
        "output", "structured-output", "dual-frank-wolfe" and the prox of
        "dp-gd"/"dp-sgd" (InvalidDataError if Ω.d ≠ n_features).
    l1_ratio : float in [0, 1], default=0.5
        Used with penalty="elasticnet" or a Norm penalty.
    constraint : None, "l2", "l1", "box" or a Constraint, default=None
        Convex set C for θ (augmented with the intercept coordinate).
    constraint_radius : float > 0 or None, default=None
        Radius of the named constraint (a radius alone means an ℓ2 ball).
    tol : float > 0, default=1e-10
        Optimality residual the perturbation solvers must reach (fail closed).
    max_iter : int, default=10000
        Solver iteration cap.
    epochs, batch_size, learning_rate, clipping_norm, noise_multiplier, accountant : default=None
        Hyperparameters of the gradient-perturbation mechanisms (dp-gd, dp-sgd,
        amp, bolt-on); None means the mechanism's own default.  Ignored by
        "objective" and "output".
    classes : array-like of shape (n_classes,) or None, default=None
        The public label set (classifiers only).  Pass it: e.g. ``[0, 1]``,
        ``[-1, 1]``, ``range(10)``; labels outside it raise LabelError, and
        classes absent from the data still get a (private) one-vs-rest model.
        None reads the set off ``y`` as scikit-learn does, with a
        :class:`~dperm.exceptions.PrivacyLeakWarning` on every fit: *which*
        labels occur in the private data is then not protected (a class present
        in D but absent from a neighbour D′ changes ``classes_``, the shape of
        ``coef_`` and the budget split) — for two classes and for k > 2 alike.
        None stays allowed (with the warning) so that scikit-learn tooling that
        fits on arbitrary labels keeps working.  Ignored by DPLinearRegression.
    verbose : bool, default=False
        Show a progress bar during the iterations of the gradient-perturbation
        mechanisms ("dp-gd", "dp-sgd", "dp-sgd-single").
    random_state : None, int, SeedSequence or Generator, default=None
        Source of the privacy noise (None = fresh OS entropy).
"""

COMMON_ATTRIBUTES_DOC = """
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
        The public ``classes`` when given; otherwise read off ``y`` and then
        *outside* the privacy guarantee (PrivacyLeakWarning).
    epsilon_, delta_ : float
        The (ε, δ) certified for the whole fit (δ_ = 0 for pure-ε mechanisms),
        for the relation ``neighbouring_``.
    neighbouring_ : str
        The neighbouring relation of that guarantee: "replace-one" (D and D′
        of the same, public size n differ in one record) for every mechanism;
        read from ``dp_event_`` so it always agrees with what the accountants
        see.  See ``docs/neighbouring.md``.
    dp_event_ : DpEvent
        What the fit spent, for the accountants / a Ledger (one event per
        one-vs-rest problem, composed).
    n_clipped_ : int
        Rows whose norm exceeded ``data_norm`` and were clipped (data-dependent,
        not privatized: for the data owner).
    n_features_in_ : int
    alpha_ : float
        Λ used.
    data_norm_ : float
        Effective row bound of the augmented design.
    diagnostics_ : dict or list of dict
        The mechanism's diagnostics (calibration constants, solver report);
        the data-dependent entries (solver iterations and residual,
        ``n_clipped``, …) are outside the privacy guarantee, as is ``n_iter_``.
"""


class DPLogisticRegression(ClassifierMixin, DPLinearClassifierBase):
    """Differentially private logistic regression (full docstring below)."""

    # the full docstring shares the parameter list of every dperm estimator
    __doc__ = f"""Differentially private logistic regression.

    Minimizes (1/n)Σ log(1 + exp(−yᵢ⟨θ, xᵢ⟩)) + (Λ/2)‖θ‖² privately; two
    classes are mapped to ±1 (``classes_[1]`` ↦ +1), more classes are fitted
    one-vs-rest with the budget split evenly.  Neighbouring relation:
    replace-one.

    Parameters
    ----------{COMMON_PARAMETERS_DOC}
    multi_class : {{"ovr", "multinomial"}}, default="ovr"
        With k > 2 classes: "ovr" fits k binary problems at (ε/k, δ/k) each;
        "multinomial" fits one softmax model (loss
        :class:`~dperm.losses.Softmax`, Lipschitz √2·R) with the whole
        budget — with the gradient-perturbation mechanisms ("dp-sgd",
        "dp-gd", "dp-sgd-single"), whose clipping bounds the per-example
        gradient of the (d, k) parameter matrix, and with "objective",
        "output" and "amp" (softmax sensitivity and Jacobian bounds derived in
        ``docs/objective_perturbation.md``).
    Attributes
    ----------{COMMON_ATTRIBUTES_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from dperm import DPLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)) / 3
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPLogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1], random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.coef_.shape, clf.dp_event_, clf.neighbouring_
    ((1, 3), EpsilonDelta(epsilon=1.0, delta=2.5e-07...), 'replace-one')
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=None,
        mechanism="objective",
        data_norm=1.0,
        alpha="auto",
        fit_intercept=True,
        intercept_scaling=0.5,
        noise="auto",
        penalty="l2",
        l1_ratio=0.5,
        constraint=None,
        constraint_radius=None,
        tol=1e-10,
        max_iter=10_000,
        epochs=None,
        batch_size=None,
        learning_rate=None,
        clipping_norm=None,
        noise_multiplier=None,
        accountant=None,
        multi_class="ovr",
        classes=None,
        verbose=False,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.data_norm = data_norm
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.noise = noise
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.constraint = constraint
        self.constraint_radius = constraint_radius
        self.tol = tol
        self.max_iter = max_iter
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.clipping_norm = clipping_norm
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.multi_class = multi_class
        self.classes = classes
        self.verbose = verbose
        self.random_state = random_state

    def _make_loss(self):
        return Logistic()

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes).

        Binary: [1 − σ(s), σ(s)] with s the decision function.  One-vs-rest:
        the k sigmoids normalized to sum to 1 (post-processing of the private
        model: free).
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        if isinstance(self.loss_, Softmax):  # multinomial: the softmax itself
            return softmax(scores, axis=1)
        p = expit(scores)
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """log of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
