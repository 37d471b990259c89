"""Copy baseline for translation: answers every source sentence unchanged.

Names, numbers and punctuation survive translation, so copying scores above zero; any
real model must beat it.

python examples/models/translation_copy/model.py [--key translatedText]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402


def make_predict(key: str):
    """A predict function copying ``sourceText`` into ``key``."""

    def predict(task: str, instances: list[dict]) -> list[dict]:
        return [
            {"uid": inst.get("uid"), key: str(inst.get("sourceText") or "")} for inst in instances
        ]

    return predict


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--key", default="translatedText", help="the task's output key")
    args = parser.parse_args(argv)
    serve(
        make_predict(args.key),
        {"name": "translation-copy", "version": "1.0", "framework": "python-stdlib"},
    )


if __name__ == "__main__":
    main()
