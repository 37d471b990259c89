"""Opaque ids for the wire: the model never sees a dataset uid.

Every instance sent carries ``blake2b(key=salt, variant NUL uid)`` as hex, with a random
salt per evaluation: ids cannot be linked to dataset uids, to another evaluation, or
between the original and a perturbed copy of one example, so a model cannot carry an
answer over from one pass to another by uid. Replies are matched by position and the
evaluator maps them back to dataset uids itself.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

WIRE_ID_BYTES = 10  # 20 hex characters
SALT_BYTES = 32


class WireIds:
    """Derives the wire id of each (variant, uid) under one secret salt."""

    def __init__(self, salt: bytes | None = None) -> None:
        self._keyed = hashlib.blake2b(
            key=salt if salt is not None else secrets.token_bytes(SALT_BYTES),
            digest_size=WIRE_ID_BYTES,
        )

    def assign(self, variant: str, uids: Sequence[str]) -> list[str]:
        """One id per uid, unique within the call (a uid repeated in one request, as the
        profiling pass may do on a small dataset, gets a fresh id each time)."""
        prefix = self._keyed.copy()
        prefix.update(variant.encode() + b"\x00")
        ids = [_digest(prefix, uid.encode()) for uid in uids]
        if len(set(ids)) != len(ids):
            ids = self._assign_repeated(prefix, uids)
        return ids

    @staticmethod
    def _assign_repeated(prefix: hashlib.blake2b, uids: Sequence[str]) -> list[str]:
        seen: dict[str, int] = {}
        ids = []
        for uid in uids:
            count = seen[uid] = seen.get(uid, -1) + 1
            suffix = b"" if count == 0 else b"\x00%d" % count
            ids.append(_digest(prefix, uid.encode() + suffix))
        return ids


def _digest(prefix: hashlib.blake2b, data: bytes) -> str:
    state = prefix.copy()
    state.update(data)
    return state.hexdigest()
