"""The ASGI app: ``uvicorn app.app:app --host 0.0.0.0 --port 80`` (the image's command).

Routes: ``GET /`` (a greeting, no health route), ``GET /openapi.json`` (FastAPI's own) and
``POST /model/single_evaluation``; there is no batch route. Dynabench's templates also
build an AWS Lambda handler here with ``mangum``; this image serves HTTP only, and mangum
is not in the offline base image, so there is none.
"""

from fastapi import FastAPI

from app.api.endpoints import model

app = FastAPI(title="dynabench-nli-overlap")
app.include_router(model.router, prefix="/model", tags=["model"])


@app.get("/")
def read_root() -> dict:
    """Any answer here means the server is up (Dynaeval's readiness rule for this dialect)."""
    return {"hello": "a Dynalab 2.0 NLI model"}
