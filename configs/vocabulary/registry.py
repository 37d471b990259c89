"""One strict registry style for everything with a short name: runtimes, protocol dialects,
metrics and perturbations. Duplicates are refused; a wrong name gets one helpful error."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name no registry entry has. A KeyError for lookups and a ValueError for validation,
    so callers of either kind catch it; ``str()`` is the sentence, not its repr."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind, self.name, self.known = kind, name, tuple(sorted(known))
        super().__init__(unknown_name_message(kind, name, self.known))

    def __str__(self) -> str:
        return str(self.args[0])


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """``unknown metric 'acuracy'; did you mean 'accuracy'? (known: accuracy, macro_f1)``."""
    choices = sorted(known)
    close = difflib.get_close_matches(str(name), choices, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (known: {', '.join(choices)})"


class Registry(Generic[T]):
    """Short name -> entry. ``load`` (optional) imports the built-in entries on first use, so
    a registry can live in a base module that its implementations import."""

    def __init__(self, kind: str, load: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._load = load

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; a taken name is a ValueError."""
        if name in self._entries:
            raise ValueError(f"a {self.kind} named {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""
        return lambda entry: self.add(name, entry)

    def get(self, name: str) -> T:
        """The entry called ``name``, or :class:`UnknownName` with a did-you-mean hint."""
        self._ensure_loaded()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownName(self.kind, name, self._entries) from None

    def names(self) -> tuple[str, ...]:
        """Registered names, sorted."""
        self._ensure_loaded()
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _ensure_loaded(self) -> None:
        load, self._load = self._load, None
        if load is not None:
            load()
