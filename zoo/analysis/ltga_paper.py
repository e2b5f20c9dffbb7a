"""The LTGA paper's results tables as data, and which zoo row each of its rows reports.

Transcribed from the paper's text (``ltga.txt``): Table 1 (main results), Table 4 (dot-product
scoring), Table 9 (frozen q), Table 10 (alpha-entmax), Table 11 (capacity-matched controls) and
Table 12 (heterophily architectures), every row of each. A cell is test accuracy in %, mean ± sd over
ten seeds, in the paper's column order :data:`PAPER_DATASETS`, with the row's printed ``Avg.``; row
names are the paper's, LaTeX doubling removed. tests/analysis/test_ltga_paper.py checks them against
the text, each row's printed Avg., and the rows the paper prints in several tables.

:data:`ZOO_ROWS` maps a report row (a recipe name without its dataset prefix, or a tuned / oracle
row of ``tools/report.py``) to the paper row that reports it. Choices:

* GATv2, LTGA-Head and LTGA-Edge are printed again in Tables 4 and 9-12 with the same numbers;
  ``gatv2``, ``ltga_head`` and ``ltga_edge`` cite Table 1. ``qfrozen_1.5`` and ``qfrozen_2.0`` are
  also Table 10's "q-softmax (frozen)" rows; they cite Table 9, the frozen-q sweep.
* ``entmax_2.0`` and ``sparsemax`` are one model: alpha-entmax at alpha = 2 is sparsemax (Peters et
  al., 2019), and since session 16 the ``sparsemax`` recipes are the ``entmax_2.0`` config, so a
  sweep copies those seeds (earlier ``normaliser: sparsemax`` ran ``edge_entmax`` at 2.0 as well).
  Both are set beside Table 10's "sparsemax (α=2)" row. ``entmax (tuned)`` over ``entmax_*`` (alpha
  in {1.2, 1.5, 2.0}) is the paper's tuned grid, "α-entmax (tuned on val.)".
* ``ltga_edge`` is the paper's gate (``edge_mlp: paper``); ``ltga_edge_wide`` has no paper row.
* The tuned and oracle rows are those ``--tuned qfrozen=qfrozen_*,entmax=entmax_*`` and
  ``--oracle qfrozen=qfrozen_*`` name.

>>> LTGA_PAPER.rows["ltga_edge"].cells["cora"], LTGA_PAPER.rows["ltga_edge"].table
((81.2, 1.0), 'Table 1')
"""
from __future__ import annotations

from dataclasses import dataclass

from zoo.analysis.tables import ResultsTable

PAPER_DATASETS = ("amazon_ratings", "citeseer", "cora", "cornell", "pubmed", "roman_empire", "texas", "wisconsin")
"""The paper's eight datasets, in its column order (Amz-Rat, CiteS., Cora, Cornell, PubMed, Rom-Emp, Texas, Wisc.)."""

# {table: {paper row: ((8 means), (8 sds), printed Avg.)}}, columns as PAPER_DATASETS.
TABLES = {
    "Table 1": {
        "GCN": ((41.6, 68.3, 80.5, 40.0, 78.8, 42.9, 45.9, 47.5),
                (0.4, 1.1, 1.0, 9.3, 1.0, 0.6, 15.0, 4.6), 55.7),
        "GAT": ((42.0, 69.3, 80.4, 42.2, 77.7, 56.1, 59.2, 50.6),
                (0.4, 1.0, 0.8, 7.3, 0.5, 0.7, 6.2, 7.3), 59.7),
        "GATv2": ((41.7, 69.2, 80.7, 36.8, 77.6, 71.0, 59.2, 48.0),
                  (0.7, 0.7, 0.7, 8.8, 0.7, 0.8, 5.5, 6.6), 60.5),
        "LTGA-Global": ((42.4, 69.0, 81.0, 35.1, 77.7, 72.3, 58.1, 47.6),
                        (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Layer": ((42.6, 69.0, 81.0, 35.1, 77.7, 72.4, 58.1, 47.6),
                       (0.6, 0.6, 0.7, 12.9, 0.6, 0.5, 5.9, 7.5), 60.4),
        "LTGA-Head": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                      (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Edge": ((42.8, 69.1, 81.2, 39.2, 77.5, 72.4, 58.6, 52.7),
                      (0.8, 0.9, 1.0, 11.1, 0.6, 0.9, 6.5, 6.5), 61.7),
    },
    "Table 4": {
        "Dot-product scoring + softmax": ((40.8, 68.7, 81.4, 42.7, 77.7, 62.8, 56.8, 51.2),
                                          (0.3, 0.5, 0.6, 6.7, 0.6, 0.7, 5.4, 8.0), 60.3),
        "Dot-product scoring + learned q": ((40.8, 68.7, 81.4, 42.7, 77.7, 65.3, 56.8, 51.2),
                                            (0.4, 0.5, 0.6, 6.7, 0.6, 0.8, 5.4, 8.0), 60.6),
        "GATv2 scoring + softmax": ((41.7, 69.2, 80.7, 36.8, 77.6, 71.0, 59.2, 48.0),
                                    (0.7, 0.7, 0.7, 8.8, 0.7, 0.8, 5.5, 6.6), 60.5),
        "GATv2 scoring + learned q": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                                      (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
    },
    "Table 9": {
        "q=0.5 (frozen)": ((41.1, 69.0, 81.0, 34.6, 77.6, 68.0, 58.4, 48.0),
                           (0.3, 0.7, 0.6, 12.2, 0.6, 0.5, 6.0, 7.0), 59.7),
        "q=0.8 (frozen)": ((41.4, 69.0, 81.0, 35.9, 77.7, 69.8, 58.1, 47.6),
                           (0.3, 0.7, 0.6, 13.2, 0.6, 0.5, 5.9, 8.0), 60.1),
        "q=1.0 (frozen)": ((41.9, 69.0, 81.0, 35.1, 77.7, 70.7, 58.1, 47.6),
                           (0.6, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.1),
        "q=1.2 (frozen)": ((42.2, 69.0, 80.9, 35.7, 77.6, 71.5, 58.1, 47.6),
                           (0.5, 0.7, 0.6, 12.9, 0.7, 0.7, 5.9, 7.3), 60.3),
        "q=1.5 (frozen)": ((42.5, 68.9, 80.7, 36.2, 77.5, 72.0, 57.6, 50.0),
                           (0.5, 0.7, 0.7, 12.5, 0.6, 0.5, 6.0, 10.1), 60.7),
        "q=2.0 (frozen)": ((42.8, 68.9, 80.2, 39.5, 77.4, 71.9, 56.2, 51.6),
                           (0.7, 0.7, 0.7, 9.6, 0.6, 0.5, 8.8, 6.3), 61.0),
        "LTGA-Head (learned q)": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                                  (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Edge (learned q_ij)": ((42.8, 69.1, 81.2, 39.2, 77.5, 72.4, 58.6, 52.7),
                                     (0.8, 0.9, 1.0, 11.1, 0.6, 0.9, 6.5, 6.5), 61.7),
        "Fixed-q (tuned on val.)": ((42.8, 69.0, 81.0, 39.5, 77.7, 72.0, 57.6, 51.6),
                                    (0.7, 0.7, 0.6, 9.6, 0.6, 0.5, 6.0, 6.3), 61.4),
        "Fixed-q (test oracle; not a baseline)": ((42.8, 69.0, 81.0, 39.5, 77.7, 72.0, 58.4, 51.6),
                                                  (0.7, 0.7, 0.6, 9.6, 0.6, 0.5, 6.0, 6.3), 61.5),
    },
    "Table 10": {
        "α-entmax, α=1.2": ((42.7, 68.9, 80.8, 35.9, 77.5, 71.4, 58.1, 48.6),
                            (0.6, 0.8, 0.7, 13.4, 0.8, 0.8, 5.9, 6.2), 60.5),
        "α-entmax, α=1.5": ((43.9, 68.6, 80.1, 39.5, 77.3, 72.3, 56.2, 48.4),
                            (0.5, 0.9, 0.6, 11.6, 0.7, 0.6, 9.3, 9.1), 60.8),
        "sparsemax (α=2)": ((44.7, 68.2, 78.9, 45.4, 77.0, 73.1, 57.3, 49.6),
                            (0.5, 0.9, 0.5, 5.9, 0.7, 0.5, 5.8, 7.7), 61.8),
        "q-softmax, q=1.5 (frozen)": ((42.5, 68.9, 80.7, 36.2, 77.5, 72.0, 57.6, 50.0),
                                      (0.5, 0.7, 0.7, 12.5, 0.6, 0.5, 6.0, 10.1), 60.7),
        "q-softmax, q=2.0 (frozen)": ((42.8, 68.9, 80.2, 39.5, 77.4, 71.9, 56.2, 51.6),
                                      (0.7, 0.7, 0.7, 9.6, 0.6, 0.5, 8.8, 6.3), 61.0),
        "LTGA-Head (learned q)": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                                  (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Edge (learned q_ij)": ((42.8, 69.1, 81.2, 39.2, 77.5, 72.4, 58.6, 52.7),
                                     (0.8, 0.9, 1.0, 11.1, 0.6, 0.9, 6.5, 6.5), 61.7),
        "α-entmax (tuned on val.)": ((44.7, 68.9, 80.8, 45.4, 77.0, 73.1, 58.1, 49.6),
                                     (0.5, 0.8, 0.7, 5.9, 0.7, 0.5, 5.9, 7.7), 62.2),
    },
    "Table 11": {
        "+ per-edge logit bias (q=1)": ((41.6, 69.1, 81.2, 39.2, 77.5, 70.8, 58.6, 52.7),
                                        (0.7, 0.9, 1.0, 11.1, 0.6, 0.8, 6.5, 6.5), 61.4),
        "+ per-edge logit scale (q=1)": ((44.0, 69.1, 81.2, 39.2, 77.5, 73.8, 58.6, 52.7),
                                         (0.6, 0.9, 1.0, 11.1, 0.6, 0.8, 6.5, 6.5), 62.0),
        "+ learned per-head temperature": ((42.7, 69.0, 81.0, 35.1, 77.7, 73.3, 58.1, 47.6),
                                           (0.6, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.6),
        "GATv2 (softmax)": ((41.7, 69.2, 80.7, 36.8, 77.6, 71.0, 59.2, 48.0),
                            (0.7, 0.7, 0.7, 8.8, 0.7, 0.8, 5.5, 6.6), 60.5),
        "LTGA-Head (learned q)": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                                  (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Edge (learned q_ij)": ((42.8, 69.1, 81.2, 39.2, 77.5, 72.4, 58.6, 52.7),
                                     (0.8, 0.9, 1.0, 11.1, 0.6, 0.9, 6.5, 6.5), 61.7),
    },
    "Table 12": {
        "H2GCN": ((45.3, 66.8, 80.4, 65.1, 73.8, 78.3, 77.0, 76.5),
                  (0.7, 1.9, 0.9, 5.3, 1.0, 0.7, 7.5, 6.5), 70.4),
        "GPR-GNN": ((44.0, 70.1, 81.8, 42.7, 77.9, 72.6, 55.9, 60.4),
                    (0.7, 0.4, 0.7, 4.4, 0.8, 0.5, 6.2, 12.6), 63.2),
        "FAGCN": ((42.2, 66.2, 80.1, 43.2, 77.6, 64.8, 60.3, 55.1),
                  (0.5, 1.8, 0.9, 8.1, 0.6, 1.5, 5.8, 5.0), 61.2),
        "LINKX": ((44.7, 40.2, 44.3, 51.1, 39.4, 54.3, 56.2, 79.8),
                  (2.1, 7.0, 7.2, 24.8, 13.6, 2.5, 27.8, 4.1), 51.3),
        "GAT": ((42.0, 69.3, 80.4, 42.2, 77.7, 56.1, 59.2, 50.6),
                (0.4, 1.0, 0.8, 7.3, 0.5, 0.7, 6.2, 7.3), 59.7),
        "GATv2": ((41.7, 69.2, 80.7, 36.8, 77.6, 71.0, 59.2, 48.0),
                  (0.7, 0.7, 0.7, 8.8, 0.7, 0.8, 5.5, 6.6), 60.5),
        "LTGA-Head": ((42.5, 69.0, 81.0, 35.1, 77.7, 72.5, 58.1, 47.6),
                      (0.7, 0.6, 0.7, 12.9, 0.6, 0.6, 5.9, 7.5), 60.4),
        "LTGA-Edge": ((42.8, 69.1, 81.2, 39.2, 77.5, 72.4, 58.6, 52.7),
                      (0.8, 0.9, 1.0, 11.1, 0.6, 0.9, 6.5, 6.5), 61.7),
    },
}

ZOO_ROWS = {
    "gcn": ("Table 1", "GCN"),
    "gat": ("Table 1", "GAT"),
    "gatv2": ("Table 1", "GATv2"),
    "ltga_global": ("Table 1", "LTGA-Global"),
    "ltga_layer": ("Table 1", "LTGA-Layer"),
    "ltga_head": ("Table 1", "LTGA-Head"),
    "ltga_edge": ("Table 1", "LTGA-Edge"),
    "dot_softmax": ("Table 4", "Dot-product scoring + softmax"),
    "dot_ltga_head": ("Table 4", "Dot-product scoring + learned q"),
    "qfrozen_0.5": ("Table 9", "q=0.5 (frozen)"),
    "qfrozen_0.8": ("Table 9", "q=0.8 (frozen)"),
    "qfrozen_1.0": ("Table 9", "q=1.0 (frozen)"),
    "qfrozen_1.2": ("Table 9", "q=1.2 (frozen)"),
    "qfrozen_1.5": ("Table 9", "q=1.5 (frozen)"),
    "qfrozen_2.0": ("Table 9", "q=2.0 (frozen)"),
    "qfrozen (tuned)": ("Table 9", "Fixed-q (tuned on val.)"),
    "qfrozen (test oracle; not a baseline)": ("Table 9", "Fixed-q (test oracle; not a baseline)"),
    "entmax_1.2": ("Table 10", "α-entmax, α=1.2"),
    "entmax_1.5": ("Table 10", "α-entmax, α=1.5"),
    "entmax_2.0": ("Table 10", "sparsemax (α=2)"),
    "sparsemax": ("Table 10", "sparsemax (α=2)"),
    "entmax (tuned)": ("Table 10", "α-entmax (tuned on val.)"),
    "control_edge_bias": ("Table 11", "+ per-edge logit bias (q=1)"),
    "control_edge_scale": ("Table 11", "+ per-edge logit scale (q=1)"),
    "control_head_temperature": ("Table 11", "+ learned per-head temperature"),
    "h2gcn": ("Table 12", "H2GCN"),
    "gprgnn": ("Table 12", "GPR-GNN"),
    "fagcn": ("Table 12", "FAGCN"),
    "linkx": ("Table 12", "LINKX"),
}
"""Report row -> (paper table, paper row) that reports it."""


@dataclass(frozen=True)
class PaperRow:
    """One row of a paper's table: ``cells[dataset] = (mean, sd)`` and the printed average."""

    table: str
    name: str
    cells: dict
    avg: float


@dataclass(frozen=True)
class Paper:
    """A paper's numbers beside a report: its title, what its cells measure, its datasets, and the
    paper row of each report row.

    With a paper, a report's averages and rank tests run over two blocks of datasets
    (:meth:`blocks`): the paper's own (accuracy), then all datasets of the runs.
    """

    title: str
    measure: str
    datasets: tuple
    rows: dict

    def cell(self, row: str, dataset: str) -> tuple[float, float] | None:
        """The paper's (mean, sd) for a report row on a dataset, None where the paper has none."""
        found = self.rows.get(row)
        return found.cells.get(dataset) if found else None

    def blocks(self, table: ResultsTable) -> list[tuple[str, ResultsTable]]:
        """``[(label, table restricted to the block)]``: the paper's datasets present in ``table``,
        then all of the table's datasets when some lie outside the paper's (each block only if non-empty)."""
        inside = table.restricted(self.datasets)
        blocks = [("paper's datasets", inside)] if inside.datasets else []
        if len(inside.datasets) < len(table.datasets):
            blocks.append(("all datasets", table))
        return blocks

    def avg_comparable(self, block: ResultsTable) -> bool:
        """Whether a block averages over exactly the paper's datasets, so its Avg. can stand beside ours."""
        return set(block.complete_datasets) == set(self.datasets)

    def notes(self, table: ResultsTable, rows: list[str]) -> list[str]:
        """Report bullets: which paper table each shown row's brackets come from, rows and datasets
        the paper lacks, and whether the paper's Avg. is comparable to ours."""
        by_table: dict = {}
        for row in rows:
            if row in self.rows:
                by_table.setdefault(self.rows[row].table, []).append(f'{row} = "{self.rows[row].name}"')
        in_table_order = sorted(by_table.items(), key=lambda item: (len(item[0]), item[0]))  # Table 9 before 10
        notes = [f"- [bracketed]: {self.title}'s {self.measure}, {name}: {', '.join(cited)}."
                 for name, cited in in_table_order]
        unmatched = [row for row in rows if row not in self.rows]
        if unmatched:
            notes.append(f"- No row of {self.title} for: {', '.join(unmatched)}.")
        outside = [d for d in table.datasets if d not in self.datasets]
        if outside:
            notes.append(f"- Not in {self.title} (no brackets): "
                         + ", ".join(f"{d} ({table.main_metrics.get(d, table.metric)})" for d in outside) + ".")
        inside = table.restricted(self.datasets)
        if not self.avg_comparable(inside):
            lacking = [d for d in self.datasets if d not in inside.complete_datasets]
            notes.append(f"- {self.title[0].upper() + self.title[1:]}'s Avg. (over its {len(self.datasets)} "
                         f"datasets) is not set beside ours: ours over the paper's datasets lacks {', '.join(lacking)} "
                         "(no runs, or not by every row), so the two would average different datasets.")
        return notes


def paper_row(table: str, name: str) -> PaperRow:
    """The row ``name`` of ``table`` as a :class:`PaperRow`.

    >>> paper_row("Table 12", "H2GCN").cells["texas"]
    (77.0, 7.5)
    """
    means, sds, avg = TABLES[table][name]
    return PaperRow(table, name, dict(zip(PAPER_DATASETS, zip(means, sds))), avg)


LTGA_PAPER = Paper("the LTGA paper", "test accuracy (%, mean ± sd over 10 seeds)", PAPER_DATASETS,
                   {row: paper_row(table, name) for row, (table, name) in ZOO_ROWS.items()})
"""The LTGA paper beside a report (``tools/report.py --paper ltga``)."""
