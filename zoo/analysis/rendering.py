"""A results table and its statistics as Markdown (the report) or as numbers (for CSV).

:func:`render_markdown` writes the table with its notes, the paired tests and the rank tests;
:func:`table_frame` gives the table's numbers; :func:`markdown_table` is the table syntax that the
diagnostics and timing tables share.

With a :class:`~zoo.analysis.ltga_paper.Paper`, each cell the paper reports reads ``ours [paper]``,
and avg, avg rank and the rank tests are given once per block of datasets (``Paper.blocks``): the
paper's own, then all of the runs'. Oracle rows are shown, never bolded, ranked or tested.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from zoo.analysis.ltga_paper import Paper
from zoo.analysis.runs import ReportError
from zoo.analysis.table_statistics import HOLM_FAMILIES, rank_analysis
from zoo.analysis.tables import ResultsTable


def markdown_table(header: list[str], lines: list[list[str]]) -> list[str]:
    """A Markdown table's lines from a header and rows of cell texts.

    >>> markdown_table(["model", "n"], [["gat", "10"]])
    ['| model | n |', '|---|---|', '| gat | 10 |']
    """
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(line) + " |" for line in lines]


def number(value: float, digits: int, sign: str = "") -> str:
    """``value`` with ``digits`` decimals, or in 3 significant digits from 1e6 on (the error of a
    model whose evaluation blew up), so that the table stays readable; ``sign="+"`` signs it always.

    >>> number(0.09291, 4), number(-332872010293.39, 4), number(0.0012, 4, "+")
    ('0.0929', '-3.33e+11', '+0.0012')
    """
    return f"{value:{sign}.3g}" if abs(value) >= 1e6 else f"{value:{sign}.{digits}f}"


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
    unit = unit_text(table, "in %")
    return f"{table.split} {name}, {unit + ', ' if unit else ''}mean ± sd over seeds"


def unit_text(table: ResultsTable, percent: str, own: str = "") -> str:
    """The table's unit: ``percent`` when every dataset is in percent, ``own`` when none is, else
    ``percent`` on the datasets that are and ``own`` (or "own units") elsewhere.

    >>> from zoo.analysis.tables import ResultsTable
    >>> mixed = ResultsTable("main", "test", [], ["molhiv", "peptides_func"], {}, {}, frozenset({"molhiv"}), True)
    >>> unit_text(mixed, "percentage points", "metric units")
    'percentage points on molhiv, metric units elsewhere'
    """
    if table.percent:
        return percent
    inside = [d for d in table.datasets if d in table.percent_datasets]
    return f"{percent} on {', '.join(inside)}, {own or 'own units'} elsewhere" if inside else own


def _cell_texts(table: ResultsTable, rows: list[str], paper: Paper | None) -> tuple[list[list[str]], int]:
    """Per dataset, each row's ``mean ± sd`` (``(n=...)`` off the usual seed count; best of the
    ranked rows bold; `` [paper mean ± sd]`` where the paper has the cell), and the usual count."""
    mean, sd, n = (table.cells(stat, rows) for stat in ("mean", "std", "count"))
    typical = int(np.nanmax(n.to_numpy())) if n.notna().any().any() else 0
    columns = []
    for d in table.datasets:
        texts, digits = [], table.digits(d)
        for r in rows:
            if np.isnan(mean.at[r, d]):
                texts.append("-")
                continue
            text = number(mean.at[r, d], digits)
            text += "" if np.isnan(sd.at[r, d]) else f" ± {number(sd.at[r, d], digits)}"
            texts.append(text + ("" if n.at[r, d] == typical else f" (n={int(n.at[r, d])})"))
        ranked = mean[d].where(mean.index.isin(table.rows))
        texts = _bold_best(ranked, texts, not table.higher_is_better)
        cited = [paper.cell(r, d) if paper else None for r in rows]
        columns.append([t + (f" [{c[0]:.1f} ± {c[1]:.1f}]" if c else "") for t, c in zip(texts, cited)])
    return columns, typical


def _average_columns(table: ResultsTable, block: ResultsTable, rows: list[str], paper: Paper | None) -> list:
    """The avg and avg rank columns of one block; oracle rows get an avg only where complete, no rank."""
    complete = block.complete_datasets
    digits = table.digits(complete[0] if complete else None)  # avg is NaN unless their units agree
    avg = block.avg.reindex(rows)
    if table.oracles and complete and block.units_agree(complete):
        avg.update(block.cells("mean", list(table.oracles))[complete].mean(axis=1, skipna=False))
    texts = _bold_best(avg.where(avg.index.isin(table.rows)),
                       ["-" if np.isnan(v) else number(v, digits) for v in avg], not table.higher_is_better)
    if paper and paper.avg_comparable(block):
        texts = [t + (f" [{paper.rows[r].avg:.1f}]" if r in paper.rows else "") for r, t in zip(rows, texts)]
    rank = block.avg_rank.reindex(rows)
    return [texts, _bold_best(rank, ["-" if np.isnan(v) else f"{v:.2f}" for v in rank], True)]


def _table_lines(table: ResultsTable, blocks: list[tuple[str, ResultsTable]], paper: Paper | None) -> list[str]:
    """The Table 1 block: one row per model (oracle rows last), one column per dataset, then avg and
    avg rank for each block of datasets."""
    rows = table.rows + list(table.oracles)
    columns, typical = _cell_texts(table, rows, paper)
    header = ["model", *table.datasets]
    for label, block in blocks:
        columns += _average_columns(table, block, rows, paper)
        header += [f"avg ({label})", f"avg rank ({label})"] if label else ["avg", "avg rank"]
    lines = [[row, *cells] for row, cells in zip(rows, zip(*columns))]
    legend = f"Cells: {typical} seeds unless marked (n=...); '-': no runs; best per column in bold"
    legend += f"; [...]: {paper.title}'s number (table named below)" if paper else ""
    legend += "; oracle rows are never bold, ranked or tested" if table.oracles else ""
    return markdown_table(header, lines) + ["", legend + "."]


def _seed_text(seeds: list[int]) -> str:
    """[0, 1, 2] -> '0-2'; other lists comma-separated."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _notes(table: ResultsTable, blocks: list[tuple[str, dict]], paper: Paper | None) -> list[str]:
    """Bullets under the table: tuned and oracle picks, empty tuned cells, unrun candidates, each
    block's datasets and dropped datasets, and the paper's citations."""
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
    for label, picks in table.oracles.items():
        chosen = ", ".join(f"{d}: {m} (test {v:.2f})" for d, (m, v) in picks.items())
        notes.append(f"- {label}: per dataset, the model with the best mean TEST main metric, an upper bound that "
                     f"no practitioner could pick; not in avg rank, paired tests or rank tests: {chosen or 'no runs'}.")
    for label, ranks in blocks:
        inside = [d for d in table.datasets if d in ranks["datasets"] or d in ranks["dropped"]]
        over = f" ({label}: {', '.join(inside)})" if label else ""
        if ranks["dropped"]:
            dropped = "; ".join(f"{d} (missing: {', '.join(rows)})" for d, rows in ranks["dropped"].items())
            notes.append(f"- avg, avg rank and the Friedman test{over} use the {len(ranks['datasets'])} dataset(s) "
                         f"where every row has runs; dropped: {dropped}.")
        elif label:
            notes.append(f"- avg, avg rank and the Friedman test{over} use every one of those datasets.")
        if not table.units_agree(ranks["datasets"]):
            inside = [d for d in ranks["datasets"] if d in table.percent_datasets]
            notes.append(f"- avg{over} left out: it would mix percentages ({', '.join(inside)}) with scores in "
                         "their metrics' own units; avg rank and the rank tests do not depend on units.")
    return notes + (paper.notes(table, table.rows + list(table.oracles)) if paper else [])


def _p(p: float) -> str:
    """A p-value in 3 significant digits, '-' for NaN."""
    return "-" if np.isnan(p) else f"{p:.3g}"


def _paired_lines(comparisons: pd.DataFrame, table: ResultsTable, alpha: float) -> list[str]:
    """The paired-tests section: how the tests were chosen, then one line per comparison."""
    reference = comparisons.reference.iloc[0] if len(comparisons) else "?"
    unit = unit_text(table, "percentage points", "metric units")
    family = HOLM_FAMILIES[comparisons.attrs.get("holm_family", "dataset")]
    lines = [f"## Paired tests: {reference} vs each model, by seed", "",
             f"diff = {reference} - model ({unit}), over the n seeds both have. Paired t-test when "
             f"Shapiro-Wilk on the differences does not reject normality at {alpha} (n >= 3), else Wilcoxon "
             f"signed-rank. p (Holm): Holm-corrected {family}; * marks "
             f"p (Holm) < {alpha}. d = mean diff / sd diff (inf when every difference is the same non-zero "
             f"value). n < 2: not tested.", ""]
    rows = []
    for r in comparisons.itertuples():
        if r.n < 2:
            rows.append([r.dataset, r.model, str(r.n), "-", "not tested", "-", "-", "-", "-"])
            continue
        star = " *" if r.p_holm < alpha else ""
        diff = number(r.mean_diff, table.digits(r.dataset), "+")
        rows.append([r.dataset, r.model, str(r.n), diff, "t" if r.test == "t" else "Wilcoxon",
                     f"{r.statistic:.3g}", _p(r.p_value), _p(r.p_holm) + star, f"{r.cohens_d:.2f}"])
    header = ["dataset", "model", "n", "diff", "test", "statistic", "p", "p (Holm)", "d"]
    return lines + (markdown_table(header, rows) if rows else ["No dataset has the reference and another row."])


def _rank_lines(ranks: dict, alpha: float, label: str = "") -> list[str]:
    """The Friedman and Nemenyi section (over the block ``label``, if any), saying why a test was not run."""
    k, n = len(ranks["ranks"]), len(ranks["datasets"])
    lines = ["## Friedman test and Nemenyi critical difference" + (f": {label}" if label else ""), "",
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
                    alpha: float = 0.05, paper: Paper | None = None) -> str:
    """The report as Markdown: the table and its notes, then paired tests and ranks when given.

    With ``paper`` (test accuracy only), cells the paper reports carry its number in brackets and
    the averages and rank tests are computed per block of datasets (``ranks`` is then not used).

    >>> from zoo.analysis import collect_runs, results_table
    >>> from zoo.analysis.ltga_paper import LTGA_PAPER
    >>> table = results_table(collect_runs(["runs/ltga16/cora_gat", "runs/ltga16/cora_ltga_edge"]))  # in git
    >>> print("\\n".join(render_markdown(table, paper=LTGA_PAPER).splitlines()[:5]))
    # Results: test main metric (accuracy on cora), in %, mean ± sd over seeds
    <BLANKLINE>
    | model | cora | avg (paper's datasets) | avg rank (paper's datasets) |
    |---|---|---|---|
    | gat | **81.49 ± 0.36** [80.4 ± 0.8] | **81.49** | **1.00** |
    """
    if paper is not None:
        _check_paper_metric(table, paper)
        blocks = paper.blocks(table)
        analyses = [(label, rank_analysis(block, alpha)) for label, block in blocks]
    else:
        blocks = [("", table)]
        analyses = [("", ranks if ranks is not None else rank_analysis(table, alpha))]
    lines = [f"# Results: {_metric_title(table)}", "", *_table_lines(table, blocks, paper)]
    notes = _notes(table, analyses, paper)
    lines += ["", *notes] if notes else []
    if comparisons is not None:
        lines += ["", *_paired_lines(comparisons, table, alpha)]
    for label, analysis in analyses:
        lines += ["", *_rank_lines(analysis, alpha, label)]
    return "\n".join(lines) + "\n"


def _check_paper_metric(table: ResultsTable, paper: Paper) -> None:
    """The paper's tables are test accuracy: refuse to set them beside another split or metric."""
    metrics = {table.main_metrics.get(d) if table.metric == "main" else table.metric
               for d in table.datasets if d in paper.datasets}
    if table.split != "test" or metrics - {"accuracy"}:
        raise ReportError(f"{paper.title} reports test accuracy, but this table is {table.split} "
                          f"{', '.join(sorted(map(str, metrics))) or table.metric}; drop the paper option or "
                          "report --split test --metric main")


def table_frame(table: ResultsTable, paper: Paper | None = None) -> pd.DataFrame:
    """The table as numbers for CSV: per dataset ``<d>``, ``<d>_sd``, ``<d>_n``; avg, avg_rank (over
    every complete dataset), picked; oracle rows last (no avg_rank). With ``paper``, also
    ``<d>_paper``, ``<d>_paper_sd``, ``paper_row`` and avg / avg_rank over the paper's datasets.

    >>> from zoo.analysis import collect_runs, results_table
    >>> from zoo.analysis.ltga_paper import LTGA_PAPER
    >>> table = results_table(collect_runs(["runs/ltga16/texas_gat", "runs/ltga16/texas_ltga_edge"]))  # in git
    >>> table_frame(table, paper=LTGA_PAPER)[["texas", "texas_sd", "texas_n", "texas_paper", "avg_rank"]].round(2)
               texas  texas_sd  texas_n  texas_paper  avg_rank
    model
    gat        53.78     11.28       10         59.2       1.0
    ltga_edge  50.54      9.37       10         58.6       2.0
    """
    rows = table.rows + list(table.oracles)
    frame = pd.DataFrame(index=pd.Index(rows, name="model"))
    mean, sd, n = (table.cells(stat, rows) for stat in ("mean", "std", "count"))
    for d in table.datasets:
        frame[d], frame[f"{d}_sd"], frame[f"{d}_n"] = mean[d], sd[d], n[d].astype("Int64")
        if paper and d in paper.datasets:
            cited = [paper.cell(r, d) or (np.nan, np.nan) for r in rows]
            frame[f"{d}_paper"], frame[f"{d}_paper_sd"] = [c[0] for c in cited], [c[1] for c in cited]
    complete = table.complete_datasets
    frame["avg"] = mean[complete].mean(axis=1, skipna=False) if complete and table.units_agree(complete) else np.nan
    frame["avg_rank"] = table.avg_rank
    if paper:
        inside = table.restricted(paper.datasets)
        done = inside.complete_datasets
        frame["avg_paper_datasets"] = mean[done].mean(axis=1, skipna=False) if done else np.nan
        frame["avg_rank_paper_datasets"] = inside.avg_rank
        frame["paper_row"] = [f"{paper.rows[r].table}: {paper.rows[r].name}" if r in paper.rows else "" for r in rows]
    picks = {**table.picks, **table.oracles}
    frame["picked"] = ["; ".join(f"{d}={m}" for d, (m, _) in picks.get(row, {}).items()) for row in rows]
    return frame
