"""Keep held-out data out of the log tail a submitter sees.

A model could print every instance it receives and then crash: its log tail goes back to
the submitter with the failure. Before a tail is stored, every line holding any
``WINDOW``-character stretch of an input text the evaluation sent (originals and perturbed
copies, every input field) is replaced; a text shorter than the window matches whole.
Text the model encodes (base64, escapes, pieces shorter than the window) is not recognised.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from configs.vocabulary.examples import Example

WINDOW = 24
WITHHELD = "[line withheld: it contains held-out data]"


@dataclass(frozen=True)
class Shingles:
    """Every ``WINDOW``-character substring of the long texts, and the short texts whole."""

    windows: frozenset[str]
    short: dict[int, frozenset[str]]  # texts shorter than WINDOW, by length

    @classmethod
    def of(cls, texts: Iterable[str]) -> Shingles:
        windows: set[str] = set()
        short: dict[int, set[str]] = {}
        for text in set(texts):
            if len(text) >= WINDOW:
                windows.update(text[i : i + WINDOW] for i in range(len(text) - WINDOW + 1))
            elif text.strip():  # an empty text would match every line
                short.setdefault(len(text), set()).add(text)
        return cls(frozenset(windows), {n: frozenset(group) for n, group in short.items()})

    def found_in(self, line: str) -> bool:
        """Whether ``line`` holds a window of a long text or the whole of a short one."""
        if self.windows and _any_window(line, WINDOW, self.windows):
            return True
        return any(_any_window(line, size, group) for size, group in self.short.items())


def _any_window(line: str, size: int, targets: frozenset[str]) -> bool:
    return any(line[i : i + size] in targets for i in range(len(line) - size + 1))


class HeldOutText:
    """The example sets an evaluation sent; their shingles are built once, when needed."""

    def __init__(self) -> None:
        self._sets: list[Sequence[Example]] = []
        self._shingles: Shingles | None = None

    def add(self, examples: Sequence[Example]) -> None:
        """Record a set about to be sent (a reference only: nothing is copied here)."""
        self._sets.append(examples)
        self._shingles = None

    def redact(self, log: str) -> str:
        """``log`` with every line quoting held-out input text replaced by ``WITHHELD``."""
        if not log or not self._sets:
            return log
        if self._shingles is None:
            texts = (
                text for examples in self._sets for e in examples for text in e.inputs.values()
            )
            self._shingles = Shingles.of(texts)
        shingles = self._shingles
        lines = log.split("\n")
        return "\n".join(WITHHELD if shingles.found_in(line) else line for line in lines)
