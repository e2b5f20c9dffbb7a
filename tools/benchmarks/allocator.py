"""glibc's defaults against :func:`zoo.engine.allocator.keep_freed_memory` on a training step:
``python tools/benchmark.py allocator``.

Each measurement is a fresh worker process (the malloc setting is process-wide and cannot be
undone), alternating default and kept, so that load from other processes hits both alike. A
worker builds the ``siggate_gt`` model of ``recipe`` on a batch of random molecules
(:mod:`tools.benchmarks.models`), takes two warm-up steps, then times ``steps`` training steps
and counts their minor page faults and system CPU time (``getrusage``). Workers run with every
``MALLOC_*``, ``GLIBC_TUNABLES``, ``LD_PRELOAD`` and ``ZOO_MALLOC`` variable removed, so that
the two settings are the only difference.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("default", "kept")


def clean_env() -> dict:
    """This process's environment without any allocator choice the user made, for a fresh worker."""
    return {k: v for k, v in os.environ.items()
            if not (k.startswith("MALLOC_") or k in ("GLIBC_TUNABLES", "LD_PRELOAD", "ZOO_MALLOC"))}


def worker(config: dict) -> dict:
    """One measurement in this process: ``{"ms": median step, "faults": minor faults per step,
    "system_ms": system CPU per step, "setting": what keep_freed_memory did}``."""
    from zoo.engine.allocator import allocator_setting, keep_freed_memory
    if config["setting"] == "kept":
        keep_freed_memory()
    import torch

    from tools.benchmarks.models import _train_step, gps_configs, random_molecule_loss
    from zoo.engine.recipe import load_recipe
    from zoo.models import create_model

    torch.manual_seed(0)
    model = create_model("siggate_gt", **gps_configs(config["recipe"])[1])
    loss = random_molecule_loss(model.pe_spec(), config["batch_size"], config["atoms"])
    step = _train_step(model, loss, load_recipe(config["recipe"]).optim)
    for _ in range(2):
        step()
    times = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(config["steps"]):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1e3)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"ms": statistics.median(times), "faults": (after.ru_minflt - before.ru_minflt) / config["steps"],
            "system_ms": (after.ru_stime - before.ru_stime) * 1e3 / config["steps"], "setting": allocator_setting()}


def measure(setting: str, recipe: str, steps: int, batch_size: int, atoms, timeout: float = 1800) -> dict:
    """:func:`worker` in a fresh process with ``setting`` (``default`` or ``kept``)."""
    config = {"setting": setting, "recipe": recipe, "steps": steps, "batch_size": batch_size, "atoms": atoms}
    done = subprocess.run([sys.executable, "-m", "tools.benchmarks.allocator", json.dumps(config)], cwd=ROOT,
                          env=clean_env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"allocator worker ({setting}) failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(recipe: str = "recipes/zinc_siggate.yaml", pairs: int = 5, steps: int = 20, batch_size: int = 32,
        atoms=23) -> list[dict]:
    """Print one row per worker and the median of the pairs' step-time ratios (kept / default)."""
    print(f"allocator: {pairs} pairs of fresh processes, default then kept; each times {steps} training steps of "
          f"siggate_gt from {recipe} on {batch_size} random molecules ({atoms} atoms), torch threads "
          f"{os.environ.get('OMP_NUM_THREADS', 'default')}, load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print("| pair | setting | ms / step (median) | minor page faults / step | system CPU ms / step |")
    print("|---|---|---|---|---|")
    rows, ratios = [], []
    for pair in range(pairs):
        result = {setting: measure(setting, recipe, steps, batch_size, atoms) for setting in SETTINGS}
        for setting in SETTINGS:
            r = result[setting]
            print(f"| {pair} | {setting} | {r['ms']:.1f} | {r['faults']:.0f} | {r['system_ms']:.1f} |")
            rows.append(dict(r, pair=pair))
        ratios.append(result["kept"]["ms"] / result["default"]["ms"])
    print(f"kept / default step time: median {statistics.median(ratios):.3f} "
          f"(pairs {', '.join(f'{x:.3f}' for x in ratios)}); kept = {rows[-1]['setting']}")
    return rows


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(sys.argv[1]))))
