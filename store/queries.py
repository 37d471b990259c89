"""Read-side queries for the API and CLI: submissions, results, leaderboard tables."""

from __future__ import annotations

import base64
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, NotRequired, TypedDict, TypeVar, cast

from sqlalchemy import ColumnElement, Row, and_, func, or_, select, true
from sqlalchemy.orm import Session

from configs.vocabulary.capabilities import Capabilities
from configs.vocabulary.jobs import JobStatus
from configs.vocabulary.results import SCORE_NUMBERS, BoardRow, ImageGone
from store.claims import claim_order, claimed_before, meets
from store.db import Database
from store.models import (
    SCORE_KEY_COLUMNS,
    AttemptRow,
    JobRow,
    ModelRow,
    ResultRow,
    ScoreRow,
    TaskRow,
)
from store.presence import live_capabilities_in
from store.rules.principals import READ, Principal


class CursorError(ValueError):
    """A list cursor that no page of ours produced."""


# What a row of the submissions list holds; a caller may ask for some (``fields``), and then
# the queries it does not need (jobs and attempts, results) are not run.
LIST_FIELDS = (
    "id", "task", "name", "runtime", "requirements", "image_id", "created_at", "image_gone",
    "job", "results",
)  # fmt: skip


@dataclass(frozen=True)
class SubmissionPage:
    """A page of submissions and the cursor of the next one (None on the last page)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


def encode_cursor(model: ModelRow | Row[Any]) -> str:
    """An opaque cursor: the last row's sort key (creation time, id), base64url JSON."""
    raw = json.dumps([model.created_at.isoformat(), model.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The sort key a cursor carries, or CursorError."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, model_id = json.loads(raw)
        if not isinstance(model_id, str):
            raise TypeError("the id is not a string")
        return datetime.fromisoformat(created), model_id
    except (ValueError, TypeError) as exc:  # binascii.Error and JSON errors are ValueErrors
        raise CursorError(f"not a cursor from this list: {cursor[:80]!r}") from exc


class Queries:
    """Reads that turn rows into plain dicts (the API's JSON)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def task_names(self) -> list[str]:
        with self.db.session() as session:
            return list(session.scalars(select(TaskRow.name).order_by(TaskRow.name)))

    def submission(
        self,
        model_id: str,
        *,
        with_scores: bool = False,
        show_internal: bool = False,
        now: datetime | None = None,
    ) -> dict[str, Any] | None:
        """A submission's model, job status/progress/failure and results, or None. Which
        worker ran each attempt (its host name) is internal: shown only with
        ``show_internal`` (for admins, once the API knows roles; the CLI on its own
        database). Given ``now`` (the clock's), a queued job also shows its ``queue``
        place and estimated start (see _queue_place)."""
        with self.db.session() as session:
            model = session.get(ModelRow, model_id)
            if model is None:
                return None
            job = session.scalars(
                select(JobRow).where(JobRow.model_id == model_id).order_by(JobRow.created_at.desc())
            ).first()
            result = session.scalars(
                select(ResultRow)
                .where(ResultRow.model_id == model_id)
                .order_by(ResultRow.created_at.desc())
            ).first()
            shown = _job_dict(job, session, show_internal) if job else None
            if job is not None and shown is not None and now is not None:
                shown["queue"] = _queue_place(session, job, now)
            data = _model_dict(model) | {"job": shown}
            data["results"] = _result_dict(result) if result else None
            if with_scores and result is not None:
                data["scores"] = [
                    _score_dict(row)
                    for row in session.scalars(
                        select(ScoreRow).where(ScoreRow.job_id == result.job_id)
                    )
                ]
            return data

    def submissions(
        self,
        task: str | None = None,
        limit: int = 100,
        visible_to: Principal | None = None,
        cursor: str | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first; only those ``visible_to`` may see when a viewer is given."""
        return self.submission_page(task, limit, visible_to, cursor).items

    def submission_page(
        self,
        task: str | None = None,
        limit: int = 100,
        visible_to: Principal | None = None,
        cursor: str | None = None,
        fields: Collection[str] | None = None,
    ) -> SubmissionPage:
        """One page of submissions, newest first, after ``cursor`` (from an earlier page's
        ``next_cursor``; a bad one is CursorError). Four queries whatever the page size:
        the models, then their jobs, attempts and results in one batch each; with
        ``fields`` (of LIST_FIELDS; ``id`` always comes) only those, and only the queries
        they need."""
        wanted = _wanted(fields)
        columns = {
            column for name in wanted & set(_MODEL_COLUMNS) for column in _MODEL_COLUMNS[name]
        }
        # only the columns the fields read (the cursor needs id and created_at), as plain
        # rows read by name like the table's objects: reading any other column raises; a
        # thousand ORM objects cost more than the query
        selected = [
            ModelRow.id,
            ModelRow.created_at,
            *(columns - {ModelRow.id, ModelRow.created_at}),
        ]
        query = select(*selected).order_by(ModelRow.created_at.desc(), ModelRow.id.desc())
        if task:
            query = query.where(ModelRow.task == task)
        if visible_to is not None:
            query = query.where(visible_models(visible_to))
        if cursor:
            created, last_id = decode_cursor(cursor)
            query = query.where(
                or_(
                    ModelRow.created_at < created,
                    and_(ModelRow.created_at == created, ModelRow.id < last_id),
                )
            )
        with self.db.session() as session:
            models = list(session.execute(query.limit(limit + 1)))  # one more: is there a next?
            more = len(models) > limit
            models = models[:limit]
            items = _submission_dicts(session, models, wanted)
        next_cursor = encode_cursor(models[-1]) if more and models else None
        return SubmissionPage(items, next_cursor)

    def leaderboard_rows(self, task: str, since: datetime | None = None) -> list[BoardRow]:
        """Each model's newest finished result on ``task`` (summary axes + rounds); with
        ``since``, only of the results stored at or after it (for a reader that has the
        rest: a model may then appear again, newer)."""
        query = (  # the columns a board reads, as plain rows: no ORM objects, and no model
            # runtime, result slices or profile decoded (at 10,000 models, most of the time)
            select(
                ModelRow.id,
                ModelRow.name,
                ModelRow.image_id,
                ModelRow.image_gone,
                ModelRow.image_gone_at,
                ResultRow.summary,
                ResultRow.rounds,
                # only the hashes: a result's provenance (its perturbation counts per set,
                # its runtime, its conditions) is decoded in SQL, not whole in Python
                ResultRow.provenance["dataset_hashes"],
            )
            .join(ResultRow, ResultRow.model_id == ModelRow.id)
            .where(ModelRow.task == task)
            .order_by(ResultRow.created_at)
        )
        if since is not None:
            query = query.where(ResultRow.created_at >= since)
        with self.db.session() as session:
            rows = cast(list[_BoardRow], session.execute(query).all())
        newest: dict[str, BoardRow] = {}
        for model_id, name, image_id, gone, gone_at, summary, rounds, hashes in rows:
            # the summary's and the rounds' keys are the evaluator's, read back from JSON
            newest[model_id] = cast(
                BoardRow,
                {
                    "model_id": model_id,
                    "name": name,
                    **summary,
                    "rounds": rounds,
                    "image_id": image_id,
                    "image_gone": _gone(gone, gone_at),
                    "dataset_hashes": hashes or {},
                },
            )
        return list(newest.values())

    def results_version(self, task: str) -> tuple[int, str | None]:
        """What changes whenever ``task`` gains a result (how many there are and when the
        newest was stored: results are never edited in place) or a model's image goes."""
        marks = self.results_marks(task)
        stamp = marks.newest.isoformat() if marks.newest is not None else None
        if not marks.images_gone:
            return marks.results, stamp
        went = marks.newest_gone.isoformat() if marks.newest_gone is not None else None
        return marks.results, f"{stamp}|{marks.images_gone} images gone|{went}"

    def results_marks(self, task: str) -> ResultsMarks:
        """How many results ``task`` has and when the newest was stored (results are only
        ever added), how many of its models' images are gone and when the last went (a mark
        taken back when a removal failed, then set again, is then still a change)."""
        # one round trip: the results' count and newest time from the (task, created_at)
        # index, the images gone from a partial index of only the models whose image went
        counted = select(func.count()).where(ResultRow.task == task).scalar_subquery()
        newest = select(func.max(ResultRow.created_at)).where(ResultRow.task == task)
        gone = (ModelRow.task == task, ModelRow.image_gone_at.is_not(None))
        gone_count = select(func.count()).select_from(ModelRow).where(*gone)
        gone_newest = select(func.max(ModelRow.image_gone_at)).where(*gone)
        query = select(
            counted,
            newest.scalar_subquery(),
            gone_count.scalar_subquery(),
            gone_newest.scalar_subquery(),
        )
        with self.db.session() as session:
            count, stamp, images, went = session.execute(query).one()
        return ResultsMarks(
            int(cast(int, count)),
            cast(datetime | None, stamp),
            int(cast(int, images)),
            cast(datetime | None, went),
        )

    def results_through(self, task: str, moment: datetime) -> int:
        """How many results ``task`` has stored at or before ``moment`` (from the index)."""
        with self.db.session() as session:
            found = session.scalar(
                select(func.count()).where(ResultRow.task == task, ResultRow.created_at <= moment)
            )
        return int(found or 0)

    def scored_models(self) -> dict[str, int]:
        """task -> how many models have a finished result on it."""
        query = select(ResultRow.task, func.count(func.distinct(ResultRow.model_id))).group_by(
            ResultRow.task
        )
        with self.db.session() as session:
            return {str(task): int(n) for task, n in session.execute(query)}

    def last_result_times(self) -> dict[str, datetime]:
        """task -> when its newest result was written."""
        query = select(ResultRow.task, func.max(ResultRow.created_at)).group_by(ResultRow.task)
        with self.db.session() as session:
            return {str(task): moment for task, moment in session.execute(query)}

    def rescoring_candidates(self, task: str) -> list[tuple[str, dict[str, str]]]:
        """(model id, dataset hashes of its newest result) for every model on ``task`` that
        has a result and no job waiting or running."""
        busy = (JobStatus.QUEUED, JobStatus.RUNNING)
        with self.db.session() as session:
            pending = set(
                session.scalars(
                    select(JobRow.model_id).where(JobRow.task == task, JobRow.status.in_(busy))
                )
            )
        return [
            (row["model_id"], row["dataset_hashes"])
            for row in self.leaderboard_rows(task)
            if row["model_id"] not in pending
        ]

    def ping(self) -> None:
        """One round trip to the database (raises what its outage raises)."""
        with self.db.session() as session:
            session.execute(select(1))

    def job_counts(self) -> dict[str, int]:
        with self.db.session() as session:
            counts: dict[str, int] = {}
            for status in session.scalars(select(JobRow.status)):
                counts[status] = counts.get(status, 0) + 1
            return counts


def _wanted(fields: Collection[str] | None) -> set[str]:
    """The list fields to show: ``fields`` (of LIST_FIELDS) and ``id``; None: every one."""
    return set(LIST_FIELDS if fields is None else fields) | {"id"}


def _submission_dicts(
    session: Session, models: Sequence[ModelRow | Row[Any]], wanted: set[str]
) -> list[dict[str, Any]]:
    """Models as the list shows them (job and results, no scores), with their newest jobs,
    those jobs' attempts and the newest results loaded in one query each (each only when
    ``wanted`` holds it)."""
    ids = [m.id for m in models]
    if not ids:
        return []
    jobs, attempts = _newest_jobs(session, ids) if "job" in wanted else ({}, {})
    results = _newest_results(session, ids) if "results" in wanted else {}
    items = []
    for model in models:
        data = _model_dict(model, wanted)
        if "job" in wanted:
            newest_job = jobs.get(model.id)
            data["job"] = _job_fields(newest_job, attempts[newest_job.id]) if newest_job else None
        if "results" in wanted:
            data["results"] = results.get(model.id)
        items.append(data)
    return items


# A row as the API shows it: only the columns it names, read without the ORM (a thousand
# ORM rows, with their JSON decoded, cost several times more). Named tuples: a thousand are
# made per page, and a frozen dataclass's __init__ costs 50 times a tuple's.
class ListedJob(NamedTuple):
    """What the API shows of a job (its spec, runtime and checkpoint are not shown)."""

    id: str
    model_id: str | None
    status: str
    progress: float
    stage: str
    attempts: int
    max_attempts: int
    failure_code: str | None
    failure_message: str | None
    log_tail: str | None
    created_at: datetime
    finished_at: datetime | None


class ListedAttempt(NamedTuple):
    """What the API shows of an attempt."""

    job_id: str
    attempt: int
    worker: str
    outcome: str | None
    failure_code: str | None
    failure_message: str | None


Listed = TypeVar("Listed", ListedJob, ListedAttempt)
_LISTED_TABLE: dict[type, type] = {ListedJob: JobRow, ListedAttempt: AttemptRow}


def listed_columns(kind: type[Listed]) -> list[Any]:
    """The columns of ``kind``'s table to select for it (its fields, in order)."""
    return [getattr(_LISTED_TABLE[kind], name) for name in kind._fields]


def listed_from(kind: type[Listed], row: object) -> Listed:
    """``kind`` from an ORM row of its table."""
    return kind._make(getattr(row, name) for name in kind._fields)


def _newest_jobs(
    session: Session, ids: list[str]
) -> tuple[dict[str, ListedJob], dict[str, list[ListedAttempt]]]:
    """Each model's newest job, and those jobs' attempts in order."""
    jobs: dict[str, ListedJob] = {}
    query = select(*listed_columns(ListedJob)).where(JobRow.model_id.in_(ids))
    for row in session.execute(query.order_by(JobRow.created_at)):
        job = ListedJob._make(row)
        if job.model_id:  # always: the query selects by model
            jobs[job.model_id] = job  # created_at order: the newest stays
    attempts: dict[str, list[ListedAttempt]] = defaultdict(list)
    job_ids = [j.id for j in jobs.values()]
    if job_ids:
        query = select(*listed_columns(ListedAttempt)).where(AttemptRow.job_id.in_(job_ids))
        for row in session.execute(query.order_by(AttemptRow.attempt)):
            attempt = ListedAttempt._make(row)
            attempts[attempt.job_id].append(attempt)
    return jobs, attempts


def _newest_results(session: Session, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each model's newest result as the list shows it (read as plain columns: a thousand
    ORM rows cost more than the rest of the read)."""
    columns = (ResultRow.model_id, ResultRow.summary, *_RESULT_PARTS)
    query = select(*columns).where(ResultRow.model_id.in_(ids)).order_by(ResultRow.created_at)
    results: dict[str, dict[str, Any]] = {}
    for row in session.execute(query):
        model_id, summary, *parts = cast(tuple[str, dict[str, Any], Any, Any, Any, Any], row)
        # created_at order: the newest stays
        results[model_id] = {**summary, **dict(zip(_RESULT_PART_NAMES, parts, strict=True))}
    return results


class StageStep(TypedDict):
    """A job's stage as data: its phase and, while scoring a set, which one and which
    variant (original or a perturbation)."""

    phase: str | None
    round: str | None
    dataset: str | None
    variant: str | None


class ShownFailure(TypedDict):
    code: str
    message: str | None
    log_tail: str


class ShownAttempt(TypedDict):
    attempt: int
    worker: NotRequired[str]  # a host name: shown only to whom may see internals
    outcome: str | None
    failure_code: str | None
    failure_message: str | None


class QueuePlace(TypedDict):
    """Where a queued job stands (``_queue_place``)."""

    ahead: int
    workers: int
    median_run_s: float | None
    estimated_start: str | None
    # live workers whose capabilities meet the job's requirements; None: it has none
    capable_workers: int | None


class ShownJob(TypedDict):
    """A submission's newest job as the API shows it."""

    id: str
    status: str
    progress: float
    stage: str
    step: StageStep
    attempts: int
    max_attempts: int
    failure: ShownFailure | None
    attempt_history: list[ShownAttempt]
    created_at: str
    finished_at: str | None
    queue: NotRequired[QueuePlace | None]  # a single submission's, read with the clock


# Each list field of a model: how it is read, and the columns it reads.
_MODEL_FIELDS: dict[str, Callable[[Any], Any]] = {  # of a ModelRow, or a Row of its columns
    "id": lambda model: model.id,
    "task": lambda model: model.task,
    "name": lambda model: model.name,
    "runtime": lambda model: {
        k: v for k, v in model.runtime.items() if k in ("kind", "protocol", "image")
    },
    "requirements": lambda model: model.requirements or {},
    "image_id": lambda model: model.image_id,
    "created_at": lambda model: _utc(model.created_at),
    "image_gone": lambda model: image_gone_of(model),
}
_MODEL_COLUMNS: dict[str, tuple[Any, ...]] = {
    "id": (ModelRow.id,),
    "task": (ModelRow.task,),
    "name": (ModelRow.name,),
    "runtime": (ModelRow.runtime,),
    "requirements": (ModelRow.requirements,),
    "image_id": (ModelRow.image_id,),
    "created_at": (ModelRow.created_at,),
    "image_gone": (ModelRow.image_gone, ModelRow.image_gone_at),
}


def _model_dict(
    model: ModelRow | Row[Any], wanted: Collection[str] = LIST_FIELDS
) -> dict[str, Any]:
    """The model's own list fields that ``wanted`` names, in the list's order."""
    return {name: read(model) for name, read in _MODEL_FIELDS.items() if name in wanted}


# id, name, image id, image gone (reason, at), result summary, rounds, dataset hashes
_BoardRow = tuple[
    str,
    str,
    str | None,
    str | None,
    datetime | None,
    dict[str, Any],
    list[Any],
    dict[str, str] | None,
]


def image_gone_of(model: ModelRow | Row[Any]) -> ImageGone | None:
    """When and why the model's image went (store.retention), or None while it is kept."""
    return _gone(model.image_gone, model.image_gone_at)


def _gone(reason: str | None, at: datetime | None) -> ImageGone | None:
    if reason is None:
        return None
    return {"at": _utc(at) if at else None, "reason": reason}


def _job_dict(job: JobRow, session: Session, show_internal: bool = False) -> ShownJob:
    attempts = session.scalars(
        select(AttemptRow).where(AttemptRow.job_id == job.id).order_by(AttemptRow.attempt)
    ).all()
    listed = [listed_from(ListedAttempt, attempt) for attempt in attempts]
    return _job_fields(listed_from(ListedJob, job), listed, show_internal)


def _job_fields(
    job: ListedJob, attempts: Sequence[ListedAttempt], show_internal: bool = False
) -> ShownJob:
    """A job as the API shows it, from its row and its attempts (oldest first)."""
    failure: ShownFailure | None = None
    if job.failure_code:
        failure = {
            "code": job.failure_code,
            "message": job.failure_message,
            "log_tail": job.log_tail or "",
        }
    return {
        "id": job.id,
        "status": job.status,
        "progress": round(job.progress, 4),
        "stage": job.stage,
        "step": parse_stage(job.stage),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "failure": failure,
        "attempt_history": [_attempt_shown(a, show_internal) for a in attempts],
        "created_at": _utc(job.created_at),
        "finished_at": _utc(job.finished_at) if job.finished_at else None,
    }


def _attempt_shown(attempt: ListedAttempt, show_internal: bool) -> ShownAttempt:
    outcome, code, message = attempt.outcome, attempt.failure_code, attempt.failure_message
    if show_internal:  # which worker ran it: a host name, internal
        return {"attempt": attempt.attempt, "worker": attempt.worker, "outcome": outcome,
                "failure_code": code, "failure_message": message}  # fmt: skip
    return {"attempt": attempt.attempt, "outcome": outcome, "failure_code": code,
            "failure_message": message}  # fmt: skip


_STEP = re.compile(r"round (?P<round>\S+) / (?P<dataset>.+): (?P<variant>[^:]+)")


def parse_stage(stage: str | None) -> StageStep:
    """The worker's stage string as data: ``phase`` and, while scoring a set, its
    ``round``, ``dataset`` and ``variant`` (original or a perturbation). The evaluator
    reports whole sets, so there is no per-example count to show."""
    text = stage or ""
    matched = _STEP.fullmatch(text)
    if matched:
        found = matched.groupdict()
        return {"phase": "scoring", "round": found["round"], "dataset": found["dataset"],
                "variant": found["variant"]}  # fmt: skip
    phase = text.split(":", 1)[0].strip() or None  # queued, claimed, profiling, done, ...
    return {"phase": phase, "round": None, "dataset": None, "variant": None}


@dataclass(frozen=True)
class ResultsMarks:
    """What a task's stored results have come to (``Queries.results_marks``)."""

    results: int
    newest: datetime | None
    images_gone: int
    newest_gone: datetime | None = None  # when the last of them went


# How many finished jobs the start estimate takes its median duration from.
RECENT_JOBS = 50


def _queue_place(session: Session, job: JobRow, now: datetime) -> QueuePlace | None:
    """For a queued job: ``ahead`` (queued jobs a worker would claim before it in claim order
    as it stands now: priority, fair shares, available_at, created_at; store.claims), ``workers`` (distinct workers holding
    an unexpired lease now) and ``estimated_start``. The rule: the median run time M of the
    last RECENT_JOBS done jobs; with W live workers the job starts after
    ceil((ahead + 1) / W) runs of M (as if every worker had just started a job: an upper
    estimate), and never before its own available_at. Null when there is no finished job
    or no live worker. None for a job that is not queued."""
    if job.status != JobStatus.QUEUED:
        return None
    # Jobs made at the very same instant have no claim order between them: none counts.
    joined, keys = claim_order(now)
    mine = session.execute(select(*keys).select_from(joined).where(JobRow.id == job.id)).one()
    ahead = session.scalar(
        select(func.count())
        .select_from(joined)
        .where(JobRow.status == JobStatus.QUEUED, claimed_before(keys, tuple(mine)))
    )
    workers = session.scalar(
        select(func.count(func.distinct(JobRow.lease_owner))).where(
            JobRow.status == JobStatus.RUNNING, JobRow.lease_expires_at >= now
        )
    )
    ahead, workers = int(ahead or 0), int(workers or 0)
    capable = _capable_workers(session, job, now)
    median = _median_run_s(session)
    start = None
    if median is not None and workers > 0 and capable != 0:
        waves = -(-(ahead + 1) // workers)  # ceiling division
        start = max(now + timedelta(seconds=median * waves), job.available_at)
    return {
        "ahead": ahead,
        "workers": workers,
        "median_run_s": median,
        "estimated_start": _utc(start) if start else None,
        "capable_workers": capable,
    }


def _capable_workers(session: Session, job: JobRow, now: datetime) -> int | None:
    """How many live workers meet the job's model's requirements; None when it has none
    (any worker runs it). A job only a GPU worker may run, with none alive, waits for one:
    it gets no start time (it was given one whenever some other worker was busy)."""
    needs = session.scalar(select(ModelRow.requirements).where(ModelRow.id == job.model_id))
    if not needs:
        return None
    offered = live_capabilities_in(session, now)
    return sum(meets(needs, Capabilities.from_dict(o) if o else None) for o in offered)


def _median_run_s(session: Session) -> float | None:
    """The median run time in seconds of the most recent done jobs, or None."""
    rows = session.execute(
        select(JobRow.started_at, JobRow.finished_at)
        .where(JobRow.status == JobStatus.DONE, JobRow.started_at.is_not(None))
        .order_by(JobRow.finished_at.desc())
        .limit(RECENT_JOBS)
    ).all()
    runs = [(end - begin).total_seconds() for begin, end in rows if begin and end]
    return round(statistics.median(runs), 3) if runs else None


def _utc(moment: datetime) -> str:
    """A stored (naive UTC) time as ISO 8601 with its zone: ``...Z``."""
    return moment.isoformat() + "Z"


# what a result shows beside its summary's fields, in order
_RESULT_PARTS = (ResultRow.rounds, ResultRow.slices, ResultRow.profile, ResultRow.provenance)
_RESULT_PART_NAMES = ("rounds", "slices", "profile", "provenance")


def _result_dict(result: ResultRow) -> dict[str, Any]:
    parts = (getattr(result, name) for name in _RESULT_PART_NAMES)
    return {**result.summary, **dict(zip(_RESULT_PART_NAMES, parts, strict=True))}


def _score_dict(row: ScoreRow) -> dict[str, Any]:
    """A stored score as the API shows it: its key (the task is implied) and its numbers."""
    fields = [name for name in SCORE_KEY_COLUMNS if name != "task"]
    return {field: getattr(row, field) for field in [*fields, *SCORE_NUMBERS]}


def visible_models(viewer: Principal) -> ColumnElement[bool]:
    """The SQL condition for the submissions ``viewer`` may see (``Principal.may_see_model``)."""
    if viewer.is_admin:
        return true()
    if viewer.user_id is None or READ not in viewer.scopes:
        return ModelRow.id.is_(None)  # nothing
    return or_(ModelRow.owner_id == viewer.user_id, ModelRow.task.in_(viewer.owned_tasks))
