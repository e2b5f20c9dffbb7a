"""zoo: a DGL model zoo for sparse and gated graph attention."""
import os

# ogb (imported by dgl) asks PyPI for its latest version at import time; keep imports offline.
os.environ.setdefault("OUTDATED_IGNORE", "1")

__version__ = "0.1.0"
