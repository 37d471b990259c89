"""spBLEU with an operator's SentencePiece model: equal to sacrebleu's own flores200 BLEU
with the same model, reported beside chrF++ and BLEU only while a model is installed, and a
clear refusal without one. The model is trained here on the shipped sentences (nothing is
downloaded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sacrebleu

from configs.paths import CONFIG_DIR
from evaluator.scoring import spbleu
from metrics.metric import get_metric
from metrics.outputs import get_output_type
from metrics.translation import SpBleuUnavailable

GOLD = [
    ("Heute liest Nora ein Buch.", "Nora liest heute ein Buch."),
    ("Er hat zwei Freunde.",),
    ("Le livre est sur la table.", "Le livre se trouve sur la table."),
]
PRED = ["Nora liest ein Buch heute.", "Er hat drei Freunde.", "Le livre est sur une table."]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import sentencepiece

    folder = tmp_path_factory.mktemp("spm")
    lines = []
    for rnd in ("r1", "r2"):
        for line in (
            (CONFIG_DIR / "datasets" / "translation" / f"{rnd}.jsonl").read_text().splitlines()
        ):
            row = json.loads(line)
            lines += [row["sourceText"], row["translatedText"], *row["references"]]
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(folder / "flores200sacrebleuspm"), vocab_size=200,
        character_coverage=1.0, minloglevel=2,
    )  # fmt: skip
    return folder / "flores200sacrebleuspm.model"


@pytest.fixture
def installed(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(spbleu.SETTING, str(model_file))
    digest = spbleu.install_from_environment()
    assert digest is not None
    yield digest
    spbleu.install(None)


def test_spbleu_equals_sacrebleus_flores200_bleu_with_the_same_model(
    installed: str, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sacrebleu.tokenizers.tokenizer_spm as spm

    # sacrebleu looks for the flores200 model in its own folder, and finds ours there
    (model_file.parent / "models").mkdir(exist_ok=True)
    (model_file.parent / "models" / "flores200sacrebleuspm").write_bytes(model_file.read_bytes())
    monkeypatch.setattr(spm, "SACREBLEU_DIR", str(model_file.parent))
    streams = [[g[i] if i < len(g) else None for g in GOLD] for i in range(2)]
    direct = sacrebleu.corpus_bleu(PRED, streams, tokenize="flores200").score
    ours = get_metric("spbleu").score(GOLD, PRED, ())
    assert ours == pytest.approx(direct, abs=1e-9)
    assert ours != pytest.approx(get_metric("bleu").score(GOLD, PRED, ()), abs=1e-6)


def test_it_is_reported_beside_chrf_and_bleu_only_while_installed(installed: str) -> None:
    translation = get_output_type("translation")
    assert translation.secondary_metrics("chrf") == ("bleu", "spbleu")
    interval = get_metric("spbleu").interval(GOLD, PRED, (), n_resamples=100, seed=1)
    assert interval.low <= get_metric("spbleu").score(GOLD, PRED, ()) <= interval.high
    spbleu.install(None)
    assert translation.secondary_metrics("chrf") == ("bleu",)
    with pytest.raises(SpBleuUnavailable, match="DYNAEVAL_SPBLEU_MODEL"):
        get_metric("spbleu").score(GOLD, PRED, ())


def test_a_setting_that_names_no_model_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(spbleu.SETTING, str(tmp_path / "missing.model"))
    with pytest.raises(spbleu.SpBleuModelError, match="cannot read it"):
        spbleu.install_from_environment()
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    monkeypatch.setenv(spbleu.SETTING, str(junk))
    with pytest.raises(spbleu.SpBleuModelError, match="not a SentencePiece model"):
        spbleu.install_from_environment()
    monkeypatch.delenv(spbleu.SETTING)
    assert spbleu.install_from_environment() is None


def test_a_results_provenance_names_the_model_spbleu_used(installed: str, tmp_path: Path) -> None:
    from evaluator.pipeline import Evaluation
    from evaluator.runtimes.process import ProcessRuntime
    from evaluator.tasks import load_tasks
    from store.blobs import LocalBlobStore

    tasks = load_tasks()
    blobs = LocalBlobStore(tmp_path / "blobs")
    runtime = ProcessRuntime(["true"])
    translation = Evaluation(tasks["translation"], runtime, blobs)
    assert translation.spbleu_provenance() == {"spbleu_model_sha256": installed}
    assert Evaluation(tasks["sentiment"], runtime, blobs).spbleu_provenance() == {}
    spbleu.install(None)
    assert translation.spbleu_provenance() == {}
