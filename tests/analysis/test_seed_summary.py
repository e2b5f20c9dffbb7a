"""summarize_seeds and format_summary on hand-computed runs."""
import pytest

from zoo.analysis.seed_summary import format_summary, summarize_seeds


def run(val: float, test: float) -> dict:
    return {"final": {"val": {"accuracy": val, "nll": 1 - val}, "test": {"accuracy": test, "nll": 2.0}}}


def test_mean_and_sample_sd_per_split_and_metric():
    summary = summarize_seeds([run(0.8, 0.5), run(0.6, 0.5), run(0.7, 0.5)])
    accuracy = summary["val"]["accuracy"]
    assert accuracy["mean"] == pytest.approx(0.7) and accuracy["n"] == 3 and accuracy["values"] == [0.8, 0.6, 0.7]
    assert accuracy["sd"] == pytest.approx(0.1)  # sqrt((0.01 + 0.01 + 0) / 2)
    assert summary["val"]["nll"]["mean"] == pytest.approx(0.3)
    assert summary["test"]["accuracy"] == {"mean": 0.5, "sd": 0.0, "n": 3, "values": [0.5, 0.5, 0.5]}


def test_one_seed_has_sd_zero_and_none_is_an_error():
    assert summarize_seeds([run(0.8, 0.5)])["val"]["accuracy"]["sd"] == 0.0
    with pytest.raises(ValueError, match="no finished runs"):
        summarize_seeds([])


def test_format_summary_one_row_per_metric():
    text = format_summary(summarize_seeds([run(0.8, 0.5), run(0.6, 0.25)]))
    # names padded to the longest (8) + 2 spaces, then each cell right-aligned in 20 columns, 2 spaces apart
    assert text.splitlines() == [
        "metric" + " " * 4 + " " * 11 + "val (n=2)" + " " * 2 + " " * 10 + "test (n=2)",
        "accuracy" + " " * 2 + " " * 4 + "0.7000 +- 0.1414" + " " * 2 + " " * 4 + "0.3750 +- 0.1768",
        "nll" + " " * 7 + " " * 4 + "0.3000 +- 0.1414" + " " * 2 + " " * 4 + "2.0000 +- 0.0000"]
    assert format_summary(summarize_seeds([run(0.8, 0.5)]), splits=("test",)).splitlines()[0] == \
        "metric" + " " * 4 + " " * 10 + "test (n=1)"
