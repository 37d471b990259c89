"""Per-example predictions kept server-side, one blob per model (its newest successful run).

``submit --compare-to`` compares two models on the same examples (a paired bootstrap,
``metrics.paired``), which needs every original-set prediction of both. The worker runs the
pipeline with a prediction log in a temporary folder and, after a successful run, keeps only
what the comparison needs: per round and dataset (with the dataset hash scored), the uids
and the model's outputs. Inputs and gold labels are never copied: the comparison reads them
from the task's held-out sets on the server, and nothing here is served as is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from configs.vocabulary.results import ORIGINAL
from store.backfill import SetPredictions
from store.blobs import BlobNotFound, BlobStore

FORMAT = 1


def predictions_key(model_id: str) -> str:
    """The blob holding a model's per-example predictions (overwritten by a re-score)."""
    return f"predictions/{model_id}.json"


def collect(log_dir: Path) -> dict[str, Any]:
    """The original-set predictions of a ``PredictionLog`` folder, without inputs or gold."""
    sets = []
    for path in sorted(log_dir.glob(f"*/*/{ORIGINAL}.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        if not rows:
            continue
        first = rows[0]
        sets.append(
            {
                "round": first["round"],
                "dataset": first["dataset"],
                "dataset_hash": first["dataset_hash"],
                "uids": [row["uid"] for row in rows],
                "predictions": [row["prediction"] for row in rows],
            }
        )
    return {"format": FORMAT, "sets": sets}


def store_predictions(blobs: BlobStore, model_id: str, log_dir: Path) -> None:
    """Keep a finished run's predictions under ``predictions_key(model_id)``."""
    document = collect(log_dir)
    blobs.put_bytes(predictions_key(model_id), json.dumps(document).encode("utf-8"))


def load_predictions(blobs: BlobStore, model_id: str) -> dict[str, Any] | None:
    """A model's stored predictions, or None when none were kept (older or failed runs)."""
    try:
        data: dict[str, Any] = json.loads(blobs.get_bytes(predictions_key(model_id)))
    except (BlobNotFound, ValueError):  # none kept, or an id no blob key can hold
        return None
    return data


def stored_sets(blobs: BlobStore, model_id: str) -> dict[tuple[str, str], SetPredictions]:
    """A model's stored predictions per (round, dataset), as a backfill carries them over."""
    document = load_predictions(blobs, model_id) or {}
    sets: dict[tuple[str, str], SetPredictions] = {}
    for entry in document.get("sets", []):
        try:
            key = (str(entry["round"]), str(entry["dataset"]))
            uids = tuple(str(u) for u in entry["uids"])
            outputs = tuple(str(o) for o in entry["predictions"])
            sets[key] = SetPredictions(str(entry["dataset_hash"]), uids, outputs)
        except (KeyError, TypeError):  # an unreadable entry: that set is scored again
            continue
    return sets
