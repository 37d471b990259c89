"""spBLEU's SentencePiece model, installed from the operator's setting.

FLORES' spBLEU tokenises with a SentencePiece model that Dynaeval cannot download. An
operator who has the file (sacrebleu's ``flores200`` model, for one) points
``DYNAEVAL_SPBLEU_MODEL`` at it, in every process that scores or shows boards; translation
tasks then report ``spbleu`` beside chrF++ and BLEU, and a task may make it its own metric.
Without the setting spBLEU is not offered, and a task naming it fails with a message that
says so.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from metrics.translation import use_sentencepiece

SETTING = "DYNAEVAL_SPBLEU_MODEL"
_INSTALLED: list[str] = []  # the sha256 of the installed model, when there is one


class SpBleuModelError(RuntimeError):
    """The setting names a file that is not a loadable SentencePiece model."""


def install(path: Path | None) -> str | None:
    """Load the model at ``path`` (None: remove spBLEU) and return its sha256."""
    if path is None:
        use_sentencepiece(None)
        _INSTALLED.clear()
        return None
    try:
        import sentencepiece
    except ImportError:  # pragma: no cover - a dependency, present wherever Dynaeval is
        raise SpBleuModelError("spBLEU needs the sentencepiece package") from None
    data = _read(path)
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(data)
    except (RuntimeError, OSError) as exc:
        raise SpBleuModelError(f"{SETTING}={path}: not a SentencePiece model ({exc})") from None

    def pieces(line: str) -> str:
        return " ".join(processor.EncodeAsPieces(line))

    use_sentencepiece(pieces)
    digest = hashlib.sha256(data).hexdigest()
    _INSTALLED[:] = [digest]
    return digest


def installed_sha256() -> str | None:
    """The sha256 of the model spBLEU tokenises with (a result's provenance says it)."""
    return _INSTALLED[0] if _INSTALLED else None


def install_from_environment() -> str | None:
    """The setting's model installed, if it is set (its sha256), else None."""
    value = os.environ.get(SETTING, "").strip()
    return install(Path(value)) if value else None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SpBleuModelError(f"{SETTING}={path}: cannot read it ({exc.strerror})") from None
