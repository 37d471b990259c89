"""Apps share their URL rules' compiled builders, and build every URL as werkzeug does."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

from api.app import create_app
from api.routing import SharedBuilderRule
from tests.unit.test_api import service as service  # noqa: F401  (a migrated service)
from usecases.service import Service


def _arguments(rule: Rule) -> dict[str, object]:
    """A value for each of the rule's variables that its converter accepts."""
    values: dict[str, object] = {}
    for name in rule.arguments:
        converter = type(rule._converters[name]).__name__
        values[name] = 7 if converter in {"IntegerConverter", "NumberConverter"} else "a b/é"
    return values


def test_every_rule_builds_what_werkzeug_s_own_builder_builds(service: Service) -> None:
    create_app(service)
    app = create_app(service)  # its rules' builders all come from the first app's
    rules = list(app.url_map.iter_rules())
    assert len(rules) > 50 and all(isinstance(r, SharedBuilderRule) for r in rules)
    for rule in rules:
        values = _arguments(rule)
        for append_unknown in (False, True):
            own = Rule._compile_builder(rule, append_unknown).__get__(rule, None)
            shared = rule._build_unknown if append_unknown else rule._build
            extra = {"q": "x y", "page": 2} if append_unknown else {}
            assert shared(**values, **extra) == own(**values, **extra), rule.rule


def test_a_second_app_compiles_no_builder(service: Service) -> None:
    first = {r.endpoint: r for r in create_app(service).url_map.iter_rules()}
    for rule in create_app(service).url_map.iter_rules():
        assert rule._build.__func__ is first[rule.endpoint]._build.__func__, rule.rule


def test_a_default_for_a_variable_is_compiled_into_that_rule_s_builder_only() -> None:
    paths = Map(
        [
            SharedBuilderRule("/boards/<name>", endpoint="board", defaults={"name": "top"}),
            SharedBuilderRule("/boards/<name>", endpoint="any_board"),
        ]
    )
    urls = paths.bind("localhost")
    assert urls.build("board", {}) == "/boards/top"
    assert urls.build("any_board", {"name": "mt"}) == "/boards/mt"
