"""Run a recipe over seeds into ``<out>/<recipe>/<config-hash>/seed<k>/`` and summarise them."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import traceback
from pathlib import Path

import yaml

from zoo._atomic import atomic_write
from zoo.analysis import format_summary, summarize_seeds
from zoo.data import DatasetError, DatasetNotFoundError, load_card, load_graph_dataset, load_node_dataset
from zoo.engine.checkpoint import CheckpointError, write_json
from zoo.engine.distributed import (all_sum, barrier, init_from_env, is_main, load_once_per_machine, main_first,
                                    requested_world_size, say)
from zoo.engine.divergence import DIVERGED, TrainingDiverged, record_divergence, recorded_divergence, still_diverged
from zoo.engine.environment import record_environment
from zoo.engine.epoch_loop import LAST
from zoo.engine.graph_trainer import train_graph_model
from zoo.engine.node_trainer import train_node_classifier
from zoo.engine.recipe import Recipe, RecipeError
from zoo.engine.run_lock import RunBusyError, hold_seed, one_at_a_time


SWEEP_ORDERS = ("recipe", "seed")


def run_folder(recipe: Recipe, out: str | Path = "runs") -> Path:
    """Where the seeds of ``recipe`` are written: ``<out>/<recipe name>/<config hash>``."""
    return Path(out) / recipe.name / recipe.config_hash()


def run_recipe(recipe: Recipe, out: str | Path = "runs", *, seeds: list[int] | None = None,
               force: bool = False, progress: bool = True, device: str = "cpu", share: bool = False) -> dict:
    """Train every seed (the recipe's, or ``seeds``), skipping finished ones unless ``force``.

    A seed that another recipe with the same config hash (e.g. an ablation's default point) has
    finished under ``out`` is copied from it, not retrained, unless ``force``. A seed folder that
    another process is training raises :class:`~zoo.engine.run_lock.RunBusyError`; with ``share``
    it is left to that process (said, and listed under ``busy`` in the returned summary, which
    then covers the other seeds), so several jobs over the same recipes and ``out`` divide the seeds
    (not with ``force``: a ValueError).

    A seed whose training diverges (:class:`~zoo.engine.divergence.TrainingDiverged`) is recorded
    in ``diverged.json`` and the next seed goes on; a rerun reports a recorded seed without
    training it again (``force`` retrains it). The summary covers the finished seeds and lists the
    diverged ones under ``diverged``; if no seed asked for finished, the divergence is raised.

    Returns the summary (mean and sd of every final metric) of the seeds asked for. The config
    folder's ``summary.json`` covers every seed finished there, those of other invocations too
    (a sweep over seeds 0-3 beside one over seed 4), so it never shows fewer seeds than exist.
    Launched by torchrun, graph tasks and sampled node tasks (``train.sampler``) train
    data-parallel and only rank 0 writes and prints (other ranks return an empty dict); full-batch
    node classification refuses to. ``device``: ``cpu``
    (default), ``cuda[:k]`` or ``auto``; it is not part of the recipe or its hash.

    >>> from zoo.engine.recipe import load_recipe                     # doctest: +SKIP
    >>> run_recipe(load_recipe("recipes/cora_gat.yaml"), seeds=[0, 1])  # doctest: +SKIP
    """
    _check_share(share, force)
    if requested_world_size() > 1 and recipe.task == "node_classification" and recipe.train.sampler is None:
        raise RecipeError(f"{recipe.name} is full-batch node classification: one graph in one step does not "
                          "scale out with torchrun; add train.sampler (mini-batches, e.g. --set "
                          "train.sampler.fanouts=[10,10]) or run it as a single process (python tools/train.py ...)")
    card = _card_of(recipe)
    init_from_env()
    rank0 = is_main()
    base = run_folder(recipe, out)
    resolved = yaml.safe_dump(recipe.to_dict(), sort_keys=False)
    per_seed_split = card.get("split", {}).get("protocol") == "random"
    runs, diverged, busy, graph_data = [], {}, [], None
    for seed in seeds if seeds is not None else recipe.seeds:
        seed_dir = base / f"seed{seed}"
        finished = seed_dir / "metrics.json"
        if finished.exists() and not force:
            say(f"seed {seed}: finished run found in {seed_dir}, skipping it (use --force to retrain)")
            runs.append(json.loads(finished.read_text()))
            continue
        if (message := recorded_divergence(seed_dir)) is not None and not force:
            say(f"seed {seed}: diverged in an earlier run ({seed_dir / DIVERGED}), not retrained (use --force "
                f"to retrain it from scratch): {message}")
            diverged[seed] = message
            continue
        twin = None if force or seed_dir.exists() else finished_twin(base, seed_dir.name)
        if twin is not None:
            if rank0:
                _copy_twin(twin, base, seed_dir, resolved)
            say(f"seed {seed}: {twin.parent.parent.name} has the same config hash and finished this seed; "
                f"copied its run from {twin} (use --force to retrain)")
            runs.append(json.loads((twin / "metrics.json").read_text()))
            continue
        if force and seed_dir.exists() and rank0:
            with hold_seed(seed_dir):  # never delete a run that another process is training
                shutil.rmtree(seed_dir)
        barrier()
        if recipe.task == "node_classification":
            # under torchrun each machine's local rank 0 loads, its other ranks attach in shared memory
            data = load_once_per_machine(lambda: load_node_dataset(recipe.dataset, split=seed))
            train = train_node_classifier
        else:
            if graph_data is None or per_seed_split:
                with main_first():  # rank 0 fills the dataset cache, the others read it
                    graph_data = load_graph_dataset(recipe.dataset, seed=seed, progress=progress and rank0,
                                                    featurizer=recipe.featurizer)
            data, train = graph_data, train_graph_model
        # the run folder appears only once a seed has its data, so a bad dataset leaves nothing behind;
        # one process at a time trains it (zoo.engine.run_lock)
        try:
            with _removed_unless_started(base, seed_dir, rank0), hold_seed(seed_dir, rank0, agree=all_sum):
                if finished.exists() and not force:  # another process finished it while this one loaded the data
                    say(f"seed {seed}: another process finished it in {seed_dir}, skipping it")
                    runs.append(json.loads(finished.read_text()))
                    continue
                if rank0:
                    _write_config(base, resolved)  # every job of a shared sweep writes it: whole or not at all
                    _write_config(seed_dir, resolved)
                    record_environment(seed_dir, resumed=(seed_dir / LAST).exists())
                try:
                    metrics = train(recipe, data, seed, seed_dir, progress=progress, device=device)
                except TrainingDiverged as err:  # every rank raises it (loss all-reduced, overflow agreed)
                    if rank0:
                        record_divergence(seed_dir, recipe.name, seed, err)
                    say(f"seed {seed}: {err} (recorded in {seed_dir / DIVERGED}; the next seed goes on)")
                    diverged[seed] = str(err)
                    continue
        except RunBusyError as err:  # raised by hold_seed on entry, before anything was written
            if not share:
                raise
            say(f"seed {seed}: another process ({err.holder}) is training it in {seed_dir}; left to it")
            busy.append(seed)
            continue
        if not rank0:
            continue
        main = metrics["main_metric"]
        print(f"seed {seed} (split {metrics['split']}, {metrics['num_parameters']:,} parameters): best epoch {metrics['best_epoch']}, "
              f"val {main} {metrics['final']['val'][main]:.4f}, test {main} {metrics['final']['test'][main]:.4f}")
        runs.append(metrics)
    barrier()  # every seed's files are written before any rank reads them (e.g. tools/tune.py)
    if not runs and diverged and not busy:
        first = min(diverged)
        raise still_diverged(diverged[first], base / f"seed{first}" / DIVERGED,
                             f"seed {_seeds(diverged)} of {recipe.name}: ")
    if not rank0:
        return {}
    left = f"; seed {_seeds(busy)} left to the process training it" if busy else ""
    if not runs:  # every seed asked for is another process's, or diverged
        say(f"\n{recipe.name}: no seed finished in this job{left}")
        return {"recipe": recipe.name, "config_hash": recipe.config_hash(), "seeds": [], "diverged": sorted(diverged),
                "busy": busy}
    summary = {**_summary(recipe, runs, sorted(diverged)), "busy": busy}
    with one_at_a_time(base):  # jobs sharing a sweep: each reads the finished seeds and writes, in turn
        recorded = sorted(int(path.parent.name.removeprefix("seed")) for path in base.glob(f"seed*/{DIVERGED}"))
        write_json(_summary(recipe, finished_runs(base), recorded), base / "summary.json")
    print(f"\n{recipe.name} ({recipe.dataset}, {recipe.model['name']}) over {len(runs)} seed(s), {base}"
          + (f"; seed {_seeds(diverged)} diverged and is not in it" if diverged else "") + left)
    print(format_summary(summary["metrics"]))
    return summary


def _check_share(share: bool, force: bool) -> None:
    """Refuse ``share`` with ``force``: each job would retrain seeds another job already retrained."""
    if share and force:
        raise ValueError("--share with --force would let each job retrain seeds another job already retrained; "
                         "retrain with one job (--force, no --share), then share")


def _summary(recipe: Recipe, runs: list[dict], diverged: list[int]) -> dict:
    """Mean and sd of every final metric over ``runs``, with the recipe and seeds they came from, and
    the seeds that diverged."""
    return {"recipe": recipe.name, "config_hash": recipe.config_hash(), "seeds": [r["seed"] for r in runs],
            "diverged": diverged, "main_metric": runs[0]["main_metric"], "metrics": summarize_seeds(runs)}


def _seeds(seeds) -> str:
    """Seeds (a list, or a dict keyed by seed) as ``"1, 3"``."""
    return ", ".join(str(seed) for seed in sorted(seeds))


def finished_runs(base: Path) -> list[dict]:
    """The metrics of every finished seed in a config folder, in seed order."""
    return sorted((json.loads(path.read_text()) for path in base.glob("seed*/metrics.json")), key=lambda r: r["seed"])


def finished_twin(base: Path, seed_name: str) -> Path | None:
    """A finished seed of another recipe with the same config hash under the same output root."""
    for metrics in sorted(base.parent.parent.glob(f"*/{base.name}/{seed_name}/metrics.json")):
        if metrics.parent.parent != base:
            return metrics.parent
    return None


def _write_config(folder: Path, resolved: str) -> None:
    """``folder/config.yaml``, written atomically: a reader never sees a half-written file."""
    atomic_write(folder / "config.yaml", lambda handle: handle.write(resolved.encode()))


def _copy_twin(twin: Path, base: Path, seed_dir: Path, resolved: str) -> None:
    """Copy a twin recipe's finished seed into ``seed_dir``, with this recipe's resolved config,
    through a folder of this process's own, renamed into place; if another job's copy got there
    first (jobs sharing a sweep), that one stays."""
    partial = seed_dir.with_name(f".{seed_dir.name}.copying.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(twin, partial)
    (partial / "config.yaml").write_text(resolved)
    _write_config(base, resolved)
    try:
        partial.rename(seed_dir)
    except OSError:
        shutil.rmtree(partial)
        if not (seed_dir / "metrics.json").exists():
            raise


@contextlib.contextmanager
def _removed_unless_started(base: Path, seed_dir: Path, rank0: bool):
    """Create ``seed_dir``; if the body fails before a checkpoint exists, remove what it made.

    Only this seed's folder is deleted; the folders above it go only if they were made here and
    are then empty (another job may be writing beside it). A folder another process took the lock
    of first (:class:`RunBusyError`, two jobs reaching a new seed together) is that process's: kept.
    """
    made = [p for p in (seed_dir, *seed_dir.parents) if not p.exists()]
    seed_dir.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except RunBusyError:
        raise
    except BaseException:
        if rank0 and made and made[0] == seed_dir and not any(seed_dir.glob("*.pt")):
            shutil.rmtree(seed_dir, ignore_errors=True)
            if base in made and not any(base.glob("seed*")):
                (base / "config.yaml").unlink(missing_ok=True)
            for folder in made[1:]:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise


def _card_of(recipe: Recipe) -> dict:
    """The recipe's dataset card, checked against its task (a bad name is a recipe error)."""
    try:
        card = load_card(recipe.dataset)
    except DatasetNotFoundError as err:
        raise RecipeError(f"dataset {recipe.dataset!r}: {err}") from None
    if (card["task"] == "node_classification") != (recipe.task == "node_classification"):
        raise RecipeError(f"dataset {recipe.dataset!r} is a {card['task']} card but the recipe's task is "
                          f"{recipe.task!r}; set task: {card['task']}")
    return card


def run_sweep(recipes: list[Recipe], out: str | Path = "runs", *, seeds: list[int] | None = None,
              force: bool = False, progress: bool = False, device: str = "cpu",
              order: str = "recipe", share: bool = False) -> dict[str, dict | str]:
    """Run several recipes one after another; a dataset error skips that recipe, not the sweep.

    ``order="recipe"`` trains every seed of a recipe before the next recipe; ``order="seed"`` trains
    seed ``k`` of every recipe before seed ``k + 1`` of any, so a sweep cut short (a study spread
    over several sessions) leaves the same seeds of every recipe: paired rows.

    Returns ``{recipe name: summary}`` (its ``diverged`` lists the seeds that diverged), or the error
    message for recipes that could not run: a
    missing dataset skips a recipe, and any other error but an unreadable checkpoint or a seed that
    another process is training (:class:`~zoo.engine.run_lock.RunBusyError`; both stop the sweep)
    fails only that recipe, printed with its traceback; the sweep goes on with the next one.
    ``share``: a seed another process is training is left to it and the sweep goes on
    (:func:`run_recipe`), so the same sweep started twice divides the seeds between the two jobs
    (not with ``force``: a ValueError). At the end such seeds are tried once more, so a seed whose
    job stopped (killed, out of memory) while this one went on is resumed here, not left undone.

    >>> run_sweep([load_recipe("recipes/cora_gat.yaml"), load_recipe("recipes/cora_gatv2.yaml")],
    ...           seeds=[0, 1], order="seed")    # doctest: +SKIP
    """
    if order not in SWEEP_ORDERS:
        raise ValueError(f"order must be one of {', '.join(SWEEP_ORDERS)}, got {order!r}")
    _check_share(share, force)
    plan = {recipe.name: list(seeds if seeds is not None else recipe.seeds) for recipe in recipes}
    rounds = [None] if order == "recipe" else range(max(len(s) for s in plan.values()))
    results: dict[str, dict | str] = {}
    for round_ in rounds:
        for index, recipe in enumerate(recipes, 1):
            own = plan[recipe.name]
            if isinstance(results.get(recipe.name), str) or (round_ is not None and round_ >= len(own)):
                continue
            say(f"\n[{index}/{len(recipes)}] {recipe.name}" + ("" if round_ is None else f", seed {own[round_]}"))
            if round_ is None:
                _record(results, recipe, lambda: run_recipe(recipe, out, seeds=own, force=force, progress=progress,
                                                            device=device, share=share))
                continue

            def this_round(recipe=recipe, seeds=own[:round_ + 1]):
                if force:  # retrain this round's seed alone; the call below only reads it back
                    run_recipe(recipe, out, seeds=seeds[-1:], force=True, progress=progress, device=device, share=share)
                # seeds finished earlier are read back, not retrained, so the summary covers them all
                return run_recipe(recipe, out, seeds=seeds, progress=progress, device=device, share=share)
            _record(results, recipe, this_round)
    for recipe in recipes:  # a seed left to a job that has stopped since (killed, out of memory) is free again
        result = results.get(recipe.name)
        if share and isinstance(result, dict) and result.get("busy"):
            say(f"\n{recipe.name}: seed {_seeds(result['busy'])} was left to other jobs; taking over any whose job "
                "has stopped")
            _record(results, recipe, lambda recipe=recipe: run_recipe(recipe, out, seeds=plan[recipe.name],
                                                                      progress=progress, device=device, share=True))
    failed = [name for name, result in results.items() if isinstance(result, str)]
    diverged = [f"{name} seed {_seeds(result['diverged'])}" for name, result in results.items()
                if isinstance(result, dict) and result.get("diverged")]
    left = [f"{name} seed {_seeds(result['busy'])}" for name, result in results.items()
            if isinstance(result, dict) and result.get("busy")]
    say(f"\nsweep done: {len(results) - len(failed)} recipe(s) ran"
        + (f"; diverged (diverged.json, not in the summaries): {'; '.join(diverged)}" if diverged else "")
        + (f"; left to the jobs training them: {'; '.join(left)}" if left else "")
        + (f"; skipped or failed: {', '.join(failed)}" if failed else ""))
    return results


def _record(results: dict, recipe: Recipe, call) -> None:
    """``results[recipe.name] = call()`` for :func:`run_sweep`, or the error's message: a missing
    dataset skips the recipe and any other failure fails it (said), so the sweep goes on; an
    unreadable checkpoint or a seed another process trains (without ``share``) stops the sweep."""
    try:
        results[recipe.name] = call()
    except DatasetError as err:
        say(f"skipped {recipe.name}: {err}")
        results[recipe.name] = str(err)
    except (CheckpointError, RunBusyError):
        raise  # a corrupt run folder (the tool names the file and --force), or one another job trains
    except Exception as err:  # noqa: BLE001 - one failing recipe must not stop a night's sweep
        if not isinstance(err, TrainingDiverged):  # its message names the batch and the fix
            say(traceback.format_exc())
        say(f"failed {recipe.name}: {type(err).__name__}: {err} (its finished seeds are kept; the sweep "
            "goes on with the next recipe)")
        results[recipe.name] = f"{type(err).__name__}: {err}"
