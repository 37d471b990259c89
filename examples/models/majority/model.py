"""Majority-class baseline: one fixed label for every instance, or the context's first words.

python examples/models/majority/model.py --label positive
python examples/models/majority/model.py --answer-first-words 3   # QA
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402


def make_predict(label: str, answer_first_words: int | None):
    """Return a predict function answering ``label`` (or the first N context words)."""

    def predict(task: str, instances: list[dict]) -> list[dict]:
        if answer_first_words is not None:
            return [
                {
                    "uid": inst.get("uid"),
                    "answer": first_words(inst.get("context", ""), answer_first_words),
                }
                for inst in instances
            ]
        return [{"uid": inst.get("uid"), "label": label} for inst in instances]

    return predict


def first_words(text: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``text``, as an exact substring."""
    words = text.split()[:n]
    if not words:
        return ""
    start = text.index(words[0])
    end = start
    for word in words:
        end = text.index(word, end) + len(word)
    return text[start:end]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--label", default="positive", help="label answered for every instance")
    group.add_argument(
        "--answer-first-words",
        type=int,
        default=None,
        metavar="N",
        help="QA: answer the first N words of the context",
    )
    args = parser.parse_args(argv)
    name = (
        f"majority-first-{args.answer_first_words}-words"
        if args.answer_first_words is not None
        else f"majority-{args.label}"
    )
    serve(
        make_predict(args.label, args.answer_first_words),
        {"name": name, "version": "1.0", "framework": "python-stdlib"},
    )


if __name__ == "__main__":
    main()
