"""Non-neural reference models for the molecular benchmarks."""
from zoo.baselines.fingerprint_forest import fit_predict_forest, morgan_fingerprints

__all__ = ["fit_predict_forest", "morgan_fingerprints"]
