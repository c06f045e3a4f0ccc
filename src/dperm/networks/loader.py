"""Poisson lots from any map-style dataset, for the user's own training loop (imports torch).

:class:`DPDataLoader` draws the lots of a DP-SGD run with dperm's samplers
(:mod:`dperm.sampling`: every record joins every lot independently with probability q,
the exact law the accountant composes; Abadi et al., CCS 2016, Algorithm 1; Mironov,
Talwar, Zhang 2019) and yields them as the batches of the user's ``DataLoader`` would
be — same dataset, same ``collate_fn``, workers and pinned memory — so that
``for xb, yb in loader:`` is unchanged.  A ``TensorDataset`` is gathered with one
indexing call per lot instead of one ``__getitem__`` per record (so is a dataset with a
``gather(indices)`` method: the arrays of :func:`dperm.networks.fit`).

* **Public constants.**  q = b / N with b the expected lot size and N the public
  dataset size: ``len(dataset)`` under replace-one, the caller's ``dataset_size`` under
  add/remove (``len(dataset)`` is then private and only iterated over: one Bernoulli
  coin per record).
* **Empty lots** are yielded as empty batches (zero rows, the shapes of the data): the
  noisy step of an empty lot is a release like any other — skipping it would reveal
  that the lot was empty.
* **Lots larger than memory**: with ``max_physical_batch_size`` a lot is yielded as
  several physical batches; the optimizer accumulates their clipped sums and takes its
  noisy step at the last one (a *virtual step*).
* **Epochs.**  One iteration over the loader is one epoch of the planned run; the run's
  T lots are spread over ⌈epochs⌉ iterations.  A loop over more epochs than planned is
  refused (the event the run was calibrated to covers T lots).

Every batch must be followed by ``optimizer.step()`` before the next one is drawn
(:class:`RunState`): a lot whose noisy step is skipped, or two lots summed into one
step, is not the mechanism the accountant composed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset
from torch.utils.data._utils.collate import default_collate

from .._validation import check_count
from ..exceptions import InvalidPrivacyParameter

__all__ = ["DPDataLoader", "RunState", "split_lot"]

#: the DataLoader settings a DPDataLoader keeps from the user's loader
_KEPT = (
    "num_workers",
    "pin_memory",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


class RunState:
    """The position of one DP-SGD run, shared by its loader and its optimizer.

    Attributes
    ----------
    steps : int
        T, the lots of the run.
    lots : int
        Lots drawn so far.
    issued, stepped : int
        Physical batches yielded, and consumed by ``optimizer.step()``.
    lot_end : bool
        Whether the batch most recently yielded is the last of its lot.
    """

    def __init__(self, steps: int, grad_sampler=None):
        self.steps = steps
        self.lots = 0
        self.issued = 0
        self.stepped = 0
        self.lot_end = False
        self.grad_sampler = grad_sampler

    def issue(self, batch_size: int, lot_end: bool) -> None:
        """A physical batch of ``batch_size`` records is handed to the caller."""
        if self.issued != self.stepped:
            raise InvalidPrivacyParameter(
                "optimizer.step() was not called after the previous batch of the private "
                "data loader: every batch must be followed by a step (a lot without its "
                "noisy step, or two lots in one step, is not the mechanism that was "
                "accounted)"
            )
        self.issued += 1
        self.lot_end = lot_end
        if self.grad_sampler is not None:
            self.grad_sampler.new_batch(batch_size)


def split_lot(idx: np.ndarray, max_physical: int | None) -> list[np.ndarray]:
    """The physical batches of one lot (at least one, empty for an empty lot)."""
    if max_physical is None or idx.size <= max_physical:
        return [idx]
    return np.array_split(idx, math.ceil(idx.size / max_physical))


class _EmptySafeCollate:
    """The user's collate function, with an empty list of records collated to a marker
    (picklable: it runs in the loader's worker processes)."""

    EMPTY = "__dperm_empty_lot__"

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, batch):
        return self.EMPTY if len(batch) == 0 else self.collate(batch)


def _empty_like(batch):
    """``batch`` with zero records: tensors and arrays cut to 0 rows, structures mapped."""
    if torch.is_tensor(batch) or isinstance(batch, np.ndarray):
        return batch[:0]
    if isinstance(batch, dict):
        return type(batch)({k: _empty_like(v) for k, v in batch.items()})
    if isinstance(batch, list | tuple):
        fields = all(
            torch.is_tensor(v) or isinstance(v, np.ndarray | dict | list | tuple) for v in batch
        )
        if fields and batch:
            items = [_empty_like(v) for v in batch]
            return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
        return type(batch)()
    return batch


class DPDataLoader:
    """Poisson lots of a DP-SGD run over a map-style dataset (module docstring).

    Built by :func:`dperm.networks.make_private` (and :func:`dperm.networks.fit`); not
    meant to be constructed directly.

    Attributes
    ----------
    dataset : torch.utils.data.Dataset
    sampler : dperm.sampling.Sampler
        The sampler whose event the run was calibrated to.
    sample_rate : float
        q.
    expected_batch_size : float
        q·N, the public normaliser of the noisy sum.
    steps : int
        T, the lots of the whole run.
    epochs : int
        ⌈epochs⌉: the iterations the T lots are spread over.
    max_physical_batch_size : int or None
    """

    def __init__(
        self,
        dataset,
        sampler,
        steps: int,
        epochs: float,
        *,
        rng: np.random.Generator,
        state: RunState,
        collate_fn=None,
        loader_kwargs: dict | None = None,
        max_physical_batch_size: int | None = None,
    ):
        if isinstance(dataset, IterableDataset) or not hasattr(dataset, "__getitem__"):
            raise InvalidPrivacyParameter(
                "the private data loader draws Poisson lots from a map-style Dataset "
                f"(__getitem__ and __len__), got {type(dataset).__name__}"
            )
        self.dataset, self.sampler, self.steps = dataset, sampler, int(steps)
        self.epochs = max(1, math.ceil(epochs))
        self.sample_rate = float(sampler.sampling_rate)
        self.expected_batch_size = float(sampler.normalizer)
        self.max_physical_batch_size = (
            None
            if max_physical_batch_size is None
            else check_count(max_physical_batch_size, "max_physical_batch_size")
        )
        self.state = state
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.loader_kwargs = {k: v for k, v in (loader_kwargs or {}).items() if k in _KEPT}
        self._lots = sampler.batches(rng, self.steps)
        self._iteration = 0
        self._empty = None
        self._fast = callable(getattr(dataset, "gather", None)) or (
            self.collate_fn is default_collate and isinstance(dataset, TensorDataset)
        )

    # ------------------------------------------------------------------ lots
    def _lots_in(self, k: int) -> int:
        """Lots of iteration k (0-based): T spread evenly over the iterations."""
        return (k + 1) * self.steps // self.epochs - k * self.steps // self.epochs

    def __len__(self) -> int:
        k = min(self._iteration, self.epochs - 1)
        return self._lots_in(k)

    def _next_lot(self) -> np.ndarray:
        idx = next(self._lots)
        n = len(self.dataset)
        if idx is None:
            return np.arange(n)
        if isinstance(idx, slice):
            return np.arange(n)[idx]
        return np.asarray(idx, dtype=np.int64)

    def _plan(self, count: int) -> list[tuple[np.ndarray, bool]]:
        """The physical batches of the next ``count`` lots, with their lot-end flags."""
        out = []
        for _ in range(count):
            parts = split_lot(self._next_lot(), self.max_physical_batch_size)
            out += [(p, i == len(parts) - 1) for i, p in enumerate(parts)]
        return out

    def __iter__(self) -> Iterator[Any]:
        if self._iteration >= self.epochs:
            raise InvalidPrivacyParameter(
                f"the private run was planned for {self.epochs} epoch(s) ({self.steps} lots), "
                "all drawn: its event covers no more; call make_private again (a new, "
                "separately accounted run) to train longer"
            )
        count = self._lots_in(self._iteration)
        self._iteration += 1
        return self.iterate(count)

    def iterate(self, count: int) -> Iterator[Any]:
        """Yield the physical batches of the next ``count`` lots (one lot-end flag set
        in :attr:`state` per batch)."""
        plan = self._plan(count)
        self.state.lots += count
        if self._fast:
            for idx, end in plan:
                batch = self._gather(idx)
                self.state.issue(len(idx), end)
                yield batch
            return
        loader = DataLoader(
            self.dataset,
            batch_sampler=[p.tolist() for p, _ in plan],
            collate_fn=_EmptySafeCollate(self.collate_fn),
            **self.loader_kwargs,
        )
        for (idx, end), batch in zip(plan, loader, strict=True):
            if isinstance(batch, str) and batch == _EmptySafeCollate.EMPTY:
                batch = self._empty_batch()
            elif self._empty is None:
                self._empty = _empty_like(batch)
            self.state.issue(len(idx), end)
            yield batch

    def _gather(self, idx: np.ndarray):
        if callable(getattr(self.dataset, "gather", None)):  # dperm's own array data
            return self.dataset.gather(idx)
        t = torch.as_tensor(idx, dtype=torch.long)
        return [x[t] for x in self.dataset.tensors]

    def _empty_batch(self):
        """An empty batch with the shapes of the data: cut from the first batch of the
        run, or (when the first lot is empty) from the collated first record — its
        shapes and dtypes only, which the data format fixes for every record."""
        if self._empty is None:
            self._empty = _empty_like(self.collate_fn([self.dataset[0]]))
        return self._empty
