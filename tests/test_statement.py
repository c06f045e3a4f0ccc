"""dperm.statement: the privacy statement below the algorithms, shared by the
estimators' ``privacy_statement()`` and :mod:`dperm.io` (issue #19)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import dperm
from dperm import DPLogisticRegression
from dperm.statement import ModelFileError, estimator_statement


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) / 3
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # no row is clipped
    return DPLogisticRegression(classes=[0, 1], random_state=0).fit(X, (X[:, 0] > 0) * 1)


def test_the_statement_imports_no_estimator_and_no_io():
    probe = (
        "import sys, dperm.statement; "
        "print(sorted(m for m in sys.modules if m.startswith(('dperm.estimators', 'dperm.io', "
        "'dperm.algorithms', 'dperm.preprocessing'))))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().replace("'", '"')) == []


def test_method_function_and_file_share_one_text(fitted):
    text = estimator_statement(fitted)
    assert text == fitted.privacy_statement() == dperm.privacy_statement(fitted)
    assert text.startswith("Privacy statement for DPLogisticRegression (dperm ")
    assert dperm.io.ModelFileError is ModelFileError  # the io name still works


def test_a_subclass_has_a_statement_but_only_allow_listed_classes_are_saved(fitted):
    class Mine(DPLogisticRegression):
        pass

    mine = Mine(**fitted.get_params())
    for key, value in vars(fitted).items():
        if key.endswith("_"):
            setattr(mine, key, value)
    text = mine.privacy_statement()
    assert text.replace("Mine", "DPLogisticRegression", 1) == fitted.privacy_statement()
    with pytest.raises(ModelFileError, match="only dperm estimators"):
        dperm.privacy_statement(mine)
    with pytest.raises(NotFittedError):
        estimator_statement(DPLogisticRegression())
