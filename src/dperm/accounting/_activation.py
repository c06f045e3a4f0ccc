"""Where the active budgets are open: this process's registry of ``Ledger.active()`` blocks
and the marks by which its worker processes find them.

The ledgers a fit charges live in a context variable (:data:`dperm.accounting.active.ACTIVE`):
they follow the code of the context that opened the block (asyncio tasks copy it) but not a
thread started with a fresh context, nor another process.  So that a fit that cannot see an
open budget is refused instead of silently not counted, every block is also recorded

* in this process's **registry** (:func:`open_block`): its ledger, process id and thread —
  a fit in another thread that does not see it, or in a process forked from this one (which
  inherits the registry), finds it there;
* in the **environment** (``DPERM_ACTIVE_BUDGET`` = ``PID``, ``:memory`` for an in-memory
  budget, ``:file`` when the marker file below was written), inherited by every process
  started while the block is open (spawn, forkserver, loky, subprocesses);
* in a **marker file** ``DIR/PID`` (``DIR`` = ``$XDG_RUNTIME_DIR`` or the temporary folder,
  ``dperm-budgets-UID``, private to the user), which the descendants of this process find
  by walking their ancestors in ``/proc`` — the workers of a pool started *before* the block
  (a reused loky or multiprocessing pool, a forkserver) have neither the context nor the
  environment mark.  The file holds the process's start time, so a stale file (the process
  was killed) never matches a later process that reuses the id.

Where the marker files can be read, they decide whether a block is *still* open: a worker
that outlives the block (a pool started inside it and used after it) keeps the
environment mark and the registry it inherited, and must fit freely again once the block
has closed.

``memory`` marks an in-memory budget: no other process can charge it, so its descendants
refuse every fit while it is open (a stored budget can be opened by the worker itself).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..stores.memory import MemoryStore

__all__ = [
    "ENV_MARK",
    "Block",
    "ancestor_mark",
    "close_block",
    "kept_in_memory",
    "open_block",
    "open_blocks",
    "still_open",
]

#: the environment mark of an open block: ``PID`` or ``PID:memory``
ENV_MARK = "DPERM_ACTIVE_BUDGET"
_MEMORY, _FILE = "memory", "file"


@dataclass(frozen=True, eq=False)
class Block:
    """One open ``Ledger.active()`` block: its ledger, process, thread and whether the
    ledger is kept in this process's memory (no other process can charge it)."""

    ledger: Any
    pid: int
    thread: int
    in_memory: bool


_LOCK = threading.Lock()
#: the open blocks of this process — and, in a forked child, those of its parent
_OPEN: list[Block] = []
#: the environment mark before this process opened its first block (restored after its last)
_OUTER: dict[int, str | None] = {}
#: the processes (this one, or the one it was forked from) whose marker file was written
_WRITTEN: set[int] = set()
#: this process's ancestors: [(pid, start time or None)], computed once per process
_ANCESTRY: dict[int, list[tuple[int, str | None]]] = {}


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # the parent's lock may have been held by another thread


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def kept_in_memory(ledger: Any) -> bool:
    """Whether ``ledger`` lives in this process's memory (``Ledger(ε, δ)``, or
    ``Ledger.open(MemoryStore())``), not in a store other processes can charge."""
    store = getattr(ledger, "_store", None)
    return getattr(ledger, "_location", None) is None or isinstance(store, MemoryStore)


def open_block(ledger: Any) -> Block:
    """Record that ``ledger`` is active in this thread; publish the marks."""
    block = Block(ledger, os.getpid(), threading.get_ident(), kept_in_memory(ledger))
    with _LOCK:
        _OPEN.append(block)
        _publish()
    return block


def close_block(block: Block) -> None:
    """Forget ``block``; withdraw the marks when it was this process's last."""
    with _LOCK:
        with contextlib.suppress(ValueError):
            _OPEN.remove(block)
        _publish()


def open_blocks() -> tuple[Block, ...]:
    """Every open block of this process (and of the process it was forked from)."""
    with _LOCK:
        return tuple(_OPEN)


def _inherited_mark() -> str | None:
    pid = os.getpid()
    return _OUTER[pid] if pid in _OUTER else os.environ.get(ENV_MARK)


def _publish() -> None:
    """Set (or restore) the environment mark and the marker file of this process."""
    pid = os.getpid()
    own = [b for b in _OPEN if b.pid == pid]
    if not own:
        if pid in _OUTER:
            outer = _OUTER.pop(pid)
            if outer is None:
                os.environ.pop(ENV_MARK, None)
            else:
                os.environ[ENV_MARK] = outer
            _remove_marker(pid)
        return
    if pid not in _OUTER:
        _OUTER[pid] = os.environ.get(ENV_MARK)
    live = [b for b in _OPEN if b.pid == pid or still_open(b)]  # a parent's, if still open
    above = ancestor_mark()  # an in-memory budget above this process: no descendant charges it
    memory = any(b.in_memory for b in live) or (above is not None and above[1])
    written = _write_marker(pid, memory)
    if written:
        _WRITTEN.add(pid)
    else:
        _WRITTEN.discard(pid)
    os.environ[ENV_MARK] = ":".join(
        [str(pid), *([_MEMORY] if memory else []), *([_FILE] if written else [])]
    )


# ------------------------------------------------------------------ the marker files
def _marker_path() -> str | None:
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no POSIX users: the environment mark only
        return None
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"dperm-budgets-{getuid()}")


def _trusted(st: os.stat_result) -> bool:
    # another user's folder, or one others can write, is not trusted
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _marker_dir(create: bool) -> str | None:
    """The folder of the marker files, private to this user (None: unavailable)."""
    path = _marker_path()
    if path is None:
        return None
    try:
        if create:
            os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    return path if _trusted(st) else None


#: (folder, its inode and modification time, the names it held then): one stat per check
_LISTING: list = [None, None, frozenset()]


def _marker_names() -> tuple[str | None, frozenset[str]]:
    """The folder and the names of its marker files, listed again only when it changed."""
    path = _marker_path()
    if path is None:
        return None, frozenset()
    try:
        st = os.lstat(path)
    except OSError:
        return None, frozenset()
    if not _trusted(st):
        return None, frozenset()
    key = (st.st_ino, st.st_mtime_ns)
    # file times are coarse (a clock tick): a listing made within the same tick as a later
    # change would keep its old time, so a folder changed in the last second is listed anew
    recent = time.time_ns() - st.st_mtime_ns < 1_000_000_000
    if recent or _LISTING[0] != path or _LISTING[1] != key:
        try:
            names = frozenset(os.listdir(path))
        except OSError:
            return None, frozenset()
        _LISTING[:] = [path, key, names]
    return path, _LISTING[2]


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of ``pid`` from ``/proc`` (None: no such process or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[19]  # fields 4 (ppid) and 22 (starttime) of proc(5)
    except (OSError, IndexError, ValueError):
        return None


def _write_marker(pid: int, memory: bool) -> bool:
    folder = _marker_dir(create=True)
    if folder is None:
        return False
    own = _proc_stat(pid)
    text = f"{own[1] if own else '-'} {_MEMORY if memory else 'stored'}\n"
    path = os.path.join(folder, str(pid))
    tmp = f"{path}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    _prune(folder, pid)
    return True


def _remove_marker(pid: int) -> None:
    folder = _marker_dir(create=False)
    if folder is not None:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, str(pid)))


def _read_marker(folder: str, pid: int) -> tuple[str, str] | None:
    try:
        with open(os.path.join(folder, str(pid)), encoding="ascii") as fh:
            start, _, kind = fh.read().strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        return None
    return start, kind


def _prune(folder: str, pid: int) -> None:
    """Remove the files of processes that no longer exist (killed inside a block)."""
    if not os.path.isdir("/proc"):
        return
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if not name.isdigit() or int(name) == pid:
                continue
            found, live = _read_marker(folder, int(name)), _proc_stat(int(name))
            if found is not None and (live is None or live[1] != found[0]):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, name))


@atexit.register
def _withdraw_at_exit() -> None:
    if os.getpid() in _OUTER:
        _remove_marker(os.getpid())


def _ancestors() -> list[tuple[int, str | None]]:
    me = os.getpid()
    chain = _ANCESTRY.get(me)
    if chain is None:
        chain, pid = [], os.getppid()
        while pid > 1 and len(chain) < 64:
            found = _proc_stat(pid)
            if found is None:
                if not chain:  # no /proc: the parent only, by its id
                    chain.append((pid, None))
                break
            chain.append((pid, found[1]))
            pid = found[0]
        _ANCESTRY.clear()
        _ANCESTRY[me] = chain
    return chain


def _marked(folder: str, pid: int, start: str | None) -> tuple[str, str] | None:
    """The marker file of ``pid`` if it belongs to that very process (start time)."""
    found = _read_marker(folder, pid)
    if found is None or (start is not None and found[0] != start):
        return None
    return found


def still_open(block: Block) -> bool:
    """Whether the process that opened ``block`` (another one: this process was forked
    from it) still has a block open — by its marker file where that process wrote one and
    it can be read, else assumed (fail closed)."""
    folder = _marker_dir(create=False)
    if block.pid not in _WRITTEN or folder is None or not os.path.isdir("/proc"):
        return True
    live = _proc_stat(block.pid)
    return live is not None and _marked(folder, block.pid, live[1]) is not None


def ancestor_mark() -> tuple[int, bool] | None:
    """(pid, in memory) of a process above this one whose budget is active, else None.

    The marker files of this process's ancestors decide (their start times must match:
    a reused process id never matches); the environment mark this process inherited
    decides alone when its owner wrote no file or is not found among the ancestors."""
    pid = os.getpid()
    folder, names = _marker_names()
    inherited = _inherited_mark()
    if inherited:
        owner, *flags = inherited.split(":")
        if owner != str(pid):
            number = int(owner) if owner.isdigit() else 0
            decided_by_file = (
                _FILE in flags and folder is not None and any(a == number for a, _ in _ancestors())
            )
            if not decided_by_file:
                return number, _MEMORY in flags
    if not names:
        return None
    for ancestor, start in _ancestors():
        if str(ancestor) in names:
            found = _marked(folder, ancestor, start)
            if found is not None:
                return ancestor, found[1] == _MEMORY
    return None
