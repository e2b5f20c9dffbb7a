"""The version: one source (zoo/_version.py), the package front and the installed metadata agree."""
from importlib import metadata

from packaging.version import Version

import zoo
from zoo._version import __version__


def test_one_version_everywhere():
    assert zoo.__version__ == __version__ == metadata.version("zoo")
    assert str(Version(__version__)) == __version__  # a normalised PEP 440 version
