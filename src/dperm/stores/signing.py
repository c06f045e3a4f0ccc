"""Signed budgets: an HMAC-SHA256 key kept apart from the store.

A hash chain (:mod:`dperm.stores.records`) is tamper-*evident*: whoever can write the
store can rewrite a history and recompute every hash.  A budget created with a key is
tamper-*proof* for whoever holds the key:

* every record of the budget carries ``mac`` in its body: HMAC-SHA256 (:mod:`hmac`,
  RFC 2104) under the key of the record's canonical JSON without it (budget, number,
  kind, body, previous hash) — a record written, edited or re-hashed without the key
  fails its MAC, and so does a head moved onto a forged record;
* record 0 names the key (``signed``: algorithm and key id, the first 16 hex digits of
  a SHA-256 of the key: public, identifies it without revealing it);
* a MAC cannot tell a store cut back to an earlier, genuinely signed head from that
  earlier state, so the key keeps a **witness**: ``KEY.heads`` next to the key file,
  the last head this key signed or verified for each (store, budget).  A store whose
  budget is shorter than the witness (truncated), differs from it at that record
  (rewritten) or lacks the budget (emptied) fails ``verify`` with the key.  The
  witness is as local as the key file: it proves what *this copy* of the key has seen.

The key file is JSON, ``{"format": "dperm.LedgerKey", "version": 1, "algorithm":
"hmac-sha256", "key": "<64 hex digits>"}``, written once with mode 0600.  HMAC is
symmetric: whoever can verify can also sign, so give the key only to those trusted to
spend the budget (and the auditors); keep it off the machine that holds the store's
files (or off the database server).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import warnings
from pathlib import Path
from typing import Any

from ..exceptions import DataFileNotFoundError, LedgerStoreError, PrivacyLeakWarning
from .jsonfile import atomic_write_text
from .records import canonical_json

__all__ = ["ALGORITHM", "KEY_FORMAT", "LedgerKey", "as_key"]

KEY_FORMAT = "dperm.LedgerKey"
ALGORITHM = "hmac-sha256"
_HEADS_FORMAT = "dperm.LedgerKeyHeads"

try:  # POSIX: the witness file is updated under a lock
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class LedgerKey:
    """A budget-signing key (HMAC-SHA256) read from, or written to, a key file.

    Use :meth:`load`, :meth:`create` or :func:`as_key` rather than the constructor.

    Parameters
    ----------
    secret : bytes
        32 bytes (or more).
    path : str or PathLike, optional
        The key file; its witness of heads is ``<path>.heads`` (none without a path).
    """

    def __init__(self, secret: bytes, path: str | os.PathLike | None = None) -> None:
        if not isinstance(secret, bytes) or len(secret) < 32:
            raise LedgerStoreError("a ledger key is at least 32 random bytes")
        self._secret = secret
        self.path = None if path is None else Path(path)
        #: SHA-256 of the key (16 hex digits): names the key in records and messages
        self.key_id = hashlib.sha256(b"dperm.LedgerKey\0" + secret).hexdigest()[:16]

    # ---------------------------------------------------------------- key file
    @classmethod
    def load(cls, path: str | os.PathLike) -> LedgerKey:
        """The key in the file ``path``.

        Raises
        ------
        DataFileNotFoundError
            No file at ``path``.
        LedgerStoreError
            The file is not a dperm ledger key.

        Warns
        -----
        PrivacyLeakWarning
            The file is readable or writable by its group or others (keys are written
            0600): whoever can read it can sign a rewritten store.
        """
        path = Path(path)
        if not path.is_file():
            raise DataFileNotFoundError(f"no ledger key file at {str(path)!r}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            ok = (
                isinstance(data, dict)
                and data.get("format") == KEY_FORMAT
                and data.get("version") == 1
                and data.get("algorithm") == ALGORITHM
            )
            secret = bytes.fromhex(data["key"]) if ok else b""
        except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError):
            ok, secret = False, b""
        if not ok or len(secret) < 32:
            raise LedgerStoreError(
                f"{str(path)!r} is not a dperm ledger key (write one with "
                "`dperm budget create LOCATION --key FILE`)"
            )
        mode = stat.S_IMODE(path.stat().st_mode)
        if os.name == "posix" and mode & 0o077:
            warnings.warn(
                f"the ledger key {str(path)!r} has mode {mode:o}: its group or others can "
                f"read or change it, and with it sign a rewritten store (chmod 600 {path})",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        return cls(secret, path)

    @classmethod
    def create(cls, path: str | os.PathLike) -> LedgerKey:
        """Write a new random key (:func:`secrets.token_bytes`, 32 bytes) to ``path``,
        readable by its owner only; an existing file is never overwritten.

        Raises
        ------
        LedgerStoreError
            ``path`` exists, or its folder does not.
        """
        path = Path(path)
        if not path.parent.is_dir():
            raise LedgerStoreError(
                f"cannot write the key {str(path)!r}: the folder {str(path.parent)!r} "
                "does not exist"
            )
        secret = secrets.token_bytes(32)
        text = json.dumps(
            {"format": KEY_FORMAT, "version": 1, "algorithm": ALGORITHM, "key": secret.hex()}
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise LedgerStoreError(f"{str(path)!r} exists: a key is never overwritten") from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return cls(secret, path)

    def spec(self) -> dict[str, str]:
        """What record 0 of a signed budget says of its key (no secret)."""
        return {"algorithm": ALGORITHM, "key_id": self.key_id}

    # -------------------------------------------------------------------- MACs
    def mac(self, budget: str, seq: int, kind: str, body: dict[str, Any], prev: str) -> str:
        """HMAC-SHA256 (hex) of a record's canonical JSON, ``body`` without its ``mac``."""
        unsigned = {k: v for k, v in body.items() if k != "mac"}
        text = canonical_json(
            {"budget": budget, "seq": seq, "kind": kind, "body": unsigned, "prev": prev}
        )
        return hmac.new(self._secret, text.encode("utf-8"), hashlib.sha256).hexdigest()

    def signs(self, budget: str, seq: int, kind: str, body: dict[str, Any], prev: str) -> bool:
        """Whether ``body["mac"]`` is this key's MAC of the record (constant time)."""
        given = body.get("mac")
        if not isinstance(given, str):
            return False
        return hmac.compare_digest(given, self.mac(budget, seq, kind, body, prev))

    # ----------------------------------------------------------------- witness
    @property
    def heads_path(self) -> Path | None:
        """The witness file (``<key file>.heads``), or None for a key without a file."""
        return None if self.path is None else self.path.with_name(self.path.name + ".heads")

    def _read_heads(self) -> list[dict[str, Any]]:
        path = self.heads_path
        if path is None or not path.is_file():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            raise LedgerStoreError(
                f"the key's witness {str(path)!r} is unreadable (it records the heads this key "
                "signed: restore it, or delete it to start a new one)"
            ) from None
        ok = isinstance(data, dict) and data.get("format") == _HEADS_FORMAT
        heads = data.get("heads") if ok else None
        if not isinstance(heads, list):
            raise LedgerStoreError(f"{str(path)!r} is not a dperm key witness")
        return [h for h in heads if isinstance(h, dict)]

    def witnessed(self, store: str) -> dict[str, tuple[int, str]]:
        """The heads this key has signed or verified in ``store`` (a
        :func:`store_identity`): budget name → (number, hash)."""
        return {
            h["budget"]: (int(h["seq"]), str(h["hash"]))
            for h in self._read_heads()
            if h.get("store") == store and key_fields(h)
        }

    def witness(self, store: str, budget: str, head: tuple[int, str], time: str) -> bool:
        """Record ``head`` of ``budget`` in ``store`` in the witness (never moves a head
        back).  Returns False when the witness cannot be written (a read-only key
        folder): the key then still checks every MAC, not truncation."""
        path = self.heads_path
        if path is None or fcntl is None:
            return False
        try:
            fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            heads = self._read_heads()
            for h in heads:
                if h.get("store") == store and h.get("budget") == budget:
                    if int(h.get("seq", -1)) >= head[0]:
                        return True
                    h.update(seq=head[0], hash=head[1], time=time)
                    break
            else:
                heads.append(
                    {
                        "store": store,
                        "budget": budget,
                        "seq": head[0],
                        "hash": head[1],
                        "time": time,
                    }
                )
            text = json.dumps({"format": _HEADS_FORMAT, "heads": heads}, indent=1, sort_keys=True)
            with contextlib.suppress(OSError):
                atomic_write_text(path, text + "\n")
                return True
            return False
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        where = "" if self.path is None else f", {str(self.path)!r}"
        return f"LedgerKey({self.key_id}{where})"


def key_fields(h: dict[str, Any]) -> bool:
    """Whether a witness entry has the fields a head needs."""
    return (
        isinstance(h.get("budget"), str)
        and isinstance(h.get("hash"), str)
        and (isinstance(h.get("seq"), int))
    )


def as_key(key: LedgerKey | str | os.PathLike | None) -> LedgerKey | None:
    """``key`` as a :class:`LedgerKey`: a key, a key file's path, or None."""
    if key is None or isinstance(key, LedgerKey):
        return key
    if isinstance(key, str | os.PathLike):
        return LedgerKey.load(key)
    raise LedgerStoreError(f"a ledger key is a LedgerKey or a key file's path, got {key!r}")
