"""Check that the training command a checkpoint card records rebuilds the run it was exported from.

A card's ``command`` is how a reader retrains the model, so :func:`check_command` refuses one that
would build another recipe (a different ``--set``, ``--epochs`` or recipe file) or not train the
run's seed. It reads the recipe paths, ``--set``, ``--epochs`` and ``--seeds`` of a
``tools/train.py`` or ``tools/sweep.py`` command (also under ``torchrun`` or ``nice``) and ignores
options that do not change the recipe (``--out``, ``--order``, ``--device``, ...).

>>> from zoo.engine.recipe import load_recipe
>>> recipe = load_recipe("recipes/zinc_siggate.yaml", epochs=100)  # the run's recipe
>>> check_command("python tools/train.py recipes/zinc_siggate.yaml --epochs 100 --seeds 0", recipe, seed=0)
>>> check_command("python tools/train.py recipes/zinc_siggate.yaml --epochs 50 --seeds 0", recipe, seed=0)
Traceback (most recent call last):
    ...
zoo.engine.card_command.CommandError: --command builds another recipe than the run's: optim.epochs: 50 by the command, 100 in the run; ...
"""
from __future__ import annotations

import shlex
from pathlib import Path

from zoo.engine.recipe import Recipe, RecipeError, load_recipe, parse_seeds

TOOLS = ("train.py", "sweep.py")
IGNORED = ("seeds", "name", "description")
"""Recipe fields that do not change a trained model; the seed is checked on its own."""
REPO = Path(__file__).resolve().parents[2]


class CommandError(ValueError):
    """The command does not rebuild the run; the message names the difference."""


def check_command(command: str, recipe: Recipe, seed: int | None, root: Path | None = None) -> None:
    """Raise :class:`CommandError` unless ``command`` trains ``recipe`` (the run's) at ``seed``
    (not checked when None).

    Recipe paths are read relative to the working directory, then to ``root`` (the repository).
    """
    paths, overrides, epochs, seeds = _parse(command)
    built = []
    for path in paths:
        found = next((place / path for place in (Path.cwd(), root or REPO) if (place / path).is_file()), None)
        if found is None:
            raise CommandError(f"--command names recipe {path}, which is neither under {Path.cwd()} nor under "
                               f"{root or REPO}; give the recipe's path as the training command did")
        try:
            built.append(load_recipe(found, overrides, epochs=epochs))
        except RecipeError as err:
            raise CommandError(f"--command does not build a recipe: {err}") from None
    target = _identity(recipe)
    match = next((candidate for candidate in built if _identity(candidate) == target), None)
    if match is None:
        named = [candidate for candidate in built if candidate.name == recipe.name]
        named = named or (built if len(built) == 1 else [])
        if not named:
            raise CommandError(f"--command trains {', '.join(r.name for r in built)}, not the run's recipe "
                               f"{recipe.name!r}; give the command that trained this run")
        differences = _differences(_identity(named[0]), target)
        listed = "; ".join(f"{key}: {ours!r} by the command, {theirs!r} in the run"
                           for key, ours, theirs in differences[:5])
        more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
        raise CommandError(f"--command builds another recipe than the run's: {listed}{more}. Give the command "
                           "that trained the run, e.g. with --set KEY=VALUE for a value the recipe file no "
                           "longer has")
    try:
        trained = parse_seeds(seeds) if seeds is not None else match.seeds
    except (RecipeError, ValueError) as err:
        raise CommandError(f"--command has --seeds {seeds!r}: {err}") from None
    if seed is not None and seed not in trained:
        raise CommandError(f"--command trains seeds {list(trained)}, not the run's seed {seed}; "
                           f"add --seeds {seed}")


def _parse(command: str) -> tuple[list[str], list[str], int | None, str | None]:
    """Recipe paths, overrides, epoch cap and seeds of a train.py / sweep.py command."""
    try:
        words = shlex.split(command)
    except ValueError as err:
        raise CommandError(f"--command {command!r} is not a shell command line: {err}") from None
    start = next((i for i, word in enumerate(words) if Path(word).name in TOOLS), None)
    if start is None:
        raise CommandError(f"--command {command!r} runs neither tools/train.py nor tools/sweep.py; give the "
                           "command that trained the run, e.g. \"python tools/train.py recipes/zinc_siggate.yaml "
                           "--seeds 0\"")
    paths, overrides, epochs, seeds = [], [], None, None
    rest = iter(words[start + 1:])
    for word in rest:
        option, _, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in ("--set", "--epochs", "--seeds"):
            value = attached or next(rest, None)
            if value is None:
                raise CommandError(f"--command ends after {option}, which needs a value")
            if option == "--set":
                overrides.append(value)
            elif option == "--epochs":
                try:
                    epochs = int(value)
                except ValueError:
                    raise CommandError(f"--command has --epochs {value!r}, not a whole number") from None
            else:
                seeds = value
        elif word.endswith((".yaml", ".yml")) and not word.startswith("-"):
            paths.append(word)
    if not paths:
        raise CommandError(f"--command {command!r} names no recipe (.yaml)")
    return paths, overrides, epochs, seeds


def _identity(recipe: Recipe) -> dict:
    return {key: value for key, value in recipe.to_dict().items() if key not in IGNORED}


def _differences(ours, theirs, prefix: str = "") -> list[tuple[str, object, object]]:
    """``(dotted key, ours, theirs)`` for every leaf that differs (a missing key reads as None)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [difference for key in sorted(ours.keys() | theirs.keys())
                for difference in _differences(ours.get(key), theirs.get(key), f"{prefix}{key}.")]
    return [] if ours == theirs else [(prefix[:-1], ours, theirs)]
