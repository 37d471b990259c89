"""Machine translation: sacrebleu's numbers on every surface, the output-type rules, the
shipped task and its data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from configs.paths import CONFIG_DIR
from configs.schema import ConfigError
from configs.vocabulary.examples import Prediction
from configs.vocabulary.results import ScoreKey
from evaluator.inputs.datasets import DatasetError, load_examples, parse_lines
from evaluator.scoring.variants import gold_of, performance_score, secondary_scores
from evaluator.tasks import load_tasks
from metrics.bootstrap import resample_indices
from metrics.collection import is_fooled
from metrics.metric import get_metric
from metrics.outputs import agreement, get_output_type
from metrics.paired import paired_metric_replicates
from metrics.translation import bleu_metric, chrf_metric, corpus_replicates

GOLD = [
    ("The cat sat on the mat.", "A cat sat on the mat."),
    ("He bought two books.",),
    ("It is raining today.", "Today it rains.", "It rains today."),
    ("Nora went to school on foot.",),
]
PRED = ["The cat sat on a mat.", "He buys two books.", "Today it is raining.", "Nora walked."]


def streams() -> list[list[str | None]]:
    return [[g[i] if i < len(g) else None for g in GOLD] for i in range(3)]


def test_bleu_and_chrf_equal_sacrebleu_run_directly_with_uneven_references() -> None:
    bleu = sacrebleu.corpus_bleu(PRED, streams(), tokenize="13a").score
    chrf = sacrebleu.corpus_chrf(PRED, streams(), word_order=2).score
    assert get_metric("bleu").score(GOLD, PRED, ()) == pytest.approx(bleu, abs=1e-9)
    assert get_metric("chrf").score(GOLD, PRED, ()) == pytest.approx(chrf, abs=1e-9)
    assert 0 < bleu < 100 and 0 < chrf < 100


@pytest.mark.parametrize("factory", [bleu_metric, chrf_metric])
def test_every_replicate_is_sacrebleus_corpus_score_of_its_resample(factory) -> None:
    replicates = corpus_replicates(factory, GOLD, PRED, 6, seed=3)
    rows = np.concatenate(list(resample_indices(len(PRED), 6, 3)))
    for value, row in zip(replicates, rows, strict=True):
        refs = [[GOLD[i][k] if k < len(GOLD[i]) else None for i in row] for k in range(3)]
        direct = factory().corpus_score([PRED[i] for i in row], refs).score
        assert value == pytest.approx(direct, abs=1e-9)


def test_intervals_hold_the_point_and_are_seeded() -> None:
    chrf = get_metric("chrf")
    first = chrf.interval(GOLD, PRED, (), n_resamples=200, seed=1)
    again = chrf.interval(GOLD, PRED, (), n_resamples=200, seed=1)
    assert first == again
    assert first.low <= chrf.score(GOLD, PRED, ()) <= first.high


def test_agreement_is_chrf_against_the_models_own_output() -> None:
    original = ["Heute liest sie ein Buch.", "Er hat zwei Freunde."]
    perturbed = ["Heute liest sie ein Buch.", "Er hat drei Freunde."]
    direct = sacrebleu.corpus_chrf(perturbed, [original], word_order=2).score
    assert agreement("translation", original, perturbed) == pytest.approx(direct)
    assert agreement("translation", original, original) == pytest.approx(100.0)
    assert agreement("translation", [], []) is None


def test_a_translation_fools_when_its_chrf_is_below_the_threshold() -> None:
    intended = {
        "translatedText": "Heute liest sie ein Buch.",
        "references": ["Sie liest heute ein Buch."],
    }
    good = {"translatedText": "Sie liest heute ein Buch."}
    bad = {"translatedText": "Today she reads a book."}
    assert not is_fooled("translation", intended, good, key="translatedText")
    assert is_fooled("translation", intended, bad, key="translatedText")
    assert is_fooled("translation", intended, Prediction("x", "Sie liest"), 99.0, "translatedText")


def test_paired_replicates_share_resamples_and_match_the_corpus_scores() -> None:
    baseline = [g[0] for g in GOLD]
    point_c, point_b, reps_c, reps_b = paired_metric_replicates(
        "chrf", GOLD, PRED, baseline, (), n_resamples=50, seed=4
    )
    assert point_c == pytest.approx(get_metric("chrf").score(GOLD, PRED, ()))
    assert point_b == pytest.approx(100.0)
    assert reps_c.shape == reps_b.shape == (50,) and np.all(reps_b == pytest.approx(100.0))
    same = paired_metric_replicates("bleu", GOLD, PRED, PRED, (), n_resamples=20, seed=4)
    assert np.array_equal(same[2], same[3])


# -- the shipped task --------------------------------------------------------------------
def test_the_shipped_translation_task_has_three_directions_and_several_references() -> None:
    task = load_tasks()["translation"]
    assert task.output_type == "translation" and task.output_key == "translatedText"
    assert task.input_fields == ("sourceText", "sourceLanguage", "targetLanguage")
    assert [r.name for r in task.rounds] == ["r1", "r2"]
    for spec in task.rounds:
        examples = load_examples(task, spec.datasets[0], CONFIG_DIR)
        assert len(examples) >= 80
        assert {e.slices["direction"] for e in examples} == {"en-de", "en-fr", "en-es"}
        assert any(e.references for e in examples)
        assert all(
            isinstance(g, tuple) and g[0] == e.target
            for g, e in zip(gold_of(task, examples), examples, strict=True)
        )


def test_bleu_is_reported_beside_chrf_with_its_interval() -> None:
    task = load_tasks()["translation"]
    examples = load_examples(task, task.rounds[0].datasets[0], CONFIG_DIR)
    predictions = [Prediction(e.uid, e.inputs["sourceText"]) for e in examples]
    key = ScoreKey(task.name, "r1", "test", "h")
    own = performance_score(task, key, examples, predictions)
    (bleu,) = secondary_scores(task, key, examples, predictions)
    assert own.key.metric == "chrf" and bleu.key.metric == "bleu"
    gold = gold_of(task, examples)
    width = max(len(g) for g in gold)
    direct = sacrebleu.corpus_bleu(
        [p.output for p in predictions],
        [[g[i] if i < len(g) else None for g in gold] for i in range(width)],
    ).score
    assert bleu.value == pytest.approx(direct)
    assert bleu.ci_low is not None and bleu.ci_low <= bleu.value <= bleu.ci_high


def test_rows_with_bad_references_are_refused_with_the_line() -> None:
    task = load_tasks()["translation"]
    row = {
        "uid": "a",
        "sourceText": "Hi.",
        "sourceLanguage": "eng_Latn",
        "targetLanguage": "deu_Latn",
        "direction": "en-de",
        "gender": "male",
        "translatedText": "Hallo.",
    }
    assert parse_lines(task, [json.dumps(row)], "x")[0].references == ()
    for bad, message in (
        ({"references": "Hallo."}, "list of strings"),
        ({"references": [""]}, "empty"),
        ({"translatedText": 3}, "translatedText"),
    ):
        with pytest.raises(DatasetError, match=message):
            parse_lines(task, [json.dumps({**row, **bad})], "x")


def test_output_types_declare_their_own_spec_keys(tmp_path: Path) -> None:
    from tests.conftest import make_config_dir
    from tests.unit.test_config import base_task, load_error, write_task

    config_dir = make_config_dir(tmp_path / "c")
    raw = base_task()
    raw["output"] = {"type": "translation", "labels": ["a", "b"]}
    write_task(config_dir, raw)
    assert "output.labels" in str(load_error(config_dir))
    raw["output"] = {"type": "translation", "key": "not a field"}
    write_task(config_dir, raw)
    assert "output.key" in str(load_error(config_dir))
    raw["output"] = {"type": "label", "labels": ["yes", "no", "maybe"], "key": "verdict"}
    write_task(config_dir, raw)
    assert "output.key" in str(load_error(config_dir))
    assert get_output_type("translation").renamable and not get_output_type("label").renamable
    with pytest.raises(ConfigError):
        raw["output"] = {"type": "transl"}
        write_task(config_dir, raw)
        load_tasks(config_dir / "tasks")


def test_the_sdk_gives_dynabenchs_round_keys_for_both_translation_metrics() -> None:
    from client.sdk import dynabench_round_keys

    def score(rnd: str, dataset: str, metric: str, value: float, **key: str) -> dict:
        return {"round": rnd, "dataset": dataset, "variant": "original", "slice": "",
                "metric": metric, "value": value, **key}  # fmt: skip

    results = {
        "metric": "chrf",
        "rounds": [{"round": "r1", "performance": 60.0}, {"round": "r2", "performance": 50.0}],
        "scores": [
            score("r1", "test", "chrf", 60.0),
            score("r1", "test", "bleu", 30.0),
            score("r1", "extra", "bleu", 20.0),  # a round's sets average, as performance does
            score("r2", "test", "bleu", 10.0),
            score("r2", "test", "bleu", 99.0, variant="typo"),  # perturbed: not the round's
            score("r2", "test", "bleu", 99.0, slice="direction=en-de"),
        ],
    }
    assert dynabench_round_keys(results) == {
        "round1_chrf": 60.0,
        "round1_bleu": 25.0,
        "round2_chrf": 50.0,
        "round2_bleu": 10.0,
    }


MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.mark.slow
def test_the_example_models_rank_and_the_dynalab2_translator_scores_like_its_v1_twin(
    tmp_path: Path,
) -> None:
    """Copy < dictionary on every round; the Dynalab 2.0 app, in Dynabench's dialect and
    FLORES field names, gives the v1 dictionary model's exact scores."""
    import sys

    from evaluator.pipeline import run_evaluation
    from evaluator.runtimes.process import ProcessRuntime
    from store.blobs import LocalBlobStore
    from tests.unit.test_dynalab_single import quick_profile

    task = quick_profile(load_tasks()["translation"])  # it compares scores, not speeds
    blobs = LocalBlobStore(tmp_path / "blobs")
    serve = 'exec "$0" -m uvicorn app.main:app --host 127.0.0.1 --port "$PORT" --log-level warning'
    runtimes = {
        "copy": ProcessRuntime([sys.executable, str(MODELS / "translation_copy" / "model.py")]),
        "dictionary": ProcessRuntime(
            [sys.executable, str(MODELS / "translation_dictionary" / "model.py")]
        ),
        "dynalab2": ProcessRuntime(
            ["sh", "-c", serve, sys.executable],
            protocol="dynalab2",
            cwd=MODELS / "dynalab2_translation",
        ),
    }
    results = {name: run_evaluation(task, runtime, blobs) for name, runtime in runtimes.items()}
    assert {name: r.failure for name, r in results.items()} == dict.fromkeys(runtimes)
    rounds = {
        name: {row["round"]: row["performance"] for row in r.rounds} for name, r in results.items()
    }
    assert all(rounds["copy"][k] < rounds["dictionary"][k] for k in ("r1", "r2"))
    values = [{s.key: s.value for s in results[n].scores} for n in ("dictionary", "dynalab2")]
    assert values[0] == values[1]
    metrics = {s.key.metric for s in results["dictionary"].scores}
    assert {"chrf", "bleu", "agreement"} <= metrics
    summary = results["dictionary"].summary
    bleu_by_round = [row["secondary"]["bleu"] for row in results["dictionary"].rounds]
    assert summary["secondary"]["bleu"] == pytest.approx(sum(bleu_by_round) / 2)
    low, high = summary["secondary_ci"]["bleu"]
    assert low <= summary["secondary"]["bleu"] <= high
