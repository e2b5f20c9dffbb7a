"""Morgan-fingerprint forest against RDKit's own bit list and scikit-learn fitted by hand."""
import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem
from sklearn.ensemble import RandomForestRegressor

from zoo.baselines import fit_predict_forest, morgan_fingerprints

SMILES = ["CCO", "CCN", "CCCC", "c1ccccc1", "c1ccccc1O", "CC(=O)O", "CCOCC", "C1CCCCC1", "CC(C)O", "OCCO"]


def test_bits_match_rdkit_classic_morgan_api():
    x = morgan_fingerprints(SMILES, radius=2, n_bits=1024)
    for row, s in zip(x, SMILES):
        expected = AllChem.GetMorganFingerprintAsBitVect(Chem.MolFromSmiles(s), 2, nBits=1024)
        assert set(np.flatnonzero(row)) == set(expected.GetOnBits())


def test_regression_equals_a_forest_fitted_by_hand_and_skips_nan_rows():
    y = np.arange(len(SMILES), dtype=float)
    y2 = np.stack([y, -y], 1)
    y2[[1, 4], 1] = np.nan
    pred = fit_predict_forest(SMILES[:8], y2[:8], SMILES[8:], seed=3, n_estimators=20)
    x = morgan_fingerprints(SMILES)
    keep = ~np.isnan(y2[:8, 1])
    by_hand = RandomForestRegressor(n_estimators=20, random_state=3).fit(x[:8][keep], y2[:8, 1][keep]).predict(x[8:])
    assert pred.shape == (2, 2) and np.allclose(pred[:, 1], by_hand)


def test_classification_gives_probabilities_and_bad_input_is_named():
    labels = np.array([0, 1] * 5, dtype=float)
    proba = fit_predict_forest(SMILES, labels, SMILES, task="classification", n_estimators=10)
    assert ((proba >= 0) & (proba <= 1)).all()
    with pytest.raises(ValueError, match="'C1CC'"):
        morgan_fingerprints(["CCO", "C1CC"])
    with pytest.raises(ValueError, match="task must be"):
        fit_predict_forest(SMILES, labels, SMILES, task="ranking")
