"""One adversary run: the search of evaluator.adversary against a round's target models,
with its progress stored after every source example (store.adversary).

The models run as live models do, in the scoring sandbox, one example per query, started
through the worker's own runtime factory. The sources are the task's held-out examples of
every round but the one being collected, in the task's order. A retry resumes from the
stored checkpoint; what the search finds joins the round's validation queue at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from configs.schema import TaskSpec
from configs.vocabulary.examples import Example, Prediction
from configs.vocabulary.jobs import AdversaryCheckpoint, AdversaryRun, Seed, UnreadableSpec
from configs.vocabulary.results import EvaluationResult
from configs.vocabulary.runtimes import StoredRuntime
from evaluator.adversary import FIRST_SOURCE, AdversarySettings, Proposal, adversary_search
from evaluator.collection import LiveModel, LivePool, pinned_spec, start_ready
from evaluator.runtimes.runtime import Runtime
from evaluator.runtimes.specs import parse_runtime_spec
from evaluator.transport.client import ModelClient
from metrics.outputs import get_output_type
from store.adversary import AdversaryRuns, MachineProposal
from store.collection import Collection
from store.jobs import ClaimedJob
from store.models import ModelRow
from worker.evaluation import JobContext
from worker.outcomes import platform_failure
from worker.progress import LeaseLost, Progress


def run_adversary(context: JobContext, job: ClaimedJob, progress: Progress) -> EvaluationResult:
    """Run (or resume) the adversary job ``job``; its outcome is in its checkpoint."""
    task = context.tasks.get(job.task)
    run = job.spec
    if task is None:
        return platform_failure(job.task, f"task {job.task!r} is not loaded")
    if not isinstance(run, AdversaryRun):
        reason = run.reason if isinstance(run, UnreadableSpec) else "its spec names no attack"
        return platform_failure(job.task, f"the adversary run cannot start: {reason}")
    settings = AdversarySettings.from_dict(run.attack)
    round_name = run.round
    models = _live_models(context, run.models)
    sources = _sources(context, task, round_name, run.seeds)
    runs = AdversaryRuns(context.store.db, context.store.clock)
    start = job.checkpoint or FIRST_SOURCE
    pool = LivePool(
        context.blobs,
        budget=max(1, len(models)),
        idle_s=float(task.limits.total_s),
        clock=context.store.clock,
        start_runtime=_starter(context, job),
        timeout_s=float(task.limits.request_s),
    )

    def query(model_id: str, inputs: Mapping[str, str]) -> Prediction:
        if progress.lost.is_set():  # handed back or lost: stop before the next query
            raise LeaseLost("the job's lease was lost or handed back; this run must stop")
        return pool.answer(models[model_id], task, inputs)

    def saved(checkpoint: AdversaryCheckpoint, found: list[Proposal]) -> None:
        shown = [_machine(task, p) for p in found]
        if not runs.save_progress(job.id, context.worker_id, job.lease, checkpoint, shown):
            raise LeaseLost("the job's lease was lost; its progress is kept up to the last source")
        fraction = checkpoint.queries_used / max(1, settings.max_queries)
        progress.update(min(0.99, fraction), f"{checkpoint.proposals} proposals so far")

    try:
        report = adversary_search(task, sources, list(models), query, settings, start=start,
                        on_source_done=saved)  # fmt: skip
    finally:
        pool.close()
    final = replace(report.checkpoint, stopped_because=report.stopped_because)
    if not runs.save_progress(job.id, context.worker_id, job.lease, final, []):
        raise LeaseLost("the job's lease was lost before its end was recorded")
    return EvaluationResult(task.name, "done", summary={"adversary": final.to_dict()})


def _live_models(context: JobContext, model_ids: Sequence[str]) -> dict[str, LiveModel]:
    with context.store.db.session() as session:
        rows = [session.get(ModelRow, model_id) for model_id in model_ids]
    return {
        row.id: LiveModel(row.id, StoredRuntime(**row.runtime), row.image_id)
        for row in rows
        if row is not None
    }


def _sources(
    context: JobContext, task: TaskSpec, round_name: str, seeds: Sequence[Seed]
) -> list[Example]:
    """The owner's seeds, then the round's written examples (oldest first): never a
    held-out row, since validators see every proposal and a freeze publishes them."""
    written = Collection(context.store.db).written_examples(task.name, round_name)
    rows = [(f"seed-{k}", s.inputs, s.intended) for k, s in enumerate(seeds)]
    rows += [(e.id, e.inputs, e.intended) for e in written]
    return [_as_example(task, uid, inputs, intended) for uid, inputs, intended in rows]


def _as_example(
    task: TaskSpec, uid: str, inputs: Mapping[str, Any], intended: Mapping[str, Any]
) -> Example:
    fields_ = {name: str(inputs[name]) for name in task.input_fields}
    start = intended.get("answer_start")
    gold = get_output_type(task.output_type).written_references(intended, task.output_key)
    return Example(
        uid,
        fields_,
        gold[0],
        answer_start=None if start is None else int(start),
        references=gold[1:],
    )


def _starter(context: JobContext, job: ClaimedJob) -> Any:
    """Start a target as the job's own runtime factory does (the same sandbox as scoring),
    pinned to the image its scores came from."""

    def start(model: LiveModel, task: TaskSpec) -> tuple[Runtime, ModelClient]:
        spec = parse_runtime_spec(pinned_spec(model))
        runtime = context.runtime_factory(spec, task, context.blobs, context.worker_id,
                                          lease=job.lease)  # fmt: skip
        return runtime, start_ready(runtime, task)

    return start


def _machine(task: TaskSpec, proposal: Proposal) -> MachineProposal:
    answers = {m: {task.output_key: output} for m, output in proposal.answers.items()}
    return MachineProposal(
        proposal.source_uid, proposal.inputs, proposal.intended, proposal.fooled_models, answers
    )
