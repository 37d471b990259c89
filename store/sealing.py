"""Secrets the server must read back (webhook signing secrets) are sealed at rest.

A one-way hash cannot sign, so these secrets are encrypted with Fernet (AES-128-CBC with an
HMAC-SHA256, from ``cryptography``) under a key from the settings (``secret_key``) or, when
none is set, a key the data folder keeps in ``secret.key`` (0600). A stolen database file
without the key gives no usable secret. Values written before sealing existed are read as
they are and sealed by ``WebhookStore.seal_plaintext`` when a service opens.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import time
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

SEALED_PREFIX = "sealed:v1:"
KEY_FILE = "secret.key"


class SealError(RuntimeError):
    """A sealed value this key cannot open: another key sealed it, or it was altered."""


class Sealer:
    """Seals and opens short secrets with one key."""

    def __init__(self, key: str | bytes) -> None:
        self._fernet = Fernet(key)
        # a key of its own for signing (never the encryption key itself), derived one way
        raw = base64.urlsafe_b64decode(key)
        self._mac_key = hashlib.blake2b(raw, digest_size=32, person=b"dynaeval-mac").digest()

    @classmethod
    def ephemeral(cls) -> Sealer:
        """A sealer with a key of its own, for a store that lives as long as the process."""
        return cls(Fernet.generate_key())

    @classmethod
    def for_data_dir(cls, data_dir: Path, configured: str | None = None) -> Sealer:
        """The configured key, else the data folder's own (made on first use)."""
        return cls(configured if configured else _folder_key(data_dir))

    def seal(self, secret: str) -> str:
        return SEALED_PREFIX + self._fernet.encrypt(secret.encode()).decode("ascii")

    def open(self, stored: str) -> str:
        """The secret a stored value holds; a value from before sealing is returned as is."""
        if not is_sealed(stored):
            return stored
        try:
            return self._fernet.decrypt(stored.removeprefix(SEALED_PREFIX)).decode()
        except InvalidToken:
            raise SealError(
                "a sealed secret does not open with this key: every process sharing the "
                "database needs the same secret_key (DYNAEVAL_SECRET_KEY)"
            ) from None

    def mac(self, data: bytes, purpose: bytes) -> bytes:
        """A 32-byte keyed BLAKE2b tag of ``data`` for ``purpose`` (at most 16 bytes: a tag
        made for one use never verifies for another), for files the server writes and reads
        back, such as kept boards: one altered or cut short does not verify."""
        if not 0 < len(purpose) <= 16:
            raise ValueError("a MAC's purpose is 1 to 16 bytes")
        return hashlib.blake2b(data, digest_size=32, key=self._mac_key, person=purpose).digest()

    def verify(self, data: bytes, tag: bytes, purpose: bytes) -> bool:
        return hmac.compare_digest(self.mac(data, purpose), tag)


def is_sealed(stored: str) -> bool:
    return stored.startswith(SEALED_PREFIX)


def _folder_key(data_dir: Path) -> bytes:
    """``<data_dir>/secret.key``, made 0600 exactly once: written whole under a temporary
    name and linked into place, so two first starts agree and a crash leaves no empty key."""
    path = data_dir / KEY_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        temporary = data_dir / f".{KEY_FILE}.{os.getpid()}.{time.monotonic_ns()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(Fernet.generate_key())
                handle.flush()
                os.fsync(handle.fileno())
            with contextlib.suppress(FileExistsError):  # another start linked its key first
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    # A racing creator may not have written yet: the key is whole once it is 44 bytes.
    for _ in range(200):
        key = path.read_bytes().strip()
        if len(key) == 44:
            return key
        time.sleep(0.01)
    raise SealError(f"{path} does not hold a key (44 characters of url-safe base64)")
