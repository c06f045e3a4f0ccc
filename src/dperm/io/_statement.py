"""The privacy statement of a model :mod:`dperm.io` can save: the allow-list, then the text.

The text itself is :mod:`dperm.statement`'s (shared with the estimators'
``privacy_statement()``); a pipeline's composed event and (ε, δ) are computed here.
"""

from __future__ import annotations

from ..accounting.events import DpEvent
from ..statement import estimator_statement, pipeline_statement
from ._format import _fitted_model, _is_pipeline


def _pipeline_privacy(pipe) -> tuple[DpEvent, float, float]:
    """(composed event, ε, δ) of a fitted pipeline: the steps' events composed
    (:func:`~dperm.preprocessing.pipeline_dp_event`), δ the sum of the steps' δ, ε the
    smallest valid bound at that δ (the "auto" accountant)."""
    from ..accounting.registry import epsilon_spent
    from ..preprocessing import pipeline_dp_event

    event = pipeline_dp_event(pipe)
    delta = 0.0
    for _, step in pipe.steps:
        delta += float(getattr(step, "delta_", 0.0) or 0.0)
    delta = min(delta, 1.0 - 1e-12)
    return event, float(epsilon_spent(event, delta, "auto")), delta


def privacy_statement(model) -> str:
    """A plain-language statement of what a fitted dperm estimator (or a Pipeline of
    :mod:`dperm.preprocessing` steps ending in one) guarantees.

    In the spirit of TF Privacy's ``compute_dp_sgd_privacy_statement``: what is
    protected (one record, under which neighbouring relation), ε and δ, the
    mechanism and the theorem or accountant that certifies them, the public
    bounds the guarantee assumes, and what the guarantee does *not* cover.

    Parameters
    ----------
    model : fitted dperm estimator, sklearn.pipeline.Pipeline, or a DP optimizer
        E.g. :class:`~dperm.estimators.DPLogisticRegression`, or the optimizer of
        :func:`dperm.networks.make_private` (the statement of its run).  For a pipeline the
        statement gives the composed (ε, δ) of every step (its δ is the sum of the
        steps' δ, its ε the "auto" accountant's bound at that δ), what each step spends,
        then the final estimator's statement.

    Returns
    -------
    str
        Several paragraphs of text (deterministic: the same model gives the
        same statement, also after :func:`save` / :func:`load`).

    Raises
    ------
    ModelFileError
        If ``model`` is not a dperm estimator.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    """
    if getattr(model, "_private_run", False):  # a run of dperm.networks.make_private
        return model.privacy_statement()
    if _is_pipeline(model):
        event, epsilon, delta = _pipeline_privacy(model)
        return pipeline_statement(model, event, epsilon, delta, privacy_statement)
    _fitted_model(model)
    if getattr(model, "_own_statement", False):  # e.g. DPMLPClassifier (no coef_)
        return model.privacy_statement()
    return estimator_statement(model)
