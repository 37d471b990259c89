"""Rule-based sentiment model: a shipped polarity lexicon plus negation/intensifier/contrast rules.

python examples/models/sentiment_lexicon/model.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from dynaeval_server import serve  # noqa: E402
from sentiment import SentimentScorer  # noqa: E402

SCORER = SentimentScorer()


def predict(task: str, instances: list[dict]) -> list[dict]:
    """Label each instance's ``statement`` positive / negative / neutral."""
    out = []
    for inst in instances:
        label, probs = SCORER.predict(str(inst.get("statement") or ""))
        out.append({"uid": inst.get("uid"), "label": label, "probs": probs})
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    serve(predict, {"name": "sentiment-lexicon", "version": "1.0", "framework": "python-stdlib"})


if __name__ == "__main__":
    main()
