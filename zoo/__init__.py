"""zoo: a DGL model zoo for sparse and gated graph attention."""
__version__ = "0.1.0"
