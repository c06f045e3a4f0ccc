"""The client side of the Dask backend's DP-SGD steps: batches read ahead, one message
a step, and recovery from a lost worker (issue #31 §2 and §4).

A DP-SGD step t needs θ_{t−1}, so the steps are a chain of round trips; what does not
depend on θ is taken off that chain:

* **batches read ahead.**  The sampler's batches do not depend on θ.  The client
  draws them (the sampler of :mod:`dperm.sampling`, the fit's own generator, in
  order — the very batches of the one-machine fit) :data:`LOOKAHEAD` steps ahead,
  splits their global row indices by partition for many steps at once (one sort),
  and queues them on the workers in one message per worker.  A worker gathers the
  next batch's rows of its partitions into their own arrays while the client adds
  the noise and updates θ; a step is then one message per worker — θ — and one
  reply — the int64 sum of its partitions on the grid of
  :func:`~dperm.backends.dask_tasks.to_grid`.  The noise, the order of the steps and
  the accounting stay on the client; the workers see each batch's row indices up to
  :data:`LOOKAHEAD` steps before its θ (they saw them before too, one step ahead).
* **a lost worker.**  The session's connection to a worker that dies fails at once
  (its host closes it; a host that vanishes is found by TCP keepalive).  The client
  then waits until the scheduler has dropped that worker and every partition of X,
  its per-row arrays, y and the weights is in memory on a live worker again — Dask
  recomputes the lost ones from their graph, so the recovery costs the lost
  partitions' recomputation — opens a new session on the new placement, queues the
  pending batches again and repeats the step at the same θ.  The partitions' sums
  are added exactly on the grid, so the placement does not change a bit of the
  sum: the fit ends with the model of the undisturbed fit, and the privacy cost is
  charged once (the run is never restarted: each step's noise is drawn once).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import numbers
import time
import warnings
import weakref

import numpy as np

from ..exceptions import InvalidDataError
from .dask_session import SessionError, StepSession, live_workers
from .dask_tasks import compute_batch, from_grid, grid_exponent, prepare_batch

__all__ = ["LOOKAHEAD", "RECOVERY_TIMEOUT", "ReadAhead", "Stepper", "placement", "rows_array"]

#: steps of batches queued on the workers ahead of θ
LOOKAHEAD = 32
#: seconds the client waits for a lost worker's partitions to be back in memory
RECOVERY_TIMEOUT = 300.0
#: seconds the client waits for the scheduler to drop a worker whose session failed
LOST_GRACE = 3.0


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
    Client is the scheduler and X is persisted on it; False when it is not (no step
    session, no per-worker tasks: ordinary graphs); None when some partition has no
    holder right now (a worker was lost and Dask is recomputing its partitions)."""
    client = client_of(X)
    if client is None:
        return False
    xf = block_futures(X, client)
    af = block_futures(aux, client)
    if xf is None or af is None:
        return False
    who = client.who_has(xf)
    groups: dict = {}
    for p, f in enumerate(xf):
        holders = sorted(who.get(f.key, ()))
        if not holders:
            return None
        groups.setdefault(holders[0], []).append(p)
    return client, groups, xf, af


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


def split(batches, offsets: np.ndarray, groups: dict):
    """The batches' rows by worker: ({worker: (counts int64[K, P_w], local rows)},
    row count of each batch).  A partition's rows keep the batch's order (a stable
    sort by (step, partition); sorted batches, as Poisson batches are, are cut at
    the partitions' offsets instead, O(P log b) a batch); ``None`` (every row) is the
    count −1."""
    P = len(offsets) - 1
    n = int(offsets[-1])
    K = len(batches)
    idx = [None if b is None else rows_array(b, n) for b in batches]
    sizes = np.array([n if r is None else r.size for r in idx], dtype=np.int64)
    flat = np.concatenate([np.empty(0, np.int64)] + [r for r in idx if r is not None])
    counts = np.zeros((K, P), dtype=np.int64)
    if all(r is None or not np.any(r[1:] < r[:-1]) for r in idx):  # (step, partition) order
        for k, r in enumerate(idx):
            if r is not None and r.size:
                counts[k] = np.diff(np.searchsorted(r, offsets))
        part = np.repeat(np.tile(np.arange(P), K), counts.ravel())
    else:
        part = np.searchsorted(offsets, flat, side="right") - 1
        key = np.repeat(np.arange(K) * P, [0 if r is None else r.size for r in idx]) + part
        order = np.argsort(key, kind="stable")
        flat, part = flat[order], part[order]
        counts = np.bincount(key, minlength=K * P).reshape(K, P)
    local = flat - offsets[part]
    counts[[r is None for r in idx]] = -1
    owner = np.empty(P, dtype=np.int16 if len(groups) < 2**15 else np.int64)
    for j, ps in enumerate(groups.values()):
        owner[ps] = j
    of_row = owner[part]
    by_owner = np.argsort(of_row, kind="stable")  # a radix sort for int16 keys: O(rows)
    cuts = np.concatenate([[0], np.cumsum(np.bincount(of_row, minlength=len(groups)))])
    out = {}
    for j, (w, ps) in enumerate(groups.items()):
        out[w] = (np.ascontiguousarray(counts[:, ps]), local[by_owner[cuts[j] : cuts[j + 1]]])
    return out, sizes


class ReadAhead:
    """The sampler's batches (``sampler.batches(rng, steps)``, unchanged and in order),
    with :meth:`draw` to read some ahead of the loop."""

    def __init__(self, source):
        self.source = source
        self.buffer: collections.deque = collections.deque()

    def __iter__(self):
        return self

    def __next__(self):
        return self.buffer.popleft() if self.buffer else next(self.source)

    def draw(self, k: int) -> list:
        new = list(itertools.islice(self.source, k))
        self.buffer.extend(new)
        return new


@dataclasses.dataclass
class _Queued:
    rows: object  # the sampler's batch object (matched by identity)
    exponent: int  # the grid of its sum (its row count and C)
    workers: list  # the workers that hold rows of it


class Stepper:
    """The DP-SGD steps of one :class:`~dperm.backends.dask.DaskDesign`: its step
    session, the batches queued on the workers, and the recovery from a lost worker."""

    def __init__(self, design):
        self._design = weakref.ref(design)
        self.session = None  # (key, loss, StepSession)
        self.reader: ReadAhead | None = None
        self.queued: collections.deque = collections.deque()
        self.failed = False  # no session can open (warned once)
        self.recoveries = 0  # sessions reopened after a lost connection (diagnostics)

    def start(self, source) -> ReadAhead:
        """A new run's batches: forget the queue of the previous one."""
        self.close()
        self.queued.clear()
        self.reader = ReadAhead(source)
        return self.reader

    def close(self) -> None:
        if self.session is not None:
            self.session[2].close()
            self.session = None

    # ----- a step ---------------------------------------------------------------------
    def clipped(self, op, loss, C, y, weights, theta, rows):
        """The batch's clipped sum (float64, flat) through the step session, or None
        for the task path (no session on this cluster, or none could be restored)."""
        design = self._design()
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        strikes = 0
        while True:
            try:
                session = self._open(design, op, loss, C, y, weights, theta.shape)
                if session is None:
                    return None
                return self._step(design, session, C, theta, rows)
            except SessionError as exc:
                self.close()
                lost = not exc.fatal and self._recover(design, exc, y, weights, deadline)
                strikes += not lost
                if exc.fatal or strikes >= 2 or time.monotonic() > deadline:
                    self._give_up(exc)
                    return None

    def _step(self, design, session, C, theta, rows):
        if self.queued and rows is self.queued[0].rows:
            item = self.queued[0]
            session.post(theta, item.exponent, item.workers)
            self._refill(design, session, C)  # while the workers compute
            total = session.collect(item.workers)
            self.queued.popleft()
            return from_grid(total, item.exponent)
        self._refill(design, session, C)
        per_worker, sizes = split([rows], design._offsets, session.groups)
        exponent = grid_exponent(sizes[0], C)
        per_worker = {w: (c[0], r) for w, (c, r) in per_worker.items() if c.any()}
        return from_grid(session.step(theta, exponent, per_worker), exponent)

    def _refill(self, design, session, C) -> None:
        """Draw and queue batches ahead when fewer than LOOKAHEAD/2 are queued."""
        if self.reader is None or len(self.queued) > LOOKAHEAD // 2:
            return
        new = self.reader.draw(LOOKAHEAD - len(self.queued))
        if new:
            self._send(design, session, C, new)

    def _send(self, design, session, C, batches) -> None:
        """Queue ``batches`` on the workers (each worker gets the steps it has rows in)."""
        per_worker, sizes = split(batches, design._offsets, session.groups)
        items = [_Queued(b, grid_exponent(m, C), []) for b, m in zip(batches, sizes, strict=True)]
        message = {}
        for w, (counts, rows) in per_worker.items():
            has = counts.any(axis=1)
            for k in np.flatnonzero(has):
                items[k].workers.append(w)
            if has.any():
                message[w] = (np.ascontiguousarray(counts[has]), rows)
        self.queued.extend(items)
        session.send_batches(message)

    # ----- opening, losing and restoring a session ------------------------------------------
    def _open(self, design, op, loss, C, y, weights, shape):
        """The open session for this (op, loss, C, y, weights), opened on first use and
        given the queued batches; None when this cluster has none (the task path).

        Raises SessionError when a partition has no holder now or a worker leaves."""
        key = (op, C, shape, getattr(y, "name", None), getattr(weights, "name", None))
        old = self.session
        if old is not None and old[0] == key and old[1] is loss and not old[2].closed:
            return old[2]
        self.close()
        if not design.use_session or self.failed:
            return None
        where = design._placement()
        if where is None:
            if design._where is False:
                return None  # not a distributed Client, or X not persisted on it
            raise SessionError("some partitions have no holder (being recomputed)")
        client, groups, xf, af = where
        yf = None if y is None else block_futures(y, client)
        wf = None if weights is None else block_futures(weights, client)
        if (y is not None and yf is None) or (weights is not None and wf is None):
            return None
        blocks = {
            w: [(xf[p], af[p], yf and yf[p], wf and wf[p]) for p in ps] for w, ps in groups.items()
        }
        session = StepSession(
            client,
            groups,
            blocks,
            prepare=functools.partial(prepare_batch, op=op, spec=design._spec),
            compute=functools.partial(
                compute_batch,
                op=op,
                spec=design._spec,
                args=dict(size=int(np.prod(shape)), loss=loss, C=C),
            ),
            shape=shape,
        )
        weakref.finalize(design, session.close)
        self.session = (key, loss, session)
        pending = [q.rows for q in self.queued]
        self.queued.clear()
        if pending:  # queued on a lost session: again, on this one
            self._send(design, session, C, pending)
        return session

    def _recover(self, design, exc: SessionError, y, weights, deadline: float) -> bool:
        """After a lost connection: wait until the scheduler has dropped the worker (at
        once for a killed process; docs/cluster.md for a vanished host) and every
        partition of X, aux, y and the weights is in memory on a live worker (Dask
        recomputes the lost ones from their graph).  Returns False when the worker
        whose connection failed is still in the cluster (nothing was lost)."""
        design._where = None
        client = client_of(design.X)
        if client is None:
            return False
        grace = time.monotonic() + (0.5 if exc.opening else LOST_GRACE)
        alive = exc.worker in live_workers(client)
        while alive and time.monotonic() < grace:
            time.sleep(0.02)
            alive = exc.worker in live_workers(client)
        if alive:
            return False
        self.recoveries += 1
        futures = [
            f
            for a in (design.X, design.aux, y, weights)
            if a is not None
            for f in (block_futures(a, client) or ())
        ]
        while time.monotonic() < deadline:
            live = live_workers(client)
            who = client.who_has(futures)
            if all(set(who.get(f.key, ())) & live for f in futures):
                break
            time.sleep(0.02)
        design._where = None
        return True

    def _give_up(self, exc) -> None:
        self.failed = True
        warnings.warn(
            f"dperm could not open a step session on the Dask workers ({exc}); DP-SGD "
            "steps run as one task per worker and step, which is slower "
            "(docs/cluster.md, 'Performance')",
            RuntimeWarning,
            stacklevel=6,
        )
