"""Load a script of tools/ as a module, so that its main(argv) can be called in-process."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_tool(name: str):
    """``tools/<name>.py`` as a module named ``<name>_cli``."""
    spec = importlib.util.spec_from_file_location(f"{name}_cli", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
