"""add_run_options: the options every training tool shares, and their defaults; SIGTERM stops a
tool as Ctrl-C does (its resume hint, exit 130), and a killed run resumes."""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.tools.tool_loader import ROOT
from zoo.engine.cli import add_run_options, sigterm_as_interrupt


def test_shared_options_and_defaults():
    parser = argparse.ArgumentParser()
    add_run_options(parser, "override")
    plain = parser.parse_args([])
    assert (plain.overrides, plain.epochs, plain.out, plain.device) == ([], None, "runs", "cpu")
    args = parser.parse_args(["--set", "model.heads=4", "--set", "optim.lr=0.1", "--epochs", "3", "--out", "o",
                              "--device", "auto"])
    assert (args.overrides, args.epochs, args.out, args.device) == (["model.heads=4", "optim.lr=0.1"], 3, "o", "auto")


def test_sigterm_raises_keyboard_interrupt_inside_the_block_only():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_kill_stops_a_training_run_with_the_resume_hint_and_it_resumes(offline_env, tmp_path):
    """tools/train.py in a child process with SIGINT ignored (as under `nohup ... &`): `kill` (SIGTERM)
    once the first checkpoint exists gives exit 130 and the hint; the same command resumes."""
    command = [sys.executable, str(ROOT / "tools/train.py"), str(ROOT / "recipes/cora_gat.yaml"), "--seeds", "0",
               "--epochs", "1000", "--set", "optim.patience=1000", "--out", str(tmp_path), "--quiet"]
    child = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.rglob("last.pt")) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert child.poll() is None, "the run ended before it could be stopped"
        os.kill(child.pid, signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 130 and "rerun the same command to resume" in err
    (last,) = tmp_path.rglob("last.pt")
    again = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watchdog = threading.Timer(120, again.kill)  # a hang before the first line ends readline with EOF
    watchdog.start()
    try:
        first = again.stdout.readline()  # the resume line comes before the first epoch's output
    finally:
        watchdog.cancel()
        again.terminate()
        again.communicate(timeout=60)
    assert first.startswith(f"resuming {last.parent} from epoch ")
