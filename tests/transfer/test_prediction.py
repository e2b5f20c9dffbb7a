"""predict(): same numbers as the trainer's evaluation, NaN rows for invalid SMILES, probabilities, errors."""
import copy

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from tests.transfer.helpers import MODEL_ARGS, SMILES
from zoo.data import InvalidSmilesError, add_positional_encodings, collate, smiles_to_graph
from zoo.data.graph_data import GraphSubset
from zoo.engine.graph_trainer import predict as trainer_predict
from zoo.models import create_model
from zoo.models.pretrained import load_pretrained
from zoo.transfer import Predictions, TransferError, finetune, predict

MOLECULES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C1CCCCC1", "CN1C=NC2=C1C(=O)N(C)C(=O)N2C"]


def _trainer_outputs(model, smiles):
    """graph_trainer.predict over a DataLoader of the same molecules (the training-time evaluation)."""
    graphs = [smiles_to_graph(s) for s in smiles]
    add_positional_encodings(graphs, model.pe_spec(), progress=False)
    subset = GraphSubset(graphs, torch.zeros(len(graphs), 1), torch.arange(len(graphs)))
    output, _ = trainer_predict(model, DataLoader(subset, batch_size=2, collate_fn=collate))
    return output.double().numpy()


def test_predict_matches_the_trainer_evaluation(pretrained_path):
    model = load_pretrained(pretrained_path)
    for name, buffer in model.named_buffers():  # non-trivial BatchNorm statistics
        if name.endswith("running_mean"):
            buffer.normal_()
    preds = predict(model, [MOLECULES[0], "C1CC", *MOLECULES[1:], ""], batch_size=3, progress=False)
    assert isinstance(preds, Predictions) and preds.columns == ["logp"]
    assert preds.values.dtype == np.float64 and preds.values.shape == (7, 1)
    assert np.isnan(preds.values[[1, 6]]).all()
    assert [(bad.row, bad.smiles) for bad in preds.report] == [(1, "C1CC"), (6, "")]
    assert "syntax error" in preds.report[0].reason and preds.report[1].reason == "empty SMILES"
    kept = np.delete(preds.values, [1, 6], axis=0)
    np.testing.assert_allclose(kept, _trainer_outputs(model, MOLECULES), rtol=0, atol=1e-6)


@pytest.mark.parametrize("architecture", ["siggate_gt", "sparsegate_gt"])
def test_a_molecule_the_model_overflows_on_gets_a_nan_row_and_is_named(pretrained_path, architecture):
    """Nitrogen's atom embedding set to inf: the molecules with an N get non-finite activations.
    Softmax attention (siggate_gt) turns them into NaN outputs; q-softmax (sparsegate_gt) refuses
    their batch, which is then run molecule by molecule. Either way only those rows are NaN, and
    they are listed in ``nonfinite``; the others are the clean model's predictions."""
    clean = load_pretrained(pretrained_path)
    torch.manual_seed(0)
    model = create_model(architecture, **MODEL_ARGS).eval()
    model.load_state_dict(clean.state_dict(), strict=False)  # sparsegate_gt's q parameters keep q = 1
    model.card = {**clean.card, "architecture": architecture}
    expected = predict(model, MOLECULES, batch_size=3, progress=False).values
    with torch.no_grad():
        model.node_encoder.atom.atom_embedding_list[0].weight[6] = float("inf")  # atomic number 7 - 1
    preds = predict(model, MOLECULES, batch_size=3, progress=False)
    with_nitrogen = [2, 4]  # paracetamol and caffeine
    assert [(bad.row, bad.smiles) for bad in preds.nonfinite] == [(i, MOLECULES[i]) for i in with_nitrogen]
    assert "prediction is not finite" in preds.nonfinite[0].reason and preds.report == []
    assert np.isnan(preds.values[with_nitrogen]).all()
    others = [i for i in range(len(MOLECULES)) if i not in with_nitrogen]
    np.testing.assert_allclose(preds.values[others], expected[others], rtol=1e-5, atol=1e-6)


def test_predict_loads_a_checkpoint_by_path(pretrained_path):
    by_path = predict(pretrained_path, MOLECULES, progress=False).values
    np.testing.assert_allclose(by_path, _trainer_outputs(load_pretrained(pretrained_path), MOLECULES), atol=1e-6)


def test_classification_gives_probabilities(pretrained_path, classification_csv, tmp_path):
    finetune(pretrained_path, classification_csv, target_cols="active", task="classification", epochs=2,
             out=tmp_path / "ft", progress=False)
    model = load_pretrained(tmp_path / "ft" / "seed0" / "model.safetensors")
    preds = predict(model, MOLECULES, progress=False)
    assert preds.columns == ["active"] and ((preds.values > 0) & (preds.values < 1)).all()
    expected = torch.sigmoid(torch.from_numpy(_trainer_outputs(model, MOLECULES))).numpy()
    np.testing.assert_allclose(preds.values, expected, atol=1e-6)


def test_invalid_inputs_raise_clear_errors(pretrained_path):
    model = load_pretrained(pretrained_path)
    with pytest.raises(InvalidSmilesError, match=r"(?s)1 of 2 SMILES.*strict mode.*'C1CC'.*strict=False"):
        predict(model, ["CCO", "C1CC"], strict=True, progress=False)
    with pytest.raises(InvalidSmilesError, match="2 of 2 SMILES cannot be featurized .none of them is valid"):
        predict(model, ["C1CC", "  "], progress=False)
    with pytest.raises(TransferError, match="no SMILES to predict"):
        predict(model, [], progress=False)
    with pytest.raises(TransferError, match="has no .card"):
        predict(create_model("siggate_gt", **MODEL_ARGS), SMILES[:2], progress=False)
    other = copy.deepcopy(model)
    other.card = {**model.card, "featurizer": {**model.card["featurizer"], "atom_feature_dims": [5]}}
    with pytest.raises(TransferError, match="Featurizer mismatch.*atom_feature_dims"):
        predict(other, SMILES[:2], progress=False)
