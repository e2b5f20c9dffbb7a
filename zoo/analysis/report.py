"""Run folders -> the results report: Markdown with its statistics, and the table as a CSV frame.

:func:`make_report` chains the steps (:func:`report_table`, then :func:`render_report`), each
usable on its own:
:func:`~zoo.analysis.runs.collect_runs` (run folders -> rows),
:func:`~zoo.analysis.tables.results_table` (rows -> models x datasets, tuned picks),
:func:`~zoo.analysis.table_statistics.paired_comparisons` and
:func:`~zoo.analysis.table_statistics.rank_analysis` (statistics), then
:func:`~zoo.analysis.rendering.render_markdown` and :func:`~zoo.analysis.rendering.table_frame`.
``paper="ltga"`` sets the LTGA paper's numbers beside ours (:data:`PAPERS`, :mod:`zoo.analysis.ltga_paper`).
"""
from __future__ import annotations

import pandas as pd

from zoo.analysis.ltga_paper import LTGA_PAPER, Paper
from zoo.analysis.rendering import render_markdown, table_frame
from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.table_statistics import paired_comparisons
from zoo.analysis.tables import ResultsTable, results_table

PAPERS = {"ltga": LTGA_PAPER}
"""Name (``tools/report.py --paper NAME``) -> the paper whose numbers a report can set beside ours."""


def find_paper(name: str | None) -> Paper | None:
    """The paper called ``name`` in :data:`PAPERS` (None for None).

    >>> find_paper("ltga").title
    'the LTGA paper'
    """
    if name is None:
        return None
    if name not in PAPERS:
        raise ReportError(f"no paper named {name!r}; known: {', '.join(PAPERS)}")
    return PAPERS[name]


def report_table(paths, models=None, reference: str | None = None, metric: str = "main", split: str = "test",
                 tuned: dict | None = None, tune_seeds=None, oracle: dict | None = None) -> ResultsTable:
    """The results table of the runs under ``paths`` (see ``results_table``): what the report
    renders and the critical-difference figure ranks.

    >>> paths = [f"runs/ltga16/{d}_{m}" for d in ("cora", "texas", "cornell") for m in ("gat", "gatv2", "ltga_edge")]
    >>> report_table(paths, reference="ltga_edge").mean.round(2)  # records in git
                cora  texas  cornell
    gat        81.49  53.78    56.49
    gatv2      81.48  53.51    60.27
    ltga_edge  81.40  50.54    57.03
    """
    return results_table(collect_runs(paths), models, metric, split, tuned, reference, tune_seeds, oracle)


def figure_table(table: ResultsTable, paper: str | None = None) -> ResultsTable:
    """The table Figure 2 (the critical-difference diagram) ranks: with ``paper``, the block of its
    own datasets, as the report's first rank analysis (so ROC-AUC datasets are not ranked with
    accuracy ones); without one, or when the table has none of its datasets, ``table`` itself."""
    found = find_paper(paper)
    blocks = found.blocks(table) if found is not None else []
    return blocks[0][1] if blocks else table


def render_report(table: ResultsTable, reference: str | None = None, alpha: float = 0.05,
                  holm_family: str = "dataset", paper: str | None = None) -> tuple[str, pd.DataFrame]:
    """Markdown report and CSV frame of ``table``; the paired tests' Holm family is ``holm_family``
    (see ``paired_comparisons``), named in the report; ``paper`` (a name in :data:`PAPERS`) sets
    that paper's numbers beside ours and splits averages and rank tests by its datasets."""
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    found = find_paper(paper)
    comparisons = paired_comparisons(table, reference, alpha, holm_family) if reference else None
    return render_markdown(table, comparisons, alpha=alpha, paper=found), table_frame(table, found)


def make_report(paths, models=None, reference: str | None = None, metric: str = "main", split: str = "test",
                tuned: dict | None = None, alpha: float = 0.05, tune_seeds=None,
                holm_family: str = "dataset", oracle: dict | None = None,
                paper: str | None = None) -> tuple[str, pd.DataFrame]:
    """Markdown report and CSV frame for the runs under ``paths``: :func:`report_table`, then
    :func:`render_report`.

    >>> paths = [f"runs/ltga16/{d}_{m}" for d in ("cora", "texas", "cornell") for m in ("gat", "gatv2", "ltga_edge")]
    >>> markdown, frame = make_report(paths, reference="ltga_edge", paper="ltga")  # records in git
    >>> print(markdown.splitlines()[4])  # [the paper's Table 1]
    | gat | **81.49 ± 0.36** [80.4 ± 0.8] | **53.78 ± 11.28** [59.2 ± 6.2] | 56.49 ± 7.26 [42.2 ± 7.3] | 63.92 | **1.67** |
    >>> frame.loc["ltga_edge", ["cora", "cora_paper", "avg_rank"]].round(2).tolist()
    [81.4, 81.2, 2.67]
    """
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    table = report_table(paths, models, reference, metric, split, tuned, tune_seeds, oracle)
    return render_report(table, reference, alpha, holm_family, paper)
