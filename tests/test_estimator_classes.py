"""A public label set (``classes=``) makes which labels occur in the private data
irrelevant to the release: the model shape and the budget split stay fixed."""

from __future__ import annotations

import numpy as np
import pytest

from dperm.estimators import DPLinearSVC, DPLogisticRegression
from dperm.exceptions import LabelError, PrivacyLeakWarning


@pytest.fixture
def three_class_data(rng):
    X = rng.normal(size=(600, 4))
    X /= 1.001 * np.linalg.norm(X, axis=1, keepdims=True)
    y = np.argmax(X[:, :3], axis=1)
    return X, y


@pytest.mark.parametrize("cls", [DPLogisticRegression, DPLinearSVC])
def test_public_classes_fix_the_shape_even_when_a_class_is_absent(cls, three_class_data):
    X, y = three_class_data
    keep = y != 2  # neighbouring-style situation: class 2 absent from this data set
    # a named mechanism: the auto rule may choose differently for the two sizes (n is
    # public under replace-one), which is not what this test is about
    kw = dict(epsilon=1.0, classes=[0, 1, 2], mechanism="objective", random_state=0)
    full = cls(**kw).fit(X, y)
    missing = cls(**kw).fit(X[keep], y[keep])
    assert full.coef_.shape == missing.coef_.shape == (3, 4)
    np.testing.assert_array_equal(full.classes_, missing.classes_)
    # same one-vs-rest split of the budget whatever the data contains
    assert full.dp_event_.to_dict()["kind"] == missing.dp_event_.to_dict()["kind"]
    # without classes=, the label set is read off the data and the shape changes (warned)
    with pytest.warns(PrivacyLeakWarning, match="classes="):
        assert cls(epsilon=1.0, random_state=0).fit(X[keep], y[keep]).coef_.shape == (1, 4)


def test_labels_outside_the_public_set_are_refused(three_class_data):
    X, y = three_class_data
    with pytest.raises(LabelError, match="outside classes"):
        DPLogisticRegression(classes=[0, 1]).fit(X, y)
