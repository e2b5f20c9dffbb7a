"""Cards of source.kind dgllife: dgllife's MoleculeNet classes read the offline CSVs through a zip built
in the cache (never a download, never a write to ZOO_DATA), featurized by the featurizer asked for."""
import os

import pandas as pd
import pytest
import torch
import yaml
from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer, SMILESToBigraph
from ogb.utils import smiles2graph

from zoo.data import DatasetError, load_card, load_graph_dataset
from zoo.data.cards import card_path

ESOL_TARGET = "measured log solubility in mols per litre"


@pytest.fixture
def no_download(monkeypatch):
    """Any download by DGL's helper (which dgllife's classes call) fails the test."""
    import dgl.data.utils

    def refuse(url, *args, **kwargs):
        path = kwargs.get("path") or (args[0] if args else None)
        if path and os.path.exists(path):  # dgllife asks with overwrite=False: an existing file is not fetched
            return path
        raise AssertionError(f"tried to download {url}")

    for module in ("dgllife.data.esol", "dgllife.data.freesolv", "dgllife.data.bbbp"):
        monkeypatch.setattr(f"{module}.download", refuse)
    monkeypatch.setattr(dgl.data.utils, "download", refuse)


def _offline(zoo_data, cache):
    return {"data_root": zoo_data, "cache_root": cache, "offline": True, "progress": False}


def test_esol_with_dgllife_features_equals_dgllifes_own_graphs(zoo_data, tmp_path, no_download, monkeypatch):
    data = load_graph_dataset("esol", featurizer="dgllife-canonical", **_offline(zoo_data, tmp_path))
    assert data.featurizer["name"] == "dgllife-canonical" and data.source == "dgllife dgllife.data.ESOL moleculenet/ESOL"
    assert (tmp_path / "dgllife" / "ESOL.zip").is_file() and not data.report and len(data) == 1128
    # dgllife's class on the same zip, featurized by dgllife's own SMILES-to-graph builder
    from dgllife.data import ESOL

    monkeypatch.setenv("DGL_DOWNLOAD_DIR", str(tmp_path / "dgllife"))
    builder = SMILESToBigraph(node_featurizer=CanonicalAtomFeaturizer("feat"),
                              edge_featurizer=CanonicalBondFeaturizer("feat"), canonical_atom_order=False)
    reference = ESOL(builder, cache_file_path=str(tmp_path / "ref.bin"))
    for (smiles, ref, label), g, s, y in zip(reference, data.graphs, data.smiles, data.targets):
        assert s == smiles.strip() and torch.equal(g.ndata["feat"], ref.ndata["feat"]) and y.item() == label.item()
        assert torch.equal(torch.stack(g.edges()), torch.stack(ref.edges()).long())
        if ref.num_edges():
            assert torch.equal(g.edata["feat"], ref.edata["feat"])
    csv = pd.read_csv(zoo_data / "moleculenet" / "ESOL" / "delaney-processed.csv")
    torch.testing.assert_close(data.targets[:, 0], torch.tensor(csv[ESOL_TARGET].to_numpy(), dtype=torch.float32))


def test_esol_with_the_cards_featurizer_is_ogbs_smiles2graph(zoo_data, zoo_cache, no_download):
    data = load_graph_dataset("esol", seed=1, **_offline(zoo_data, zoo_cache))
    assert data.featurizer["name"] == load_card("esol")["featurizer"] == "ogb-smiles2graph"
    for g, smiles in zip(data.graphs[::50], data.smiles[::50]):
        assert torch.equal(g.ndata["feat"], torch.from_numpy(smiles2graph(smiles)["node_feat"]))


def test_freesolv_and_bbbp_load_with_dgllifes_molecule_counts(zoo_data, zoo_cache, no_download):
    freesolv = load_graph_dataset("freesolv", **_offline(zoo_data, zoo_cache))
    assert len(freesolv) == 642 and freesolv.sizes == {"train": 514, "val": 64, "test": 64}
    bbbp = load_graph_dataset("bbbp", featurizer="dgllife-canonical", **_offline(zoo_data, zoo_cache))
    csv = pd.read_csv(zoo_data / "moleculenet" / "bbbp" / "BBBP.csv")
    assert len(bbbp) == 2039 and len(bbbp.report) == len(csv) - 2039 == 11  # the MANIFEST's counts
    bad = bbbp.report[0]
    assert bad.line == bad.row + 2 and bad.smiles == csv.smiles[bad.row] and "RDKit parse failure" in bad.reason
    assert sorted(set(bbbp.targets[:, 0].tolist())) == [0.0, 1.0] and sum(bbbp.sizes.values()) == 2039
    assert bbbp.targets.sum().item() == csv.p_np.drop(index=[b.row for b in bbbp.report]).sum()


def test_a_card_whose_targets_differ_from_the_class_is_refused(zoo_data, tmp_path, monkeypatch, no_download):
    card = yaml.safe_load(card_path("freesolv").read_text())
    card["source"]["target_columns"] = ["calc"]
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "freesolv.yaml").write_text(yaml.safe_dump(card))
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path / "cards"))
    with pytest.raises(DatasetError, match=r"dgllife.data.FreeSolv reads targets \['expt'\], the card names \['calc'\]"):
        load_graph_dataset("freesolv", **_offline(zoo_data, tmp_path / "cache"))
