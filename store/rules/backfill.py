"""Which sets a backfill covers: the current set versions a model's newest result was not
computed on (a scoped backfill scores only those and carries the rest over)."""

from __future__ import annotations

from collections.abc import Mapping

from configs.vocabulary.jobs import BackfillScope


def stale_sets(scored_on: Mapping[str, str], current: Mapping[str, str]) -> BackfillScope:
    """The current ``round/dataset`` versions a model's newest result was not computed on."""
    stale = []
    for name, digest in sorted(current.items()):
        if scored_on.get(name) != digest:
            round_name, dataset = name.split("/", 1)
            stale.append((round_name, dataset, digest))
    return BackfillScope(tuple(stale))
