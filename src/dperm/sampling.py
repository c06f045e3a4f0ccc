"""How DP-SGD/DP-GD batches are drawn, and the privacy event each law implies.

One module for the samplers' laws, used by every backend and by the gradient
loop of :mod:`dperm.algorithms`: ``Design.batches`` returns ``sampler.batches(rng,
steps)`` on every backend — the Dask backend sends each partition its share of
the same global row indices — so dense, CSR, memmap and Dask data get the same
batches from the same seed.  A sampler and its event come from the same object
(Opacus' rule: the sampling decides the accounting), and every event carries the
sampler's neighbouring relation.

Sources: Poisson sampling and the sampled Gaussian mechanism — Abadi et al.,
CCS 2016, Algorithm 1; Mironov, Talwar, Zhang 2019.  Fixed-size sampling
without replacement — Wang, Balle, Kasiviswanathan, AISTATS 2019, Theorem 9;
single-example sampling — Bassily, Smith, Thakurta, FOCS 2014, Algorithm 1.
Shuffling — accounted without amplification (see :class:`ShuffleSampler`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._validation import check_count, check_probability
from .accounting.events import (
    ADD_REMOVE,
    REPLACE_ONE,
    DpEvent,
    Gaussian,
    NonPrivate,
    PoissonSampled,
    SampledWithoutReplacement,
    SelfComposed,
)
from .accounting.events import check_neighbouring as _canonical_relation
from .exceptions import InvalidPrivacyParameter, UnknownNameError

__all__ = [
    "SAMPLINGS",
    "FullBatchSampler",
    "PoissonSampler",
    "Sampler",
    "ShuffleSampler",
    "WithoutReplacementSampler",
    "check_dataset_size",
    "check_neighbouring",
    "chunks",
    "make_sampler",
    "public_size",
]

#: random numbers drawn per call by the samplers and the noise stream (vectorised over
#: steps): 2¹⁶ values = 512 KiB, a fixed buffer small next to any X it serves
RNG_CHUNK = 1 << 16


def check_neighbouring(neighbouring) -> str:
    """The canonical spelling ("add-remove" or "replace-one") of ``neighbouring``
    (:func:`dperm.accounting.events.check_neighbouring`).

    Raises
    ------
    InvalidPrivacyParameter
        Naming the value received.
    """
    return _canonical_relation(neighbouring, "neighbouring")


def check_dataset_size(dataset_size) -> int | None:
    """``dataset_size`` (a public record count) checked to be None or an integer ≥ 1."""
    return None if dataset_size is None else check_count(dataset_size, "dataset_size")


def public_size(neighbouring: str, dataset_size: int | None, n_rows: int, needed_for: str) -> int:
    """The dataset size a run may use for its constants.

    Under **replace-one** neighbours the size n = ``X.shape[0]`` is the same
    for both neighbours, hence public: it is returned (a given
    ``dataset_size`` must then equal it).  Under **add/remove-one** the size of
    the data is private, so only the caller's public ``dataset_size`` may be
    used (it need not equal ``n_rows``); without one this raises.

    Parameters
    ----------
    neighbouring : {"add-remove", "replace-one"}
    dataset_size : int or None
        Public record count asserted by the caller.
    n_rows : int
        ``X.shape[0]``; read only under replace-one.
    needed_for : str
        What needs the size (for the error message).

    Raises
    ------
    InvalidPrivacyParameter
        Under add/remove without ``dataset_size``; under replace-one with a
        ``dataset_size`` that differs from ``n_rows``.
    """
    if neighbouring == ADD_REMOVE:
        if dataset_size is None:
            raise InvalidPrivacyParameter(
                f"neighbouring='add-remove' needs a public dataset_size (an integer the caller "
                f"asserts is public, e.g. a published count): {needed_for} is computed from "
                f"it, and X.shape[0] is private under add/remove neighbours; got "
                f"dataset_size=None (or pass neighbouring='replace-one' if n is public)"
            )
        return dataset_size
    if dataset_size is not None and dataset_size != n_rows:
        raise InvalidPrivacyParameter(
            f"under neighbouring='replace-one' the number of rows n={n_rows} is public and is "
            f"the dataset size; got dataset_size={dataset_size}"
        )
    return n_rows


def chunks(total: int, size: int) -> Iterator[int]:
    """Sizes of the consecutive chunks of ``total`` items, ``size`` at most each
    (the last may be smaller): how many steps' random numbers are drawn per call."""
    left = total
    while left > 0:
        c = min(size, left)
        yield c
        left -= c


class Sampler:
    """How batches are drawn, and the privacy event that sampling implies.

    Attributes
    ----------
    name : str
    n : int
        Number of rows actually present (iterated over, never used for a
        constant under add/remove).
    neighbouring : {"add-remove", "replace-one"}
        The relation of the guarantee; every leaf event the sampler builds
        carries it.
    normalizer : float
        The noisy sum is divided by this public number (the expected batch size).
    sensitivity_factor : float
        ℓ2 sensitivity of one noisy sum in units of the clipping norm C under
        the sampler's neighbouring relation: 1 for add/remove-one, 2 for
        replace-one (a replaced record changes one term of the sum by up to
        2C).  The noise standard deviation is ``z · sensitivity_factor · C``.
    sampling_rate : float
        Probability that a given record is in a given batch.
    default_accountant : str
        The tightest accountant of dperm that supports the sampler's event.
    """

    name = "sampler"
    default_accountant = "pld"

    def __init__(self, n: int, neighbouring: str = REPLACE_ONE):
        self.n = check_count(n, "n_samples")
        self.neighbouring = check_neighbouring(neighbouring)
        #: the public size of the run: n under replace-one, the caller's public
        #: ``dataset_size`` under add/remove (what δ < 1/size is checked against)
        self.public_size = self.n

    @property
    def sensitivity_factor(self) -> float:
        return 1.0 if self.neighbouring == ADD_REMOVE else 2.0

    def leaf(self, noise_multiplier: float) -> Gaussian:
        """The Gaussian mechanism of one noisy sum, under the sampler's relation
        (z relative to the sensitivity ``sensitivity_factor · C``)."""
        return Gaussian(noise_multiplier, neighbouring=self.neighbouring)

    def batches(self, rng: np.random.Generator, steps: int) -> Iterator[Any]:
        raise NotImplementedError  # pragma: no cover

    def step_event(self, noise_multiplier: float) -> DpEvent:  # pragma: no cover - abstract
        raise NotImplementedError

    def event(self, noise_multiplier: float, steps: int) -> DpEvent:
        """The event of ``steps`` noisy sums with noise multiplier z (relative to
        the sensitivity ``sensitivity_factor · C``); :class:`NonPrivate` when z = 0."""
        if noise_multiplier == 0:
            return NonPrivate()
        return SelfComposed(self.step_event(noise_multiplier), steps)


class FullBatchSampler(Sampler):
    """Every record in every step (DP-GD): the Gaussian mechanism on Σᵢ clip(∇ℓᵢ).

    * replace-one: sensitivity 2C, the sum is divided by n (public);
    * add/remove-one: sensitivity C, the sum is divided by the public
      ``dataset_size`` (never by the actual number of rows).
    """

    name = "full"

    def __init__(self, n: int, *, neighbouring: str = REPLACE_ONE, dataset_size=None):
        super().__init__(n, neighbouring)
        size = public_size(
            self.neighbouring, check_dataset_size(dataset_size), self.n, "the normaliser"
        )
        self.normalizer = float(size)
        self.sampling_rate = 1.0
        self.batch_size = size
        self.public_size = size

    def batches(self, rng, steps):
        for _ in range(steps):
            yield None

    def step_event(self, noise_multiplier):
        return self.leaf(noise_multiplier)


class PoissonSampler(Sampler):
    """Poisson sampling: each record joins each batch independently with
    probability q (Abadi et al., CCS 2016, Algorithm 1 "lot" with the sampled
    Gaussian mechanism of Mironov, Talwar, Zhang 2019).

    Event ``PoissonSampled(q, Gaussian(z, neighbouring=...))`` per step.  The
    noisy sum is divided by the *expected* batch size q·N, a public number (an
    empty batch still gets noise):

    * add/remove-one: sensitivity C, N = the caller's public ``dataset_size``;
      the actual rows are only iterated over (one Bernoulli(q) per row), so
      nothing of the run depends on |D| except the sum itself;
    * replace-one: sensitivity 2C (a sampled record changes one term by up to
      2C), N = n = ``X.shape[0]`` (public under replace-one).  Accounted by the
      replace-one PLD (dp-accounting's ``REPLACE_ONE``); the RDP accountant has
      no replace-one Poisson bound.

    Batches are drawn exactly as independent Bernoulli(q) inclusions, in O(qn)
    per step: the included indices of a Bernoulli(q) process are the partial
    sums of iid Geometric(q) gaps (they come out sorted, which also makes the
    row gather cache-friendly).  The number of gaps drawn per step is set from
    the public normaliser, so two datasets that share their first rows draw
    the same inclusions for those rows from the same seed.
    """

    name = "poisson"

    def __init__(
        self, n: int, sampling_rate: float, *, neighbouring: str = ADD_REMOVE, dataset_size=None
    ):
        super().__init__(n, neighbouring)
        self.sampling_rate = check_probability(sampling_rate, "sampling_rate")
        size = public_size(
            self.neighbouring,
            check_dataset_size(dataset_size),
            self.n,
            "the normaliser q·dataset_size of the noisy sum",
        )
        self.dataset_size = self.public_size = size
        self.normalizer = self.sampling_rate * size
        self.batch_size = self.normalizer  # expected
        self.default_accountant = "pld"

    def batches(self, rng, steps):
        n, q = self.n, self.sampling_rate
        if q == 1.0:
            yield from (None for _ in range(steps))
            return
        # Bernoulli(q) inclusion of records 1..n ⇔ the included positions are the
        # partial sums of iid Geometric(q) gaps that are ≤ n.  Gaps are drawn k per
        # step (k from the public normaliser), vectorised over a chunk of steps; a
        # step whose k gaps all land inside 1..n draws more gaps until one passes n,
        # so the law is exact whatever k is.
        m = self.normalizer
        k = max(1, int(m + 6.0 * math.sqrt(m * (1.0 - q)) + 16))
        for c in chunks(steps, max(1, RNG_CHUNK // k)):
            pos = np.cumsum(rng.geometric(q, size=(c, k)), axis=1)
            pos -= 1  # 0-based record indices
            for row in pos:
                while row[-1] < n:  # rare: extend this step's Bernoulli process
                    row = np.concatenate([row, row[-1] + np.cumsum(rng.geometric(q, size=k))])
                yield row[: row.searchsorted(n)]

    def step_event(self, noise_multiplier):
        return PoissonSampled(self.sampling_rate, self.leaf(noise_multiplier))


def _check_batch_size(batch_size, n: int) -> int:
    """A fixed batch size b, checked to be an integer in [1, n]."""
    b = check_count(batch_size, "batch_size")
    if b > n:
        raise InvalidPrivacyParameter(f"batch_size must be ≤ n_samples={n}, got {b}")
    return b


class WithoutReplacementSampler(Sampler):
    """Each step a fresh, uniformly random subset of exactly b records (drawn
    without replacement within the step, independently across steps).

    Replace-one relation only (n public), sensitivity 2C per step; event
    ``SampledWithoutReplacement(b, n, Gaussian(z))``, accounted by default by
    the PLD of :func:`dperm.accounting.pld_dense.fixed_size_gaussian_pld`
    (the dominating pair of Balle, Barthe & Gaboardi 2018, Theorem 9, made
    symmetric as in Dong, Roth & Su 2022, Theorem 4.2; derivation there):
    b = 100 of n = 2000, 60 steps, ε = 1, δ = 10⁻⁵ gives a noise multiplier
    1.30× Poisson sampling's at the same rate (replace-one PLD), where the
    RDP bound of Wang, Balle, Kasiviswanathan (AISTATS 2019), Theorem 27
    (``accountant="rdp"``) needs 2.33× — and no sound accountant can go
    below 1.24× (a dataset attains the "remove" pair at every step).  With
    WBK's generic Theorem 9 the batches did not amplify at all (noise
    multiplier 31.3, the full-batch value).  The generic form of the
    amplification, for any ε or (ε, δ) inner mechanism, is Lecture 15,
    Lemma 15.4 (same module).  With b = 1 this is the
    single-example sampling of Bassily, Smith, Thakurta (FOCS 2014),
    Algorithm 1: one index drawn uniformly (with replacement across steps) —
    a single draw is trivially "without replacement", so the event is exact.
    Under add/remove the law of the batch (b of n) depends on |D| and the
    bound does not apply: refused by :func:`make_sampler`.
    """

    name = "without_replacement"
    default_accountant = "pld"

    def __init__(self, n: int, batch_size: int):
        super().__init__(n, REPLACE_ONE)
        self.batch_size = _check_batch_size(batch_size, self.n)
        self.normalizer = float(self.batch_size)
        self.sampling_rate = self.batch_size / self.n

    def batches(self, rng, steps):
        n, b = self.n, self.batch_size
        if b == n:
            yield from (None for _ in range(steps))
        elif b == 1:
            for c in chunks(steps, RNG_CHUNK):
                for i in rng.integers(0, n, size=c):
                    yield slice(int(i), int(i) + 1)
        else:
            for _ in range(steps):
                yield rng.choice(n, size=b, replace=False, shuffle=False)

    def step_event(self, noise_multiplier):
        return SampledWithoutReplacement(self.batch_size, self.n, self.leaf(noise_multiplier))


class ShuffleSampler(Sampler):
    """Shuffled fixed-size batches: each epoch a fresh random permutation cut
    into ⌊n/b⌋ disjoint batches of b records (the remainder is not used that epoch).

    Accounting (replace-one only).  Batches within an epoch are *not* independent
    samples, so neither the Poisson nor the per-step without-replacement
    amplification applies (shuffling can be much less private than Poisson
    accounting claims: Chua et al., "How Private are DP-SGD Implementations?",
    ICML 2024).  What holds exactly: for every fixed permutation a replaced
    record lies in at most one batch per epoch, so an epoch is the adaptive
    composition of Gaussian mechanisms of which only one sees the record —
    the Gaussian mechanism with sensitivity 2C — and mixing over the
    permutation (independent of the data) cannot increase the hockey-stick
    divergence (joint convexity).  Event: ``SelfComposed(Gaussian(z), epochs)``
    with ``epochs = ⌈steps / ⌊n/b⌋⌉``; no amplification is claimed.  Under
    add/remove the number of batches per epoch ⌊n/b⌋ (hence the epoch
    boundaries and the composition count) depends on |D|: refused by
    :func:`make_sampler`.
    """

    name = "shuffle"

    def __init__(self, n: int, batch_size: int):
        super().__init__(n, REPLACE_ONE)
        self.batch_size = _check_batch_size(batch_size, self.n)
        self.batches_per_epoch = self.n // self.batch_size
        self.normalizer = float(self.batch_size)
        self.sampling_rate = self.batch_size / self.n

    def epochs_for(self, steps: int) -> int:
        return -(-steps // self.batches_per_epoch)

    def batches(self, rng, steps):
        b, k = self.batch_size, self.batches_per_epoch
        done = 0
        while done < steps:
            perm = rng.permutation(self.n)
            for j in range(min(k, steps - done)):
                yield perm[j * b : (j + 1) * b]
            done += k

    def step_event(self, noise_multiplier):
        return self.leaf(noise_multiplier)

    def event(self, noise_multiplier, steps):
        if noise_multiplier == 0:
            return NonPrivate()
        return SelfComposed(self.leaf(noise_multiplier), self.epochs_for(steps))


SAMPLINGS = ("poisson", "without_replacement", "shuffle")


def make_sampler(
    sampling: str,
    n: int,
    *,
    sampling_rate=None,
    batch_size=None,
    neighbouring: str = REPLACE_ONE,
    dataset_size=None,
) -> Sampler:
    """Build the sampler named ``sampling`` ("poisson", "without_replacement",
    "shuffle", "full") for the relation ``neighbouring``.

    Under add/remove a Poisson ``batch_size`` (expected) gives q = b/N with N
    the public ``dataset_size``; fixed-size and shuffled batches are refused
    (their accounting is replace-one only).

    Raises
    ------
    UnknownNameError
    InvalidPrivacyParameter
    """
    neighbouring = check_neighbouring(neighbouring)
    dataset_size = check_dataset_size(dataset_size)
    if sampling == "full":
        return FullBatchSampler(n, neighbouring=neighbouring, dataset_size=dataset_size)
    if sampling not in SAMPLINGS:
        raise UnknownNameError(f"unknown sampling {sampling!r}; choose one of {list(SAMPLINGS)}")
    if sampling_rate is None and batch_size is None:
        raise InvalidPrivacyParameter("give sampling_rate or batch_size, got neither")
    if sampling == "poisson":
        if sampling_rate is None:
            size = public_size(neighbouring, dataset_size, n, "the sampling rate batch_size/N")
            b = check_count(batch_size, "batch_size")
            if b > size:
                raise InvalidPrivacyParameter(
                    f"batch_size must be ≤ the dataset size {size}, got {b}"
                )
            sampling_rate = b / size
        return PoissonSampler(
            n, sampling_rate, neighbouring=neighbouring, dataset_size=dataset_size
        )
    if neighbouring == ADD_REMOVE:
        raise InvalidPrivacyParameter(
            f"sampling={sampling!r} is accounted for replace-one neighbours only (its batch "
            f"law depends on the number of records n, which add/remove neighbours do not "
            f"share); use sampling='poisson' or neighbouring='replace-one'"
        )
    public_size(neighbouring, dataset_size, n, "the batch count")  # checks a given size
    if batch_size is None:
        q = check_probability(sampling_rate, "sampling_rate")
        batch_size = max(1, round(q * n))
    cls = WithoutReplacementSampler if sampling == "without_replacement" else ShuffleSampler
    return cls(n, batch_size)
