"""A model trained from scratch with dgllife's featurizer (a recipe choosing it on a CSV card), exported,
fine-tuned on another CSV and used to predict: every card names dgllife's featurizer and every step
featurizes with it, never with OGB's; data featurized another way is refused."""
import pytest
import yaml

from tests.transfer.helpers import MODEL_ARGS, SMILES, write_csv
from zoo.data import DatasetError, load_csv_dataset, load_graph_dataset
from zoo.data.featurizers import DgllifeFeaturizer, OgbFeaturizer
from zoo.data.mirror import sha256_file
from zoo.engine.experiment import run_folder, run_recipe
from zoo.engine.export import export_run
from zoo.engine.recipe import build_recipe
from zoo.models.pretrained import load_pretrained
from zoo.nn import LinearFeatureEncoder
from zoo.transfer import TransferError, finetune, predict

DGLLIFE = "dgllife-canonical"
INPUTS = {"atom_features": 74, "bond_features": 12}


@pytest.fixture
def counted(monkeypatch):
    """Molecules featurized per featurizer class; OGB's must stay at 0 in a dgllife round trip."""
    calls = {"dgllife": 0, "ogb": 0}
    for key, cls in (("dgllife", DgllifeFeaturizer), ("ogb", OgbFeaturizer)):
        original = cls.mol_to_graph

        def counting(self, mol, key=key, original=original):
            calls[key] += 1
            return original(self, mol)

        monkeypatch.setattr(cls, "mol_to_graph", counting)
    return calls


@pytest.fixture
def toy_card(tmp_path, monkeypatch):
    """A CSV card ``toy`` (30 molecules, seeded random split) in temporary $ZOO_CARDS / $ZOO_DATA."""
    raw = tmp_path / "data" / "toy_raw"
    raw.mkdir(parents=True)
    write_csv(raw / "mols.csv", ["smiles", "y"], [[s, 0.1 * len(s)] for s in SMILES])
    card = {"name": "toy", "title": "toy", "task": "graph_regression", "num_tasks": 1, "metric": "mae",
            "featurizer": "ogb-smiles2graph", "citation": "none",
            "source": {"kind": "csv", "url": "https://example.org/mols.csv", "raw_folder": "toy_raw",
                       "files": {"mols.csv": sha256_file(raw / "mols.csv")},
                       "file_urls": {"mols.csv": "https://example.org/mols.csv"},
                       "smiles_column": "smiles", "target_columns": ["y"]},
            "split": {"protocol": "random", "fractions": [0.6, 0.2, 0.2], "split_source": "toy split"}}
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "toy.yaml").write_text(yaml.safe_dump(card))
    for key, value in {"ZOO_CARDS": tmp_path / "cards", "ZOO_DATA": tmp_path / "data", "ZOO_OFFLINE": "1"}.items():
        monkeypatch.setenv(key, str(value))


def test_dgllife_model_survives_train_finetune_predict(toy_card, counted, tmp_path, capsys):
    model = {"name": "siggate_gt", **{k: v for k, v in MODEL_ARGS.items() if k != "num_outputs"}}
    recipe = build_recipe({"dataset": "toy", "name": "toy_dgllife", "task": "graph_regression", "model": model,
                           "featurizer": DGLLIFE, "optim": {"epochs": 3, "batch_size": 8, "lr": 3e-3}})
    run_recipe(recipe, tmp_path / "runs", progress=False)
    assert counted == {"dgllife": len(SMILES), "ogb": 0}  # the card says OGB; the recipe's choice wins
    run = run_folder(recipe, tmp_path / "runs") / "seed0"
    assert yaml.safe_load((run / "config.yaml").read_text())["featurizer"] == DGLLIFE

    export_run(run, "toy_dgllife", "", directory=tmp_path / "zoo")  # no recipe file: no command
    trained = load_pretrained("toy_dgllife", directory=tmp_path / "zoo")
    assert trained.card["featurizer"] == DgllifeFeaturizer().spec
    assert {k: trained.card["model_args"][k] for k in INPUTS} == INPUTS
    assert isinstance(trained.node_encoder.atom, LinearFeatureEncoder) and trained.node_encoder.atom.in_features == 74
    assert isinstance(trained.edge_encoder, LinearFeatureEncoder) and trained.edge_encoder.in_features == 12

    other = write_csv(tmp_path / "other.csv", ["smiles", "logS"],
                      [[s, len(s) + i / 10] for i, s in enumerate(reversed(SMILES))] + [["C1CC", 1.0]])
    finetune(trained, other, target_cols="logS", epochs=2, seeds=[0, 1], out=tmp_path / "ft", progress=False)
    assert counted == {"dgllife": 3 * len(SMILES), "ogb": 0}  # the CSV once per seed, the bad row skipped
    tuned = load_pretrained(tmp_path / "ft" / "seed1" / "model.safetensors")
    assert tuned.card["featurizer"]["name"] == DGLLIFE and tuned.card["recipe"]["featurizer"] == DGLLIFE
    assert {k: tuned.card["model_args"][k] for k in INPUTS} == INPUTS and tuned.card["target_columns"] == ["logS"]

    preds = predict(tuned, ["CCO", "not a smiles", "c1ccccc1O"], progress=False)
    assert counted == {"dgllife": 3 * len(SMILES) + 2, "ogb": 0}
    assert preds.values.shape == (3, 1) and [bad.row for bad in preds.report] == [1]

    scratch = finetune(trained, other, target_cols="logS", epochs=1, from_scratch=True, out=tmp_path / "fs",
                       progress=False)  # the same architecture rebuilt from the card reads dgllife's features too
    assert scratch["pretrained"] == "from scratch" and counted["ogb"] == 0


def test_data_featurized_otherwise_is_refused(pretrained_path, regression_csv, tmp_path):
    dgllife_data = load_csv_dataset(regression_csv, "smiles", ["y1"], featurizer=DGLLIFE, cache_root=tmp_path,
                                    progress=False)
    with pytest.raises(TransferError, match="dataset 'csv:mols' was featurized with 'dgllife-canonical' but the "
                                            "checkpoint reads 'ogb-smiles2graph' features; load it with featurizer="):
        finetune(pretrained_path, dgllife_data, out=tmp_path / "ft", epochs=1, progress=False)
    assert not (tmp_path / "ft").exists()
    same = load_csv_dataset(regression_csv, "smiles", ["y1"], split="random", cache_root=tmp_path, progress=False)
    summary = finetune(pretrained_path, same, out=tmp_path / "ok", epochs=1, progress=False)
    assert summary["target_columns"] == ["y1"] and summary["data"] == "csv:mols"
    assert (summary["split"], summary["smiles_column"]) == ("given", None)  # the dataset's own split, not "random"
    card = load_pretrained(tmp_path / "ok" / "seed0" / "model.safetensors").card
    assert card["split"]["kind"] == "given" and card["dataset"]["molecules"] == len(same)


def test_a_dataset_card_of_smiles_takes_another_featurizer_and_others_refuse_it(zoo_data, tmp_path):
    roots = {"data_root": zoo_data, "cache_root": tmp_path, "offline": True, "progress": False}
    hiv = load_graph_dataset("molhiv", featurizer=DGLLIFE, limit=40, **roots)  # OGB's files absent: its csv source
    assert hiv.featurizer["name"] == DGLLIFE and hiv.source.startswith("csv") and hiv.model_inputs == INPUTS
    with pytest.raises(DatasetError, match="only a csv or dgllife source can be featurized with 'dgllife-canonical'"):
        load_graph_dataset("peptides_func", featurizer=DGLLIFE, **roots)
