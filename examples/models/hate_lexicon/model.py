"""Keyword/pattern hate-speech model: a dehumanising cue co-occurring with a group mention.

    python examples/models/hate_lexicon/model.py

Ships ``lexicon.txt`` with three sections: group words, dehumanising words / phrases and
a few self-contained regular expressions. A cue directly negated ("are not criminals")
does not count.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dynaeval_server import serve  # noqa: E402

NEGATION_BEFORE = re.compile(r"\b(not|never|no|n't|nor|aren't|isn't|arent|isnt)\s+(\w+\s+)?$")


def normalise(text: str) -> str:
    """Lower-case, straight apostrophes, single spaces."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    return " " + re.sub(r"\s+", " ", text).strip() + " "


def _phrase_regex(phrases: list[str]) -> re.Pattern[str]:
    alternatives = sorted((re.escape(p) for p in phrases), key=len, reverse=True)
    return re.compile(r"(?<![\w'])(?:" + "|".join(alternatives) + r")(?![\w'])")


class HateLexicon:
    """Groups, dehumanising cues and patterns loaded from the shipped lexicon file."""

    def __init__(self, path: Path | None = None) -> None:
        sections: dict[str, list[str]] = {"groups": [], "dehumanising": [], "patterns": []}
        current = None
        path = path or HERE / "lexicon.txt"
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                current = line[1:-1]
                continue
            if current is None or current not in sections:
                raise ValueError(f"{path}: entry {line!r} outside a known [section]")
            sections[current].append(line.lower())
        self.groups = _phrase_regex(sections["groups"])
        self.cues = _phrase_regex(sections["dehumanising"])
        self.patterns = [re.compile(p) for p in sections["patterns"]]

    def score(self, text: str) -> float:
        """Evidence of hate: > 0 means hateful."""
        norm = normalise(text)
        groups = len(self.groups.findall(norm))
        cues = sum(
            1
            for m in self.cues.finditer(norm)
            if not NEGATION_BEFORE.search(norm[max(0, m.start() - 20) : m.start()])
        )
        patterns = sum(1 for p in self.patterns if p.search(norm))
        if patterns:
            return 1.0 + patterns + 0.5 * cues
        if groups and cues:
            return 0.5 + 0.5 * min(groups, 2) + 0.5 * (cues - 1)
        return -1.0 - 0.5 * (not groups) - 0.5 * (not cues)

    def predict(self, text: str) -> tuple[str, dict[str, float]]:
        """Label and logistic probabilities."""
        s = self.score(text)
        p = 1.0 / (1.0 + math.exp(-1.5 * s))
        label = "hateful" if s > 0 else "not-hateful"
        return label, {"hateful": round(p, 4), "not-hateful": round(1.0 - p, 4)}


LEXICON = HateLexicon()


def predict(task: str, instances: list[dict]) -> list[dict]:
    """Label each instance's ``statement`` hateful / not-hateful."""
    out = []
    for inst in instances:
        label, probs = LEXICON.predict(str(inst.get("statement") or ""))
        out.append({"uid": inst.get("uid"), "label": label, "probs": probs})
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    serve(predict, {"name": "hate-lexicon", "version": "1.0", "framework": "python-stdlib"})


if __name__ == "__main__":
    main()
