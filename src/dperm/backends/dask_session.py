"""A step session: the DP-SGD step of the Dask backend at socket latency (issues #22 §3, #31 §2).

A DP-SGD step needs the clipped gradient sum of a batch at the current θ, and θ
of the next step depends on this step's noisy sum: the steps are a chain of T
round trips client → workers → client, and the time of a step on a cluster is
the latency of that round trip.  Submitting one Dask task per worker and step
(:meth:`dperm.backends.dask.DaskDesign._pass_by_worker`) costs five scheduler
messages a step — 18 ms for an echo on a loaded 2-core machine, 0.4–0.7 s a DP-SGD
step at 10⁷ rows, each task rebuilding its partition's per-row arrays;
``distributed``'s own comms (tornado streams) cost 1.2–1.9 ms for the echo.  A
*session* opens, once per fit, one plain TCP
connection from the client to every worker that holds partitions; the worker
keeps its partitions and a queue of the batches sent ahead (each gathered into
one block before its θ arrives, by the client's :mod:`dperm.backends.dask_steps`)
and answers each step's message — θ — with its share of the clipped sum; no task,
no graph and no scheduler message per step.  Measured: 0.1–0.5 ms for an echo on
the same machine (docs/cluster.md).

What crosses the connection is what the task path sends (θ, the rows of the
batch in the worker's partitions, the clipped sum before noise), so the trust
model of docs/cluster.md is unchanged: the noise and the batches are drawn on
the client, and no seed leaves it.  The connection is

* **authenticated** both ways by a fresh 32-byte key of this session (HMAC-SHA256
  challenge–response, :mod:`hmac`), which reaches the worker inside the task that
  opens the session (through the cluster's own, possibly TLS, comms);
* **encrypted** with the cluster's TLS configuration when it has one (the SSL
  contexts of ``distributed.Security`` for the client and the worker);
* **closed** by the client at the end of the fit (or when the view is garbage
  collected), by the worker after :data:`IDLE_TIMEOUT` seconds without a message,
  and never accepted after :data:`ACCEPT_TIMEOUT` seconds.

Messages are raw little-endian arrays, never pickles, each an int64 header
``[op, word]`` and arrays:

* BATCHES ``[2, K]`` + ``int64[K, P]`` (the rows of each of the worker's P
  partitions in each of K steps: 0 = none, −1 = all) + the local row indices:
  queued, no reply;
* NEXT ``[3, L]`` + θ (float64): the head of the queue at θ;
* STEP ``[1, L]`` + ``int64[P]`` + θ + the rows: an explicit batch;
* CLOSE ``[0, 0]``.

A step's reply is an int64 status and the worker's share of the sum as int64
multiples of 2⁻ᴸ (or an error text): integers, added exactly by the client in any
order (:func:`dperm.backends.dask_tasks.to_grid`).

Only the transport and the protocol live here; the arithmetic is passed in by
the backend (:func:`dperm.backends.dask_tasks.prepare_batch` and
:func:`~dperm.backends.dask_tasks.compute_batch`), so this module imports nothing
of dperm.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import hmac
import secrets
import socket
import struct
import threading
import time

import numpy as np

__all__ = [
    "ACCEPT_TIMEOUT",
    "IDLE_TIMEOUT",
    "SessionError",
    "StepSession",
    "live_workers",
    "wait_for",
]

#: seconds a worker waits for the client to connect to a new session
ACCEPT_TIMEOUT = 60.0
#: seconds a worker keeps an idle session (then closes it and drops its references)
IDLE_TIMEOUT = 600.0
#: seconds the client waits to connect, and for the answer to one step
CONNECT_TIMEOUT = 10.0
STEP_TIMEOUT = 600.0
#: seconds of silence before the client probes a connection (TCP keepalive)
KEEPALIVE = 5
_POLL = 0.1  # seconds between the scheduler polls of :func:`wait_for`

_CLOSE, _STEP, _BATCHES, _NEXT = 0, 1, 2, 3
_OK, _ERROR = 0, 1
_HEADER = struct.Struct("<Q")
_NONCE = 32


class SessionError(RuntimeError):
    """A session could not be opened or lost its connection (the caller recovers or
    falls back to the task path; nothing was released).  ``worker``: the address of
    the worker whose connection failed, if known; ``fatal``: no session can open on
    this cluster (its comms are not TCP/TLS)."""

    def __init__(self, message: str, *, worker=None, fatal: bool = False, opening: bool = False):
        super().__init__(message)
        self.worker, self.fatal, self.opening = worker, fatal, opening


# ============================================================================ framing
def _send(sock, *parts) -> None:
    size = sum(memoryview(p).nbytes for p in parts)
    sock.sendall(b"".join([_HEADER.pack(size), *parts]))


def _recv_exact(sock, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError("the session's connection was closed")
        got += k
    return buf


def _recv(sock) -> bytearray:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return _recv_exact(sock, size)


def _mac(key: bytes, role: bytes, nonce) -> bytes:
    return hmac.new(key, role + bytes(nonce), hashlib.sha256).digest()


def _prove_worker(sock, key: bytes) -> None:
    """Worker side of the mutual challenge (raises PermissionError on a bad peer)."""
    mine = secrets.token_bytes(_NONCE)
    _send(sock, mine)
    answer = _recv(sock)
    if len(answer) != 32 + _NONCE or not hmac.compare_digest(
        bytes(answer[:32]), _mac(key, b"client", mine)
    ):
        raise PermissionError("session peer failed authentication")
    _send(sock, _mac(key, b"worker", answer[32:]))


def _prove_client(sock, key: bytes) -> None:
    """Client side of the mutual challenge (raises SessionError on a bad peer)."""
    theirs = _recv(sock)
    mine = secrets.token_bytes(_NONCE)
    _send(sock, _mac(key, b"client", theirs), mine)
    if not hmac.compare_digest(bytes(_recv(sock)), _mac(key, b"worker", mine)):
        raise SessionError("the worker failed authentication")


def _nodelay(sock) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# ============================================================================ worker side
class _Partitions:
    """The persistent state of a session on one worker: its partitions, the batches
    queued ahead (each gathered before its θ arrives) and the step arithmetic passed
    in by the backend."""

    def __init__(self, blocks, prepare, compute, shape):
        self.blocks, self.prepare, self.compute = blocks, prepare, compute
        self.shape = tuple(shape)
        self.size = int(np.prod(self.shape))
        self.queue: collections.deque = collections.deque()  # [(partition, rows)] per step
        self.ready = None  # queue[0], gathered (into self.scratch)
        self.scratch: dict = {}  # work arrays of the arithmetic, reused from step to step
        self.broken: str | None = None

    @staticmethod
    def _entry(counts, rows, pos):
        entry = []
        for i, k in enumerate(counts.tolist()):
            if k:
                entry.append((i, None if k < 0 else rows[pos : pos + k]))
                pos += max(k, 0)
        return entry, pos

    def enqueue(self, msg) -> None:
        """A BATCHES message: [op, K] + counts int64[K, P] + the rows, queued in order."""
        P = len(self.blocks)
        K = int(np.frombuffer(msg, np.int64, 1, 8)[0])
        counts = np.frombuffer(msg, np.int64, K * P, 16).reshape(K, P)
        rows = np.frombuffer(msg, np.int64, offset=16 + 8 * K * P)
        pos = 0
        for k in range(K):
            entry, pos = self._entry(counts[k], rows, pos)
            self.queue.append(entry)

    def prefetch(self) -> None:
        """Gather the next queued batch's rows (between steps, off the critical path)."""
        if self.ready is None and self.queue:
            self.ready = self.prepare(self.blocks, self.queue[0], scratch=self.scratch)

    def step(self, msg) -> np.ndarray:
        """A NEXT message ([op, L] + θ: the head of the queue) or a STEP message
        ([op, L] + counts int64[P] + θ + rows: an explicit batch); returns the int64
        sum of the worker's share on the grid 2⁻ᴸ."""
        if self.broken is not None:
            raise ValueError(self.broken)
        op, exponent = (int(v) for v in np.frombuffer(msg, np.int64, 2))
        P = len(self.blocks)
        if op == _NEXT:
            if not self.queue:
                raise ValueError("no batch queued on this worker")
            entry = self.queue.popleft()
        else:
            counts = np.frombuffer(msg, np.int64, P, 16)
            rows = np.frombuffer(msg, np.int64, offset=16 + 8 * (P + self.size))
            entry = self._entry(counts, rows, 0)[0]
        prepared, self.ready = self.ready if op == _NEXT else None, None  # scratch reused
        if prepared is None:
            prepared = self.prepare(self.blocks, entry, scratch=self.scratch)
        offset = 16 if op == _NEXT else 16 + 8 * P
        theta = np.frombuffer(msg, np.float64, self.size, offset).reshape(self.shape).copy()
        return self.compute(prepared, self.blocks, theta, exponent, scratch=self.scratch)


def _accept(server, context, key):
    """The first connection that authenticates (others are dropped), or None when
    none came within the server's timeout."""
    deadline = time.monotonic() + ACCEPT_TIMEOUT
    while time.monotonic() < deadline:
        try:
            sock, _ = server.accept()
        except OSError:  # the accept timeout
            return None
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            if context is not None:
                sock = context.wrap_socket(sock, server_side=True)
            _prove_worker(sock, key)
            return sock
        except (OSError, EOFError, PermissionError, ValueError):
            sock.close()
    return None


def _serve(server, context, key, state: _Partitions) -> None:
    """The session loop of one worker (a daemon thread): batches are queued, each step
    answered; the next batch is gathered while the client adds the noise."""
    try:
        sock = _accept(server, context, key)
    finally:
        server.close()
    if sock is None:
        return
    with sock:
        _nodelay(sock)
        sock.settimeout(IDLE_TIMEOUT)
        while True:
            try:
                msg = _recv(sock)
                op = int(np.frombuffer(msg, np.int64, 1)[0]) if len(msg) >= 16 else _CLOSE
                if op == _BATCHES:
                    try:
                        state.enqueue(msg)
                    except Exception as exc:  # reported at the next step
                        state.broken = f"{type(exc).__name__}: {exc}"
                elif op in (_NEXT, _STEP):
                    try:
                        reply = (_HEADER.pack(_OK), state.step(msg).tobytes())
                    except Exception as exc:  # reported to the client, which raises it
                        reply = (_HEADER.pack(_ERROR), f"{type(exc).__name__}: {exc}".encode())
                    _send(sock, *reply)
                else:
                    return
                with contextlib.suppress(Exception):  # an error here recurs at the step
                    state.prefetch()
            except (OSError, EOFError):  # closed, reset or idle: drop the state
                return


def open_session(key, prepare, compute, shape, blocks):
    """Open a session on this worker (runs as a task pinned to the worker that holds
    the partitions): keep the partitions, listen on the worker's host, serve one
    client in a daemon thread.

    Parameters
    ----------
    key : bytes
        The session's secret (32 random bytes drawn by the client).
    prepare : callable
        ``prepare(blocks, entry, scratch=dict)`` → what a step needs of its rows
        ``entry`` = [(partition, local rows or None = all)], gathered before θ
        arrives (``scratch``: the session's work arrays, kept between steps).
    compute : callable
        ``compute(prepared, blocks, theta, L, scratch=dict)`` → int64 vector of length
        ``prod(shape)``: the worker's share of the step on the grid 2⁻ᴸ (the
        backend's arithmetic).
    shape : tuple
        The shape of θ.
    blocks : list of (xb, auxb, yb, wb)
        The worker's partitions (futures resolved here, on the worker).

    Returns
    -------
    (host, port)
    """
    from distributed import get_worker

    worker = get_worker()
    scheme, _, rest = worker.address.partition("://")
    host = rest.rsplit(":", 1)[0].strip("[]")
    context = None
    if scheme == "tls":
        context = worker.security.get_listen_args("worker").get("ssl_context")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.create_server((host, 0), family=family)
    server.settimeout(ACCEPT_TIMEOUT)
    state = _Partitions(list(blocks), prepare, compute, shape)
    threading.Thread(
        target=_serve, args=(server, context, key, state), daemon=True, name="dperm-step-session"
    ).start()
    return host, server.getsockname()[1]


# ============================================================================ client side
def live_workers(client) -> set:
    """The addresses of the workers the scheduler knows now (one round trip, asked of
    the scheduler itself: ``Client.scheduler_info()`` returns a cache that the
    client's periodic update overwrites without the workers)."""
    return set(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def wait_for(client, futures, workers, timeout: float) -> None:
    """Wait until ``futures`` finish, polling the scheduler: a worker of ``workers``
    that leaves the cluster meanwhile (a task pinned to it would wait forever)
    raises at once.

    Raises
    ------
    SessionError
        Timeout, or a worker left (``.worker`` names it).
    """
    from distributed import wait

    deadline = time.monotonic() + timeout
    while True:
        try:
            wait(futures, timeout=_POLL)
            return
        except TimeoutError:
            pass
        gone = set(workers) - live_workers(client)
        if gone:
            raise SessionError(f"worker {sorted(gone)[0]} left the cluster", worker=min(gone))
        if time.monotonic() > deadline:
            raise SessionError(f"the workers did not answer within {timeout:.0f} s")


def _keepalive(sock) -> None:
    """Find a peer whose host vanished (no FIN, no RST) in seconds, not at STEP_TIMEOUT
    or after TCP's retransmissions (≈ 15 minutes): keepalive probes after KEEPALIVE
    idle seconds while waiting for a reply, and a KEEPALIVE·2-second limit on unacked
    data while sending (``TCP_USER_TIMEOUT``, Linux).  A worker that is slow to
    compute still acknowledges both (its kernel does)."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 2000 * KEEPALIVE)


class StepSession:
    """The client end of a session: one connection per worker that holds partitions.

    Parameters
    ----------
    client : distributed.Client
    groups : dict
        worker address → the partition indices it holds (in order).
    blocks : dict
        worker address → its list of (X, aux, y, weights) block futures (y, weights
        may be None).
    prepare, compute, shape
        As :func:`open_session`.

    Raises
    ------
    SessionError
        The cluster does not speak TCP/TLS, a worker cannot be reached, fails
        authentication or leaves the cluster while the session opens.
    """

    def __init__(self, client, groups, blocks, *, prepare, compute, shape):
        self.groups = {w: list(ps) for w, ps in groups.items()}
        self.shape = tuple(shape)
        self.size = int(np.prod(self.shape))
        self._socks: dict = {}
        self._lock = threading.Lock()  # one step at a time on the connections
        schemes = {w.partition("://")[0] for w in self.groups}
        if not schemes <= {"tcp", "tls"}:
            raise SessionError(f"no step session over {sorted(schemes)} comms", fatal=True)
        key = secrets.token_bytes(32)
        futs = [
            client.submit(
                open_session,
                key,
                prepare,
                compute,
                self.shape,
                blocks[w],
                workers=[w],
                allow_other_workers=False,
                pure=False,
            )
            for w in self.groups
        ]
        try:
            wait_for(client, futs, self.groups, ACCEPT_TIMEOUT)  # a worker that went away
            addresses = client.gather(futs)
        except SessionError:
            raise
        except Exception as exc:
            raise SessionError(f"could not open a step session: {exc}") from exc
        finally:
            client.cancel(futs)
        context = None
        if "tls" in schemes:
            context = client.security.get_connection_args("client").get("ssl_context")
        w = None
        try:
            for w, addr in zip(self.groups, addresses, strict=True):
                sock = socket.create_connection(tuple(addr), timeout=CONNECT_TIMEOUT)
                self._socks[w] = sock
                if w.startswith("tls://"):
                    sock = context.wrap_socket(sock, server_hostname=None)
                    self._socks[w] = sock
                _nodelay(sock)
                _keepalive(sock)
                _prove_client(sock, key)
                sock.settimeout(STEP_TIMEOUT)
        except (OSError, EOFError) as exc:
            self.close()
            msg = f"could not connect to {w}'s step session: {exc}"
            raise SessionError(msg, worker=w, opening=True) from exc
        except SessionError:
            self.close()
            raise

    def send_batches(self, per_worker) -> None:
        """Queue batches on the workers: ``per_worker`` = {worker: (counts int64[K, P_w],
        rows int64)} (the rows of each step's partitions in the worker's order)."""
        with self._lock:
            self._io(
                lambda: [
                    self._put(w, _BATCHES, c.shape[0], c, r) for w, (c, r) in per_worker.items()
                ]
            )

    def next(self, theta, exponent: int, workers) -> np.ndarray:
        """Σ over ``workers`` of their sums for the head of their queues at θ (int64 on
        the grid 2^-``exponent``; zeros when ``workers`` is empty)."""
        self.post(theta, exponent, workers)
        return self.collect(workers)

    def post(self, theta, exponent: int, workers) -> None:
        """The first half of :meth:`next`: θ sent, the workers compute (the caller may
        work meanwhile, e.g. queue more batches), :meth:`collect` reads the sums."""
        theta = np.ascontiguousarray(theta, dtype=np.float64).ravel()
        with self._lock:
            self._io(lambda: [self._put(w, _NEXT, exponent, theta) for w in workers])

    def collect(self, workers) -> np.ndarray:
        """The second half of :meth:`next`."""
        with self._lock:
            return self._io(lambda: self._replies(workers))

    def step(self, theta, exponent: int, per_worker) -> np.ndarray:
        """As :meth:`next` for an explicit batch: ``per_worker`` = {worker: (counts
        int64[P_w], rows int64)}."""
        theta = np.ascontiguousarray(theta, dtype=np.float64).ravel()
        parts = [(w, (c, theta, r)) for w, (c, r) in per_worker.items()]
        with self._lock:
            return self._io(lambda: self._ask(parts, _STEP, exponent))

    def _put(self, w, op, word, *parts) -> None:
        self._current = w
        _send(self._socks[w], np.array([op, word], dtype=np.int64), *parts)

    def _ask(self, parts, op, exponent):
        for w, arrays in parts:
            self._put(w, op, exponent, *arrays)
        return self._replies([w for w, _ in parts])

    def _replies(self, workers):
        out = np.zeros(self.size, dtype=np.int64)
        for w in workers:
            self._current = w
            msg = _recv(self._socks[w])
            (status,) = _HEADER.unpack_from(msg)
            if status != _OK:
                self.close()
                raise RuntimeError(f"worker {w}: {bytes(msg[8:]).decode(errors='replace')}")
            out += np.frombuffer(msg, np.int64, self.size, 8)
        return out

    def _io(self, fn):
        if self.closed:
            raise SessionError("the step session is closed")
        self._current = None
        try:
            return fn()
        except (OSError, EOFError, KeyError) as exc:
            w = self._current
            self.close()
            raise SessionError(f"worker {w}'s step session was lost: {exc!r}", worker=w) from exc

    def close(self) -> None:
        """Close every connection (each worker then drops its state); idempotent."""
        socks, self._socks = self._socks, {}
        for sock in socks.values():
            with contextlib.suppress(OSError):
                _send(sock, np.array([_CLOSE, 0], dtype=np.int64))
            with contextlib.suppress(OSError):
                sock.close()

    @property
    def closed(self) -> bool:
        return not self._socks
