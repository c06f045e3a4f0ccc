"""The plan of a network DP-SGD run from public inputs only: sampler, steps, calibrated
noise, event, and the run's privacy statement (no torch needed).

Shared by :func:`dperm.networks.make_private` (the user's loop) and
:func:`dperm.networks.fit` (dperm's loop): one planning rule (:func:`.dp_sgd.make_plan`,
i.e. :func:`dperm.algorithms.dp_sgd.run_plan`), one calibration
(:func:`.dp_sgd.calibrate`: the smallest noise multiplier the accountant certifies, so the
run spends 99.5–100 % of ε; the certificate re-checked before use).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._validation import check_epsilon, check_positive
from ..accounting.events import DpEvent
from ..algorithms import _gradient_loop as gl
from ..statement import ACCOUNTANT_TEXTS, relation_text
from .dp_sgd import calibrate, make_plan

__all__ = ["RunPlan", "plan_run"]


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """The public constants of one run and the event they imply.

    Attributes
    ----------
    sampler : dperm.sampling.Sampler
    steps : int
        T, the noisy steps (lots).
    noise_multiplier : float
        z.
    event : DpEvent
        ``sampler.event(z, T)``.
    clipping_norm : float
        C.
    accountant : str
    epsilon, delta : float or None
        The target (ε None: a given noise multiplier).
    epsilon_spent : float or None
        ε the accountant certifies for ``event`` at δ.
    epochs : float
    """

    sampler: Any
    steps: int
    noise_multiplier: float
    event: DpEvent
    clipping_norm: float
    accountant: str
    epsilon: float | None
    delta: float | None
    epsilon_spent: float | None
    epochs: float | None

    @property
    def neighbouring(self) -> str:
        return self.sampler.neighbouring

    @property
    def normalizer(self) -> float:
        """q·N: every noisy sum is divided by this public number."""
        return float(self.sampler.normalizer)

    @property
    def noise_std(self) -> float:
        """σ = z·Δ on every coordinate of a lot's sum (Δ = C or 2C)."""
        return self.noise_multiplier * self.sampler.sensitivity_factor * self.clipping_norm

    def statement(self, optimizer: str) -> str:
        """The plain-language privacy statement of the run (what is protected, by what,
        and what is not covered)."""
        s = self.sampler
        eps = self.epsilon_spent
        eps_text = "∞ (no noise)" if eps is None else f"{eps:.4g}"
        delta = "" if self.delta is None else f" and δ = {self.delta:g}"
        size = (
            f"the public dataset size N = {s.public_size}"
            if s.neighbouring == "add-remove"
            else f"n = {s.public_size} records"
        )
        lines = [
            "Privacy statement for a DP-SGD run in the caller's own loop "
            "(dperm.networks.make_private)",
            "",
            "Guarantee. Every model the optimizer produces — the parameters after each of "
            f"its {self.steps} noisy steps — is (ε, δ)-differentially private with ε = "
            f"{eps_text}{delta}, protecting one training record under the neighbouring "
            f"relation {relation_text(s.neighbouring)}. Anything computed from those "
            "parameters alone inherits the guarantee (post-processing).",
            "",
            "Mechanism. DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1): "
            f"Poisson lots (sampling rate q = {s.sampling_rate:.6g} of {size}), every "
            f"per-example gradient clipped to ℓ2 norm C = {self.clipping_norm:g} over all "
            f"trainable parameters, Gaussian noise of multiplier z = "
            f"{self.noise_multiplier:.6g} (std {self.noise_std:.6g}) on each lot's sum, "
            f"divided by the public expected lot size {self.normalizer:g}; the {optimizer} "
            "step that follows is post-processing.",
            "",
            f"Accounting. ε was computed at δ by {ACCOUNTANT_TEXTS.get(self.accountant)} for "
            f"the whole planned run (charged to the active dperm budget, if any, before the "
            f"first lot was drawn). Privacy event (for a dperm Ledger): {self.event.to_json()}",
            "",
            "Not covered:",
            "- anything the training loop computes from the data outside the optimizer's "
            "step and prints or keeps: the training loss, training accuracy, per-batch "
            "statistics;",
            "- a loss that is not a sum or mean of per-record losses, or layers and buffers "
            "that mix the records of a batch (batch normalisation is refused);",
            "- initial weights that depend on the private data, and hyperparameters tuned on it;",
            "- the floating-point implementation (the guarantee is that of the ideal "
            "real-valued mechanism, Mironov 2012), and a known random seed.",
        ]
        return "\n".join(lines) + "\n"


def plan_run(
    n_rows: int,
    *,
    epsilon,
    delta,
    neighbouring: str,
    dataset_size,
    clipping_norm,
    sampling: str = "poisson",
    sampling_rate=None,
    batch_size=None,
    epochs=None,
    steps=None,
    noise_multiplier=None,
    accountant=None,
) -> tuple[RunPlan, dict]:
    """Plan and calibrate a run from public inputs (the caller charges ``plan.event`` to
    the active budgets before it draws the first lot).

    Returns
    -------
    plan : RunPlan
    defaults : dict
        :func:`~dperm.networks.default_hyperparameters` of the public size.

    Raises
    ------
    InvalidPrivacyParameter, UnknownNameError, UnsupportedEventError
    """
    C = check_positive(clipping_norm, "clipping_norm")
    if epsilon is not None:
        check_epsilon(epsilon)
    if accountant is not None:
        gl.check_accountant(accountant)
    sampler, steps, defaults = make_plan(
        n_rows,
        epsilon=epsilon,
        neighbouring=neighbouring,
        dataset_size=dataset_size,
        sampling=sampling,
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        epochs=epochs,
        steps=steps,
    )
    accountant = gl.resolve_accountant(accountant, sampler)
    z, event, spent = calibrate(
        sampler,
        steps,
        epsilon=epsilon,
        delta=delta,
        noise_multiplier=noise_multiplier,
        accountant=accountant,
    )
    plan = RunPlan(
        sampler=sampler,
        steps=steps,
        noise_multiplier=float(z),
        event=event,
        clipping_norm=C,
        accountant=accountant,
        epsilon=epsilon,
        delta=delta,
        epsilon_spent=spent,
        epochs=epochs,
    )
    return plan, defaults
