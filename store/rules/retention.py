"""When an uploaded image is due for removal under the retention policy, and the reason its
model row then carries (see ``store.retention`` for the removal itself)."""

from __future__ import annotations

from datetime import datetime, timedelta

from configs.settings import ImageRetention

GONE_BY_RETENTION = "removed under the image retention policy ({days:g} days {what})"


def removal_reason(
    policy: ImageRetention, scored: datetime | None, ended: datetime | None, now: datetime
) -> str | None:
    """Why the image goes at ``now``, or None while it stays. A scored model's image stays
    ``scored_days`` after its newest score (for ever when None: backfills need it); an
    unscored one ``unscored_days`` after its newest job ended (a job still going is the
    caller's to exclude)."""
    if scored is not None:
        days = policy.scored_days
        if days is None or now - scored < timedelta(days=days):
            return None
        return GONE_BY_RETENTION.format(days=days, what="after its newest score")
    days = policy.unscored_days
    if days is None or ended is None or now - ended < timedelta(days=days):
        return None
    return GONE_BY_RETENTION.format(days=days, what="after its job ended without a score")
