"""``edge_sparsemax``: sparsemax over the incoming edges of each destination node."""
from .entmax import edge_entmax


def edge_sparsemax(graph, logits, *, n_bisect=4, max_iter=50):
    r"""Sparsemax (Martins & Astudillo, 2016) over the incoming edges of each destination node.

    For the edges ``i`` entering a node (and each head)::

        p_i = [z_i - tau]_+,   tau such that sum_i p_i = 1

    the Euclidean projection of the scores onto the simplex; exact zeros below ``tau``.

    Exact and sort-free: alpha-entmax at alpha = 2 (see ``edge_entmax``), whose threshold
    search ends with closed-form steps ``tau = (sum_{i in S} z_i - 1) / |S|`` on the current
    support ``S`` until ``S`` no longer changes (but for scores within an ulp of ``tau``), so
    ``tau`` is exact to rounding.

    Shapes: ``logits`` ``[E]``, ``[E, H]`` or ``[E, H, 1]``; output of the same shape. float32 or
    float64 logits, finite or -inf (a masked edge), not all -inf into one node; zero-in-degree
    nodes, self-loops, multi-edges, blocks and bipartite graphs are allowed.
    Backward (own closed form, no iteration is differentiated): on the support,
    ``dz_i = g_i - mean_{j in S} g_j``, zero elsewhere. Raises ``ZooOpError`` for a shape
    that does not fit the graph or NaN/+inf logits.

    Example::

        >>> import dgl, torch
        >>> from zoo.ops import edge_sparsemax
        >>> g = dgl.graph(([0, 1, 2], [2, 2, 2]))
        >>> edge_sparsemax(g, torch.tensor([1.0, 0.5, -2.0]))
        tensor([0.7500, 0.2500, 0.0000])
    """
    return edge_entmax(graph, logits, 2.0, n_bisect=n_bisect, max_iter=max_iter)
