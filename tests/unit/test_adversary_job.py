"""The automated adversary through the API and a real worker loop: a task owner starts a run
on a round open for collection, the worker searches perturbations of the task's held-out
examples against the round's best models (live, through the worker's runtime factory), and
what fools them joins the validation queue, machine-proposed, with the models it fools;
vMER reports it apart. A run is deterministic for its seed, never counts more queries than
its budget, and a crash half-way loses nothing: the retry resumes from the stored
checkpoint and ends with exactly what an uninterrupted run finds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from api.app import create_app
from configs.vocabulary.clock import ManualClock
from configs.vocabulary.results import EvaluationResult, Score, ScoreKey
from store.accounts import Accounts
from store.adversary import AdversaryRuns
from store.models import CollectedExampleRow, JobRow
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, AXES_B
from tests.unit.test_task_catalog import small_config
from tests.unit.test_worker import FakeModel, FakeRuntime, factory_of
from usecases.service import Service
from worker.worker import Worker

ROUND = "c1"
LOOP = f"/api/v1/tasks/sentiment/rounds/{ROUND}"
USERS = ("owner", "val1")


class LookupModel(FakeModel):
    """Protocol v1: the gold label of a statement it has seen verbatim, else ``neutral``
    (any edit fools it); ``constant`` answers ``positive`` whatever it is sent."""

    def __init__(self, gold: dict[str, str], constant: bool = False) -> None:
        super().__init__("positive")
        self.gold, self.constant = gold, constant

    def handler(self) -> type[BaseHTTPRequestHandler]:
        gold, constant = self.gold, self.constant

        class Lookup(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"status": "ok"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answers = [
                    {"uid": i["uid"],
                     "label": "positive" if constant else gold.get(i["statement"], "neutral")}
                    for i in body["instances"]
                ]  # fmt: skip
                self._send({"predictions": answers})

        return Lookup


@dataclass
class Loop:
    service: Service
    tokens: dict[str, str]
    models: dict[str, str]  # name -> model id
    runtimes: list[FakeRuntime] = field(default_factory=list)

    def client(self, user: str) -> FlaskClient:
        return signed_in(create_app(self.service).test_client(), self.tokens[user])

    def worker(self) -> Worker:
        gold = {
            json.loads(line)["statement"]: json.loads(line)["label"]
            for line in (self.service.config_dir / "datasets/s/r1.jsonl").read_text().splitlines()
        }
        gold.update(dict(SEED_ROWS))  # it knows the seeds too, so edits of them can fool it

        def model(spec: dict[str, Any]) -> FakeModel:
            return LookupModel(gold, constant=spec.command == ("constant",))

        return Worker(
            self.service.store, self.service.blobs, self.service.tasks,
            runtime_factory=factory_of(model, self.runtimes),
            heartbeat_s=0.05, poll_s=0.05, config_dir=self.service.config_dir,
        )  # fmt: skip

    def proposals(self) -> list[tuple[str | None, str, tuple[str, ...]]]:
        """(source uid, statement, names of the fooled models) of every machine proposal."""
        names = {model_id: name for name, model_id in self.models.items()}
        with self.service.db.session() as session:
            rows = session.scalars(
                select(CollectedExampleRow)
                .where(CollectedExampleRow.origin == "machine")
                .order_by(CollectedExampleRow.source_uid)
            ).all()
            return [
                (
                    r.source_uid,
                    r.inputs["statement"],
                    tuple(names[m] for m in r.fooled_models or ()),
                )
                for r in rows
            ]


def scored(service: Service, name: str, axes: dict[str, float]) -> str:
    runtime = {"kind": "process", "command": [name], "protocol": "v1"}
    model_id, job_id = service.store.submit("sentiment", name, runtime)
    claimed = service.store.claim("seed", 60)
    assert claimed is not None and claimed.id == job_id
    hashes = dict(service.dataset_hashes("sentiment"))
    result = EvaluationResult(
        task="sentiment", status="done", summary={**axes, "metric": "macro_f1"},
        rounds=[{"round": "r1", "performance": axes["performance"]}],
        scores=[Score(ScoreKey("sentiment", "r1", "test", hashes["r1/test"]), 50.0, 20)],
        provenance={"dataset_hashes": hashes},
    )  # fmt: skip
    assert service.store.finish(job_id, "seed", result, lease=claimed.lease)
    return model_id


def open_loop(root: Path) -> Loop:
    service = Service.open(
        root / "data", config_dir=small_config(root / "configs"), clock=ManualClock()
    )
    tokens = {name: issue_token(service, name, "researcher") for name in USERS}
    Accounts(service.db, service.clock).set_task_access("sentiment", "owner", private=False)
    models = {
        "lookup": scored(service, "lookup", AXES_A),
        "constant": scored(service, "constant", AXES_B),
    }
    loop = Loop(service, tokens, models)
    body = {"model_ids": list(models.values())}
    opened = loop.client("owner").post(f"{LOOP}/collection", json=body)
    assert opened.status_code == 201, opened.get_json()
    return loop


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    made = open_loop(tmp_path / "one")
    try:
        yield made
    finally:
        made.service.close()


# The owner's own seeds: the adversary never starts from held-out rows.
SEED_ROWS = [
    ("the waiter was friendly and the soup was wonderful", "positive"),
    ("a dreadful evening with cold food and rude staff", "negative"),
    ("the hotel room was clean and the view was lovely", "positive"),
    ("my order arrived late and the box was broken", "negative"),
    ("the concert was loud but the band played well", "positive"),
    ("the train was delayed again and nobody told us why", "negative"),
    ("a charming little shop with helpful owners", "positive"),
    ("the screen cracked after one week of normal use", "negative"),
]
SEEDS = [{"inputs": {"statement": text}, "label": label} for text, label in SEED_ROWS]
ATTACK = {"seed": 3, "max_queries": 40, "max_proposals": 4, "top_models": 2, "seeds": SEEDS}


def test_a_run_proposes_within_budget_and_the_proposals_join_validation(loop: Loop) -> None:
    started = loop.client("owner").post(f"{LOOP}/adversary", json=ATTACK)
    assert started.status_code == 202, started.get_json()
    run = started.get_json()
    assert run["status"] == "queued" and run["spec"]["models"][0] == loop.models["lookup"]
    again = loop.client("owner").post(f"{LOOP}/adversary", json=ATTACK)
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "attack_running"
    assert loop.client("val1").post(f"{LOOP}/adversary", json=ATTACK).status_code == 403

    assert loop.worker().work(burst=True).done == 1
    [done] = loop.client("val1").get(f"{LOOP}/adversary").get_json()["runs"]
    assert done["status"] == "done", done
    progress = done["checkpoint"]
    assert 0 < progress["queries_used"] <= ATTACK["max_queries"]
    assert progress["stopped_because"] in ("budget", "proposals", "sources")

    found = loop.proposals()
    assert 0 < len(found) == progress["proposals"] <= ATTACK["max_proposals"]
    assert all(fooled == ("lookup",) for _, _, fooled in found)  # never "constant"
    queue = loop.client("val1").get(f"{LOOP}/validation").get_json()
    machine = [e for e in queue["examples"] if e["origin"] == "machine"]
    assert len(machine) == len(found)
    vmer = loop.client("val1").get(f"{LOOP}/vmer").get_json()
    origins = {t["origin"]: t for t in vmer["totals"]}
    assert origins["machine"]["submitted"] == len(found)  # apart from human-written ones


def test_the_same_seed_gives_the_same_proposals(loop: Loop, tmp_path: Path) -> None:
    loop.client("owner").post(f"{LOOP}/adversary", json=ATTACK)
    loop.worker().work(burst=True)
    other = open_loop(tmp_path / "two")
    try:
        other.client("owner").post(f"{LOOP}/adversary", json=ATTACK)
        other.worker().work(burst=True)
        first = [(uid, text) for uid, text, _ in loop.proposals()]
        assert first and first == [(uid, text) for uid, text, _ in other.proposals()]
    finally:
        other.service.close()


def test_a_crash_half_way_resumes_from_the_checkpoint_and_loses_nothing(
    loop: Loop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = {**ATTACK, "max_proposals": 6, "max_queries": 60}
    job_id = loop.client("owner").post(f"{LOOP}/adversary", json=budget).get_json()["job_id"]
    original = AdversaryRuns.save_progress
    calls = {"n": 0}

    def crash_once(self: AdversaryRuns, *args: Any, **kwargs: Any) -> bool:
        calls["n"] += 1
        if calls["n"] == 3:  # two sources stored; the worker dies before the third
            raise RuntimeError("the worker process was killed")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(AdversaryRuns, "save_progress", crash_once)
    stats = loop.worker().work(burst=True)
    assert stats.requeued == 1  # a platform fault: retried, not charged
    with loop.service.db.session() as session:
        job = session.get(JobRow, job_id)
        assert job is not None and job.checkpoint is not None
        kept = dict(job.checkpoint)
    assert kept["next_source"] >= 2
    loop.service.clock.advance(60)  # type: ignore[attr-defined]  # past the retry delay
    assert loop.worker().work(burst=True).done == 1

    clean = open_loop(tmp_path / "clean")
    try:
        clean.client("owner").post(f"{LOOP}/adversary", json=budget)
        clean.worker().work(burst=True)
        assert loop.proposals() == clean.proposals()  # the same, and none twice
        runs = [
            loop.client("val1").get(f"{LOOP}/adversary"),
            clean.client("val1").get(f"{LOOP}/adversary"),
        ]
        resumed, uninterrupted = (r.get_json()["runs"][0]["checkpoint"] for r in runs)
        assert resumed["queries_used"] == uninterrupted["queries_used"] <= budget["max_queries"]
    finally:
        clean.service.close()


def test_a_checkpoint_no_release_wrote_is_listed_as_none(loop: Loop) -> None:
    """The listing (and a new run, which reads the round's runs back) shows a stored
    checkpoint it cannot read as none, never a 500."""
    from sqlalchemy import update

    job_id = loop.client("owner").post(f"{LOOP}/adversary", json=ATTACK).get_json()["job_id"]
    with loop.service.db.session() as session, session.begin():
        changed = update(JobRow).where(JobRow.id == job_id)
        session.execute(changed.values(checkpoint={"failed_models": ["m2"]}))
    listed = loop.client("val1").get(f"{LOOP}/adversary")
    assert listed.status_code == 200, listed.get_json()
    assert listed.get_json()["runs"][0]["checkpoint"] == {}


def test_a_round_not_open_is_refused(loop: Loop) -> None:
    closed = loop.client("owner").post(f"{LOOP}/collection/close")
    assert closed.status_code == 200
    refused = loop.client("owner").post(f"{LOOP}/adversary", json=ATTACK)
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "round_not_open"
    never = loop.client("owner").post("/api/v1/tasks/sentiment/rounds/zz/adversary", json={})
    assert never.status_code == 404
    bad = loop.client("owner").post(f"{LOOP}/adversary", json={"max_queries": 0})
    assert bad.status_code == 422


@pytest.mark.parametrize(
    "body",
    [
        {"seed": 1, "bogus": 3},  # an unknown field answered 500
        {"name_swaps": False},  # the task decides name swaps: not an option, answered 500
        {"operators": ["typo", "no-such-operator"]},  # accepted, then failed 3 times
        {"operators": []},
        {"operators": "typo"},
    ],
)
def test_bad_adversary_options_are_422_and_queue_nothing(loop: Loop, body: dict[str, Any]) -> None:
    refused = loop.client("owner").post(f"{LOOP}/adversary", json=body)
    assert refused.status_code == 422, refused.get_json()
    assert set(refused.get_json()["error"]) >= {"code", "message"}
    assert loop.client("owner").get(f"{LOOP}/adversary").get_json()["runs"] == []


def test_an_owner_picks_the_adversarys_operators(loop: Loop) -> None:
    started = loop.client("owner").post(f"{LOOP}/adversary", json={**ATTACK, "operators": ["typo"]})
    assert started.status_code == 202, started.get_json()
    assert started.get_json()["spec"]["attack"]["operators"] == ["typo"]


def test_no_held_out_string_reaches_a_proposal(loop: Loop) -> None:
    """Proposals are typo'd or paraphrased copies of their sources, and every validator sees
    them: they come from the owner's seeds and the round's written examples only."""
    held_out = [
        json.loads(line)
        for path in (loop.service.config_dir / "datasets").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    texts = {row["statement"] for row in held_out}
    words = [set(text.split()) for text in texts]
    started = loop.client("owner").post(f"{LOOP}/adversary", json={**ATTACK, "max_proposals": 20})
    assert started.status_code == 202, started.get_json()
    assert not (set(map(str, started.get_json()["spec"].get("seeds", []))) & texts)
    assert loop.worker().work(burst=True).done == 1
    found = loop.proposals()
    assert found, "the run proposed nothing: the test proves nothing"
    seeds = {f"seed-{k}": text for k, (text, _) in enumerate(SEED_ROWS)}
    for source, statement, _ in found:
        assert source in seeds, source
        assert statement not in texts
        near = [w for w in words if len(w & set(statement.split())) >= len(w) - 3]
        assert not near, (statement, near[:1])  # not within an edit budget of a held-out row


def test_written_examples_seed_the_adversary_and_nothing_else_is_refused(loop: Loop) -> None:
    without = {key: value for key, value in ATTACK.items() if key != "seeds"}
    refused = loop.client("owner").post(f"{LOOP}/adversary", json=without)
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "no_sources"
    text, label = SEED_ROWS[0]
    written = loop.client("owner").post(
        f"{LOOP}/examples", json={"inputs": {"statement": text}, "label": label}
    )
    assert written.status_code == 201, written.get_json()
    assert loop.client("owner").post(f"{LOOP}/adversary", json=without).status_code == 202
    assert loop.worker().work(burst=True).done == 1
    assert {source for source, _, _ in loop.proposals()} <= {written.get_json()["id"]}


def test_a_bad_seed_is_422(loop: Loop) -> None:
    bad = {**ATTACK, "seeds": [{"inputs": {"statement": "fine"}, "label": "furious"}]}
    assert loop.client("owner").post(f"{LOOP}/adversary", json=bad).status_code == 422
    assert loop.client("owner").get(f"{LOOP}/adversary").get_json()["runs"] == []
