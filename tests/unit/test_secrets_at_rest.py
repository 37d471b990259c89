"""Secrets at rest: webhook signing secrets are sealed under the settings' key, and the data
folder, the SQLite database and its WAL are its owner's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from configs.settings import SettingsError, load_settings
from store.accounts import Accounts
from store.db import Database
from store.sealing import KEY_FILE, Sealer, SealError, is_sealed
from store.webhooks import WebhookStore
from usecases.service import Service


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _owner(db: Database) -> str:
    return str(Accounts(db).add_user("hooker", "researcher")["id"])


def _raw_secrets(db: Database) -> list[str]:
    with db.engine.connect() as connection:
        return [row[0] for row in connection.execute(text("SELECT secret FROM webhooks"))]


def test_a_webhook_secret_is_stored_sealed_and_opens_only_with_its_key(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    sealer = Sealer.ephemeral()
    hooks = WebhookStore(db, sealer)
    hook, secret = hooks.create(_owner(db), "https://hooks.example.com/ci", ["done"])
    [stored] = _raw_secrets(db)
    assert is_sealed(stored) and secret not in stored
    file_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.encode() not in file_bytes  # neither the database file nor its WAL
    rotated = hooks.rotate_secret(hook.id)
    assert rotated is not None and rotated not in _raw_secrets(db)[0]
    hooks.ping(hook.id)
    [due] = hooks.claim_due()
    assert due.secret == rotated
    with pytest.raises(SealError, match="secret_key"):
        Sealer.ephemeral().open(_raw_secrets(db)[0])


def test_a_delivery_whose_secret_does_not_open_is_not_sent(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    hook, _ = WebhookStore(db, Sealer.ephemeral()).create(
        _owner(db), "https://hooks.example.com/ci", ["done"]
    )
    other = WebhookStore(db, Sealer.ephemeral())
    other.ping(hook.id)
    assert other.claim_due() == []  # never sent unsigned or signed with garbage


def test_secrets_stored_before_sealing_are_sealed_when_a_service_opens(tmp_path: Path) -> None:
    data = tmp_path / "data"
    service = Service.open(data)
    hook, _ = WebhookStore(service.db, service.sealer).create(
        _owner(service.db), "https://hooks.example.com/ci", ["done"]
    )
    with service.db.engine.begin() as connection:  # as an older version wrote it
        connection.execute(text("UPDATE webhooks SET secret = 'whsec_old'"))
    service.close()
    reopened = Service.open(data)
    try:
        [stored] = _raw_secrets(reopened.db)
        assert is_sealed(stored) and reopened.sealer.open(stored) == "whsec_old"
    finally:
        reopened.close()


def test_the_data_folder_and_database_are_the_owners_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        service = Service.open(data)
        with service.db.engine.begin() as connection:
            connection.execute(text("SELECT 1"))
        service.close()
    finally:
        os.umask(old)
    assert _mode(data) == 0o700
    assert _mode(data / KEY_FILE) == 0o600
    files = [p for p in data.iterdir() if p.name.startswith("dynaeval.sqlite3")]
    assert files and all(_mode(p) == 0o600 for p in files), [(p, oct(_mode(p))) for p in files]


def test_an_older_start_s_wide_modes_are_narrowed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    Service.open(data).close()
    data.chmod(0o755)
    (data / "dynaeval.sqlite3").chmod(0o644)
    Service.open(data).close()
    assert _mode(data) == 0o700 and _mode(data / "dynaeval.sqlite3") == 0o600


def test_the_key_comes_from_the_settings_when_set(tmp_path: Path) -> None:
    key = Sealer.ephemeral()._fernet._signing_key  # noqa: SLF001 - any 16 bytes will not do
    assert len(key) == 16
    good = "x" * 43 + "="
    settings = load_settings(environ={"DYNAEVAL_SECRET_KEY": good}, cwd=tmp_path)
    assert settings.secret_key == good
    assert ("secret_key", "****") in [(k, v) for k, v, _ in settings.rows()]
    sealed = Sealer.for_data_dir(tmp_path / "a", good).seal("whsec_x")
    assert Sealer.for_data_dir(tmp_path / "b", good).open(sealed) == "whsec_x"
    assert not (tmp_path / "a" / KEY_FILE).exists()
    with pytest.raises(SettingsError, match="secret_key"):
        load_settings(environ={"DYNAEVAL_SECRET_KEY": "short"}, cwd=tmp_path)


def test_a_crash_while_making_the_key_leaves_no_empty_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key was created empty and then written: a crash between the two left an empty
    secret.key and every later start failed (found in review)."""

    def crash(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "link", crash)
    with pytest.raises(KeyboardInterrupt):
        Sealer.for_data_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the key nor its temporary file
    monkeypatch.undo()
    sealed = Sealer.for_data_dir(tmp_path).seal("whsec_x")
    assert Sealer.for_data_dir(tmp_path).open(sealed) == "whsec_x"
    assert _mode(tmp_path / KEY_FILE) == 0o600


def test_a_mac_verifies_only_its_own_data_purpose_and_key() -> None:
    sealer, other = Sealer.ephemeral(), Sealer.ephemeral()
    tag = sealer.mac(b"a board", b"kept board")
    assert sealer.verify(b"a board", tag, b"kept board")
    assert not sealer.verify(b"a board!", tag, b"kept board")  # altered
    assert not sealer.verify(b"a boar", tag, b"kept board")  # cut short
    assert not sealer.verify(b"a board", tag, b"another use")  # made for another purpose
    assert not other.verify(b"a board", tag, b"kept board")  # another server's key
    with pytest.raises(ValueError):
        sealer.mac(b"x", b"a purpose longer than sixteen bytes")
