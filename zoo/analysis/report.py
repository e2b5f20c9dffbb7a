"""Run folders -> the results report: Markdown with its statistics, and the table as a CSV frame.

:func:`make_report` chains the steps (:func:`report_table`, then :func:`render_report`), each
usable on its own:
:func:`~zoo.analysis.runs.collect_runs` (run folders -> rows),
:func:`~zoo.analysis.tables.results_table` (rows -> models x datasets, tuned picks),
:func:`~zoo.analysis.table_statistics.paired_comparisons` and
:func:`~zoo.analysis.table_statistics.rank_analysis` (statistics), then
:func:`~zoo.analysis.rendering.render_markdown` and :func:`~zoo.analysis.rendering.table_frame`.
"""
from __future__ import annotations

import pandas as pd

from zoo.analysis.rendering import render_markdown, table_frame
from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.table_statistics import paired_comparisons, rank_analysis
from zoo.analysis.tables import ResultsTable, results_table


def report_table(paths, models=None, reference: str | None = None, metric: str = "main", split: str = "test",
                 tuned: dict | None = None, tune_seeds=None) -> ResultsTable:
    """The results table of the runs under ``paths`` (see ``results_table``): what the report
    renders and the critical-difference figure ranks.

    >>> table = report_table(["runs"], reference="ltga_edge")  # doctest: +SKIP
    """
    return results_table(collect_runs(paths), models, metric, split, tuned, reference, tune_seeds)


def render_report(table: ResultsTable, reference: str | None = None, alpha: float = 0.05,
                  holm_family: str = "dataset") -> tuple[str, pd.DataFrame]:
    """Markdown report and CSV frame of ``table``; the paired tests' Holm family is ``holm_family``
    (see ``paired_comparisons``), named in the report."""
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    comparisons = paired_comparisons(table, reference, alpha, holm_family) if reference else None
    return render_markdown(table, comparisons, rank_analysis(table, alpha), alpha), table_frame(table)


def make_report(paths, models=None, reference: str | None = None, metric: str = "main", split: str = "test",
                tuned: dict | None = None, alpha: float = 0.05, tune_seeds=None,
                holm_family: str = "dataset") -> tuple[str, pd.DataFrame]:
    """Markdown report and CSV frame for the runs under ``paths``: :func:`report_table`, then
    :func:`render_report`.

    >>> markdown, frame = make_report(["runs"], reference="ltga_edge", tuned={"qfrozen": "qfrozen_*"})  # doctest: +SKIP
    """
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    return render_report(report_table(paths, models, reference, metric, split, tuned, tune_seeds), reference, alpha,
                         holm_family)
