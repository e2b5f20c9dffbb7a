"""Shared by the report tests: a tree of run folders with known scores."""
from pathlib import Path

import pytest

from tests.analysis.report_inputs import write_cases


@pytest.fixture()
def runs(tmp_path) -> Path:
    """``tmp_path/runs`` holding every case of :data:`tests.analysis.report_inputs.CASES` on seeds 0-4."""
    return write_cases(tmp_path / "runs")
