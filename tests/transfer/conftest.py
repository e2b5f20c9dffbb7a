"""Fixtures of the transfer tests: a tiny pretrained checkpoint and CSVs, all under tmp_path."""
import pytest
import torch

from tests.transfer.helpers import MODEL_ARGS, RECIPE, SMILES, write_csv
from zoo.data import FEATURIZER_SPEC
from zoo.models import create_model
from zoo.models.pretrained import save_pretrained


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Positional-encoding caches go to this test's folder, not the shared $ZOO_CACHE."""
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def pretrained_path(tmp_path_factory):
    """A 1-layer SigGate-GT saved with save_pretrained (weights from seed 123, not a fresh init)."""
    torch.manual_seed(123)
    model = create_model("siggate_gt", **MODEL_ARGS)
    card = {"name": "tiny", "architecture": "siggate_gt", "model_args": MODEL_ARGS, "recipe": RECIPE,
            "task": "graph_regression", "metric": "mae", "featurizer": FEATURIZER_SPEC, "pe_spec": model.pe_spec(),
            "target_columns": ["logp"]}
    return save_pretrained(model, card, tmp_path_factory.mktemp("pretrained") / "tiny.safetensors")


@pytest.fixture
def regression_csv(tmp_path):
    """30 valid molecules, two targets (y2 missing in every third row), then one invalid SMILES."""
    rows = [[s, 0.5 * len(s), "" if i % 3 == 0 else (i % 5) / 2] for i, s in enumerate(SMILES)]
    return write_csv(tmp_path / "mols.csv", ["smiles", "y1", "y2"], rows + [["C1CC", 1.0, 1.0]])


@pytest.fixture
def classification_csv(tmp_path):
    """30 molecules with alternating 0/1 labels (every split of seed 0 holds both classes)."""
    rows = [[s, i % 2] for i, s in enumerate(SMILES)]
    return write_csv(tmp_path / "active.csv", ["smiles", "active"], rows)
