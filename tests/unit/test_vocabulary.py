"""The shared vocabulary: the registry style every plugin kind uses, and the clock."""

from __future__ import annotations

from datetime import datetime

import pytest

from configs.vocabulary.clock import ManualClock, SystemClock
from configs.vocabulary.registry import Registry, UnknownName, unknown_name_message


def test_registry_refuses_a_taken_name():
    registry: Registry[int] = Registry("widget")
    registry.add("one", 1)
    with pytest.raises(ValueError, match="a widget named 'one' is already registered"):
        registry.add("one", 2)
    assert registry.get("one") == 1


def test_unknown_name_is_one_sentence_with_a_suggestion_and_the_known_names():
    registry: Registry[int] = Registry("widget")
    registry.register("sprocket")(1)
    registry.register("gear")(2)
    with pytest.raises(UnknownName) as caught:
        registry.get("sprocet")
    assert (
        str(caught.value)
        == "unknown widget 'sprocet'; did you mean 'sprocket'? (known: gear, sprocket)"
    )
    # Callers that validate (ValueError) and callers that look up (KeyError) both catch it.
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)


def test_unknown_name_without_a_close_match_has_no_guess():
    assert unknown_name_message("widget", "zzz", ["gear"]) == "unknown widget 'zzz' (known: gear)"


def test_lazy_loading_runs_once_before_the_first_lookup():
    calls = []
    registry: Registry[str] = Registry("widget", load=lambda: calls.append(registry.add("a", "A")))
    assert calls == []
    assert "a" in registry and registry.names() == ("a",)
    assert registry.get("a") == "A" and len(calls) == 1


def test_manual_clock_moves_only_when_told():
    clock = ManualClock(datetime(2026, 1, 1, 12, 0, 0))
    assert clock.now() == clock.now() == datetime(2026, 1, 1, 12, 0, 0)
    assert clock.advance(90) == datetime(2026, 1, 1, 12, 1, 30)


def test_system_clock_is_naive_utc():
    assert SystemClock().now().tzinfo is None
