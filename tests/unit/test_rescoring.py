"""New test data is scored for old models: adding a round (or changing a dataset) queues a
re-evaluation of every scored model, and the leaderboard marks them partial until then."""

from __future__ import annotations

import shutil
from pathlib import Path

from configs.vocabulary.results import EvaluationResult
from tests.conftest import make_config_dir
from usecases.boards.leaderboard import leaderboard, viewer_weights
from usecases.service import Service

SPEC = {"kind": "url", "url": "http://127.0.0.1:9", "protocol": "v1"}


def finish_with_current_data(service: Service, name: str) -> str:
    """A model whose newest result was computed on the task's data as it is now."""
    model_id, _ = service.store.submit("toy", name, SPEC)
    job = service.store.claim("w", lease_s=60)
    assert job is not None and job.model_id == model_id
    summary = {"performance": 50.0, "throughput": 100.0, "memory": 0.1,
               "robustness": 90.0, "fairness": 80.0}  # fmt: skip
    result = EvaluationResult(
        "toy", "done", summary=summary,
        provenance={"dataset_hashes": dict(service.dataset_hashes("toy"))},
    )  # fmt: skip
    assert service.store.finish(job.id, "w", result, lease=job.lease)
    return model_id


def add_round(config_dir: Path) -> None:
    shutil.copy(config_dir / "datasets/toy/r12.jsonl", config_dir / "datasets/toy/r13.jsonl")
    task_file = config_dir / "tasks/toy.yaml"
    task_file.write_text(
        task_file.read_text()
        + "  - {name: r13, datasets: [{name: test, path: datasets/toy/r13.jsonl}]}\n"
    )


def test_a_new_round_requeues_every_scored_model_once(tmp_path: Path) -> None:
    config_dir = make_config_dir(tmp_path / "configs")
    service = Service.open(tmp_path / "data", config_dir=config_dir)
    model_id = finish_with_current_data(service, "old-model")
    assert service.rescore_stale() == []  # nothing changed
    service.close()

    add_round(config_dir)
    service = Service.open(tmp_path / "data", config_dir=config_dir)
    try:
        task = service.tasks["toy"]
        board = leaderboard(
            task, service.queries.leaderboard_rows("toy"), viewer_weights(task, None),
            current_hashes=service.dataset_hashes("toy"),
        )  # fmt: skip
        [entry] = board["models"]
        assert entry["partial"] and entry["not_scored_on"] == ["r13/test"]

        jobs = service.rescore_stale()
        assert len(jobs) == 1
        submission = service.queries.submission(model_id)
        assert submission["job"]["id"] == jobs[0] and submission["job"]["status"] == "queued"
        assert submission["results"]["performance"] == 50.0  # the old result stays shown
        assert service.rescore_stale() == []  # already queued: not twice
    finally:
        service.close()


def test_a_changed_dataset_also_counts(tmp_path: Path) -> None:
    config_dir = make_config_dir(tmp_path / "configs")
    service = Service.open(tmp_path / "data", config_dir=config_dir)
    finish_with_current_data(service, "old-model")
    service.close()
    dataset = config_dir / "datasets/toy/alpha.jsonl"
    dataset.write_text("\n".join(dataset.read_text().splitlines()[:-1]) + "\n")  # a row fixed
    service = Service.open(tmp_path / "data", config_dir=config_dir)
    try:
        assert len(service.rescore_stale()) == 1
    finally:
        service.close()
