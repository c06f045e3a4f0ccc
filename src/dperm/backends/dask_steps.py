"""DP-SGD's steps on the Dask backend: the lots' rows brought to the client, a chunk of
steps at a time, through Dask's own comms (issue #39).

A DP-SGD step t needs the clipped gradient sum of its lot at θ_{t−1}, and θ_{t−1}
depends on the previous step's noise, so the steps are a chain.  The lots themselves
do not depend on θ or on the data (the sampler's law: Poisson, fixed-size, shuffled),
so they can be drawn ahead — by the sampler of :mod:`dperm.sampling`, from the fit's
sampling generator, in order: the very lots of the one-machine fit — and their *rows*
brought to where θ lives before θ is known:

* the lots of the next k steps (a **chunk**) are split by partition and, for each
  worker holding some of them, one task (:func:`dperm.backends.dask_tasks.take_rows`,
  submitted through the cluster's ``Client`` and placed by Dask next to the
  partitions it reads) returns exactly those rows — X in its dtype, the per-row clip
  scale and norms, y, the weights — and ``Client.gather`` brings them over: one round
  trip per k steps, through the scheduler or directly, as the client is configured
  (``direct_to_workers``), over the cluster's own comms and security
  (``distributed.Security``: TLS when the cluster's comms are);
* the chunks of steps t+k … t+3k are fetched (in background threads of the client,
  :data:`AHEAD` chunks at once) while steps t … t+k run: the chain waits for a round
  trip only at its start, or when the rows come slower than the steps use them;
* each step then runs on the client at numpy speed, *through the numpy backend's own
  code*: a one-machine :class:`~dperm.backends.numpy.Design` of the chunk's rows
  (the same rows, scales and norms) and its clipped-sum kernel
  (:func:`dperm.backends._products.design_kernel`, or
  :meth:`~dperm.backends.numpy.Design.softmax_clipped_sum`) on the lot's positions
  in the chunk — the same function on the same numbers in the same order as the
  numpy fit, so **the model is the numpy fit's, bit for bit**;
* with **adaptive clipping** (the estimators' default, Andrew et al. 2021:
  :mod:`dperm.algorithms.adaptive_clipping`) a step also releases the noisy count of
  its unclipped examples at the step's own norm Cₜ: the lot's rows are taken from the
  chunk as the numpy fit takes them from X (``Design.take``) and the one batch
  function of every backend, :func:`dperm.backends._products.clipped_sum_count`,
  gives the sum at Cₜ and the count (:meth:`Stepper.clipped_count`) — again the numpy
  fit's numbers, so the same Cₜ at every step and the same model, bit for bit.

Only the lots' rows move (each row of a lot once; the data stay partitioned on the
workers, and nothing else of them reaches the client).  The noise, the order of the
steps and the accounting stay on the client; the workers see the lots' row indices
a few chunks of steps ahead of their step.

When lots are large, the rows cost more to move than the arithmetic on them, and a
step computes its sum on the workers instead (one task per worker and step, the
partitions' sums added exactly on a public grid:
:meth:`dperm.backends.dask.DaskDesign._pass`; with adaptive clipping the task gets
Cₜ and returns its partitions' count of unclipped rows with the sum, an integer added
exactly: the numpy count, so the numpy Cₜ, and the sum to the grid's rounding):
chosen by the public cost rule :func:`worker_sums` of (lot, d, workers), never by
anything read off the data.

A worker lost mid-fit: a chunk's tasks whose partitions were on it wait in
``Client.gather`` while Dask recomputes those partitions from their graph (Dask's
own recovery); the rows, hence the model, are the same, the run is never restarted
and its ε is charged once.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import numbers
import weakref

import numpy as np

from .._validation import rows_per_chunk
from ..exceptions import InvalidDataError
from ._products import clipped_sum_count, design_kernel
from .dask_tasks import _ALL, _local_design, records, step_columns, take_rows

__all__ = [
    "CHUNK_BYTES",
    "Stepper",
    "block_futures",
    "client_of",
    "placement",
    "rows_array",
    "worker_sums",
]

#: bytes of the lots' rows one round trip brings to the client (a chunk of ≥ 1 lots);
#: the first chunk of a run is FIRST_CHUNK times smaller (the first step waits for it)
CHUNK_BYTES = 64 * 2**20
FIRST_CHUNK = 16
#: chunks fetched at once ahead of the one the steps read (the fetches overlap: one
#: chunk's rows are gathered on the workers while another's cross the network)
AHEAD = 2
#: the public cost rule (:func:`worker_sums`), measured on the benchmark machine
#: (docs/cluster.md, "Performance"; ``benchmarks/bench_scale.py --latency``): seconds
#: of one step's round trip of tasks to the workers, and seconds per number (row ×
#: column) of a lot computed on the client from fetched rows (moving them included)
#: and on one worker
TASK_ROUND_TRIP = 5e-3
FETCHED_NUMBER = 9e-9
WORKER_NUMBER = 6e-9
#: bytes per row fetched besides X's: the per-row vectors (≤ 3 float64), y, a weight
_ROW_EXTRA = 40


def worker_sums(lot: float, d: int, workers: int) -> bool:
    """The public cost rule: True when a step of an expected ``lot`` rows of ``d``
    numbers, on data spread over ``workers`` workers, is cheaper as sums computed on
    the workers (a round trip of tasks per step, the work divided by the workers)
    than on the client from fetched rows (moving the rows, then the arithmetic of
    one machine):

        TASK_ROUND_TRIP + lot·d·WORKER_NUMBER / workers < lot·d·FETCHED_NUMBER.

    Reads only public numbers (the sampler's expected lot, the width, the cluster)."""
    work = float(lot) * int(d)
    return TASK_ROUND_TRIP + work * WORKER_NUMBER / max(int(workers), 1) < work * FETCHED_NUMBER


def block_futures(arr, client):
    """The futures of a persisted array's blocks, in block order (None if some
    block is not a future of ``client``, i.e. the array is not persisted there)."""
    from dask.core import flatten
    from distributed import futures_of

    futs = {f.key: f for f in futures_of(arr) if f.client is client}
    keys = list(flatten(arr.__dask_keys__()))
    if not keys or not all(k in futs for k in keys):
        return None
    return [futs[k] for k in keys]


def client_of(X):
    """The distributed Client that computes ``X``, or None (another scheduler)."""
    import dask

    try:
        sched = dask.base.get_scheduler(collections=[X])
    except Exception:  # pragma: no cover - no scheduler configured
        return None
    client = getattr(sched, "__self__", None)
    return client if client is not None and type(client).__name__ == "Client" else None


def placement(X, aux):
    """(client, {worker: [partition]}, X futures, aux futures) when a distributed
    Client is the scheduler and X is persisted on it; False when it is not (ordinary
    graphs); None when some partition has no holder right now (a worker was lost and
    Dask is recomputing its partitions)."""
    client = client_of(X)
    if client is None:
        return False
    xf = block_futures(X, client)
    af = block_futures(aux, client)
    if xf is None or af is None:
        return False
    groups = _groups(client, xf)
    if None in groups:
        return None
    return client, groups, xf, af


def _groups(client, futures) -> dict:
    """{worker: [partition]} of the futures' current holders (key None: no holder)."""
    who = client.who_has(futures)
    groups: dict = {}
    for p, f in enumerate(futures):
        holders = sorted(who.get(f.key, ()))
        groups.setdefault(holders[0] if holders else None, []).append(p)
    return groups


def rows_array(rows, n: int) -> np.ndarray:
    """A row descriptor (index array, boolean mask, slice or integer) as non-negative
    int64 global indices, in the descriptor's order.

    Raises
    ------
    InvalidDataError
        An index outside [−n, n).
    """
    if isinstance(rows, slice):
        return np.arange(n, dtype=np.int64)[rows]
    if isinstance(rows, numbers.Integral):
        rows = np.array([int(rows)])
    rows = np.asarray(rows)
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)
    rows = rows.astype(np.int64, copy=False)
    if not rows.size:
        return rows
    lo, hi = rows.min(), rows.max()
    if lo < -n or hi >= n:
        raise InvalidDataError(f"row indices out of range for a design with {n} rows")
    return rows if lo >= 0 else np.where(rows < 0, rows + n, rows)


# ============================================================================ a chunk
class _Chunk:
    """Consecutive lots of a run and, once fetched, their rows on the client."""

    def __init__(self, lots: list):
        self.lots, self.pos = lots, 0
        self.key = self.future = None  # what was fetched (y, weights), and how
        self.kernel = None  # (loss, C, the numpy clipped-sum kernel of the rows)


def fetch(design, client, lots, y, weights, cols=_ALL, scheduler=None):
    """The rows of ``lots`` on the client: (a one-machine Design of the rows, their
    labels, weights, each lot's positions in them), by one task per worker that holds
    some (:func:`~dperm.backends.dask_tasks.take_rows`; per partition on a scheduler
    other than distributed).  The rows are put in the lots' order — each lot's rows in
    its own order, one lot after the other — so a step gathers a contiguous block:
    exactly the numpy fit's gathered batch; float32 rows of lots of one block
    (:func:`dperm._validation.rows_per_chunk`) become float64 here (exact), off the
    steps' chain, so that each step runs the numpy backend's float64 kernel, whose
    products are those of its float32 path on the same values.  ``cols``: the
    per-row columns fetched (a step needs
    :func:`~dperm.backends.dask_tasks.step_columns`); ``scheduler``: the Dask
    scheduler of a graph (found by the caller's thread: its context decides)."""
    n, offsets = design.shape[0], design._offsets
    flat, sizes = _flat(lots, n)
    part = np.searchsorted(offsets, flat, side="right") - 1
    small = np.int16 if len(offsets) < 2**15 else np.int64  # int16: a radix sort, O(rows)
    order = np.argsort(part.astype(small), kind="stable")  # rows by partition, in order
    cuts = np.searchsorted(part[order], np.arange(len(offsets)))
    arrays = (design.X, design.aux, y, weights)
    blocks = None
    if client is not None:
        blocks = [None if a is None else block_futures(a, client) for a in arrays]
        if any(b is None for a, b in zip(arrays, blocks, strict=True) if a is not None):
            client = blocks = None  # not all persisted on the client: a Dask graph
    if client is not None:
        groups = list(_groups(client, blocks[0]).values())
    else:
        blocks = [None if a is None else a.to_delayed().ravel() for a in arrays]
        groups = [[p] for p in range(design.n_partitions)]
    groups = [g for g in ([p for p in g if cuts[p + 1] > cuts[p]] for g in groups) if g]
    tasks, perms = [], []
    for g in groups:
        pos = [order[cuts[p] : cuts[p + 1]] for p in g]
        perms.append(np.concatenate(pos))
        args = [None if b is None else [b[p] for p in g] for b in blocks]
        tasks.append((*args, [flat[r] - offsets[p] for p, r in zip(g, pos, strict=True)], cols))
    if client is not None:
        pieces = client.gather([client.submit(take_rows, *t, pure=False) for t in tasks])
    else:
        import dask
        from dask.delayed import delayed

        scheduler = scheduler or dask.base.get_scheduler(collections=[design.X])
        pieces = dask.compute(*[delayed(take_rows)(*t) for t in tasks], scheduler=scheduler)
    # float64 rows (exact): a step then runs the numpy kernel of float64 rows, which
    # computes the numbers of the float32 path (the same products on the same values)
    # for lots of one block — the float32 path adds larger lots block by block
    one_block = max(sizes, default=0) <= rows_per_chunk(design.n_features)
    dtypes = [
        np.float64 if one_block else design.X.dtype,
        *(None if a is None else a.dtype for a in arrays[1:]),
    ]
    widths = [design.X.shape[1:], (len(cols),), (), ()]
    out = [
        None if a is None else np.empty((flat.size, *w), dtype=t)
        for a, w, t in zip(arrays, widths, dtypes, strict=True)
    ]
    for piece, pos in zip(pieces, perms, strict=True):  # each row to its place in its lot
        for dst, src in zip(out, piece, strict=True):
            if dst is None:
                continue
            if dst.dtype == src.dtype:
                np.put(records(dst), pos, records(src))
            else:
                dst[pos] = src
    # the per-row columns each contiguous (a lot's scales, norms: gathered from a column
    # as from the numpy design's vectors, without a copy of the strided whole first)
    view = _local_design(out[0], np.asfortranarray(out[1]), design._spec, cols)
    view._batch_info()  # the kernel's per-row table, built here, off the steps' chain
    bounds = np.cumsum([0, *sizes])
    return view, out[2], out[3], [np.arange(a, b) for a, b in itertools.pairwise(bounds)]


def _flat(lots, n: int):
    """The lots' rows as one int64 array of global indices (each lot in its order) and
    the lots' sizes; integer index arrays within [0, n) — the samplers' lots — as they
    are, any other row descriptor through :func:`rows_array`."""
    if all(type(b) is np.ndarray and b.dtype.kind in "iu" and b.ndim == 1 for b in lots):
        flat = np.concatenate([np.empty(0, np.int64), *lots]).astype(np.int64, copy=False)
        if not flat.size or (flat.min() >= 0 and flat.max() < n):
            return flat, [b.size for b in lots]
    idx = [rows_array(b, n) for b in lots]
    return np.concatenate([np.empty(0, np.int64), *idx]), [r.size for r in idx]


# ============================================================================ the steps
class Stepper:
    """The DP-SGD steps of one :class:`~dperm.backends.dask.DaskDesign`: the run's lots,
    drawn :data:`AHEAD` chunks ahead, and their rows, fetched as far ahead.

    :meth:`start` returns the run's lots (an iterator of the sampler's own batches,
    unchanged and in order); :meth:`clipped` serves a lot's clipped sum from its
    fetched rows, or returns None for the workers' sums (a lot it did not draw, or
    the cost rule chose the workers)."""

    def __init__(self, design):
        self._design = weakref.ref(design)
        self.chunks: collections.deque = collections.deque()
        self.lots: collections.deque = collections.deque()  # drawn, not yet handed out
        self.source = None
        self.client = None
        self.scheduler = None  # a graph's scheduler, when X is not persisted on a Client
        self.size = self.per_chunk = 0  # lots in the next chunk, in a full one
        self.pool = concurrent.futures.ThreadPoolExecutor(AHEAD, "dperm-lots")
        weakref.finalize(self, self.pool.shutdown, wait=False, cancel_futures=True)
        self.fetched = 0  # chunks fetched (diagnostics)

    def start(self, sampler, source):
        """A new run's lots: the sampler's ``source`` as it is when :func:`worker_sums`
        chooses the workers, else drawn a chunk at a time by this stepper."""
        import dask

        design = self._design()
        self.close()
        lot = float(sampler.normalizer)  # public: the expected lot, never a drawn one
        self.client = design._client()
        self.scheduler = dask.base.get_scheduler(collections=[design.X])
        workers = 1 if self.client is None else len(self.client.nthreads()) or 1
        if worker_sums(lot, design.shape[1], workers):
            self.source = None
            return source
        row = design.X.dtype.itemsize * design.n_features + _ROW_EXTRA
        self.per_chunk = max(1, int(CHUNK_BYTES // max(lot * row, 1.0)))
        self.size = max(1, self.per_chunk // FIRST_CHUNK)
        self.source = source
        return self

    def close(self) -> None:
        """Forget the lots and the rows of a previous run (its fetches not yet begun
        are cancelled)."""
        for chunk in self.chunks:
            if chunk.future is not None:
                chunk.future.cancel()
        self.chunks.clear()
        self.lots.clear()

    def __iter__(self):
        return self

    def __next__(self):
        if not self.lots and not self._draw():
            raise StopIteration
        return self.lots.popleft()

    def _draw(self) -> bool:
        """The next chunk of lots, drawn from the sampler (False: the run's last lot
        has been drawn)."""
        lots = [] if self.source is None else list(itertools.islice(self.source, self.size))
        if not lots:
            return False
        self.size = min(self.per_chunk, 2 * self.size)
        self.chunks.append(_Chunk(lots))
        self.lots.extend(lots)
        return True

    def lot(self, y, weights, rows):
        """(a one-machine Design of the chunk's fetched rows, their labels, weights,
        the lot's positions in them) when ``rows`` is the run's next lot drawn here —
        the lot is then handed out, and the next chunks' fetches are started — else
        None."""
        while self.chunks and self.chunks[0].pos == len(self.chunks[0].lots):
            self.chunks.popleft()
        if not self.chunks or self.chunks[0].lots[self.chunks[0].pos] is not rows:
            return None
        key = (getattr(y, "name", None), getattr(weights, "name", None))
        while len(self.chunks) <= AHEAD and self._draw():
            pass  # the next chunks' lots, to fetch while this one's steps run
        for chunk in itertools.islice(self.chunks, 1 + AHEAD):
            if chunk.key != key:
                self._submit(chunk, key, y, weights)
        chunk = self.chunks[0]
        view, yl, wl, where = chunk.future.result()
        chunk.pos += 1
        return view, yl, wl, where[chunk.pos - 1]

    def clipped(self, op, loss, C, y, weights, theta, rows):
        """The lot ``rows``'s clipped sum at θ (float64, θ's size) from its fetched
        rows, or None when ``rows`` is not the run's next lot drawn here."""
        got = self.lot(y, weights, rows)
        if got is None:
            return None
        view, yl, wl, pos = got
        if op != "clip":
            return view.softmax_clipped_sum(loss, theta, yl, C, rows=pos)
        chunk = self.chunks[0]
        if chunk.kernel is None or chunk.kernel[0] is not loss or chunk.kernel[1] != C:
            chunk.kernel = (loss, C, design_kernel(view, loss, yl, C, wl))
        return chunk.kernel[2](theta, pos)

    def clipped_count(self, loss, C, y, weights, theta, rows):
        """The lot ``rows``'s (clipped sum at Cₜ = ``C``, centred count of unclipped
        examples) from its fetched rows — the numpy fit's batch: the lot's rows taken
        from the chunk (``Design.take``, as the numpy fit takes them from X) and
        :func:`~dperm.backends._products.clipped_sum_count` on them — or None when
        ``rows`` is not the run's next lot drawn here (adaptive clipping)."""
        got = self.lot(y, weights, rows)
        if got is None:
            return None
        view, yl, wl, pos = got
        batch = view.take(pos)
        yb = None if yl is None else yl[pos]
        wb = None if wl is None else wl[pos]
        return clipped_sum_count(loss, batch, batch.row_norms(), yb, wb, theta, C)

    def _submit(self, chunk, key, y, weights) -> None:
        chunk.key = key
        design = self._design()
        args = (self.client, chunk.lots, y, weights, step_columns(design._spec), self.scheduler)
        chunk.future = self.pool.submit(fetch, design, *args)
        self.fetched += 1
