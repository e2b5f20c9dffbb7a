"""Run folders -> a results table (models x datasets, mean +- sd over seeds) with its statistics.

``runs/<recipe>/<config-hash>/seed<k>/metrics.json`` files are gathered into one row per seed
(``collect_runs``), summarised into the paper's Table 1 layout (``results_table``), compared by
paired tests against a reference model (``paired_comparisons``) and by Friedman + Nemenyi over
datasets (``rank_analysis``), then rendered as Markdown (``render_markdown``) or a numeric frame
for CSV (``table_frame``). ``make_report`` chains them.

Choices, also stated in the rendered report:

* Holm's correction runs over the comparisons within one dataset (one table column is one family).
* "avg", "avg rank" and the Friedman test use only the datasets where every row has runs.
* A "tuned" row picks, per dataset, the matching model with the best mean validation main metric
  (ties: the first name in sorted order) and reports that model's scores on the chosen split.
  With ``tune_seeds`` the mean runs over those seeds only, so a grid can be tuned on a few seeds
  and only the pick run on all of them. A dataset where some candidate lacks a tuning seed gets
  no tuned cell, and the report names the missing runs; candidates with no runs at all on a
  dataset (a smaller grid there, or not yet run) are named in a note beside the pick.
"""
from __future__ import annotations

import fnmatch
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from zoo.analysis.paired_tests import holm, paired_test
from zoo.analysis.rank_tests import average_ranks, friedman, nemenyi_cd

DATASET_ORDER = ("cora", "citeseer", "pubmed", "texas", "cornell", "wisconsin", "roman_empire",
                 "amazon_ratings", "tolokers", "minesweeper", "questions")
PERCENT_METRICS = frozenset({"accuracy", "macro_f1", "roc_auc"})
LOWER_IS_BETTER = frozenset({"nll", "brier", "ece", "mae", "rmse", "loss"})


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

    >>> collect_runs(["runs"]).groupby(["dataset", "model"]).test_accuracy.mean()  # doctest: +SKIP
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


def per_seed_rows(runs: pd.DataFrame, read) -> list[dict]:
    """``read(seed_dir)`` for each run of ``runs`` (:func:`collect_runs` output) that returns a dict,
    with the run's model, dataset and seed added in front; runs where it returns None are left out.

    >>> per_seed_rows(collect_runs("runs"), lambda path: {"files": len(list(path.iterdir()))})  # doctest: +SKIP
    """
    rows = []
    for record in runs.itertuples():
        row = read(Path(record.path))
        if row is not None:
            rows.append({"model": record.model, "dataset": record.dataset, "seed": record.seed, **row})
    return rows


def parse_tuned(spec: str | None) -> dict[str, str]:
    """``"qfrozen=qfrozen_*,entmax=entmax_*"`` -> ``{"qfrozen": "qfrozen_*", "entmax": "entmax_*"}``.

    >>> parse_tuned("qfrozen=qfrozen_*")
    {'qfrozen': 'qfrozen_*'}
    """
    tuned = {}
    for item in (spec or "").split(","):
        name, sep, pattern = (part.strip() for part in item.partition("="))
        if not (sep and name and pattern):
            raise ReportError(f"--tuned takes NAME=PATTERN items separated by commas, got {item!r}")
        tuned[name] = pattern
    return tuned


def order_datasets(datasets) -> list[str]:
    """Datasets in the paper's column order, then any others sorted."""
    known = [d for d in DATASET_ORDER if d in set(datasets)]
    return known + sorted(set(datasets) - set(known))


def _scores(df: pd.DataFrame, metric: str, split: str) -> pd.DataFrame:
    """``df`` plus ``score`` (``metric`` on ``split``) and ``val_main``, in percent where that fits."""
    names = df.main_metric if metric == "main" else pd.Series(metric, index=df.index)
    for where, name in sorted({(split, n) for n in names} | {("val", n) for n in df.main_metric}):
        if f"{where}_{name}" not in df:
            available = sorted(c.split("_", 1)[1] for c in df if c.startswith(f"{where}_"))
            raise ReportError(f"no metric {name!r} on split {where!r} in the runs; "
                              f"available: main, {', '.join(available)}")

    def values(where: str, names: pd.Series) -> np.ndarray:
        picked = np.array([df.at[i, f"{where}_{name}"] for i, name in names.items()], dtype=float)
        return picked * np.where(names.isin(PERCENT_METRICS), 100.0, 1.0)

    return df.assign(score=values(split, names), val_main=values("val", df.main_metric)).dropna(subset=["score"])


@dataclass
class ResultsTable:
    """Per-seed scores of each (row, dataset) cell and what a tuned row picked.

    ``scores[(row, dataset)]`` is a Series indexed by seed (missing cells are absent);
    ``picks[row][dataset]`` is ``(model, mean validation main metric)`` for tuned rows;
    ``incomplete[row][dataset]`` says which tuning runs a tuned cell left empty still lacks;
    ``unrun[row][dataset]`` lists the candidates with no runs on a dataset that has a pick.
    """

    metric: str
    split: str
    rows: list[str]
    datasets: list[str]
    scores: dict
    main_metrics: dict
    percent: bool
    higher_is_better: bool
    picks: dict = field(default_factory=dict)
    tune_seeds: list | None = None
    incomplete: dict = field(default_factory=dict)
    unrun: dict = field(default_factory=dict)

    def _frame(self, stat: str) -> pd.DataFrame:
        cells = {(r, d): getattr(self.scores[r, d], stat)() for r in self.rows for d in self.datasets
                 if (r, d) in self.scores}
        return pd.DataFrame([[cells.get((r, d), np.nan) for d in self.datasets] for r in self.rows],
                            index=self.rows, columns=self.datasets, dtype=float)

    @property
    def mean(self) -> pd.DataFrame:
        """Rows x datasets means over seeds (NaN where a row has no runs)."""
        return self._frame("mean")

    @property
    def sd(self) -> pd.DataFrame:
        """Rows x datasets sample standard deviations (n - 1; NaN for a single seed)."""
        return self._frame("std")

    @property
    def n(self) -> pd.DataFrame:
        """Rows x datasets seed counts (NaN where a row has no runs)."""
        return self._frame("count")

    @property
    def complete_datasets(self) -> list[str]:
        """The datasets on which every row has runs: those averaged and ranked."""
        mean = self.mean
        return [d for d in self.datasets if mean[d].notna().all()]

    @property
    def avg(self) -> pd.Series:
        """Each row's mean over the complete datasets."""
        return self.mean[self.complete_datasets].mean(axis=1)

    @property
    def avg_rank(self) -> pd.Series:
        """Each row's average rank over the complete datasets (1 best, ties averaged)."""
        complete = self.mean[self.complete_datasets]
        if complete.shape[1] == 0:
            return pd.Series(np.nan, index=self.rows)
        return pd.Series(average_ranks(complete.to_numpy(), self.higher_is_better), index=self.rows)


def _rows(available: list[str], models, tuned: dict, reference) -> tuple[list[str], dict]:
    """Row labels in order (models, tuned rows, then the reference) and ``{tuned label: models}``."""
    matched = {}
    for name, pattern in tuned.items():
        matched[f"{name} (tuned)"] = fnmatch.filter(available, pattern)
        if not matched[f"{name} (tuned)"]:
            raise ReportError(f"--tuned pattern {pattern!r} matches no model; "
                              f"models in the runs: {', '.join(available)}")
    consumed = set(itertools.chain(*matched.values()))
    plain = list(models) if models else [m for m in available if m not in consumed or m == reference]
    tail = [reference] if reference and reference not in plain and reference not in matched else []
    for model in plain + tail:
        if model not in available:
            raise ReportError(f"no runs of model {model!r}; models in the runs: {', '.join(available)}")
    return plain + list(matched) + tail, matched


def results_table(df: pd.DataFrame, models=None, metric: str = "main", split: str = "test",
                  tuned: dict | None = None, reference: str | None = None,
                  tune_seeds=None) -> ResultsTable:
    """Summarise ``collect_runs`` output into rows (models, tuned rows, reference) x datasets.

    ``metric`` is ``"main"`` (each dataset's main metric) or a metric name; accuracy, macro-F1
    and ROC-AUC are in percent. ``models`` defaults to every model not matched by a tuned
    pattern. ``tuned`` maps a row name to a glob over model names (see the module notes).
    ``reference``, if not among the rows, is added as the last row. ``tune_seeds`` (seeds) limits
    the validation mean a tuned row picks on to those seeds.

    >>> table = results_table(collect_runs("runs"), models=["gat"], reference="ltga_edge")  # doctest: +SKIP
    >>> table.mean.round(2)                                                                  # doctest: +SKIP
    """
    df = _scores(df, metric, split)
    rows, matched = _rows(sorted(df.model.unique()), models, tuned or {}, reference)
    used = df[df.model.isin(set(rows) | set(itertools.chain(*matched.values())))]
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
    return ResultsTable(metric=metric, split=split, rows=rows, datasets=order_datasets(used.dataset),
                        scores=scores, main_metrics=used.groupby("dataset").main_metric.first().to_dict(),
                        percent=names <= PERCENT_METRICS, higher_is_better=higher, picks=picks,
                        tune_seeds=sorted(tune_seeds) if tune_seeds is not None else None, incomplete=incomplete,
                        unrun=unrun)


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


def paired_comparisons(table: ResultsTable, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """``paired_test`` of ``reference`` against every other row, per dataset, pairing by seed.

    Only seeds present in both cells are used (``n``); a pair with fewer than 2 is listed but not
    tested. ``mean_diff`` is reference minus row, in table units; ``p_holm`` is Holm-corrected
    over the tested comparisons of the same dataset.
    """
    if reference not in table.rows:
        raise ReportError(f"reference {reference!r} is not a row of the table; rows: {', '.join(table.rows)}")
    records = []
    for dataset in table.datasets:
        if (reference, dataset) not in table.scores:
            continue
        ref, family = table.scores[reference, dataset], []
        for row in table.rows:
            if row == reference or (row, dataset) not in table.scores:
                continue
            other = table.scores[row, dataset]
            seeds = ref.index.intersection(other.index)
            record = {"dataset": dataset, "reference": reference, "model": row, "n": len(seeds)}
            if len(seeds) >= 2:
                record.update(paired_test(ref[seeds].to_numpy(), other[seeds].to_numpy(), alpha))
                family.append(record)
            records.append(record)
        for record, p in zip(family, holm([r["p_value"] for r in family])):
            record["p_holm"] = p
    columns = ["dataset", "reference", "model", "n", "mean_diff", "test", "statistic", "p_value", "p_holm",
               "cohens_d", "shapiro_p"]
    return pd.DataFrame(records, columns=columns)


def rank_analysis(table: ResultsTable, alpha: float = 0.05) -> dict:
    """Friedman test and Nemenyi CD over the datasets where every row has runs.

    Returns ``{"datasets", "dropped" ({dataset: rows missing}), "ranks", "friedman", "cd"}``;
    ``friedman`` is None unless there are >= 3 rows and >= 2 complete datasets, ``cd`` is None
    unless there are >= 2 rows and >= 1 complete dataset.
    """
    complete = table.complete_datasets
    k, n = len(table.rows), len(complete)
    return {
        "datasets": complete,
        "dropped": {d: [r for r in table.rows if (r, d) not in table.scores]
                    for d in table.datasets if d not in complete},
        "ranks": table.avg_rank,
        "friedman": friedman(table.mean[complete].to_numpy(), table.higher_is_better) if k >= 3 and n >= 2 else None,
        "cd": nemenyi_cd(k, n, alpha) if k >= 2 and n >= 1 else None,
    }


def markdown_table(header: list[str], lines: list[list[str]]) -> list[str]:
    """A Markdown table's lines from a header and rows of cell texts.

    >>> markdown_table(["model", "n"], [["gat", "10"]])
    ['| model | n |', '|---|---|', '| gat | 10 |']
    """
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(line) + " |" for line in lines]


def _bold_best(values: pd.Series, texts: list[str], lower: bool) -> list[str]:
    """Bold the texts whose value is the best of ``values`` (ties all bold)."""
    if values.isna().all():
        return texts
    best = values.min() if lower else values.max()
    return [f"**{t}**" if v == best else t for v, t in zip(values, texts)]


def _metric_title(table: ResultsTable) -> str:
    if table.metric != "main":
        name = table.metric
    else:
        by_metric = {}
        for dataset in table.datasets:
            by_metric.setdefault(table.main_metrics[dataset], []).append(dataset)
        name = "main metric (" + "; ".join(f"{m} on {', '.join(ds)}" for m, ds in by_metric.items()) + ")"
    unit = "in %, " if table.percent else ""
    return f"{table.split} {name}, {unit}mean ± sd over seeds"


def _table_lines(table: ResultsTable) -> list[str]:
    """The Table 1 block: one row per model, one column per dataset, then avg and avg rank."""
    digits = 2 if table.percent else 4
    mean, sd, n = table.mean, table.sd, table.n
    typical = int(np.nanmax(n.to_numpy())) if n.notna().any().any() else 0
    columns = []
    for d in table.datasets:
        texts = []
        for r in table.rows:
            if np.isnan(mean.at[r, d]):
                texts.append("-")
                continue
            text = f"{mean.at[r, d]:.{digits}f}"
            text += "" if np.isnan(sd.at[r, d]) else f" ± {sd.at[r, d]:.{digits}f}"
            texts.append(text + ("" if n.at[r, d] == typical else f" (n={int(n.at[r, d])})"))
        columns.append(_bold_best(mean[d], texts, not table.higher_is_better))
    avg, rank = table.avg, table.avg_rank
    columns.append(_bold_best(avg, ["-" if np.isnan(v) else f"{v:.{digits}f}" for v in avg],
                              not table.higher_is_better))
    columns.append(_bold_best(rank, ["-" if np.isnan(v) else f"{v:.2f}" for v in rank], True))
    lines = [[row, *cells] for row, cells in zip(table.rows, zip(*columns))]
    return markdown_table(["model", *table.datasets, "avg", "avg rank"], lines) + [
        "", f"Cells: {typical} seeds unless marked (n=...); '-': no runs; best per column in bold."]


def _notes(table: ResultsTable, ranks: dict) -> list[str]:
    notes = []
    for label, picks in table.picks.items():
        chosen = ", ".join(f"{d}: {m} (val {v:.2f})" for d, (m, v) in picks.items())
        over = f" over seeds {_seed_text(table.tune_seeds)}" if table.tune_seeds is not None else ""
        notes.append(f"- {label}: per dataset, the model with the best mean validation main metric{over} "
                     f"(never test): {chosen or 'no runs'}.")
    for label, gaps in table.incomplete.items():
        for dataset, text in gaps.items():
            notes.append(f"- {label} on {dataset}: left empty, tuning incomplete ({text}).")
    for label, absent in table.unrun.items():
        for dataset, models in absent.items():
            notes.append(f"- {label} on {dataset}: picked among the candidates that ran ({', '.join(models)} not run).")
    if ranks["dropped"]:
        dropped = "; ".join(f"{d} (missing: {', '.join(rows)})" for d, rows in ranks["dropped"].items())
        notes.append(f"- avg, avg rank and the Friedman test use the {len(ranks['datasets'])} dataset(s) where "
                     f"every row has runs; dropped: {dropped}.")
    return notes


def _p(p: float) -> str:
    return "-" if np.isnan(p) else f"{p:.3g}"


def _paired_lines(comparisons: pd.DataFrame, table: ResultsTable, alpha: float) -> list[str]:
    reference = comparisons.reference.iloc[0] if len(comparisons) else "?"
    unit = "percentage points" if table.percent else "metric units"
    lines = [f"## Paired tests: {reference} vs each model, by seed", "",
             f"diff = {reference} - model ({unit}), over the n seeds both have. Paired t-test when "
             f"Shapiro-Wilk on the differences does not reject normality at {alpha} (n >= 3), else Wilcoxon "
             f"signed-rank. p (Holm): Holm-corrected over the comparisons within each dataset; * marks "
             f"p (Holm) < {alpha}. d = mean diff / sd diff (inf when every difference is the same non-zero "
             f"value). n < 2: not tested.", ""]
    rows, digits = [], 2 if table.percent else 4
    for r in comparisons.itertuples():
        if r.n < 2:
            rows.append([r.dataset, r.model, str(r.n), "-", "not tested", "-", "-", "-", "-"])
            continue
        star = " *" if r.p_holm < alpha else ""
        rows.append([r.dataset, r.model, str(r.n), f"{r.mean_diff:+.{digits}f}", "t" if r.test == "t" else "Wilcoxon",
                     f"{r.statistic:.3g}", _p(r.p_value), _p(r.p_holm) + star, f"{r.cohens_d:.2f}"])
    header = ["dataset", "model", "n", "diff", "test", "statistic", "p", "p (Holm)", "d"]
    return lines + (markdown_table(header, rows) if rows else ["No dataset has the reference and another row."])


def _rank_lines(ranks: dict, alpha: float) -> list[str]:
    k, n = len(ranks["ranks"]), len(ranks["datasets"])
    lines = ["## Friedman test and Nemenyi critical difference", "",
             f"{k} rows over {n} complete dataset(s): {', '.join(ranks['datasets']) or 'none'}."]
    result = ranks["friedman"]
    if result is None:
        lines.append("Friedman test not run: it needs at least 3 rows and 2 complete datasets.")
    else:
        verdict = "rejects" if result["p_value"] < alpha else "does not reject"
        lines.append(f"Friedman chi-square = {result['statistic']:.3f}, p = {_p(result['p_value'])}: "
                     f"{verdict} equal ranks at {alpha}.")
    if ranks["cd"] is not None:
        order = ranks["ranks"].sort_values()
        lines.append(f"Nemenyi CD ({alpha}) = {ranks['cd']:.3f}; average ranks: "
                     + ", ".join(f"{row} {rank:.2f}" for row, rank in order.items()) + ".")
        pairs = [f"{a} vs {b} ({order[b] - order[a]:.2f})" for a, b in itertools.combinations(order.index, 2)
                 if order[b] - order[a] > ranks["cd"]]
        lines.append(f"Pairs whose average ranks differ by more than CD: {', '.join(pairs) or 'none'}.")
        if result is not None and result["p_value"] >= alpha:
            lines.append("(The Friedman test does not reject, so the Nemenyi post-hoc pairs are not to be read "
                         "as significant.)")
    return lines


def render_markdown(table: ResultsTable, comparisons: pd.DataFrame | None = None, ranks: dict | None = None,
                    alpha: float = 0.05) -> str:
    """The report as Markdown: the table and its notes, then paired tests and ranks when given."""
    ranks = ranks if ranks is not None else rank_analysis(table, alpha)
    lines = [f"# Results: {_metric_title(table)}", "", *_table_lines(table)]
    notes = _notes(table, ranks)
    lines += ["", *notes] if notes else []
    if comparisons is not None:
        lines += ["", *_paired_lines(comparisons, table, alpha)]
    lines += ["", *_rank_lines(ranks, alpha)]
    return "\n".join(lines) + "\n"


def table_frame(table: ResultsTable) -> pd.DataFrame:
    """The table as numbers for CSV: per dataset ``<d>``, ``<d>_sd``, ``<d>_n``; avg, avg_rank, picked."""
    frame = pd.DataFrame(index=pd.Index(table.rows, name="model"))
    mean, sd, n = table.mean, table.sd, table.n
    for d in table.datasets:
        frame[d], frame[f"{d}_sd"], frame[f"{d}_n"] = mean[d], sd[d], n[d].astype("Int64")
    frame["avg"], frame["avg_rank"] = table.avg, table.avg_rank
    frame["picked"] = ["; ".join(f"{d}={m}" for d, (m, _) in table.picks.get(row, {}).items())
                       for row in table.rows]
    return frame


def _seed_text(seeds: list[int]) -> str:
    """[0, 1, 2] -> '0-2'; other lists comma-separated."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def make_report(paths, models=None, reference: str | None = None, metric: str = "main", split: str = "test",
                tuned: dict | None = None, alpha: float = 0.05, tune_seeds=None) -> tuple[str, pd.DataFrame]:
    """Markdown report and CSV frame for the runs under ``paths`` (see ``results_table``).

    >>> markdown, frame = make_report(["runs"], reference="ltga_edge", tuned={"qfrozen": "qfrozen_*"})  # doctest: +SKIP
    """
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    table = results_table(collect_runs(paths), models, metric, split, tuned, reference, tune_seeds)
    comparisons = paired_comparisons(table, reference, alpha) if reference else None
    return render_markdown(table, comparisons, rank_analysis(table, alpha), alpha), table_frame(table)
