"""Scale-out with torchrun: DistributedDataParallel, one process per rank, gloo on the CPU.

    torchrun --nproc_per_node 2 tools/train.py recipes/zinc_siggate.yaml               # graph-level
    torchrun --nproc_per_node 2 tools/train.py recipes/cora_ltga_edge_sampled.yaml     # node, train.sampler

Sampled node training is described in :mod:`zoo.engine.node_trainer`; its dataset is loaded once
per machine and shared (:func:`load_once_per_machine`). Graph-level training:

Each global training batch is the one a single process draws (same seeded permutation, the
recipe's ``batch_size`` graphs); rank r trains on ``batch[r::world]`` and its loss is scaled by
the global count of labelled targets, so DDP's gradient average is the single-process mean over
the whole batch. Validation and test are split into contiguous shards and the outputs gathered
in loader order, so model selection and early stopping agree on every rank. Only rank 0 writes
files and prints. Ranks use the ``gloo`` backend on the CPU.

Where it differs from one process: BatchNorm statistics are per rank (there is no CPU
SyncBatchNorm), dropout masks come from each rank's own generator, and a last batch with fewer
graphs than ranks is dropped.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import os
from typing import Callable, TypeVar

import dgl
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, DataLoader, Subset

from zoo.data import NodeData
from zoo.ops import NonFiniteScores

T = TypeVar("T")


def requested_world_size() -> int:
    """``WORLD_SIZE`` as torchrun sets it (1 when not launched by torchrun)."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        return int(value)
    except ValueError:
        raise RuntimeError(f"WORLD_SIZE must be an integer, got {value!r}; launch with torchrun") from None


def init_from_env() -> bool:
    """Join the torchrun process group (gloo) once; True when running on more than one rank."""
    if requested_world_size() <= 1:
        return False
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
        atexit.register(_shutdown)
    return True


def _shutdown() -> None:
    """Close the process group at exit (no barrier: a rank that failed must not wait for the others).

    The gloo backend is destroyed by dropping a reference held here, not inside
    ``destroy_process_group``. In torch 2.2 the ProcessGroup's destructor runs with the GIL held
    and waits for gloo's worker threads; a worker that still holds the last reference to a
    finished collective's tensors needs the GIL to free them. A rank that exits within moments of
    its last collective (rank 1 skips the writing) then deadlocks: the hang of the 2-rank test
    (pytorch/pytorch#56297). Left to interpreter shutdown instead, the same late free aborts the
    process. The backend's own Python binding releases the GIL before destroying it.
    """
    if dist.is_initialized():
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        dist.destroy_process_group()
        del backend  # ~ProcessGroupGloo here, with the GIL released


def world() -> tuple[int, int]:
    """``(rank, world size)``; ``(0, 1)`` outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main() -> bool:
    """True on rank 0 (and in a single process): the rank that writes files and prints."""
    return world()[0] == 0


def say(*args, **kwargs) -> None:
    """``print`` on rank 0 only (every process prints outside torchrun)."""
    if is_main():
        print(*args, **kwargs)


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if world()[1] > 1:
        dist.barrier()


@contextlib.contextmanager
def main_first():
    """Rank 0 runs the block first (e.g. to fill a cache), then the other ranks."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


def all_sum(value: float) -> float:
    """Sum of ``value`` over ranks."""
    if world()[1] == 1:
        return value
    total = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(total)
    return float(total)


def stop_together(compute: Callable[[], T]) -> T:
    """``compute()`` on every rank, where attention scores that overflow on one rank
    (:class:`zoo.ops.NonFiniteScores`) stop every rank: that rank raises its own error, the others
    one that names it and quotes its message. Otherwise the ranks that went on would wait forever
    in their next collective for the one that stopped. ``compute`` must not itself wait for other
    ranks; the ranks call this together (one small all-reduce), or ``compute()`` alone in one process.

    >>> loss = stop_together(lambda: F.mse_loss(model(graphs), target))  # doctest: +SKIP
    """
    rank, size = world()
    if size == 1:
        return compute()
    try:
        result, failed = compute(), None
    except NonFiniteScores as err:
        result, failed = None, err
    flags = torch.zeros(size)
    flags[rank] = failed is not None
    dist.all_reduce(flags)
    if not flags.any():
        return result
    messages = [None] * size
    dist.all_gather_object(messages, None if failed is None else str(failed))
    if failed is not None:
        raise failed
    first = int(flags.nonzero()[0])
    raise NonFiniteScores(f"scores of rank {first} ({messages[first]})")


class ShardedBatches(BatchSampler):
    """The single-process batches of ``sampler``, each split as ``batch[rank::world]``."""

    def __init__(self, sampler, batch_size: int, rank: int, world_size: int):
        super().__init__(sampler, batch_size, drop_last=False)
        self.rank, self.world_size = rank, world_size

    def __iter__(self):
        for batch in super().__iter__():
            if len(batch) >= self.world_size:
                yield batch[self.rank::self.world_size]

    def __len__(self) -> int:
        full, rest = divmod(len(self.sampler), self.batch_size)
        return full + (rest >= self.world_size)


def shard_train_loader(loader: DataLoader) -> DataLoader:
    """This rank's view of a shuffled single-process train loader (same generator, same batches)."""
    rank, size = world()
    if size == 1:
        return loader
    return DataLoader(loader.dataset, batch_sampler=ShardedBatches(loader.sampler, loader.batch_size, rank, size),
                      collate_fn=loader.collate_fn, generator=loader.generator, num_workers=loader.num_workers)


def sharded_predict(predict, model, loader: DataLoader) -> tuple[torch.Tensor, torch.Tensor]:
    """``predict(model, loader)`` on this rank's contiguous shard, gathered in loader order."""
    rank, size = world()
    if size == 1:
        return predict(model, loader)
    shard = np.array_split(np.arange(len(loader.dataset)), size)[rank]
    part = DataLoader(Subset(loader.dataset, shard.tolist()), batch_size=loader.batch_size,
                      collate_fn=loader.collate_fn, num_workers=loader.num_workers)
    local = predict(model, part) if len(shard) else None
    gathered = [None] * size
    dist.all_gather_object(gathered, local)
    pieces = [p for p in gathered if p is not None]
    return torch.cat([o for o, _ in pieces]), torch.cat([t for _, t in pieces])


def gather_rows(local: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """Every rank's ``local`` rows (rank r holds ``counts[r]`` of them) stacked in rank order; the
    ranks must call it together. ``local`` itself in a single process.

    >>> gather_rows(torch.ones(2, 3), [2]).shape
    torch.Size([2, 3])
    """
    size = world()[1]
    if size == 1:
        return local
    padded = local.new_zeros((max(counts), *local.shape[1:]))  # gloo gathers equal shapes
    padded[:len(local)] = local
    pieces = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(pieces, padded)
    return torch.cat([piece[:count] for piece, count in zip(pieces, counts)])


_SHARED = itertools.count()  # one name per shared load of this job


def load_once_per_machine(load: Callable[[], NodeData]) -> NodeData:
    """``load()`` (a :class:`zoo.data.NodeData`) on each machine's local rank 0 only; the machine's
    other ranks attach to its copy in shared memory: the graph structure through DGL's
    ``DGLGraph.shared_memory`` / ``dgl.hetero_from_shared_memory``, features, labels and masks
    through DGL's named shared-memory arrays (``dgl.ndarray``, as DistDGL's servers use). Every
    rank must call it; ``load()`` itself in a single process.

    >>> data = load_once_per_machine(lambda: load_node_dataset("synthetic_sbm_1m"))  # doctest: +SKIP
    """
    rank, size = world()
    if size == 1:
        return load()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    # the job's id and its torchrun agent (the parent of a machine's ranks): unique on the machine
    prefix = f"zoo_{os.environ.get('TORCHELASTIC_RUN_ID', 'job')}_{os.getppid()}_{next(_SHARED)}"
    tensors = ("features", "labels", "train_mask", "val_mask", "test_mask")
    owned, meta = None, None
    if local == 0:
        data = load()
        graph = data.graph.shared_memory(f"{prefix}_graph")
        owned = {name: _to_shared(getattr(data, name), f"{prefix}_{name}") for name in tensors}
        meta = {"fields": {f.name: getattr(data, f.name) for f in dataclasses.fields(data)
                           if f.name not in ("graph", *tensors)},
                "tensors": {name: (tuple(tensor.shape), str(getattr(data, name).dtype))
                            for name, tensor in owned.items()}}
        shared = dataclasses.replace(data, graph=graph, **_from_shared(owned, meta))
        del data
    metas = [None] * size
    dist.all_gather_object(metas, meta)
    if local != 0:  # torchrun numbers a machine's ranks contiguously: its local rank 0 is rank - local
        meta = metas[rank - local]
        attached = {name: dgl.ndarray.get_shared_mem_array(f"{prefix}_{name}", shape, _STORED[dtype])
                    for name, (shape, dtype) in meta["tensors"].items()}
        shared = NodeData(graph=dgl.hetero_from_shared_memory(f"{prefix}_graph"), **meta["fields"],
                          **_from_shared(attached, meta))
    barrier()  # every rank has attached before local rank 0 could drop a name
    return shared


_STORED = {"torch.float32": torch.float32, "torch.float64": torch.float64, "torch.int64": torch.int64,
           "torch.bool": torch.uint8}  # DGL's shared arrays have no bool: masks travel as uint8


def _to_shared(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """A copy of ``tensor`` in a DGL shared-memory array called ``name``."""
    stored = _STORED[str(tensor.dtype)]
    array = dgl.ndarray.create_shared_mem_array(name, tuple(tensor.shape), stored)
    array.copy_(tensor.to(stored))
    return array


def _from_shared(arrays: dict, meta: dict) -> dict:
    """The shared arrays as the dtypes they were loaded with (masks back to bool: small copies)."""
    return {name: array.bool() if meta["tensors"][name][1] == "torch.bool" else array
            for name, array in arrays.items()}
