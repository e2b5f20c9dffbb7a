"""Each cell of a results table seed by seed: the numbers behind its mean ± sd and paired tests."""
from __future__ import annotations

from zoo.analysis.rendering import markdown_table, number, unit_text
from zoo.analysis.tables import ResultsTable


def render_per_seed(table: ResultsTable) -> str:
    """One line per (row, dataset) cell with runs, one column per seed any cell has ("-" where the
    cell lacks that seed), in the table's units and digits.

    >>> from zoo.analysis import collect_runs, results_table
    >>> print(render_per_seed(results_table(collect_runs(["runs/ltga16/texas_gat", "runs/ltga16/texas_ltga_edge"]))))
    | model | dataset | metric | seed 0 | seed 1 | seed 2 | seed 3 | seed 4 | seed 5 | seed 6 | seed 7 | seed 8 | seed 9 |
    |---|---|---|---|---|---|---|---|---|---|---|---|---|
    | gat | texas | accuracy | 62.16 | 59.46 | 29.73 | 67.57 | 48.65 | 59.46 | 48.65 | 62.16 | 56.76 | 43.24 |
    | ltga_edge | texas | accuracy | 64.86 | 62.16 | 45.95 | 59.46 | 43.24 | 35.14 | 43.24 | 51.35 | 48.65 | 51.35 |
    <BLANKLINE>
    test split, in %, per seed; a tuned row shows the seeds of the model it picked.
    """
    cells = [(row, dataset) for row in table.rows for dataset in table.datasets if (row, dataset) in table.scores]
    seeds = sorted({int(seed) for cell in cells for seed in table.scores[cell].index})
    lines = []
    for row, dataset in cells:
        scores = table.scores[row, dataset]
        metric = table.main_metrics[dataset] if table.metric == "main" else table.metric
        digits = table.digits(dataset)
        lines.append([row, dataset, metric] + [number(scores[s], digits) if s in scores.index else "-" for s in seeds])
    unit = unit_text(table, "in %")
    return "\n".join(markdown_table(["model", "dataset", "metric"] + [f"seed {s}" for s in seeds], lines) + [
        "", f"{table.split} split{', ' + unit if unit else ''}, per seed; a tuned row shows the seeds of the model "
            "it picked."]) + "\n"
