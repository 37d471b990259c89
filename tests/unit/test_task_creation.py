"""Creating a task without a restart (``POST /api/v1/tasks``, ``dynaeval tasks create``): who
may, a spec checked by the task-file parser, every row checked before anything is stored,
and the new task listed, ranked and scored at once."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import assert_error
from usecases.service import Service

SPEC = {
    "name": "stance",
    "description": "Stance of a short claim.",
    "input_fields": ["claim"],
    "output": {"type": "label", "labels": ["pro", "con"]},
    "metric": "accuracy",
    "rounds": [{"name": "r1"}, {"name": "r2", "weight": 2, "datasets": [{"name": "hard"}]}],
}
ROWS = [
    {"uid": f"s{i}", "claim": f"claim number {i}", "label": ["pro", "con"][i % 2]}
    for i in range(12)
]


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data", clock=ManualClock())
    yield svc
    svc.close()


def client(service: Service, role: str = "admin", scopes: list[str] | None = None) -> FlaskClient:
    token = issue_token(service, f"{role}-{len(scopes or [])}", role, scopes)
    return signed_in(create_app(service).test_client(), token)


def post(
    who: FlaskClient, spec: Any = SPEC, files: dict[str, bytes] | None = None, **form: Any
) -> Any:
    if files is None:
        files = {"data/r1": jsonl(ROWS), "data/r2/hard": jsonl(ROWS[:6])}
    body: dict[str, Any] = {"spec": spec if isinstance(spec, str) else json.dumps(spec), **form}
    body.update({field: (io.BytesIO(data), "rows.jsonl") for field, data in files.items()})
    return who.post("/api/v1/tasks", data=body, content_type="multipart/form-data")


def blob_keys(service: Service) -> set[str]:
    return set(service.blobs.keys("datasets/"))


def test_an_admin_creates_a_task_listed_and_ranked_at_once(service: Service) -> None:
    admin = client(service)
    answer = post(admin)
    assert answer.status_code == 201, answer.get_json()
    created = answer.get_json()
    assert created["name"] == "stance" and created["version"] == 1
    assert [
        (r["name"], r["weight"], [d["name"] for d in r["datasets"]]) for r in created["rounds"]
    ] == [
        ("r1", 1.0, ["test"]),
        ("r2", 2.0, ["hard"]),
    ]
    assert created["rounds"][0]["datasets"][0]["examples"] == 12
    listed = admin.get("/api/v1/tasks").get_json()["tasks"]
    assert "stance" in [t["name"] for t in listed]
    assert admin.get("/api/v1/tasks/stance/leaderboard").status_code == 200
    index = admin.get("/", headers={"Accept": "text/html"}).get_data(as_text=True)
    assert "/tasks/stance" in index
    assert service.tasks["stance"].weights["performance"] == 4  # the shared defaults apply


def test_yaml_works_too_and_the_creator_owns_the_task(service: Service) -> None:
    author = client(service, "author")
    answer = post(author, yaml.safe_dump(SPEC))
    assert answer.status_code == 201, answer.get_json()
    # the owner manages its rounds; another researcher may not
    weight = author.patch("/api/v1/tasks/stance/rounds/r1", json={"weight": 3})
    assert weight.status_code == 200, weight.get_json()
    other = client(service, "researcher")
    assert_error(other.patch("/api/v1/tasks/stance/rounds/r1", json={"weight": 1}), 403)


def test_only_admins_and_authors_may_create(service: Service) -> None:
    assert_error(post(client(service, "researcher")), 403, "may_not_create_tasks")
    assert_error(post(client(service, "author", ["read"])), 403, "insufficient_scope")
    assert_error(post(client(service, "admin", ["read", "submit"])), 403, "may_not_create_tasks")
    anonymous = create_app(service).test_client()
    assert_error(anonymous.post("/api/v1/tasks", data={"spec": "{}"}), 401)
    assert "stance" not in service.tasks and blob_keys(service) == set()


BAD_SPECS = [
    ({**SPEC, "colour": "blue"}, "colour"),
    ({**SPEC, "metric": "squad_f1"}, "metric"),
    ({**SPEC, "output": {"type": "translation", "labels": ["a", "b"]}}, "output.labels"),
    ({**SPEC, "name": "Bad Name"}, "name"),
    ({**SPEC, "version": 3}, "version"),
    ({**SPEC, "rounds": []}, "rounds"),
    (
        {**SPEC, "rounds": [{"name": "r1", "datasets": [{"name": "test", "path": "/etc/passwd"}]}]},
        "rounds[0].datasets[0].path",
    ),  # fmt: skip
    ("name: [unclosed", "not YAML"),
    ("- a list", "mapping"),
]


@pytest.mark.parametrize(("spec", "field"), BAD_SPECS, ids=[b[1] for b in BAD_SPECS])
def test_a_bad_spec_is_a_422_naming_the_field_and_stores_nothing(
    service: Service, spec: Any, field: str
) -> None:
    error = assert_error(post(client(service), spec), 422, "invalid_spec")
    assert field in error["message"]
    assert "stance" not in service.tasks and blob_keys(service) == set()


def test_bad_data_is_a_422_naming_the_file_and_line_and_stores_nothing(service: Service) -> None:
    admin = client(service)
    bad_row = [*ROWS[:3], {"uid": "x", "claim": "c", "label": "maybe"}]
    cases = [
        ({"data/r1": jsonl(bad_row), "data/r2/hard": jsonl(ROWS)}, "r1/test (rows.jsonl):4"),
        ({"data/r1": jsonl(ROWS)}, "no file for round 'r2', dataset 'hard'"),
        ({"data/r1": jsonl(ROWS), "data/r2/hard": jsonl(ROWS), "data/r3": b"{}\n"}, "'r3'"),
        ({"data/r1": jsonl(ROWS), "data/r2/hard": b""}, "empty"),
        ({"data/r1": jsonl(ROWS), "r2": jsonl(ROWS)}, "data/<round>"),
    ]
    for files, words in cases:
        error = assert_error(post(admin, files=files), 422, "invalid_dataset")
        assert words in error["message"], (words, error)
    assert "stance" not in service.tasks and blob_keys(service) == set()


def test_an_existing_name_is_a_conflict(service: Service) -> None:
    admin = client(service)
    assert post(admin).status_code == 201
    before = blob_keys(service)
    assert_error(post(admin), 409, "task_exists")
    assert_error(post(admin, {**SPEC, "name": "sentiment"}), 409, "task_exists")
    assert blob_keys(service) == before


def test_limits_hold_for_the_spec_and_each_file(service: Service) -> None:
    admin = client(service)
    assert_error(post(admin, "x" * (300 * 1024)), 413, "spec_too_large")
    service.max_dataset_bytes = 100
    assert_error(post(admin), 413, "dataset_too_large")
    assert blob_keys(service) == set()


def test_a_created_translation_task_scores_a_model(service: Service, tmp_path: Path) -> None:
    """The new task is a task like the shipped ones: a process model scores on it."""
    import sys

    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.process import ProcessRuntime

    rows = [
        {"uid": f"t{i}", "sourceText": f"Nora has {i} books.", "sourceLanguage": "eng_Latn",
         "targetLanguage": "deu_Latn", "translatedText": f"Nora hat {i} Bücher.",
         "references": [f"Nora besitzt {i} Bücher."]}
        for i in range(10)
    ]  # fmt: skip
    spec = {
        "name": "tiny_mt",
        "input_fields": ["sourceText", "sourceLanguage", "targetLanguage"],
        "output": {"type": "translation", "key": "translatedText"},
        "metric": "chrf",
        "perturbations": {"robustness": [], "fairness": []},
        "rounds": [{"name": "r1"}],
    }
    answer = post(client(service), spec, {"data/r1": jsonl(rows)})
    assert answer.status_code == 201, answer.get_json()
    model = Path(__file__).resolve().parents[2] / "examples/models/translation_copy/model.py"
    result = run_evaluation(
        service.tasks["tiny_mt"], ProcessRuntime([sys.executable, str(model)]), service.blobs
    )
    assert result.failure is None and 0 < result.rounds[0]["performance"] < 100


def test_the_cli_creates_a_task_on_the_configured_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from client.cli import main

    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "data"))
    spec = tmp_path / "stance.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    (tmp_path / "r1.jsonl").write_bytes(jsonl(ROWS))
    (tmp_path / "hard.jsonl").write_bytes(jsonl(ROWS[:6]))
    data = ["--data", f"r1={tmp_path / 'r1.jsonl'}", "--data", f"r2/hard={tmp_path / 'hard.jsonl'}"]
    assert main(["tasks", "create", str(spec), *data, "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["name"] == "stance" and len(created["rounds"]) == 2
    assert main(["tasks", "create", str(spec), *data]) == 2
    assert "exists already" in capsys.readouterr().err
    assert main(["tasks", "create", str(spec), "--data", "r1"]) == 2
    assert "ROUND=FILE" in capsys.readouterr().err


# -- an outside trial's findings -------------------------------------------------------------
HOSTILE_SPECS = [
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),  # libyaml recursed until it crashed
    ("name: x\ndescription: " + "[" * 70 + "]" * 70, "nested deeper"),
    (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "description: [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
        "aliases",
    ),
    ({**SPEC, "description": {"a": [1, 2]}}, "description"),
    ({**SPEC, "limits": {"memory_gib": 100000}}, "limits.memory_gib"),
    ({**SPEC, "limits": {"total_s": 99999999}}, "limits.total_s"),
    ({**SPEC, "bootstrap": {"n_resamples": 1_000_000_000, "seed": 0}}, "bootstrap.n_resamples"),
    ({**SPEC, "input_fields": ["claim", "label"]}, "input_fields"),
    ({**SPEC, "input_fields": ["uid", "claim"]}, "input_fields"),
    (
        {**SPEC, "rounds": [{"name": "r1", "datasets": [{"name": ".."}]}]},
        "rounds[0].datasets[0].name",
    ),
    (
        {**SPEC, "rounds": [{"name": "r1", "datasets": [{"name": "<img src=x>"}]}]},
        "datasets[0].name",
    ),
    ({**SPEC, "rounds": [{"name": "r1", "datasets": [{"name": "d" * 3000}]}]}, "datasets[0].name"),
]


@pytest.mark.parametrize(("spec", "words"), HOSTILE_SPECS, ids=[h[1] for h in HOSTILE_SPECS])
def test_hostile_specs_are_refused_before_anything_is_stored(
    service: Service, spec: Any, words: str
) -> None:
    files = {"data/r1": jsonl(ROWS), "data/r2/hard": jsonl(ROWS)}
    error = assert_error(post(client(service), spec, files), 422, "invalid_spec")
    assert words in error["message"]
    assert blob_keys(service) == set() and "stance" not in service.tasks


def test_a_translation_key_that_is_an_input_is_refused(service: Service) -> None:
    spec = {**SPEC, "input_fields": ["sourceText"], "metric": "chrf",
            "output": {"type": "translation", "key": "sourceText"}, "rounds": [{"name": "r1"}]}  # fmt: skip
    error = assert_error(post(client(service), spec, {"data/r1": b"{}\n"}), 422, "invalid_spec")
    assert "input_fields" in error["message"]


def multipart(fields: dict[str, tuple[bytes, str | None]]) -> tuple[bytes, str]:
    """A multipart body with raw bytes (the test client would str() a bytes form value)."""
    parts = []
    for name, (data, filename) in fields.items():
        shown = f'; filename="{filename}"' if filename else ""
        head = f'--XB\r\nContent-Disposition: form-data; name="{name}"{shown}\r\n\r\n'
        parts.append(head.encode() + data + b"\r\n")
    return b"".join(parts) + b"--XB--\r\n", "multipart/form-data; boundary=XB"


def test_a_spec_that_is_not_utf8_or_a_body_that_is_not_a_form_is_refused(service: Service) -> None:
    admin = client(service)
    raw = json.dumps(SPEC).encode().replace(b"Stance", b"St\xff\xfeance", 1)
    data = {"data/r1": (jsonl(ROWS), "r1.jsonl"), "data/r2/hard": (jsonl(ROWS), "h.jsonl")}
    for spec in ((raw, None), (raw, "spec.yaml")):  # a form field, then a file
        body, kind = multipart({"spec": spec, **data})
        answer = admin.post("/api/v1/tasks", data=body, content_type=kind)
        assert "UTF-8" in assert_error(answer, 422, "invalid_spec")["message"]
    assert_error(admin.post("/api/v1/tasks", json={"spec": SPEC}), 400, "bad_request")
    assert blob_keys(service) == set()


def test_the_operators_own_limits_are_still_allowed(service: Service) -> None:
    spec = {
        **SPEC,
        "limits": {"memory_gib": 1.0, "total_s": 600},
        "bootstrap": {"n_resamples": 2000},
    }
    assert post(client(service), spec).status_code == 201


# -- roles change without new tokens ---------------------------------------------------------
def test_granting_author_lets_the_same_token_create_tasks(service: Service) -> None:
    from store.accounts import Accounts

    token = issue_token(service, "ana", "researcher")
    who = signed_in(create_app(service).test_client(), token)
    assert_error(post(who), 403, "may_not_create_tasks")
    Accounts(service.db).set_role("ana", "author")
    assert post(who).status_code == 201
    Accounts(service.db).set_role("ana", "researcher")  # taken back at the next request
    assert_error(post(who, {**SPEC, "name": "stance_two"}), 403, "may_not_create_tasks")


def test_a_demoted_admin_loses_admin_at_once_and_the_last_admin_stays(service: Service) -> None:
    from store.accounts import AccountError, Accounts

    accounts = Accounts(service.db)
    boss = signed_in(create_app(service).test_client(), issue_token(service, "boss", "admin"))
    assert boss.get("/api/v1/users").status_code == 200
    with pytest.raises(AccountError, match="last admin"):
        accounts.set_role("boss", "researcher")
    accounts.add_user("root", "admin")
    accounts.set_role("boss", "researcher")
    assert boss.get("/api/v1/users").status_code == 403
    with pytest.raises(AccountError, match="no user 'nobody'"):
        accounts.set_role("nobody", "author")
    with pytest.raises(AccountError, match="role must be one of"):
        accounts.set_role("root", "owner")


def test_the_cli_sets_a_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from client.cli import main
    from store.accounts import Accounts

    for name in ("DYNAEVAL_DATABASE_URL", "DYNAEVAL_STORE_URL", "DYNAEVAL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DYNAEVAL_DATA_DIR", str(tmp_path / "cli-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert main(["users", "add", "cleo", "--no-password"]) == 0
    assert main(["users", "set-role", "cleo", "author"]) == 0
    assert "cleo is now an author" in capsys.readouterr().out
    assert main(["users", "set-role", "nobody", "author"]) != 0
    svc = Service.open(tmp_path / "cli-data")
    try:
        assert Accounts(svc.db).user_by_name("cleo")["role"] == "author"
    finally:
        svc.close()
