"""Atom/bond/type encoders, the linear encoder of float features and the node-feature combiner."""
import dgl
import pytest
import torch

from zoo.nn.encoders import AtomEncoder, BondEncoder, LinearFeatureEncoder, NodeFeatureEncoder, TypeDictEncoder
from zoo.nn.positional_encoders import LapPEDeepSet, RWSEEncoder, SignNetLapPE


@pytest.fixture(scope="module")
def aspirin():
    pytest.importorskip("rdkit")
    from ogb.utils import smiles2graph

    return smiles2graph("CC(=O)Oc1ccccc1C(=O)O")


def test_atom_and_bond_encoders_on_smiles2graph(aspirin):
    x = torch.from_numpy(aspirin["node_feat"])
    e = torch.from_numpy(aspirin["edge_feat"])
    atoms, bonds = AtomEncoder(8), BondEncoder(8)
    # one embedding table per categorical feature, rows summed
    want_atoms = sum(table.weight[x[:, i]] for i, table in enumerate(atoms.atom_embedding_list))
    want_bonds = sum(table.weight[e[:, i]] for i, table in enumerate(bonds.bond_embedding_list))
    torch.testing.assert_close(atoms(x), want_atoms)
    torch.testing.assert_close(bonds(e), want_bonds)
    assert atoms(x).shape == (13, 8) and bonds(e).shape == (26, 8)


def test_ogb_encoders_reject_other_feature_layouts():
    with pytest.raises(ValueError, match=r"\[\*, 9\]"):
        AtomEncoder(8)(torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[\*, 3\]"):
        BondEncoder(8)(torch.zeros(4, dtype=torch.long))


def test_type_dict_encoder():
    enc = TypeDictEncoder(28, 6)
    types = torch.tensor([0, 3, 27, 3])
    torch.testing.assert_close(enc(types), enc.embedding.weight[types])
    torch.testing.assert_close(enc(types[:, None]), enc(types))
    with pytest.raises(ValueError, match=r"\[0, 28\), got range \[0, 28\]"):
        enc(torch.tensor([0, 28]))


def test_node_feature_encoder_concatenates_atom_lap_and_rwse():
    g = dgl.to_bidirected(dgl.graph(([0, 1, 2], [1, 2, 3])))
    types = torch.tensor([1, 0, 4, 2])
    vec, val, rwse = torch.randn(4, 3), torch.rand(4, 3), torch.rand(4, 5)
    enc = NodeFeatureEncoder(20, atom_types=5, lap_pe=LapPEDeepSet(4), rwse=RWSEEncoder(5, 6)).eval()
    out = enc(g, types, lap_eigvec=vec, lap_eigval=val, rwse=rwse)
    assert out.shape == (4, 20)
    torch.testing.assert_close(out[:, :10], enc.atom(types))
    torch.testing.assert_close(out[:, 10:14], enc.lap_pe(vec, val))
    torch.testing.assert_close(out[:, 14:], enc.rwse(rwse))

    signnet = NodeFeatureEncoder(16, lap_pe=SignNetLapPE(4, phi_hidden=8)).eval()
    assert isinstance(signnet.atom, AtomEncoder)
    out = signnet(g, torch.zeros(4, 9, dtype=torch.long), lap_eigvec=vec)
    torch.testing.assert_close(out[:, 12:], signnet.lap_pe(g, vec))


def test_node_feature_encoder_errors():
    with pytest.raises(ValueError, match="dim=8 leaves no room"):
        NodeFeatureEncoder(8, rwse=RWSEEncoder(4, 8))
    with pytest.raises(TypeError, match="RWSEEncoder"):
        NodeFeatureEncoder(8, rwse=LapPEDeepSet(2))
    enc = NodeFeatureEncoder(8, atom_types=3, rwse=RWSEEncoder(4, 2))
    with pytest.raises(ValueError, match="rwse tensor is required"):
        enc(None, torch.tensor([0, 1]))


def test_linear_feature_encoder_on_dgllife_features():
    from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer, smiles_to_bigraph

    g = smiles_to_bigraph("CC(=O)Oc1ccccc1C(=O)O", node_featurizer=CanonicalAtomFeaturizer("h"),
                          edge_featurizer=CanonicalBondFeaturizer("e"), canonical_atom_order=False)
    atoms, bonds = LinearFeatureEncoder(74, 8), LinearFeatureEncoder(12, 8)
    x, e = g.ndata["h"], g.edata["e"]
    torch.testing.assert_close(atoms(x), x @ atoms.weight.T + atoms.bias)
    torch.testing.assert_close(bonds(e), e @ bonds.weight.T + bonds.bias)
    assert atoms(x).shape == (13, 8) and bonds(e).shape == (26, 8)
    torch.testing.assert_close(atoms.double()(x), atoms.double()(x.double()))  # the input follows the weights' dtype


def test_linear_feature_encoder_rejects_other_layouts():
    with pytest.raises(ValueError, match=r"features must be float \[\*, 74\].*got torch.int64 \(4, 9\)"):
        LinearFeatureEncoder(74, 8)(torch.zeros(4, 9, dtype=torch.long))  # OGB's categorical layout
    with pytest.raises(ValueError, match=r"got torch.float32 \(4, 12\)"):
        LinearFeatureEncoder(74, 8)(torch.zeros(4, 12))
    with pytest.raises(ValueError, match="in_features and dim must be >= 1"):
        LinearFeatureEncoder(0, 8)


def test_node_feature_encoder_reads_float_atom_features():
    g = dgl.to_bidirected(dgl.graph(([0, 1], [1, 2])))
    x, rwse = torch.rand(3, 74), torch.rand(3, 4)
    enc = NodeFeatureEncoder(16, rwse=RWSEEncoder(4, 4), atom_features=74).eval()
    assert isinstance(enc.atom, LinearFeatureEncoder) and enc.atom.out_features == 12
    out = enc(g, x, rwse=rwse)
    torch.testing.assert_close(out[:, :12], x @ enc.atom.weight.T + enc.atom.bias)
    torch.testing.assert_close(out[:, 12:], enc.rwse(rwse))
    with pytest.raises(ValueError, match="atom_types=28 .* and atom_features=74 .* both given"):
        NodeFeatureEncoder(16, atom_types=28, atom_features=74)
