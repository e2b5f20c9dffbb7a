"""The scaffold split: Murcko scaffolds, the group-filling rule by hand, and MoleculeNet HIV's
split sizes as the manifest (and OGB) publish them."""
import pandas as pd
import pytest

from zoo.data.scaffold import murcko_scaffold, scaffold_split, split_by_scaffold


def test_murcko_scaffolds():
    assert murcko_scaffold("CC(=O)Oc1ccccc1C(=O)O") == "c1ccccc1"  # aspirin: the benzene ring
    assert murcko_scaffold("c1ccc2ccccc2c1CC") == "c1ccc2ccccc2c1"
    assert murcko_scaffold("C[C@H](N)C(=O)O") == "" and murcko_scaffold("not a smiles") == ""
    assert murcko_scaffold("") == "" and murcko_scaffold(None) == ""


def test_split_rule_by_hand():
    # groups x {0, 2}, y {1, 4} then singletons w, v, u, t, s; order: size, then first index, descending
    split = split_by_scaffold(["x", "y", "x", "z", "y", "w", "v", "u", "t", "s"], 0.6, 0.2)
    assert split == {"train": [0, 1, 2, 4, 8, 9], "val": [6, 7], "test": [3, 5]}
    with pytest.raises(ValueError, match="frac_train"):
        split_by_scaffold(["a"], 0.9, 0.2)


def test_scaffold_split_of_smiles_is_deterministic():
    smiles = ["c1ccccc1C", "c1ccccc1O", "CCO", "C1CCCCC1N", "CC", "c1ccncc1"]
    split = scaffold_split(smiles)  # "" {2, 4} and benzene {0, 1} fill train (4 <= 4.8), pyridine val
    assert split == {"train": [0, 1, 2, 4], "val": [5], "test": [3]} == scaffold_split(smiles)


def test_hiv_scaffold_split_sizes_match_manifest(zoo_data):
    smiles = pd.read_csv(zoo_data / "moleculenet" / "hiv" / "HIV.csv").smiles.tolist()
    assert len(smiles) == 41127
    split = scaffold_split(smiles)
    assert {k: len(v) for k, v in split.items()} == {"train": 32901, "val": 4113, "test": 4113}
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(41127))
