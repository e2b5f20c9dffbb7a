"""Diagnostics and statistics over finished runs, and the results report that ``tools/report.py`` prints."""
from zoo.analysis.ablation_report import ablation_table, render_ablation
from zoo.analysis.csbm_report import csbm_table, render_csbm
from zoo.analysis.depth_report import render_depth
from zoo.analysis.diagnostics_report import diagnostics_table, render_diagnostics
from zoo.analysis.mechanism_report import mechanism_runs, render_mechanism
from zoo.analysis.oversmoothing import (directional_dirichlet_energy, mean_average_distance, mean_cosine_distance,
                                        oversmoothing_diagnostics)
from zoo.analysis.paired_tests import cohens_d_paired, holm, paired_test
from zoo.analysis.pruning_report import pruning_table, render_pruning
from zoo.analysis.rank_tests import average_ranks, friedman, nemenyi_cd, rank_matrix
from zoo.analysis.rendering import markdown_table, render_markdown, table_frame
from zoo.analysis.report import make_report
from zoo.analysis.runs import ReportError, collect_runs, per_seed_rows
from zoo.analysis.seed_summary import format_summary, summarize_seeds
from zoo.analysis.table_statistics import paired_comparisons, rank_analysis
from zoo.analysis.tables import ResultsTable, parse_tuned, pick_best, results_table
from zoo.analysis.timing_report import render_timing, timing_table

__all__ = ["ReportError", "ResultsTable", "ablation_table", "average_ranks", "cohens_d_paired", "collect_runs",
           "csbm_table", "diagnostics_table", "directional_dirichlet_energy", "mean_cosine_distance",
           "oversmoothing_diagnostics", "render_ablation", "render_csbm", "render_depth",
           "format_summary", "friedman", "holm", "make_report", "markdown_table", "mean_average_distance",
           "mechanism_runs", "nemenyi_cd", "paired_comparisons", "paired_test", "parse_tuned", "per_seed_rows",
           "pick_best", "pruning_table", "rank_analysis", "rank_matrix", "render_diagnostics", "render_markdown",
           "render_mechanism", "render_pruning", "render_timing", "results_table", "summarize_seeds", "table_frame",
           "timing_table"]
