"""``dynaeval rounds add|list`` in process: on the configured database and through a live
server with a token; bad input is one line on stderr and exit 2."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from api.app import create_app
from client.cli import main
from store.accounts import Accounts
from store.tasks import TaskVersions
from tests.unit.auth_helpers import issue_token
from tests.unit.test_rounds_api import rows
from tests.unit.test_task_catalog import small_config
from usecases.service import Service


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DYNAEVAL_DATABASE_URL", "DYNAEVAL_STORE_URL", "DYNAEVAL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path / "data"


def write(tmp_path: Path, data: bytes, name: str = "new.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_local_add_then_same_content_then_list(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write(tmp_path, rows(4))
    assert main(["rounds", "add", "sentiment", "r9", data, "--weight", "2"]) == 0
    assert "added" in capsys.readouterr().out
    assert main(["rounds", "add", "sentiment", "r9", data, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["created"] is False
    assert main(["rounds", "list", "sentiment", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["rounds"][-1]["name"] == "r9" and listed["rounds"][-1]["weight"] == 2.0
    assert listed["rounds"][-1]["datasets"][0]["examples"] == 4
    assert main(["rounds", "list", "sentiment"]) == 0
    assert "r9" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rounds", "add", "sentiment", "r9", "{bad}"], "new.jsonl:2: not JSON"),
        (["rounds", "add", "sentiment", "r9", "{missing}"], "no such file"),
        (["rounds", "add", "nope", "r9", "{good}"], "unknown task 'nope'"),
        (["rounds", "list", "nope"], "unknown task 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    files = {
        "bad": write(tmp_path, rows(1) + b"{oops\n"),
        "good": write(tmp_path, rows(1), "good.jsonl"),
        "missing": str(tmp_path / "missing.jsonl"),
    }
    assert main([a.format(**files) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert list((data_dir / "blobs").rglob("*.jsonl")) == []


def test_a_bad_weight_is_a_usage_error(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["rounds", "add", "sentiment", "r9", write(tmp_path, rows(1)), "--weight", "0"])
    assert exited.value.code == 2


@pytest.fixture
def server(tmp_path: Path, data_dir: Path) -> Iterator[tuple[str, Service]]:
    service = Service.open(tmp_path / "served", config_dir=small_config(tmp_path / "configs"))
    server = make_server("127.0.0.1", 0, create_app(service), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", service
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        service.close()


def test_through_a_server_as_the_owner(
    server: tuple[str, Service],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, service = server
    monkeypatch.setenv("DYNAEVAL_API_KEY", issue_token(service, "carol", "researcher"))
    data = write(tmp_path, rows(3))
    assert main(["rounds", "add", "sentiment", "r2", data, "--server", url]) == 2
    assert "owner" in capsys.readouterr().err
    Accounts(service.db).set_task_access("sentiment", "carol", private=False)
    assert main(["rounds", "add", "sentiment", "r2", data, "--server", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task_version"] == 2
    changed = write(tmp_path, rows(5), "changed.jsonl")
    argv = ["rounds", "add", "sentiment", "r2", changed, "--server", url, "--weight", "3"]
    assert main([*argv, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["dataset"]["version"], done["round"]["weight"]) == (2, 3.0)
    assert main(["rounds", "list", "sentiment", "--server", url, "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["rounds"]] == ["r1", "r2"]
    assert TaskVersions(service.db).latest_version("sentiment") == 4
