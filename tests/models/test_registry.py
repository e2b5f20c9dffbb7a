"""The registry's names: architectures, found in every module without an import list, and the
shipped pretrained checkpoints with list_models(pretrained=True)."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from zoo.models.registry import PRETRAINED_DIR, create_model, list_models, pretrained_names

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "zoo" / "models"


def test_list_models_pretrained_lists_the_shipped_files(tmp_path):
    shipped = sorted(p.stem for p in PRETRAINED_DIR.glob("*.safetensors"))
    assert list_models(pretrained=True) == pretrained_names() == shipped
    assert "siggate_gt" in list_models() and "siggate_gt" not in list_models(pretrained=True)
    assert zoo.list_models(pretrained=True) == list_models(pretrained=True)
    for name in ("b_model.pt", "a_model.safetensors", "a_model.pt"):  # .pt: legacy files, read for one release
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.md").write_text("not a checkpoint")
    assert pretrained_names(tmp_path) == ["a_model", "b_model"]


def test_an_unknown_architecture_names_the_nearest():
    with pytest.raises(KeyError, match="did you mean 'siggate_gt'"):
        create_model("siggate_gtt")


def test_every_registering_module_is_found_without_an_import_list():
    registered = {}
    for path in MODELS.glob("*.py"):
        for name in re.findall(r'^@register_model\("(\w+)"\)', path.read_text(), flags=re.M):
            registered[name] = path.stem
    assert set(registered.values()) >= {"graph_transformer", "ltga", "node_classifiers"}
    assert sorted(registered) == list_models()
    init = (MODELS / "__init__.py").read_text()
    assert not any(re.search(rf"\b{module}\b", init) for module in set(registered.values()))


def test_a_new_file_registers_its_model(tmp_path):
    """A copy of the package plus one new module in zoo/models: the model is listed, nothing else edited."""
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pt", "*.safetensors"))
    (tmp_path / "zoo" / "models" / "tiny_mlp.py").write_text(
        "from torch import nn\n\nfrom zoo.models.registry import register_model\n\n\n"
        "@register_model('tiny_mlp')\nclass TinyMLP(nn.Module):\n"
        "    def __init__(self, in_feats: int, num_classes: int, hidden: int = 3):\n"
        "        super().__init__()\n        self.net = nn.Linear(in_feats, num_classes)\n")
    script = "import zoo.models as m; print(m.__file__); print(m.list_models()); print(m.model_arguments('tiny_mlp'))"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    where, names, arguments = done.stdout.splitlines()[-3:]
    assert where.startswith(str(tmp_path)) and "'tiny_mlp'" in names and arguments == "{'hidden': <class 'int'>}"
