"""The version of zoo, importable without the package front (setup.cfg reads ``zoo.__version__``)."""
__version__ = "0.1.0"
