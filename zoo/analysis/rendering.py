"""A results table and its statistics as Markdown (the report) or as numbers (for CSV).

:func:`render_markdown` writes the table with its notes, the paired tests and the rank tests;
:func:`table_frame` gives the table's numbers; :func:`markdown_table` is the table syntax that the
diagnostics and timing tables share.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from zoo.analysis.table_statistics import HOLM_FAMILIES, rank_analysis
from zoo.analysis.tables import ResultsTable


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
    """The report's title: split, metric (per dataset for 'main'), unit."""
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


def _seed_text(seeds: list[int]) -> str:
    """[0, 1, 2] -> '0-2'; other lists comma-separated."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _notes(table: ResultsTable, ranks: dict) -> list[str]:
    """Bullets under the table: tuned picks, empty tuned cells, unrun candidates, dropped datasets."""
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
    """A p-value in 3 significant digits, '-' for NaN."""
    return "-" if np.isnan(p) else f"{p:.3g}"


def _paired_lines(comparisons: pd.DataFrame, table: ResultsTable, alpha: float) -> list[str]:
    """The paired-tests section: how the tests were chosen, then one line per comparison."""
    reference = comparisons.reference.iloc[0] if len(comparisons) else "?"
    unit = "percentage points" if table.percent else "metric units"
    family = HOLM_FAMILIES[comparisons.attrs.get("holm_family", "dataset")]
    lines = [f"## Paired tests: {reference} vs each model, by seed", "",
             f"diff = {reference} - model ({unit}), over the n seeds both have. Paired t-test when "
             f"Shapiro-Wilk on the differences does not reject normality at {alpha} (n >= 3), else Wilcoxon "
             f"signed-rank. p (Holm): Holm-corrected {family}; * marks "
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
    """The Friedman and Nemenyi section, saying why a test was not run."""
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
