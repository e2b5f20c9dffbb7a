"""The node trainer on a small synthetic graph: early stopping, outputs, and exact resume."""
import json
import math
from types import SimpleNamespace

import dgl
import pytest
import torch

from tests.engine.kill_at_call import kill_then_resume
from zoo.analysis.oversmoothing import directional_dirichlet_energy, mean_cosine_distance
from zoo.engine.checkpoint import load_checkpoint
from zoo.engine.divergence import TrainingDiverged
from zoo.engine.node_trainer import train_node_classifier
from zoo.engine.recipe import build_recipe
from zoo.models import create_model


def _toy_data(num_nodes=60, num_classes=3):
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, num_classes, (num_nodes,), generator=gen)
    features = torch.randn(num_nodes, 8, generator=gen) + torch.nn.functional.one_hot(labels, 8).float()
    src = torch.randint(0, num_nodes, (240,), generator=gen)
    dst = torch.randint(0, num_nodes, (240,), generator=gen)
    graph = dgl.add_self_loop(dgl.graph((src, dst), num_nodes=num_nodes))
    idx = torch.arange(num_nodes)
    return SimpleNamespace(graph=graph, features=features, labels=labels, num_classes=num_classes, split=0,
                           train_mask=idx % 3 == 0, val_mask=idx % 3 == 1, test_mask=idx % 3 == 2,
                           card={"metric": "accuracy"})


def _recipe(epochs=12, patience=50):
    return build_recipe({"dataset": "toy", "name": "toy_gat",
                         "model": {"name": "gat", "hidden": 4, "heads": 2, "dropout": 0.3, "attn_dropout": 0.3},
                         "optim": {"epochs": epochs, "patience": patience}})


def test_run_writes_metrics_and_checkpoint(tmp_path):
    metrics = train_node_classifier(_recipe(), _toy_data(), 0, tmp_path, progress=False)
    assert metrics["epochs_run"] == 12 and len(metrics["curves"]) == 12
    assert json.loads((tmp_path / "metrics.json").read_text())["final"] == metrics["final"]
    assert set(metrics["final"]) == {"train", "val", "test"}
    assert (tmp_path / "best.pt").exists() and not (tmp_path / "last.pt").exists()
    assert any((tmp_path / "tensorboard").iterdir())
    best = min(metrics["curves"], key=lambda row: row[metrics["monitor"]])
    assert metrics["best_epoch"] == best["epoch"] and metrics["monitor"] == "val_loss"
    # the final val loss is the best epoch's val loss: the best weights were restored
    assert metrics["final"]["val"]["nll"] == pytest.approx(best["val_loss"], rel=1e-5)


def test_early_stopping_counts_patience(tmp_path):
    metrics = train_node_classifier(_recipe(epochs=200, patience=3), _toy_data(), 0, tmp_path, progress=False)
    assert metrics["stopped_early"]
    assert metrics["epochs_run"] == metrics["best_epoch"] + 1 + 3


def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    data = _toy_data()
    reference = train_node_classifier(_recipe(), data, 1, tmp_path / "a", progress=False)

    def interrupt(epoch, row):
        if epoch == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_node_classifier(_recipe(), data, 1, tmp_path / "b", progress=False, on_epoch_end=interrupt,
                            checkpoint_every=0)
    assert (tmp_path / "b" / "last.pt").exists() and not (tmp_path / "b" / "metrics.json").exists()
    resumed = train_node_classifier(_recipe(), data, 1, tmp_path / "b", progress=False)
    assert [row["train_loss"] for row in resumed["curves"]] == [row["train_loss"] for row in reference["curves"]]
    assert resumed["final"] == reference["final"]


def _ltga_recipe(**optim):
    return build_recipe({"dataset": "toy", "name": "toy_ltga",
                         "model": {"name": "ltga", "hidden": 4, "heads": 2, "q_mode": "head", "dropout": 0.0,
                                   "attn_dropout": 0.0},
                         "optim": {"epochs": 12, "patience": 50, "q_lr": 0.05, **optim}})


def _q_path(metrics):
    return [[row[f"q_mean/layer{layer}_head{head}"] for layer in (0, 1) for head in (0, 1)] for row in metrics["curves"]]


def test_warmup_freezes_q_then_its_own_optimiser_moves_it(tmp_path):
    path = _q_path(train_node_classifier(_ltga_recipe(q_warmup=5), _toy_data(), 0, tmp_path, progress=False))
    # the q recorded in epoch k's forward reflects the updates of epochs < k
    assert all(q == 1.0 for row in path[:6] for q in row)
    assert any(abs(q - 1.0) > 1e-3 for q in path[-1])


def test_shannon_prior_pulls_q_towards_one(tmp_path):
    free = _q_path(train_node_classifier(_ltga_recipe(q_warmup=0), _toy_data(), 0, tmp_path / "a", progress=False))
    tied = _q_path(train_node_classifier(_ltga_recipe(q_warmup=0, q_prior=100.0), _toy_data(), 0, tmp_path / "b",
                                         progress=False))
    distance = lambda row: sum(abs(q - 1.0) for q in row)
    assert distance(tied[-1]) < 0.5 * distance(free[-1])


def test_diagnostics_are_recorded_for_ltga(tmp_path):
    metrics = train_node_classifier(_ltga_recipe(q_warmup=0), _toy_data(), 0, tmp_path, progress=False)
    diagnostics = metrics["diagnostics"]
    assert len(diagnostics["layers"]) == 2 and set(diagnostics["counterfactual"]) == {
        "trained", "A_softmax", "B_random_prune", "C_clamp_q"}
    assert diagnostics["counterfactual"]["trained"] == pytest.approx(metrics["final"]["test"]["accuracy"])


@pytest.mark.parametrize("name", ["gcn", "gat", "ltga"])
def test_oversmoothing_of_the_best_model_is_recorded(tmp_path, name):
    """metrics.json holds Table 19's diagnostics of the last hidden layer of the best weights:
    recomputed here from best.pt by hand (ELU of the first layer, heads concatenated)."""
    data = _toy_data()
    model = {"name": name, "hidden": 4, "dropout": 0.3, **({} if name == "gcn" else {"heads": 2})}
    recipe = build_recipe({"dataset": "toy", "name": f"toy_{name}", "model": model, "optim": {"epochs": 6}})
    metrics = train_node_classifier(recipe, data, 0, tmp_path, progress=False)
    written = json.loads((tmp_path / "metrics.json").read_text())["oversmoothing"]
    best = create_model(name, in_feats=8, num_classes=3, **recipe.model_args())
    best.load_state_dict(load_checkpoint(tmp_path / "best.pt")["model"])
    best.eval()
    with torch.no_grad():
        hidden = best.convs[0](data.graph, data.features)
        hidden = torch.nn.functional.elu(hidden) if name == "gcn" else hidden.flatten(1)
    assert written == metrics["oversmoothing"]
    assert written["dirichlet_energy"] == pytest.approx(directional_dirichlet_energy(hidden, data.graph), rel=1e-5)
    assert written["mad"] == pytest.approx(mean_cosine_distance(hidden), rel=1e-5)
    assert 0 < written["dirichlet_energy"] < 2 and 0 < written["mad"] < 2


# ---- mini-batch training (train.sampler) ---------------------------------------------------------

def _sampled_recipe(name="gat", fanouts=(3, 3), batch_size=8, epochs=12, **model):
    model = {"hidden": 4, "heads": 2, "dropout": 0.3, "attn_dropout": 0.3, **model}
    return build_recipe({"dataset": "toy", "name": f"toy_{name}_sampled", "model": {"name": name, **model},
                         "optim": {"epochs": epochs, "patience": 50, "q_warmup": 0},
                         "train": {"sampler": {"fanouts": list(fanouts), "batch_size": batch_size,
                                               "eval_batch_size": 16}}})


def test_sampled_run_evaluates_every_node_layer_wise(tmp_path):
    metrics = train_node_classifier(_sampled_recipe(), _toy_data(), 0, tmp_path, progress=False)
    assert metrics["epochs_run"] == 12 and (tmp_path / "best.pt").exists()
    best = min(metrics["curves"], key=lambda row: row["val_loss"])
    # the final metrics come from the best weights through the same chunked inference
    assert metrics["final"]["val"]["nll"] == pytest.approx(best["val_loss"], rel=1e-5)


def test_full_neighbourhood_single_batch_training_follows_the_full_batch_run(tmp_path):
    """Fanout -1 and one batch of every training node, no dropout: the same steps as full batch,
    so the loss curves agree to float32 summation error (measured: 3e-7 relative over 12 epochs)."""
    options = dict(dropout=0.0, attn_dropout=0.0)
    data = _toy_data()
    full = train_node_classifier(build_recipe({"dataset": "toy", "name": "toy_full", "model": {
        "name": "ltga", "hidden": 4, "heads": 2, "q_mode": "edge", **options},
        "optim": {"epochs": 12, "patience": 50, "q_warmup": 0}}), data, 0, tmp_path / "full", progress=False)
    sampled = train_node_classifier(_sampled_recipe("ltga", (-1, -1), batch_size=60, q_mode="edge", **options),
                                    data, 0, tmp_path / "sampled", progress=False)
    for key in ("train_loss", "val_loss", "test_loss"):
        assert [row[key] for row in sampled["curves"]] == pytest.approx([row[key] for row in full["curves"]],
                                                                        rel=1e-4), key


def test_interrupted_sampled_run_resumes_to_the_same_result(tmp_path):
    data = _toy_data()
    reference = train_node_classifier(_sampled_recipe(), data, 1, tmp_path / "a", progress=False)

    def interrupt(epoch, row):
        if epoch == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_node_classifier(_sampled_recipe(), data, 1, tmp_path / "b", progress=False, on_epoch_end=interrupt,
                            checkpoint_every=0)
    resumed = train_node_classifier(_sampled_recipe(), data, 1, tmp_path / "b", progress=False)
    # the neighbours drawn after the resume are the same: DGL's sampler is seeded from torch's saved state
    assert [row["train_loss"] for row in resumed["curves"]] == [row["train_loss"] for row in reference["curves"]]
    assert resumed["final"] == reference["final"]


def test_sampled_run_killed_inside_an_epoch_resumes_at_the_batch_to_the_same_result(tmp_path, monkeypatch):
    """One process writes last.pt between batches; the resume skips the batches it holds (still
    drawing them, so DGL's sampler and the dropout generator continue as uninterrupted)."""
    import zoo.engine.node_trainer as node_trainer
    data = _toy_data()
    reference = train_node_classifier(_sampled_recipe(), data, 1, tmp_path / "a", progress=False)
    per_epoch = -(-int(data.train_mask.sum()) // 8)  # batches of 8 training nodes
    saved, resumed, calls = kill_then_resume(
        monkeypatch, node_trainer, "sampled_forward", 5 * per_epoch + 3,
        lambda run_dir, **options: train_node_classifier(_sampled_recipe(), data, 1, run_dir, progress=False,
                                                         **options),
        tmp_path / "b")
    assert saved["state"]["epoch"] == 5 and saved["partial"]["trained"] == 2
    assert calls == 12 * per_epoch - (5 * per_epoch + 2)  # the two batches written are not trained again
    assert [row["train_loss"] for row in resumed["curves"]] == [row["train_loss"] for row in reference["curves"]]
    assert resumed["final"] == reference["final"]


@pytest.mark.parametrize("name, model", [("gcn", {}), ("gatv2", {}), ("ltga", {"q_mode": "edge"}),
                                         ("ltga", {"normaliser": "sparsemax"})])
def test_every_node_model_trains_on_blocks(tmp_path, name, model):
    model = {"hidden": 4, "dropout": 0.3, **({} if name == "gcn" else {"heads": 2, "attn_dropout": 0.3}), **model}
    recipe = build_recipe({"dataset": "toy", "name": "toy", "model": {"name": name, **model},
                           "optim": {"epochs": 3, "patience": 50},
                           "train": {"sampler": {"fanouts": [4, 4], "batch_size": 8, "eval_batch_size": 16}}})
    metrics = train_node_classifier(recipe, _toy_data(), 0, tmp_path, progress=False)
    assert all(math.isfinite(row["train_loss"]) for row in metrics["curves"])


def test_sampled_ltga_records_layerwise_diagnostics(tmp_path):
    metrics = train_node_classifier(_sampled_recipe("ltga", q_mode="edge"), _toy_data(), 0, tmp_path, progress=False)
    diagnostics = metrics["diagnostics"]
    assert len(diagnostics["layers"]) == 2 and set(diagnostics["counterfactual"]) == {
        "trained", "A_softmax", "B_random_prune", "C_clamp_q"}
    assert diagnostics["counterfactual"]["trained"] == pytest.approx(metrics["final"]["test"]["accuracy"])


@pytest.mark.parametrize("name", ["h2gcn", "gprgnn", "fagcn", "linkx"])
def test_heterophily_models_train_and_their_best_weights_reload(tmp_path, name):
    """Each model of the paper's Table 12 trains through the node trainer (LINKX's lazily sized
    adjacency embedding included), and best.pt, loaded into a fresh model, gives the recorded
    validation accuracy."""
    data = _toy_data()
    recipe = build_recipe({"dataset": "toy", "name": f"toy_{name}", "model": {"name": name, "hidden": 8},
                           "optim": {"epochs": 4, "patience": 50}})
    metrics = train_node_classifier(recipe, data, 0, tmp_path, progress=False)
    fresh = create_model(name, in_feats=8, num_classes=3, hidden=8)
    if name == "linkx":
        with torch.no_grad():
            fresh(data.graph, data.features)  # sizes the lazy embedding, as loading a checkpoint needs
    fresh.load_state_dict(load_checkpoint(tmp_path / "best.pt")["model"])
    with torch.no_grad():
        predicted = fresh.eval()(data.graph, data.features).argmax(1)
    accuracy = (predicted[data.val_mask] == data.labels[data.val_mask]).double().mean().item()
    assert accuracy == pytest.approx(metrics["final"]["val"]["accuracy"])


@pytest.mark.parametrize("recipe, where", [(_recipe(), "epoch 0 of toy_gat"),
                                           (_sampled_recipe(), "epoch 0, batch ")], ids=["full_batch", "sampled"])
def test_a_nan_input_stops_the_run_at_its_first_loss(recipe, where, tmp_path):
    """A training node with a NaN feature makes the loss NaN: the run stops there, naming the place."""
    data = _toy_data()
    data.features[0, 0] = float("nan")  # node 0 is a training node (index % 3 == 0)
    with pytest.raises(TrainingDiverged, match=f"training loss is nan at {where}"):
        train_node_classifier(recipe, data, 0, tmp_path, progress=False)
    assert not (tmp_path / "metrics.json").exists()
