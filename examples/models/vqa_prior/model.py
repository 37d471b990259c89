"""Prior baseline for visual question answering: never looks at the image.

It answers each kind of question with the answer most often right for that kind in scenes
of coloured shapes: "yes" for an existence question, "1" for a count, "left" or "above"
for a position, "red" for a colour and "circle" for a shape. Any model that reads the
image must beat it.

python examples/models/vqa_prior/model.py
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402

PRIORS = (
    (re.compile(r"^\s*(is|are|does|do|can)\b.*\b(above|below)\b", re.I), "above"),
    (re.compile(r"\bleft\b.*\bright\b", re.I), "left"),
    (re.compile(r"^\s*(is|are|does|do|can)\b", re.I), "yes"),
    (re.compile(r"^\s*how many\b", re.I), "1"),
    (re.compile(r"\bcolou?r\b", re.I), "red"),
    (re.compile(r"\bshape\b", re.I), "circle"),
)


def answer(question: str) -> str:
    """The prior answer for ``question``'s kind."""
    for pattern, reply in PRIORS:
        if pattern.search(question):
            return reply
    return "yes"


def predict(task: str, instances: list[dict]) -> list[dict]:
    return [
        {"uid": inst.get("uid"), "answer": answer(str(inst.get("question") or ""))}
        for inst in instances
    ]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    serve(predict, {"name": "vqa-prior", "version": "1.0", "framework": "python-stdlib"})


if __name__ == "__main__":
    main()
