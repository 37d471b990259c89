"""Null model: answers instantly with a fixed label (or a fixed QA answer), for speed benchmarks.

python examples/models/null/model.py --label positive
python examples/models/null/model.py --answer ""        # QA
python examples/models/null/model.py --key translatedText --answer ""   # any answer key
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaeval_server import serve  # noqa: E402


def make_predict(label: str, answer: str | None, key: str | None = None):
    """Return a predict function doing no per-instance work beyond building the reply."""
    default, value = ("answer", answer) if answer is not None else ("label", label)
    key = key or default

    def predict(task: str, instances: list[dict]) -> list[dict]:
        return [{"uid": inst.get("uid"), key: value} for inst in instances]

    return predict


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="positive", help="label answered for every instance")
    parser.add_argument("--answer", default=None, help="QA: answer string for every instance")
    parser.add_argument("--key", default=None, help="the answer's key (default: label/answer)")
    args = parser.parse_args(argv)
    serve(
        make_predict(args.label, args.answer, args.key),
        {"name": "null", "version": "1.0", "framework": "python-stdlib"},
    )


if __name__ == "__main__":
    main()
