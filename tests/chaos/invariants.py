"""The chaos run's invariants, checked over the database, the event logs and the processes,
and the report of a failure.

After every worker is stopped with SIGTERM: every job done, with exactly one result and a
full set of scores; nothing queued or running; no failure the submitter is charged for (only
``worker_lost``/``platform_error`` on attempts, and ``charged_usage`` counts exactly the done
submissions); every attempt closed and the done one the last; no process wrote to a job
after another process had claimed it since (from the workers' event logs); workers exit only
when told; no model process outlives the workers. The ``process`` runtime starts no
containers, so there are none to leak.

On failure the message holds the broken invariants with their evidence, a table of the bad
jobs, the chaos timeline and the tails of the worker logs (all files stay in ``tmp_path``).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

import psutil
from sqlalchemy import select

from configs.vocabulary.failures import FailureCode
from store.models import AttemptRow, JobRow, ModelRow, ResultRow, ScoreRow
from store.quotas import charged_usage
from tests.chaos.harness import Event, log_tail, model_processes, parent_pid, read_events
from tests.chaos.plan import ChaosRun, Stop
from tests.chaos.scenario import LEASE_S, TASK

PLATFORM_CODES = {FailureCode.WORKER_LOST.value, FailureCode.PLATFORM_ERROR.value}


def leftover_models(run: ChaosRun) -> list[str]:
    deadline = time.monotonic() + 5.0  # the kernel's parent-death signal is asynchronous
    while True:
        left = model_processes(run.marker)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return [
        f"pid {p.pid} ppid {parent_pid(p)}, started at {_started(p) - run.wall0:.2f}s "
        f"(the kills before it: {kills_before(run, _started(p))}): "
        f"{' '.join(_cmdline(p))[:160]}"
        for p in left
    ]


def kills_before(run: ChaosRun, when: float) -> str:
    """The last kills before wall time ``when``, on the timeline's clock."""
    near = [(t, slot, job) for t, slot, job in run.kills if t <= when + 1.0][-2:]
    return (
        "; ".join(f"{slot} at {t - run.wall0:.2f}s holding {job}" for t, slot, job in near)
        or "none"
    )


def check(run: ChaosRun) -> tuple[list[str], list[str], set[str]]:
    """(broken invariants with evidence, informational lines, ids of the bad jobs)."""
    broken: list[str] = []
    info: list[str] = []
    bad: set[str] = set()
    with run.db.session() as session:
        jobs = session.scalars(select(JobRow)).all()
        attempts = session.scalars(select(AttemptRow)).all()
        results = Counter(session.scalars(select(ResultRow.job_id)).all())
        scores = Counter(session.scalars(select(ScoreRow.job_id)).all())
        models = session.execute(select(ModelRow.id, ModelRow.owner_id)).all()
    by_job: dict[str, list[AttemptRow]] = defaultdict(list)
    for attempt in attempts:
        by_job[attempt.job_id].append(attempt)

    statuses = Counter(job.status for job in jobs)
    info.append(f"job statuses: {dict(statuses)}")
    if len(jobs) != run.s.jobs:
        broken.append(f"{len(jobs)} jobs in the store, {run.s.jobs} submitted")
    not_done = [job for job in jobs if job.status != "done"]
    if not_done:
        bad |= {job.id for job in not_done}
        broken.append(
            f"every job done: {len(not_done)} are not: "
            + ", ".join(f"{j.id[:8]}={j.status}/{j.failure_code}" for j in not_done[:12])
        )
    stuck = [job for job in jobs if job.status in ("queued", "running")]
    if stuck:
        broken.append(f"nothing stuck: {len(stuck)} jobs still queued or running")

    done = [job for job in jobs if job.status == "done"]
    expected_scores = Counter(scores[job.id] for job in done).most_common(1)
    full = expected_scores[0][0] if expected_scores else 0
    info.append(f"scores per done job: {dict(Counter(scores[job.id] for job in done))}")
    wrong = [job.id for job in done if results[job.id] != 1 or scores[job.id] != full]
    wrong += [job_id for job_id, n in results.items() if n > 1]
    if full == 0 and done:
        broken.append("results: done jobs have no scores at all")
    if wrong:
        bad |= set(wrong)
        broken.append(
            f"exactly one result and {full} scores per done job: {len(wrong)} differ: "
            + ", ".join(f"{j[:8]}(results {results[j]}, scores {scores[j]})" for j in wrong[:12])
        )

    user_failed = [j for j in jobs if j.status == "failed" and _user_caused(j.failure_code)]
    if user_failed:
        bad |= {job.id for job in user_failed}
        broken.append(
            "no failure charged to the submitter: "
            + ", ".join(f"{j.id[:8]}={j.failure_code}" for j in user_failed[:12])
        )
    codes = Counter(a.failure_code for a in attempts if a.failure_code)
    outcomes = Counter(a.outcome for a in attempts)
    info.append(f"attempt outcomes: {dict(outcomes)}; failure codes: {dict(codes)}")
    foreign = {code for code in codes if code not in PLATFORM_CODES}
    if foreign:
        offenders = [a for a in attempts if a.failure_code in foreign]
        bad |= {a.job_id for a in offenders}
        broken.append(
            f"attempts fail only with worker_lost/platform_error: also {sorted(foreign)}: "
            + ", ".join(f"{a.job_id[:8]}#{a.attempt}" for a in offenders[:12])
        )

    open_attempts = [a for a in attempts if a.finished_at is None or a.outcome is None]
    if open_attempts:
        bad |= {a.job_id for a in open_attempts}
        broken.append(
            f"every attempt closed: {len(open_attempts)} open: "
            + ", ".join(f"{a.job_id[:8]}#{a.attempt}({a.worker})" for a in open_attempts[:12])
        )
    misattributed = []
    for job in done:
        rows = by_job.get(job.id, [])
        done_rows = [a for a in rows if a.outcome == "done"]
        last = max((a.attempt for a in rows), default=None)
        if len(done_rows) != 1 or done_rows[0].attempt != last:
            misattributed.append(job.id)
    if misattributed:
        bad |= set(misattributed)
        broken.append(
            "exactly one done attempt per done job, and it is the last: "
            f"{len(misattributed)} jobs differ: " + ", ".join(j[:8] for j in misattributed[:12])
        )
    per_job = Counter(len(by_job.get(job.id, [])) for job in jobs)
    info.append(f"attempts per job: {dict(sorted(per_job.items()))}")
    if run.s.keeps_results:
        broken.extend(results_kept(jobs, by_job))

    status_of = {job.model_id: job.status for job in jobs}
    for owner in run.owners:
        mine = [model_id for model_id, owner_id in models if owner_id == owner]
        live_or_done = [m for m in mine if status_of.get(m) in ("queued", "running", "done")]
        usage = charged_usage(run.db, owner, TASK, datetime(2000, 1, 1))
        if usage.total != len(live_or_done):
            broken.append(
                f"charged_usage of owner {owner[:8]}: {usage.total} charged, "
                f"{len(live_or_done)} of its {len(mine)} submissions live or done"
            )

    events = [event for slot in run.slots for event in read_events(slot.events_path)]
    stale = stale_writes(events, run.wall0)
    if stale:
        bad |= {line.split()[1] for line in stale}
        broken.append(
            f"one holder at a time: {len(stale)} writes by a process after another had "
            "claimed the job since:\n    " + "\n    ".join(stale[:12])
        )
    info.append(
        f"events: {dict(Counter(e.kind for e in events))}; worker processes started: "
        f"{sum(slot.starts for slot in run.slots)}"
    )
    for stop in run.stops:
        info.append(stop_evidence(run, stop, events, broken))
    if run.s.stops and not run.stops:
        broken.append("graceful stop: no SIGTERM was sent while running")
    if run.s.keeps_results:
        held = {e.job for e in events if e.kind in ("finish", "finish_late") and e.error}
        info.append(f"finished results held through the outage and stored after: {len(held)}")
        if not held:
            broken.append("the outage caught no worker holding a finished result (not exercised)")
    info.append(recovery_latency(run, list(attempts)))
    info.append(log_noise(run))

    left = leftover_models(run)
    if left:
        broken.append(
            f"no model process left: {len(left)} remain:\n    " + "\n    ".join(left[:12])
        )
    broken.extend(f"while running: {text}" for text in run.findings)
    return broken, info, bad


def results_kept(jobs: list[JobRow], by_job: dict[str, list[AttemptRow]]) -> list[str]:
    """No worker died, so no finished evaluation may be lost: every job ran exactly once,
    and no attempt is left lost (a held result recorded late turns its attempt done)."""
    rerun = [job.id for job in jobs if len(by_job.get(job.id, [])) != 1]
    lost = [a for rows in by_job.values() for a in rows if a.outcome == "lost"]
    broken = []
    if rerun:
        broken.append(
            f"no finished result lost: {len(rerun)} jobs ran more than once: "
            + ", ".join(j[:8] for j in rerun[:12])
        )
    if lost:
        broken.append(
            f"no attempt lost while its worker lived: {len(lost)}: "
            + ", ".join(f"{a.job_id[:8]}#{a.attempt}({a.worker})" for a in lost[:12])
        )
    return broken


def stop_evidence(run: ChaosRun, stop: Stop, events: list[Event], broken: list[str]) -> str:
    """A SIGTERM'd worker exited 0 (checked by ``reap``) and left no job to its lease:
    what it held at the signal, and whatever it claimed afterwards, it finished, failed
    or handed back."""
    mine = [e for e in events if e.pid == stop.pid]
    held = {stop.job} if stop.job else set()
    for event in mine:
        if event.t >= stop.at and event.kind == "claim":
            if isinstance(event.answer, dict):
                held.add(event.answer["id"])
        elif event.kind in ("finish", "fail", "release") and event.wrote:
            held.discard(event.job)
    calls = [e for e in mine if e.job == stop.job and e.kind != "heartbeat"]
    line = f"{stop.kind}: pid {stop.pid} held {stop.job}; its calls for it: " + ", ".join(
        f"{e.kind}->{e.answer if e.error is None else e.error}" for e in calls
    )
    if held:
        broken.append(
            f"graceful stop ({stop.kind}): pid {stop.pid} left jobs to their lease: "
            + ", ".join(sorted(held))
        )
    if not any(e.kind == "exit" for e in mine):
        broken.append(f"graceful stop ({stop.kind}): pid {stop.pid} never exited cleanly")
    return line


def recovery_latency(run: ChaosRun, attempts: list[AttemptRow]) -> str:
    """Seconds from each kill of a busy worker until the store closed the killed attempt
    (the job queued again): a lease's length when recovery waits for expiry, about a
    restart when the restarted worker settles its predecessor's job at once."""
    waits = []
    for killed_at, _slot, job in run.kills:
        if job is None:
            continue
        when = datetime.fromtimestamp(killed_at, UTC).replace(tzinfo=None)
        closed = [
            (a.finished_at - when).total_seconds()
            for a in attempts
            if a.job_id == job and a.started_at <= when and a.finished_at is not None
        ]
        if closed:
            waits.append(max(0.0, min(closed)))
    if not waits:
        return "recovery after a kill: no killed worker held a job"
    return (
        f"recovery after a kill (attempt closed): {len(waits)} jobs, median "
        f"{statistics.median(waits):.1f} s, max {max(waits):.1f} s (lease {LEASE_S:.0f} s)"
    )


def log_noise(run: ChaosRun) -> str:
    lines = tracebacks = 0
    for slot in run.slots:
        if slot.log_path.exists():
            text = slot.log_path.read_text(encoding="utf-8", errors="replace")
            lines += text.count("\n")
            tracebacks += text.count("Traceback")
    return f"worker logs: {lines} lines, {tracebacks} tracebacks"


def diagnosis(run: ChaosRun, bad: set[str]) -> str:
    parts = ["", "bad jobs (id, status, attempts/max, failure, stage | attempts):"]
    with run.db.session() as session:
        for job_id in sorted(bad)[:25]:
            job = session.get(JobRow, job_id)
            if job is None:
                continue
            tries = session.scalars(
                select(AttemptRow)
                .where(AttemptRow.job_id == job_id)
                .order_by(AttemptRow.attempt, AttemptRow.id)
            ).all()
            shown = "; ".join(
                f"#{a.attempt} {a.worker} {a.outcome} {a.failure_code or ''}".strip() for a in tries
            )
            parts.append(
                f"  {job.id[:8]} {job.status:8} {job.attempts}/{job.max_attempts} "
                f"{job.failure_code or '-'} {job.stage[:40]!r} | {shown}"
            )
    parts.append("timeline:")
    parts.extend(f"  {line}" for line in run.timeline)
    for slot in run.slots:
        parts.append(f"log tail of {slot.name} ({slot.log_path}):")
        parts.append(log_tail(slot.log_path, 25))
    return "\n".join(parts)


# -- the event logs --------------------------------------------------------------------------
def stale_writes(events: list[Event], wall0: float = 0.0) -> list[str]:
    """Writes that took effect for a process although another process had claimed the job
    after this one's claim and before the write began (its lease was someone else's by then).
    Times are wall clock on one host; a write counts only if it *began* after the other
    claim had *returned*, so scheduling delays cannot produce a false alarm."""
    claims: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        if event.kind == "claim" and isinstance(event.answer, dict) and "id" in event.answer:
            claims[event.answer["id"]].append(event)
    found = []
    for event in events:
        if not event.wrote or event.job is None:
            continue
        theirs = claims.get(event.job, [])
        mine = [c for c in theirs if c.pid == event.pid and c.t <= event.t0]
        if not mine:
            continue
        held_since = max(c.t for c in mine)
        later = [c for c in theirs if c.pid != event.pid and held_since < c.t < event.t0]
        if later:
            other = later[0]
            found.append(
                f"job {event.job} {event.kind} by pid {event.pid} (slot {event.slot}, claim "
                f"#{_attempt(mine[-1])}) at {event.t0 - wall0:.2f}s, after pid {other.pid} "
                f"(slot {other.slot}) claimed #{_attempt(other)} at {other.t - wall0:.2f}s"
            )
    return found


def _attempt(claim: Event) -> Any:
    return claim.answer.get("attempt") if isinstance(claim.answer, dict) else None


# -- processes -------------------------------------------------------------------------------
def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _started(process: psutil.Process) -> float:
    try:
        return float(process.create_time())
    except psutil.Error:
        return 0.0


def _user_caused(code: str | None) -> bool:
    if code is None:
        return False
    try:
        return FailureCode(code).user_caused
    except ValueError:
        return False
