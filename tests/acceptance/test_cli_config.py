"""``dynaeval config`` as a user runs it: the effective settings with their sources, secrets
never printed, and a bad setting as one line on stderr with exit 2. Connects nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.conftest import Run

DB_PASSWORD = "db-Pa55-word-xyz"
AWS_SECRET = "aws-secret-abc123"
SESSION_TOKEN = "session-token-qrs789"


@pytest.fixture
def env(cli_env: dict[str, str]) -> dict[str, str]:
    """The CLI's environment without the developer's AWS settings."""
    for name in [name for name in cli_env if name.startswith("AWS_")]:
        del cli_env[name]
    return cli_env


def test_defaults_with_their_source(run: Run, env: dict[str, str], tmp_path: Path) -> None:
    done = run("config", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert lines["data_dir"].split()[1:] == [env["DYNAEVAL_DATA_DIR"], "env", "DYNAEVAL_DATA_DIR"]
    assert lines["store_url"].split()[1:] == [f"{env['DYNAEVAL_DATA_DIR']}/blobs", "default"]
    assert "boto3" in lines["s3.region"]


def test_secrets_are_masked_in_text_and_json(run: Run, env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "prod.toml"
    config.write_text(
        f'database_url = "postgresql+psycopg://dynaeval:{DB_PASSWORD}@db/dynaeval"\n'
        'store_url = "s3://dynaeval-blobs/prod"\n'
        f'[s3]\nendpoint_url = "http://127.0.0.1:9"\nsession_token = "{SESSION_TOKEN}"\n',
        encoding="utf-8",
    )
    env["AWS_SECRET_ACCESS_KEY"] = AWS_SECRET
    env["DYNAEVAL_CONFIG"] = str(config)
    text = run("config", cwd=tmp_path)
    as_json = run("config", "--json", cwd=tmp_path)
    for done in (text, as_json):
        assert done.returncode == 0, done.stderr
        for secret in (DB_PASSWORD, AWS_SECRET, SESSION_TOKEN):
            assert secret not in done.stdout + done.stderr
    settings = json.loads(as_json.stdout)["settings"]
    assert settings["database_url"]["value"] == "postgresql+psycopg://dynaeval:****@db/dynaeval"
    assert settings["database_url"]["from"] == str(config)
    assert settings["s3.secret_access_key"] == {
        "value": "****",
        "source": "env",
        "from": "AWS_SECRET_ACCESS_KEY",
        "env": ["AWS_SECRET_ACCESS_KEY"],
    }
    assert settings["store_url"]["value"] == "s3://dynaeval-blobs/prod"
    assert f"settings file: {config}" in text.stdout


def test_env_beats_the_file_given_with_config(
    run: Run, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "dynaeval.toml"
    config.write_text('store_url = "s3://from-file"\n', encoding="utf-8")
    env["DYNAEVAL_STORE_URL"] = "s3://from-env/x"
    done = run("config", "--json", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = json.loads(done.stdout)["settings"]["store_url"]
    assert (store["value"], store["from"]) == ("s3://from-env/x", "DYNAEVAL_STORE_URL")


@pytest.mark.parametrize(
    ("file_text", "variables", "message"),
    [
        ("datadir = 'x'\n", {}, "datadir (did you mean data_dir?): unknown setting"),
        ("", {"DYNAEVAL_STORE_URL": "gs://bucket/x"}, "unsupported scheme 'gs'"),
        ("", {"DYNAEVAL_DATABASE_URL": f"u:{DB_PASSWORD}@db"}, "not a database URL"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    run: Run,
    env: dict[str, str],
    tmp_path: Path,
    file_text: str,
    variables: dict[str, str],
    message: str,
) -> None:
    (tmp_path / "dynaeval.toml").write_text(file_text, encoding="utf-8")
    env.update(variables)
    done = run("config", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("dynaeval config: ") and message in done.stderr
    assert DB_PASSWORD not in done.stderr


def test_a_missing_config_file_is_named(run: Run, env: dict[str, str], tmp_path: Path) -> None:
    done = run("config", "--config", str(tmp_path / "absent.toml"), cwd=tmp_path)
    assert done.returncode == 2
    assert "--config: config file: no such file" in done.stderr
