"""A differentially private multi-layer perceptron classifier (scikit-learn API).

:class:`DPMLPClassifier` is Abadi et al.'s recipe (CCS 2016, §5.1) as an estimator: an
optional differentially private PCA projection (:func:`dperm.networks.pca.analyze_gauss`),
then an MLP trained by DP-SGD with per-example gradients from PyTorch
(:func:`dperm.networks.fit`), both accounted as **one** event calibrated once: the
PCA's Gaussian mechanism (multiplier r·z) composed with T Poisson-sampled Gaussian
steps (multiplier z), z the smallest multiplier the accountant certifies for the
whole at (ε, δ) (:func:`dperm.networks.calibrate`).

Prediction is numpy only (``coefs_``/``intercepts_`` in scikit-learn's
``MLPClassifier`` layout): a saved model loads and predicts without torch.
"""

from __future__ import annotations

import math
import numbers
import warnings
from numbers import Integral, Real
from typing import ClassVar, Literal, Self

import numpy as np
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._parameters import (
    RANDOM_STATE,
    Accepted,
    Count,
    Names,
    Number,
    nonnegative,
    positive,
    store_params,
    validate_params,
)
from .._rng import check_random_state
from .._validation import (
    MAX_DATA_NORM,
    check_data_norm,
    check_delta,
    check_epsilon,
    check_positive,
)
from ..accounting.active import accounted_fit, charge, releasing
from ..accounting.events import Composed, DpEvent
from ..algorithms._gradient_calibration import ACCOUNTANTS
from ..algorithms._gradient_loop import AVERAGING, resolve_accountant
from ..design import encode_class_targets, validate_estimator_input
from ..exceptions import InvalidDataError, InvalidPrivacyParameter, PrivacyLeakWarning
from ..networks import calibrate, fit, make_plan
from ..networks._torch import resolve_device
from ..networks.mlp import (
    ACTIVATIONS,
    build_module,
    check_architecture,
    forward_numpy,
    init_parameters,
    module_parameters,
    quadratic_width,
)
from ..networks.pca import analyze_gauss, covariance_sensitivity, resolve_delta, row_scales
from ..sampling import check_neighbouring
from ._types import ArrayLike, RandomState

__all__ = [
    "DPMLPClassifier",
    "default_hidden_layer_sizes",
    "default_pca_components",
    "default_quadratic_features",
]


def n_in_width(model) -> int:
    """Number of network inputs of a fitted model: the PCA dimension, or n_features
    (before the quadratic feature map)."""
    return int(model.n_features_in_ if model.pca_components_ is None else model.n_components_)


#: PCA dimension of the default rule: 80 for the quadratic classifier (chosen on a
#: validation split of MNIST: 60 / 80 / 100 components gave 94.9 / 95.2 / 95.3 %), Abadi
#: et al.'s 60 for an MLP on the components; and the smallest input dimension at which
#: the rule projects (below it the network takes the raw features)
PCA_COMPONENTS = 60
PCA_COMPONENTS_QUADRATIC = 80
PCA_MIN_FEATURES = 100


def default_pca_components(n_features: int, quadratic: bool = False) -> int | None:
    """The public rule of ``n_components="auto"``: a projection when there are at least
    100 features — to 80 components when the network reads their quadratic features,
    to Abadi et al.'s 60 otherwise — else no projection (None)."""
    if n_features < PCA_MIN_FEATURES:
        return None
    return PCA_COMPONENTS_QUADRATIC if quadratic else PCA_COMPONENTS


def default_quadratic_features(n_components: int | None, epsilon: float) -> int:
    """The public rule of ``quadratic_features="auto"``: m, the number of leading
    whitened PCA inputs whose pairwise products are appended.

    Every component (m = k) with a DP PCA of k components, none (0) without one (raw
    features are not whitened).  Chosen on a validation split of MNIST's training rows
    (benchmarks/sweep_mlp.py, docs/neural_networks.md): at replace-one ε = 2,
    δ = 1/n², a linear softmax on [z, zᵢzⱼ] of 80 whitened components reached 95.2 %
    validation accuracy (products of 30 / 45 / 60 of 60 components: 94.3 / 94.6 /
    94.9 %) against 93.1 % for the best MLP and 91.8 % for the previous default; at
    ε = 0.5, 90.7 % against 87.0 %.  ``epsilon`` is validated only: the rule was best
    at both measured ε.
    """
    if n_components is None:
        return 0
    check_epsilon(epsilon)
    return int(n_components)


def default_hidden_layer_sizes(quadratic: int) -> tuple[int, ...]:
    """The public rule of ``hidden_layer_sizes="auto"``: no hidden layer on quadratic
    features (a degree-2 polynomial classifier: a convex model on fixed features),
    else Abadi et al.'s one hidden layer of 1 000 units."""
    return () if quadratic else (1000,)


def _auto_or_int(name: str, value, low: int, high: int, auto) -> int | None:
    """``value`` of a parameter taking "auto" (→ ``auto()``), None, or an integer in
    [low, high]; anything else raises InvalidPrivacyParameter naming it."""
    if value is None:
        return None
    if isinstance(value, str) and value == "auto":
        return auto()
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not low <= value <= high
    ):
        raise InvalidPrivacyParameter(
            f"{name} must be an integer in [{low}, {high}], 'auto' or None, got {value!r}"
        )
    return int(value)


class DPMLPClassifier(ClassifierMixin, BaseEstimator):
    """Differentially private MLP classifier: DP PCA + DP-SGD, one privacy event.

    Neighbouring relation: ``neighbouring``, **replace-one** by default (n public), or
    add/remove-one with the public ``dataset_size``.  No convexity: the guarantee is
    privacy only (no excess-risk bound; docs/neural_networks.md).

    Privacy.  Released: the PCA directions ``pca_components_`` (Analyze Gauss, DTTZ
    STOC 2014, Algorithm 1: Gaussian noise of multiplier r·z on the upper triangle of
    Σ xᵢxᵢᵀ over rows scaled onto the sphere of radius ``data_norm``; sensitivity
    ``data_norm``² (add/remove) or √2·``data_norm``² (replace-one),
    :func:`~dperm.networks.pca.covariance_sensitivity`) and the network weights (DP-SGD,
    Abadi et al. 2016, Algorithm 1: lots by Poisson sampling, per-example gradients
    clipped to ``clipping_norm``, Gaussian noise of multiplier z on the sum).  The
    composed event ``Composed((Gaussian(r·z), SelfComposed(PoissonSampled(q,
    Gaussian(z)), T)))`` is calibrated once and certified by ``accountant`` (PLD by
    default).  Everything else (the lot size, epochs, learning rate, the architecture
    and its initialisation) is a function of public inputs (n, d, k, ε) only.

    Parameters
    ----------
    hidden_layer_sizes : "auto", int or tuple of int, default="auto"
        "auto": :func:`default_hidden_layer_sizes` — none (a linear softmax) on
        quadratic features, else Abadi et al.'s MNIST network (one hidden layer of
        1 000 units).  ``()``: no hidden layer.
    activation : {"relu", "tanh", "sigmoid", "tempered_sigmoid"}, default="relu"
    epsilon : float, default=1.0
        Total ε of the fit (PCA and training together).
    delta : float or None, default=None
        Default min(1/n², 10⁻⁵) under replace-one; required under add/remove.
    n_components : int, "auto" or None, default="auto"
        PCA dimension k; "auto" = :func:`default_pca_components` (when n_features ≥
        100: 80 with quadratic features, 60 without; else no PCA); None: no PCA.
    pca_noise_ratio : float, default=4.0
        r: the PCA noise multiplier is r·z (Abadi et al. use σ_PCA ≈ 2σ with a longer
        run; with 60 epochs on MNIST, r = 4 and r = 2 gave the same accuracy and r = 4
        leaves more of ε to the training).
    data_norm : float, default=1.0
        Radius R of the sphere the rows are scaled onto before the PCA (a public
        per-record map; Abadi et al. use unit rows).  Unused without PCA.
    quadratic_features : "auto", int or None, default="auto"
        m: the network's inputs z (the whitened PCA coordinates, or the scaled
        features) are extended by the products zᵢzⱼ, 0 ≤ i ≤ j < m — a fixed public
        map (post-processing), m(m+1)/2 more inputs.  "auto":
        :func:`default_quadratic_features` (every PCA component; none without PCA);
        None or 0: no products.
    input_scale : "auto" or float, default="auto"
        How the network's inputs are scaled (post-processing of public and private
        releases only).  "auto": with PCA, each component j is divided by the root mean
        square √(λ̂ⱼ/N) of the projected rows, from the PCA's *noisy* eigenvalue λ̂ⱼ
        (already released) floored at the noise level 2σ√d (the spectral radius of the
        symmetric noise matrix) and N the public size — whitening, worth one point of
        accuracy on MNIST (benchmarks/bench_mlp.py); without PCA, x ↦ x·√d/R (rows of
        norm ≤ R get coordinates of order one).  A number: that fixed factor.
    clipping_norm : float, default=0.01
        C, the per-example gradient bound.  The default lies below (nearly) every
        per-example gradient norm, so each clipped gradient is C times its direction
        ("clip aggressively": De, Berrada, Hayes, Smith, Balle 2022; normalised
        per-example gradients, Bu et al. 2023); the default learning rate is η/C, so C
        sets no scale.  On MNIST's validation split C = 10 / 1 / 0.1 / 0.01 gave
        91.0 / 92.3 / 92.8 / 93.1 % (an MLP of 100 units, ε = 2).
    batch_size, epochs, learning_rate : int, int, float or None, default=None
        Default: :func:`dperm.networks.default_hyperparameters` of the public size
        (the learning rate there is on the scale C = 1: η/C is used).
    momentum : float, default=0.0
        Heavy-ball momentum on the noisy gradient (post-processing).
    averaging : {"tail", "last", "uniform"}, default="tail"
    weight_decay : float, default=0.0
        λ ≥ 0: the update direction is ĝ + λθ (post-processing; the event is
        unchanged).
    tempered_sigmoid : (scale, inverse_temperature, offset), default=(2.0, 2.0, 1.0)
        φ(x) = s·σ(Tx) − o for ``activation="tempered_sigmoid"`` (Papernot et al.,
        AAAI 2021); the default is tanh.
    neighbouring : {"replace-one", "add-remove"}, default="replace-one"
    dataset_size : int or None, default=None
        Public record count; required under add/remove.
    classes : array-like or None, default=None
        The public label set (else read off y, with a PrivacyLeakWarning).
    accountant : {"pld", "rdp"} or None, default=None
        Default "pld" ("rdp" cannot account replace-one Poisson sampling).
    device : {"cpu", "auto"} or str, default="cpu"
    random_state : None, int, SeedSequence or Generator, default=None
        Lots, noise, PCA noise and the initial weights; None = fresh OS entropy.

    Attributes
    ----------
    classes_ : ndarray of shape (k,)
    coefs_, intercepts_ : list of ndarray
        Weights (n_in, n_out) and biases of each layer (float64).
    pca_components_ : ndarray of shape (n_components, n_features) or None
    n_components_ : int or None
    input_scales_ : ndarray of shape (n_inputs,)
        Per-input factors of the network's inputs (``input_scale``).
    quadratic_features_ : int
        m of the quadratic feature map (0: none).
    dp_event_ : DpEvent
        What the fit spent (PCA and training composed).
    epsilon_, delta_ : float
    neighbouring_ : str
    noise_multiplier_ : float
        z of the training steps (the PCA's is ``pca_noise_ratio``·z); not saved by
        :func:`dperm.save` (it is in ``dp_event_``).
    n_iter_ : int
        DP-SGD steps T (likewise in ``dp_event_``).
    diagnostics_ : dict
        Public facts of the run (not privatized where they describe the data).
    n_features_in_ : int

    Raises
    ------
    ImportError
        ``fit`` without PyTorch (``pip install "dperm[torch]"``); ``predict`` needs
        only numpy.
    InvalidPrivacyParameter, InvalidDataError, LabelError, UnknownNameError

    Examples
    --------
    Needs torch to fit (skipped by the doctests; see docs/neural_networks.md):

    >>> import numpy as np
    >>> from dperm import DPMLPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = DPMLPClassifier(hidden_layer_sizes=(32,), epsilon=2.0, delta=1e-5,
    ...                       classes=[0, 1], random_state=0).fit(X, y)  # doctest: +SKIP
    >>> clf.neighbouring_, clf.score(X, y) > 0.9  # doctest: +SKIP
    ('replace-one', True)
    """

    #: read by dperm.io: the fitted attribute that marks a fitted model, its own statement
    _fitted_attribute = "coefs_"
    _own_statement = True

    #: what each parameter accepts, checked first in ``fit`` (:mod:`dperm._parameters`)
    _parameter_constraints: ClassVar[dict] = {
        "hidden_layer_sizes": [
            Names(("auto",)),
            Number(Integral, 1, None, closed="left"),
            list,
            tuple,
        ],
        "activation": [Names(ACTIVATIONS)],
        "epsilon": [positive()],
        "delta": [None, Number(Real, 0, 1)],
        "n_components": [None, Names(("auto",)), Number(Integral, 1, None, closed="left")],
        "pca_noise_ratio": [positive()],
        "data_norm": [positive(MAX_DATA_NORM, closed="right")],
        "quadratic_features": [None, Names(("auto",)), Number(Integral, 0, None, closed="left")],
        "input_scale": [Names(("auto",)), positive()],
        "clipping_norm": [positive()],
        "batch_size": [None, Count(1)],
        "epochs": [None, positive()],
        "learning_rate": [None, positive()],
        "momentum": [Number(Real, 0, 1, closed="left")],
        "averaging": [Names(AVERAGING)],
        "weight_decay": [nonnegative()],
        "tempered_sigmoid": [list, tuple],
        "neighbouring": [Accepted(check_neighbouring, "'replace-one' or 'add-remove'")],
        "dataset_size": [None, Count(1)],
        "classes": [None, "array-like"],
        "accountant": [None, Names(ACCOUNTANTS)],
        "device": [Accepted(resolve_device, "'cpu', 'auto', 'cuda[:k]' or a torch.device")],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        hidden_layer_sizes: int | tuple[int, ...] | Literal["auto"] = "auto",
        activation: Literal["relu", "tanh", "sigmoid", "tempered_sigmoid"] = "relu",
        *,
        epsilon: float = 1.0,
        delta: float | None = None,
        n_components: int | Literal["auto"] | None = "auto",
        pca_noise_ratio: float = 4.0,
        data_norm: float = 1.0,
        quadratic_features: int | Literal["auto"] | None = "auto",
        input_scale: float | Literal["auto"] = "auto",
        clipping_norm: float = 0.01,
        batch_size: int | None = None,
        epochs: int | None = None,
        learning_rate: float | None = None,
        momentum: float = 0.0,
        averaging: Literal["tail", "last", "uniform"] = "tail",
        weight_decay: float = 0.0,
        tempered_sigmoid: tuple[float, float, float] = (2.0, 2.0, 1.0),
        neighbouring: Literal["replace-one", "add-remove"] = "replace-one",
        dataset_size: int | None = None,
        classes: ArrayLike | None = None,
        accountant: Literal["pld", "rdp"] | None = None,
        device: str = "cpu",
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    # ----- parameters ---------------------------------------------------------------
    def _privacy_params(self, n: int) -> tuple[float, float, str]:
        eps = check_epsilon(self.epsilon)
        nb = check_neighbouring(self.neighbouring)
        return eps, resolve_delta(self.delta, nb, n), nb

    def _components(self, d: int, quadratic: bool) -> int | None:
        return _auto_or_int(
            "n_components", self.n_components, 1, d, lambda: default_pca_components(d, quadratic)
        )

    def _quadratic(self, n_inputs: int, k_pca: int | None, epsilon: float) -> int:
        m = _auto_or_int(
            "quadratic_features", self.quadratic_features, 0, n_inputs,
            lambda: default_quadratic_features(k_pca, epsilon),
        )  # fmt: skip
        return 0 if m is None else m

    def _architecture(self, quadratic: int) -> tuple:
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, str):
            if sizes != "auto":
                raise InvalidPrivacyParameter(
                    f"hidden_layer_sizes must be 'auto' or a sequence of integers ≥ 1, got "
                    f"{sizes!r}"
                )
            sizes = default_hidden_layer_sizes(quadratic)
        return check_architecture(sizes, self.activation, self.tempered_sigmoid)

    # ----- fit ----------------------------------------------------------------------
    @accounted_fit  # reserve before the data is read, commit dp_event_ (or cancel)
    def fit(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Fit the private PCA and network.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense (float32 kept as is).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Raises
        ------
        ImportError
            PyTorch is not installed.
        InvalidPrivacyParameter
            Bad ε, δ, relation, sizes, C, lot size, epochs, learning rate, PCA settings.
        InvalidDataError, LabelError
            Bad X or y; labels outside the public ``classes``; fewer than two classes.
        """
        validate_params(self)  # every parameter, before the data and any reservation
        if y is None:
            raise InvalidDataError(f"{type(self).__name__} requires y, got None")
        X, y = validate_estimator_input(self, X, y, reset=True)
        if not isinstance(X, np.ndarray):
            raise InvalidDataError(f"{type(self).__name__} needs a dense array X")
        n, d = X.shape
        eps, delta, nb = self._privacy_params(n)
        q = self.quadratic_features
        k_pca = self._components(d, quadratic=q == "auto" or bool(q))
        quadratic = self._quadratic(k_pca or d, k_pca, eps)
        sizes, act, ts = self._architecture(quadratic)
        ratio = check_positive(self.pca_noise_ratio, "pca_noise_ratio") if k_pca else None
        if isinstance(self.input_scale, str):
            if self.input_scale != "auto":
                raise InvalidPrivacyParameter(
                    f"input_scale must be 'auto' or a number > 0, got {self.input_scale!r}"
                )
            scale = None
        else:
            scale = check_positive(self.input_scale, "input_scale")
        R = check_data_norm(self.data_norm)
        encode_class_targets(self, y)
        codes = np.searchsorted(self.classes_, y)
        k = len(self.classes_)
        rng = check_random_state(self.random_state)

        dataset_size = self.dataset_size
        sampler, steps, _ = make_plan(
            n,
            epsilon=eps,
            neighbouring=nb,
            dataset_size=dataset_size,
            batch_size=self.batch_size,
            epochs=self.epochs,
        )
        accountant = "pld" if self.accountant is None else self.accountant
        accountant = resolve_accountant(accountant, sampler)
        z, event, spent = calibrate(
            sampler,
            steps,
            epsilon=eps,
            delta=delta,
            accountant=accountant,
            companion_ratio=ratio,
        )
        charge(event, type(self).__name__)  # an active dperm.budget, before the data is read

        if k_pca:
            comps, eig, pca_event, n_clipped = analyze_gauss(
                X,
                k_pca,
                noise_multiplier=ratio * z,
                data_norm=R,
                neighbouring=nb,
                mode="sphere",
                random_state=rng,
            )
            if scale is None:  # whitening by the released eigenvalues (post-processing)
                floor = 2.0 * ratio * z * covariance_sensitivity(R, nb) * math.sqrt(d)
                size = sampler.normalizer / sampler.sampling_rate  # public N
                input_scales = np.sqrt(size / np.maximum(eig, floor))
            else:
                input_scales = np.full(k_pca, scale)
            # released with the network, at the end (kept off self until then)
            inputs = self._project(X, comps, input_scales)
        else:
            comps, pca_event, n_clipped = None, None, 0
            input_scales = np.full(d, math.sqrt(d) / R if scale is None else scale)
            inputs = (np.asarray(X) * input_scales).astype(np.float32)
        self.quadratic_features_ = quadratic
        width = quadratic_width(inputs.shape[1], quadratic)
        coefs, intercepts = init_parameters([width, *sizes, k], rng)
        module = build_module(coefs, intercepts, act, ts, quadratic=quadratic)
        res = fit(
            module,
            inputs,
            codes,
            noise_multiplier=z,
            delta=delta,
            neighbouring=nb,
            dataset_size=dataset_size,
            clipping_norm=self.clipping_norm,
            # the plan that was calibrated (its epochs are a function of ε; fit is
            # given z, not ε): the same q and T, so the run is the calibrated event
            sampling_rate=sampler.sampling_rate,
            steps=steps,
            learning_rate=self.learning_rate,
            momentum=self.momentum,
            averaging=self.averaging,
            weight_decay=self.weight_decay,
            accountant=accountant,
            device=self.device,
            random_state=rng,
        )
        train_event = res.event
        full: DpEvent = train_event if pca_event is None else Composed((pca_event, train_event))
        if full != event:  # fail closed: the run must be the event that was calibrated
            raise InvalidPrivacyParameter(
                f"the fitted run's event {full!r} differs from the calibrated {event!r}; "
                "nothing is released"
            )
        if getattr(self, "_classes_from_data", False):
            warnings.warn(
                f"{type(self).__name__}: classes=None, so the label set classes_ was read off "
                "the private y; which labels occur is NOT protected by the privacy guarantee. "
                "Pass the public label set, e.g. classes=range(10).",
                PrivacyLeakWarning,
                stacklevel=3,  # +1: fit runs inside accounted_fit
            )
        # the release, after every check and warning: from here an exception keeps the
        # fit charged (what is assigned below has reached the caller's object)
        releasing()
        self.pca_components_, self.input_scales_ = comps, input_scales
        self.coefs_, self.intercepts_ = module_parameters(module)
        self.n_components_ = k_pca
        self.dp_event_ = event
        self.epsilon_, self.delta_ = eps, delta
        self.neighbouring_ = str(event.neighbouring)
        self.noise_multiplier_ = z
        self.n_iter_ = int(res.diagnostics["steps"])
        self.n_clipped_ = int(n_clipped)
        self.diagnostics_ = {
            **res.diagnostics,
            "epsilon": eps,
            "epsilon_spent": spent,
            "pca_noise_multiplier": None if ratio is None else ratio * z,
        }
        return self

    # ----- prediction ---------------------------------------------------------------
    def _project(self, X, comps, input_scales) -> np.ndarray:
        """Rows scaled onto the sphere of radius ``data_norm``, projected, × input_scales."""
        s, _ = row_scales(X, float(self.data_norm), "sphere")
        out = (np.asarray(X) @ comps.T) * s[:, None] * input_scales
        return out.astype(np.float32)

    def _inputs(self, X) -> np.ndarray:
        check_is_fitted(self, "coefs_")
        X = validate_estimator_input(self, X, reset=False)
        if self.pca_components_ is None:
            return np.asarray(X, dtype=np.float64) * self.input_scales_
        return self._project(X, self.pca_components_, self.input_scales_)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes) (numpy, no torch)."""
        logits = forward_numpy(
            self._inputs(X), self.coefs_, self.intercepts_, self.activation,
            self.tempered_sigmoid, getattr(self, "quadratic_features_", 0),
        )  # fmt: skip
        return softmax(logits, axis=1)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predicted class labels, shape (n_samples,).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit`` (issue #32: an AttributeError).
        """
        proba = self.predict_proba(X)  # NotFittedError first, as every sklearn estimator
        return self.classes_[np.argmax(proba, axis=1)]

    def privacy_statement(self) -> str:
        """A plain-language statement of the fitted model's guarantee (what is
        protected, under which relation, ε and δ, the mechanisms and the accountant,
        what is not covered)."""
        from ..statement import ACCOUNTANT_TEXTS, relation_text

        check_is_fitted(self, "coefs_")
        acc = self.accountant or "pld"
        ev = self.dp_event_  # the training part: T steps of multiplier z
        train = ev.events[-1] if isinstance(ev, Composed) else ev
        z, steps = train.event.event.noise_multiplier, train.count
        pca = (
            f"a {self.n_components_}-dimensional PCA projection released by the Gaussian "
            "mechanism on the second-moment matrix of the rows scaled to norm "
            f"{float(self.data_norm):g} (Analyze Gauss, Dwork, Talwar, Thakurta, Zhang, STOC "
            f"2014, Alg. 1; noise multiplier {self.pca_noise_ratio:g}·z), then "
            if self.n_components_
            else ""
        )
        lines = [
            f"Privacy statement for {type(self).__name__}",
            "",
            f"Guarantee. The released model ({'pca_components_, ' if self.n_components_ else ''}"
            f"coefs_, intercepts_) is (ε, δ)-differentially private with ε = "
            f"{float(self.epsilon_):.6g} and δ = {float(self.delta_):.6g}, protecting one "
            f"training record under the neighbouring relation {relation_text(self.neighbouring_)}."
            " Predictions inherit the guarantee (post-processing).",
            "",
            f"Mechanism. {pca}DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1) "
            f"of {self._model_text()}: Poisson-sampled lots, per-example gradients "
            f"clipped to {float(self.clipping_norm):g}, noise multiplier z = {z:.6g}, "
            f"{steps} steps.",
            "",
            f"Accounting. One event for everything released, calibrated once and certified "
            f"at δ by {ACCOUNTANT_TEXTS.get(acc, acc)}: {self.dp_event_.to_json()}",
            "",
            "Not covered:",
            "- an excess-risk or accuracy guarantee (none is claimed for this estimator).",
            "- hyperparameter tuning done outside this fit (each fit spends its own budget).",
            "- the floating-point implementation (the guarantee is that of the ideal "
            "real-valued mechanism, Mironov 2012).",
        ]
        if self.classes is None:
            lines.append(
                "- the label set classes_ was read from the training labels: which labels "
                "occur is not protected."
            )
        return "\n".join(lines) + "\n"

    def _model_text(self) -> str:
        """The trained model in words (privacy statement)."""
        m = int(getattr(self, "quadratic_features_", 0))
        feats = (
            f"its inputs and the {m * (m + 1) // 2} products of pairs of its first {m} "
            "inputs (a fixed quadratic feature map)"
            if m
            else "its inputs"
        )
        hidden = tuple(W.shape[1] for W in self.coefs_[:-1])
        if not hidden:
            return f"a linear softmax model on {feats}"
        return f"an MLP with hidden layers {hidden} and {self.activation} activations on {feats}"

    def _rebuild_from_file(self) -> None:
        """Check a model read by :func:`dperm.io.load` (public parameters and array
        shapes consistent; raises a DpermError, ValueError or TypeError otherwise)."""
        quadratic = getattr(self, "quadratic_features_", 0)  # files before 0.x: none
        if isinstance(quadratic, bool) or not isinstance(quadratic, numbers.Integral):
            raise InvalidDataError(f"quadratic_features_ must be an integer, got {quadratic!r}")
        if not 0 <= quadratic <= n_in_width(self):
            raise InvalidDataError(
                f"quadratic_features_ must be in [0, {n_in_width(self)}], got {quadratic}"
            )
        sizes, _, _ = self._architecture(int(quadratic))
        check_epsilon(self.epsilon_)
        check_delta(self.delta_, allow_zero=False)
        scales = np.asarray(self.input_scales_, dtype=np.float64)
        if scales.shape != (n_in_width(self),) or not np.all(np.isfinite(scales) & (scales > 0)):
            raise InvalidDataError("input_scales_ must be positive, one per network input")
        if self.dp_event_.neighbouring != check_neighbouring(self.neighbouring_):
            raise InvalidDataError("the event's relation differs from neighbouring_")
        coefs, intercepts = list(self.coefs_), list(self.intercepts_)
        widths = [quadratic_width(n_in_width(self), quadratic), *sizes, len(self.classes_)]
        if len(coefs) != len(widths) - 1 or len(intercepts) != len(coefs):
            raise InvalidDataError(f"{len(coefs)} layers saved, the architecture has {widths}")
        for W, b, a, c in zip(coefs, intercepts, widths[:-1], widths[1:], strict=True):
            if W.shape != (a, c) or b.shape != (c,) or W.dtype.kind != "f" or b.dtype.kind != "f":
                raise InvalidDataError(f"a layer of shape {W.shape} where {(a, c)} was expected")
            if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
                raise InvalidDataError("a layer holds non-finite weights (NaN or ∞)")
        if self.pca_components_ is not None:
            expected = (self.n_components_, self.n_features_in_)
            if self.pca_components_.shape != expected:
                raise InvalidDataError(f"pca_components_ must have shape {expected}")
            if not np.all(np.isfinite(self.pca_components_)):
                raise InvalidDataError("pca_components_ holds non-finite values (NaN or ∞)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
