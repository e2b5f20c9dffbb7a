"""The LTGA paper's figures from run folders: the numbers each figure shows (one module per
figure kind, testable without drawing), their matplotlib drawing (:mod:`.drawing`) and
:func:`write_figures`, which writes them all (``tools/report.py RUNS --plots DIR``)."""
from zoo.analysis.figures.calibration import expected_calibration_error, reliability_bins
from zoo.analysis.figures.critical_difference import (critical_difference, indistinguishable_groups,
                                                      table_critical_difference)
from zoo.analysis.figures.lorenz import attention_lorenz, lorenz_gini, pooled_lorenz
from zoo.analysis.figures.plots import FIGURES, write_figures
from zoo.analysis.figures.probe import COVARIATES, binned_means, edge_covariates, linear_probe
from zoo.analysis.figures.trajectories import gradient_norms, q_trajectories

__all__ = ["COVARIATES", "FIGURES", "attention_lorenz", "binned_means", "critical_difference", "edge_covariates",
           "expected_calibration_error", "gradient_norms", "indistinguishable_groups", "linear_probe", "lorenz_gini",
           "pooled_lorenz", "q_trajectories", "reliability_bins", "table_critical_difference", "write_figures"]
