"""``edge_sparsemax``: sparsemax over the incoming edges of each destination node."""
from ._common import edge_scores
from .entmax import _Entmax


def edge_sparsemax(graph, logits, *, n_bisect=8, max_iter=50):
    r"""Sparsemax (Martins & Astudillo, 2016) over the incoming edges of each destination node.

    For the edges ``i`` entering a node (and each head)::

        p_i = [z_i - tau]_+,   tau such that sum_i p_i = 1

    the Euclidean projection of the scores onto the simplex; exact zeros below ``tau``.

    Exact and sort-free: alpha-entmax at alpha = 2 (see ``edge_entmax``), whose threshold
    search ends with closed-form steps ``tau = (sum_{i in S} z_i - 1) / |S|`` on the current
    support ``S`` until ``S`` no longer changes, so ``tau`` is exact to rounding.

    Shapes: ``logits`` ``[E]``, ``[E, H]`` or ``[E, H, 1]``; output of the same shape. Finite
    logits; float32 or float64; zero-in-degree nodes, self-loops and multi-edges are allowed.
    Backward (own closed form, no iteration is differentiated): on the support,
    ``dz_i = g_i - mean_{j in S} g_j``, zero elsewhere. Raises ``ZooOpError`` for a shape
    that does not fit the graph or NaN/+inf logits.

    Example::

        >>> g = dgl.graph(([0, 1, 2], [2, 2, 2]))
        >>> edge_sparsemax(g, torch.tensor([1.0, 0.5, -2.0]))
        tensor([0.7500, 0.2500, 0.0000])
    """
    x, shape = edge_scores(graph, logits)
    return _Entmax.apply(graph, x, 2.0, int(n_bisect), int(max_iter)).reshape(shape)
