"""What :func:`dperm.load` checks after reading a model file, before returning it.

A model file is data from outside: an array may have been edited (NaN coefficients, an
intercept of the wrong length, a label set that does not match the coefficients, a
string dtype) and the privacy block may claim less than the event spent.  Each check
here refuses such a file with :class:`~dperm.exceptions.ModelFileError` naming the
attribute and what was expected, at load time — never a model that predicts wrong, or
fails late, or states a smaller ε than its event.
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Any

import numpy as np

from ..exceptions import DpermError, ModelFileError

#: relative slack of the ε check: the stated ε may exceed the event's by rounding only
_EPS_RTOL = 1e-6


def _real(obj: Any, name: str, *, low: float = 0.0, strict: bool = False) -> float:
    """A finite real attribute ≥ ``low`` (> ``low`` when ``strict``)."""
    v = getattr(obj, name, None)
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise ModelFileError(f"{name} must be a finite number in the model file, got {v!r}")
    if float(v) < low or (strict and float(v) == low):
        raise ModelFileError(f"{name} must be {'>' if strict else '≥'} {low:g}, got {v!r}")
    return float(v)


def _float_array(value: Any, name: str, ndim: int | tuple[int, ...]) -> np.ndarray:
    ndims = (ndim,) if isinstance(ndim, int) else ndim
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fi":
        kind = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise ModelFileError(f"{name} must be an array of real numbers, got {kind}")
    if value.ndim not in ndims:
        raise ModelFileError(f"{name} must have {ndims[0]} dimension(s), got shape {value.shape}")
    if not np.all(np.isfinite(value)):
        raise ModelFileError(f"{name} holds non-finite values (NaN or ∞)")
    return value


def check_estimator(est, meta: dict[str, Any]) -> None:
    """Shapes, dtypes, finiteness and mutual consistency of a loaded estimator's fitted
    attributes, and its stated (ε, δ) against its privacy event.

    Raises
    ------
    ModelFileError
    """
    coef = getattr(est, "coef_", None)
    if coef is None:
        raise ModelFileError("the model file has no coef_")
    classifier = bool(getattr(est, "_is_classifier", False))
    coef = _float_array(coef, "coef_", 2 if classifier else 1)
    d = coef.shape[-1]
    if classifier:
        k = coef.shape[0]
        classes = getattr(est, "classes_", None)
        if not isinstance(classes, np.ndarray) or classes.ndim != 1:
            raise ModelFileError("a classifier's model file needs a 1-D classes_")
        if classes.size < 2 or np.unique(classes).size != classes.size:
            raise ModelFileError(
                f"classes_ must hold at least two distinct labels, got {classes.size} "
                f"({np.unique(classes).size} distinct)"
            )
        expected_k = 1 if classes.size == 2 else classes.size
        if k != expected_k:
            raise ModelFileError(
                f"coef_ has {k} row(s) but classes_ has {classes.size} labels (expected "
                f"{expected_k} row(s))"
            )
        if meta.get("multinomial") and classes.size <= 2:
            raise ModelFileError("a multinomial model needs more than two classes_")
        public = getattr(est, "classes", None)
        if public is not None:
            want = np.unique(np.asarray(list(public)))
            if want.size != classes.size or not np.array_equal(
                want.astype(str), np.asarray(classes).astype(str)
            ):
                raise ModelFileError(
                    "classes_ differs from the public label set of the parameter classes"
                )
        intercept = _float_array(getattr(est, "intercept_", None), "intercept_", 1)
        if intercept.shape != (k,):
            raise ModelFileError(
                f"intercept_ must have shape ({k},) to match coef_, got {intercept.shape}"
            )
    else:
        _real(est, "intercept_", low=-math.inf)
    if not est.fit_intercept and np.any(np.atleast_1d(est.intercept_) != 0):
        raise ModelFileError("intercept_ must be 0 for a model with fit_intercept=False")
    n_in = getattr(est, "n_features_in_", None)
    if isinstance(n_in, bool) or not isinstance(n_in, numbers.Integral) or n_in != d:
        raise ModelFileError(f"n_features_in_ must equal coef_'s {d} columns, got {n_in!r}")
    names = getattr(est, "feature_names_in_", None)
    if names is not None and (
        not isinstance(names, np.ndarray) or names.shape != (d,) or names.dtype.kind not in "OU"
    ):
        raise ModelFileError(f"feature_names_in_ must be {d} names")
    for name in ("alpha_", "l2_"):
        if hasattr(est, name):
            _real(est, name)
    if hasattr(est, "data_norm_"):
        _real(est, "data_norm_", strict=True)
    _check_privacy(est, meta)


def _check_privacy(est, meta: dict[str, Any]) -> None:
    """ε_, δ_ and the relation agree with the privacy block and the event: the event must
    not spend more than the stated ε at the stated δ."""
    eps = _real(est, "epsilon_", strict=True)
    delta = _real(est, "delta_")
    if delta >= 1.0:
        raise ModelFileError(f"delta_ must be < 1, got {delta!r}")
    block = meta.get("privacy", {})
    for key, value in (("epsilon", eps), ("delta", delta)):
        stated = block.get(key)
        if not isinstance(stated, numbers.Real) or not math.isclose(
            float(stated), value, rel_tol=1e-12, abs_tol=0.0
        ):
            raise ModelFileError(
                f"the privacy block states {key} = {stated!r} but the model's {key}_ is {value!r}"
            )
    event = est.dp_event_
    relation = getattr(event, "neighbouring", None)
    if getattr(est, "neighbouring_", relation) != relation or block.get("neighbouring") != relation:
        raise ModelFileError(
            f"the neighbouring relation of the file ({block.get('neighbouring')!r}, "
            f"{getattr(est, 'neighbouring_', None)!r}) disagrees with its event's ({relation!r})"
        )
    _check_event_epsilon(event, eps, delta, "the model")


def _check_event_epsilon(event, eps: float, delta: float, what: str) -> None:
    """The event certifies ε ≤ ``eps`` at ``delta`` (fast accountants first)."""
    from ..accounting.registry import epsilon_spent

    spent = math.inf
    for accountant in ("basic", "rdp", "auto"):  # the first that certifies the claim wins
        try:
            spent = min(spent, epsilon_spent(event, delta, accountant))
        except DpermError:
            continue
        if spent <= eps * (1.0 + _EPS_RTOL) + 1e-12:
            return
    raise ModelFileError(
        f"{what}'s privacy event spends epsilon = {spent:.6g} at delta = {delta:g}, more "
        f"than the epsilon = {eps:g} the file states"
    )


def check_pipeline(pipe, meta: dict[str, Any]) -> None:
    """Each step's output width is the next step's input width; the stated (ε, δ) of the
    pipeline covers the composition of its steps' events.

    Raises
    ------
    ModelFileError
    """
    steps = [s for _, s in pipe.steps if not (isinstance(s, str) or s is None)]
    for i, (step, nxt) in enumerate(itertools.pairwise(steps)):
        try:
            width = len(step.get_feature_names_out())
        except (DpermError, AttributeError, TypeError, ValueError) as exc:
            raise ModelFileError(f"pipeline step {i} is incomplete: {exc}") from None
        if getattr(nxt, "n_features_in_", None) != width:
            raise ModelFileError(
                f"pipeline step {i} ({type(step).__name__}) outputs {width} features but the "
                f"next step ({type(nxt).__name__}) takes {getattr(nxt, 'n_features_in_', None)!r}"
            )
    for step in steps[:-1]:
        for name, value in vars(step).items():
            if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
                if not np.all(np.isfinite(value)):
                    raise ModelFileError(f"{type(step).__name__}.{name} holds non-finite values")
    block = meta.get("privacy", {})
    eps, delta = block.get("epsilon"), block.get("delta")
    if eps is None and isinstance(delta, numbers.Real):  # states no guarantee: claims nothing
        return
    if not all(isinstance(v, numbers.Real) for v in (eps, delta)):
        raise ModelFileError("the pipeline's privacy block needs a numeric epsilon and delta")
    from ..preprocessing import pipeline_dp_event

    event = pipeline_dp_event(pipe)
    _check_event_epsilon(event, float(eps), float(delta), "the pipeline")
