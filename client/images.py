"""``dynaeval images``: apply the image retention policy on the configured database and
blob store (the operator's command, like ``rescore``), or list what it would remove.

The policy is the settings' ``keep_unscored_images_days`` (30 by default) and
``keep_scored_images_days`` (never by default: backfills run scored models on new data).
A removed image's model keeps its scores and its place; its row says the image is gone."""

from __future__ import annotations

import argparse
import json

from client.common import Subparsers, open_service


def add_images_parser(sub: Subparsers) -> None:
    """``images prune``."""
    images = sub.add_parser(
        "images",
        help="remove uploaded images the retention policy no longer keeps (settings "
        "keep_unscored_images_days, keep_scored_images_days); their models keep their scores",
    )
    actions = images.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    prune = actions.add_parser(
        "prune",
        help="remove what the policy says is due (never an image whose job waits or runs), "
        "and mark each model's row as having no image",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    prune.add_argument("--json", action="store_true", help="print JSON")
    images.set_defaults(handler=cmd_images)


def cmd_images(args: argparse.Namespace) -> int:
    from configs.settings import load_settings
    from store.retention import prune_images

    policy = load_settings().image_retention
    service = open_service()
    try:
        now = service.clock.now()
        pruned = prune_images(service.db, service.blobs, policy, now, dry_run=args.dry_run)
    finally:
        service.close()
    verb = "would remove" if args.dry_run else "removed"
    if args.json:
        items = [{"model_id": p.model_id, "name": p.name, "reason": p.reason} for p in pruned]
        print(json.dumps({"dry_run": args.dry_run, verb.replace(" ", "_"): items}, indent=2))
        return 0
    unscored, scored = policy.shown()
    print(f"policy: unscored images {unscored} days, scored images {scored} days")
    for item in pruned:
        print(f"{verb} the image of {item.name} ({item.model_id}): {item.reason}")
    print(f"{verb} {len(pruned)} image(s)")
    return 0
