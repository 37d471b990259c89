"""The evaluator beside a null model on the translation and VQA tasks, and the image
perturbations; prints one JSON object with ratios to baselines measured in the same run.

* translation: the shipped round-1 sources cycled; a null model answering ``translatedText``.
* vqa: every example carries a 64 KiB PNG (incompressible pixels, so the bytes really are
  64 KiB) and a question; a null model answering ``answer``. The images travel base64 in
  the batch, as they do to real models.

Each full path (``Evaluation.predict_all``: batching, HTTP, JSON, reply validation, budgets,
then scoring with sacrebleu or VQA accuracy) is compared with a bare keep-alive HTTP loop
posting the same batches to the same model. Image perturbations are timed on the first
materialisation (computed) and the second (read from the cache), against a bare loop that
only decodes and re-encodes each image. Targets (issue #27): >= 5,000 examples/s for each
null model; >= 500 images/s for the perturbations, cached.

    python benchmarks/bench_any_task.py [--examples 20000] [--images 2000]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import bare_http, full_path, model_runtime  # noqa: E402

from configs.paths import CONFIG_DIR  # noqa: E402
from configs.vocabulary.examples import Example  # noqa: E402
from evaluator.inputs.perturbed_sets import dataset_hash, materialise  # noqa: E402
from evaluator.tasks import load_task  # noqa: E402
from perturbations.perturbation import get_perturbation  # noqa: E402
from store.blobs import LocalBlobStore  # noqa: E402

TARGET_EXAMPLES_PER_S = 5000
TARGET_IMAGES_PER_S = 500
IMAGE_BYTES = 64 * 1024


def translation_examples(n: int) -> list[Example]:
    path = CONFIG_DIR / "datasets" / "translation" / "r1.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    fields = ("sourceText", "sourceLanguage", "targetLanguage")
    return [
        Example(
            f"bench-{i:07d}",
            {f: rows[i % len(rows)][f] for f in fields},
            rows[i % len(rows)]["translatedText"],
        )
        for i in range(n)
    ]


def picture(seed: int) -> str:
    """A PNG of about 64 KiB: random pixels, stored without compression."""
    side = int((IMAGE_BYTES / 3) ** 0.5)
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG", compress_level=0)
    return base64.b64encode(out.getvalue()).decode()


def vqa_examples(n: int, distinct: int = 64) -> list[Example]:
    images = [picture(k) for k in range(distinct)]
    return [
        Example(
            f"bench-{i:07d}",
            {"image": images[i % distinct], "question": "What color is the square?"},
            "red",
            references=("red", "red"),
        )
        for i in range(n)
    ]


def null_model_report(task_name: str, key: str, examples: list[Example], blobs) -> dict:  # type: ignore[no-untyped-def]
    task = load_task(CONFIG_DIR / "tasks" / f"{task_name}.yaml")
    args = ("null/model.py", "--key", key, "--answer", "red")
    measured = full_path(task, model_runtime(*args), examples, blobs)
    floor = bare_http(task, model_runtime(*args), examples)
    rate = len(examples) / measured["predict_s"]
    return {
        "examples": len(examples),
        "request_bytes_per_example": len(json.dumps(examples[0].request_instance("w0000000"))),
        "examples_per_s": round(rate),
        "bare_http_examples_per_s": round(len(examples) / floor),
        "full_path_vs_bare_http_time_ratio": round(measured["predict_s"] / floor, 3),
        "scoring_s": round(measured["score_s"], 4),
        "target_examples_per_s": TARGET_EXAMPLES_PER_S,
        "meets_target": rate >= TARGET_EXAMPLES_PER_S,
    }


def bare_recode(examples: list[Example]) -> float:
    """Decode and re-encode each picture as PNG: the floor any image perturbation pays."""
    started = time.perf_counter()
    for example in examples:
        with Image.open(io.BytesIO(base64.b64decode(example.inputs["image"]))) as image:
            out = io.BytesIO()
            image.convert("RGB").save(out, format="PNG", compress_level=1)
        base64.b64encode(out.getvalue())
    return time.perf_counter() - started


def perturbation_report(n: int, blobs) -> dict:  # type: ignore[no-untyped-def]
    examples = vqa_examples(n, distinct=n)
    digest = dataset_hash(examples)
    floor = bare_recode(examples)
    report: dict[str, object] = {
        "images": n,
        "image_bytes": IMAGE_BYTES,
        "bare_recode_images_per_s": round(n / floor),
    }
    for name in ("image-noise", "image-blur", "image-jpeg", "image-brightness"):
        perturbation = get_perturbation(name)
        started = time.perf_counter()
        materialise(examples, digest, perturbation, 0, ["image"], blobs)
        computed = time.perf_counter() - started
        started = time.perf_counter()
        again = materialise(examples, digest, perturbation, 0, ["image"], blobs)
        cached = time.perf_counter() - started
        assert again.from_cache
        report[name] = {
            "computed_images_per_s": round(n / computed),
            "computed_vs_bare_recode_time_ratio": round(computed / floor, 3),
            "cached_images_per_s": round(n / cached),
            "target_images_per_s": TARGET_IMAGES_PER_S,
            "meets_target": n / cached >= TARGET_IMAGES_PER_S,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=20000)
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args()
    blobs = LocalBlobStore(tempfile.mkdtemp(prefix="dynaeval-bench-"))
    report = {
        "translation_null_model": null_model_report(
            "translation", "translatedText", translation_examples(args.examples), blobs
        ),
        "vqa_null_model_64kib_images": null_model_report(
            "vqa", "answer", vqa_examples(args.examples), blobs
        ),
        "image_perturbations": perturbation_report(args.images, blobs),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
