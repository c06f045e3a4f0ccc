"""Differentially private logistic regression (scikit-learn API)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import ClassifierMixin

from .._parameters import Names
from ..losses import Logistic, Softmax
from ._auto import check_feature_scaling
from ._base import DPLinearClassifierBase
from ._params import (
    CLASSIFIER_ATTRIBUTES,
    LINEAR,
    Param,
    ParamDoc,
    Spec,
    estimator_parameters,
    parameters_section,
)
from ._types import MatrixLike

__all__ = ["COMMON_ATTRIBUTES_DOC", "COMMON_PARAMETERS_DOC", "DPLogisticRegression"]


@estimator_parameters(
    *LINEAR,
    "multi_class",
    "classes",
    "feature_scaling",
    "verbose",
    "random_state",
    attributes=CLASSIFIER_ATTRIBUTES,
    feature_scaling=Param(
        Spec("public", "Literal['public', 'private']", [Names(("public", "private"))]),
        ParamDoc(
            '{"public", "private"}',
            """"public": the rows are used as given, inside their public bound
        ``data_norm``.  "private": the bound is honest but generous (e.g. a CSV file's
        column bounds written from domain knowledge), so the fit first finds every
        column's location and scale privately — three Gaussian releases within the
        public bound, :mod:`dperm.algorithms.private_scaling` — and runs DP-SGD on the
        standardized features; its share of (ε, δ) is a public rule of (n, d, k, ε)
        (:func:`dperm.estimators._auto.scaling_share`), its release is composed into
        ``dp_event_`` and the coefficients are those of the original features.  With
        ``mechanism="auto"`` (or "dp-sgd"); above ε = 10 and where the rule needs
        objective perturbation the public features are used (``auto_`` says so).
        ``dperm fit --csv`` uses "private".""",
        ),
    ),
    multi_class=Param(
        Spec("auto", "MultiClass", [Names(("auto", "ovr", "multinomial"))]),
        ParamDoc(
            '{"ovr", "multinomial"}',
            """With k > 2 classes: "ovr" fits k binary problems at (ε/k, δ/k) each;
        "multinomial" fits one softmax model (loss
        :class:`~dperm.losses.Softmax`, Lipschitz √2·R) with the whole
        budget — with the gradient-perturbation mechanisms ("dp-sgd",
        "dp-gd", "dp-sgd-single"), whose clipping bounds the per-example
        gradient of the (d, k) parameter matrix, and with "objective",
        "output" and "amp" (softmax sensitivity and Jacobian bounds derived in
        ``docs/objective_perturbation.md``).""",
        ),
    ),
)
class DPLogisticRegression(ClassifierMixin, DPLinearClassifierBase):
    """Differentially private logistic regression.

    Minimizes (1/n)Σ log(1 + exp(−yᵢ⟨θ, xᵢ⟩)) + (Λ/2)‖θ‖² privately; two
    classes are mapped to ±1 (``classes_[1]`` ↦ +1), more classes are fitted
    one-vs-rest with the budget split evenly.  Neighbouring relation:
    replace-one.

    Examples
    --------
    >>> import numpy as np
    >>> from dperm import DPLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)) / 3
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPLogisticRegression(epsilon=1.0, data_norm=2.0, classes=[0, 1], random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.coef_.shape, clf.mechanism_, clf.neighbouring_
    ((1, 3), 'dp-sgd', 'replace-one')
    >>> clf.epsilon_, clf.delta_  # certified by the PLD accountant of its event dp_event_
    (1.0, 2.5e-07)
    """

    def _make_loss(self):
        return Logistic()

    def _check_params(self, n: int, d: int):
        out = super()._check_params(n, d)
        check_feature_scaling(self.feature_scaling, self.mechanism)
        return out

    def predict_proba(self, X: MatrixLike) -> np.ndarray:
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

    def predict_log_proba(self, X: MatrixLike) -> np.ndarray:
        """log of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


# the former names of the shared fragments (kept importable): the shared parameter
# entries as DPLogisticRegression documents them, and the classifiers' attributes
COMMON_PARAMETERS_DOC = parameters_section(
    DPLogisticRegression.__init__, exclude=("multi_class", "feature_scaling")
)
COMMON_ATTRIBUTES_DOC = CLASSIFIER_ATTRIBUTES
