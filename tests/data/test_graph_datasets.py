"""load_graph_dataset: dispatch on the card's source kind, the fallback source, argument checks."""
import re
import warnings

import pytest
import yaml

from zoo.data import DatasetError, DatasetNotFoundError, load_card, load_graph_dataset, make_dataloaders
from zoo.data.cards import card_path


def _offline(zoo_data, zoo_cache):
    return {"data_root": zoo_data, "cache_root": zoo_cache, "offline": True, "progress": False}


def test_arguments_are_checked():
    with pytest.raises(DatasetError, match="node_classification"):
        load_graph_dataset("cora")
    with pytest.raises(ValueError, match="limit"):
        load_graph_dataset("zinc_smiles", limit=1)
    with pytest.raises(ValueError, match="card 'zinc_smiles' offers 'auto' or 'csv'"):
        load_graph_dataset("zinc_smiles", source="ogb")
    with pytest.raises(ValueError, match="card 'molhiv' offers 'auto' or 'ogb' or 'csv'"):
        load_graph_dataset("molhiv", source="dgl")


def test_molhiv_offline_falls_back_to_its_csv_source(zoo_data, zoo_cache):
    with pytest.warns(UserWarning, match="scaffold split computed here") as record:
        data = load_graph_dataset("molhiv", limit=300, **_offline(zoo_data, zoo_cache))
    assert "OGB folder 'ogbg_molhiv' not found" in str(record[0].message)  # the reason is passed on
    assert data.split_source == "scaffold split computed here; OGB membership unverified"
    assert data.source == "csv moleculenet/hiv" and data.metric == "roc_auc" and data.card == load_card("molhiv")
    assert len(data) == 299 and sum(data.sizes.values()) == 299
    assert [(b.row, b.line) for b in data.report] == [(137, 139)]
    assert "valence" in data.report[0].reason
    assert set(data.targets[:, 0].tolist()) <= {0.0, 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = load_graph_dataset("molhiv", limit=300, source="csv", **_offline(zoo_data, zoo_cache))
    assert quiet.dataset_id == data.dataset_id


def test_molhiv_ogb_offline_is_not_found(zoo_data, zoo_cache):
    with pytest.raises(DatasetNotFoundError, match=re.escape(load_card("molhiv")["source"]["url"])):
        load_graph_dataset("molhiv", source="ogb", **_offline(zoo_data, zoo_cache))


@pytest.mark.parametrize("name", ["molpcba", "zinc", "peptides_struct"])
def test_not_staged_datasets_raise_not_found_with_url(name, zoo_data, zoo_cache):
    url = load_card(name)["source"]["url"]
    with pytest.raises(DatasetNotFoundError, match=re.escape(url)):
        load_graph_dataset(name, **_offline(zoo_data, zoo_cache))


def test_card_and_source_must_agree_on_num_tasks(zoo_data, zoo_cache, tmp_path, monkeypatch):
    card = yaml.safe_load(card_path("zinc_smiles").read_text())
    (tmp_path / "zinc_two.yaml").write_text(yaml.safe_dump({**card, "name": "zinc_two", "num_tasks": 2}))
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path))
    with pytest.raises(DatasetError, match="gives 1 target column\\(s\\), the card .*zinc_two.yaml says num_tasks: 2"):
        load_graph_dataset("zinc_two", limit=20, **_offline(zoo_data, zoo_cache))


def test_positional_encodings_and_loaders(zoo_data, zoo_cache):
    data = load_graph_dataset("zinc_smiles", limit=64, pe={"lap_k": 4, "rwse_k": 8}, **_offline(zoo_data, zoo_cache))
    assert data.pe_spec == {"lap_k": 4, "rwse_k": 8, "version": 2} and data.cache_root == zoo_cache
    graph, y = next(iter(make_dataloaders(data, batch_size=16, seed=1)["train"]))
    assert graph.batch_size == 16 and y.shape == (16, 1)
    assert graph.ndata["lap_eigvec"].shape[1] == 4 and graph.ndata["rwse"].shape[1] == 8
