"""Where the shipped configs live; importing this reads nothing."""

from __future__ import annotations

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
REPO_ROOT = CONFIG_DIR.parent  # a checkout: examples/ and scripts/ live beside the packages
TASKS_DIR = CONFIG_DIR / "tasks"
