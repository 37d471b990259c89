"""A Dynalab 2.0-style translation model, with Dynabench's FLORES field names.

Run from this directory (the image's command):

    uvicorn app.main:app --host 0.0.0.0 --port 80

* ``POST /model/batch_evaluation`` with ``{"dataset_samples": [{"sourceText": ...,
  "sourceLanguage": "eng_Latn", "targetLanguage": "deu_Latn"}, ...]}`` returns a JSON list
  ``[{"translatedText": ...}, ...]`` in the same order.
* ``POST /model/single_evaluation`` with one flat sample returns one such object.

The translator is ``examples/models/translation_dictionary/`` (``model.py``'s ``translate``
and ``lexicon.json``), the same model in the protocol-v1 dialect. The Dockerfile copies both
files into ``app/``; run from a source checkout, this module loads them from
``../translation_dictionary/`` instead.

Written for FastAPI 0.92+ / Python 3.8+ (Dynabench builds its images FROM python:3.8).
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

from fastapi import FastAPI
from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
CANDIDATES = (HERE / "translator.py", HERE.parents[1] / "translation_dictionary" / "model.py")


def _translator_module() -> ModuleType:
    """``app/translator.py`` in the image; in a source checkout, translation_dictionary's."""
    path = next((p for p in CANDIDATES if p.is_file()), None)
    if path is None:
        raise ImportError(f"none of {[str(p) for p in CANDIDATES]} exists")
    name = "dynalab2_translation_dictionary"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


translate = _translator_module().translate
app = FastAPI(title="dynalab2-translation-dictionary")


class ModelBatchInput(BaseModel):
    """Dynabench's batch request: the rows of one dataset chunk."""

    dataset_samples: List[Dict[str, Any]]


def _evaluate(sample: Dict[str, Any]) -> Dict[str, Any]:
    source = str(sample.get("sourceText") or "")
    return {"translatedText": translate(source, str(sample.get("targetLanguage") or ""))}


@app.post("/model/single_evaluation")
def single_evaluation(sample: Dict[str, Any]) -> Dict[str, Any]:
    """Translate one flat sample (used by Dynabench for live, in-the-loop predictions)."""
    return _evaluate(sample)


@app.post("/model/batch_evaluation")
def batch_evaluation(data: ModelBatchInput) -> List[Dict[str, Any]]:
    """Translate every sample of a batch; answers are matched by position."""
    return [_evaluate(sample) for sample in data.dataset_samples]
