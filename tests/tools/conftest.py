"""Shared by the tools tests: the offline benchmark data and a private cache."""
import pytest


@pytest.fixture
def offline_env(zoo_data, zoo_cache, monkeypatch):
    """ZOO_DATA / ZOO_CACHE set to the session's data and cache, no downloads."""
    monkeypatch.setenv("ZOO_DATA", str(zoo_data))
    monkeypatch.setenv("ZOO_CACHE", str(zoo_cache))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
