"""Write ``configs/lexicons/paraphrase_synonyms.json``: the paraphrase perturbation's
prepared synonym table, every word WordNet 3.0 (Debian's ``wordnet-base``) gives synonyms
for, with the one or two it picks (``perturbations.paraphrase.find_synonyms``). The
perturbation reads the file instead of loading WordNet (seconds) on first use; ``--check``
exits 1 when the file differs from what the installed WordNet gives now.

Usage: ``python tools/lexicons/paraphrase_synonyms.py [--check]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from perturbations.paraphrase import SYNONYMS_FILE, synonym_table  # noqa: E402
from perturbations.text import LEXICON_DIR  # noqa: E402
from perturbations.wordnet import load_wordnet  # noqa: E402

TARGET = LEXICON_DIR / SYNONYMS_FILE
NOTE = (
    "The paraphrase perturbation's synonyms, generated from WordNet 3.0 by "
    "tools/lexicons/paraphrase_synonyms.py (do not edit by hand; --check compares). "
    "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved; used under "
    "the WordNet license (https://wordnet.princeton.edu/license-and-commercial-use). "
    "A change here changes the paraphrase output: bump ParaphrasePerturbation.version."
)


def render() -> str:
    """The file's text: one word per line, in order (diffs show what changed)."""
    table = synonym_table(load_wordnet())
    lines = [
        f"{json.dumps(word)}: {json.dumps(list(found))}" for word, found in sorted(table.items())
    ]
    return f'{{"note": {json.dumps(NOTE)},\n"synonyms": {{\n' + ",\n".join(lines) + "\n}}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} differs from what WordNet gives: regenerate it", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
