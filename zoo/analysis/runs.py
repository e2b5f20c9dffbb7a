"""Run folders -> one row per finished seed run.

``tools/train.py`` writes ``runs/<recipe>/<config-hash>/seed<k>/metrics.json`` beside the resolved
recipe (``config.yaml``); :func:`collect_runs` reads them into a DataFrame that the results table
(:mod:`zoo.analysis.tables`) and the diagnostics and timing tables start from.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import yaml


class ReportError(ValueError):
    """The runs or options given cannot make a report; the message names the bad value."""


def _read_config(run_dir: Path, seed_dir: Path) -> dict:
    """The resolved recipe of a run: ``<config-hash>/config.yaml``, else the seed's copy."""
    for path in (run_dir / "config.yaml", seed_dir / "config.yaml"):
        if path.exists():
            try:
                config = yaml.safe_load(path.read_text())
            except yaml.YAMLError as err:
                raise ReportError(f"{path} is not valid YAML: {err}") from err
            if not isinstance(config, dict) or "dataset" not in config:
                raise ReportError(f"{path} is not a resolved recipe (no 'dataset' key)")
            return config
    raise ReportError(f"no config.yaml found for the run in {seed_dir}")


def _run_row(metrics_path: Path, configs: dict) -> dict:
    """One seed's row: identity from the resolved recipe, val/test metrics from metrics.json."""
    seed_dir = metrics_path.parent
    run_dir = seed_dir.parent
    if run_dir not in configs:
        configs[run_dir] = _read_config(run_dir, seed_dir)
    config = configs[run_dir]
    try:
        metrics = json.loads(metrics_path.read_text())
        final = metrics["final"]
        row = {"recipe": config.get("name", run_dir.parent.name), "config_hash": run_dir.name,
               "dataset": config["dataset"], "arch": config.get("model", {}).get("name"),
               "seed": int(metrics["seed"]), "split": metrics.get("split"),
               "main_metric": metrics["main_metric"], "path": str(seed_dir)}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ReportError(f"{metrics_path} is not a finished run's metrics.json ({err!r})") from err
    prefix = f"{row['dataset']}_"
    row["model"] = row["recipe"][len(prefix):] if row["recipe"].startswith(prefix) else row["recipe"]
    for split in ("val", "test"):
        row.update({f"{split}_{name}": value for name, value in final.get(split, {}).items()})
    return row


def collect_runs(paths) -> pd.DataFrame:
    """One row per finished seed run found under ``paths`` (run roots, recipe or config folders).

    Columns: recipe, config_hash, dataset, model (the recipe name without its ``<dataset>_``
    prefix), arch (the model's registry name), seed, split, main_metric, path, and one
    ``val_<metric>`` / ``test_<metric>`` column per final metric.

    >>> runs = collect_runs(["runs/ltga16/cora_gat", "runs/ltga16/cora_gatv2"])  # records in git
    >>> runs.groupby("model").test_accuracy.agg(["count", "mean"]).round(4)
           count    mean
    model
    gat       10  0.8149
    gatv2     10  0.8148
    """
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    configs: dict = {}
    found: set = set()
    for root in paths:
        if not root.is_dir():
            raise ReportError(f"run folder not found: {root}")
        found |= {p.resolve() for p in root.rglob("metrics.json") if p.parent.name.startswith("seed")}
    if not found:
        raise ReportError(f"no finished runs (<recipe>/<config-hash>/seed<k>/metrics.json) under "
                          f"{', '.join(map(str, paths))}")
    df = pd.DataFrame([_run_row(p, configs) for p in sorted(found)])
    twice = df[df.duplicated(["recipe", "config_hash", "seed"], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        copies = twice[(twice.recipe == first.recipe) & (twice.config_hash == first.config_hash)
                       & (twice.seed == first.seed)].path
        raise ReportError(f"seed {first.seed} of {first.recipe} ({first.config_hash}) found more than once: "
                          f"{', '.join(copies)}")
    return df


def diverged_runs(paths) -> list[dict]:
    """One ``{"recipe", "model", "dataset", "seed", "message", "path"}`` per seed under ``paths`` whose
    training diverged (``seed<k>/diverged.json``, :mod:`zoo.engine.divergence`): runs with no result,
    which :func:`collect_runs` does not see.

    >>> [(row["recipe"], row["seed"]) for row in diverged_runs(["runs/zinc_cpu"])]
    []
    """
    rows, configs = [], {}
    for root in [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]:
        for path in sorted(root.rglob("diverged.json")):
            seed_dir, run_dir = path.parent, path.parent.parent
            config = configs.setdefault(run_dir, _read_config(run_dir, seed_dir))
            try:
                record = json.loads(path.read_text())
                recipe, seed, message = record["recipe"], int(record["seed"]), record["message"]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise ReportError(f"{path} is not a diverged seed's record ({err!r})") from err
            prefix = f"{config['dataset']}_"
            rows.append({"recipe": recipe, "model": recipe[len(prefix):] if recipe.startswith(prefix) else recipe,
                         "dataset": config["dataset"], "seed": seed, "message": message, "path": str(seed_dir)})
    return rows


def per_seed_rows(runs: pd.DataFrame, read) -> list[dict]:
    """``read(seed_dir)`` for each run of ``runs`` (:func:`collect_runs` output) that returns a dict,
    with the run's model, dataset and seed added in front; runs where it returns None are left out.

    >>> read = lambda path: {"best_epoch": json.loads((path / "metrics.json").read_text())["best_epoch"]}
    >>> per_seed_rows(collect_runs("runs/ltga16/cora_gat"), read)[:2]  # records in git
    [{'model': 'gat', 'dataset': 'cora', 'seed': 0, 'best_epoch': 33}, {'model': 'gat', 'dataset': 'cora', 'seed': 1, 'best_epoch': 32}]
    """
    rows = []
    for record in runs.itertuples():
        row = read(Path(record.path))
        if row is not None:
            rows.append({"model": record.model, "dataset": record.dataset, "seed": record.seed, **row})
    return rows


def grouped_seed_means(runs: pd.DataFrame, pattern: re.Pattern, keys: list[str], read,
                       values: list[str], types: dict | None = None) -> pd.DataFrame | None:
    """The runs whose model name matches ``pattern`` (named groups ``keys``, e.g.
    ``depth(?P<layers>\\d+)_(?P<model>.+)``; a group named ``model`` replaces the model column),
    one row per (dataset, *keys): the mean over seeds of ``values``, ``score_sd`` (ddof 1),
    ``metric`` (the first seed's) and ``n``. ``read(seed_dir)`` gives a seed's dict with ``score``,
    ``metric`` and ``values``; ``types`` casts group values (e.g. ``{"layers": int}``). None when
    no run matches.

    >>> def read(path):
    ...     metrics = json.loads((path / "metrics.json").read_text())
    ...     return {"metric": "accuracy", "score": 100 * metrics["final"]["test"]["accuracy"]}
    >>> runs = collect_runs([f"runs/ltga16/cora_depth{layers}_gcn" for layers in (2, 8)])  # records in git
    >>> grouped_seed_means(runs, re.compile(r"depth(?P<layers>\\d+)_(?P<model>.+)"),
    ...                    ["model", "layers"], read, ["score"], {"layers": int}).round(2)
                          score  score_sd    metric  n
    dataset model layers
    cora    gcn   2       81.42      0.49  accuracy  5
                  8       74.96      3.12  accuracy  5
    """
    parsed = runs.model.str.extract(pattern)
    matched = runs.assign(**{key: parsed[key] for key in keys})[parsed[keys[0]].notna()]
    if matched.empty:
        return None
    rows = pd.DataFrame(per_seed_rows(matched, read))
    for key in keys:
        rows[key] = matched[key].to_numpy().astype((types or {}).get(key, object))
    groups = rows.groupby(["dataset", *keys])
    table = groups[values].mean()
    table["score_sd"], table["metric"], table["n"] = groups.score.std(ddof=1), groups.metric.first(), groups.size()
    return table
