"""A model's page shows a few of its predictions on the task's public sets (a translation,
or a picture with its question), and never an example of a held-out set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.app import create_app
from configs.paths import CONFIG_DIR
from evaluator.inputs.datasets import load_examples
from evaluator.inputs.perturbed_sets import dataset_hash
from tests.unit.auth_helpers import issue_token, signed_in
from tests.unit.test_api import AXES_A, finished
from usecases.service import Service
from worker.predictions import FORMAT, predictions_key


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service.open(tmp_path / "data")
    yield svc
    svc.close()


def keep_predictions(service: Service, task_name: str, model_id: str, stale: bool = False) -> dict:
    """The model's stored predictions on every set: 'pred-<uid>' for each example."""
    task = service.tasks[task_name]
    sets, firsts = [], {}
    for round_spec in task.rounds:
        for dataset in round_spec.datasets:
            examples = load_examples(task, dataset, CONFIG_DIR)
            firsts[round_spec.name] = examples[0]
            sets.append(
                {
                    "round": round_spec.name,
                    "dataset": dataset.name,
                    "dataset_hash": "0" * 64 if stale else dataset_hash(examples),
                    "uids": [e.uid for e in examples],
                    "predictions": [f"pred-{e.uid}" for e in examples],
                }
            )
    document = {"format": FORMAT, "sets": sets}
    service.blobs.put_bytes(predictions_key(model_id), json.dumps(document).encode())
    return firsts


def page(service: Service, model_id: str) -> str:
    admin = signed_in(create_app(service).test_client(), issue_token(service, "admin", "admin"))
    answer = admin.get(f"/models/{model_id}")
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


def test_a_translation_page_shows_public_predictions_and_no_held_out_text(
    service: Service,
) -> None:
    model_id = finished(service, "t", AXES_A, task="translation")
    firsts = keep_predictions(service, "translation", model_id)
    html = page(service, model_id)
    assert 'id="examples"' in html and 'data-set="r1/test"' in html
    public, held_out = firsts["r1"], firsts["r2"]
    assert public.inputs["sourceText"] in html and f"pred-{public.uid}" in html
    assert public.target in html
    assert held_out.inputs["sourceText"] not in html and f"pred-{held_out.uid}" not in html
    assert html.count("<tr data-uid=") == 3


def test_a_vqa_page_shows_the_picture_as_a_thumbnail(service: Service) -> None:
    model_id = finished(service, "v", AXES_A, task="vqa")
    firsts = keep_predictions(service, "vqa", model_id)
    html = page(service, model_id)
    first = firsts["r1"]
    assert f'src="data:image/png;base64,{first.inputs["image"]}"' in html
    assert first.inputs["question"] in html and f"pred-{first.uid}" in html


def test_predictions_on_another_version_of_the_set_or_none_show_nothing(
    service: Service,
) -> None:
    stale = finished(service, "old", AXES_A, task="translation")
    keep_predictions(service, "translation", stale, stale=True)
    assert 'id="examples"' not in page(service, stale)
    nothing = finished(service, "none", AXES_A, task="translation")
    assert 'id="examples"' not in page(service, nothing)
    labels = finished(service, "s", AXES_A, task="sentiment")  # no public set at all
    keep_predictions(service, "sentiment", labels)
    assert 'id="examples"' not in page(service, labels)


def test_the_public_flag_is_in_the_task_and_checked(tmp_path: Path) -> None:
    import yaml

    from configs.schema import ConfigError
    from evaluator.tasks import load_task

    public = Service.open(tmp_path / "data")
    try:
        rounds = public.tasks["translation"].public_dict()["rounds"]
        assert [r["public"] for r in rounds] == [["test"], []]
    finally:
        public.close()
    spec = yaml.safe_load((CONFIG_DIR / "tasks" / "translation.yaml").read_text())
    spec["rounds"][0]["datasets"][0]["public"] = "yes"
    path = tmp_path / "translation.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match="must be true or false") as caught:
        load_task(path, CONFIG_DIR)
    assert caught.value.field == "rounds[0].datasets[0].public"


def test_an_unmeasured_axis_reads_as_such_on_the_pages(service: Service) -> None:
    model_id = finished(service, "v2", AXES_A, task="vqa")
    html = page(service, model_id)
    assert "not measured for this task (it lists no fairness perturbation)" in html
    board = create_app(service).test_client().get("/tasks/vqa").get_data(as_text=True)
    assert "folds the 4 measured axes" in board
