"""The floors of DESIGN.md are enforced: ``lint-imports`` keeps every contract in ``.importlinter``."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")  # import-linter's script (the test extra)


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(ROOT / ".importlinter")], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_every_import_contract_is_kept():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_its_floor_contract(tmp_path):
    for folder in ("zoo", "tools"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pt"))
    (tmp_path / "zoo" / "ops" / "upward.py").write_text("from zoo.engine import recipe\n")
    done = _lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ops knows nothing of nn or of any other floor BROKEN" in done.stdout
    assert "zoo.ops.upward -> zoo.engine.recipe" in done.stdout
