"""Statistics over a results table: paired tests against a reference row, Friedman + Nemenyi.

They apply :mod:`zoo.analysis.paired_tests` and :mod:`zoo.analysis.rank_tests` to the cells of a
:class:`~zoo.analysis.tables.ResultsTable`. Holm's correction runs over one family of
comparisons (:data:`HOLM_FAMILIES`): those within one dataset (one table column is one family,
the default) or every comparison of the table at once (the LTGA paper's Table 2, "corrected across
every cell"). The rank tests use only the datasets where every row has runs.
"""
from __future__ import annotations

import pandas as pd

from zoo.analysis.paired_tests import holm, paired_test
from zoo.analysis.rank_tests import friedman, nemenyi_cd
from zoo.analysis.runs import ReportError
from zoo.analysis.tables import ResultsTable

HOLM_FAMILIES = {"dataset": "over the comparisons within each dataset",
                 "table": "over every comparison of the table (all datasets at once)"}
"""Holm family name -> how the report describes it."""


def paired_comparisons(table: ResultsTable, reference: str, alpha: float = 0.05,
                       holm_family: str = "dataset") -> pd.DataFrame:
    """``paired_test`` of ``reference`` against every other row, per dataset, pairing by seed.

    Only seeds present in both cells are used (``n``); a pair with fewer than 2 is listed but not
    tested. ``mean_diff`` is reference minus row, in table units; ``p_holm`` is Holm-corrected
    over the tested comparisons of the same dataset (``holm_family="dataset"``) or of the whole
    table (``"table"``); the family is kept in ``comparisons.attrs["holm_family"]``.

    >>> from zoo.analysis import collect_runs, results_table
    >>> table = results_table(collect_runs([f"runs/ltga16/{d}_{m}" for d in ("texas", "cornell")
    ...                                     for m in ("gat", "gatv2", "ltga_edge")]))  # records in git
    >>> paired_comparisons(table, "ltga_edge", holm_family="table")[["dataset", "model", "mean_diff", "p_holm"]].round(3)
       dataset  model  mean_diff  p_holm
    0    texas    gat     -3.243     1.0
    1    texas  gatv2     -2.973     1.0
    2  cornell    gat      0.541     1.0
    3  cornell  gatv2     -3.243     1.0
    """
    if reference not in table.rows:
        raise ReportError(f"reference {reference!r} is not a row of the table; rows: {', '.join(table.rows)}")
    if holm_family not in HOLM_FAMILIES:
        raise ReportError(f"Holm family {holm_family!r} is not one of {', '.join(HOLM_FAMILIES)}")
    records, families = [], []
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
        families.append(family)
    if holm_family == "table":
        families = [[record for family in families for record in family]]
    for family in families:
        for record, p in zip(family, holm([r["p_value"] for r in family])):
            record["p_holm"] = p
    columns = ["dataset", "reference", "model", "n", "mean_diff", "test", "statistic", "p_value", "p_holm",
               "cohens_d", "shapiro_p"]
    comparisons = pd.DataFrame(records, columns=columns)
    comparisons.attrs["holm_family"] = holm_family
    return comparisons


def rank_analysis(table: ResultsTable, alpha: float = 0.05) -> dict:
    """Friedman test and Nemenyi CD over the datasets where every row has runs.

    Returns ``{"datasets", "dropped" ({dataset: rows missing}), "ranks", "friedman", "cd"}``;
    ``friedman`` is None unless there are >= 3 rows and >= 2 complete datasets, ``cd`` is None
    unless there are >= 2 rows and >= 1 complete dataset.

    >>> from zoo.analysis import collect_runs, results_table
    >>> table = results_table(collect_runs([f"runs/ltga16/{d}_{m}" for d in ("cora", "texas", "cornell")
    ...                                     for m in ("gat", "gatv2", "ltga_edge")]))  # records in git
    >>> ranks = rank_analysis(table)
    >>> ranks["ranks"].round(2).to_dict(), round(ranks["friedman"]["p_value"], 3), round(ranks["cd"], 3)
    ({'gat': 1.67, 'gatv2': 1.67, 'ltga_edge': 2.67}, 0.368, 1.914)
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
