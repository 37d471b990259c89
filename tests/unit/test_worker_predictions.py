"""What the worker keeps for paired comparisons: original-set uids and outputs per set,
never inputs or gold, under one blob per model."""

from __future__ import annotations

import json
from pathlib import Path

from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import ScoreKey
from evaluator.prediction_log import PredictionLog
from store.blobs import LocalBlobStore
from worker.predictions import collect, load_predictions, predictions_key, store_predictions


def _log(folder: Path) -> None:
    log = PredictionLog(folder)
    key = ScoreKey("toy", "alpha", "test", "h" * 64)
    examples = [Example("u1", {"claim": "SECRET INPUT"}, "GOLD-LABEL-yes")]
    log.write(key, "original", examples, [Prediction("u1", "no")])
    log.write(key, "typo", examples, [Prediction("u1", "maybe")])


def test_only_original_outputs_are_kept(tmp_path: Path) -> None:
    _log(tmp_path / "log")
    kept = collect(tmp_path / "log")
    assert kept["sets"] == [
        {
            "round": "alpha",
            "dataset": "test",
            "dataset_hash": "h" * 64,
            "uids": ["u1"],
            "predictions": ["no"],
        }
    ]
    text = json.dumps(kept)
    assert "SECRET INPUT" not in text and "GOLD-LABEL" not in text and "maybe" not in text


def test_stored_per_model_and_read_back(tmp_path: Path) -> None:
    _log(tmp_path / "log")
    blobs = LocalBlobStore(tmp_path / "blobs")
    store_predictions(blobs, "model-1", tmp_path / "log")
    assert blobs.exists(predictions_key("model-1"))
    found = load_predictions(blobs, "model-1")
    assert found is not None and found["sets"][0]["predictions"] == ["no"]
    assert load_predictions(blobs, "model-2") is None
    assert load_predictions(blobs, "../escape") is None  # no blob key: nothing, not an error
