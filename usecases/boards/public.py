"""A model's public results: what the model page and the scores download show.

Built from the API's submission query (``store.queries``), keeping only what anyone may
see of a scored model: its name, task, runtime kind/protocol/image, image digest, results
and scores. Job failures and log tails are left for the owner's view; a model without
results has no public page.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from configs.vocabulary.results import POOLED
from usecases.service import Service

SCORE_COLUMNS = (
    "round",
    "dataset",
    "dataset_hash",
    "variant",
    "variant_version",
    "seed",
    "slice",
    "metric",
    "value",
    "n",
    "ci_low",
    "ci_high",
)
PROVENANCE_RUNTIME = ("kind", "protocol", "image", "image_id", "source")


def model_results(service: Service, model_id: str) -> dict[str, Any] | None:
    """The public part of a scored submission, or None (unknown or not scored)."""
    found = service.queries.submission(model_id, with_scores=True)
    if found is None or not found.get("results"):
        return None
    results = dict(found["results"])
    provenance = dict(results.get("provenance") or {})
    runtime = provenance.get("runtime") or {}
    provenance["runtime"] = {k: runtime[k] for k in PROVENANCE_RUNTIME if runtime.get(k)}
    results["provenance"] = provenance
    scores = sorted(
        found.get("scores") or [],
        key=lambda s: tuple(
            str(s.get(k, "")) for k in ("round", "dataset", "variant", "slice", "metric")
        ),
    )
    return {
        "id": found["id"],
        "task": found["task"],
        "name": found["name"],
        "created_at": found["created_at"],
        "runtime": found.get("runtime") or {},
        "image_id": found.get("image_id") or runtime.get("image_id"),
        "results": results,
        "scores": scores,
    }


def model_view(model: dict[str, Any]) -> dict[str, Any]:
    """Tables the model page draws: robustness and fairness per perturbation and round."""
    results = model["results"]
    rounds = results.get("rounds") or []
    variants = sorted({name for r in rounds for name in (r.get("variants") or {})})
    per_variant = [
        {
            "variant": name,
            "by_round": {
                r["round"]: {
                    "agreement": (r.get("variants") or {}).get(name),
                    "performance": (r.get("variant_performance") or {}).get(name),
                }
                for r in rounds
            },
        }
        for name in variants
    ]
    versions = {}
    for item in results.get("provenance", {}).get("perturbations") or []:
        versions[item.get("variant")] = (item.get("version"), item.get("seed"))
    pooled = {
        axis: {r["round"]: r.get(axis) for r in rounds} for axis in ("robustness", "fairness")
    }
    return {
        "rounds": [r["round"] for r in rounds],
        "variants": per_variant,
        "versions": versions,
        "pooled": pooled,
        "pooled_prefix": POOLED,
    }


def scores_csv(model: dict[str, Any]) -> str:
    """Every score of a model, one row per full key."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["model_id", "task", *SCORE_COLUMNS])
    for score in model["scores"]:
        writer.writerow([model["id"], model["task"], *(_cell(score.get(k)) for k in SCORE_COLUMNS)])
    return out.getvalue()


def _cell(value: Any) -> Any:
    return "" if value is None else value
