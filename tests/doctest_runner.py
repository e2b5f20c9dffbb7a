"""Runs doctests for the tests that hold documentation to the code (docstrings, README examples)."""
import doctest

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def assert_examples_pass(tests: list[doctest.DocTest]) -> None:
    """Run ``tests``; fail with doctest's report of every example whose output differs."""
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)
