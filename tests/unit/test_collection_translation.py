"""The dynamic loop on the translation task, through the API: a writer sends a source and
reference translations, the model in the loop translates, and "fooled" is chrF++ below the
threshold; gold fields of other output types are refused; a frozen example is a row the
translation parser reads back with every reference."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evaluator.inputs.datasets import parse_lines
from store.collection import StoredExample
from tests.unit.test_api import assert_error
from tests.unit.test_collection_api import World, one_task_world, url
from usecases.collection.freezing import dataset_lines

TASK = "translation"
SOURCE = {
    "sourceText": "Today Nora reads a book at the library.",
    "sourceLanguage": "eng_Latn",
    "targetLanguage": "deu_Latn",
}
REFERENCE = "Heute liest Nora ein Buch in der Bibliothek."


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from one_task_world(tmp_path, TASK, "t")


def open_translation_round(world: World) -> None:
    body = {"model_ids": [world.models["t"]]}
    answer = world.client("owner").post(url(TASK), json=body)
    assert answer.status_code == 201, answer.get_json()


def write(world: World, **body: Any) -> Any:
    body.setdefault("inputs", SOURCE)
    return world.client("writer").post(url(TASK, "examples"), json=body)


def test_a_close_translation_does_not_fool_and_a_wrong_one_does(world: World) -> None:
    open_translation_round(world)
    world.pool.output = "Nora liest heute ein Buch in der Bibliothek."
    close = write(world, translatedText=REFERENCE, references=[world.pool.output])
    assert close.status_code == 201, close.get_json()
    assert close.get_json()["fooled"] is False
    world.pool.output = "Today Nora reads a book."
    wrong = write(world, translatedText=REFERENCE)
    assert wrong.status_code == 201 and wrong.get_json()["fooled"] is True
    sent = [inputs for _, inputs in world.pool.calls]
    assert all(REFERENCE not in str(inputs) for inputs in sent)  # never the intended output


def test_other_types_gold_and_missing_references_are_refused(world: World) -> None:
    open_translation_round(world)

    def refused(answer: Any, words: str) -> None:
        assert words in assert_error(answer, 422)["message"]

    refused(write(world, label="positive", translatedText=REFERENCE), "label")
    refused(write(world), "reference translation")
    refused(write(world, translatedText=REFERENCE, references="one"), "references")
    refused(write(world, translatedText=REFERENCE, references=[""]), "empty")
    refused(write(world, translatedText=REFERENCE, colour="blue"), "colour: unknown field")
    refused(write(world, translatedText=["a"]), "translatedText")
    assert world.pool.calls == []  # nothing refused reached the model


def test_a_frozen_translation_row_keeps_every_reference(world: World) -> None:
    task = world.service.tasks[TASK]
    row = StoredExample(
        id="x1",
        author_id="u",
        origin="written",
        inputs=SOURCE,
        intended={"translatedText": REFERENCE, "references": ["Nora liest heute ein Buch."]},
        explanation=None,
        model_id=None,
        model_answer=None,
        fooled=True,
        answer_error=None,
        verdict="correct",
        created_at=datetime(2026, 1, 1),
        slices={"direction": "en-de"},
    )
    (example,) = parse_lines(task, dataset_lines(task, [row]).decode().splitlines(), "frozen")
    assert example.target == REFERENCE and example.references == ("Nora liest heute ein Buch.",)
    assert example.slices == {"direction": "en-de", "gender": "unspecified"}


def test_the_page_asks_for_a_translation_and_writes_it(world: World) -> None:
    from tests.unit.test_collection_api import ROUND

    open_translation_round(world)
    page = f"/tasks/{TASK}/rounds/{ROUND}/collect"
    html = world.client("writer").get(page).get_data(as_text=True)
    assert 'name="translatedText"' in html and "the translation you intend" in html
    assert 'name="label"' not in html
    form = {f"input_{name}": value for name, value in SOURCE.items()}
    world.pool.output = "Today Nora reads a book."
    written = world.client("writer").post(page, data={**form, "translatedText": REFERENCE})
    assert written.status_code == 201 and "You fooled the model" in written.get_data(as_text=True)
    empty = world.client("writer").post(page, data=form)
    assert empty.status_code == 422 and "reference translation" in empty.get_data(as_text=True)


def test_a_task_sets_its_own_chrf_threshold_for_fooled(world: World) -> None:
    """The same answer (sentence chrF++ about 60 against the reference) fools a task that
    asks for 70 and not one that keeps the default 40."""
    from dataclasses import replace

    from metrics.translation import sentence_chrf

    output = "Heute liest Nora ein Buch."
    score = sentence_chrf(output, [REFERENCE])
    assert 40 < score < 70
    open_translation_round(world)
    world.pool.output = output
    assert write(world, translatedText=REFERENCE).get_json()["fooled"] is False
    strict = replace(world.service.tasks[TASK], fooled_threshold=70.0)
    world.service.tasks[TASK] = strict
    assert write(world, translatedText=REFERENCE).get_json()["fooled"] is True


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        ({"type": "translation", "fooled_threshold": 120}, "must be a number from 0 to 100"),
        ({"type": "translation", "fooled_threshold": "high"}, "must be a number from 0 to 100"),
        ({"type": "label", "labels": ["a", "b"], "fooled_threshold": 1}, "takes no"),
    ],
)
def test_the_threshold_is_checked_and_only_types_with_one_take_it(
    tmp_path: Path, output: dict[str, Any], problem: str
) -> None:
    import yaml

    from configs.schema import ConfigError
    from evaluator.tasks import load_task
    from tests.conftest import make_config_dir

    config_dir = make_config_dir(tmp_path)
    spec = yaml.safe_load((config_dir / "tasks" / "toy.yaml").read_text())
    spec["output"] = output
    if output["type"] == "translation":
        spec["metric"] = "chrf"
    path = config_dir / "tasks" / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match=problem) as caught:
        load_task(path, config_dir)
    assert caught.value.field.startswith("output.")


def test_the_shipped_threshold_reaches_the_spec(tmp_path: Path) -> None:
    import yaml

    from evaluator.tasks import load_task

    source = Path(__file__).resolve().parents[2] / "configs"
    spec = yaml.safe_load((source / "tasks" / "translation.yaml").read_text())
    spec["output"]["fooled_threshold"] = 55
    path = tmp_path / "translation.yaml"
    path.write_text(yaml.safe_dump(spec))
    task = load_task(path, source)
    assert task.fooled_threshold == 55.0
    assert task.public_dict()["output"]["fooled_threshold"] == 55.0
