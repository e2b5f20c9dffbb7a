"""Featurizers chosen by spec: OGB's layout against ogb.utils.smiles2graph, dgllife's against dgllife's
own graph builder, the two against each other (and RDKit) on every ESOL molecule, and the spec checks."""
import zipfile

import dgl
import numpy as np
import pytest
import torch
from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer, SMILESToBigraph, smiles_to_bigraph
from ogb.utils import smiles2graph
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from rdkit import Chem

from zoo.data import DatasetError
from zoo.data.featurizers import (
    FEATURIZER_SPEC,
    FEATURIZERS,
    DgllifeFeaturizer,
    InvalidSmilesError,
    OgbFeaturizer,
    ZincTypeDict,
    featurizer_from_spec,
    smiles_featurizers,
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
def test_ogb_graph_equals_ogb_smiles2graph(smiles):
    g = featurizer_from_spec("ogb-smiles2graph")(smiles)
    ref = smiles2graph(smiles)
    assert g.ndata["feat"].dtype == torch.int64 and g.edata["feat"].dtype == torch.int64
    np.testing.assert_array_equal(g.ndata["feat"].numpy(), ref["node_feat"])
    np.testing.assert_array_equal(g.edata["feat"].numpy(), ref["edge_feat"])
    np.testing.assert_array_equal(torch.stack(g.edges()).numpy(), ref["edge_index"])
    np.testing.assert_array_equal(smiles_to_graph(smiles).ndata["feat"].numpy(), ref["node_feat"])


@pytest.mark.parametrize("smiles", SMILES)
def test_dgllife_graph_equals_dgllife_and_has_ogbs_edges(smiles):
    g = DgllifeFeaturizer()(smiles)
    ref = smiles_to_bigraph(smiles, node_featurizer=CanonicalAtomFeaturizer("feat"),
                            edge_featurizer=CanonicalBondFeaturizer("feat"), canonical_atom_order=False)
    mol = Chem.MolFromSmiles(smiles)
    assert g.idtype == torch.int64 and g.num_nodes() == mol.GetNumAtoms() and g.num_edges() == 2 * mol.GetNumBonds()
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["feat"].shape == (mol.GetNumAtoms(), 74)
    torch.testing.assert_close(g.ndata["feat"], ref.ndata["feat"], rtol=0, atol=0)
    assert g.edata["feat"].shape == (2 * mol.GetNumBonds(), 12)  # [0, 12] without bonds, where dgllife has none
    if mol.GetNumBonds():
        torch.testing.assert_close(g.edata["feat"], ref.edata["feat"], rtol=0, atol=0)
        assert torch.equal(g.edata["feat"][0::2], g.edata["feat"][1::2])  # one row per direction of a bond
    # OGB's edge convention: bond k is edges 2k (i->j) and 2k+1 (j->i), no self-loops
    np.testing.assert_array_equal(torch.stack(g.edges()).numpy(), smiles2graph(smiles)["edge_index"])
    assert (g.ndata["feat"][:, :43].sum(1) == 1).all()  # dgllife's atom-type one-hot block (43 types)


def test_graphs_with_and_without_bonds_batch_together():
    featurizer = DgllifeFeaturizer()
    batch = dgl.batch([featurizer(s) for s in ("C", "CCO", "[Na+].[Cl-]")])
    assert batch.num_nodes() == 6 and batch.edata["feat"].shape == (4, 12)


def test_specs_kinds_and_model_inputs():
    ogb, life, zinc = (featurizer_from_spec(name) for name in FEATURIZERS)
    assert (ogb.kind, life.kind, zinc.kind) == ("categorical", "float", "types")
    assert ogb.spec == FEATURIZER_SPEC and FEATURIZER_SPEC["name"] == "ogb-smiles2graph"
    assert FEATURIZER_SPEC["atom_feature_dims"] == list(get_atom_feature_dims()) and (ogb.atom_width, ogb.bond_width) == (9, 3)
    assert FEATURIZER_SPEC["bond_feature_dims"] == list(get_bond_feature_dims())
    assert (life.atom_width, life.bond_width) == (74, 12) == (life.spec["atom_features"], life.spec["bond_features"])
    assert ogb.model_inputs() == {} and zinc.model_inputs() == {}
    assert life.model_inputs() == {"atom_features": 74, "bond_features": 12}
    assert smiles_featurizers() == ["ogb-smiles2graph", "dgllife-canonical"]
    assert type(featurizer_from_spec(life.spec)) is DgllifeFeaturizer and featurizer_from_spec(life) is life
    with pytest.raises(DatasetError, match="describes DGL's ZINC graphs and featurizes no SMILES"):
        ZincTypeDict()("CCO")


def test_a_stored_spec_must_have_this_installations_layout():
    featurizer_from_spec(dict(FEATURIZER_SPEC, ogb_version="1.0.0", rdkit_version="x"))  # versions may differ
    assert isinstance(featurizer_from_spec(dict(FEATURIZER_SPEC, ogb_version="0")), OgbFeaturizer)
    with pytest.raises(DatasetError, match=r"card.yaml: Featurizer mismatch.*atom_feature_dims: stored \[28\]"):
        featurizer_from_spec(dict(FEATURIZER_SPEC, atom_feature_dims=[28]), where="card.yaml")
    with pytest.raises(DatasetError, match="bond_features: stored 13, current 12"):
        featurizer_from_spec(dict(DgllifeFeaturizer().spec, bond_features=13))
    with pytest.raises(DatasetError, match="atom_feature_dims: stored None"):  # a stored spec lacking its layout
        featurizer_from_spec({"name": "ogb-smiles2graph"})
    with pytest.raises(DatasetError, match="featurizer 'dgllife-canonicl' is not one of .*Did you mean 'dgllife-canonical'"):
        featurizer_from_spec("dgllife-canonicl")


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
    for featurizer in (OgbFeaturizer(), DgllifeFeaturizer()):
        if reason is None:
            assert problem is None and featurizer(smiles).num_nodes() == 1
        else:
            assert reason in problem
            with pytest.raises(InvalidSmilesError, match="Cannot featurize"):
                featurizer(smiles)


def test_every_esol_molecule_has_the_same_atoms_and_bonds_in_dgllife_and_ogb(zoo_data, tmp_path, monkeypatch):
    """dgllife's ESOL class, featurized by dgllife itself (its default, canonical atom order), against
    OGB's smiles2graph and RDKit's counts, molecule by molecule."""
    from dgllife.data import ESOL

    with zipfile.ZipFile(tmp_path / "ESOL.zip", "w") as archive:  # the zip dgllife wants, in a scratch folder
        archive.write(zoo_data / "moleculenet" / "ESOL" / "delaney-processed.csv", arcname="delaney-processed.csv")
    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path))
    dataset = ESOL(SMILESToBigraph(node_featurizer=CanonicalAtomFeaturizer(), edge_featurizer=CanonicalBondFeaturizer()),
                   cache_file_path=str(tmp_path / "esol.bin"))
    assert len(dataset) == 1128
    for smiles, graph, _ in dataset:
        ogb = smiles2graph(smiles)
        mol = Chem.MolFromSmiles(smiles)
        assert graph.num_nodes() == ogb["num_nodes"] == mol.GetNumAtoms(), smiles
        assert graph.num_edges() == ogb["edge_index"].shape[1] == 2 * mol.GetNumBonds(), smiles
        assert graph.ndata["h"].shape == (mol.GetNumAtoms(), 74)
