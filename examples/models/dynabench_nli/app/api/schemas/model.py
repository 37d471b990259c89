"""Bodies of ``POST /model/single_evaluation``: one flat example in, one label out."""

from pydantic import BaseModel


class ModelSingleInput(BaseModel):
    """One NLI example, its fields at the top level (no wrapping object, no id)."""

    context: str
    hypothesis: str


class ModelSingleOutputProbabilities(BaseModel):
    """A probability per label."""

    entailed: float
    contradictory: float
    neutral: float


class ModelSingleOutput(BaseModel):
    """The label (lower case, as the task spells it) and the probabilities as ``prob``."""

    label: str
    prob: ModelSingleOutputProbabilities
