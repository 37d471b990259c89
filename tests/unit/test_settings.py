"""Settings: defaults < the settings file < the environment, with clear errors naming the key
and where the bad value came from, and secrets that never show."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from configs.settings import (
    MASK,
    LocalLocation,
    S3Location,
    Settings,
    SettingsError,
    Source,
    load_settings,
    mask_url,
    parse_store_url,
)
from store.db import default_data_dir, default_database_url

PG = "postgresql+psycopg://dynaeval:file-pw@db.internal/dynaeval"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_embedded_set_up(tmp_path: Path) -> None:
    settings = load_settings(environ={}, cwd=tmp_path)
    data = tmp_path / "dynaeval-data"
    assert settings.data_dir == data
    assert settings.database_url == f"sqlite:///{data / 'dynaeval.sqlite3'}"
    assert settings.store_url == str(data / "blobs")
    assert settings.store_location == LocalLocation(data / "blobs")
    assert settings.config_file is None and settings.s3.endpoint_url is None
    assert all(settings.is_default(key) for key, _, _ in settings.rows())
    assert not data.exists()  # loading settings creates nothing
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.data_dir = tmp_path  # type: ignore[misc]


def test_file_beats_defaults_and_env_beats_file(tmp_path: Path) -> None:
    file = write(
        tmp_path / "dynaeval.toml",
        f'data_dir = "state"\ndatabase_url = "{PG}"\nstore_url = "s3://bucket-a/from-file"\n'
        '[s3]\nendpoint_url = "http://127.0.0.1:9000"\nregion = "eu-west-1"\n',
    )
    env = {"DYNAEVAL_STORE_URL": "s3://bucket-b/from-env/", "AWS_DEFAULT_REGION": "us-east-2"}
    settings = load_settings(environ=env, cwd=tmp_path)
    assert settings.config_file == file
    assert settings.data_dir == tmp_path / "state"  # relative to the file
    assert settings.database_url == PG
    assert settings.source("database_url") == Source("file", str(file))
    assert settings.store_url == "s3://bucket-b/from-env"
    assert settings.store_location == S3Location("bucket-b", "from-env/")
    assert settings.source("store_url") == Source("env", "DYNAEVAL_STORE_URL")
    assert settings.s3.endpoint_url == "http://127.0.0.1:9000"
    assert settings.s3.region == "us-east-2"


def test_config_file_is_chosen_by_flag_then_env_then_working_folder(tmp_path: Path) -> None:
    write(tmp_path / "dynaeval.toml", 'data_dir = "/srv/cwd"\n')
    named = write(tmp_path / "etc" / "named.toml", 'data_dir = "/srv/env"\n')
    flag = write(tmp_path / "flag.toml", 'data_dir = "/srv/flag"\n')
    env = {"DYNAEVAL_CONFIG": str(named)}
    assert load_settings(environ={}, cwd=tmp_path).data_dir == Path("/srv/cwd")
    assert load_settings(environ=env, cwd=tmp_path).data_dir == Path("/srv/env")
    assert load_settings(flag, environ=env, cwd=tmp_path).data_dir == Path("/srv/flag")


def test_env_endpoint_for_s3_beats_the_general_one_and_empty_means_unset(tmp_path: Path) -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:2",
        "DYNAEVAL_DATABASE_URL": "",
    }
    settings = load_settings(environ=env, cwd=tmp_path)
    assert settings.s3.endpoint_url == "http://127.0.0.1:2"
    assert settings.source("s3.endpoint_url").where == "AWS_ENDPOINT_URL_S3"
    assert settings.is_default("database_url")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("datadir = 'x'\n", "datadir (did you mean data_dir?): unknown setting"),
        ("[s3]\nregoin = 'x'\n", "s3.regoin (did you mean s3.region?)"),
        ("s3 = 'x'\n", "s3: must be a table"),
        ("data_dir = 3\n", "data_dir: must be a string, not int"),
        ("data_dir = \n", "is not valid TOML"),
        ("store_url = 'ftp://host/x'\n", "store_url: unsupported scheme 'ftp'"),
        ("store_url = 's3://Bad_Bucket/x'\n", "'Bad_Bucket' is not a valid bucket name"),
        ("store_url = 's3://bucket/a/../b'\n", "invalid key prefix"),
        ("store_url = 'file://host/x'\n", "use file:///absolute/path"),
        ("store_url = ''\n", "store_url: is empty"),
        ("[s3]\nendpoint_url = 'localhost:9000'\n", "s3.endpoint_url: not an http(s) URL"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    file = write(tmp_path / "dynaeval.toml", text)
    with pytest.raises(SettingsError, match="^" + str(file).replace(".", r"\.")) as caught:
        load_settings(environ={}, cwd=tmp_path)
    assert message in str(caught.value)


def test_bad_env_values_name_the_variable_and_hide_the_password(tmp_path: Path) -> None:
    env = {"DYNAEVAL_DATABASE_URL": "dynaeval:env-pw@db/x"}
    with pytest.raises(SettingsError, match=r"^\$DYNAEVAL_DATABASE_URL: database_url: not a"):
        load_settings(environ=env, cwd=tmp_path)
    env = {"DYNAEVAL_DATABASE_URL": "pg//u:env-pw@db/x", "DYNAEVAL_STORE_URL": "s3://ok-bucket"}
    with pytest.raises(SettingsError) as caught:
        load_settings(environ=env, cwd=tmp_path)
    assert "env-pw" not in str(caught.value)


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^\$DYNAEVAL_CONFIG: config file: no such file"):
        load_settings(environ={"DYNAEVAL_CONFIG": "absent.toml"}, cwd=tmp_path)
    with pytest.raises(SettingsError, match="^--config: config file: no such file"):
        load_settings(tmp_path / "absent.toml", environ={}, cwd=tmp_path)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (PG, f"postgresql+psycopg://dynaeval:{MASK}@db.internal/dynaeval"),
        ("postgresql://u:p@ss/w:rd@h:5432/d", f"postgresql://u:{MASK}@h:5432/d"),
        ("postgresql://u@h/d", "postgresql://u@h/d"),
        ("sqlite:////srv/data/x.sqlite3", "sqlite:////srv/data/x.sqlite3"),
        ("mysql://h/d?user=u&password=pw&x=1", f"mysql://h/d?user=u&password={MASK}&x=1"),
    ],
)
def test_mask_url_hides_passwords(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_rows_mask_every_secret(tmp_path: Path) -> None:
    env = {
        "DYNAEVAL_DATABASE_URL": "postgresql://u:pw-123@h/d",
        "AWS_SECRET_ACCESS_KEY": "sk-456",
        "AWS_SESSION_TOKEN": "tok-789",
    }
    settings = load_settings(environ=env, cwd=tmp_path)
    assert settings.s3.secret_access_key == "sk-456"  # kept for boto3...
    shown = repr(settings.rows()) + repr(settings.s3)
    for secret in ("pw-123", "sk-456", "tok-789"):
        assert secret not in shown  # ...never shown
    assert dict((key, value) for key, value, _ in settings.rows())["s3.session_token"] == MASK


def test_parse_store_url_forms(tmp_path: Path) -> None:
    assert parse_store_url("blobs", tmp_path) == LocalLocation(tmp_path / "blobs")
    assert parse_store_url("file:///srv/blobs", tmp_path) == LocalLocation(Path("/srv/blobs"))
    assert parse_store_url("s3://my-bucket", tmp_path) == S3Location("my-bucket", "")
    assert parse_store_url("s3://my-bucket/a/b/", tmp_path) == S3Location("my-bucket", "a/b/")


def test_store_db_defaults_follow_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("DYNAEVAL_DATA_DIR", "DYNAEVAL_DATABASE_URL", "DYNAEVAL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert default_data_dir() == tmp_path / "dynaeval-data"
    write(tmp_path / "dynaeval.toml", 'data_dir = "from-file"\n')
    assert default_data_dir() == tmp_path / "from-file"
    assert default_database_url() == f"sqlite:///{tmp_path / 'from-file' / 'dynaeval.sqlite3'}"
    other = tmp_path / "other"
    assert default_database_url(other) == f"sqlite:///{other / 'dynaeval.sqlite3'}"
    assert other.is_dir()  # created, as before
    monkeypatch.setenv("DYNAEVAL_DATABASE_URL", PG)
    assert default_database_url(other) == PG
    assert isinstance(load_settings(), Settings)
