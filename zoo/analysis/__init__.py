"""Diagnostics and statistics over finished runs (the report itself: :mod:`zoo.analysis.report`)."""
from zoo.analysis.paired_tests import cohens_d_paired, holm, paired_test
from zoo.analysis.rank_tests import average_ranks, friedman, nemenyi_cd, rank_matrix
from zoo.analysis.seed_summary import format_summary, summarize_seeds

__all__ = ["average_ranks", "cohens_d_paired", "format_summary", "friedman", "holm", "nemenyi_cd", "paired_test",
           "rank_matrix", "summarize_seeds"]
