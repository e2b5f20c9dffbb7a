"""The OGB featurizer spec, SMILES CSV reading with its bad-row report, and penalized logP."""
import csv
import gzip
import math
import os
import sys

import numpy as np
import pytest
import torch
from ogb.utils import smiles2graph
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen

from zoo.data import DatasetError
from zoo.data.molecules import (
    FEATURIZER_SPEC,
    InvalidSmilesError,
    check_featurizer_spec,
    penalized_logp,
    read_smiles_csv,
    smiles_problem,
    smiles_to_graph,
)

SMILES = [
    "CCO",
    "C",  # one atom, no bonds
    "[Na+].[Cl-]",  # two components, no bonds
    "c1ccccc1C(=O)O",
    "C[C@H](N)C(=O)O",  # chirality
    "F/C=C/F",  # bond stereo
    "O=[N+]([O-])c1ccc2[nH]ccc2c1",
    "CC(C)(C)OC(=O)N1CCC[C@H]1C(=O)O",
]


@pytest.mark.parametrize("smiles", SMILES)
def test_graph_equals_ogb_smiles2graph(smiles):
    g = smiles_to_graph(smiles)
    ref = smiles2graph(smiles)
    assert g.ndata["feat"].dtype == torch.int64 and g.edata["feat"].dtype == torch.int64
    assert g.ndata["feat"].shape == (ref["num_nodes"], 9)
    assert g.edata["feat"].shape == (ref["edge_index"].shape[1], 3)
    np.testing.assert_array_equal(g.ndata["feat"].numpy(), ref["node_feat"])
    np.testing.assert_array_equal(g.edata["feat"].numpy(), ref["edge_feat"])
    np.testing.assert_array_equal(torch.stack(g.edges()).numpy(), ref["edge_index"])


def test_featurizer_spec():
    assert FEATURIZER_SPEC["name"] == "ogb-smiles2graph"
    assert FEATURIZER_SPEC["atom_feature_dims"] == list(get_atom_feature_dims())
    assert FEATURIZER_SPEC["bond_feature_dims"] == list(get_bond_feature_dims())
    assert len(FEATURIZER_SPEC["atom_feature_dims"]) == 9
    assert len(FEATURIZER_SPEC["bond_feature_dims"]) == 3
    check_featurizer_spec(dict(FEATURIZER_SPEC, ogb_version="1.0.0", rdkit_version="x"))
    with pytest.raises(DatasetError, match="atom_feature_dims"):
        check_featurizer_spec(dict(FEATURIZER_SPEC, atom_feature_dims=[28]))
    with pytest.raises(DatasetError, match="name"):
        check_featurizer_spec({"name": "benchmarking-gnns-zinc-typedict"})


@pytest.mark.parametrize(
    "smiles, reason",
    [
        ("", "empty SMILES"),
        ("   ", "empty SMILES"),
        ("C1CC", "syntax error"),
        ("CX", "syntax error"),
        ("C(C)(C)(C)(C)C", "valence"),
        ("[H]", None),  # a lone explicit H is an atom
    ],
)
def test_smiles_problems(smiles, reason):
    problem = smiles_problem(smiles)
    if reason is None:
        assert problem is None
        assert smiles_to_graph(smiles).num_nodes() == 1
    else:
        assert reason in problem
        with pytest.raises(InvalidSmilesError, match="Cannot featurize"):
            smiles_to_graph(smiles)


def _write_csv(path, rows, header=("smiles", "y1", "y2")):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_read_csv_skips_and_reports_bad_rows(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [
        ["CCO", "1.5", "0"],
        ["C1CC", "2", "1"],  # line 3: parse failure
        ["", "3", "1"],  # line 4: empty
        ["c1ccccc1", "", "nan"],  # NaN targets are kept
        ["C(C)(C)(C)(C)C", "5", "0"],  # line 6: valence
        ["CN", "6", "NA"],
    ])
    graphs, targets, rows, report, smiles = read_smiles_csv(path, "smiles", ["y1", "y2"], progress=False)
    assert len(graphs) == 3 and smiles == ["CCO", "c1ccccc1", "CN"]
    assert rows.tolist() == [0, 3, 5]
    assert targets.dtype == torch.float32 and targets.shape == (3, 2)
    assert targets[0].tolist() == [1.5, 0.0]
    assert math.isnan(targets[1, 0]) and math.isnan(targets[1, 1]) and math.isnan(targets[2, 1])
    assert [(b.row, b.line) for b in report] == [(1, 3), (2, 4), (4, 6)]
    assert "syntax error" in report[0].reason and report[1].reason == "empty SMILES"
    assert "valence" in report[2].reason and report[2].smiles == "C(C)(C)(C)(C)C"
    assert "line 3 (row 1): 'C1CC'" in str(report[0])


def test_read_csv_strict_lists_bad_rows(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [["CCO", 1, 2], ["C1CC", 1, 2], ["CN", 1, 2], ["", 1, 2]])
    with pytest.raises(InvalidSmilesError) as err:
        read_smiles_csv(path, "smiles", ["y1"], strict=True, progress=False)
    message = str(err.value)
    assert "2 invalid SMILES" in message and "line 3" in message and "line 5" in message
    assert "strict=False" in message


def test_read_csv_line_numbers_survive_blank_lines_and_gzip(tmp_path):
    text = "smiles,y1\nCCO,1\n\nC1CC,2\nCN,3\n"
    path = tmp_path / "m.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    table = read_smiles_csv(path, "smiles", "y1", progress=False)
    assert [str(b).split(":")[0] for b in table.report] == ["line 4 (row 1)"]
    assert table.targets[:, 0].tolist() == [1.0, 3.0]


def test_read_csv_missing_column_lists_columns(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [["CCO", 1, 2], ["CN", 1, 2]])
    with pytest.raises(DatasetError) as err:
        read_smiles_csv(path, "SMILES", ["y1", "label"], progress=False)
    message = str(err.value)
    assert "['SMILES', 'label']" in message and "['smiles', 'y1', 'y2']" in message


def test_read_csv_too_few_usable_rows(tmp_path):
    one = _write_csv(tmp_path / "one.csv", [["CCO", 1, 2], ["C1CC", 1, 2]])
    with pytest.raises(DatasetError, match="(?s)1 usable molecule.*at least 2.*line 3"):
        read_smiles_csv(one, "smiles", ["y1"], progress=False)
    assert len(read_smiles_csv(one, "smiles", ["y1"], min_rows=1, progress=False).graphs) == 1
    bad = _write_csv(tmp_path / "bad.csv", [["C1CC", 1, 2], ["", 1, 2]])
    with pytest.raises(DatasetError, match="0 usable molecule"):
        read_smiles_csv(bad, "smiles", ["y1"], progress=False)


def test_read_csv_non_numeric_target_names_line(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [["CCO", 1, 2], ["CN", "active", 2]])
    with pytest.raises(DatasetError, match="line 3.*'y1'.*'active'"):
        read_smiles_csv(path, "smiles", ["y1"], progress=False)


def test_read_csv_limit_and_no_targets(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [["CCO", 1, 2], ["CN", 1, 2], ["CC", 1, 2]])
    table = read_smiles_csv(path, "smiles", [], limit=2, progress=False)
    assert table.targets.shape == (2, 0) and table.smiles == ["CCO", "CN"]


def test_penalized_logp_ring_penalty():
    sys.path.append(os.path.join(RDConfig.RDContribDir, "SA_Score"))
    import sascorer

    for smiles, penalty in [("C1CCCCCCC1", 2), ("c1ccccc1", 0), ("CCO", 0), ("C1CCCCCCCCCC1CC2CCCCCCC2", 5)]:
        mol = Chem.MolFromSmiles(smiles)
        expected = Crippen.MolLogP(mol) - sascorer.calculateScore(mol) - penalty
        assert penalized_logp(smiles) == pytest.approx(expected, abs=1e-12)


def test_penalized_logp_parts_match_graphium_csv(zoo_data):
    """The CSV's logp is RDKit's MolLogP and its SA the Contrib SA score (first 300 rows)."""
    import pandas as pd

    sys.path.append(os.path.join(RDConfig.RDContribDir, "SA_Score"))
    import sascorer

    df = pd.read_csv(zoo_data / "zinc12k_graphium_csv" / "smiles_score.csv", nrows=300)
    close = 0
    for smiles, logp, sa in zip(df.SMILES, df.logp, df.SA):
        mol = Chem.MolFromSmiles(smiles)
        assert Crippen.MolLogP(mol) == pytest.approx(logp, abs=1e-9)
        close += abs(sascorer.calculateScore(mol) - sa) < 1e-6
        rings = max((len(r) for r in mol.GetRingInfo().AtomRings()), default=0)
        assert penalized_logp(smiles) == pytest.approx(logp - sa - max(0, rings - 6), abs=1e-5)
    assert close >= 299


def test_a_csv_that_is_not_utf8_is_a_named_error(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("smiles,name\nCCO,caf\xe9\n".encode("cp1252"))
    with pytest.raises(DatasetError, match="cannot be read as a UTF-8 CSV"):
        read_smiles_csv(path, "smiles", [], progress=False)
