"""YAML as every Dynaeval file is read: the safe loader, in C when PyYAML has libyaml.

The C loader parses task files about seven times faster than the pure-Python one and builds
the same values; it is what makes opening a service (every task file, then the defaults)
cheap enough to do per request in tests and per start in production.

Text from outside (an uploaded task spec) is read with :func:`parse_untrusted_yaml`: libyaml
recurses without a depth check, so deeply nested flow collections would crash the process,
and anchors with aliases expand a few hundred bytes into gigabytes; both are refused first.
"""

from __future__ import annotations

from typing import Any

import yaml

_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NESTING = 64  # far deeper than any task spec, far shallower than libyaml's stack allows


class UnsafeYaml(yaml.YAMLError):
    """Text refused before parsing: nested too deeply, or using anchors and aliases."""


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``; raises ``yaml.YAMLError`` alike."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader


def parse_untrusted_yaml(text: str) -> Any:
    """:func:`parse_yaml` for text from outside: UnsafeYaml (a YAMLError) when its brackets
    nest deeper than MAX_NESTING or it holds an alias."""
    depth = deepest = 0
    for char in text:  # brackets inside quotes count too: a spec never needs 64 of them
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    if deepest > MAX_NESTING:
        raise UnsafeYaml(f"nested deeper than {MAX_NESTING} levels")
    for event in yaml.parse(text, Loader=_SAFE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise UnsafeYaml("anchors and aliases (&name, *name) are not accepted here")
    return parse_yaml(text)
