"""The registry's names: architectures, and the shipped pretrained checkpoints with list_models(pretrained=True)."""
import pytest

import zoo
from zoo.models.registry import PRETRAINED_DIR, create_model, list_models, pretrained_names


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
