"""The perturbations' fast paths give exactly what their rules as written give (the
outputs are part of every stored robustness score, so a faster path must not move one)."""

from __future__ import annotations

import random

from perturbations import paraphrase as paraphrase_module
from perturbations import typo as typo_module
from perturbations.paraphrase import ParaphrasePerturbation, flip_contractions

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
    for text in _messy_texts(1000) + [MOVIE_TEXT]:
        words = list(paraphrase_module._WORDS.finditer(text))
        rule = [m for m in words if m[0].islower() and paraphrase._synonyms(m[0])]
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
