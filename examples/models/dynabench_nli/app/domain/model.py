"""The model: ``examples/models/nli_overlap``'s word-overlap rule, not a copy of it.

In the image the Dockerfile puts nli_overlap's ``model.py`` and ``antonyms.txt`` under
``app/resources/nli_overlap/`` (beside ``dynaeval_server.py``, which that module imports);
run from a source checkout, where ``app/resources/`` holds nothing, the file is loaded from
``../nli_overlap/`` beside this example. Either way the labels and probabilities are the
protocol-v1 model's, so the two score alike.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Dict

APP = Path(__file__).resolve().parents[1]
SCORERS = (
    APP / "resources" / "nli_overlap" / "model.py",  # the image
    APP.parent.parent / "nli_overlap" / "model.py",  # examples/models/ in a source checkout
)


def _load_scorer() -> ModuleType:
    """nli_overlap's module, from the first place it is found."""
    for path in SCORERS:
        if path.is_file():
            spec = importlib.util.spec_from_file_location("dynabench_nli_overlap", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            return module
    raise ImportError(f"nli_overlap's model.py is in none of {[str(p) for p in SCORERS]}")


SCORER = _load_scorer()  # once, at start: a request only runs the rule


class ModelController:
    """What a Dynabench submitter fills in: a constructor and ``single_evaluation``."""

    def single_evaluation(self, context: str, hypothesis: str) -> Dict[str, object]:
        """``{"label": ..., "prob": {label: probability}}`` for one pair."""
        label, probs = SCORER.classify(context, hypothesis)
        return {"label": label, "prob": probs}
