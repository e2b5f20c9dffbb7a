"""add_run_options: the options every training tool shares, and their defaults."""
import argparse

from zoo.engine.cli import add_run_options


def test_shared_options_and_defaults():
    parser = argparse.ArgumentParser()
    add_run_options(parser, "override")
    plain = parser.parse_args([])
    assert (plain.overrides, plain.epochs, plain.out, plain.device) == ([], None, "runs", "cpu")
    args = parser.parse_args(["--set", "model.heads=4", "--set", "optim.lr=0.1", "--epochs", "3", "--out", "o",
                              "--device", "auto"])
    assert (args.overrides, args.epochs, args.out, args.device) == (["model.heads=4", "optim.lr=0.1"], 3, "o", "auto")
