"""Time ``GET /api/v1/submissions`` per page on a store of 10,000 submissions; print JSON.

A SQLite store (a file, as ``serve`` runs it) gets 10,000 submissions: every one with a
job, a third of them finished (an attempt and a result with rounds, slices, profile and
provenance shaped like the evaluator's), the rest queued. Measured in the same run:

* ``bare_select_s``: the baseline, a bare ``SELECT`` of the same page of model rows (same
  filter, order and cursor condition) fetched through SQLAlchemy Core;
* ``route_s``: the whole route through Flask's test client (server time: token check,
  the page's queries, JSON encoding), walking the first ``PAGES`` pages by cursor;
* ``per_row_s``: the way the list was read before (one ``Queries.submission`` per row:
  model, job, attempts and result each a query), on the same page, for comparison.

Times are medians over pages (min in ``*_min_s``); ratios are to the baseline. The target
is a page of 100 under 50 ms (``route_s``), and a page of 1,000 under 50 ms: measured whole
and with ``fields=name,job`` (what a CI job polling its submissions reads).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import and_, or_, select  # noqa: E402

from api.app import create_app  # noqa: E402
from store.accounts import Accounts  # noqa: E402
from store.models import AttemptRow, JobRow, ModelRow, ResultRow  # noqa: E402
from store.queries import Queries, decode_cursor  # noqa: E402
from usecases.service import Service  # noqa: E402

N_SUBMISSIONS = 10_000
POLL_FIELDS = "name,job"  # what a CI job polling its submissions reads
PAGE_SIZES = (100, 1000)
PAGES = 10
START = datetime(2026, 1, 1)


ROUNDS = [{"round": f"r{k}", "performance": 70.0, "performance_ci": [65.0, 75.0]}
          for k in range(1, 4)]  # fmt: skip


def fill(service: Service) -> None:
    """10,000 submissions in one transaction (the store's own submit is one per call)."""
    models: list[ModelRow] = []
    jobs: list[JobRow] = []
    rest: list[AttemptRow | ResultRow] = []
    for i in range(N_SUBMISSIONS):
        model, job, extra = submission_rows(i)
        models.append(model)
        jobs.append(job)
        rest += extra
    with service.db.session() as session, session.begin():
        for rows in (models, jobs, rest):  # parents first: the rows declare no relationships
            session.add_all(rows)
            session.flush()


def submission_rows(i: int) -> tuple[ModelRow, JobRow, list[AttemptRow | ResultRow]]:
    """The i-th submission: a model and its job; every third one done, with an attempt and
    a result shaped like the evaluator's."""
    now = START + timedelta(seconds=i)
    model_id, job_id = str(uuid.uuid4()), str(uuid.uuid4())
    done = i % 3 == 0
    runtime = {"kind": "docker", "image": "r.example/m:1", "protocol": "v1"}
    model = ModelRow(id=model_id, task="sentiment", name=f"m{i}", runtime=runtime,
                     created_at=now)  # fmt: skip
    job = JobRow(id=job_id, model_id=model_id, task="sentiment",
                 status="done" if done else "queued", attempts=int(done), max_attempts=3,
                 available_at=now, progress=float(done), stage="done" if done else "queued",
                 created_at=now, started_at=now if done else None,
                 finished_at=now + timedelta(seconds=30) if done else None)  # fmt: skip
    if not done:
        return model, job, []
    attempt = AttemptRow(job_id=job_id, attempt=1, worker="w", started_at=now,
                         finished_at=now, outcome="done")  # fmt: skip
    summary = {"performance": 70.0, "throughput": 100.0, "memory": 0.5, "robustness": 90.0,
               "fairness": 90.0}  # fmt: skip
    provenance = {"code_version": "bench", "dataset_hashes": {"r1/test": "h" * 64}}
    result = ResultRow(job_id=job_id, model_id=model_id, task="sentiment", summary=summary,
                       rounds=ROUNDS, slices={"gender": {"gap": 1.0}},
                       profile={"p50_ms": 1.0}, provenance=provenance,
                       created_at=now)  # fmt: skip
    return model, job, [attempt, result]


def bare_select(service: Service, limit: int, cursor: str | None) -> float:
    """The baseline: the page's model rows and nothing else."""
    query = select(ModelRow.__table__).order_by(ModelRow.created_at.desc(), ModelRow.id.desc())
    if cursor:
        created, last = decode_cursor(cursor)
        query = query.where(
            or_(ModelRow.created_at < created, and_(ModelRow.created_at == created,
                                                   ModelRow.id < last))
        )  # fmt: skip
    start = time.perf_counter()
    with service.db.engine.connect() as connection:
        rows = connection.execute(query.limit(limit)).all()
    elapsed = time.perf_counter() - start
    assert len(rows) == limit
    return elapsed


def measure(service: Service, token: str, limit: int, fields: str | None = None) -> dict[str, Any]:
    client = create_app(service).test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    route, bare, per_row = [], [], []
    cursor: str | None = None
    queries = Queries(service.db)
    for _ in range(PAGES):
        url = f"/api/v1/submissions?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        url += f"&fields={fields}" if fields else ""
        start = time.perf_counter()
        response = client.get(url)
        route.append(time.perf_counter() - start)
        body = response.get_json()
        assert response.status_code == 200 and len(body["submissions"]) == limit
        bare.append(bare_select(service, limit, cursor))
        if (
            limit <= 100 and not fields
        ):  # the old way: one read per row (slow; only on the small page)
            ids = [s["id"] for s in body["submissions"]]
            start = time.perf_counter()
            for model_id in ids:
                queries.submission(model_id)
            per_row.append(time.perf_counter() - start)
        cursor = body["next_cursor"]
    out: dict[str, Any] = {
        "page_size": limit,
        "fields": fields or "all",
        "pages": PAGES,
        "bare_select_s": round(statistics.median(bare), 5),
        "route_s": round(statistics.median(route), 5),
        "route_min_s": round(min(route), 5),
        "route_over_bare_select": round(statistics.median(route) / statistics.median(bare), 1),
    }
    if per_row:
        out["per_row_s"] = round(statistics.median(per_row), 5)
        out["per_row_over_route"] = round(statistics.median(per_row) / out["route_s"], 1)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        service = Service.open(Path(folder) / "data")
        try:
            fill(service)
            accounts = Accounts(service.db)
            admin = accounts.add_user("bench-admin", "admin")
            token = accounts.create_token(admin["id"], "bench", ["read", "admin"]).secret
            results = [measure(service, token, size) for size in PAGE_SIZES]
            results.append(measure(service, token, 1000, POLL_FIELDS))
        finally:
            service.close()
    report = {
        "submissions": N_SUBMISSIONS,
        "target_route_s_per_page_of_100": 0.05,
        "met": results[0]["route_s"] < 0.05,
        "target_route_s_per_page_of_1000": 0.05,
        # the whole page (every field), as an admin lists them; not the polling fields
        "met_at_1000": next(
            r["route_s"] < 0.05 for r in results if r["page_size"] == 1000 and r["fields"] == "all"
        ),
        "pages": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
