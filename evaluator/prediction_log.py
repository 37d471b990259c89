"""``--save-predictions DIR``: every prediction (original and perturbed) as JSONL with uids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.results import ScoreKey


class PredictionLog:
    """Writes ``DIR/<round>/<dataset>/<variant>.jsonl`` with inputs, gold and prediction."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def write(
        self,
        key: ScoreKey,
        variant: str,
        examples: Sequence[Example],
        predictions: Sequence[Prediction],
    ) -> Path:
        folder = self.root / key.round / key.dataset
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{variant}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for example, prediction in zip(examples, predictions, strict=True):
                row = {
                    "uid": example.uid,
                    "task": key.task,
                    "round": key.round,
                    "dataset": key.dataset,
                    "dataset_hash": key.dataset_hash,
                    "variant": variant,
                    "inputs": dict(example.inputs),
                    "gold": example.target,
                    "prediction": prediction.output,
                    "probs": dict(prediction.probs) if prediction.probs else None,
                }
                handle.write(json.dumps(row, sort_keys=True) + "\n")
        return path
