"""Pretrained checkpoints: the safetensors + JSON card pair, its digests and the refusals of a
changed card or weights, the legacy .pt reader, featurizer and card checks, names."""
import hashlib
import json

import numpy as np
import pytest
import safetensors.torch
import torch

import zoo
from tests.tools.tool_loader import load_tool
from tools.benchmarks.models import random_molecules
from zoo.data import FEATURIZER_SPEC
from zoo.models import create_model
from zoo.models.pretrained import (
    FORMAT,
    PretrainedError,
    canonical_card,
    card_digests,
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


def _legacy(model, card, path):
    """A zoo-pretrained/1 file as the previous release wrote it."""
    state = {key: tensor.detach().cpu() for key, tensor in model.state_dict().items()}
    card = {**card, "weights_sha256": weights_sha256(state), "num_parameters": sum(p.numel() for p in model.parameters())}
    torch.save({"format": "zoo-pretrained/1", "card": card, "state_dict": state}, path)
    return path


def _refusal(path, match):
    """load_pretrained(path) raises one line that matches ``match``."""
    with pytest.raises(PretrainedError, match=match) as info:
        load_pretrained(path)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_round_trip_by_either_file_and_by_name(tmp_path):
    model = _tiny()
    path = save_pretrained(model, _card(name="tiny"), tmp_path / "tiny.safetensors")
    assert path == tmp_path / "tiny.safetensors" and sorted(p.name for p in tmp_path.iterdir()) == ["tiny.json",
                                                                                                    "tiny.safetensors"]
    batch = random_molecules(3)
    model.eval()
    with torch.no_grad():
        expected = model(batch)
        for source in (path, tmp_path / "tiny.json", str(path), "tiny"):
            loaded = load_pretrained(source, directory=tmp_path)
            assert not loaded.training and torch.equal(loaded(batch), expected)  # the same weights, the same arithmetic
            assert loaded.card["name"] == "tiny" and loaded.card["model_args"] == ARGS
            assert loaded.card["weights_sha256"] == weights_sha256(model.state_dict())
            assert loaded.card["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert zoo.load_pretrained is load_pretrained and zoo.save_pretrained is save_pretrained


def test_the_files_are_plain_safetensors_and_indented_json(tmp_path):
    model = _tiny()
    save_pretrained(model, _card(name="tiny"), tmp_path / "tiny.json")  # the card's path names the pair too
    with safetensors.safe_open(tmp_path / "tiny.safetensors", "pt") as handle:
        assert handle.metadata() == {"format": FORMAT}
        assert all(torch.equal(handle.get_tensor(k), v) for k, v in model.state_dict().items())
    text = (tmp_path / "tiny.json").read_text()
    card = json.loads(text)
    assert text.startswith('{\n  "architecture": "siggate_gt"') and text.endswith("}\n")
    assert card["sha256"] == card_digests(card, model.state_dict())


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


def test_card_digests_match_hand_computed_ones():
    card = {"z": [1, 2.5, None], "a": {"y": "é", "b": True}, "sha256": {"card": "ignored"}}
    state = {"w": torch.tensor([1.0, -1.0])}
    canonical = '{"a":{"b":true,"y":"\\u00e9"},"z":[1,2.5,null]}'.encode()
    weights = b"w\0torch.float32\0" + b"2\0" + np.array([1.0, -1.0], dtype=np.float32).tobytes()
    assert canonical_card(card) == canonical
    assert card_digests(card, state) == {"card": hashlib.sha256(canonical).hexdigest(),
                                         "weights": hashlib.sha256(weights).hexdigest(),
                                         "checkpoint": hashlib.sha256(canonical + weights).hexdigest()}


def test_the_saved_record_is_the_digest_of_the_written_card(tmp_path):
    save_pretrained(_tiny(), _card(name="tiny", sha256={"card": "stale"}), tmp_path / "t.safetensors")
    card = json.loads((tmp_path / "t.json").read_text())
    without = {k: v for k, v in card.items() if k != "sha256"}
    canonical = json.dumps(without, sort_keys=True, separators=(",", ":")).encode()
    assert card["sha256"]["card"] == hashlib.sha256(canonical).hexdigest()  # the stale record was replaced
    state = safetensors.torch.load_file(tmp_path / "t.safetensors")
    assert card["weights_sha256"] == weights_sha256(state)


def test_a_reformatted_card_still_loads(tmp_path):
    path = save_pretrained(_tiny(), _card(name="tiny"), tmp_path / "t.safetensors")
    card = json.loads((tmp_path / "t.json").read_text())
    (tmp_path / "t.json").write_text(json.dumps(dict(reversed(card.items())), indent=7))  # whitespace and key order
    assert load_pretrained(path).card == card


@pytest.mark.parametrize("edit", [
    lambda card: card["metrics"]["test"].update(mae=0.0001),
    lambda card: card.update(command="python tools/train.py recipes/other.yaml"),
    lambda card: card.update(weights_sha256="0" * 64),  # the weights' record is part of the card
    lambda card: card.update(extra_field=1),
])
def test_an_edited_card_is_refused_naming_the_card(tmp_path, edit):
    path = save_pretrained(_tiny(), _card(metrics={"test": {"mae": 0.5}}, command="python tools/train.py r.yaml"),
                           tmp_path / "m.safetensors")
    card = json.loads((tmp_path / "m.json").read_text())
    edit(card)
    (tmp_path / "m.json").write_text(json.dumps(card, indent=2))
    _refusal(path, rf"the model card {tmp_path / 'm.json'} changed since it was written .*a field was edited")


def test_predict_and_finetune_refuse_an_edited_card_with_one_line(tmp_path, capsys):
    path = save_pretrained(_tiny(), _card(featurizer=FEATURIZER_SPEC, metrics={"test": {"mae": 0.5}}),
                           tmp_path / "m.safetensors")
    card = json.loads((tmp_path / "m.json").read_text())
    card["metrics"]["test"]["mae"] = 0.0001
    (tmp_path / "m.json").write_text(json.dumps(card, indent=2))
    (tmp_path / "d.csv").write_text("smiles,y\nCCO,1\nCCN,2\nCCC,3\n")
    for tool, argv in (("predict", ["--model", str(path), "--out", str(tmp_path / "p.csv")]),
                       ("finetune", ["--pretrained", str(path), "--target-cols", "y", "--out", str(tmp_path / "ft")])):
        assert load_tool(tool).main([*argv, "--data", str(tmp_path / "d.csv"), "--quiet"]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and f"the model card {tmp_path / 'm.json'} changed" in err[0], err
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "ft").exists()


def _tamper_weights(path):
    state = safetensors.torch.load_file(path)
    key = sorted(state)[0]
    state[key] = state[key] + 1e-3
    safetensors.torch.save_file(state, path, metadata={"format": FORMAT})


def test_a_changed_weight_is_refused_naming_the_weights(tmp_path):
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.safetensors")
    _tamper_weights(path)
    _refusal(path, rf"the weights {path} changed since their card was written .*corrupt or replaced")


def test_a_changed_card_and_weights_are_both_named(tmp_path):
    path = save_pretrained(_tiny(), _card(command="a"), tmp_path / "m.safetensors")
    _tamper_weights(path)
    card = json.loads((tmp_path / "m.json").read_text())
    (tmp_path / "m.json").write_text(json.dumps({**card, "command": "b"}))
    _refusal(path, "both the card .* and the weights .* changed")


def test_edited_or_missing_digest_records_are_refused(tmp_path):
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.safetensors")
    card = json.loads((tmp_path / "m.json").read_text())
    for part in ("card", "weights", "checkpoint"):
        (tmp_path / "m.json").write_text(json.dumps({**card, "sha256": {**card["sha256"], part: "0" * 64}}))
        _refusal(path, "the sha256 record of model card .* was edited")
    (tmp_path / "m.json").write_text(json.dumps({k: v for k, v in card.items() if k != "sha256"}))
    _refusal(path, "has no sha256 record")
    text = json.dumps(card)
    (tmp_path / "m.json").write_text(text[:-1] + ', "command": "x", "command": "y"}')
    _refusal(path, r"not readable JSON .*\['command'\] appear more than once")
    (tmp_path / "m.json").write_text(text[: len(text) // 2])
    _refusal(path, "not readable JSON")


def test_a_lone_or_foreign_weights_file_is_refused(tmp_path):
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.safetensors")
    safetensors.torch.save_file(_tiny().state_dict(), tmp_path / "other.safetensors")
    (tmp_path / "other.json").write_text((tmp_path / "m.json").read_text())
    _refusal(tmp_path / "other.safetensors", "not a zoo pretrained checkpoint .format None")
    path.write_bytes(path.read_bytes()[:-10])
    _refusal(path, f"{path} is not a readable safetensors file")
    (tmp_path / "m.json").unlink()
    _refusal(path, f"no pretrained checkpoint file at {tmp_path / 'm.json'}")


def test_a_legacy_pt_file_loads_with_a_warning_for_one_release(tmp_path):
    model = _tiny()
    _legacy(model, _card(name="old"), tmp_path / "old.pt")
    batch = random_molecules(3)
    model.eval()
    with pytest.warns(FutureWarning, match="read for this release only.*save_pretrained"):
        loaded = load_pretrained("old", directory=tmp_path)
    with torch.no_grad():
        assert torch.equal(loaded(batch), model(batch)) and loaded.card["name"] == "old"
    new = save_pretrained(loaded, loaded.card, tmp_path / "old.safetensors")  # the conversion the warning names
    assert load_pretrained(new).card == {**loaded.card, "sha256": load_pretrained(new).card["sha256"]}
    assert load_pretrained("old", directory=tmp_path).card["sha256"]  # the pair is preferred to the .pt file


def test_a_tampered_legacy_weight_is_refused(tmp_path):
    path = _legacy(_tiny(), _card(), tmp_path / "m.pt")
    payload = torch.load(path)
    key = next(iter(payload["state_dict"]))
    payload["state_dict"][key] = payload["state_dict"][key] + 1e-3
    torch.save(payload, path)
    _refusal(path, "do not match their recorded sha256")


def test_a_different_featurizer_is_refused(tmp_path):
    other = dict(FEATURIZER_SPEC, atom_feature_dims=[*FEATURIZER_SPEC["atom_feature_dims"][:-1], 99])
    path = save_pretrained(_tiny(), _card(featurizer=other), tmp_path / "m.safetensors")
    _refusal(path, "atom_feature_dims")
    assert load_pretrained(path, check_featurizer=False).card["featurizer"] == other
    same = save_pretrained(_tiny(), _card(featurizer=dict(FEATURIZER_SPEC, ogb_version="0.0")),
                           tmp_path / "s.safetensors")
    load_pretrained(same)  # versions are informational


def test_unknown_names_missing_files_and_foreign_files(tmp_path):
    save_pretrained(_tiny(), _card(), tmp_path / "zinc_siggate.safetensors")
    with pytest.raises(PretrainedError, match="Did you mean 'zinc_siggate'"):
        load_pretrained("zinc_sigate", directory=tmp_path)
    _refusal(tmp_path / "absent.safetensors", "no pretrained checkpoint file")
    _refusal(tmp_path / "model.bin", "not a checkpoint path: pass NAME.safetensors")
    torch.save({"model": _tiny().state_dict(), "epoch": 3}, tmp_path / "best.pt")
    _refusal(tmp_path / "best.pt", "not a zoo pretrained checkpoint .format None, expected 'zoo-pretrained/1'")
    (tmp_path / "text.pt").write_text("not a torch file")
    _refusal(tmp_path / "text.pt", "not a readable zoo pretrained checkpoint")


def test_save_pretrained_checks_the_card_and_the_name(tmp_path):
    with pytest.raises(PretrainedError, match=r"lacks \['model_args'\]"):
        save_pretrained(_tiny(), {"architecture": "siggate_gt"}, tmp_path / "m.safetensors")
    with pytest.raises(PretrainedError, match="does not rebuild this model"):
        save_pretrained(_tiny(), _card(model_args=dict(ARGS, dim=32)), tmp_path / "m.safetensors")
    with pytest.raises(PretrainedError, match="not registered"):
        save_pretrained(_tiny(), _card(architecture="siggate"), tmp_path / "m.safetensors")
    with pytest.raises(PretrainedError, match="plain JSON"):
        save_pretrained(_tiny(), _card(path=tmp_path), tmp_path / "m.safetensors")
    with pytest.raises(PretrainedError, match="no longer written"):
        save_pretrained(_tiny(), _card(), tmp_path / "m.pt")
    assert not list(tmp_path.iterdir())


def test_max_bytes_refuses_before_writing(tmp_path):
    with pytest.raises(PretrainedError, match="m.safetensors would be .* MB, over the 0.001 MB limit"):
        save_pretrained(_tiny(), _card(), tmp_path / "m.safetensors", max_bytes=1000)
    assert not list(tmp_path.iterdir())
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.safetensors", max_bytes=10_000_000)
    assert path.stat().st_size <= 10_000_000


def test_model_from_card_builds_what_the_card_names():
    model = model_from_card(_card())
    assert set(model.state_dict()) == set(_tiny().state_dict())
    with pytest.raises(PretrainedError, match=r"runs/x: create_model\('siggate_gt'.*failed"):
        model_from_card(_card(model_args=dict(ARGS, no_such_argument=1)), "runs/x")
    with pytest.raises(PretrainedError, match="model_args must be a mapping"):
        model_from_card(_card(model_args=[16]))
