"""glibc's defaults against :func:`zoo.engine.allocator.keep_freed_memory` (and, given its
library, jemalloc without purging and jemalloc purging freed pages after about a second) on a
training step: ``python tools/benchmark.py allocator``.

Each measurement is a fresh worker process (the malloc setting is process-wide and cannot be
undone), the settings in turn, so that load from other processes hits all alike. A worker builds
the ``siggate_gt`` model of ``recipe`` on ``batches`` batches of random molecules
(:mod:`tools.benchmarks.models`; several batches with sizes drawn from a range, cycled, are what
fragments a heap), takes two warm-up steps, then times ``steps`` training steps and counts their
minor page faults and system CPU time (``getrusage``), and reads the process's peak resident set.
Workers run with every ``MALLOC_*``, ``GLIBC_TUNABLES``, ``LD_PRELOAD`` and ``ZOO_MALLOC``
variable removed, so that the settings are the only difference.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from zoo._malloc import JEMALLOC_CONF, chooses_allocator

JEMALLOC_PURGING_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:0"
"""jemalloc returning freed pages to the system about a second after they were freed: the
resident set follows the memory in use, at the price of page faults when it is touched again."""

ROOT = Path(__file__).resolve().parents[2]


def clean_env() -> dict:
    """This process's environment without any allocator choice the user made, for a fresh worker."""
    return {k: v for k, v in os.environ.items()
            if not (chooses_allocator(k) or k in ("ZOO_MALLOC", "ZOO_JEMALLOC"))}


def worker(config: dict) -> dict:
    """One measurement in this process: ``{"ms": median step, "faults": minor faults per step,
    "system_ms": system CPU per step, "peak_mb": peak resident set, "setting": what
    keep_freed_memory did, "malloc_conf": jemalloc's MALLOC_CONF or None}``."""
    from zoo.engine.allocator import allocator_setting, keep_freed_memory
    if config["setting"] != "default":  # kept: mallopt; jemalloc: left alone, named as preloaded
        keep_freed_memory()
    import torch

    from tools.benchmarks.models import _train_step, gps_configs, random_molecule_loss
    from zoo.engine.recipe import load_recipe
    from zoo.models import create_model

    torch.manual_seed(0)
    model = create_model("siggate_gt", **gps_configs(config["recipe"])[1])
    loss = random_molecule_loss(model.pe_spec(), config["batch_size"], config["atoms"], config["batches"])
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
            "system_ms": (after.ru_stime - before.ru_stime) * 1e3 / config["steps"],
            "peak_mb": after.ru_maxrss / 1024, "setting": allocator_setting(),  # ru_maxrss: KiB on Linux
            "malloc_conf": os.environ.get("MALLOC_CONF")}


def measure(setting: str, recipe: str, steps: int, batch_size: int, atoms, batches: int = 1,
            jemalloc: str | None = None, timeout: float = 1800) -> dict:
    """:func:`worker` in a fresh process with ``setting``: ``default``, ``kept``, ``jemalloc`` (the
    library at ``jemalloc`` preloaded, without purging) or ``jemalloc-purging`` (preloaded, with
    :data:`JEMALLOC_PURGING_CONF`)."""
    config = {"setting": setting, "recipe": recipe, "steps": steps, "batch_size": batch_size, "atoms": atoms,
              "batches": batches}
    env = clean_env()
    if setting.startswith("jemalloc"):
        conf = JEMALLOC_PURGING_CONF if setting == "jemalloc-purging" else JEMALLOC_CONF
        env.update(LD_PRELOAD=str(jemalloc), MALLOC_CONF=conf)
    done = subprocess.run([sys.executable, "-m", "tools.benchmarks.allocator", json.dumps(config)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"allocator worker ({setting}) failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(recipe: str = "recipes/zinc_siggate.yaml", pairs: int = 5, steps: int = 20, batch_size: int = 32,
        atoms=23, batches: int = 1, jemalloc: str | None = None) -> list[dict]:
    """Print one row per worker, and the median over the rounds of each setting's step time and
    peak resident set relative to glibc's defaults."""
    settings = ["default", "kept"] + (["jemalloc", "jemalloc-purging"] if jemalloc else [])
    print(f"allocator: {pairs} rounds of fresh processes, {', then '.join(settings)}; each times {steps} training "
          f"steps of siggate_gt from {recipe} on {batches} batch(es) of {batch_size} random molecules ({atoms} "
          f"atoms), cycled; torch threads {os.environ.get('OMP_NUM_THREADS', 'default')}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("| round | setting | ms / step (median) | minor page faults / step | system CPU ms / step | "
          "peak resident MB |")
    print("|---|---|---|---|---|---|")
    rows, ratios, said = [], {setting: [] for setting in settings[1:]}, {}
    for pair in range(pairs):
        result = {setting: measure(setting, recipe, steps, batch_size, atoms, batches, jemalloc)
                  for setting in settings}
        for setting in settings:
            r = result[setting]
            print(f"| {pair} | {setting} | {r['ms']:.1f} | {r['faults']:.0f} | {r['system_ms']:.1f} | "
                  f"{r['peak_mb']:.0f} |")
            rows.append(dict(r, pair=pair))
            said[setting] = r["setting"]
            if setting != "default":
                ratios[setting].append((r["ms"] / result["default"]["ms"], r["peak_mb"] / result["default"]["peak_mb"]))
    for setting, measured in ratios.items():
        times, peaks = zip(*measured)
        print(f"{setting} / default: step time median {statistics.median(times):.3f} "
              f"(rounds {', '.join(f'{x:.3f}' for x in times)}), peak resident median {statistics.median(peaks):.3f}; "
              f"{setting} = {said[setting]}")
    return rows


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(sys.argv[1]))))
