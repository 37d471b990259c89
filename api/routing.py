"""URL rules whose builders are made once per process, however many apps are made.

werkzeug writes each rule's two URL builders as Python source and compiles them when the
rule joins an app's map: about 1 ms a rule, most of the cost of making an app (the tests
make one per case). A builder depends only on the rule's text, its parsed parts, which of
its arguments have defaults and whether unknown arguments become a query string, never on
the app: it takes the rule itself as its first argument. So a rule equal to one seen before
reuses its builders. A rule with a default for one of its own variables has that default
converted into its builder, and is compiled as werkzeug does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from flask import Flask
from werkzeug.routing import Rule

Builder = Callable[..., tuple[str, str]]


class SharedBuilderRule(Rule):
    """A werkzeug ``Rule`` whose compiled builders are shared by equal rules."""

    _builders: ClassVar[dict[tuple[Any, ...], Builder]] = {}

    def _compile_builder(self, append_unknown: bool = True) -> Builder:
        trace = getattr(self, "_trace", None)
        defaults = self.defaults or {}
        if trace is None or any(dynamic and part in defaults for dynamic, part in trace):
            return super()._compile_builder(append_unknown)
        key = (self.rule, tuple(trace), tuple(defaults), append_unknown)
        builder = self._builders.get(key)
        if builder is None:  # two threads may both compile it: the same function either way
            builder = self._builders[key] = super()._compile_builder(append_unknown)
        return builder


class SharedRulesFlask(Flask):
    """A Flask app whose rules, its static files' included, are ``SharedBuilderRule``."""

    url_rule_class = SharedBuilderRule
