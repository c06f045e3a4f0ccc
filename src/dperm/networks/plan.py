"""The plan of a network DP-SGD run from public inputs only: the default
hyperparameters, sampler and steps, the calibrated noise and the event, and the run's
privacy statement (no torch needed).

Shared by :func:`dperm.networks.make_private` (the user's loop),
:func:`dperm.networks.fit` (dperm's loop) and
:class:`~dperm.estimators.mlp.DPMLPClassifier`: one planning rule (:func:`make_plan`,
i.e. :func:`dperm.algorithms.dp_sgd.run_plan`), one calibration (:func:`calibrate`: the
smallest noise multiplier the accountant certifies, so a run spends 99.5–100 % of ε;
the certificate re-checked before use).  The event is Abadi et al.'s (CCS 2016, Alg. 1):
``SelfComposed(PoissonSampled(q, Gaussian(z)), T)``, sensitivity C (add/remove) or 2C
(replace-one) per lot sum; the default accountant is the privacy-loss distribution
(Koskela, Jälkö, Honkela, AISTATS 2020; Zhu, Dong, Wang, AISTATS 2022 for the sampled
Gaussian; via Google's dp-accounting), "rdp" the Rényi accountant (Mironov 2017;
Mironov, Talwar, Zhang 2019) — :data:`dperm.statement.ACCOUNTANT_TEXTS`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .._validation import (
    check_count,
    check_delta,
    check_delta_size,
    check_epsilon,
    check_positive,
)
from ..accounting.events import Composed, DpEvent, Gaussian
from ..algorithms import _gradient_loop as gl
from ..algorithms.dp_sgd import check_plan, run_plan
from ..exceptions import InvalidPrivacyParameter
from ..statement import ACCOUNTANT_TEXTS, relation_text

__all__ = ["RunPlan", "calibrate", "default_hyperparameters", "make_plan", "plan_run"]


def default_hyperparameters(n_samples: int, epsilon: float | None) -> dict:
    """Defaults of network DP-SGD from public quantities only (n and ε).

    The rule (measured on MNIST with the architecture of Abadi et al. — DP PCA to 60
    dimensions, 1 000 hidden ReLU units — at replace-one ε = 0.5 and 2,
    benchmarks/bench_mlp.py and docs/neural_networks.md):

    * lot size b = clip(round(n/50), 16, n), so q ≈ 0.02.  At a fixed number of epochs
      the noise on an epoch's averaged gradient hardly depends on b (z grows like
      √(qT)); lots of 1 200 (60 epochs) and 3 000 (100 epochs) gave the same accuracy
      on MNIST, and larger lots cost less per-step overhead;
    * epochs E = clip(round(30·(2ε)^{log 5/log 4}·√(n/60 000)), 10, 150): the
      geometric interpolation of the two measured optima on MNIST's n = 60 000 —
      30 epochs at replace-one ε = 0.5 (90.7 %; 75 epochs gave 87.1 %: at small ε
      more, noisier steps hurt) and 150 at ε = 2 (20 / 60 / 100 epochs gave
      93.1 / 94.5 / 94.8 %; one seed each, lots of 1 200) — capped at 150.  Smaller
      data sets get fewer passes (the factor √(n/60 000), at least 10), which keeps
      their runs short.  Re-checked for the default quadratic classifier of
      :class:`~dperm.estimators.mlp.DPMLPClassifier` (issue #31, validation split of
      MNIST's training rows, n = 50 000): at ε = 0.5, 15 / 27 (the rule) / 50 epochs
      gave 89.8 / 90.2 / 89.9 %;
    * learning rate η = 1 on the noisy *average* gradient with clipping norm C
      (:func:`fit` uses η/C: each step moves θ by at most η in the noiseless part), a
      constant schedule, and the uniform average of the last half of the iterates
      (``averaging="tail"``) to damp the noise.

    Parameters
    ----------
    n_samples : int
        Public dataset size (``dataset_size`` under add/remove).
    epsilon : float or None
        The target ε (None, for a given noise multiplier, counts as 1).

    Returns
    -------
    dict
        The expected lot size ``batch_size``, the passes ``epochs`` and the step size
        ``learning_rate`` of the noisy average gradient (before the 1/C of :func:`fit`).

    Examples
    --------
    >>> default_hyperparameters(60_000, 2.0)
    {'batch_size': 1200, 'epochs': 150, 'learning_rate': 1.0}
    """
    n = check_count(n_samples, "n_samples")
    eps = 1.0 if epsilon is None else check_epsilon(epsilon)
    b = int(min(n, max(16, round(n / 50))))
    growth = (2.0 * eps) ** (math.log(5.0) / math.log(4.0))
    epochs = int(min(150, max(10, round(30.0 * growth * math.sqrt(n / 60_000)))))
    return {"batch_size": b, "epochs": epochs, "learning_rate": 1.0}


def make_plan(
    n_rows: int,
    *,
    epsilon: float | None,
    neighbouring: str,
    dataset_size: int | None,
    sampling: str = "poisson",
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    epochs: float | None = None,
    steps: int | None = None,
):
    """The sampler and step count of a run, from public inputs only.

    Returns
    -------
    sampler : dperm.sampling.Sampler
    steps : int
    defaults : dict
        :func:`default_hyperparameters` of the public size.

    Raises
    ------
    InvalidPrivacyParameter
        Both ``sampling_rate`` and ``batch_size``, both ``epochs`` and ``steps``, a
        missing public ``dataset_size`` under add/remove, a batch larger than the data.
    UnknownNameError
        Unknown ``sampling``.
    """
    neighbouring = gl.check_neighbouring(neighbouring)
    dataset_size = gl.check_dataset_size(dataset_size)
    size = gl.public_size(neighbouring, dataset_size, n_rows, "the dataset size")
    sampling_rate, batch_size, epochs, steps = check_plan(sampling_rate, batch_size, epochs, steps)
    defaults = default_hyperparameters(size, epsilon)
    sampler, steps = run_plan(
        sampling, n_rows, size, defaults, sampling_rate, batch_size, epochs, steps,
        neighbouring, dataset_size,
    )  # fmt: skip
    return sampler, steps, defaults


_JOINT_CACHE: dict[tuple, float] = {}


def calibrate(
    sampler,
    steps: int,
    *,
    epsilon,
    delta,
    noise_multiplier=None,
    accountant: str,
    companion_ratio: float | None = None,
) -> tuple[float, DpEvent, float | None]:
    """Noise multiplier z of the training run, the event of everything the run releases,
    and ε spent at δ.

    Without ``companion_ratio`` this is
    :func:`dperm.algorithms._gradient_calibration.resolve_noise` (the event is
    ``sampler.event(z, steps)``).  With it, the run also releases one Gaussian
    mechanism of multiplier ``companion_ratio``·z under the same relation (the DP PCA
    of :class:`~dperm.networks.pca.DPPCA`, as in Abadi et al., §5.1) and z is the
    smallest multiplier for which the *composition*
    ``Composed((Gaussian(r·z), SelfComposed(PoissonSampled(q, Gaussian(z)), T)))`` is
    certified (ε, δ)-DP by ``accountant`` — one event, one calibration, re-checked
    before use (fail closed).

    Raises
    ------
    InvalidPrivacyParameter
        As :func:`~dperm.algorithms._gradient_calibration.resolve_noise`.
    """
    if companion_ratio is None:
        target = {"epsilon": epsilon, "delta": delta, "noise_multiplier": noise_multiplier}
        return gl.resolve_noise(sampler, steps, accountant=accountant, **target)
    r = check_positive(companion_ratio, "companion_ratio")
    nb = sampler.neighbouring
    if delta is not None:  # δ ≥ 1/N is a void guarantee (issue #32), as in gl.resolve_noise
        check_delta_size(delta, sampler.public_size, size="n" if nb == "replace-one" else "N")

    def make_event(z: float) -> DpEvent:
        return Composed((Gaussian(r * z, neighbouring=nb), sampler.event(z, steps)))

    if noise_multiplier is None:
        if epsilon is None:
            raise InvalidPrivacyParameter(
                "give epsilon and delta (the noise is then calibrated) or noise_multiplier, "
                "got neither"
            )
        eps, dlt = check_epsilon(epsilon), check_delta(delta, allow_zero=False)
        key = (make_event(1.0), eps, dlt, accountant)
        z = _JOINT_CACHE.get(key)
        if z is None:
            z = gl.calibrate_noise_multiplier(make_event, eps, dlt, accountant, neighbouring=nb)
            _JOINT_CACHE[key] = z
    else:
        z = check_positive(noise_multiplier, "noise_multiplier")
        if epsilon is not None:
            gl.check_spent(
                make_event(z), check_epsilon(epsilon), delta, accountant,
                what=f"noise_multiplier={z:g} with the companion Gaussian (ratio {r:g})",
            )  # fmt: skip
    event = make_event(z)
    spent = None if delta is None else gl.epsilon_of(event, delta, accountant)
    return z, event, spent


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
    target = {"epsilon": epsilon, "delta": delta}
    z, event, spent = calibrate(
        sampler, steps, noise_multiplier=noise_multiplier, accountant=accountant, **target
    )
    plan = RunPlan(sampler, steps, float(z), event, C, accountant, epsilon, delta, spent, epochs)
    return plan, defaults
