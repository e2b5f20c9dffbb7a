"""tools/csbm_sweep.py: a one-cell, one-seed, two-epoch sweep trains every model on the generated card
and prints the cSBM table; bad arguments exit 2 before anything runs."""
import json

import pytest

from tests.tools.tool_loader import load_tool

csbm_cli = load_tool("csbm_sweep")


def test_tiny_sweep_trains_and_reports(offline_env, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ZOO_CARDS", "")  # the tool points it at <out>/cards; restored afterwards
    code = csbm_cli.main(["--out", str(tmp_path), "--homophily", "0.5", "--degrees", "5", "--snr", "1",
                          "--models", "qfrozen_0.5,qfrozen_1.0", "--seeds", "0", "--nodes", "200", "--epochs", "2"])
    assert code == 0
    assert (tmp_path / "cards" / "csbm_h0.5_d5_snr1.yaml").exists()
    out = capsys.readouterr().out
    assert "| h | degree | SNR | qfrozen_0.5 | qfrozen_1.0 | best q<1 − q=1 |" in out
    accuracies = {}
    for model in ("qfrozen_0.5", "qfrozen_1.0"):
        (metrics,) = (tmp_path / f"csbm_h0.5_d5_snr1_{model}").rglob("seed0/metrics.json")
        accuracies[model] = 100 * json.loads(metrics.read_text())["final"]["test"]["accuracy"]
    gap = accuracies["qfrozen_0.5"] - accuracies["qfrozen_1.0"]
    assert f"| 0.5 | 5 | 1 | {accuracies['qfrozen_0.5']:.1f} | {accuracies['qfrozen_1.0']:.1f} | {gap:+.1f} |" in out


@pytest.mark.parametrize("args, message", [
    (["--models", "nope"], "no recipes/cora_<model>.yaml for nope"),
    (["--degrees", "5000", "--nodes", "100"], "too many"),
    (["--seeds", "x"], "seeds 'x'"),
])
def test_bad_arguments_exit_2(tmp_path, capsys, args, message):
    assert csbm_cli.main(["--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cards").exists()


def test_an_interrupt_prints_the_resume_hint_and_exits_130(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ZOO_CARDS", "")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(csbm_cli, "run_sweep", interrupted)
    assert csbm_cli.main(["--out", str(tmp_path), "--degrees", "5", "--snr", "1", "--models", "qfrozen_1.0"]) == 130
    assert "rerun the same command to continue" in capsys.readouterr().err
