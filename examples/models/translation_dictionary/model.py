"""Dictionary translation model: English word by word into German, French or Spanish.

Each English word (case-folded, punctuation kept aside) is looked up in a shipped bilingual
lexicon for the requested ``targetLanguage``; unknown words (names, numbers) are copied.
Word order and agreement stay English, so it does well on short sentences and worse on
negation, the past tense and relative clauses, as a phrase-table baseline would.

python examples/models/translation_dictionary/model.py [--key translatedText]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dynaeval_server import serve  # noqa: E402

LEXICON: dict[str, dict[str, str]] = json.loads((HERE / "lexicon.json").read_text("utf-8"))
LANGUAGES = {"deu_Latn": "de", "fra_Latn": "fr", "spa_Latn": "es"}
TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def translate(text: str, language: str) -> str:
    """``text`` word by word into ``language`` (a FLORES code); unknown words are kept."""
    table = LEXICON.get(LANGUAGES.get(language, ""), {})
    out: list[str] = []
    for token in TOKEN.findall(text):
        word = table.get(token.casefold(), token)
        if word and token[:1].isupper() and not out:
            word = word[:1].upper() + word[1:]
        if word:
            out.append(word)
    sentence = " ".join(out)
    return re.sub(r" ([.,!?])", r"\1", sentence)


def make_predict(key: str):
    """A predict function translating ``sourceText`` into ``key``."""

    def predict(task: str, instances: list[dict]) -> list[dict]:
        return [
            {
                "uid": inst.get("uid"),
                key: translate(str(inst.get("sourceText") or ""), str(inst.get("targetLanguage"))),
            }
            for inst in instances
        ]

    return predict


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", default="translatedText", help="the task's output key")
    args = parser.parse_args(argv)
    serve(
        make_predict(args.key),
        {"name": "translation-dictionary", "version": "1.0", "framework": "python-stdlib"},
    )


if __name__ == "__main__":
    main()
