"""Pretrained checkpoints: save/load round trip, integrity, featurizer and card checks, names."""
import hashlib

import numpy as np
import pytest
import torch

import zoo
from zoo.data import FEATURIZER_SPEC
from zoo.models import create_model
from tools.benchmarks.models import random_molecules
from zoo.models.pretrained import (
    FORMAT,
    PretrainedError,
    load_pretrained,
    model_from_card,
    save_pretrained,
    weights_sha256,
)

ARGS = dict(num_outputs=1, dim=16, heads=2, layers=1, pe="rwse", rwse_k=20, dim_pe=4)  # random_molecules has 20 rwse columns


def _tiny(seed=0):
    torch.manual_seed(seed)
    return create_model("siggate_gt", **ARGS)


def _card(**extra):
    return {"architecture": "siggate_gt", "model_args": dict(ARGS), **extra}


def test_round_trip_by_path_and_by_name(tmp_path):
    model = _tiny()
    path = save_pretrained(model, _card(name="tiny"), tmp_path / "tiny.pt")
    batch = random_molecules(3)
    model.eval()
    with torch.no_grad():
        expected = model(batch)
        for loaded in (load_pretrained(path), load_pretrained("tiny", directory=tmp_path)):
            assert not loaded.training and torch.equal(loaded(batch), expected)
            assert loaded.card["name"] == "tiny" and loaded.card["model_args"] == ARGS
            assert loaded.card["weights_sha256"] == weights_sha256(model.state_dict())
            assert loaded.card["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert zoo.load_pretrained is load_pretrained and zoo.save_pretrained is save_pretrained


def test_weights_sha256_matches_a_hand_computed_digest():
    a = torch.tensor([[1, 2], [3, 4]], dtype=torch.int64)
    b = torch.tensor([0.5, -2.0], dtype=torch.float32)
    reference = hashlib.sha256(
        b"a\0torch.int64\0" + b"2,2\0" + np.array([1, 2, 3, 4], dtype=np.int64).tobytes()
        + b"b\0torch.float32\0" + b"2\0" + np.array([0.5, -2.0], dtype=np.float32).tobytes()
    ).hexdigest()
    assert weights_sha256({"b": b, "a": a}) == reference  # keys sorted, not insertion order
    # a transposed (non-contiguous) tensor hashes as its contiguous copy, not as its storage
    assert weights_sha256({"a": a.t()}) == weights_sha256({"a": a.t().contiguous()}) != weights_sha256({"a": a})


def test_a_tampered_weight_is_refused(tmp_path):
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.pt")
    payload = torch.load(path)
    key = next(iter(payload["state_dict"]))
    payload["state_dict"][key] = payload["state_dict"][key] + 1e-3
    torch.save(payload, path)
    with pytest.raises(PretrainedError, match="do not match their recorded sha256"):
        load_pretrained(path)


def test_a_different_featurizer_is_refused(tmp_path):
    other = dict(FEATURIZER_SPEC, atom_feature_dims=[*FEATURIZER_SPEC["atom_feature_dims"][:-1], 99])
    path = save_pretrained(_tiny(), _card(featurizer=other), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="atom_feature_dims"):
        load_pretrained(path)
    assert load_pretrained(path, check_featurizer=False).card["featurizer"] == other
    same = save_pretrained(_tiny(), _card(featurizer=dict(FEATURIZER_SPEC, ogb_version="0.0")), tmp_path / "s.pt")
    load_pretrained(same)  # versions are informational


def test_unknown_names_missing_files_and_foreign_files(tmp_path):
    save_pretrained(_tiny(), _card(), tmp_path / "zinc_siggate.pt")
    with pytest.raises(PretrainedError, match="Did you mean 'zinc_siggate'"):
        load_pretrained("zinc_sigate", directory=tmp_path)
    with pytest.raises(PretrainedError, match="no pretrained checkpoint file"):
        load_pretrained(tmp_path / "absent.pt")
    torch.save({"model": _tiny().state_dict(), "epoch": 3}, tmp_path / "best.pt")
    with pytest.raises(PretrainedError, match=f"not a zoo pretrained checkpoint.*expected '{FORMAT}'"):
        load_pretrained(tmp_path / "best.pt")
    (tmp_path / "text.pt").write_text("not a torch file")
    with pytest.raises(PretrainedError, match="not a readable zoo pretrained checkpoint"):
        load_pretrained(tmp_path / "text.pt")


def test_save_pretrained_checks_the_card(tmp_path):
    with pytest.raises(PretrainedError, match=r"lacks \['model_args'\]"):
        save_pretrained(_tiny(), {"architecture": "siggate_gt"}, tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="does not rebuild this model"):
        save_pretrained(_tiny(), _card(model_args=dict(ARGS, dim=32)), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="not registered"):
        save_pretrained(_tiny(), _card(architecture="siggate"), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="plain JSON"):
        save_pretrained(_tiny(), _card(path=tmp_path), tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()


def test_max_bytes_refuses_before_writing(tmp_path):
    with pytest.raises(PretrainedError, match="m.pt would be .* MB, over the 0.001 MB limit"):
        save_pretrained(_tiny(), _card(), tmp_path / "m.pt", max_bytes=1000)
    assert not list(tmp_path.iterdir())
    assert save_pretrained(_tiny(), _card(), tmp_path / "m.pt", max_bytes=10_000_000).stat().st_size <= 10_000_000


def test_model_from_card_builds_what_the_card_names():
    model = model_from_card(_card())
    assert set(model.state_dict()) == set(_tiny().state_dict())
    with pytest.raises(PretrainedError, match=r"runs/x: create_model\('siggate_gt'.*failed"):
        model_from_card(_card(model_args=dict(ARGS, no_such_argument=1)), "runs/x")
    with pytest.raises(PretrainedError, match="model_args must be a mapping"):
        model_from_card(_card(model_args=[16]))
