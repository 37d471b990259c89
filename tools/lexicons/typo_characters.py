"""Write ``configs/lexicons/typo_characters.yaml``: the typo perturbation's keyboard
neighbours and OCR confusions, taken from nlpaug's KeyboardAug (QWERTY, letters only) and
OcrAug models. The perturbation reads the file instead of importing nlpaug (seconds) on
first use; ``--check`` exits 1 when the file differs from what nlpaug gives now.

Usage: ``python tools/lexicons/typo_characters.py [--check]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / "configs" / "lexicons" / "typo_characters.yaml"
HEADER = """\
# The typo perturbation's character tables, generated from nlpaug's models by
# tools/lexicons/typo_characters.py (do not edit by hand; --check compares).
# keyboard: a lower-case letter -> its neighbouring letters on a QWERTY keyboard;
# ocr: a letter -> the characters OCR confuses it with.
# Changing the tables changes the typo output: bump TypoPerturbation.version.
"""


def tables() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(keyboard neighbours, OCR confusions) as the perturbation uses them."""
    import nlpaug.augmenter.char as nac

    keyboard_model = nac.KeyboardAug(
        include_special_char=False, include_numeric=False, include_upper_case=False
    ).model
    ocr_model = nac.OcrAug().model
    keyboard: dict[str, list[str]] = {}
    ocr: dict[str, list[str]] = {}
    for char in "abcdefghijklmnopqrstuvwxyz":
        near = [c for c in keyboard_model.model.get(char, []) if c.isalpha() and c != char]
        if near:
            keyboard[char] = sorted(set(near))
        for key in (char, char.upper()):
            confusions = [c for c in ocr_model.model.get(key, []) if c != key]
            if confusions:
                ocr[key] = sorted(set(confusions))
    return keyboard, ocr


def render() -> str:
    keyboard, ocr = tables()

    def block(name: str, table: dict[str, list[str]]) -> str:
        lines = [f"{name}:"]
        lines += [
            f"  '{key}': [{', '.join(repr(c) for c in values)}]" for key, values in table.items()
        ]
        return "\n".join(lines) + "\n"

    return HEADER + "version: 1\n" + block("keyboard", keyboard) + block("ocr", ocr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    text = render()
    if parser.parse_args().check:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} differs from nlpaug's tables: regenerate it", file=sys.stderr)
            raise SystemExit(1)
        return
    TARGET.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
