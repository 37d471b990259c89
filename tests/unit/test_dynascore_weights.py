"""Dynascore weights (parsing, validation) and averaging over rounds."""

import pandas as pd
import pytest

from dynascore import DEFAULT_WEIGHTS, Weights, average_rounds


def test_parse_keeps_defaults_for_axes_not_mentioned():
    weights = Weights.parse("performance:2, memory:0")
    assert weights.to_dict() == {
        "performance": 2.0,
        "throughput": 1.0,
        "memory": 0.0,
        "robustness": 1.0,
        "fairness": 1.0,
    }
    assert Weights.parse("") == Weights.default()
    assert Weights.default().to_dict() == {k: float(v) for k, v in DEFAULT_WEIGHTS.items()}
    assert Weights.default().normalized()["performance"] == 0.5


@pytest.mark.parametrize(
    "text, message",
    [
        ("perfomance:4", "unknown Dynascore axis 'perfomance'; did you mean 'performance'"),
        ("memory:-1", "must be a finite number >= 0"),
        ("memory:lots", "must be a number >= 0 written in decimal"),
        ("memory:inf", "must be a finite number >= 0"),
        ("memory", "not of the form axis:number"),
        ("memory:1,memory:2", "given twice"),
        (
            "performance:0,throughput:0,memory:0,robustness:0,fairness:0",
            "at least one Dynascore weight",
        ),
    ],
)
def test_parse_errors_are_sentences(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Weights.parse(text)


def test_mappings_are_validated_too():
    with pytest.raises(ValueError, match="must be a number"):
        Weights({"memory": "1"})  # type: ignore[dict-item]
    assert Weights.coerce({"fairness": 3}).values["fairness"] == 3.0
    assert Weights.coerce(None) == Weights.default()


PER_ROUND = pd.DataFrame(
    {
        "model": ["a", "a", "b", "b"],
        "round": ["r1", "r2", "r1", "r2"],
        "performance": [60.0, 40.0, 70.0, 50.0],
        "memory": [2.0, 4.0, 1.0, 1.0],
        "note": ["x", "y", "z", "w"],
    }
)


def test_average_rounds_equal_and_weighted():
    equal = average_rounds(PER_ROUND)
    assert equal.loc["a", "performance"] == 50.0
    assert equal.loc["b", "memory"] == 1.0
    assert "note" not in equal.columns
    weighted = average_rounds(PER_ROUND, {"r1": 3, "r2": 1})
    assert weighted.loc["a", "performance"] == pytest.approx((3 * 60 + 40) / 4)


def test_average_rounds_accepts_a_multiindex():
    indexed = PER_ROUND.set_index(["model", "round"])
    assert average_rounds(indexed).equals(average_rounds(PER_ROUND))


def test_incomplete_models_are_an_error_or_dropped():
    partial = PER_ROUND.iloc[:3]
    with pytest.raises(ValueError, match="without a score for every weighted round: b"):
        average_rounds(partial)
    assert list(average_rounds(partial, drop_incomplete=True).index) == ["a"]
    # A round with weight 0 is not needed.
    assert list(average_rounds(partial, {"r1": 1, "r2": 0}).index) == ["a", "b"]


@pytest.mark.parametrize(
    "weights, message",
    [
        ({"r1": 1}, "without a weight"),
        ({"r1": 1, "r2": 1, "r3": 1}, "unknown"),
        ({"r1": -1, "r2": 1}, "finite number >= 0"),
        ({"r1": 0, "r2": 0}, "greater than 0"),
    ],
)
def test_bad_round_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        average_rounds(PER_ROUND, weights)


def test_duplicates_and_missing_values_are_refused():
    with pytest.raises(ValueError, match="more than once"):
        average_rounds(pd.concat([PER_ROUND, PER_ROUND.iloc[:1]]))
    with pytest.raises(ValueError, match="missing values"):
        average_rounds(PER_ROUND.assign(memory=[1.0, None, 1.0, 1.0]))


def test_weights_too_large_to_add_up_are_refused() -> None:
    """Each is finite, their sum is not: normalising would turn every score into 0."""
    with pytest.raises(ValueError, match="too large"):
        Weights({"performance": 1e308, "throughput": 1e308})
    with pytest.raises(ValueError, match="must be a number"):  # not written as a weight is
        Weights.parse("performance:1e308,throughput:1e308")


@pytest.mark.parametrize("raw", ["4_0", "+4", "0x10", "nan", "1e308", "4 0", "\t4"])
def test_every_surface_reads_weights_by_one_rule(raw: str) -> None:
    with pytest.raises(ValueError):
        Weights.parse(f"performance:{raw}")
