"""The perturbations' fast paths give exactly what their rules as written give (the
outputs are part of every stored robustness score, so a faster path must not move one)."""

from __future__ import annotations

import random

from perturbations import paraphrase as paraphrase_module
from perturbations import typo as typo_module
from perturbations.paraphrase import ParaphrasePerturbation, flip_contractions, load_synonym_table
from perturbations.typo import TypoPerturbation

MOVIE_TEXT = "The movie was terrible and I do not think the story is funny, but the car chase."


def _messy_texts(count: int) -> list[str]:
    """Sentences mixing every contraction form in every case, with odd spacing, curly
    apostrophes and non-ASCII words (whose lower case may change the text's length)."""
    rng = random.Random(7)
    forms = [*paraphrase_module._FLIP, "do  not", "do\nnot", "can’t", "I’m", "dont"]
    words = ["movie", "film", "car", "it", "notable", "undo", "cannot", "café", "İstanbul"]
    texts = []
    for _ in range(count):
        picked = [rng.choice(forms + words) for _ in range(rng.randint(1, 12))]
        cased = [rng.choice((w, w.upper(), w.title())) for w in picked]
        texts.append(rng.choice((" ", "  ", ", ")).join(cased) + rng.choice(("", ".", "!")))
    return texts


def test_the_ascii_fast_path_flips_what_the_case_blind_pattern_flips():
    def reference(text: str) -> str:  # the rule as written: one case-blind pattern
        return paraphrase_module._FLIP_RE.sub(lambda m: paraphrase_module._flipped(m[0]), text)

    texts = _messy_texts(3000)
    assert sum(text.isascii() for text in texts) > 1000  # both paths are exercised
    for text in texts:
        assert flip_contractions(text) == reference(text), text


def test_eligible_words_from_the_table_are_the_rule_s():
    paraphrase = ParaphrasePerturbation()
    raw = load_synonym_table()  # the table as shipped, not the one the fast path prepared
    for text in _messy_texts(1000) + [MOVIE_TEXT]:
        words = list(paraphrase_module._WORDS.finditer(text))
        rule = [m for m in words if m[0].islower() and raw.get(m[0])]
        assert paraphrase._eligible(words) == rule, text


def test_a_table_entry_without_synonyms_or_in_upper_case_is_never_chosen(monkeypatch):
    table = {"film": ("movie",), "Movie": ("film",), "car": ()}
    monkeypatch.setattr(paraphrase_module, "load_synonym_table", lambda: table)
    paraphrase = ParaphrasePerturbation()
    for seed in range(50):
        words = paraphrase.apply("Movie car film car Movie car", seed).split()
        assert words[:2] == ["Movie", "car"] and words[2] in {"film", "movie"}


def test_typo_edits_the_same_words_as_its_rule():
    for text in _messy_texts(1000):
        rule = [m.span() for m in typo_module._LETTERS.finditer(text) if len(m[0]) >= 3]
        assert [m.span() for m in typo_module._EDITABLE.finditer(text)] == rule, text


# Outputs of the code before the fast paths (commit e296807), pinned: a stored robustness
# score was computed from exactly these.
BEFORE_FAST_PATHS = [
    (
        "paraphrase",
        0,
        "The movie was terrible and I do not think the story is funny, but the car chase.",
        "The movie was dreadful and I don't think the story is funny, but the auto chase",
    ),
    (
        "typo",
        100,
        "The movie was terrible and I do not think the story is funny, but the car chase.",
        "The movie ws terrible and I do not think teh story is funny, but the car chase.",
    ),
    (
        "paraphrase",
        1,
        "I'm sure they're not going to like the ending; it cannot be saved.",
        "I am sure they are not going to like the ending; it can't be saved",
    ),
    (
        "typo",
        101,
        "I'm sure they're not going to like the ending; it cannot be saved.",
        "I'm sure they're not gonig to like the ending; it cannot be saved.",
    ),
    (
        "paraphrase",
        2,
        "Let us walk to the old harbour and watch the boats, but we won't stay long.",
        "Let's walk to the old harbour and watch the boats, but we will not stay long.",
    ),
    (
        "typo",
        102,
        "Let us walk to the old harbour and watch the boats, but we won't stay long.",
        "Let us walk to teh old harbour and watch the boats, but we wun't stay long.",
    ),
    (
        "paraphrase",
        3,
        "CANNOT believe the acting was this wooden. Do Not watch it!",
        "CAN'T believe the acting was this wooden. Don't watch it!",
    ),
    (
        "typo",
        103,
        "CANNOT believe the acting was this wooden. Do Not watch it!",
        "CANNOT believe the acting was this wooden. Do N0t watch it!",
    ),
    (
        "paraphrase",
        4,
        "She wouldn't say whether the café in İstanbul served breakfast.",
        "She would not say whether the café in İstanbul served breakfast",
    ),
    (
        "typo",
        104,
        "She wouldn't say whether the café in İstanbul served breakfast.",
        "Sue wouldn't say whether the café in İstanbul served breakfast.",
    ),
    (
        "paraphrase",
        5,
        "A quiet, beautiful film about grief and memory",
        "A quiet, beautiful film about grief and memory",
    ),
    (
        "typo",
        105,
        "A quiet, beautiful film about grief and memory",
        "A quiet, beautiful film about grife and memory",
    ),
    (
        "paraphrase",
        6,
        "The soldiers marched across the frozen river at dawn.",
        "The soldiers marched across the frozen river at dawn.",
    ),
    (
        "typo",
        106,
        "The soldiers marched across the frozen river at dawn.",
        "The soldiers marched across the frozen river at dawm.",
    ),
    (
        "paraphrase",
        7,
        "You are the best teacher this school has ever had, and we are grateful.",
        "You're the best instructor this school has ever had and we're grateful",
    ),
    (
        "typo",
        107,
        "You are the best teacher this school has ever had, and we are grateful.",
        "You are the bet teacher this school has ever had, and we are grateful.",
    ),
    (
        "paraphrase",
        8,
        "Prices rose sharply after the announcement, but investors remained calm.",
        "Prices rose sharply after the proclamation, but investors remained calm",
    ),
    (
        "typo",
        108,
        "Prices rose sharply after the announcement, but investors remained calm.",
        "Prices rose sharplt after the announcement, but investors remained calm.",
    ),
    (
        "paraphrase",
        9,
        "Is not this the strangest question anyone asked?",
        "Isn't this the strangest question anyone asked?",
    ),
    (
        "typo",
        109,
        "Is not this the strangest question anyone asked?",
        "Is not this teh strangest question anyone asked?",
    ),
]


def test_outputs_are_those_of_the_code_before_the_fast_paths():
    perturbations = {"paraphrase": ParaphrasePerturbation(), "typo": TypoPerturbation()}
    for name, seed, text, expected in BEFORE_FAST_PATHS:
        assert perturbations[name].apply(text, seed) == expected, (name, seed, text)
