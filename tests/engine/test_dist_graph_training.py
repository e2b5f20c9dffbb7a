"""DistGraph training (zoo.engine.dist_graph_training) through tools/train.py on Cora partitioned by
tools/partition.py: DGL's standalone mode (1 partition, one process), and DGL's distributed mode
with 2 partitions, 2 graph servers and 2 trainers on 127.0.0.1. With full neighbourhoods and no
dropout every epoch is one step over all 140 training nodes, so the 2-trainer run must follow the
single process's loss curve; the final metrics must equal a layer-wise evaluation of the saved
model on the whole graph (zoo.engine.node_sampling, a different code path). Every launch has its
own timeout and every process started is killed at the end, whatever happens."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.engine import dist_graph_driver as driver
from tests.engine.folder_holder import hold_folder
from zoo.data import load_node_dataset
from zoo.engine.checkpoint import load_checkpoint
from zoo.engine.experiment import run_folder
from zoo.engine.node_sampling import layerwise_forward
from zoo.engine.recipe import load_recipe
from zoo.models import create_model

REPO = Path(__file__).resolve().parents[2]
RECIPE = driver.RECIPE
DRIVER = Path(driver.__file__)
EXACT = [arg for override in driver.EXACT for arg in ("--set", override)]
EXACT += ["--epochs", str(driver.EPOCHS), "--seeds", "0"]
TIE_MARGIN = 1e-4  # logit gap; the one- and two-trainer models differ by about 4e-6 in their logits
RESUME_TOLERANCE = 2e-5  # cross-entropy near 1.9, float32 sums in another order (6x the largest seen)
TIMEOUT = 180  # seconds for a whole launch (servers, trainers, exit; about 30 s on an idle machine)
PRIVATE_SHM = ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs tmpfs /dev/shm && exec "$0" "$@"']


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _partition(tmp_path: Path, parts: int) -> Path:
    out = tmp_path / f"parts{parts}"
    subprocess.run([sys.executable, str(REPO / "tools" / "partition.py"), "cora", "--parts", str(parts), "--out",
                    str(out)], check=True, capture_output=True, timeout=TIMEOUT)
    return out / "cora.json"


def _run(commands: list[tuple[list, dict]], tmp_path: Path, wait_for: int) -> list[tuple[int, str]]:
    """Start every command (its own session, env added to ours), wait for the first ``wait_for``
    to finish and then the rest, all within TIMEOUT; kill whatever is left. Returns (code, output)."""
    processes = []
    try:
        for index, (command, env) in enumerate(commands):
            log = open(tmp_path / f"process{index}.log", "w+")
            processes.append((subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1", **env},
                                               stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                               start_new_session=True), log))
        ordered = processes[-wait_for:] + processes[:-wait_for]
        deadline = TIMEOUT + time.monotonic()
        for process, _ in ordered:
            try:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{process.args} did not finish within {TIMEOUT} s (a hang)")
        results = []
        for process, log in processes:
            log.seek(0)
            results.append((process.returncode, log.read()))
        return results
    finally:
        for process, log in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()


def _train_command(part_config: Path, out: Path, ip_config: Path | None = None) -> list:
    command = [sys.executable, str(REPO / "tools" / "train.py"), str(RECIPE), "--dist-config", str(part_config),
               "--out", str(out), "--quiet", *EXACT]
    return command + (["--ip-config", str(ip_config)] if ip_config else [])


def _metrics(out: Path) -> tuple[dict, Path]:
    (path,) = out.glob("*/*/seed0/metrics.json")
    return json.loads(path.read_text()), path.parent


def _layerwise(run_dir: Path) -> tuple[dict, dict]:
    """Loss and accuracy of the saved model on val and test, layer-wise over the whole graph, and
    per part the nodes whose top two logits are within TIE_MARGIN (their argmax is float rounding)."""
    data = load_node_dataset("cora")
    state = load_checkpoint(run_dir / "best.pt")
    model = create_model("ltga", in_feats=data.features.shape[1], num_classes=data.num_classes,
                         **{k: v for k, v in state["recipe"]["model"].items() if k != "name"})
    model.load_state_dict(state["model"])
    with torch.no_grad():
        logits = layerwise_forward(model.eval(), data.graph, data.features, 512)
    top2 = logits.topk(2, dim=1).values
    tied = top2[:, 0] - top2[:, 1] < TIE_MARGIN
    parts = (("val", data.val_mask), ("test", data.test_mask))
    metrics = {part: {"loss": float(F.cross_entropy(logits[mask].double(), data.labels[mask])),
                      "accuracy": float((logits[mask].argmax(1) == data.labels[mask]).double().mean())}
               for part, mask in parts}
    return metrics, {part: int(tied[mask].sum()) / int(mask.sum()) for part, mask in parts}


def _close(got: dict, want: dict, tolerance: float, tied: dict) -> None:
    """Losses within ``tolerance``; accuracies equal up to the near-tied nodes, whose predicted class
    another summation order may flip (CI once lost one of 1000 Cora test nodes that way)."""
    for part in ("val", "test"):
        assert got[part]["loss"] == pytest.approx(want[part]["loss"], abs=tolerance), part
        assert abs(got[part]["accuracy"] - want[part]["accuracy"]) <= tied[part] + 1e-9, (part, tied[part])


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """One process on a 1-partition Cora in DGL's standalone mode (no DGL_DIST_MODE)."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    part_config = _partition(tmp_path, 1)
    ((code, output),) = _run([(_train_command(part_config, tmp_path / "runs"), {})], tmp_path, 1)
    assert code == 0, output[-3000:]
    return _metrics(tmp_path / "runs")


def test_standalone_trains_and_reports_the_layerwise_metrics(standalone):
    metrics, run_dir = standalone
    losses = [row["train_loss"] for row in metrics["curves"]]
    assert metrics["trainers"] == 1 and metrics["epochs_run"] == 3 and all(map(torch.isfinite, torch.tensor(losses)))
    # LTGA-Edge's q per layer and head, every epoch (q stays 1 in the 20-epoch warm-up; per-edge q has an sd)
    assert all(row["q_mean/layer1_head0"] == pytest.approx(1.0, abs=0.05) and "q_sd/layer0_head0" in row
               for row in metrics["curves"])
    assert losses[-1] < losses[0]
    layerwise, tied = _layerwise(run_dir)
    _close(metrics["final"], layerwise, 1e-5, tied)  # float32 logits, sums in another order


def test_standalone_resumes_a_killed_run_to_the_uninterrupted_result(standalone, tmp_path):
    """Interrupted after epoch 1 (its last.pt written), the same run relaunched resumes from epoch 2
    and ends with the uninterrupted run's curves and metrics; TensorBoard events are written."""
    part_config = _partition(tmp_path, 1)
    command = [sys.executable, str(DRIVER), str(part_config), str(tmp_path / "runs")]
    ((code, output),) = _run([(command + ["1"], {"PYTHONPATH": str(REPO)})], tmp_path, 1)
    assert code != 0 and "KeyboardInterrupt" in output, output[-3000:]
    (last,) = (tmp_path / "runs").glob("*/*/seed0/last.pt")
    assert load_checkpoint(last)["state"]["epoch"] == 2
    ((code, output),) = _run([(command, {"PYTHONPATH": str(REPO)})], tmp_path, 1)
    assert code == 0 and "from epoch 2" in output, output[-3000:]
    metrics, run_dir = _metrics(tmp_path / "runs")
    single, _ = standalone
    assert metrics["epochs_run"] == 3 and not (run_dir / "last.pt").exists()
    # Not bit for bit: DGL's DistNodeDataLoader returns the same full neighbourhoods in another node
    # and edge order from call to call (measured: same input nodes and edges, another order), so the
    # float32 sums of training and evaluation run in another order from process to process (over 12
    # identical launches here, losses differ by up to 3.4e-6). Losses agree to RESUME_TOLERANCE.
    for resumed, uninterrupted in zip(metrics["curves"], single["curves"], strict=True):
        assert resumed["train_loss"] == pytest.approx(uninterrupted["train_loss"], abs=RESUME_TOLERANCE)
        assert resumed["val_loss"] == pytest.approx(uninterrupted["val_loss"], abs=RESUME_TOLERANCE)
    assert metrics["final"]["test"]["loss"] == pytest.approx(single["final"]["test"]["loss"], abs=RESUME_TOLERANCE)
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))


def test_standalone_records_a_diverged_seed_and_does_not_retrain_it(tmp_path):
    """lr 1e30: Adam's first step moves every weight by about 1e30, so epoch 1's attention logits
    overflow on any CPU. The run exits 3 naming the place and writes diverged.json; a relaunch reports the record
    without training; --force retrains from scratch and diverges again."""
    part_config = _partition(tmp_path, 1)
    command = _train_command(part_config, tmp_path / "runs") + ["--set", "optim.lr=1e30", "--seeds", "0",
                                                                 "--epochs", "3"]
    ((code, output),) = _run([(command, {})], tmp_path, 1)
    assert code == 3 and "error: training diverged: the attention logits contain NaN" in output, output[-3000:]
    assert "in the evaluation of epoch 0 of cora_ltga_edge_sampled seed 0" in output and "Traceback" not in output
    (record,) = (tmp_path / "runs").glob("*/*/seed0/diverged.json")
    assert json.loads(record.read_text())["message"].startswith("training diverged: the attention logits")
    files = {path: path.stat().st_mtime_ns for path in record.parent.rglob("*")}
    ((code, output),) = _run([(command, {})], tmp_path, 1)
    assert code == 3 and "a rerun reports it again, --force retrains" in output, output[-3000:]
    assert {path: path.stat().st_mtime_ns for path in record.parent.rglob("*")} == files  # nothing trained
    ((code, output),) = _run([(command + ["--force"], {})], tmp_path, 1)
    assert code == 3 and "in the evaluation of epoch 0" in output and "a rerun reports it again" not in output, \
        output[-3000:]
    assert record.stat().st_mtime_ns > files[record]  # retrained, and recorded again



def test_standalone_records_attention_that_overflows_in_the_final_evaluation(tmp_path):
    """The test nodes, evaluated only after training, get inf features after the last epoch: the
    selected model's attention overflows in the final evaluation. The run stops with TrainingDiverged
    naming it, writes diverged.json and no metrics, as an overflow inside the epoch loop does."""
    part_config = _partition(tmp_path, 1)
    command = [sys.executable, str(DRIVER), str(part_config), str(tmp_path / "runs"), "poison"]
    ((code, output),) = _run([(command, {"PYTHONPATH": str(REPO)})], tmp_path, 1)
    assert code != 0 and "TrainingDiverged: training diverged: the attention" in output, output[-3000:]
    assert re.search(r"in the final evaluation of the model of epoch \d of cora_ltga_edge_sampled seed 0\.", output)
    assert "NonFiniteScores" not in output.split("TrainingDiverged: training diverged")[-1]
    (record,) = (tmp_path / "runs").glob("*/*/seed0/diverged.json")
    assert "in the final evaluation" in json.loads(record.read_text())["message"]
    assert not (record.parent / "metrics.json").exists() and (record.parent / "last.pt").exists()

def test_standalone_refuses_a_run_folder_another_process_trains(tmp_path):
    """A second DistGraph job on a seed folder that another process holds stops with one error line
    naming that process, and writes nothing there (zoo.engine.run_lock)."""
    part_config = _partition(tmp_path, 1)
    seed_dir = run_folder(load_recipe(RECIPE, driver.EXACT, epochs=driver.EPOCHS), tmp_path / "runs") / "seed0"
    seed_dir.mkdir(parents=True)
    holder = hold_folder(seed_dir)
    try:
        ((code, output),) = _run([(_train_command(part_config, tmp_path / "runs"), {})], tmp_path, 1)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert code == 2 and f"is being trained by another process (pid {holder.pid}" in output, output[-3000:]
    assert list(seed_dir.iterdir()) == []


def _private_shm_works() -> bool:
    try:
        return subprocess.run([*PRIVATE_SHM, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _private_shm_works(), reason="needs `unshare -Urm` (a private /dev/shm for the second graph "
                    "server): DGL 2.1 names a server's shared-memory features by feature name only, so two "
                    "partitions' servers on one host overwrite each other's")
def test_two_partitions_two_servers_two_trainers_follow_one_process(standalone, tmp_path):
    """DGL's distributed mode on 127.0.0.1: server i serves partition i (server 1 with its own
    /dev/shm, as on a second machine), 2 trainers (torch gloo group) train one DDP model."""
    part_config = _partition(tmp_path, 2)
    ports = _free_ports(3)
    ip_config = tmp_path / "ip_config.txt"
    ip_config.write_text("".join(f"127.0.0.1 {port}\n" for port in ports[:2]))
    common = {"DGL_DIST_MODE": "distributed", "DGL_IP_CONFIG": str(ip_config), "DGL_NUM_SERVER": "1",
              "DGL_NUM_CLIENT": "2", "DGL_CONF_PATH": str(part_config), "DGL_NUM_SAMPLER": "0",
              "DGL_DIST_MAX_TRY_TIMES": "20"}
    command = _train_command(part_config, tmp_path / "runs", ip_config)
    servers = [((PRIVATE_SHM if i else []) + command, {**common, "DGL_ROLE": "server", "DGL_SERVER_ID": str(i)})
               for i in range(2)]
    trainers = [(command, {**common, "DGL_ROLE": "client", "RANK": str(rank), "WORLD_SIZE": "2",
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ports[2])}) for rank in range(2)]
    results = _run(servers + trainers, tmp_path, wait_for=2)
    for code, output in results:
        assert code == 0, output[-3000:]
    assert "seed 0 epoch 0" not in results[3][1]  # rank 1 says nothing (and writes nothing: one run folder)
    metrics, run_dir = _metrics(tmp_path / "runs")
    single, _ = standalone
    assert metrics["trainers"] == 2 and metrics["epochs_run"] == 3
    for two, one in zip(metrics["curves"], single["curves"], strict=True):
        assert two["train_loss"] == pytest.approx(one["train_loss"], abs=1e-4)
        assert two["val_loss"] == pytest.approx(one["val_loss"], abs=1e-4)
    layerwise, tied = _layerwise(run_dir)
    _close(metrics["final"], single["final"], 1e-4, tied)
    _close(metrics["final"], layerwise, 1e-5, tied)
