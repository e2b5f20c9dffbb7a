"""Diagnostics and statistics over finished runs."""
from zoo.analysis.seed_summary import format_summary, summarize_seeds

__all__ = ["format_summary", "summarize_seeds"]
