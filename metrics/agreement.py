"""Dynaboard robustness and fairness: agreement of a model with itself.

The model's predictions on perturbed inputs (typos, paraphrases, demographic swaps) are
compared with its own predictions on the original inputs, not with gold labels:
classification tasks count identical labels, QA tasks average the token F1 between the
two answers (translation: ``metrics.translation.chrf_agreement``). All are on the 0-100
scale; each output type names its rule (``metrics.outputs``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics._checks import check_pair
from metrics.qa import token_f1


def label_agreement(original: Sequence[str], perturbed: Sequence[str]) -> float:
    """Percentage of examples whose label is unchanged by the perturbation."""
    check_pair(original, perturbed)
    same = np.asarray(original, dtype=object) == np.asarray(perturbed, dtype=object)
    return 100.0 * float(np.mean(same))


def qa_agreement(original: Sequence[str], perturbed: Sequence[str]) -> float:
    """Mean token F1 (0..100) between the answers on original and perturbed inputs."""
    check_pair(original, perturbed)
    scores = [token_f1(o, p) for o, p in zip(original, perturbed, strict=True)]
    return 100.0 * float(np.mean(scores))
