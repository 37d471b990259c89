"""docs/architecture.md stays true: every module its feature map and package table name
exists, and the feature map names each feature's modules in every layer that has one."""

from __future__ import annotations

import re
from pathlib import Path

from configs.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
PACKAGES = ("api", "client", "configs", "dynascore", "evaluator", "metrics", "perturbations",
            "store", "worker", "tools", "benchmarks", "tests")  # fmt: skip


def _rows(heading: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    return [
        line for line in section.splitlines() if line.startswith("| `") or line.startswith("| ")
    ]


def _paths(line: str) -> list[str]:
    return re.findall(r"`([a-z_/]+(?:\.py|/))`", line)


def test_every_module_the_feature_map_names_exists() -> None:
    named = [p for row in _rows("## Features and where they live") for p in _paths(row)]
    assert len(named) > 40
    missing = [p for p in named if not (REPO_ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_file_the_package_table_names_exists_in_its_package() -> None:
    rows = [row for row in _rows("| package | owns |") if row.startswith("| `")]
    missing = []
    for row in rows:
        package = re.match(r"\| `([a-z_/]+)/`", row)
        if package is None:
            continue
        root = REPO_ROOT / package.group(1)
        for name in re.findall(r"`([a-z_]+\.py)`", row):
            if not list(root.rglob(name)):
                missing.append(f"{package.group(1)}/…/{name}")
    assert not missing, f"the package table names files that do not exist: {missing}"


def test_a_features_name_finds_its_modules() -> None:
    """One name per feature: each renamed feature's modules carry its name."""
    for feature in ("adversary", "collection", "webhooks", "validation"):
        modules = [p for p in Path(REPO_ROOT).rglob(f"*{feature}*.py") if "tests" not in p.parts]
        layers = {p.relative_to(REPO_ROOT).parts[0] for p in modules}
        assert len(layers) >= 2, (feature, sorted(str(m) for m in modules))
