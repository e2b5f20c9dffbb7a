"""Critical-difference diagram numbers (Demsar 2006, Section 3.2.4; the LTGA paper's Figure 2):
average ranks, the Nemenyi critical difference and the groups of models it cannot tell apart.

The ranks and CD come from :mod:`zoo.analysis.rank_tests`; a group (a bar in the diagram) is a
maximal run of models, in rank order, whose average ranks span less than the CD (Demsar: two
models differ significantly when their average ranks differ by at least the CD).
"""
from __future__ import annotations

import numpy as np

from zoo.analysis.rank_tests import average_ranks, nemenyi_cd
from zoo.analysis.runs import ReportError
from zoo.analysis.tables import ResultsTable


def indistinguishable_groups(ranks, cd: float) -> list[list[int]]:
    """Maximal sets of models (indices, best rank first) whose average ranks span less than ``cd``;
    single models are left out.

    >>> indistinguishable_groups([3.143, 2.000, 2.893, 1.964], 1.12)   # Demsar (2006), Figure 1(a)
    [[3, 1, 2], [2, 0]]
    """
    ranks = np.asarray(ranks, dtype=float)
    order = np.argsort(ranks, kind="stable")
    groups, last_end = [], -1
    for start in range(len(order)):
        end = start
        while end + 1 < len(order) and ranks[order[end + 1]] - ranks[order[start]] < cd:
            end += 1
        if end > start and end > last_end:
            groups.append([int(i) for i in order[start:end + 1]])
        last_end = max(last_end, end)
    return groups


def critical_difference(matrix, names: list[str], higher_is_better: bool = True, alpha: float = 0.05) -> dict:
    """From a models x datasets matrix of scores (no missing cell): ``names``, ``ranks`` (average
    ranks, 1 best), ``cd`` (Nemenyi at ``alpha``), ``groups`` (:func:`indistinguishable_groups`,
    as lists of names) and ``datasets`` (their number).

    >>> r = critical_difference([[0.9, 0.8], [0.7, 0.6], [0.5, 0.4]], ["a", "b", "c"])
    >>> r["ranks"].tolist(), round(r["cd"], 3), r["groups"]
    ([1.0, 2.0, 3.0], 2.344, [['a', 'b', 'c']])
    """
    matrix = np.asarray(matrix, dtype=float)
    if len(names) != matrix.shape[0]:
        raise ValueError(f"{len(names)} names for {matrix.shape[0]} rows of scores")
    ranks = average_ranks(matrix, higher_is_better)
    cd = nemenyi_cd(matrix.shape[0], matrix.shape[1], alpha)
    groups = [[names[i] for i in group] for group in indistinguishable_groups(ranks, cd)]
    return {"names": list(names), "ranks": ranks, "cd": cd, "groups": groups, "datasets": matrix.shape[1],
            "alpha": alpha}


def table_critical_difference(table: ResultsTable, alpha: float = 0.05) -> dict:
    """:func:`critical_difference` of a results table's seed means over its complete datasets (those
    the report's average ranks use), plus ``dataset_names``."""
    complete = table.complete_datasets
    if len(table.rows) < 2 or not complete:
        raise ReportError(f"a critical-difference diagram needs >= 2 rows with runs on a common dataset; the table has "
                          f"{len(table.rows)} row(s) and {len(complete)} dataset(s) where every row has runs")
    result = critical_difference(table.mean[complete].to_numpy(), list(table.rows), table.higher_is_better, alpha)
    return {**result, "dataset_names": complete}
