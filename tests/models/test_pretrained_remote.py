"""A remote pretrained entry (URLs + sha256): load_pretrained downloads it into the cache from a
loopback server, verifies both files, reuses a verified copy and refuses a wrong one."""
import hashlib

import pytest
import torch

import zoo
from tools.benchmarks.models import random_molecules
from zoo.models import create_model
from zoo.models import registry
from zoo.models.pretrained import PretrainedError, load_pretrained, save_pretrained

ARGS = dict(num_outputs=1, dim=16, heads=2, layers=1, pe="rwse", rwse_k=20, dim_pe=4)


@pytest.fixture
def served(tmp_path, loopback, monkeypatch):
    """A tiny checkpoint pair served at 127.0.0.1, registered as remote ``tiny_remote``."""
    monkeypatch.setattr(registry, "REMOTE_PRETRAINED", {})
    monkeypatch.setattr("zoo.models.pretrained.REMOTE_PRETRAINED", registry.REMOTE_PRETRAINED)
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    torch.manual_seed(0)
    model = create_model("siggate_gt", **ARGS).eval()
    weights = save_pretrained(model, {"architecture": "siggate_gt", "model_args": dict(ARGS)}, tmp_path / "src" / "m.safetensors")
    files = {"weights": weights.read_bytes(), "card": weights.with_suffix(".json").read_bytes()}
    registry.register_remote_pretrained(
        "tiny_remote",
        weights_url=loopback.serve("/m.safetensors", files["weights"]), weights_sha256=hashlib.sha256(files["weights"]).hexdigest(),
        card_url=loopback.serve("/m.json", files["card"]), card_sha256=hashlib.sha256(files["card"]).hexdigest())
    return model, loopback, tmp_path / "cache" / "pretrained"


def test_downloads_verifies_and_reuses(served, capsys):
    model, loopback, cache = served
    assert "tiny_remote" in zoo.list_models(pretrained=True)
    batch = random_molecules(3)
    loaded = load_pretrained("tiny_remote")
    with torch.no_grad():
        assert torch.equal(loaded(batch), model(batch))  # the same weights, the same arithmetic
    assert sorted(p.name for p in cache.iterdir()) == ["tiny_remote.json", "tiny_remote.safetensors"]
    assert sorted(loopback.requests) == ["/m.json", "/m.safetensors"]
    load_pretrained("tiny_remote")
    assert len(loopback.requests) == 2  # a verified copy is not fetched again


def test_a_changed_cached_copy_is_fetched_again(served):
    _, loopback, cache = served
    load_pretrained("tiny_remote")
    card = cache / "tiny_remote.json"
    card.write_text(card.read_text().replace('"dim": 16', '"dim": 17'))
    load_pretrained("tiny_remote")
    assert loopback.requests.count("/m.json") == 2 and '"dim": 16' in card.read_text()


def test_a_server_file_that_differs_from_the_pin_is_refused_and_deleted(served):
    _, loopback, cache = served
    loopback.serve("/m.safetensors", b"not the pinned weights")
    with pytest.raises(PretrainedError, match=r"tiny_remote.*Checksum mismatch.*deleted") as info:
        load_pretrained("tiny_remote")
    assert "\n" not in str(info.value)
    assert not (cache / "tiny_remote.safetensors").exists()


def test_offline_names_the_file_to_place(served, monkeypatch):
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(PretrainedError, match=r"Offline mode is on.*tiny_remote.safetensors"):
        load_pretrained("tiny_remote")


def test_bad_entries_are_refused():
    with pytest.raises(ValueError, match="weights_sha256 of 'x' is 'abc'; it must be 64 hex digits"):
        registry.register_remote_pretrained("x", weights_url="u", weights_sha256="abc", card_url="u", card_sha256="0" * 64)
    with pytest.raises(ValueError, match="'zinc_siggate' is registered twice"):
        registry.register_remote_pretrained("zinc_siggate", weights_url="u", weights_sha256="0" * 64, card_url="u",
                                            card_sha256="0" * 64)
