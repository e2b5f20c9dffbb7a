"""The registry: names, automatic registration of every module, argument types and declared ranges."""
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import torch
from torch import nn

import zoo
from zoo.models.constraints import AtLeast, Interval
from zoo.models.registry import (PRETRAINED_DIR, Argument, check_model_arguments, create_model, data_arguments,
                                 list_models, model_arguments, pretrained_names, register_model)

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
        "from typing import Annotated\n\nfrom torch import nn\n\n"
        "from zoo.models.constraints import AtLeast\nfrom zoo.models.registry import register_model\n\n\n"
        "@register_model('tiny_mlp')\nclass TinyMLP(nn.Module):\n"
        "    def __init__(self, in_feats: int, num_classes: int, hidden: Annotated[int, AtLeast(1)] = 3):\n"
        "        super().__init__()\n        self.net = nn.Linear(in_feats, num_classes)\n")
    script = ("import zoo.models as m; print(m.__file__); print(m.list_models()); "
              "print(m.model_arguments('tiny_mlp')['hidden'].ranges)")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    where, names, ranges = done.stdout.splitlines()[-3:]
    assert where.startswith(str(tmp_path)) and "'tiny_mlp'" in names and ranges == repr((AtLeast(1),))


def test_model_arguments_report_type_default_and_range():
    gat = model_arguments("gat")
    assert gat["dropout"] == Argument(float, 0.4, (Interval(0, 1, high_open=True),))
    assert gat["heads"] == Argument(int, 8, (AtLeast(1),))
    assert "in_feats" not in gat and data_arguments("gat") == ("in_feats", "num_classes")
    assert "num_outputs" in data_arguments("siggate_gt") and "in_feats" not in data_arguments("siggate_gt")
    ltga = model_arguments("ltga")
    assert str(ltga["delta"].ranges[0]) == "in (0, 2]" and str(ltga["q"].ranges[0]) == "> 0"
    assert ltga["normaliser"] == Argument(str, "qsoftmax")


def test_every_default_lies_in_its_declared_range():
    for name in list_models():
        for key, argument in model_arguments(name).items():
            argument.check(f"{name}.{key}", argument.default)


def test_ranges_are_checked_on_every_construction():
    with pytest.raises(ValueError, match=r"^dropout is 2.0; it must be in \[0, 1\)$"):
        create_model("gat", in_feats=3, num_classes=2, dropout=2.0)
    with pytest.raises(ValueError, match=r"^heads is 0; it must be >= 1$"):
        create_model("gatv2", in_feats=3, num_classes=2, heads=0)
    with pytest.raises(ValueError, match=r"^num_classes is 0; it must be >= 1$"):
        create_model("gcn", in_feats=3, num_classes=0)
    # also when the class is called directly, and for arguments passed on to a parent class
    from zoo.models.graph_transformer import SigGateGT
    with pytest.raises(ValueError, match=r"^attn_dropout is -0.1; it must be in \[0, 1\)$"):
        SigGateGT(attn_dropout=-0.1)


def test_a_factory_and_an_inheriting_class_register_with_their_arguments():
    @register_model("test_registry_factory")
    def factory(num_outputs: int = 1, width: Annotated[int, AtLeast(2)] = 4) -> nn.Module:
        return nn.Linear(width, num_outputs)

    class Base(nn.Module):
        def __init__(self, num_outputs: int = 1, depth: int = 1):
            super().__init__()

    @register_model("test_registry_child")
    class Child(Base):
        def __init__(self, *, extra: float = 0.5, **base_arguments):
            super().__init__(**base_arguments)

    try:
        with pytest.raises(ValueError, match="width is 1; it must be >= 2"):
            create_model("test_registry_factory", width=1)
        assert create_model("test_registry_factory", width=3).in_features == 3
        assert list(model_arguments("test_registry_child")) == ["extra", "depth"]
        assert data_arguments("test_registry_child") == ("num_outputs",)
        assert model_arguments("test_registry_child")["depth"] == Argument(int, 1)
        with pytest.raises(ValueError, match="registered twice"):
            register_model("test_registry_child")(Child)
    finally:
        from zoo.models import registry
        for name in ("test_registry_factory", "test_registry_child"):
            registry._MODELS.pop(name, None)


def test_check_model_arguments_runs_the_constructor_without_weights():
    state = torch.random.get_rng_state()
    check_model_arguments("siggate_gt", dim=512, heads=8, layers=40)  # a big model: no memory, no time
    assert torch.equal(state, torch.random.get_rng_state())
    with pytest.raises(ValueError, match="dim must be a positive multiple of heads, got dim=30, heads=4"):
        check_model_arguments("gps", dim=30, heads=4, pe="none")
    with pytest.raises(ValueError, match="heads is 0; it must be >= 1"):
        check_model_arguments("ltga", heads=0)
