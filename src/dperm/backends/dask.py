"""The Dask backend of the GLM data path: :class:`DaskDesign` (issue #12 §2).

Design principle 7, "one oracle, many backends": the algorithms talk to the
data only through the methods of :class:`~dperm.backends.numpy.Design`; this
module serves them from a ``dask.array.Array`` (or a ``dask.dataframe.DataFrame``)
whose partitions live on a cluster.  It is imported by the dispatch of
:mod:`dperm.design` only when a Dask collection arrives; the input rules
(building a DaskDesign, the estimators' validation, labels, weights) are in
:mod:`dperm.backends.dask_inputs`.

What runs where
---------------
* **Workers** (one task per row partition): the row norms and clip scales
  (one pass, persisted next to the partition, by the rule of
  :mod:`dperm.backends.rows` — the one every backend uses, so a partition's rows
  get the same scales and the same clipped count as on one machine), and the
  per-partition sums of a fused pass — loss values, gradients, Hessian-vector
  products, clipped per-example gradient sums over the partition's rows of a
  batch; the rows of DP-SGD's lots (:func:`dperm.backends.dask_tasks.take_rows`).
  Each task builds a numpy :class:`~dperm.backends.numpy.Design` of its partition
  and calls the *same* method the one-machine path calls, so the arithmetic of a
  partition is the one-machine arithmetic.
* **Scheduler**: adds the per-partition d-vectors in a tree (fan-in 8).
* **Client** (this process): the optimizer state θ, the privacy-critical noise
  (drawn once per step by :func:`dperm.algorithms._gradient_loop.run` from the
  fit's generator, in the same order as on one machine), the accounting, the
  batches' row indices, the d-vectors the passes return and the rows of DP-SGD's
  small lots.  X, y and the per-row vectors are otherwise never gathered onto the
  client; only the scalars n_clipped and the finite checks.

Sampling is the sampler's own (:meth:`~dperm.backends.numpy.Design.batches`): the
global row indices of every batch — Poisson (one Bernoulli(q) per record),
fixed-size without replacement, shuffled — are drawn on the client by the sampler of
:mod:`dperm.sampling` from the fit's sampling generator, exactly as on one machine,
and the same ``random_state`` gives the same batches; the event comes from the same
sampler object.  Full batches (DP-GD): every row, no draw.

DP-SGD's steps (:mod:`dperm.backends.dask_steps`).  θ of a step depends on the
previous step's noisy sum, so the steps are a chain; the lots are not, so the rows of
the next chunk of lots are brought to the client through Dask's own comms (one round
trip per chunk, fetched while the previous chunk's steps run) and each step runs the
numpy backend's own clipped-sum kernel on them — or, with adaptive clipping, the one
batch function that gives the sum at the step's norm Cₜ and the count of unclipped
examples (:meth:`DaskDesign.clipped_sum_count`): the numpy fit's model, bit for bit.
Large lots are summed on the workers instead (one task per worker and step, given
Cₜ and returning the count with the sum), by a public cost rule of (lot, d, workers);
those sums are added exactly on a public grid
(:func:`dperm.backends.dask_tasks.to_grid`), so they do not depend on which worker
holds which partition.  Model and measurements: docs/cluster.md, "Performance" and
"Losing a worker".
"""

from __future__ import annotations

import math

import numpy as np

from ..exceptions import InvalidDataError
from .dask_steps import Stepper, block_futures, client_of, placement, rows_array
from .dask_tasks import (
    _NORM,
    _SCALE,
    _XNORM,
    _count_block,
    _local_design,
    _margins_block,
    _one,
    _partial,
    _partial_group,
    _reclip_block,
    _Spec,
    _sum,
    _target_block,
    from_grid,
    grid_exponent,
)
from .numpy import Design
from .rows import warn_clipped

__all__ = ["DaskDesign", "is_dask_collection"]

#: fan-in of the tree that adds the per-partition results on the scheduler
_FAN_IN = 8


def is_dask_collection(obj) -> bool:
    """True for a Dask collection (checked without importing dask)."""
    return type(obj).__module__.split(".")[0] == "dask"


def _is_dataframe(obj) -> bool:
    mod = type(obj).__module__
    return mod.startswith("dask.dataframe") or mod.startswith("dask_expr")


def _check_known(A, name: str) -> None:
    if any(isinstance(c, float) and math.isnan(c) for c in A.chunks[0]) or any(
        isinstance(c, float) and math.isnan(c) for c in A.shape
    ):
        raise InvalidDataError(
            f"{name} has unknown chunk sizes (rows per partition), so its rows cannot be "
            f"aligned; call {name}.compute_chunk_sizes() or build it with known lengths "
            "(e.g. dataframe.to_dask_array(lengths=True))"
        )


# ============================================================================ the view
class DaskDesign(Design):
    """A :class:`~dperm.design.Design` whose rows live in the partitions of a Dask
    array on a cluster (or on the local threaded scheduler, out of core).

    Build one with :func:`as_dask_design` (or :func:`dperm.design.as_design`, which
    dispatches here for any Dask collection).  Every pass of the Design interface
    runs one task per row partition on the workers and returns only the reduced
    d-vector (or (d, k) array) to the client; n-vectors (:meth:`matvec`,
    :meth:`row_norms`) are returned as lazy Dask arrays that stay on the cluster.
    :meth:`to_dense`, :meth:`materialize` and ``numpy.asarray`` raise: X is never
    gathered onto the client.

    Attributes
    ----------
    X : dask.array.Array of shape (n, n_features)
        float32 or float64, one chunk of whole rows per partition.
    aux : dask.array.Array of shape (n, 4), float64, persisted
        Per-row raw norm, clip scale, intercept value and effective norm,
        chunked like X (32 bytes per row on the workers).
    n_partitions : int
    Other attributes as :class:`~dperm.design.Design`.
    """

    is_distributed = True

    def __init__(self, X, aux, *, spec: _Spec, n_clipped: int):
        # per-row intercept values (after a re-clip) stay on the workers, in aux
        icol = 0.0 if spec.per_row_intercept else spec.intercept
        super().__init__(
            X, intercept=icol, data_norm=spec.data_norm, bound=spec.bound, n_clipped=n_clipped
        )
        self.aux = aux
        self._spec = spec
        self.is_sparse = False
        self.n_partitions = len(X.chunks[0])
        self._offsets = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        self._aligned: dict = {}
        self._where = None  # (client, partitions per worker, futures), found on first pass
        self._steps = Stepper(self)  # DP-SGD's lots and their rows, fetched ahead

    # ----- description -------------------------------------------------------------
    @property
    def intercept_scaling(self) -> float | None:
        return None if self._spec.per_row_intercept else self._spec.intercept

    @property
    def fit_intercept(self) -> bool:
        return self._spec.per_row_intercept or self._spec.intercept is not None

    @property
    def scale(self):
        """The per-row clip scale cᵢ as a lazy Dask array (None when unclipped)."""
        return self.aux[:, _SCALE] if self._spec.clipped else None

    @property
    def nbytes(self) -> int:
        """Bytes held on the client by the view: none per row."""
        return 0

    def __repr__(self) -> str:
        icol = "per row" if self._spec.per_row_intercept else self._spec.intercept
        return (
            f"DaskDesign({self.shape[0]}×{self.n_features} {self.X.dtype}, "
            f"{self.n_partitions} partitions, data_norm={self.data_norm!r}, "
            f"intercept={icol!r}, n_clipped={self.n_clipped})"
        )

    # ----- alignment of n-vectors ----------------------------------------------------
    def align(self, v, name: str = "y"):
        """``v`` (an n-vector: numpy array, Dask array or Series) as a Dask array
        chunked like X's rows, persisted on the workers (cached per Dask key, so a
        derived target, e.g. the ±1 encoding of a class, is computed once).

        Raises
        ------
        InvalidDataError
            Wrong length, not 1-D, or unknown chunk sizes.
        """
        if v is None:
            return None
        key = getattr(v, "name", None) if is_dask_collection(v) else None
        if key is not None and key in self._aligned:
            return self._aligned[key]
        v = _row_vector(v, self.X.chunks[0], name)
        v = v.persist()
        if key is not None:
            if len(self._aligned) >= 8:
                self._aligned.clear()
            self._aligned[key] = v
        self._aligned[v.name] = v  # an aligned array is its own alignment
        return v

    def check_target(self, y, name: str = "y"):
        """``check_X_y``'s rules for y, run on the workers: 1-D, length n, numeric
        targets as float64 and finite (non-numeric targets are kept).  Errors are
        raised here, on the client, before anything is fitted."""
        key = getattr(y, "name", None) if is_dask_collection(y) else None
        if key in _CHECKED and y.chunks[0] == self.X.chunks[0]:
            out = y  # already checked by these rules (the same Dask key: the same array)
        else:
            out = _checked_target(self.X, y, name)
        self._aligned[out.name] = out
        return out

    # ----- the passes ----------------------------------------------------------------
    def _blocks_for(self, rows):
        """[(partition index, local rows)] of the partitions a pass must visit."""
        P = self.n_partitions
        if rows is None:
            return [(p, rows) for p in range(P)]
        rows = rows_array(rows, self.shape[0])
        part = np.searchsorted(self._offsets, rows, side="right") - 1
        order = np.argsort(part, kind="stable")
        rows, part = rows[order], part[order]
        cuts = np.searchsorted(part, np.arange(P + 1))
        out = []
        for p in range(P):
            a, b = cuts[p], cuts[p + 1]
            if b > a:
                out.append((p, rows[a:b] - self._offsets[p]))
        return out

    def _pass(self, op, *, y=None, weights=None, rows=None, size, **args):
        """Run ``op`` on every partition (or those ``rows`` touches) and add the
        results; returns a float64 vector of length ``size``."""
        if y is not None:
            y = self.align(y)
        if weights is not None:
            weights = self.align(weights, "weights")
        args["size"] = size
        blocks = self._blocks_for(rows)
        if not blocks:
            return np.zeros(size)
        fast = self._placement()
        if fast is not None:
            return self._pass_by_worker(fast, op, y, weights, blocks, args)
        return self._pass_by_graph(op, y, weights, blocks, args)

    def _placement(self):
        """(client, {worker: [partitions]}, futures of X and aux) when a distributed
        Client is the scheduler and X is persisted on its workers, else None (and
        ``_where`` is False; it stays None while a lost partition is recomputed)."""
        if self._where is None:
            self._where = placement(self.X, self.aux)
        return self._where or None

    def _pass_by_worker(self, where, op, y, weights, blocks, args):
        """One task per worker over the partitions it holds (pinned there, so no
        partition moves); the per-worker sums are added in a tree of fan-in 8 (on
        the client when there are at most 8 workers: 8 d-vectors)."""
        client, groups, xf, af = where
        yf = None if y is None else block_futures(y, client)
        wf = None if weights is None else block_futures(weights, client)
        if (y is not None and yf is None) or (weights is not None and wf is None):
            return self._pass_by_graph(op, y, weights, blocks, args)
        rows = dict(blocks)
        futs = []
        for worker, ps in groups.items():
            ps = [p for p in ps if p in rows]
            if not ps:
                continue
            futs.append(
                client.submit(
                    _partial_group,
                    op,
                    ps,
                    [xf[p] for p in ps],
                    [af[p] for p in ps],
                    None if yf is None else [yf[p] for p in ps],
                    None if wf is None else [wf[p] for p in ps],
                    self._spec,
                    args,
                    [rows[p] for p in ps],
                    workers=[worker],
                    allow_other_workers=True,  # a lost worker's share runs elsewhere
                    pure=False,
                )
            )
        while len(futs) > _FAN_IN:
            futs = [
                client.submit(_sum, *futs[i : i + _FAN_IN], pure=False)
                for i in range(0, len(futs), _FAN_IN)
            ]
        return _result(op, _sum(*client.gather(futs)), args)

    def _pass_by_graph(self, op, y, weights, blocks, args):
        """The same pass as a Dask graph (any scheduler; X need not be persisted):
        one task per partition, a tree of fan-in 8 adds them."""
        import dask
        from dask.delayed import delayed

        xs = self.X.to_delayed().ravel()
        auxs = self.aux.to_delayed().ravel()
        ys = y.to_delayed().ravel() if y is not None else None
        ws = weights.to_delayed().ravel() if weights is not None else None
        part = delayed(_partial, pure=False)
        parts = [
            part(
                op,
                p,
                xs[p],
                auxs[p],
                None if ys is None else ys[p],
                None if ws is None else ws[p],
                self._spec,
                args,
                r,
            )
            for p, r in blocks
        ]
        add = delayed(_sum, pure=False)
        while len(parts) > 1:
            parts = [add(*parts[i : i + _FAN_IN]) for i in range(0, len(parts), _FAN_IN)]
        (out,) = dask.compute(parts[0])
        return _result(op, out, args)

    def _theta_size(self, theta) -> tuple[np.ndarray, tuple]:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape[0] != self.shape[1]:
            self._split(theta)  # raises the one-machine error
        return theta, theta.shape

    def glm_value_and_gradient(self, loss, theta, y, *, weights=None, rows=None):
        """(Σ wᵢφᵢ, Σ wᵢφ'ᵢ x̃ᵢ) over ``rows`` (default all): per-partition sums on the
        workers, added; see :meth:`dperm.design.Design.glm_value_and_gradient`."""
        theta, shape = self._theta_size(theta)
        out = self._pass(
            "vg", y=y, weights=weights, rows=rows, size=1 + theta.size, loss=loss, theta=theta
        )
        return float(out[0]), out[1:].reshape(shape)

    def glm_gradient_sum(self, loss, theta, y, *, weights=None, rows=None):
        """Σ wᵢφ'ᵢ x̃ᵢ over ``rows``, reduced over the partitions."""
        theta, shape = self._theta_size(theta)
        out = self._pass(
            "g", y=y, weights=weights, rows=rows, size=theta.size, loss=loss, theta=theta
        )
        return out.reshape(shape)

    def glm_value(self, loss, theta, y, *, weights=None) -> float:
        """Σ wᵢφᵢ, reduced over the partitions."""
        theta, _ = self._theta_size(theta)
        return float(self._pass("v", y=y, weights=weights, size=1, loss=loss, theta=theta)[0])

    def glm_hessian_vector(self, loss, theta, y, v, *, weights=None):
        """Σ wᵢφ''ᵢ (x̃ᵢᵀv) x̃ᵢ, reduced over the partitions."""
        theta, shape = self._theta_size(theta)
        v = np.asarray(v, dtype=np.float64)
        out = self._pass("hv", y=y, weights=weights, size=theta.size, loss=loss, theta=theta, v=v)
        return out.reshape(shape)

    def glm_clipped_sum(self, loss, theta, y, clipping_norm, *, weights=None, rows=None):
        """Σ_{i∈rows} clip_C(wᵢφ'ᵢ x̃ᵢ) (Abadi et al. 2016, Algorithm 1): each partition
        clips and sums its own rows of the batch (``rows`` = None or the global
        indices drawn by the sampler on the client); only the d-vector comes back.
        The noise is added by the caller, on the client."""
        return self._clipped("clip", loss, theta, y, clipping_norm, weights, rows)

    def softmax_clipped_sum(self, loss, theta, y, clipping_norm, *, rows=None):
        """Σ clip_C(x̃ᵢ rᵢᵀ) (d_eff, k), reduced over the partitions."""
        return self._clipped("softclip", loss, theta, y, clipping_norm, None, rows)

    def _clipped(self, op, loss, theta, y, clipping_norm, weights, rows):
        theta, shape = self._theta_size(theta)
        C = float(clipping_norm)
        if rows is not None:  # a mini-batch: a DP-SGD step
            y = None if y is None else self.align(y)
            weights = None if weights is None else self.align(weights, "weights")
            out = self._steps.clipped(op, loss, C, y, weights, theta, rows)
            if out is not None:
                return out.reshape(shape)
        count = self.shape[0] if rows is None else rows_array(rows, self.shape[0]).size
        args = dict(size=theta.size, loss=loss, theta=theta, C=C, grid=grid_exponent(count, C))
        return self._pass(op, y=y, weights=weights, rows=rows, **args).reshape(shape)

    def clipped_sum_count(self, loss, theta, y, clipping_norm, *, weights=None, rows=None):
        """(Σ_{i∈rows} clip_C(gᵢ), Σ_{i∈rows} (1[‖gᵢ‖ ≤ C] − ½)): the clipped gradient sum
        and the centred count of unclipped examples of a GLM or softmax ``loss`` that
        adaptive clipping releases at every step (Andrew et al. 2021, Algorithm 1;
        :class:`dperm.algorithms.adaptive_clipping.BatchOracle` asks the design for it).

        A DP-SGD lot fetched ahead (:mod:`dperm.backends.dask_steps`) is computed on
        the client by :func:`~dperm.backends._products.clipped_sum_count` on the lot's
        rows — the numpy fit's numbers, bit for bit; any other batch (a lot the cost
        rule :func:`~dperm.backends.dask_steps.worker_sums` leaves on the workers, a
        full batch) by one task per worker with C passed to it: each partition runs
        the same function on its rows of the batch and returns its sum on the public
        grid and its count of unclipped rows, added exactly (integers).  Only the
        d-vector and one integer per worker come back.

        Returns
        -------
        (ndarray of θ's shape, float)
        """
        theta, shape = self._theta_size(theta)
        C = float(clipping_norm)
        if y is not None:
            y = self.align(y)
        if weights is not None:
            weights = self.align(weights, "weights")
        if rows is not None:
            out = self._steps.clipped_count(loss, C, y, weights, theta, rows)
            if out is not None:
                return out[0].reshape(shape), out[1]
        m = self.shape[0] if rows is None else rows_array(rows, self.shape[0]).size
        args = dict(size=theta.size + 1, loss=loss, theta=theta, C=C, grid=grid_exponent(m, C))
        out = self._pass("clipcount", y=y, weights=weights, rows=rows, **args)
        return out[:-1].reshape(shape), float(out[-1]) - 0.5 * m

    # ----- DP-SGD's steps (dperm.backends.dask_steps) -----------------------------------
    #: private feature scaling (:mod:`dperm.algorithms.private_scaling`) reads blocks of
    #: every row on the machine that fits; the rows of a Dask design stay on the workers
    #: (only the lots' rows of DP-SGD's steps are fetched), so it refuses this design
    rows_stay_on_workers = True

    def batches(self, sampler, rng, steps: int):
        """The sampler's batches (:meth:`dperm.design.Design.batches`: the same law and
        the same draws as on one machine, on the client), drawn a chunk of steps ahead
        so that their rows are fetched ahead (:mod:`dperm.backends.dask_steps`)."""
        return self._steps.start(sampler, sampler.batches(rng, steps))

    def _client(self):
        """The distributed Client holding X and its per-row vectors, or None."""
        where = self._placement()
        return where[0] if where else client_of(self.X) if where is None else None

    def batch_size(self, rows) -> int:
        """The number of records a row descriptor selects (a reduction; for tests
        and diagnostics — the size of a Poisson batch is private)."""
        return int(self._pass("count", rows=rows, size=1)[0])

    # ----- products --------------------------------------------------------------------
    def matvec(self, theta):
        """Margins x̃ᵢᵀθ as a lazy Dask array (n,) or (n, k), chunked like X."""
        theta, _ = self._theta_size(theta)
        extra = () if theta.ndim == 1 else (theta.shape[1],)
        chunks = (self.X.chunks[0], *[(k,) for k in extra])
        return self.X.map_blocks(
            _margins_block,
            self.aux,
            self._spec,
            theta,
            dtype=np.float64,
            chunks=chunks,
            drop_axis=[] if extra else [1],
            meta=np.empty((0,) * (1 + len(extra))),
        )

    def rmatvec(self, v):
        """Σᵢ vᵢ x̃ᵢ (d_eff,) for an n-vector ``v`` (Dask or numpy), reduced on the cluster."""
        out = self._pass("rmatvec", y=v, size=self.shape[1])
        return out

    def row_norms(self):
        """‖x̃ᵢ‖ of the effective rows as a lazy Dask array (persisted with X's
        partitions)."""
        return self.aux[:, _NORM]

    def _raw_norms(self):
        return self.aux[:, _XNORM]

    def gram(self, weights=None) -> np.ndarray:
        D = self.shape[1]
        return self._pass("gram", weights=weights, size=D * D).reshape(D, D)

    def glm_hessian(self, loss, theta, y, *, weights=None, stride: int = 1) -> np.ndarray:
        """Σᵢ wᵢ φ''ᵢ x̃ᵢ x̃ᵢᵀ (d_eff, d_eff), reduced over the partitions (``stride``: the
        sub-sampled estimate of :meth:`dperm.design.Design.glm_hessian`, per partition)."""
        theta, _ = self._theta_size(theta)
        D = self.shape[1]
        args = dict(size=D * D, loss=loss, theta=theta, stride=int(stride))
        out = self._pass("hess", y=y, weights=weights, **args)
        return out.reshape(D, D)

    def take(self, rows) -> Design:
        """The rows ``rows`` gathered to the client as a one-machine Design (copies
        those rows: for small explicit subsets only)."""
        import dask

        if rows is None:
            return self
        blocks = self._blocks_for(rows)
        xs = self.X.to_delayed().ravel()
        auxs = self.aux.to_delayed().ravel()
        got = dask.compute([(xs[p][r], auxs[p][r]) for p, r in blocks])[0]
        xb = np.concatenate([g[0] for g in got])
        auxb = np.concatenate([g[1] for g in got])
        view = _local_design(xb, auxb, self._spec)
        if self.data_norm is not None:  # the one-machine count (dperm.backends.rows)
            view.n_clipped = view._count_clipped(auxb[:, _XNORM])
        return view

    def _blocks(self, rows=None):
        # the one-machine block iterator would slice X on the client: every pass of
        # this class is served by the workers instead (a new Design method that is not
        # overridden here fails loudly rather than gathering X)
        raise NotImplementedError(
            "internal: this Design method has no Dask implementation (dperm._dask)"
        )

    _raw_matvec = _raw_rmatvec = _weighted_gram = _glm_pass = _blocks

    def to_dense(self):
        raise InvalidDataError(
            "this algorithm needs the whole design matrix on one machine, which the Dask "
            "backend never gathers onto the client; use a mechanism whose work is sums over "
            "records (dp-sgd, dp-gd, objective, output, amp, frank-wolfe) or a numpy array"
        )

    def materialize(self):
        return self.to_dense()

    # ----- re-clipping -------------------------------------------------------------------
    def reclip(self, data_norm: float, warn: bool = True) -> DaskDesign:
        """The whole effective rows (intercept included) clipped again to
        ``data_norm`` (:func:`dperm.design._reclip` on every partition)."""
        width = self.shape[1] + 4
        aux = self.aux.map_blocks(
            _reclip_block, data_norm, width, self.fit_intercept, dtype=np.float64
        ).persist()
        n_clipped = _count_clipped(self.aux, _NORM, data_norm)
        spec = _Spec(
            data_norm=data_norm if self.data_norm is None else min(self.data_norm, data_norm),
            bound=data_norm,
            intercept=None,
            per_row_intercept=self.fit_intercept,
            clipped=True,
        )
        if n_clipped and warn:
            warn_clipped(n_clipped, data_norm, stacklevel=2)
        return DaskDesign(self.X, aux, spec=spec, n_clipped=n_clipped)


def _result(op, out, args) -> np.ndarray:
    """A pass's reduced result as float64 (from the grid of a clipped sum; the count of
    unclipped rows of ``"clipcount"``, last, as it is)."""
    grid = args.get("grid")
    if grid is None:
        return np.asarray(out, dtype=np.float64)
    if op == "clipcount":
        return np.append(from_grid(out[:-1], grid), float(out[-1]))
    return from_grid(out, grid)


def _count_clipped(aux, col, bound, count_tol: float = 0.0) -> int:
    """The rows counted as clipped by the rule of :func:`dperm.backends.rows.clipped_count`
    (norms in column ``col`` of ``aux`` above ``bound``·(1 + ``count_tol``)), counted
    on each partition and added: a scalar reduction on the workers (it also raises
    any error of the pass that built ``aux``)."""
    norms = aux[:, col]
    chunks = ((1,) * len(norms.chunks[0]),)
    counts = norms.map_blocks(_count_block, bound, count_tol, chunks=chunks, dtype=np.int64)
    return int(counts.sum().compute())


def _force(A) -> None:
    """Compute a persisted array's blocks (a tiny reduction) so that errors raised
    by its tasks surface now, on the client."""
    chunks = ((1,) * len(A.chunks[0]),)
    A.map_blocks(_one, chunks=chunks, drop_axis=list(range(1, A.ndim)), dtype=float).sum().compute()


def _row_vector(v, chunks, name: str):
    """An n-vector (numpy, Dask array or Series; shape (n,) or (n, 1)) as a 1-D Dask
    array chunked like X's rows (lazy).

    Raises
    ------
    InvalidDataError
        Not 1-D, a length other than n, unknown chunk sizes (the messages of
        :func:`dperm._validation.check_X_y`).
    """
    import dask.array as da

    if _is_dataframe(v):
        v = v.to_dask_array(lengths=True)
    if not isinstance(v, da.Array):
        v = np.asarray(v)
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim != 1:
        raise InvalidDataError(f"{name} must be 1-D of shape (n_samples,), got shape {v.shape}")
    n = sum(chunks)
    if isinstance(v, da.Array):
        _check_known(v, name)
    if v.shape[0] != n:
        raise InvalidDataError(
            f"X and {name} have inconsistent numbers of samples: X has {n}, {name} has {v.shape[0]}"
        )
    if not isinstance(v, da.Array):
        return da.from_array(v, chunks=(chunks,))
    return v if v.chunks[0] == chunks else v.rechunk({0: chunks})


def _checked_target(X, y, name: str = "y", force: bool = True):
    """y aligned to X's row partitions, persisted, with ``check_X_y``'s rules
    (numeric targets as finite float64), errors raised now — or, with ``force=False``,
    by the first computation that reads it (every pass does: a bad y never fits)."""
    y = _row_vector(y, X.chunks[0], name)
    if y.dtype.kind in "biuf":
        y = y.map_blocks(_target_block, dtype=np.float64)
    y = y.persist()
    if force:
        _force(y)
    return checked(y)


#: Dask keys of persisted targets known to satisfy ``check_X_y``'s rules (1-D, numeric
#: as finite float64); a key names one computation, so its check need not run again
_CHECKED: set = set()


def checked(y):
    """Record the persisted target ``y`` as checked (see :data:`_CHECKED`); returns y."""
    if len(_CHECKED) >= 1024:
        _CHECKED.clear()
    _CHECKED.add(y.name)
    return y
