"""The DP optimizer of a user's training loop: any torch optimizer behind DP-SGD's
clip → sum → noise → normalise (imports torch).

:class:`DPOptimizer` wraps the caller's optimizer (SGD, Adam, AdamW, … with their
schedules: ``torch.optim.lr_scheduler`` accepts it).  ``optimizer.step()``:

1. takes the clipped per-example gradient sum of the batch the private loader just
   yielded (:class:`~dperm.networks._clipper.GradSampler`: every record clipped to C over
   all trainable parameters) and adds it to the lot's sum;
2. at the last batch of a lot (the loader says which), adds Gaussian noise of standard
   deviation σ = z·Δ to every coordinate of the lot's sum (Δ = C under add/remove, 2C
   under replace-one: the sampler's ``sensitivity_factor``), divides by the public
   expected lot size q·N — never by the lot's realised size, which is private under
   add/remove — writes the result to ``p.grad`` and calls the wrapped optimizer's step.

That is Abadi et al.'s DP-SGD (CCS 2016, Algorithm 1; Lecture 15, Algorithm 4): each
noisy sum is the sampled Gaussian mechanism, and everything the wrapped optimizer does
with it (momentum, Adam's moments, weight decay, a learning-rate schedule) is
post-processing.  The event of the run, ``SelfComposed(PoissonSampled(q, Gaussian(z)),
T)``, is :attr:`DPOptimizer.dp_event`.  The noise is drawn by a ``torch.Generator`` on the
parameters' device, seeded from dperm's generator.
"""

from __future__ import annotations

import numpy as np
import torch

from ..algorithms._gradient_loop import STEP_OBSERVER
from ..exceptions import InvalidPrivacyParameter

__all__ = ["DPOptimizer"]


def _wrapped(name: str) -> property:
    """The wrapped optimizer's attribute ``name``, read and written through."""
    return property(
        lambda self: getattr(self.original_optimizer, name),
        lambda self, value: setattr(self.original_optimizer, name, value),
    )


def _planned(name: str) -> property:
    """The run's constant ``name``, read off its plan (:class:`~dperm.networks.plan.RunPlan`)."""
    return property(lambda self: getattr(self.plan, name))


class DPOptimizer(torch.optim.Optimizer):
    """A torch optimizer whose ``step`` is a DP-SGD step (module docstring).

    Built by :func:`dperm.networks.make_private`; ``param_groups``, ``state``,
    ``state_dict`` and ``load_state_dict`` are the wrapped optimizer's.

    Attributes
    ----------
    original_optimizer : torch.optim.Optimizer
    dp_event : DpEvent
        The event of the whole run (T lots): what an active budget was charged.
    noise_multiplier : float
        z.
    noise_std : float
        σ = z·Δ, the standard deviation of the noise on each coordinate of a lot's sum.
    clipping_norm : float
    expected_batch_size : float
        q·N, the divisor of every noisy sum.
    steps : int
        T.
    steps_taken : int
        Noisy steps taken so far.
    epsilon, delta : float
        The target; ``epsilon_spent`` is what the accountant certifies for
        :attr:`dp_event` at δ.
    """

    _private_run = True  # dperm.privacy_statement reads the run's own statement

    def __init__(self, optimizer, *, grad_sampler, state, plan, generator_seed: int):
        # not Optimizer.__init__: param_groups and state are the wrapped optimizer's
        self.original_optimizer = optimizer
        self.grad_sampler, self.run_state, self.plan = grad_sampler, state, plan
        self.params = grad_sampler.params
        self._summed: list = [None] * len(self.params)
        self._seed = int(generator_seed)
        self._generators: dict = {}
        self.steps_taken = 0
        self._released: list = [None] * len(self.params)  # (grad, version) of the last step
        self._optimizer_step_pre_hooks: dict = {}
        self._optimizer_step_post_hooks: dict = {}
        self._optimizer_state_dict_pre_hooks: dict = {}
        self._optimizer_state_dict_post_hooks: dict = {}
        self._optimizer_load_state_dict_pre_hooks: dict = {}
        self._optimizer_load_state_dict_post_hooks: dict = {}

    # ---------------------------------------------------------------- proxies
    param_groups = _wrapped("param_groups")
    state = _wrapped("state")
    defaults = _wrapped("defaults")

    def state_dict(self):
        return self.original_optimizer.state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.original_optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group) -> None:
        raise InvalidPrivacyParameter(
            "a DP optimizer trains the parameters its run was planned for; add parameter "
            "groups to the optimizer before make_private"
        )

    def __repr__(self) -> str:
        p = self.plan
        return (
            f"DPOptimizer({type(self.original_optimizer).__name__}, noise_multiplier="
            f"{p.noise_multiplier:.4g}, clipping_norm={p.clipping_norm:g}, "
            f"expected_batch_size={p.normalizer:g}, steps={self.steps_taken}/{p.steps}, "
            f"neighbouring={p.neighbouring!r})"
        )

    # ---------------------------------------------------------------- the plan
    dp_event = _planned("event")
    noise_multiplier = _planned("noise_multiplier")
    noise_std = _planned("noise_std")
    clipping_norm = _planned("clipping_norm")
    expected_batch_size = _planned("normalizer")
    steps = _planned("steps")
    epsilon = _planned("epsilon")
    delta = _planned("delta")
    epsilon_spent = _planned("epsilon_spent")
    neighbouring = _planned("neighbouring")

    def privacy_statement(self) -> str:
        """The plain-language statement of the run (:func:`dperm.privacy_statement`)."""
        return self.plan.statement(type(self.original_optimizer).__name__)

    # ---------------------------------------------------------------- the step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients of the current batch (never the lot's clipped sum of
        the batches already stepped): the per-example records of backward passes since
        the last step are dropped.  ``p.grad`` is set to None in every case."""
        self.grad_sampler.discard()
        for p in self.params:
            p.grad = None

    def _check_grads(self) -> None:
        """No trainable parameter got a gradient from autograd: a parameter used outside
        its layer's tap would have its summed, unclipped gradient there (the noisy
        gradient of the last step, left in place without ``zero_grad``, is not one)."""
        for p, last in zip(self.params, self._released, strict=True):
            if p.grad is not None and (
                last is None or p.grad is not last[0] or p.grad._version != last[1]
            ):
                raise InvalidPrivacyParameter(
                    f"a trainable parameter of shape {tuple(p.grad.shape)} received a plain "
                    "(summed, unclipped) gradient: it is used outside the layer that owns it "
                    "(e.g. through a functional call), or the module changed after "
                    "make_private; its per-example gradient is unknown, nothing is released"
                )

    def _generator(self, device):
        key = str(device)
        gen = self._generators.get(key)
        if gen is None:
            gen = torch.Generator(device=device)
            gen.manual_seed(self._seed + len(self._generators))
            self._generators[key] = gen
        return gen

    def step(self, closure=None):
        """Add the batch's clipped sum to its lot's; at the end of the lot, the noisy
        step (module docstring).

        Raises
        ------
        InvalidPrivacyParameter
            No batch of the private loader since the last step, the run's T steps all
            taken, a parameter with a plain gradient, or a layer that does not put the
            batch first.
        """
        state = self.run_state
        if state.issued == state.stepped:
            raise InvalidPrivacyParameter(
                "optimizer.step() without a new batch from the private data loader: draw "
                "every batch from the loader make_private returned"
            )
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._check_grads()
        sums = self.grad_sampler.take(self.plan.clipping_norm)
        state.stepped = state.issued
        if sums is not None:
            for i, t in enumerate(sums):
                if t is not None:
                    self._summed[i] = t if self._summed[i] is None else self._summed[i] + t
        if state.lot_end:
            self._noisy_step()
        return loss

    def _noisy_step(self) -> None:
        plan = self.plan
        if self.steps_taken >= plan.steps:
            raise InvalidPrivacyParameter(
                f"the run's {plan.steps} noisy steps are all taken: its event covers no more"
            )
        observe = STEP_OBSERVER.get()
        theta = _flat(self.params) if observe is not None else None
        sigma, inv_m = plan.noise_std, 1.0 / plan.normalizer
        noisy = []
        with torch.no_grad():
            for i, p in enumerate(self.params):
                g = self._summed[i]
                g = torch.zeros_like(p) if g is None else g
                if sigma > 0:
                    g = g + torch.normal(
                        0.0, sigma, p.shape, generator=self._generator(p.device),
                        dtype=p.dtype, device=p.device,
                    )  # fmt: skip
                noisy.append(g)
                p.grad = g * inv_m
        self._summed = [None] * len(self.params)
        self.steps_taken += 1
        if observe is not None:
            observe(self.steps_taken, theta, _flat(noisy))
        self.original_optimizer.step()
        self._released = [(p.grad, p.grad._version) for p in self.params]


def _flat(tensors) -> np.ndarray:
    """The tensors as one float64 numpy vector (the white-box audit's view of a step)."""
    with torch.no_grad():
        return torch.cat([t.detach().reshape(-1).to("cpu", torch.float64) for t in tensors]).numpy()
