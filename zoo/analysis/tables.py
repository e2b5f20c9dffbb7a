"""Rows of run results -> a results table: models x datasets, per-seed scores of each cell.

:func:`results_table` turns :func:`zoo.analysis.runs.collect_runs` output into a
:class:`ResultsTable` in the paper's Table 1 layout; the statistics over it are in
:mod:`zoo.analysis.table_statistics`, its Markdown and CSV forms in :mod:`zoo.analysis.rendering`.

Choices, also stated in the rendered report:

* "avg", "avg rank" and the Friedman test use only the datasets where every row has runs.
* A "tuned" row picks, per dataset, the matching model with the best mean validation main metric
  (ties: the first name in sorted order, :func:`pick_best`) and reports that model's scores on the
  chosen split. With ``tune_seeds`` the mean runs over those seeds only, so a grid can be tuned on
  a few seeds and only the pick run on all of them. A dataset where some candidate lacks a tuning
  seed gets no tuned cell, and the report names the missing runs; candidates with no runs at all
  on a dataset (a smaller grid there, or not yet run) are named in a note beside the pick.
* An "oracle" row (the LTGA paper's Table 9 "test oracle; not a baseline") picks, per dataset, the
  matching model with the best mean *test* main metric. It bounds what a perfect per-dataset choice
  could gain, so it is shown but kept out of ``rows``: out of avg rank, paired tests and rank tests.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zoo.analysis.rank_tests import average_ranks
from zoo.analysis.runs import ReportError

DATASET_ORDER = ("cora", "citeseer", "pubmed", "texas", "cornell", "wisconsin", "roman_empire",
                 "amazon_ratings", "tolokers", "minesweeper", "questions")
PERCENT_METRICS = frozenset({"accuracy", "macro_f1", "roc_auc"})
LOWER_IS_BETTER = frozenset({"nll", "brier", "ece", "mae", "rmse", "loss"})


ORACLE_SUFFIX = " (test oracle; not a baseline)"
"""Appended to an oracle row's name, as the LTGA paper's Table 9 labels its row."""


def parse_tuned(spec: str | None, option: str = "--tuned") -> dict[str, str]:
    """``"qfrozen=qfrozen_*,entmax=entmax_*"`` -> ``{"qfrozen": "qfrozen_*", "entmax": "entmax_*"}``
    (``option`` names the command-line option in the error).

    >>> parse_tuned("qfrozen=qfrozen_*")
    {'qfrozen': 'qfrozen_*'}
    """
    tuned = {}
    for item in (spec or "").split(","):
        name, sep, pattern = (part.strip() for part in item.partition("="))
        if not (sep and name and pattern):
            raise ReportError(f"{option} takes NAME=PATTERN items separated by commas, got {item!r}")
        if name in tuned:
            raise ReportError(f"{option} names the row {name!r} twice ({tuned[name]!r} and {pattern!r}); "
                              f"give each row one pattern")
        tuned[name] = pattern
    return tuned


def order_datasets(datasets) -> list[str]:
    """Datasets in the paper's column order, then any others sorted."""
    known = [d for d in DATASET_ORDER if d in set(datasets)]
    return known + sorted(set(datasets) - set(known))


def in_run_order(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``table``, indexed by (model, dataset) and maybe more levels, with its models in the order
    they first appear in ``runs`` (``tools/report.py --models``' order), its datasets in the paper's
    column order and any further level sorted."""
    ranks = {"model": {m: i for i, m in enumerate(pd.unique(runs.model))},
             "dataset": {d: i for i, d in enumerate(order_datasets(table.index.get_level_values("dataset")))}}
    return table.sort_index(key=lambda index: index.map(ranks[index.name]) if index.name in ranks else index)


def _scores(df: pd.DataFrame, metric: str, split: str, oracle: bool = False) -> pd.DataFrame:
    """``df`` plus ``score`` (``metric`` on ``split``), ``val_main`` and, for an oracle row,
    ``test_main``, in percent where that fits."""
    names = df.main_metric if metric == "main" else pd.Series(metric, index=df.index)
    mains = ("val", "test") if oracle else ("val",)
    for where, name in sorted({(split, n) for n in names} | {(w, n) for w in mains for n in df.main_metric}):
        if f"{where}_{name}" not in df:
            available = sorted(c.split("_", 1)[1] for c in df if c.startswith(f"{where}_"))
            raise ReportError(f"no metric {name!r} on split {where!r} in the runs; "
                              f"available: main, {', '.join(available)}")

    def values(where: str, names: pd.Series) -> np.ndarray:
        picked = np.array([df.at[i, f"{where}_{name}"] for i, name in names.items()], dtype=float)
        return picked * np.where(names.isin(PERCENT_METRICS), 100.0, 1.0)

    main = {f"{where}_main": values(where, df.main_metric) for where in mains}
    return df.assign(score=values(split, names), **main).dropna(subset=["score"])


@dataclass
class ResultsTable:
    """Per-seed scores of each (row, dataset) cell and what a tuned row picked.

    ``scores[(row, dataset)]`` is a Series indexed by seed (missing cells are absent);
    ``picks[row][dataset]`` is ``(model, mean validation main metric)`` for tuned rows;
    ``incomplete[row][dataset]`` says which tuning runs a tuned cell left empty still lacks;
    ``unrun[row][dataset]`` lists the candidates with no runs on a dataset that has a pick;
    ``oracles[row][dataset]`` is ``(model, mean test main metric)`` for oracle rows, which are
    not in ``rows`` (so out of every statistic) but have cells in ``scores``.
    ``percent_datasets``: the datasets whose scores are in percent (accuracy, macro-F1, ROC-AUC);
    the others keep their metric's own units (AP, MAE), as the papers print them.
    """

    metric: str
    split: str
    rows: list[str]
    datasets: list[str]
    scores: dict
    main_metrics: dict
    percent_datasets: frozenset
    higher_is_better: bool
    picks: dict = field(default_factory=dict)
    tune_seeds: list | None = None
    incomplete: dict = field(default_factory=dict)
    unrun: dict = field(default_factory=dict)
    oracles: dict = field(default_factory=dict)

    def cells(self, stat: str, rows=None) -> pd.DataFrame:
        """Rows (default ``rows``; oracle rows may be asked for) x datasets of ``stat`` ("mean",
        "std" or "count") over each cell's seeds, NaN where a row has no runs."""
        rows = self.rows if rows is None else list(rows)
        cells = {(r, d): getattr(self.scores[r, d], stat)() for r in rows for d in self.datasets
                 if (r, d) in self.scores}
        return pd.DataFrame([[cells.get((r, d), np.nan) for d in self.datasets] for r in rows],
                            index=rows, columns=self.datasets, dtype=float)

    def restricted(self, datasets) -> ResultsTable:
        """The same table over those of its datasets that are in ``datasets`` (order kept): its
        avg, avg rank and rank tests then run over that block alone.

        >>> from zoo.analysis import collect_runs
        >>> table = results_table(collect_runs([f"runs/ltga16/{d}_{m}" for d in ("cora", "texas", "cornell")
        ...                                     for m in ("gat", "gatv2", "ltga_edge")]))  # records in git
        >>> table.avg_rank.round(2).to_dict(), table.restricted(["cora", "texas"]).avg_rank.to_dict()
        ({'gat': 1.67, 'gatv2': 1.67, 'ltga_edge': 2.67}, {'gat': 1.0, 'gatv2': 2.0, 'ltga_edge': 3.0})
        """
        keep = set(datasets)
        return dataclasses.replace(self, datasets=[d for d in self.datasets if d in keep])

    @property
    def percent(self) -> bool:
        """Whether every dataset's scores are in percent."""
        return set(self.datasets) <= self.percent_datasets

    def units_agree(self, datasets) -> bool:
        """Whether ``datasets`` are all in percent or all in their metrics' own units, so that a
        mean over them is a number in one unit."""
        return len({d in self.percent_datasets for d in datasets}) <= 1

    def digits(self, dataset: str | None = None) -> int:
        """Decimals for ``dataset``'s scores (default: the whole table's, as its averages use):
        2 for percentages, else 4."""
        return 2 if (self.percent if dataset is None else dataset in self.percent_datasets) else 4

    @property
    def mean(self) -> pd.DataFrame:
        """Rows x datasets means over seeds (NaN where a row has no runs)."""
        return self.cells("mean")

    @property
    def sd(self) -> pd.DataFrame:
        """Rows x datasets sample standard deviations (n - 1; NaN for a single seed)."""
        return self.cells("std")

    @property
    def n(self) -> pd.DataFrame:
        """Rows x datasets seed counts (NaN where a row has no runs)."""
        return self.cells("count")

    @property
    def complete_datasets(self) -> list[str]:
        """The datasets on which every row has runs: those averaged and ranked."""
        mean = self.mean
        return [d for d in self.datasets if mean[d].notna().all()]

    @property
    def avg(self) -> pd.Series:
        """Each row's mean over the complete datasets; NaN where their units differ (ROC-AUC in
        percent beside AP as a fraction has no meaningful mean)."""
        complete = self.complete_datasets
        if not self.units_agree(complete):
            return pd.Series(np.nan, index=self.rows)
        return self.mean[complete].mean(axis=1)

    @property
    def avg_rank(self) -> pd.Series:
        """Each row's average rank over the complete datasets (1 best, ties averaged)."""
        complete = self.mean[self.complete_datasets]
        if complete.shape[1] == 0:
            return pd.Series(np.nan, index=self.rows)
        return pd.Series(average_ranks(complete.to_numpy(), self.higher_is_better), index=self.rows)


def _matches(available: list[str], patterns: dict, suffix: str, option: str) -> dict:
    """``{name + suffix: models matching its glob}``; a glob that matches nothing is an error."""
    matched = {}
    for name, pattern in patterns.items():
        matched[name + suffix] = fnmatch.filter(available, pattern)
        if not matched[name + suffix]:
            raise ReportError(f"{option} pattern {pattern!r} matches no model; "
                              f"models in the runs: {', '.join(available)}")
    return matched


def _rows(available: list[str], models, tuned: dict, reference, oracle: dict) -> tuple[list[str], dict, dict]:
    """Row labels in order (models, tuned rows, then the reference), ``{tuned label: models}`` and
    ``{oracle label: models}``."""
    matched = _matches(available, tuned, " (tuned)", "--tuned")
    oracles = _matches(available, oracle, ORACLE_SUFFIX, "--oracle")
    consumed = set(itertools.chain(*matched.values(), *oracles.values()))
    plain = list(models) if models else [m for m in available if m not in consumed or m == reference]
    tail = [reference] if reference and reference not in plain and reference not in matched else []
    for model in plain + tail:
        if model not in available:
            raise ReportError(f"no runs of model {model!r}; models in the runs: {', '.join(available)}")
    return plain + list(matched) + tail, matched, oracles


def results_table(df: pd.DataFrame, models=None, metric: str = "main", split: str = "test",
                  tuned: dict | None = None, reference: str | None = None,
                  tune_seeds=None, oracle: dict | None = None) -> ResultsTable:
    """Summarise ``collect_runs`` output into rows (models, tuned rows, reference) x datasets.

    ``metric`` is ``"main"`` (each dataset's main metric) or a metric name; accuracy, macro-F1
    and ROC-AUC are in percent. ``models`` defaults to every model not matched by a tuned
    pattern. ``tuned`` maps a row name to a glob over model names (see the module notes).
    ``reference``, if not among the rows, is added as the last row. ``tune_seeds`` (seeds) limits
    the validation mean a tuned row picks on to those seeds. ``oracle`` maps a row name to a glob
    whose best model by mean test main metric fills each cell (shown, never ranked or tested).

    >>> from zoo.analysis.runs import collect_runs
    >>> table = results_table(collect_runs(["runs/ltga16/cora_gat", "runs/ltga16/cora_gatv2"]), models=["gat", "gatv2"])
    >>> table.mean.round(2)  # test accuracy in %, over the 10 seeds on record
            cora
    gat    81.49
    gatv2  81.48
    """
    df = _scores(df, metric, split, oracle=bool(oracle))
    rows, matched, oracles = _rows(sorted(df.model.unique()), models, tuned or {}, reference, oracle or {})
    used = df[df.model.isin(set(rows) | set(itertools.chain(*matched.values(), *oracles.values())))]
    for (dataset, model), hashes in used.groupby(["dataset", "model"]).config_hash.unique().items():
        if len(hashes) > 1:
            raise ReportError(f"{model} on {dataset} has runs of {len(hashes)} configurations ({', '.join(hashes)});"
                              f" pass the folder of one of them, e.g. <runs>/{dataset}_{model}/{hashes[0]}")
    cells = {key: group.set_index("seed").sort_index() for key, group in used.groupby(["model", "dataset"])}
    scores = {(m, d): cell.score for (m, d), cell in cells.items() if m in rows}
    names = set(used.main_metric) if metric == "main" else {metric}
    directions = {name in LOWER_IS_BETTER for name in names}
    if len(directions) > 1:
        raise ReportError(f"the datasets' metrics {sorted(names)} mix lower-is-better and higher-is-better; "
                          "report those datasets separately (or pass --metric)")
    higher = not directions.pop()
    lower = set(used.main_metric) <= LOWER_IS_BETTER  # tuned rows pick on the main metric
    picks, incomplete, unrun = {}, {}, {}
    for label, candidates in matched.items():
        picks[label] = {}
        for dataset in order_datasets(used.dataset):
            present = {m: cells[m, dataset].val_main for m in candidates if (m, dataset) in cells}
            if not present:
                continue
            lacking = _lacking_seeds(present, tune_seeds)
            absent = [m for m in candidates if m not in present]
            if lacking:
                incomplete.setdefault(label, {})[dataset] = "; ".join(lacking + [f"{m} not run" for m in absent])
                continue
            if absent:
                unrun.setdefault(label, {})[dataset] = absent
            val = {m: v.mean() if tune_seeds is None else v[sorted(tune_seeds)].mean() for m, v in present.items()}
            best = pick_best(val, lower)
            picks[label][dataset] = (best, val[best])
            scores[label, dataset] = cells[best, dataset].score
    oracle_picks = {label: {} for label in oracles}
    for label, candidates in oracles.items():
        for dataset in order_datasets(used.dataset):
            test = {m: cells[m, dataset].test_main.mean() for m in candidates if (m, dataset) in cells}
            if test:
                best = pick_best(test, lower)
                oracle_picks[label][dataset] = (best, test[best])
                scores[label, dataset] = cells[best, dataset].score
    main_metrics = used.groupby("dataset").main_metric.first().to_dict()
    percent = {d for d, name in main_metrics.items() if (name if metric == "main" else metric) in PERCENT_METRICS}
    return ResultsTable(metric=metric, split=split, rows=rows, datasets=order_datasets(used.dataset),
                        scores=scores, main_metrics=main_metrics, percent_datasets=frozenset(percent),
                        higher_is_better=higher, picks=picks,
                        tune_seeds=sorted(tune_seeds) if tune_seeds is not None else None, incomplete=incomplete,
                        unrun=unrun, oracles=oracle_picks)


def pick_best(val: dict[str, float], lower_is_better: bool) -> str:
    """The name with the best validation score; ties go to the first name in sorted order.

    >>> pick_best({"qfrozen_2.0": 0.7, "qfrozen_0.5": 0.7, "qfrozen_1.5": 0.6}, lower_is_better=False)
    'qfrozen_0.5'
    """
    return (min if lower_is_better else max)(sorted(val), key=val.get)


def _lacking_seeds(present: dict, tune_seeds) -> list[str]:
    """Which present candidates lack which tuning seeds (none without ``tune_seeds``)."""
    if tune_seeds is None:
        return []
    return [f"{m} lacks tuning seed(s) {sorted(set(tune_seeds) - set(v.index))}"
            for m, v in present.items() if set(tune_seeds) - set(v.index)]

