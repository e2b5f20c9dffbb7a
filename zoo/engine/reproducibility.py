"""Seeding and RNG state capture, so a resumed run continues exactly where it stopped.

States are tensors and plain numbers, so checkpoints holding them load with ``weights_only=True``.
"""
from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (DGL's CPU kernels draw from torch's generator)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def epoch_seed(seed: int, epoch: int, rank: int | None = None) -> int:
    """A seed for one epoch of run ``seed`` (and one rank), independent of what ran before it, so
    a resumed run draws what the uninterrupted one drew.

    >>> epoch_seed(0, 1) != epoch_seed(0, 1, rank=0) != epoch_seed(0, 2)
    True
    """
    return (seed * 1_000_003 + epoch) * 1_009 + (0 if rank is None else rank + 1)


def step_seed(seed: int, epoch: int, rank: int, step: int) -> int:
    """A seed for one training step of one rank, a function of nothing else: under torchrun each
    rank seeds its dropout with it before every step, so a run resumed between batches draws what
    the uninterrupted one drew on every rank (``last.pt`` holds rank 0's generators only).

    >>> len({step_seed(0, 1, 0, 2), step_seed(0, 1, 1, 2), step_seed(0, 2, 0, 1), step_seed(1, 1, 0, 2)})
    4
    """
    return int(np.random.SeedSequence([seed, epoch, rank, step]).generate_state(1, np.uint64)[0])


def rng_state() -> dict:
    """The state of every generator :func:`seed_everything` seeds (CUDA's once CUDA is in use)."""
    _, words, gauss_next = random.getstate()
    _, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    state = {"python": {"words": torch.tensor(words, dtype=torch.int64), "gauss_next": gauss_next},
             "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos), "has_gauss": int(has_gauss),
                       "cached_gaussian": float(cached_gaussian)},
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore a state captured by :func:`rng_state`."""
    python, numpy = state["python"], state["numpy"]
    random.setstate((3, tuple(python["words"].tolist()), python["gauss_next"]))
    np.random.set_state(("MT19937", numpy["keys"].numpy().astype(np.uint32), numpy["pos"], numpy["has_gauss"],
                         numpy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
