"""Issue #32: every multi-class fit on a Dask array crashed (``np.searchsorted`` of a
Dask target, AttributeError '_meta').  The multinomial target is now made by the
backend (:func:`dperm.design.class_indices`) and the Dask fit equals the numpy fit
of the same rows and seed, for each multinomial mechanism — the DP-SGD default bit
for bit (issue #39), output and objective perturbation and DP-GD to rounding — and
for one-vs-rest."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

from dperm.design import class_indices  # noqa: E402
from dperm.estimators import DPLogisticRegression  # noqa: E402
from dperm.exceptions import LabelError  # noqa: E402


@pytest.fixture(scope="module")
def three_classes():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (1500, 3)) / 2
    y = np.argmax(X @ rng.normal(size=(3, 3)), axis=1)
    return X, y, da.from_array(X, chunks=500), da.from_array(y, chunks=500)


@pytest.mark.parametrize(
    ("mechanism", "multi_class"),
    [
        ("auto", "auto"),  # the multinomial default: clipped DP-SGD on a softmax model
        ("objective", "multinomial"),
        ("output", "multinomial"),
        ("dp-gd", "auto"),
        ("amp", "ovr"),
    ],
)
def test_dask_multiclass_fit_equals_numpy(three_classes, mechanism, multi_class):
    X, y, Xd, yd = three_classes
    kw = dict(classes=[0, 1, 2], mechanism=mechanism, multi_class=multi_class, epsilon=3.0)
    a = DPLogisticRegression(random_state=0, **kw).fit(Xd, yd)
    b = DPLogisticRegression(random_state=0, **kw).fit(X, y)
    assert a.coef_.shape == b.coef_.shape == (3, 3)
    if mechanism == "auto":  # DP-SGD: the numpy steps on the lots' rows, bit for bit,
        # adaptive clipping included (the same norms Cₜ, from the same noisy counts)
        assert a.diagnostics_["mechanism"] == b.diagnostics_["mechanism"] == "dp-sgd"
        assert a.diagnostics_["clipping"] == b.diagnostics_["clipping"] == "adaptive"
        np.testing.assert_array_equal(
            a.diagnostics_["clipping_norms"], b.diagnostics_["clipping_norms"]
        )
        np.testing.assert_array_equal(a.coef_, b.coef_)
    # the others' sums are added partition by partition: the order of additions differs
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)
    assert a.score(X, y) == b.score(X, y) > 0.8


def test_class_indices_on_both_backends(three_classes):
    _, y, _, yd = three_classes
    classes = np.array([0, 1, 2])
    np.testing.assert_array_equal(class_indices(yd, classes).compute(), y)
    np.testing.assert_array_equal(class_indices(y, classes), y)


def test_dask_labels_outside_the_public_classes_are_refused(three_classes):
    _, y, Xd, _ = three_classes
    bad = da.from_array(np.where(y == 2, 7, y), chunks=500)
    with pytest.raises(LabelError, match="outside classes"):
        DPLogisticRegression(classes=[0, 1, 2], random_state=0).fit(Xd, bad)
