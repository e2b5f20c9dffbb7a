"""The graph trainer on 80 ESOL molecules: selection on the validation metric, outputs, resume, and
non-finite losses and predictions."""
import json
import math
import re
import sys

import dgl
import pytest
import torch

from tests.engine.kill_at_call import kill_then_resume
from zoo import _progress
from zoo.data import load_csv_dataset, make_dataloaders
from zoo.engine.checkpoint import load_checkpoint
from zoo.engine.divergence import TrainingDiverged
from zoo.engine.graph_trainer import (_cosine_with_warmup, _gate_diagnostics, build_graph_model, masked_loss, predict,
                                     split_scores, train_graph_model)
from zoo.engine.recipe import OptimConfig, build_recipe
from zoo.models.capabilities import HasPositionalEncodings
from zoo.ops import NonFiniteScores


@pytest.fixture(scope="module")
def esol(zoo_data, zoo_cache):
    return load_csv_dataset(zoo_data / "moleculenet/ESOL/delaney-processed.csv", "smiles",
                            ["measured log solubility in mols per litre"], split="random", limit=80,
                            cache_root=zoo_cache, progress=False)


def _recipe(epochs=4, batch_size=16):
    return build_recipe({"dataset": "esol", "name": "esol_tiny", "task": "graph_regression",
                         "model": {"name": "siggate_gt", "dim": 16, "heads": 2, "layers": 1, "local": "gine",
                                   "pe": "rwse", "rwse_k": 4, "dim_pe": 4},
                         "optim": {"optimizer": "adamw", "lr": 3e-3, "epochs": epochs, "batch_size": batch_size,
                                   "scheduler": "cosine", "warmup_epochs": 1}})


def test_selects_the_best_validation_epoch(esol, tmp_path):
    metrics = train_graph_model(_recipe(), esol, 0, tmp_path, progress=False)
    curves = metrics["curves"]
    best = min(curves, key=lambda row: row["val_mae"])
    assert metrics["best_epoch"] == best["epoch"] and len(curves) == 4 and metrics["monitor"] == "val_mae"
    assert metrics["final"]["val"]["mae"] == pytest.approx(best["val_mae"], rel=1e-5)
    assert json.loads((tmp_path / "metrics.json").read_text())["final"] == metrics["final"]
    assert (tmp_path / "best.pt").exists() and not (tmp_path / "last.pt").exists()
    (layer,) = metrics["diagnostics"]
    assert 0 < layer["gate_mean"] < 1 and layer["stable_rank"] > 0


def test_interrupted_run_resumes_to_the_same_result(esol, tmp_path):
    reference = train_graph_model(_recipe(), esol, 1, tmp_path / "a", progress=False)

    def interrupt(epoch, row):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_graph_model(_recipe(), esol, 1, tmp_path / "b", progress=False, on_epoch_end=interrupt,
                            checkpoint_every=0)
    resumed = train_graph_model(_recipe(), esol, 1, tmp_path / "b", progress=False)
    assert [r["train_loss"] for r in resumed["curves"]] == [r["train_loss"] for r in reference["curves"]]
    assert resumed["final"] == reference["final"]


def test_a_run_killed_inside_an_epoch_resumes_there_to_the_same_result(esol, tmp_path, monkeypatch):
    """last.pt is written between batches: a kill at a batch of epoch 1 costs only that batch."""
    import zoo.engine.graph_trainer as graph_trainer
    reference = train_graph_model(_recipe(), esol, 1, tmp_path / "a", progress=False)
    per_epoch = -(-esol.sizes["train"] // 16)  # batches of 16
    saved, resumed, calls = kill_then_resume(  # killed at the third batch of epoch 1: its first two are written
        monkeypatch, graph_trainer, "rank_loss", per_epoch + 3,
        lambda run_dir, **options: train_graph_model(_recipe(), esol, 1, run_dir, progress=False, **options),
        tmp_path / "b")
    assert saved["state"]["epoch"] == 1 and saved["partial"]["trained"] == 2
    assert calls == 4 * per_epoch - (per_epoch + 2)  # the two batches written are not trained again
    assert [r["train_loss"] for r in resumed["curves"]] == [r["train_loss"] for r in reference["curves"]]
    assert resumed["final"] == reference["final"]


def test_masked_loss_ignores_nan_targets():
    prediction = torch.tensor([[0.0, 2.0], [1.0, 5.0]])
    target = torch.tensor([[1.0, float("nan")], [1.0, 2.0]])
    assert float(masked_loss(prediction, target, "graph_regression")) == pytest.approx((1 + 0 + 3) / 3)
    logits, labels = torch.tensor([[0.0], [3.0]]), torch.tensor([[float("nan")], [1.0]])
    expected = torch.nn.functional.softplus(torch.tensor(-3.0))
    assert float(masked_loss(logits, labels, "graph_classification")) == pytest.approx(float(expected))


def test_cosine_schedule_warms_up_then_decays_to_zero():
    factor = _cosine_with_warmup(OptimConfig(epochs=10, warmup_epochs=2))
    assert [round(factor(e), 4) for e in (0, 1, 2, 6, 10)] == [round(1 / 3, 4), round(2 / 3, 4), 1.0, 0.5, 0.0]


def _sparsegate_recipe(epochs=3, **optim):
    recipe = _recipe(epochs)
    recipe.model = {**recipe.model, "name": "sparsegate_gt", "normaliser": "qsoftmax", "q_mode": "head"}
    recipe.optim.q_lr, recipe.optim.q_warmup, recipe.optim.weight_decay = 0.05, 1, 0.1
    for key, value in optim.items():
        setattr(recipe.optim, key, value)
    return recipe


def test_learned_q_has_its_own_optimiser_warm_up_and_prior(esol, tmp_path):
    """sparsegate_gt's q (LTGA's a of q = 1 + delta tanh(a)): not in the weights' AdamW, its own Adam at
    q_lr without weight decay, frozen (a = 0, q = 1) through the q_warmup epochs, then moving;
    the curves carry q per layer and head."""
    from zoo.engine.graph_trainer import build_index_optimizer, build_optimizer
    from zoo.models import create_model

    recipe = _sparsegate_recipe()
    model = create_model("sparsegate_gt", num_outputs=1, **{k: v for k, v in recipe.model.items() if k != "name"})
    (q_logit,) = model.index_parameters()
    weights, index = build_optimizer(model, recipe.optim), build_index_optimizer(model, recipe.optim)
    assert all(p is not q_logit for p in weights.members)  # the weights' flat AdamW
    assert len(weights.members) == len(list(model.parameters())) - 1
    assert index.param_groups[0]["params"] == [q_logit] and index.defaults["lr"] == 0.05
    assert index.defaults["weight_decay"] == 0.0
    plain = create_model("siggate_gt", num_outputs=1, **{k: v for k, v in _recipe().model.items() if k != "name"})
    assert build_index_optimizer(plain, recipe.optim) is None
    assert build_optimizer(plain, recipe.optim).members == list(plain.parameters())
    assert build_optimizer(plain, recipe.optim, flat=False).param_groups[0]["params"] == list(plain.parameters())

    curves = train_graph_model(recipe, esol, 0, tmp_path, progress=False)["curves"]
    q = [[row[f"q_mean/layer0_head{h}"] for h in range(2)] for row in curves]
    assert q[0] == [1.0, 1.0]  # epoch 0 is the warm-up: q's optimiser does not step
    assert all(abs(v - 1) > 1e-4 for v in q[2])  # afterwards Adam moves a by about q_lr a step


def test_shannon_prior_pulls_q_back_and_a_too_long_warm_up_is_refused(esol, tmp_path):
    """With a strong prior q stays closer to 1 than without (same seed, same batches)."""
    free = train_graph_model(_sparsegate_recipe(q_warmup=0), esol, 0, tmp_path / "free", progress=False)
    held = train_graph_model(_sparsegate_recipe(q_warmup=0, q_prior=100.0), esol, 0, tmp_path / "held",
                             progress=False)
    keys = [k for k in free["curves"][-1] if k.startswith("q_mean/")]
    assert len(keys) == 2
    assert sum(abs(held["curves"][-1][k] - 1) for k in keys) < sum(abs(free["curves"][-1][k] - 1) for k in keys)
    with pytest.raises(ValueError, match="q_warmup=3 >= optim.epochs=3"):
        train_graph_model(_sparsegate_recipe(q_warmup=3), esol, 0, tmp_path / "never", progress=False)


def test_progress_counts_the_batches_of_each_epoch(esol, tmp_path, capsys, monkeypatch):
    """A long epoch shows how far it is: 64 training molecules in batches of 16 are 4 batches. On a
    terminal, a bar; in a log (LINE_EVERY 0 here), a line after each batch but the last, then the
    epoch's line, and after the last epoch the same for the best epoch's scores on the training
    set (the 8 validation and 8 test molecules are one batch each, so no line); with progress off,
    nothing."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    train_graph_model(_recipe(epochs=2), esol, 0, tmp_path / "terminal", progress=True)
    err = capsys.readouterr().err
    assert "esol_tiny seed 0, epoch 0:   0%|          | 0/4" in err and "esol_tiny seed 0, epoch 1:" in err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    train_graph_model(_recipe(epochs=2), esol, 0, tmp_path / "log", progress=True)
    lines = [re.sub(r"[0-9.]+ (s|GB)", r"N \1", re.sub(r"(train_loss|val_mae) [^,( ]+", r"\1 X", line))
             for line in capsys.readouterr().err.splitlines()]
    assert lines == [line for epoch in (0, 1) for line in
                     [f"esol_tiny seed 0, epoch {epoch}: {k}/4 batches, N s" for k in (1, 2, 3)]
                     + [f"esol_tiny seed 0, epoch {epoch} ({epoch + 1}/2): train_loss X, val_mae X "
                        "(N s of training, peak N GB resident)"]] + \
        [f"esol_tiny seed 0, best epoch's train scores: {k}/4 batches, N s" for k in (1, 2, 3)]
    peak = json.loads((tmp_path / "log" / "metrics.json").read_text())["peak_rss_bytes"]
    assert 100e6 < peak < 100e9  # a process with torch and DGL loaded, in bytes
    assert train_graph_model(_recipe(epochs=2), esol, 0, tmp_path / "quiet", progress=False) and \
        capsys.readouterr().err == ""


def test_evaluations_and_the_end_of_run_diagnostics_show_progress(esol, tmp_path, capsys, monkeypatch):
    """In batches of 4, the 8 validation and 8 test molecules are 2 batches each: in a log, a line
    after the first batch of each evaluation, of the best epoch's scores on every split, and after
    the first 4 test graphs of the gate diagnostics."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    train_graph_model(_recipe(epochs=1, batch_size=4), esol, 0, tmp_path, progress=True)
    lines = [re.sub(r"[0-9]+ s$", "N s", line) for line in capsys.readouterr().err.splitlines()
             if ", epoch 0" not in line]  # not the training batches' lines nor the epoch's line
    assert lines == ["esol_tiny seed 0, val evaluation: 1/2 batches, N s",
                     "esol_tiny seed 0, test evaluation: 1/2 batches, N s"] \
        + [f"esol_tiny seed 0, best epoch's train scores: {k}/16 batches, N s" for k in range(1, 16)] \
        + [f"esol_tiny seed 0, best epoch's {split} scores: 1/2 batches, N s" for split in ("val", "test")] \
        + ["esol_tiny seed 0, gate diagnostics, test split: 4/8 graphs, N s"]


class _Poisoned(HasPositionalEncodings, torch.nn.Module):
    """The tiny SigGate-GT of ``_recipe()`` whose predictions turn NaN in the evaluations of
    ``eval_epochs`` (eval mode) or in the training batches of ``train_epoch``; ``next_epoch`` is
    the trainer's ``on_epoch_end``."""

    def __init__(self, data, eval_epochs=(), train_epoch=None):
        super().__init__()
        torch.manual_seed(0)
        self.inner = build_graph_model(_recipe(), data.num_tasks, **data.model_inputs)
        self.eval_epochs, self.train_epoch, self.epoch = set(eval_epochs), train_epoch, 0

    def pe_spec(self):
        return self.inner.pe_spec()

    def forward(self, graphs):
        out = self.inner(graphs)
        poisoned = self.epoch == self.train_epoch if self.training else self.epoch in self.eval_epochs
        return out * float("nan") if poisoned else out

    def next_epoch(self, epoch, row):
        self.epoch = epoch + 1


def _run_poisoned(data, run_dir, **poison):
    model = _Poisoned(data, **poison)
    return model, train_graph_model(_recipe(), data, 0, run_dir, progress=False, model=model,
                                    on_epoch_end=model.next_epoch, checkpoint_every=0)


def test_non_finite_evaluations_are_recorded_as_nan_and_never_selected(esol, tmp_path, capsys):
    """Predictions that overflow in eval mode (the ReLU gate's did on one ZINC seed) do not stop the
    run: those epochs' metrics are NaN with the graph count, and selection takes a finite epoch."""
    clean = _run_poisoned(esol, tmp_path / "clean")[1]
    _, metrics = _run_poisoned(esol, tmp_path / "nan", eval_epochs={0, 2})
    curves = metrics["curves"]
    assert [r["train_loss"] for r in curves] == [r["train_loss"] for r in clean["curves"]]  # training untouched
    for epoch in (0, 2):
        assert math.isnan(curves[epoch]["val_mae"]) and math.isnan(curves[epoch]["test_loss"])
        assert curves[epoch]["val_nonfinite"] == esol.sizes["val"]
        assert curves[epoch]["test_nonfinite"] == esol.sizes["test"]
    finite = [r for r in curves if not math.isnan(r["val_mae"])]
    assert [r["epoch"] for r in finite] == [1, 3] and all("val_nonfinite" not in r for r in finite)
    assert [r["val_mae"] for r in finite] == [clean["curves"][e]["val_mae"] for e in (1, 3)]
    best = min(finite, key=lambda row: row["val_mae"])
    assert metrics["best_epoch"] == best["epoch"]
    assert metrics["final"]["val"]["mae"] == pytest.approx(best["val_mae"], rel=1e-5)
    assert "nonfinite" not in metrics["final"]["test"]
    saved = json.loads((tmp_path / "nan" / "metrics.json").read_text())
    assert math.isnan(saved["curves"][0]["val_mae"]) and saved["final"] == metrics["final"]
    out = capsys.readouterr().out
    assert (f"esol_tiny seed 0, epoch 0: non-finite evaluation, recorded as NaN (val_loss, val_mae, test_loss, "
            f"test_mae; val_nonfinite {esol.sizes['val']}; test_nonfinite {esol.sizes['test']})") in out
    assert "epoch 2: non-finite" in out and "epoch 1: non-finite" not in out


def test_a_graph_whose_attention_overflows_in_evaluation_gets_nan_as_with_softmax(esol, tmp_path, capsys):
    """q-softmax refuses a batch whose attention scores are not finite (NonFiniteScores); predict
    then runs the batch's graphs one by one, so only the graph that overflows gets NaN, which is
    what softmax attention gives it, and the others their batched outputs."""
    torch.manual_seed(0)
    qsoftmax = build_graph_model(_sparsegate_recipe(), esol.num_tasks, **esol.model_inputs).eval()
    softmax = build_graph_model(_recipe(), esol.num_tasks, **esol.model_inputs).eval()
    esol.add_positional_encodings(qsoftmax.pe_spec(), progress=False)
    graphs, target = next(iter(make_dataloaders(esol, 16, seed=0)["val"]))
    pieces = dgl.unbatch(graphs)
    pieces[3].ndata["rwse"][0] = math.inf  # this graph's node features, then its scores, are not finite
    poisoned = dgl.batch(pieces)
    with pytest.raises(NonFiniteScores), torch.no_grad():
        qsoftmax(poisoned)
    output, targets = predict(qsoftmax, [(poisoned, target)])
    assert torch.equal(targets, target) and output.shape == target.shape
    with torch.no_grad():
        assert torch.isnan(softmax(poisoned)).any(1).nonzero().flatten().tolist() == [3]
        clean = qsoftmax(dgl.batch(pieces[:3] + pieces[4:]))
    assert torch.isnan(output).any(1).nonzero().flatten().tolist() == [3]
    torch.testing.assert_close(torch.cat([output[:3], output[4:]]), clean, rtol=1e-5, atol=1e-6)
    assert split_scores(output, target, "graph_regression", ("mae",))["nonfinite"] == 1
    # the end-of-run diagnostics of such a model are left out with a line, not a traceback after training
    assert _gate_diagnostics(qsoftmax, {"test": [(poisoned, target)]}, "test", tmp_path) is None
    assert "no gate diagnostics: the selected model's attention scores contain NaN" in capsys.readouterr().out


def test_no_finite_validation_epoch_is_an_error_not_a_model(esol, tmp_path):
    with pytest.raises(TrainingDiverged, match="esol_tiny seed 0: none of its 4 epochs gave a finite val_mae"):
        _run_poisoned(esol, tmp_path, eval_epochs=range(5))


def test_a_non_finite_training_loss_stops_the_run_before_its_update(esol, tmp_path):
    model = None
    with pytest.raises(TrainingDiverged, match=r"training loss is nan at epoch 1, batch 1 of esol_tiny seed 0, "
                                               r"so no update was made from it") as error:
        model = _Poisoned(esol, train_epoch=1)
        train_graph_model(_recipe(), esol, 0, tmp_path, progress=False, model=model, on_epoch_end=model.next_epoch,
                          checkpoint_every=0)
    assert "--set optim.lr=" in str(error.value)
    saved = load_checkpoint(tmp_path / "last.pt")  # the end of epoch 0, the last state trained
    assert saved["state"]["epoch"] == 1 and "partial" not in saved
    weights = dict(model.named_parameters())  # (BatchNorm's running statistics saw the batch's forward)
    assert all(torch.isfinite(value).all() for value in weights.values())
    assert all(torch.equal(weights[key], saved["model"][key]) for key in weights)  # no update from the NaN batch
