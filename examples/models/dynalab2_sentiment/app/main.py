"""A Dynalab 2.0-style sentiment model: the dialect Dynabench's model containers speak.

Run from this directory (the image's command):

    uvicorn app.main:app --host 0.0.0.0 --port 80

* ``POST /model/batch_evaluation`` with ``{"dataset_samples": [{"statement": ...}, ...]}``
  returns a JSON list ``[{"label": ..., "prob": {...}}, ...]`` in the same order.
* ``POST /model/single_evaluation`` with one flat sample returns one such object.

The scorer is ``examples/models/sentiment_lexicon/`` (``sentiment.py`` and ``lexicon.txt``),
the same model in the protocol-v1 dialect. The Dockerfile copies both files into ``app/`` so
the image is self-contained; run from a source checkout, where ``app/`` holds no copy, this
module loads them from ``../sentiment_lexicon/`` beside this example instead.

Written for FastAPI 0.92+ / Python 3.8+ (Dynabench builds its images FROM python:3.8).
"""

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

from fastapi import FastAPI
from pydantic import BaseModel

SOURCE_TREE_SCORER = Path(__file__).resolve().parents[2] / "sentiment_lexicon" / "sentiment.py"


def _sentiment_module() -> ModuleType:
    """``app.sentiment`` in the image; in a source checkout, sentiment_lexicon's file."""
    try:
        return importlib.import_module("app.sentiment")
    except ModuleNotFoundError as exc:
        if exc.name != "app.sentiment":
            raise  # something the scorer imports is missing: a real error
    if not SOURCE_TREE_SCORER.is_file():
        raise ImportError(f"neither app/sentiment.py nor {SOURCE_TREE_SCORER} exists")
    name = "dynalab2_sentiment_lexicon"
    spec = importlib.util.spec_from_file_location(name, SOURCE_TREE_SCORER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SentimentScorer = _sentiment_module().SentimentScorer

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
