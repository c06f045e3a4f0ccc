"""A step session: the DP-SGD step of the Dask backend at socket latency (issue #22 §3).

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
keeps the one-machine views of its partitions (persistent per-partition state,
built once) and answers each step's message — θ and the batch's local row
indices — with its partitions' sum; no task, no graph and no scheduler message
per step.  Measured: 0.1–0.5 ms for the echo on the same machine (docs/cluster.md).

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

Messages are raw little-endian arrays, never pickles: a step is
``int64[1 + P]`` (the op code, then the number of rows of each of the worker's P
partitions in the batch: 0 = none, −1 = all) followed by θ as float64 and the
local row indices as int64; the reply is an int64 status followed by the float64
sum (or an error text).  Each worker adds its partitions' results in partition
order and the client adds the workers' in a fixed order: the arithmetic of the
task path, to the bit.

Only the transport and the protocol live here; the per-partition arithmetic is
passed in by :mod:`dperm.backends.dask` (its ``_local_design`` and ``_apply``), so
this module imports nothing of dperm.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import socket
import struct
import threading
import time

import numpy as np

__all__ = ["ACCEPT_TIMEOUT", "IDLE_TIMEOUT", "SessionError", "StepSession"]

#: seconds a worker waits for the client to connect to a new session
ACCEPT_TIMEOUT = 60.0
#: seconds a worker keeps an idle session (then closes it and drops its references)
IDLE_TIMEOUT = 600.0
#: seconds the client waits to connect, and for the answer to one step
CONNECT_TIMEOUT = 10.0
STEP_TIMEOUT = 600.0

_STEP, _CLOSE = 1, 0
_OK, _ERROR = 0, 1
_HEADER = struct.Struct("<Q")
_NONCE = 32


class SessionError(RuntimeError):
    """A session could not be opened or lost its connection (the caller falls back to
    the task path; nothing was released)."""


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
    """The persistent state of a session on one worker: the views of its partitions
    (built once) and the step arithmetic passed in by the backend."""

    def __init__(self, views, ys, ws, compute, op, args, shape):
        self.views, self.ys, self.ws = views, ys, ws
        self.compute, self.op, self.args, self.shape = compute, op, args, tuple(shape)
        self.size = int(np.prod(self.shape))

    def step(self, msg) -> np.ndarray:
        P = len(self.views)
        counts = np.frombuffer(msg, np.int64, P, 8)
        theta = np.frombuffer(msg, np.float64, self.size, 8 * (1 + P)).reshape(self.shape).copy()
        rows = np.frombuffer(msg, np.int64, offset=8 * (1 + P + self.size))
        args = {**self.args, "theta": theta}
        out, pos = None, 0
        for i, k in enumerate(counts.tolist()):
            if k == 0:
                continue
            r = None if k < 0 else rows[pos : pos + k]
            pos += max(k, 0)
            res = self.compute(self.op, self.views[i], self.ys[i], self.ws[i], args, r)
            out = res if out is None else out + res
        return np.zeros(self.size) if out is None else np.asarray(out, dtype=np.float64)


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
    """The session loop of one worker (a daemon thread): one reply per step."""
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
                if len(msg) < 8 or np.frombuffer(msg, np.int64, 1)[0] != _STEP:
                    return
                try:
                    reply = (_HEADER.pack(_OK), state.step(msg).tobytes())
                except Exception as exc:  # reported to the client, which raises it
                    reply = (_HEADER.pack(_ERROR), f"{type(exc).__name__}: {exc}".encode())
                _send(sock, *reply)
            except (OSError, EOFError):  # closed, reset or idle: drop the state
                return


def open_session(key, make_view, compute, op, args, shape, blocks):
    """Open a session on this worker (runs as a task pinned to the worker that holds
    the partitions): build the partitions' views once, listen on the worker's host,
    serve one client in a daemon thread.

    Parameters
    ----------
    key : bytes
        The session's secret (32 random bytes drawn by the client).
    make_view : callable
        ``make_view(xb, auxb)`` → the one-machine Design of a partition.
    compute : callable
        ``compute(op, view, yb, wb, args, rows)`` → float64 vector of length
        ``prod(shape)`` (the backend's per-partition arithmetic).
    op : str
    args : dict
        The fixed arguments of ``op`` (loss, clipping norm, size); θ is added per step.
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
    views = [make_view(xb, auxb) for xb, auxb, _, _ in blocks]
    state = _Partitions(
        views, [b[2] for b in blocks], [b[3] for b in blocks], compute, op, args, shape
    )
    threading.Thread(
        target=_serve, args=(server, context, key, state), daemon=True, name="dperm-step-session"
    ).start()
    return host, server.getsockname()[1]


# ============================================================================ client side
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
    make_view, compute, op, args, shape
        As :func:`open_session`.

    Raises
    ------
    SessionError
        The cluster does not speak TCP/TLS, a worker cannot be reached, or one
        fails authentication.
    """

    def __init__(self, client, groups, blocks, *, make_view, compute, op, args, shape):
        self.groups = {w: list(ps) for w, ps in groups.items()}
        self.shape = tuple(shape)
        self.size = int(np.prod(self.shape))
        self._socks: dict = {}
        self._lock = threading.Lock()  # one step at a time on the connections
        schemes = {w.partition("://")[0] for w in self.groups}
        if not schemes <= {"tcp", "tls"}:
            raise SessionError(f"no step session over {sorted(schemes)} comms")
        scheme = "tls" if "tls" in schemes else "tcp"
        key = secrets.token_bytes(32)
        futs = [
            client.submit(
                open_session,
                key,
                make_view,
                compute,
                op,
                args,
                self.shape,
                blocks[w],
                workers=[w],
                allow_other_workers=False,
                pure=False,
            )
            for w in self.groups
        ]
        try:
            from distributed import wait

            wait(futs, timeout=ACCEPT_TIMEOUT)  # a worker that went away: no hang
            addresses = client.gather(futs)
        except Exception as exc:
            raise SessionError(f"could not open a step session: {exc}") from exc
        finally:
            client.cancel(futs)
        context = None
        if scheme == "tls":
            context = client.security.get_connection_args("client").get("ssl_context")
        try:
            for w, addr in zip(self.groups, addresses, strict=True):
                sock = socket.create_connection(tuple(addr), timeout=CONNECT_TIMEOUT)
                self._socks[w] = sock
                if w.startswith("tls://"):
                    sock = context.wrap_socket(sock, server_hostname=None)
                    self._socks[w] = sock
                _nodelay(sock)
                _prove_client(sock, key)
                sock.settimeout(STEP_TIMEOUT)
        except (OSError, EOFError) as exc:
            self.close()
            raise SessionError(f"could not connect to a worker's step session: {exc}") from exc
        except SessionError:
            self.close()
            raise

    def step(self, theta, blocks) -> np.ndarray:
        """Σ over the workers of their partitions' results for θ and ``blocks``
        ([(partition, local rows or None)], as :meth:`DaskDesign._blocks_for`).

        Raises
        ------
        SessionError
            A connection was lost (the caller reopens or falls back).
        RuntimeError
            The worker's arithmetic raised (its message).
        """
        with self._lock:
            return self._step(theta, blocks)

    def _step(self, theta, blocks) -> np.ndarray:
        if self.closed:
            raise SessionError("the step session is closed")
        theta = np.ascontiguousarray(theta, dtype=np.float64).ravel()
        rows = dict(blocks)
        sent = []
        try:
            for w, ps in self.groups.items():
                counts = np.zeros(1 + len(ps), dtype=np.int64)
                counts[0] = _STEP
                parts = []
                for i, p in enumerate(ps):
                    if p not in rows:
                        continue
                    r = rows[p]
                    if r is None:
                        counts[1 + i] = -1
                    else:
                        counts[1 + i] = len(r)
                        parts.append(np.ascontiguousarray(r, dtype=np.int64))
                if not counts[1:].any():
                    continue
                _send(self._socks[w], counts, theta, *parts)
                sent.append(w)
            replies = [_recv(self._socks[w]) for w in sent]
        except (OSError, EOFError) as exc:
            self.close()
            raise SessionError(f"a worker's step session was lost: {exc}") from exc
        out = np.zeros(self.size)
        for i, msg in enumerate(replies):
            (status,) = _HEADER.unpack_from(msg)
            if status != _OK:
                self.close()
                raise RuntimeError(f"worker {sent[i]}: {bytes(msg[8:]).decode(errors='replace')}")
            res = np.frombuffer(msg, np.float64, self.size, 8)
            out = res.copy() if i == 0 else out + res
        return out

    def close(self) -> None:
        """Close every connection (each worker then drops its state); idempotent."""
        socks, self._socks = self._socks, {}
        for sock in socks.values():
            with contextlib.suppress(OSError):
                _send(sock, np.array([_CLOSE], dtype=np.int64))
            with contextlib.suppress(OSError):
                sock.close()

    @property
    def closed(self) -> bool:
        return not self._socks
