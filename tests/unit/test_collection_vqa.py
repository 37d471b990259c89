"""The dynamic loop on the VQA task, through the API and the page: a writer uploads a
picture, writes a question and 3-10 answers; the model in the loop answers from the
picture and the question (never the answers); "fooled" is a VQA accuracy of 0; a bad
picture is refused before any model sees it; a frozen row is one the dataset parser reads
back; validators see the picture as an image."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from evaluator.inputs.datasets import parse_lines
from store.collection import Collection, StoredExample
from tests.unit.auth_helpers import issue_token
from tests.unit.test_api import assert_error
from tests.unit.test_collection_api import ROUND, World, one_task_world, url
from usecases.collection.freezing import dataset_lines

TASK = "vqa"
ANSWERS = ["red", "red", "red", "orange"]


def png(size: tuple[int, int] = (64, 64), colour: tuple[int, int, int] = (214, 40, 40)) -> bytes:
    image = Image.new("RGB", size, (236, 236, 230))
    image.paste(colour, (16, 16, 48, 48))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


PICTURE = base64.b64encode(png()).decode()
INPUTS = {"image": PICTURE, "question": "What color is the square?"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from one_task_world(tmp_path, TASK, "v")


def open_round(world: World) -> None:
    answer = world.client("owner").post(url(TASK), json={"model_ids": [world.models["v"]]})
    assert answer.status_code == 201, answer.get_json()


def write(world: World, **body: Any) -> Any:
    body.setdefault("inputs", INPUTS)
    return world.client("writer").post(url(TASK, "examples"), json=body)


def test_a_right_answer_does_not_fool_and_a_wrong_one_does(world: World) -> None:
    open_round(world)
    world.pool.output = "Red"  # VQA normalisation: case does not matter
    right = write(world, answers=ANSWERS)
    assert right.status_code == 201, right.get_json()
    assert right.get_json()["fooled"] is False
    world.pool.output = "blue"
    wrong = write(world, answers=ANSWERS)
    assert wrong.status_code == 201 and wrong.get_json()["fooled"] is True
    world.pool.output = "orange"  # one annotator in four said it: accuracy 1/3, not fooled
    assert write(world, answers=ANSWERS).get_json()["fooled"] is False
    sent = [inputs for _, inputs in world.pool.calls]
    assert all(inputs == INPUTS for inputs in sent)  # the picture and question, never answers


@pytest.mark.parametrize(
    ("inputs", "words"),
    [
        ({**INPUTS, "image": "data:image/png;base64," + PICTURE}, "without a 'data:' URI"),
        ({**INPUTS, "image": base64.b64encode(b"GIF89a" + b"\0" * 30).decode()}, "neither PNG"),
        ({**INPUTS, "image": PICTURE[:-60] + "A" * 60}, "damaged or truncated"),
        ({**INPUTS, "image": ""}, "non-empty base64"),
        ({"question": "What color?"}, "missing 'image'"),
    ],
)
def test_a_bad_picture_is_refused_before_the_model_sees_it(
    world: World, inputs: dict[str, str], words: str
) -> None:
    open_round(world)
    refused = assert_error(write(world, inputs=inputs, answers=ANSWERS), 422)
    assert words in refused["message"]
    assert world.pool.calls == []


def test_a_picture_over_the_tasks_limit_is_refused(world: World) -> None:
    open_round(world)
    noisy = Image.frombytes("RGB", (400, 400), bytes(range(256)) * 1875)
    out = io.BytesIO()
    noisy.save(out, format="PNG", compress_level=0)
    limit = world.service.tasks[TASK].limits.max_input_image_bytes
    assert len(out.getvalue()) > limit
    big = {**INPUTS, "image": base64.b64encode(out.getvalue()).decode()}
    assert (
        "over the task's limit"
        in assert_error(write(world, inputs=big, answers=ANSWERS), 422)["message"]
    )


def test_answers_are_three_to_ten_strings_and_other_types_gold_is_refused(world: World) -> None:
    open_round(world)

    def refused(answer: Any, words: str) -> None:
        assert words in assert_error(answer, 422)["message"]

    refused(write(world), "3 to 10 answers")
    refused(write(world, answers=["red", "red"]), "3 to 10 answers")
    refused(write(world, answers=["red"] * 11), "3 to 10 answers")
    refused(write(world, answers=ANSWERS, label="positive"), "label")
    assert world.pool.calls == []


def test_a_frozen_vqa_row_keeps_the_picture_and_every_answer(world: World) -> None:
    task = world.service.tasks[TASK]
    row = StoredExample(
        id="x1",
        author_id="u",
        origin="written",
        inputs=INPUTS,
        intended={"answers": ANSWERS},
        explanation=None,
        model_id=None,
        model_answer=None,
        fooled=True,
        answer_error=None,
        verdict="correct",
        created_at=datetime(2026, 1, 1),
        slices={"background": "light"},
    )
    (example,) = parse_lines(task, dataset_lines(task, [row]).decode().splitlines(), "frozen")
    assert example.inputs == INPUTS
    assert (example.target, *example.references) == tuple(ANSWERS)
    assert example.slices["background"] == "light"


def test_the_page_takes_a_picture_file_and_answers_one_per_line(world: World) -> None:
    open_round(world)
    page = f"/tasks/{TASK}/rounds/{ROUND}/collect"
    html = world.client("writer").get(page).get_data(as_text=True)
    assert 'enctype="multipart/form-data"' in html
    assert 'type="file" id="input_image"' in html and 'accept="image/png,image/jpeg"' in html
    assert 'name="answers"' in html and "one per line" in html
    world.pool.output = "blue"
    form = {
        "input_image": (io.BytesIO(png()), "square.png"),
        "input_question": INPUTS["question"],
        "answers": "red\nred\n\nred\norange\n",
    }
    written = world.client("writer").post(page, data=form, content_type="multipart/form-data")
    assert written.status_code == 201, written.get_data(as_text=True)
    assert "You fooled the model" in written.get_data(as_text=True)
    assert world.pool.calls[-1][1] == INPUTS  # the file arrived as the API's base64
    stored = Collection(world.service.db).examples(TASK, ROUND, None, 10)
    assert stored[0].intended == {"answers": ANSWERS}
    gif = {**form, "input_image": (io.BytesIO(b"GIF89a" + b"\0" * 30), "x.gif")}
    refused = world.client("writer").post(page, data=gif, content_type="multipart/form-data")
    assert refused.status_code == 422 and "neither PNG nor JPEG" in refused.get_data(as_text=True)


def test_validators_see_the_picture_as_an_image(world: World) -> None:
    open_round(world)
    world.pool.output = "blue"
    assert write(world, answers=ANSWERS).status_code == 201
    validator = issue_token(world.service, "validator", "researcher")
    world.tokens["validator"] = validator
    html = world.client("validator").get(f"/tasks/{TASK}/rounds/{ROUND}").get_data(as_text=True)
    assert f'src="data:image/png;base64,{PICTURE}"' in html
    assert "Is what the writer intended (answers) right" in html


# -- found by an outside trial ----------------------------------------------------------------
@pytest.mark.parametrize(
    "answers",
    [["r" * 101, "red", "red"], ["red\nblue", "red", "red"], ["red\x00", "red", "red"]],
)
def test_an_answer_is_short_and_on_one_line(world: World, answers: list[str]) -> None:
    open_round(world)
    refused = assert_error(write(world, answers=answers), 422)
    assert "answers" in refused["message"]
    assert world.pool.calls == []


def test_nul_characters_are_refused_in_any_field_of_any_task(world: World) -> None:
    open_round(world)
    bad = {**INPUTS, "question": "What color\x00?"}
    assert (
        "inputs.question: NUL"
        in assert_error(write(world, inputs=bad, answers=ANSWERS), 422)["message"]
    )
    note = write(world, answers=ANSWERS, explanation="tricky\x00")
    assert "explanation: NUL" in assert_error(note, 422)["message"]
    assert world.pool.calls == []


def test_the_page_asks_for_a_file_in_its_own_words_and_refuses_a_huge_form_as_a_page(
    world: World,
) -> None:
    open_round(world)
    page = f"/tasks/{TASK}/rounds/{ROUND}/collect"
    form = {"input_question": INPUTS["question"], "answers": "red\nred\nred"}
    missing = world.client("writer").post(page, data=form, content_type="multipart/form-data")
    assert missing.status_code == 422 and "choose a PNG or JPEG file" in missing.get_data(
        as_text=True
    )
    huge = b"--x\r\n" + b"\0" * 3 * 2**20  # refused by its length: never parsed
    refused = world.client("writer").post(
        page, data=huge, content_type="multipart/form-data; boundary=x"
    )
    assert refused.status_code == 413
    assert "text/html" in refused.content_type and "The form is too large" in refused.get_data(
        as_text=True
    )


def test_a_json_body_over_the_limit_says_the_limit(world: World) -> None:
    open_round(world)
    big = {**INPUTS, "image": "A" * (5 * 2**20)}
    error = assert_error(write(world, inputs=big, answers=ANSWERS), 413, "body_too_large")
    assert "at most" in error["message"]


def test_a_weight_on_an_unmeasured_axis_is_said_to_count_for_nothing(world: World) -> None:
    client = world.client("writer")
    board = client.get(f"/api/v1/tasks/{TASK}/leaderboard?weights=performance:4,fairness:3")
    warnings = [w for w in board.get_json()["warnings"] if w["code"] == "unmeasured_axis"]
    assert warnings and warnings[0]["axes"] == ["fairness"]
    plain = client.get(f"/api/v1/tasks/{TASK}/leaderboard").get_json()["warnings"]
    assert not [w for w in plain if w["code"] == "unmeasured_axis"]  # weight 0 by default
    html = client.get(f"/tasks/{TASK}").get_data(as_text=True)
    assert 'id="unmeasured-note"' in html and "not measured for this task" in html
