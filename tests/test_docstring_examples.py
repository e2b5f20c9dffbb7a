"""Every docstring example in zoo runs and prints what it says, so the examples users copy cannot
drift from the code. They run as from the repository's root (its recipes and the run records in
git) with the offline data; examples marked ``+SKIP`` need a network, a run's weights, state they
would leave behind (a registered model) or minutes, and the tests of their modules cover them."""
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import zoo
from tests.doctest_runner import assert_examples_pass

ROOT = Path(__file__).resolve().parents[1]


def _examples(name: str) -> list[doctest.DocTest]:
    tests = doctest.DocTestFinder().find(importlib.import_module(name), name)
    return [test for test in tests if any(not ex.options.get(doctest.SKIP) for ex in test.examples)]


MODULES = ["zoo"] + [m.name for m in pkgutil.walk_packages(zoo.__path__, "zoo.")]
EXAMPLES = {name: tests for name in MODULES if (tests := _examples(name))}


def test_the_examples_are_found():
    assert {"zoo", "zoo.ops.qsoftmax", "zoo.analysis.paired_tests", "zoo.data.featurizers"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_examples_run(name, offline_env, tmp_path, monkeypatch):
    for folder in ("recipes", "runs"):  # as from the repository's root: its recipes and run records
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)  # examples that save files (zoo.save_pretrained) write them here
    assert_examples_pass(EXAMPLES[name])
