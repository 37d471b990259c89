#!/usr/bin/env python3
"""Build the held-out datasets Dynaeval ships in ``configs/datasets/<task>/<round>.jsonl``.

Every row was written for this project from the templates and vocabularies in
``tools/datasets/data/``; nothing is downloaded or copied from an existing dataset. Running
the script reproduces the exact same bytes (one ``random.Random`` per file, seeded from a
fixed seed and the file name):

    python tools/datasets/build.py                  # (re)write every file
    python tools/datasets/build.py --check          # exit 1 if a file on disk differs
    python tools/datasets/build.py --out DIR        # write (or --check) DIR instead

Later rounds are harder, as Dynabench's adversarial rounds were: round 1 is solvable from
lexical cues, later rounds use negation, contrast, sarcasm, misleading lexical overlap,
arithmetic over numbers and dates, and (QA) distractor spans and paraphrased questions.
See ``configs/datasets/README.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

# The task modules are siblings of this script, which is run as a file, not a package.
from common import Row
from hate_speech import build_hate_speech
from nli import build_nli
from qa import build_qa
from sentiment import build_sentiment
from translation import build_translation
from vqa import build_vqa

SEED = 20240611
OUT_DIR = Path(__file__).resolve().parents[2] / "configs" / "datasets"

Builder = Callable[[str, random.Random], list[Row]]
TASKS: dict[str, tuple[list[str], Builder]] = {
    "nli": (["r1", "r2", "r3", "r4"], build_nli),
    "qa": (["r1", "r2"], build_qa),
    "sentiment": (["r1", "r2", "r3"], build_sentiment),
    "hate_speech": (["r1", "r2", "r3", "r4"], build_hate_speech),
    "translation": (["r1", "r2"], build_translation),
    "vqa": (["r1", "r2"], build_vqa),
}


def render(task: str, round_name: str) -> str:
    """The JSONL text of one ``<task>/<round>.jsonl`` file."""
    builder = TASKS[task][1]
    # Seeding per file keeps each file stable when another task or round changes.
    rng = random.Random(SEED + zlib.crc32(f"{task}/{round_name}".encode()))
    lines = []
    for i, row in enumerate(builder(round_name, rng), start=1):
        lines.append(json.dumps({"uid": f"{task}-{round_name}-{i:03d}", **row}, ensure_ascii=True))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) every file; 1 if ``--check`` found one stale."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if any file differs from what would be built",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT_DIR,
        metavar="DIR",
        help="directory holding <task>/<round>.jsonl (default: configs/datasets)",
    )
    args = parser.parse_args(argv)
    out_dir: Path = args.out
    stale = []
    for task, (rounds, _) in TASKS.items():
        for rnd in rounds:
            path = out_dir / task / f"{rnd}.jsonl"
            text = render(task, rnd)
            if args.check:
                if not path.exists() or path.read_bytes() != text.encode("utf-8"):
                    stale.append(str(path))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {path.relative_to(out_dir)} ({text.count(chr(10))} rows)")
    if stale:
        print("out of date:", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
