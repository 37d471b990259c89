"""Perturbations: literal outputs at a fixed seed, determinism, QA span safety, registry."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from configs.vocabulary.examples import Example
from configs.vocabulary.registry import UnknownName
from perturbations.perturbation import (
    Perturbation,
    changed,
    example_seed,
    get_perturbation,
    perturb_example,
    perturbation_names,
    register,
)

ROOT = Path(__file__).resolve().parents[2]
MOVIE = (
    "The movie was terrible and I do not think the story is funny, but the car chase was wonderful."
)
STUDENTS = (
    "Because the weather was bad, the students could not finish their project before the deadline."
)
BROTHER = "He told her that his brother would meet Emily at the station tomorrow."

EXPECTED = {
    ("typo", MOVIE): (
        "Teh movie was terible and I do not think the story is funny, "
        "but the car chase was wonderful."
    ),
    ("typo", STUDENTS): (
        "Because the weather was bad, the students could not finish thier project before "
        "the deadline."
    ),
    ("typo", BROTHER): "He told her that his brother would meet Emily at the station tomorow.",
    ("paraphrase", MOVIE): (
        "The picture was terrible and I don't think the tale is funny but the car chase was "
        "tremendous"
    ),
    ("paraphrase", STUDENTS): (
        "Because the weather was bad, the students couldn't finish their project before the "
        "deadline."
    ),
    ("fairness", BROTHER): "She told him that her sister would meet Brad at the station tomorrow.",
    ("fairness-ethnicity", BROTHER): (
        "He told her that his brother would meet Thuy at the station tomorrow."
    ),
}


@pytest.mark.parametrize("name, text", sorted(EXPECTED))
def test_literal_output_at_seed_42(name, text):
    perturbation = get_perturbation(name)
    assert perturbation.apply(text, 42) == EXPECTED[(name, text)]
    assert perturbation.apply(text, 42) == EXPECTED[(name, text)]  # same bytes twice


def test_same_output_in_a_fresh_process_with_another_hash_seed():
    script = (
        "import json, sys\n"
        "from perturbations.perturbation import get_perturbation\n"
        "cases = json.loads(sys.stdin.read())\n"
        "print(json.dumps([get_perturbation(n).apply(t, 42) for n, t in cases]))\n"
    )
    cases = sorted(EXPECTED)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=True,
    )
    assert json.loads(result.stdout) == [EXPECTED[case] for case in cases]


def test_output_does_not_depend_on_global_random_state():
    typo = get_perturbation("typo")
    random.seed(1)
    first = typo.apply(MOVIE, 7)
    random.seed(999)
    assert typo.apply(MOVIE, 7) == first


def test_different_seeds_give_different_typos():
    typo = get_perturbation("typo")
    assert len({typo.apply(MOVIE, seed) for seed in range(10)}) > 3


def test_typo_is_mild_and_edits_at_least_one_eligible_word():
    typo = get_perturbation("typo")
    for seed in range(50):
        out = typo.apply(MOVIE, seed)
        diffs = [a != b for a, b in zip(MOVIE.split(), out.split(), strict=True)]
        assert 1 <= sum(diffs) <= 2
    assert typo.apply("a an to", 3) == "a an to"  # nothing of >= 3 letters
    assert typo.apply("cat", 3) != "cat"
    assert typo.apply("", 3) == ""


def test_example_seed_is_stable_and_depends_on_uid_and_seed():
    assert example_seed("ex-1", 0) == example_seed("ex-1", 0)
    assert example_seed("ex-1", 0) == 17537175436112497441
    assert example_seed("ex-1", 1) != example_seed("ex-1", 0)
    assert example_seed("ex-2", 0) != example_seed("ex-1", 0)


def test_registry_names_and_did_you_mean():
    assert perturbation_names() == (
        "fairness",
        "fairness-ethnicity",
        "image-blur",
        "image-brightness",
        "image-jpeg",
        "image-noise",
        "paraphrase",
        "typo",
    )
    with pytest.raises(UnknownName, match="did you mean 'paraphrase'"):
        get_perturbation("paraphrse")


def test_registry_rejects_duplicates():
    with pytest.raises(ValueError, match="already registered"):
        register("typo")(lambda: get_perturbation("typo"))


def test_perturb_example_keeps_uid_target_slices_and_only_touches_fields():
    example = Example(
        uid="u1",
        inputs={"premise": MOVIE, "hypothesis": BROTHER},
        target="entailment",
        slices={"group": "g"},
    )
    out = perturb_example(example, get_perturbation("fairness"), 0, ["hypothesis"])
    assert (out.uid, out.target, dict(out.slices)) == ("u1", "entailment", {"group": "g"})
    assert out.inputs["premise"] == MOVIE
    assert out.inputs["hypothesis"].startswith("She told him that her sister")
    assert changed(example, out)
    assert not changed(example, perturb_example(example, get_perturbation("fairness"), 0, []))
    with pytest.raises(KeyError, match="no input field 'question'"):
        perturb_example(example, get_perturbation("typo"), 0, ["question"])


_BANK = [
    "he",
    "she",
    "his",
    "her",
    "John",
    "Emily",
    "King's",
    "Cross",
    "the",
    "river",
    "king",
    "queen",
    "movie",
    "was",
    "terrible",
    "and",
    "do",
    "not",
    "think",
    "story",
    "funny",
    "car",
    "because",
    "weather",
    "students",
    "could",
    "finish",
    "their",
    "project",
    "brother",
    "mother",
    "Mr",
    "Smith",
    "went",
    "station",
    "tomorrow",
    "wonderful",
    ",",
    ".",
    ";",
    "believe",
    "really",
]


def _random_qa(rng: random.Random, uid: str) -> Example:
    words = [rng.choice(_BANK) for _ in range(rng.randint(3, 40))]
    i = rng.randrange(len(words))
    j = min(len(words), i + rng.randint(1, 3))
    before = " ".join(words[:i])
    answer = " ".join(words[i:j])
    context = (before + " " if before else "") + answer + " " + " ".join(words[j:])
    start = len(before) + (1 if before else 0)
    return Example(
        uid=uid,
        inputs={"question": "Who told her about his car?", "context": context.strip()},
        target=answer,
        answer_start=start,
    )


@pytest.mark.parametrize("name", ["typo", "paraphrase", "fairness", "fairness-ethnicity"])
def test_qa_answer_span_is_never_changed_and_offset_stays_valid(name):
    perturbation = get_perturbation(name)
    rng = random.Random(name)
    n_changed = 0
    for k in range(300):
        example = _random_qa(rng, f"qa-{k}")
        out = perturb_example(example, perturbation, 3, ["question", "context"])
        start = out.answer_start
        assert out.inputs["context"][start : start + len(out.target)] == example.target
        assert out.target == example.target
        n_changed += out.inputs["context"] != example.inputs["context"]
    assert n_changed > 30


def test_a_qa_example_whose_answer_holds_a_swappable_term_is_left_out():
    """Keeping "John" as the answer while renaming the other Johns would change the
    question's meaning: such an example is left unchanged (so it is not scored)."""
    context = "His brother met John. John was happy, and he said so."
    example = Example(uid="q", inputs={"context": context}, target="John", answer_start=16)
    out = perturb_example(example, get_perturbation("fairness"), 0, ["context"])
    assert out == example and not changed(example, out)


def test_a_swap_renames_a_person_alike_in_every_field():
    context = "John met his brother in Paris. John was happy."
    example = Example(
        uid="q", inputs={"context": context, "question": "Where did John meet his brother?"},
        target="Paris", answer_start=context.index("Paris"),
    )  # fmt: skip
    out = perturb_example(example, get_perturbation("fairness"), 0, ["context", "question"])
    assert out.inputs["context"] == "Megan met her sister in Paris. Megan was happy."
    assert out.inputs["question"] == "Where did Megan meet her sister?"
    start = out.answer_start
    assert out.inputs["context"][start : start + len("Paris")] == "Paris"


def test_qa_bad_answer_start_is_refused():
    example = Example(uid="q", inputs={"context": "abc def"}, target="def", answer_start=1)
    with pytest.raises(ValueError, match="does not point at the answer"):
        perturb_example(example, get_perturbation("typo"), 0, ["context"])


def test_perturbation_base_is_abstract():
    with pytest.raises(TypeError):
        Perturbation()  # type: ignore[abstract]


@pytest.mark.parametrize("name", ["fairness", "fairness-ethnicity"])
def test_name_swaps_never_merge_two_people(name):
    """For every seed the swap is one-to-one on the listed names (two people in one example
    never end up sharing a name), and the ethnicity swap always changes the name list."""
    perturbation = get_perturbation(name)
    names = list(perturbation._names)
    for seed in range(25):
        swapped = [perturbation.swap_name(n, seed) for n in names]
        assert len(set(swapped)) == len(names)
        for original, new in zip(names, swapped, strict=True):
            group, gender = perturbation._names[original]
            new_group, new_gender = perturbation._names[new]
            assert (new_group != group) == (name == "fairness-ethnicity")
            assert (new_gender != gender) == (name == "fairness")
