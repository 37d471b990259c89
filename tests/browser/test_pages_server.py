"""The pages and downloads through Flask's test client (no browser needed): the task list
at ``/`` for browsers, the server-rendered ranking equal to the API's, the downloads, the
OpenAPI document, visibility, and nothing fetched from elsewhere."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from tests.browser.seed import SECRET_LOG, TASK, seed, seed_single
from usecases.service import Service

STATIC = Path(__file__).resolve().parents[2] / "api" / "pages"
HTML = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, dict[str, str]]]:
    service = Service.open(tmp_path_factory.mktemp("pages") / "data")
    ids = seed(service)
    ids["single"] = seed_single(service)
    yield service, ids
    service.close()


@pytest.fixture
def client(seeded: tuple[Service, dict[str, str]]) -> FlaskClient:
    return create_app(seeded[0]).test_client()


@pytest.fixture
def ids(seeded: tuple[Service, dict[str, str]]) -> dict[str, str]:
    return seeded[1]


def admin(client: FlaskClient, service: Service) -> FlaskClient:
    from store.accounts import ROLE_SCOPES, Accounts

    accounts = Accounts(service.db, service.clock)
    user = accounts.user_by_name("admin") or accounts.add_user("admin", "admin")
    token = accounts.create_token(user["id"], "t", sorted(ROLE_SCOPES["admin"])).secret
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def order(html: str) -> list[str]:
    table = html.split('id="leaderboard"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr data-model-id="([^"]+)"', table)


def api_order(client: FlaskClient, weights: str) -> list[str]:
    board = client.get(f"/api/v1/tasks/{TASK}/leaderboard", query_string={"weights": weights})
    assert board.status_code == 200, board.get_json()
    return [m["model_id"] for m in board.get_json()["models"]]


def test_root_is_the_task_list_for_browsers_and_a_redirect_for_api_clients(
    client: FlaskClient,
) -> None:
    page = client.get("/", headers=HTML)
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert 'href="/tasks/sentiment"' in text and "macro_f1" in text
    row = text.split('data-task="sentiment"', 1)[1].split("</tr>", 1)[0]
    assert "r1, r2, r3" in row and ">7<" in row  # 7 models with results
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", row)
    for accept in (None, "application/json", "*/*"):
        response = client.get("/", headers={"Accept": accept} if accept else {})
        assert response.status_code == 302 and response.location == "/api/v1/tasks"


@pytest.mark.parametrize(
    "weights", ["", "throughput:5", "performance:0,memory:5", "fairness:2.25,robustness:0"]
)
def test_server_rendered_ranking_equals_the_api(client: FlaskClient, weights: str) -> None:
    page = client.get(f"/tasks/{TASK}", query_string={"weights": weights})
    assert page.status_code == 200
    assert order(page.get_data(as_text=True)) == api_order(client, weights)


def test_the_no_script_form_fields_are_read_like_the_weights(client: FlaskClient) -> None:
    query = {"w_performance": "0", "w_throughput": "5", "w_memory": "1", "w_robustness": "1"}
    page = client.get(f"/tasks/{TASK}", query_string={**query, "w_fairness": "1"})
    expected = api_order(client, "performance:0,throughput:5,memory:1,robustness:1,fairness:1")
    assert order(page.get_data(as_text=True)) == expected


def test_bad_weights_say_why_and_show_the_defaults(client: FlaskClient) -> None:
    page = client.get(f"/tasks/{TASK}?weights=speed:3")
    assert page.status_code == 400
    text = page.get_data(as_text=True)
    assert "cannot be used" in text and "speed" in text
    assert order(text) == api_order(client, "")
    assert client.get(f"/tasks/{TASK}?rounds=r9:1").status_code == 400
    assert client.get(f"/tasks/{TASK}?rounds=r1:0,r2:0,r3:0").status_code == 400


def test_unknown_pages_are_html_404s(client: FlaskClient) -> None:
    for path in ("/tasks/nope", "/models/nope"):
        response = client.get(path)
        assert response.status_code == 404 and response.mimetype == "text/html"


def test_undefined_dynascore_is_said_and_never_zero(client: FlaskClient) -> None:
    text = client.get("/tasks/nli").get_data(as_text=True)
    assert "The Dynascore is undefined" in text and "only one model" in text
    cell = text.split('class="n score">', 1)[1].split("</td>", 1)[0]
    assert "—" in cell and "0.00" not in cell
    download = client.get("/api/v1/tasks/nli/leaderboard/download?format=csv").get_data(
        as_text=True
    )
    row = list(csv.DictReader(io.StringIO(download)))[0]
    assert row["dynascore"] == ""


def test_leaderboard_downloads_follow_the_weights(client: FlaskClient) -> None:
    weights = "memory:5,performance:1"
    response = client.get(
        f"/api/v1/tasks/{TASK}/leaderboard/download", query_string={"weights": weights}
    )
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    ranked = [r for r in rows if r["rank"]]
    assert [r["model_id"] for r in ranked] == api_order(client, weights)
    partial = next(r for r in ranked if r["name"].startswith("t5-small"))
    assert partial["partial"] == "True" and partial["not_scored_on"] == "r3/test"
    assert [r["unranked_reason"] for r in rows if not r["rank"]] == ["missing axes: fairness"]
    as_json = client.get(
        f"/api/v1/tasks/{TASK}/leaderboard/download",
        query_string={"weights": weights, "format": "json"},
    )
    body = json.loads(as_json.get_data(as_text=True))
    api = client.get(f"/api/v1/tasks/{TASK}/leaderboard", query_string={"weights": weights})
    assert [m["model_id"] for m in body["models"]] == [
        m["model_id"] for m in api.get_json()["models"]
    ]
    assert [m["dynascore"] for m in body["models"]] == [
        m["dynascore"] for m in api.get_json()["models"]
    ]
    bad = client.get(f"/api/v1/tasks/{TASK}/leaderboard/download?weights=x:1")
    assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "bad_weights"
    assert client.get("/api/v1/tasks/nope/leaderboard/download").status_code == 404
    assert client.get(f"/api/v1/tasks/{TASK}/leaderboard/download?format=xml").status_code == 422


def test_round_weights_recompute_the_round_axes(client: FlaskClient) -> None:
    only_r1 = client.get(
        f"/api/v1/tasks/{TASK}/leaderboard/download?format=json&rounds=r1:1,r2:0,r3:0"
    ).get_json()
    by_name = {m["name"]: m for m in only_r1["models"]}
    assert by_name["sentiment-lexicon"]["performance"] == pytest.approx(97.6)
    assert by_name["sentiment-lexicon"]["performance_ci"] is None
    assert only_r1["round_weights"] == {"r1": 1.0, "r2": 0.0, "r3": 0.0}
    text = client.get(f"/tasks/{TASK}?rounds=r1:1,r2:0,r3:0").get_data(as_text=True)
    assert order(text) == [m["model_id"] for m in only_r1["models"]]


def test_score_downloads_are_for_those_who_may_see_the_model(
    client: FlaskClient, seeded: tuple[Service, dict[str, str]], ids: dict[str, str]
) -> None:
    service, model_id = seeded[0], ids["distilbert"]
    url = f"/api/v1/submissions/{model_id}/scores/download"
    assert client.get(url).status_code == 404  # anonymous
    assert client.get(f"/models/{model_id}").status_code == 404
    admin(client, service)
    response = client.get(url)
    assert response.status_code == 200 and response.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    scores = service.queries.submission(model_id, with_scores=True)["scores"]
    assert len(rows) == len(scores)
    assert {"round", "dataset", "dataset_hash", "variant", "slice", "metric"} <= set(rows[0])
    as_json = client.get(url + "?format=json").get_json()
    assert len(as_json["scores"]) == len(scores)
    page = client.get(f"/models/{model_id}").get_data(as_text=True)
    assert "topic · round r2" in page and "/secret/path" not in page
    failed = client.get(f"/models/{ids['failed']}")  # an admin sees why it failed
    assert failed.status_code == 200 and SECRET_LOG in failed.get_data(as_text=True)
    assert client.get(f"/api/v1/submissions/{ids['failed']}/scores/download").status_code == 404


def test_openapi_documents_the_downloads(client: FlaskClient) -> None:
    spec = client.get("/api/v1/openapi.json").get_json()
    board = spec["paths"]["/api/v1/tasks/{task_name}/leaderboard/download"]["get"]
    params = {p["name"] for p in board["parameters"]}
    assert {"weights", "rounds", "format", "instance_memory"} <= params
    assert "text/csv" in board["responses"]["200"]["content"]
    assert "/api/v1/submissions/{model_id}/scores/download" in spec["paths"]


def test_pages_fetch_nothing_from_elsewhere(client: FlaskClient, ids: dict[str, str]) -> None:
    for path in ("/tasks/sentiment", "/tasks/nli"):
        text = client.get(path, headers=HTML).get_data(as_text=True)
        assert not re.search(r'(src|href)="(https?:)?//', text), path
    for asset in (STATIC / "static").iterdir():
        body = asset.read_text(encoding="utf-8")
        urls = set(re.findall(r"https?://[^\s\"')]+", body)) - {"http://www.w3.org/2000/svg"}
        assert not urls, (asset.name, urls)
        assert "fetch(" not in body and "XMLHttpRequest" not in body
        served = client.get(f"/static/pages/{asset.name}")
        assert served.status_code == 200
        served.close()


def test_page_data_is_safe_inside_a_script(client: FlaskClient, seeded: Any) -> None:
    service = seeded[0]
    model_id, job_id = service.store.submit(
        TASK, "x</script><b>", {"kind": "docker", "image": "r/m:1", "protocol": "v1"}
    )
    text = client.get(f"/tasks/{TASK}").get_data(as_text=True)
    assert "x</script><b>" not in text
    with service.db.session() as session, session.begin():  # leave the shared data as it was
        from store.models import JobRow, ModelRow

        session.delete(session.get(JobRow, job_id))
        session.flush()
        session.delete(session.get(ModelRow, model_id))
