"""collect_runs and per_seed_rows on run folders written by the tests."""
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.analysis.report_inputs import CASES, SEEDS, write_mae_run, write_run
from tests.tools.tool_loader import load_tool
from zoo.analysis.runs import ReportError, collect_runs, diverged_runs, per_seed_rows


def test_collect_runs_reads_identity_from_config(runs):
    df = collect_runs([runs])
    assert len(df) == len(CASES) * len(SEEDS)
    row = df[(df.recipe == "texas_qfrozen_1.5") & (df.seed == 3)].iloc[0]
    identity = (row.dataset, row.model, row.arch, row.split, row.main_metric)
    assert identity == ("texas", "qfrozen_1.5", "qfrozen", 3, "accuracy")
    assert row.val_accuracy == pytest.approx(0.73) and row.test_accuracy == pytest.approx(0.545)
    assert set(df[df.dataset == "tolokers"].main_metric) == {"roc_auc"}
    assert len(collect_runs([runs, runs / "texas_gat"])) == len(df)  # overlapping paths count once


def test_a_seed_found_twice_is_an_error(runs, tmp_path):
    write_run(tmp_path / "runs2", "texas", "gat", 3, 0.5, 0.5)
    with pytest.raises(ReportError, match="seed 3 of texas_gat \\(0123456789\\) found more than once"):
        collect_runs([runs, tmp_path / "runs2"])


def test_missing_or_empty_folders_are_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no finished runs"):
        collect_runs([tmp_path / "empty"])
    with pytest.raises(ReportError, match="not found: .*missing"):
        collect_runs([tmp_path / "missing"])


def _seed(root: Path, metrics, config: str | None, where: str = "hash") -> Path:
    """``root/myrecipe/abc123/seed2/metrics.json`` (a dict, or raw text) and ``config`` as config.yaml text
    in the config-hash folder (``where="hash"``) or the seed folder."""
    seed_dir = root / "myrecipe" / "abc123" / "seed2"
    seed_dir.mkdir(parents=True)
    (seed_dir / "metrics.json").write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))
    if config is not None:
        ((seed_dir.parent if where == "hash" else seed_dir) / "config.yaml").write_text(config)
    return seed_dir


FINISHED = {"seed": 2, "main_metric": "accuracy", "final": {"val": {"accuracy": 0.5}, "test": {"accuracy": 0.25}}}


def test_the_seed_folder_config_and_folder_names_fill_in(tmp_path):
    seed_dir = _seed(tmp_path, FINISHED, yaml.safe_dump({"dataset": "cora", "model": {"name": "gat"}}), where="seed")
    (tmp_path / "myrecipe" / "notes").mkdir()
    (tmp_path / "myrecipe" / "notes" / "metrics.json").write_text("{}")  # not a seed<k> folder: not read
    row = collect_runs(tmp_path).iloc[0].to_dict()
    # no 'name' in the recipe: the recipe folder names it; without a "cora_" prefix the model is the recipe
    assert row == {"recipe": "myrecipe", "config_hash": "abc123", "dataset": "cora", "arch": "gat", "seed": 2,
                   "split": None, "main_metric": "accuracy", "path": str(seed_dir.resolve()), "model": "myrecipe",
                   "val_accuracy": 0.5, "test_accuracy": 0.25}


@pytest.mark.parametrize("metrics, config, message", [
    (FINISHED, None, "no config.yaml found for the run in .*seed2"),
    (FINISHED, "dataset: [cora", "config.yaml is not valid YAML"),
    (FINISHED, "name: x\n", "config.yaml is not a resolved recipe \\(no 'dataset' key\\)"),
    ({"seed": 2, "main_metric": "accuracy"}, "dataset: cora\n", "metrics.json is not a finished run's metrics.json"),
    ("{", "dataset: cora\n", "metrics.json is not a finished run's metrics.json"),
])
def test_unreadable_runs_name_the_file(tmp_path, metrics, config, message):
    _seed(tmp_path, metrics, config)
    with pytest.raises(ReportError, match=message):
        collect_runs(tmp_path)


def test_per_seed_rows_put_identity_first_and_skip_none(tmp_path):
    runs = pd.DataFrame({"model": ["gat", "gat", "ltga"], "dataset": ["cora", "texas", "cora"], "seed": [0, 1, 0],
                         "path": [str(tmp_path / "a"), str(tmp_path / "skip"), str(tmp_path / "c")]})
    rows = per_seed_rows(runs, lambda path: None if path.name == "skip" else {"folder": path.name})
    assert rows == [{"model": "gat", "dataset": "cora", "seed": 0, "folder": "a"},
                    {"model": "ltga", "dataset": "cora", "seed": 0, "folder": "c"}]
    assert list(rows[0]) == ["model", "dataset", "seed", "folder"]


def test_grouped_seed_means_by_hand():
    import re

    from zoo.analysis.runs import grouped_seed_means

    runs = pd.DataFrame({"model": ["depth2_gcn", "depth2_gcn", "depth8_gcn", "gat"], "dataset": ["cora"] * 4,
                         "seed": [0, 1, 0, 0], "path": ["a", "b", "c", "d"]})
    scores = {"a": 0.8, "b": 0.6, "c": 0.3, "d": 0.9}
    read = lambda path: {"score": scores[path.name], "metric": "accuracy"}  # noqa: E731
    pattern = re.compile(r"^depth(?P<layers>\d+)_(?P<model>.+)$")
    table = grouped_seed_means(runs, pattern, ["model", "layers"], read, ["score"], {"layers": int})
    two = table.loc[("cora", "gcn", 2)]
    assert (two.score, two.score_sd, two.metric, two.n) == (pytest.approx(0.7), pytest.approx(0.02 ** 0.5), "accuracy", 2)  # sd of 0.8, 0.6
    assert table.loc[("cora", "gcn", 8)].n == 1 and ("cora", "gat", 0) not in table.index
    assert grouped_seed_means(runs[runs.model == "gat"], pattern, ["model", "layers"], read, ["score"]) is None


def test_diverged_seeds_are_listed_under_the_report_not_averaged(tmp_path, capsys):
    for seed, (g1, relu) in enumerate([(0.0892, 0.1108), (0.0906, 0.0920), (0.0931, None)]):
        write_mae_run(tmp_path, "g1", seed, val=g1 + 0.01, test=g1)
        if relu is not None:
            write_mae_run(tmp_path, "relu", seed, val=relu + 0.01, test=relu)
    seed_dir = tmp_path / "zinc_relu" / "0123456789" / "seed2"
    seed_dir.mkdir()
    message = "training diverged: the training loss is nan at epoch 4, batch 7 of zinc_relu seed 2"
    (seed_dir / "diverged.json").write_text(json.dumps({"recipe": "zinc_relu", "seed": 2, "message": message}))
    assert diverged_runs([tmp_path]) == [{"recipe": "zinc_relu", "model": "relu", "dataset": "zinc", "seed": 2,
                                          "message": message, "path": str(seed_dir)}]
    assert sorted(collect_runs([tmp_path]).query("model == 'relu'").seed) == [0, 1]

    tool = load_tool("report")
    assert tool.main([str(tmp_path), "--reference", "g1"]) == 0
    out = capsys.readouterr().out
    assert out.split("## Diverged seeds")[1].strip().splitlines()[-1] == f"* zinc_relu seed 2: {message}"
    assert "0.1014" in out  # relu's mean MAE over its two finished seeds, (0.1108 + 0.0920) / 2
    assert tool.main([str(tmp_path), "--models", "g1"]) == 0 and "Diverged" not in capsys.readouterr().out
    (seed_dir / "diverged.json").write_text("{}")
    assert tool.main([str(tmp_path)]) == 2 and "is not a diverged seed's record" in capsys.readouterr().err
