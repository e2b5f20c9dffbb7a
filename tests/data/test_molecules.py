"""SMILES CSV reading with its bad-row report and its CSV errors, and penalized logP."""
import csv
import gzip
import math
import os
import sys

import pytest
import torch
from ogb.utils import smiles2graph
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen

from zoo.data import DatasetError
from zoo.data.featurizers import DgllifeFeaturizer, InvalidSmilesError
from zoo.data.molecules import CsvError, featurize_smiles, penalized_logp, read_smiles_csv


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


def test_read_csv_uses_the_featurizer_it_is_given(tmp_path):
    path = _write_csv(tmp_path / "m.csv", [["CCO", 1, 2], ["C1CC", 1, 2], ["c1ccccc1", 3, 4]])
    table = read_smiles_csv(path, "smiles", ["y1"], progress=False, featurizer=DgllifeFeaturizer())
    assert [tuple(g.ndata["feat"].shape) for g in table.graphs] == [(3, 74), (6, 74)]
    assert table.graphs[1].edata["feat"].dtype == torch.float32 and table.graphs[1].num_edges() == 12
    ogb = read_smiles_csv(path, "smiles", ["y1"], progress=False)  # the default: OGB's layout
    torch.testing.assert_close(ogb.graphs[0].ndata["feat"], torch.from_numpy(smiles2graph("CCO")["node_feat"]))
    graphs, kept, problems = featurize_smiles(["C", "", "CC"], DgllifeFeaturizer(), progress=False)
    assert kept == [0, 2] and problems == [(1, "", "empty SMILES")] and graphs[0].edata["feat"].shape == (0, 12)


@pytest.mark.parametrize("text, message", [
    ("smiles,y1\nCCO,1\nCN,2,7\n", "row 1 (line 3) has 3 cells but the header has 2 columns"),
    ("smiles,y1,y1\nCCO,1,2\nCN,2,3\n", "the header names column 'y1' 2 times (columns [2, 3])"),
    ("smiles,y1\nCCO,1\nCN,inf\n", "line 3: target column 'y1' holds 'inf', which is not a finite number"),
    ("smiles,y1\nCCO,-Infinity\nCN,2\n", "line 2: target column 'y1' holds '-Infinity', which is not a finite"),
    ("smiles,y1\n", "has a header but no data rows"),
    ("", "is empty; expected a header row"),
])
def test_csv_problems_are_csv_errors_naming_the_place(tmp_path, text, message):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(CsvError) as info:
        read_smiles_csv(path, "smiles", ["y1"], progress=False)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_folder_or_a_missing_file_is_named(tmp_path):
    with pytest.raises(CsvError, match="is a folder; give the path of a CSV file"):
        read_smiles_csv(tmp_path, "smiles", progress=False)
    with pytest.raises(CsvError, match="does not exist"):
        read_smiles_csv(tmp_path / "nope.csv", "smiles", progress=False)
