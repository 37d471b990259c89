"""Offline WordNet 3.0 from Debian's ``wordnet-base`` package, read with NLTK's reader.

Debian installs the WordNet database files (``index.noun``, ``data.noun``, ``*.exc``,
``cntlist.rev`` ...) in ``/usr/share/wordnet`` but not the ``lexnames`` file NLTK's
``WordNetCorpusReader`` opens first, and no ``index.sense``. We supply ``lexnames`` from
memory (the fixed 45 lexicographer file names of WordNet 3.0, documented in lexnames(5WN)) and
skip NLTK's OMW version mapping (which needs ``index.sense`` and a downloaded corpus). NLTK's
path sandbox only reads below its data roots, so the WordNet folder is added to
``nltk.data.path`` once. Nothing is downloaded; no NLTK data directory is needed.
"""

from __future__ import annotations

import io
import os
import threading
import warnings
from pathlib import Path
from typing import IO, Any

DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
_POS_FILES = ("noun", "verb", "adj", "adv")
REQUIRED_FILES = (
    *(f"{kind}.{pos}" for pos in _POS_FILES for kind in ("index", "data")),
    *(f"{pos}.exc" for pos in _POS_FILES),
    "cntlist.rev",
)
_LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}

_lock = threading.Lock()
_readers: dict[Path, Any] = {}


class WordNetMissing(RuntimeError):
    """The WordNet database files are not installed."""


def wordnet_dir() -> Path:
    """``$DYNAEVAL_WORDNET_DIR`` or ``/usr/share/wordnet``."""
    return Path(os.environ.get("DYNAEVAL_WORDNET_DIR", DEFAULT_WORDNET_DIR))


def _lexnames_text() -> str:
    return "".join(
        f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES)
    )


def load_wordnet(root: Path | None = None) -> Any:
    """A cached ``WordNetCorpusReader`` over the WordNet files in ``root``; raises
    :class:`WordNetMissing` naming the Debian package when they are absent."""
    root = (root or wordnet_dir()).resolve()
    with _lock:
        if root in _readers:
            return _readers[root]
        missing = [name for name in REQUIRED_FILES if not (root / name).is_file()]
        if missing:
            raise WordNetMissing(
                f"WordNet 3.0 database not found in {root} (missing {', '.join(missing)}); "
                "install it with `apt-get install wordnet-base` or set DYNAEVAL_WORDNET_DIR"
            )
        import nltk
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        class _DebianWordNetReader(WordNetCorpusReader):  # type: ignore[misc]  # nltk is untyped
            def open(self, file: str) -> IO[str]:
                if file == "lexnames":
                    return io.StringIO(_lexnames_text())
                opened: IO[str] = super().open(file)
                return opened

            def map_wn(self, version: str = "wordnet") -> None:
                return None  # OMW mapping: needs index.sense and a downloaded corpus

        if str(root) not in [str(p) for p in nltk.data.path]:
            nltk.data.path.append(str(root))
        with warnings.catch_warnings():
            # "The multilingual functions are not available with this Wordnet version"
            warnings.simplefilter("ignore", UserWarning)
            reader = _DebianWordNetReader(str(root), None)
        _readers[root] = reader
        return reader
