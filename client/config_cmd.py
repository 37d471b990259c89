"""``dynaeval config``: the effective settings and where each came from, secrets masked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from configs.settings import (
    CONFIG_ENV,
    CONFIG_FILE_NAME,
    ENV_VARS,
    Settings,
    SettingsError,
    load_settings,
)

EXIT_BAD_SETTING = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"the settings file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE_NAME} if present)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_config(args: argparse.Namespace) -> int:
    """Print the settings; a bad one is a one-line error and exit 2."""
    try:
        settings = load_settings(args.config)
    except SettingsError as exc:
        print(f"dynaeval config: {exc}", file=sys.stderr)
        return EXIT_BAD_SETTING
    print(json.dumps(as_json(settings), indent=2) if args.json else as_text(settings))
    return 0


def as_json(settings: Settings) -> dict[str, Any]:
    """``{"config_file": path|None, "settings": {key: {value, source, from, env}}}``."""
    rows = {
        key: {
            "value": value,
            "source": source.kind,
            "from": source.where or None,
            "env": list(ENV_VARS[key]),
        }
        for key, value, source in settings.rows()
    }
    file = str(settings.config_file) if settings.config_file else None
    return {"config_file": file, "settings": rows}


def as_text(settings: Settings) -> str:
    """One aligned line per setting: key, value (``-`` when unset), source."""
    file = settings.config_file or f"none (no --config, ${CONFIG_ENV} or ./{CONFIG_FILE_NAME})"
    rows = [
        (key, "-" if value is None else value, str(source))
        for key, value, source in settings.rows()
    ]
    key_width = max(len(key) for key, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    lines = [f"settings file: {file}"]
    lines += [f"{k:<{key_width}}  {v:<{value_width}}  {s}" for k, v, s in rows]
    return "\n".join(lines)
