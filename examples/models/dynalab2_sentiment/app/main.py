"""A Dynalab 2.0-style sentiment model: the dialect Dynabench's model containers speak.

Run from this directory (the image's command):

    uvicorn app.main:app --host 0.0.0.0 --port 80

* ``POST /model/batch_evaluation`` with ``{"dataset_samples": [{"statement": ...}, ...]}``
  returns a JSON list ``[{"label": ..., "prob": {...}}, ...]`` in the same order.
* ``POST /model/single_evaluation`` with one flat sample returns one such object.

Written for FastAPI 0.92+ / Python 3.8+ (Dynabench builds its images FROM python:3.8).
"""

from typing import Any, Dict, List

from fastapi import FastAPI
from pydantic import BaseModel

from app.sentiment import SentimentScorer

app = FastAPI(title="dynalab2-sentiment-lexicon")
scorer = SentimentScorer()


class ModelBatchInput(BaseModel):
    """Dynabench's batch request: the rows of one dataset chunk."""

    dataset_samples: List[Dict[str, Any]]


def _evaluate(sample: Dict[str, Any]) -> Dict[str, Any]:
    label, probs = scorer.predict(str(sample.get("statement") or ""))
    return {"label": label, "prob": probs}


@app.post("/model/single_evaluation")
def single_evaluation(sample: Dict[str, Any]) -> Dict[str, Any]:
    """Label one flat sample (used by Dynabench for live, in-the-loop predictions)."""
    return _evaluate(sample)


@app.post("/model/batch_evaluation")
def batch_evaluation(data: ModelBatchInput) -> List[Dict[str, Any]]:
    """Label every sample of a batch; answers are matched by position."""
    return [_evaluate(sample) for sample in data.dataset_samples]
