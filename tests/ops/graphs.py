"""Graph builders and a per-neighbourhood reference shared by the ops tests."""
import dgl
import torch


def make_graph(degrees, seed=0):
    """Node v gets degrees[v] incoming edges (shuffled), with self-loops and multi-edges."""
    gen = torch.Generator().manual_seed(seed)
    n = len(degrees)
    dst = torch.repeat_interleave(torch.arange(n), torch.tensor(degrees))
    src = torch.randint(0, n, (len(dst),), generator=gen)
    src[::5] = dst[::5]  # self-loops
    src[1::7] = src[0:-1:7][: len(src[1::7])]  # repeated pairs where dst repeats: multi-edges
    perm = torch.randperm(len(dst), generator=gen)
    return dgl.graph((src[perm], dst[perm]), num_nodes=n)


def per_node(graph, z, fn):
    """Apply fn([H, k] scores) -> [H, k] to each destination's incoming edges."""
    dst = graph.edges()[1]
    out = torch.zeros_like(z)
    for v in range(graph.num_nodes()):
        idx = (dst == v).nonzero().flatten()
        if len(idx):
            out = out.index_put((idx,), fn(z[idx].T).T)
    return out
