"""``POST /model/single_evaluation``: one example per request, as in Dynabench's templates."""

from fastapi import APIRouter

from app.api.schemas.model import ModelSingleInput, ModelSingleOutput
from app.domain.model import ModelController

router = APIRouter()


@router.post("/single_evaluation", response_model=ModelSingleOutput)
async def single_evaluation(data: ModelSingleInput) -> dict:
    """Label one (context, hypothesis) pair. ``async`` with a synchronous model, like the
    templates: the event loop serves one request at a time."""
    return ModelController().single_evaluation(data.context, data.hypothesis)
