"""Plain-text rendering of results and leaderboards for the terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def ci(pair: Sequence[float | None] | None) -> str:
    if not pair or pair[0] is None:
        return "-"
    return f"[{pair[0]:.1f}, {pair[1]:.1f}]"


def evaluation(result: dict[str, Any]) -> str:
    """A result as a short report: axes, per-round table, perturbation counts, failure."""
    if result["status"] != "done":
        failure = result.get("failure") or {}
        text = f"FAILED {failure.get('code')}: {failure.get('message')}"
        if failure.get("log_tail"):
            text += "\n--- last lines of the model's log ---\n" + failure["log_tail"][-2000:]
        return text
    lines = [
        f"task {result['task']} ({result['metric']}): performance {fmt(result['performance'])} "
        f"{ci(result.get('performance_ci'))}",
        f"robustness {fmt(result['robustness'])}  fairness {fmt(result['fairness'])}  "
        f"throughput {fmt(result['throughput'], 1)} ex/s  memory {fmt(result['memory'], 3)} GiB "
        f"(peak {fmt(result.get('memory_peak'), 3)})",
        "",
        table(
            ["round", "n", "performance", "95% CI", "robustness", "fairness"],
            [
                [
                    r["round"],
                    r["n"],
                    r["performance"],
                    ci(r.get("performance_ci")),
                    r["robustness"],
                    r["fairness"],
                ]
                for r in result["rounds"]
            ],
        ),
    ]
    variants = sorted({name for r in result["rounds"] for name in r.get("variants", {})})
    if variants:
        lines += ["", "agreement with the model's own original predictions, per perturbation:"]
        lines.append(
            table(
                ["round", *variants],
                [[r["round"], *(r["variants"].get(v) for v in variants)] for r in result["rounds"]],
            )
        )
    lines += _slice_lines(result.get("slices") or [])
    return "\n".join(lines)


def _slice_lines(slices: list[dict[str, Any]]) -> list[str]:
    """Per round and slice column: the worst group and the largest gap between groups."""
    if not slices:
        return []
    rows = [
        [s["round"], s["column"], s["worst_group"], s["by_group"].get(s["worst_group"]),
         s["difference"], len(s["by_group"]), ", ".join(s["small_groups"]) or "-"]
        for s in slices
    ]  # fmt: skip
    headers = ["round", "slice", "worst group", "its score", "largest gap", "groups", "small"]
    return ["", "fairness slices (performance per group):", table(headers, rows)]


def submission(found: dict[str, Any]) -> str:
    """A submission in a line or two: status and stage, performance, or the failure."""
    job = found.get("job") or {}
    text = (
        f"submission {found.get('id')} ({found.get('name')} on {found.get('task')}): "
        f"{job.get('status')}"
    )
    if job.get("status") not in ("done", "failed") and job.get("stage"):
        text += f" ({job.get('progress', 0) * 100:.0f}%, {job['stage']})"
    results = found.get("results") or {}
    if job.get("status") == "done" and results:
        text += (
            f"\nperformance {fmt(results.get('performance'))}  "
            f"robustness {fmt(results.get('robustness'))}  "
            f"fairness {fmt(results.get('fairness'))}  "
            f"throughput {fmt(results.get('throughput'), 1)} ex/s  "
            f"memory {fmt(results.get('memory'), 3)} GiB"
        )
    if job.get("failure"):
        text += "\n" + evaluation({"status": "failed", "failure": job["failure"]})
    return text


def comparison(found: dict[str, Any]) -> str:
    """A paired comparison in one line: the difference, its interval and the verdict."""
    low, high = found["ci"]
    verdict = (
        "significant drop"
        if found["significant_drop"]
        else "significant gain"
        if found["significant_gain"]
        else "no significant difference"
    )
    text = (
        f"{found['metric']} vs {found['baseline']}: {found['candidate_performance']:.2f} - "
        f"{found['baseline_performance']:.2f} = {found['difference']:+.2f} "
        f"(95% CI [{low:+.2f}, {high:+.2f}], paired bootstrap over {found['n']} examples, "
        f"{found['n_resamples']} resamples): {verdict}"
    )
    if found.get("not_compared"):
        text += f"\nnot compared (scored on other data): {', '.join(found['not_compared'])}"
    return text


def leaderboard(board: Mapping[str, Any]) -> str:
    rows = [
        [
            m["rank"],
            m["name"],
            m["model_id"][:8],
            m.get("score"),
            m["dynascore"],
            m["performance"],
            m["throughput"],
            m["memory"],
            m["robustness"],
            m["fairness"],
        ]
        for m in board["models"]
    ]
    text = f"{board['task']} leaderboard (weights {board['weights']})\n" + table(
        ["rank", "model", "id", "score", "dynascore", "perf", "ex/s", "GiB", "robust", "fair"], rows
    )
    for entry in board["models"]:
        if entry.get("partial"):
            missing = ", ".join(entry["not_scored_on"])
            text += f"\npartial: {entry['name']} not yet scored on {missing} (queued)"
    for entry in board.get("unranked", []):
        text += f"\nunranked: {entry['name']} ({entry['reason']})"
    return text


def emit_json(data: Any) -> None:
    """One JSON document on stdout (NaN never appears: values are None or finite)."""
    json.dump(data, sys.stdout, indent=2, default=str, allow_nan=False)
    sys.stdout.write("\n")
