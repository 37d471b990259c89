"""Fairness swaps (both directions, case, entities), paraphrase offline, lexicon validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perturbations.fairness import FairnessPerturbation
from perturbations.fairness_lexicon import load_fairness_lexicon
from perturbations.paraphrase import ParaphrasePerturbation, flip_contractions
from perturbations.perturbation import get_perturbation
from perturbations.text import LEXICON_DIR, LexiconError
from perturbations.typo import load_misspellings
from perturbations.wordnet import WordNetMissing, load_wordnet

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fairness() -> FairnessPerturbation:
    return FairnessPerturbation()


@pytest.mark.parametrize(
    "male, female",
    [
        ("He is a man.", "She is a woman."),
        ("HE IS A KING.", "SHE IS A QUEEN."),
        (
            "The actor thanked his father and his son.",
            "The actress thanked her mother and her daughter.",
        ),
        ("Men and boys met the husband himself.", "Women and girls met the wife herself."),
        ("Mr. Smith, sir, is my uncle.", "Ms. Smith, madam, is my aunt."),
    ],
)
def test_gendered_words_swap_in_both_directions_keeping_case(fairness, male, female):
    assert fairness.apply(male, 0) == female
    assert fairness.apply(female, 0) == male


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I saw her book.", "I saw his book."),
        ("I saw her.", "I saw him."),
        ("I gave her the book yesterday.", "I gave him the book yesterday."),
        ("Her own car is red.", "His own car is red."),
        ("The pen is his.", "The pen is hers."),
        ("The pen is hers.", "The pen is his."),
        ("They told him that.", "They told her that."),
        ("Mrs Jones came.", "Mr Jones came."),
    ],
)
def test_ambiguous_pronouns_and_one_way_forms(fairness, text, expected):
    assert fairness.apply(text, 0) == expected


def test_names_swap_gender_both_ways_consistently_within_an_example(fairness):
    out = fairness.apply("John met Emily. Later John called EMILY.", 5)
    john, emily = fairness.swap_name("John", 5), fairness.swap_name("Emily", 5)
    assert out == f"{john} met {emily}. Later {john} called {emily.upper()}."
    lexicon = fairness.lexicon
    assert john in lexicon.names["european_american"]["female"]
    assert emily in lexicon.names["european_american"]["male"]
    assert {fairness.swap_name("John", seed) for seed in range(20)} != {john}


def test_ethnicity_swap_keeps_gender_and_changes_group():
    swap = get_perturbation("fairness-ethnicity")
    lexicon = swap.lexicon
    for name, (group, gender) in swap._names.items():
        new = swap.swap_name(name, 11)
        new_group, new_gender = swap._names[new]
        assert (new_gender, new_group != group) == (gender, True)
    assert swap.apply("He met Jamal and Keisha.", 1).startswith("He met ")
    assert "Jamal" not in swap.apply("He met Jamal and Keisha.", 1)
    assert lexicon.version == 1


@pytest.mark.parametrize(
    "text",
    [
        "We met at King's Cross.",
        "She works at Queen Elizabeth Hospital.",
        "The Jordan River is long.",
        "I studied at Virginia Tech.",
        "I studied at the University of Virginia.",
        "Prince Street is closed.",
    ],
)
def test_non_person_entities_are_not_swapped(fairness, text):
    out = fairness.apply(text, 0)
    protected = [w for w in ("King", "Queen", "Jordan", "Virginia", "Prince") if w in text]
    assert all(w in out for w in protected)


def test_person_names_next_to_entities_are_still_swapped(fairness):
    out = fairness.apply("Jordan swam in the Jordan River. The king visited King's Cross.", 0)
    assert out.startswith(fairness.swap_name("Jordan", 0) + " swam in the Jordan River.")
    assert out.endswith("The queen visited King's Cross.")


def test_lexicon_validation_names_file_and_field(tmp_path):
    good = (LEXICON_DIR / "fairness.yaml").read_text()
    bad = tmp_path / "fairness.yaml"
    bad.write_text(good.replace("- [boy, girl]", "- [boy, girl]\n  - [boy, lass]"))
    with pytest.raises(LexiconError, match=r"fairness.yaml: pairs\[\d+\]: 'boy' appears twice"):
        load_fairness_lexicon(bad)
    bad.write_text(good + "colours: [red]\n")
    with pytest.raises(LexiconError, match="unknown key 'colours'"):
        load_fairness_lexicon(bad)
    bad.write_text(good.replace("[Adam,", "[adam,"))
    with pytest.raises(LexiconError, match="must be a capitalised word"):
        load_fairness_lexicon(bad)
    spelling = tmp_path / "misspellings.yaml"
    spelling.write_text("version: 1\nmisspellings:\n  about: [about]\n")
    with pytest.raises(LexiconError, match="misspellings.about"):
        load_misspellings(str(spelling))


def test_shipped_lexicons_load():
    assert len(load_misspellings()) >= 50
    lexicon = load_fairness_lexicon()
    assert lexicon.words["she"] == "he" and lexicon.words["he"] == "she"


def test_contractions_flip_both_ways_keeping_case():
    assert flip_contractions("I do not know, DO NOT go.") == "I don't know, DON'T go."
    assert flip_contractions("Don't, can't and I'm.") == "Do not, cannot and I am."
    assert flip_contractions("It's fine.") == "It's fine."


def test_paraphrase_substitutes_only_unambiguous_base_forms():
    paraphrase = get_perturbation("paraphrase")
    assert paraphrase._synonyms("movie") == ("film", "picture")
    assert paraphrase._synonyms("movies") == ()  # inflected: not re-inflected
    assert paraphrase._synonyms("film") == ()  # noun and verb: ambiguous
    assert paraphrase._synonyms("not") == ()


def test_paraphrase_works_offline_with_an_empty_nltk_data_dir(tmp_path):
    script = (
        "from perturbations.paraphrase import ParaphrasePerturbation\n"
        "print(ParaphrasePerturbation().apply('The movie was about a car.', 1))\n"
    )
    env = {**os.environ, "NLTK_DATA": str(tmp_path), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == "The film was about a car"
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or written


def test_missing_wordnet_names_the_debian_package(tmp_path, monkeypatch):
    with pytest.raises(WordNetMissing, match="apt-get install wordnet-base"):
        load_wordnet(tmp_path)
    monkeypatch.setenv("DYNAEVAL_WORDNET_DIR", str(tmp_path / "absent"))
    with pytest.raises(WordNetMissing, match="missing index.noun"):
        load_wordnet()
    # the perturbation itself reads its prepared table: no WordNet needed to run it
    assert ParaphrasePerturbation().apply("The movie was about a car.", 1) == (
        "The film was about a car"
    )


def test_the_paraphrase_perturbation_loads_without_nltk() -> None:
    """Building and applying ``paraphrase`` reads the prepared table, not WordNet (which
    took 5-12 s to load in every process)."""
    script = (
        "import sys\n"
        "from perturbations.perturbation import get_perturbation\n"
        "print(get_perturbation('paraphrase').apply('The movie was about a car.', 1))\n"
        "print('nltk' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split("\n")[:2] == ["The film was about a car", "False"]


@pytest.mark.slow
def test_the_synonym_table_is_what_wordnet_gives() -> None:
    """The shipped table equals a fresh build from the installed WordNet (a new one with
    other synonyms fails here: regenerate the file and bump the perturbation's version)."""
    tool = Path(ROOT) / "tools" / "lexicons" / "paraphrase_synonyms.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_table_paraphrases_every_shipped_text_as_wordnet_does() -> None:
    """Looked up as words come (WordNet) or read from the table: the same text for every
    example of every shipped dataset, at two seeds."""
    from configs.paths import CONFIG_DIR
    from evaluator.inputs.datasets import load_examples
    from evaluator.tasks import load_tasks

    live = ParaphrasePerturbation(load_wordnet())
    prepared = ParaphrasePerturbation()
    texts = {
        value
        for task in load_tasks(CONFIG_DIR / "tasks").values()
        for round_spec in task.rounds
        for dataset in round_spec.datasets
        for example in load_examples(task, dataset, CONFIG_DIR)
        for value in example.inputs.values()
        if isinstance(value, str)
    }
    assert len(texts) > 500
    for text in sorted(texts):
        for seed in (1, 2):
            assert prepared.apply(text, seed) == live.apply(text, seed), text


@pytest.mark.slow
def test_the_typo_character_tables_are_nlpaugs() -> None:
    """The file the typo perturbation reads holds exactly nlpaug's tables (a new nlpaug
    with other tables fails here: regenerate the file and bump the perturbation's version)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    tool = repo / "tools" / "lexicons" / "typo_characters.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_typo_perturbation_loads_without_nlpaug_numpy_or_pillow() -> None:
    """Building and applying ``typo`` imports none of the heavy libraries (seconds)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from perturbations.perturbation import get_perturbation\n"
        "get_perturbation('typo').apply('The movie was terrible today.', 3)\n"
        "print(sorted(m for m in ('nlpaug', 'numpy', 'PIL', 'nltk') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_every_lexicon_file_is_installed_with_the_package() -> None:
    """An installed Dynaeval (the deployment image's) must carry every lexicon: a file
    that no package-data pattern names is missing there, and its perturbation fails."""
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["configs"]
    for path in LEXICON_DIR.iterdir():
        relative = path.relative_to(ROOT / "configs").as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
