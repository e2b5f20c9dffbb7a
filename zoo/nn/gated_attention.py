"""Multi-head self-attention over the nodes of each graph, with an optional SigGate-GT gate.

The nodes of a batched DGL graph are projected (Q, K, V and the gate, on the real nodes only),
scattered into a padded, head-major block ``[3H, B * L, d_k]`` (``B`` graphs, ``L`` the largest
graph), attended to under a key padding mask, gathered back to ``[N, D]``, gated (G1) and
projected by ``W_O``; no Python loop runs over graphs (wide batches run in a few size groups).

Gate (SigGate-GT, Eq. 3-4): ``head_k = softmax(Q_k K_k^T / sqrt(d_k)) V_k * act(X W_k^g + b_k^g)``
where ``X`` is the attention input. Placements:

* ``none``: plain multi-head attention.
* ``output`` (G1): the gate multiplies each head's attention output element-wise, per query
  node, before the output projection ``W_O``.
* ``value`` (G2): the gate multiplies each head's values element-wise, per key node, before
  the attention weights are applied.
* ``logit`` (G3, the paper's Table 10: ``softmax(act(.) * Q_k K_k^T / sqrt(d_k)) V_k``): the
  gate multiplies the scaled logits element-wise before the softmax. The paper gives the gate no
  pair input, only the node states ``X``, so head ``k``'s gate is ``act(X w_k^g + b_k^g)``, one
  value per query node (``[n, 1]``), and the Hadamard product broadcasts it along the query's
  row of the ``[n, n]`` logits: row ``i`` of the logits is scaled by ``g_ik`` (a learned
  per-query temperature). Rows still sum to one after the softmax, as the paper says of G3.

Gate shapes: ``gate_per_head=True`` gives every head its own gate, so ``W_g`` maps ``D -> D``
(``output``/``value``: ``H`` slices of ``d_k``) or ``D -> H`` (``logit``).
``gate_per_head=False`` shares one gate across the heads: ``D -> d_k`` (``output``/``value``)
or ``D -> 1`` (``logit``). Activations (``act``):

* ``sigmoid``: ``sigma(z)``, the paper's gate (Eq. 3).
* ``tanh``, ``relu``: the paper's Table 11 alternatives.
* ``sigmoid_squared``: ``sigma(z)^2``, the paper's Table 11 ``sigma(.)^2`` (range (0, 1), sparser
  than ``sigma``; ``sigma(0.5)^2 = 0.387`` at the initial bias).
* ``twice_sigmoid``: ``2 sigma(z)``, range (0, 2), exactly 1 at a zero pre-activation. Not a
  paper variant. ``sigmoid2`` is its old name, still accepted so that recipes, run folders and
  checkpoints written with it keep their meaning (it was never ``sigma^2``).

Normalisers (``normaliser``) of the attention weights over each graph's nodes (the keys):

* ``softmax``: today's path, unchanged in code and cost (padded keys biased by ``finfo.min``).
* ``qsoftmax``: LTGA's Tsallis q-softmax (LTGA paper, Eq. 2). ``q_mode="fixed"`` uses the float
  ``q``; ``"layer"`` (one q) or ``"head"`` (one per head) learn ``q = 1 + delta tanh(a)`` (LTGA's
  Eq. 6, ``a = 0`` at init so the layer starts as softmax, kept >= ``Q_MIN`` as in
  :class:`zoo.nn.LTGAConv`). The ``a`` are :meth:`index_parameters`, for LTGA's separate
  optimiser and warm-up; ``last_q`` keeps the q of the last forward, with its graph, for the
  Shannon prior.
* ``entmax``: alpha-entmax with ``alpha`` fixed (``alpha_mode="fixed"``) or learned per layer or
  head as ``alpha = 1 + sigmoid(b)`` in (1, 2) (Correia et al., 2019, "Adaptively Sparse
  Transformers"), starting at ``alpha``; the ``b`` are index parameters too.
* ``sparsemax``: entmax at alpha = 2.

Every normaliser combines with every gate placement and activation. Outside softmax, padded keys
get a ``-inf`` score, so they receive weight exactly 0 and take no part in a real node's
normalisation (the q-softmax's max shift, the entmax threshold). The normalisers are the dense,
masked twins of the edge ops (:mod:`zoo.ops.dense`), chosen over running the attention as the
edges of a per-graph complete graph through :func:`zoo.ops.edge_qsoftmax` / ``edge_entmax`` by a
measurement: forward + backward of the normaliser alone on 32 ZINC-sized graphs (9-38 nodes, the
block 40 wide), 8 heads, CPU time per call (``time.thread_time``, one thread, both variants in
one process, interleaved, median of 60): q-softmax with a per-head tensor q 6.36 ms dense against
7.10 ms on the 18,002 edges (gathered from and scattered back to the block), entmax (alpha 1.5)
9.68 against 11.32 ms; torch's softmax on the same block 1.09 ms. The dense twin touches 2.8x as
many scores (every padded query row too) but needs no index, gather or scatter, and no complete
graph per batch. (Those timings are of the first dense version; the dense q-softmax was then cut
to about 4.0 ms, 4.9 ms with every head near q = 1, against 0.74 ms for softmax in that harness,
median of 100; see ``zoo/ops/dense.py``.)

Initialisation: ``in_proj``/``out_proj`` follow ``torch.nn.MultiheadAttention`` (Xavier-uniform
input projection, zero biases) and use its parameter layout, so its weights load directly.
``b_g`` starts at ``gate_bias_init`` (0.5: the paper's "gates start near sigma(0.5) = 0.62",
Section 4.2). The paper does not say how ``W_g`` starts (``gate_weight_init``):

* ``xavier``: Xavier-uniform, as the authors' public release does (bettyguo/SigGate-GT,
  ``src/models/attention.py``, ``_reset_gate_parameters``); every paper recipe sets it;
* ``zeros`` (the default, so that models and recipes written before the option keep their
  meaning): at step 0 every gate equals ``act(gate_bias_init)``, so the gated layer starts as the
  plain layer with a constant per-head scale and learns the input dependence from there.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from zoo.nn.ltga_conv import MAX_DELTA, Q_MIN
from zoo.ops import dense_entmax, dense_qsoftmax, dense_sparsemax

GATES = ("none", "output", "value", "logit")
GATE_WEIGHT_INITS = ("zeros", "xavier")
NORMALISERS = ("softmax", "qsoftmax", "entmax", "sparsemax")
INDEX_MODES = ("fixed", "layer", "head")


def _sigmoid_squared(z: torch.Tensor) -> torch.Tensor:
    """``sigma(z)^2``, the paper's Table 11 sigma(.)^2."""
    return torch.sigmoid(z).square()


def _twice_sigmoid(z: torch.Tensor) -> torch.Tensor:
    """``2 sigma(z)``: range (0, 2), 1 at z = 0 (not a paper variant)."""
    return 2.0 * torch.sigmoid(z)


GATE_ACTIVATIONS = {
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu,
    "sigmoid_squared": _sigmoid_squared, "twice_sigmoid": _twice_sigmoid,
    "sigmoid2": _twice_sigmoid,  # the old name of twice_sigmoid (2 sigma, not sigma^2): kept for old recipes and runs
}


def to_dense_batch(h: torch.Tensor, batch_num_nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scatter the node rows of a batched graph into a zero-padded dense block.

    ``h`` ``[N, *F]`` (nodes graph by graph, as ``dgl.batch`` orders them), ``batch_num_nodes``
    ``[B]`` -> ``(dense [B, L, *F], mask [B, L])`` with ``L = max(batch_num_nodes)`` and
    ``mask`` True at real nodes. ``dense[mask]`` gives ``h`` back.

    >>> dense, mask = to_dense_batch(torch.arange(5.)[:, None], torch.tensor([2, 3]))
    >>> dense.shape, mask.tolist()
    (torch.Size([2, 3, 1]), [[True, True, False], [True, True, True]])
    """
    batch_num_nodes = batch_num_nodes.to(h.device)
    if int(batch_num_nodes.sum()) != h.shape[0]:
        raise ValueError(f"batch_num_nodes sums to {int(batch_num_nodes.sum())} but h has {h.shape[0]} rows")
    flat, mask = _dense_index(batch_num_nodes, h.device)
    dense = h.new_zeros((mask.numel(),) + tuple(h.shape[1:]))
    dense[flat] = h
    dense = dense.view(tuple(mask.shape) + tuple(h.shape[1:]))
    return dense, mask


ROW_ALIGN = 8
"""The attention block's width is rounded up to a multiple of this: torch 2.2's CPU softmax over
the last dimension takes its vectorised path only for lengths that are multiples of the 8-float
vector, and is about 4x slower forward and backward at 23 (a ZINC-sized molecule) than at 24.
The extra columns are padded keys like any other: exactly zero weight."""


def dense_batch_index(g, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(flat [N], mask [B, L])`` for scattering the nodes of batched graph ``g`` into ``[B, L]``,
    ``L`` the largest graph's size rounded up to a multiple of :data:`ROW_ALIGN`.

    Node ``i`` goes to row ``flat[i]`` of the flattened block ``[B * L]``; ``mask`` is True at
    real nodes. The pair is computed once per batch and kept on the graph (keyed by its
    ``batch_num_nodes`` tensor, so a changed batch structure recomputes it): every layer of a
    model reuses it instead of rebuilding the index.
    """
    batch_num_nodes = g.batch_num_nodes()
    cached = getattr(g, "_zoo_dense_index", None)
    if cached is not None and cached[0] is batch_num_nodes and cached[1].device == device:
        return cached[1], cached[2]
    flat, mask = _dense_index(batch_num_nodes, device, align=ROW_ALIGN)
    g._zoo_dense_index = (batch_num_nodes, flat, mask)
    return flat, mask


def _dense_index(sizes: torch.Tensor, device: torch.device, align: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(flat [N], mask [B, L])`` for graphs of ``sizes`` ``[B]`` nodes, ``L = max(sizes)`` rounded up
    to a multiple of ``align``: node ``i`` (graph by graph) goes to row ``flat[i]`` of ``[B * L]``;
    ``mask`` is True at real nodes."""
    sizes = sizes.to(device)
    num_graphs = sizes.numel()
    width = -(-int(sizes.max()) // align) * align if num_graphs else 0
    graph_id = torch.repeat_interleave(torch.arange(num_graphs, device=device), sizes)
    first = torch.cumsum(sizes, 0) - sizes
    flat = torch.arange(graph_id.numel(), device=device) - first[graph_id] + graph_id * width
    mask = torch.zeros(num_graphs * width, dtype=torch.bool, device=device)
    mask[flat] = True
    return flat, mask.view(num_graphs, width)


GROUP_MIN_WIDTH = 32
"""Batches whose padded attention block is at most this wide run as one block; wider ones are split
by graph size (:func:`dense_batch_groups`). 32 since session 32 (64 before), once the projections
had left the block: molhiv's molecules (about 25 atoms) then run in blocks about 32 and 48 wide
instead of 64 (README "Training-step overhead")."""
GROUP_RATIO = 1.5
"""Within one size group, the widest graph is at most about this many times the narrowest."""


def dense_batch_groups(g, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None:
    """Graphs of batch ``g`` grouped by size for the attention, or None for one padded block.

    Attention is per graph, so padding every graph to the batch's largest wastes
    ``B * L^2 - sum n_i^2`` score entries. On Peptides-func (64 graphs of about 155 nodes, the
    largest of a batch about 390) that was most of a training step, and on molhiv (256 molecules
    of about 25 atoms) most of the block is padding. Graphs up to :data:`GROUP_MIN_WIDTH` nodes form
    one group, and wider ones form groups whose widths differ by at most about
    :data:`GROUP_RATIO`; each group is padded to its own largest graph. Each entry is
    ``(nodes, flat, mask)``: the group's node rows of ``g`` (graph by graph) and
    :func:`_dense_index` of its sizes. Cached on ``g`` as :func:`dense_batch_index` is (and keyed
    by the two settings, so a changed setting regroups).
    """
    batch_num_nodes = g.batch_num_nodes()
    setting = (device, GROUP_MIN_WIDTH, GROUP_RATIO)
    cached = getattr(g, "_zoo_dense_groups", None)
    if cached is not None and cached[0] is batch_num_nodes and cached[1] == setting:
        return cached[2]
    sizes = batch_num_nodes.to(device)
    groups = None
    if sizes.numel() and int(sizes.max()) > GROUP_MIN_WIDTH:
        key = torch.ceil(torch.log(sizes.clamp_min(GROUP_MIN_WIDTH).double() / GROUP_MIN_WIDTH)
                         / math.log(GROUP_RATIO)).long()
        first = torch.cumsum(sizes, 0) - sizes
        groups = []
        for value in torch.unique(key).tolist():
            members = (key == value).nonzero().squeeze(1)
            counts = sizes[members]
            offsets = torch.repeat_interleave(first[members] - (torch.cumsum(counts, 0) - counts), counts)
            nodes = torch.arange(int(counts.sum()), device=device) + offsets
            groups.append((nodes, *_dense_index(counts, device, align=ROW_ALIGN)))
        groups = groups if len(groups) > 1 else None
    g._zoo_dense_groups = (batch_num_nodes, setting, groups)
    return groups


def _key_bias(mask: torch.Tensor, heads: int, dtype: torch.dtype, fill: float) -> torch.Tensor:
    """``[heads * B, 1, L]``, head-major (row ``h * B + b`` for graph ``b``): 0 at real keys,
    ``fill`` at padded ones, the additive key mask of every head. Made once per batch and kept on
    ``mask`` (the batch's cached :func:`dense_batch_index` mask, shared by every layer), keyed by
    heads, dtype and fill."""
    cache = getattr(mask, "_zoo_key_bias", None)
    if cache is None:
        cache = mask._zoo_key_bias = {}
    key = (heads, dtype, fill)
    if key not in cache:
        batch, length = mask.shape
        bias = torch.zeros(1, batch, 1, length, dtype=dtype, device=mask.device).masked_fill(
            ~mask[None, :, None, :], fill)
        cache[key] = bias.expand(heads, batch, 1, length).reshape(heads * batch, 1, length)
    return cache[key]


class GatedMultiheadAttention(nn.Module):
    """Full self-attention within each graph of a batch, optionally gated (see module docstring).

    ``forward(g, h)``: ``h`` ``[N, dim]`` -> ``[N, dim]``. With ``record=True`` the last call
    keeps, detached, ``last_attn`` ``[B, H, L, L]`` (the normaliser's weights before dropout;
    padded rows and columns included, see ``last_mask`` ``[B, L]``; padded columns are exactly 0)
    and ``last_gate`` ``[N, H, G]`` (``G = d_k`` for output/value, ``1`` for logit; a shared gate
    is repeated over heads; ``None`` for gate ``none``). A learned q's last value is ``last_q``
    (with its graph, every call), :meth:`current_q` / :meth:`current_alpha` give the indices.

    >>> import dgl
    >>> g = dgl.batch([dgl.rand_graph(3, 4), dgl.rand_graph(5, 9)])
    >>> attn = GatedMultiheadAttention(16, heads=4, gate="output")
    >>> attn(g, torch.randn(8, 16)).shape
    torch.Size([8, 16])
    >>> sparse = GatedMultiheadAttention(16, heads=4, gate="output", normaliser="qsoftmax", q_mode="head")
    >>> sparse(g, torch.randn(8, 16)).shape, sparse.current_q().tolist()
    (torch.Size([8, 16]), [1.0, 1.0, 1.0, 1.0])
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        gate: str = "none",
        gate_per_head: bool = True,
        gate_activation: str = "sigmoid",
        gate_bias_init: float = 0.5,
        attn_dropout: float = 0.0,
        record: bool = False,
        gate_weight_init: str = "zeros",
        *,
        normaliser: str = "softmax",
        q_mode: str = "head",
        q: float = 1.0,
        delta: float = 1.0,
        alpha: float = 1.5,
        alpha_mode: str = "fixed",
    ):
        super().__init__()
        if dim < 1 or heads < 1 or dim % heads:
            raise ValueError(f"dim must be a positive multiple of heads, got dim={dim}, heads={heads}")
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        if gate_activation not in GATE_ACTIVATIONS:
            raise ValueError(f"gate_activation must be one of {tuple(GATE_ACTIVATIONS)}, got {gate_activation!r}")
        if gate_weight_init not in GATE_WEIGHT_INITS:
            raise ValueError(f"gate_weight_init must be one of {GATE_WEIGHT_INITS}, got {gate_weight_init!r}")
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.gate, self.gate_per_head, self.gate_activation = gate, gate_per_head, gate_activation
        self.record = record
        self._index_options(normaliser, q_mode, q, delta, alpha, alpha_mode)

        self.in_proj = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)
        self.attn_dropout = nn.Dropout(attn_dropout)

        self.gate_proj = None
        if gate != "none":
            self.gate_width = 1 if gate == "logit" else self.head_dim
            groups = heads if gate_per_head else 1
            self.gate_proj = nn.Linear(dim, groups * self.gate_width)
            init_weight = nn.init.xavier_uniform_ if gate_weight_init == "xavier" else nn.init.zeros_
            init_weight(self.gate_proj.weight)
            nn.init.constant_(self.gate_proj.bias, gate_bias_init)

        self.last_attn = self.last_mask = self.last_gate = None
        self.last_heads = self.last_heads_ungated = None  # per-head outputs [B, H, L, d_k], after / before G1

    def _index_options(self, normaliser, q_mode, q, delta, alpha, alpha_mode) -> None:
        """Check the normaliser's options and make its learned index parameters (none for softmax)."""
        if normaliser not in NORMALISERS:
            raise ValueError(f"normaliser must be one of {NORMALISERS}, got {normaliser!r}")
        for name, mode in (("q_mode", q_mode), ("alpha_mode", alpha_mode)):
            if mode not in INDEX_MODES:
                raise ValueError(f"{name} must be one of {INDEX_MODES}, got {mode!r}")
        if not 0 < delta <= MAX_DELTA:
            raise ValueError(f"delta={delta} must be in (0, {MAX_DELTA:g}]: q = 1 + delta*tanh(a) spans "
                             "(1 - delta, 1 + delta)")
        if not q > 0:
            raise ValueError(f"q={q} must be > 0 (q-softmax's domain)")
        learn_alpha = normaliser == "entmax" and alpha_mode != "fixed"
        if not (1 < alpha < 2 if learn_alpha else alpha >= 1):
            raise ValueError(f"alpha={alpha} must be in (1, 2) when learned (alpha = 1 + sigmoid(b))" if learn_alpha
                             else f"alpha={alpha} must be >= 1 (alpha = 1 is softmax, 2 sparsemax)")
        self.normaliser, self.q_mode, self.alpha_mode = normaliser, q_mode, alpha_mode
        self.q, self.delta, self.alpha = q, delta, alpha
        shape = (self.heads,) if q_mode == "head" else ()
        learn_q = normaliser == "qsoftmax" and q_mode != "fixed"
        self.q_logit = nn.Parameter(torch.zeros(shape)) if learn_q else None
        shape = (self.heads,) if alpha_mode == "head" else ()
        self.alpha_logit = nn.Parameter(torch.full(shape, math.log((alpha - 1) / (2 - alpha)))) if learn_alpha else None
        self.last_q = None

    def index_parameters(self) -> list[nn.Parameter]:
        """The learned q's ``a`` or entmax's alpha ``b`` (for their own optimiser); empty otherwise."""
        return [p for p in (self.q_logit, self.alpha_logit) if p is not None]

    def current_q(self):
        """The q-softmax index: the float ``q``, or ``1 + delta tanh(a)`` (a scalar or ``[H]``)."""
        if self.q_logit is None:
            return self.q
        return (1 + self.delta * torch.tanh(self.q_logit)).clamp_min(Q_MIN)

    def current_alpha(self):
        """The entmax index: the float ``alpha``, or ``1 + sigmoid(b)`` (a scalar or ``[H]``)."""
        return self.alpha if self.alpha_logit is None else 1 + torch.sigmoid(self.alpha_logit)

    def _normalise(self, scores: torch.Tensor) -> torch.Tensor:
        """Weights ``[H, B, L, L]`` from scores whose padded keys are ``-inf`` (not softmax)."""
        if self.normaliser == "sparsemax":
            return dense_sparsemax(scores)
        if self.normaliser == "entmax":
            alpha = self.current_alpha()
            return dense_entmax(scores, alpha.view(-1, 1, 1, 1) if torch.is_tensor(alpha) else alpha)
        self.last_q = q = self.current_q()
        return dense_qsoftmax(scores, q.view(-1, 1, 1, 1) if torch.is_tensor(q) else q)

    def _projections(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``[N, D]`` node rows -> (Q, K, V ``[N, 3D]``, the gate ``[N, H or 1, G]`` or None).

        They run on the real nodes, before the scatter into the padded block, so no padded row is
        multiplied (molhiv's molecules of about 25 atoms, padded to a block 64 wide, were 60%
        padding). The gate's projection runs in the same matmul as Q, K, V. G3 and G2 scale Q
        and V here, row by row; G1 acts in :meth:`forward`.
        """
        if self.gate_proj is None:
            return self.in_proj(h), None
        weight = torch.cat([self.in_proj.weight, self.gate_proj.weight])
        bias = torch.cat([self.in_proj.bias, self.gate_proj.bias])
        qkv, z = F.linear(h, weight, bias).split([3 * self.dim, self.gate_proj.out_features], -1)
        gate = GATE_ACTIVATIONS[self.gate_activation](z.unflatten(-1, (-1, self.gate_width)))
        if self.gate in ("logit", "value"):
            # G3 scales row i of q k^T by query i's gate (one value per node and head), which is
            # q_i scaled by it (the key-padding bias stays unscaled); G2 scales each key's values
            parts = list(qkv.unflatten(-1, (3, self.heads, self.head_dim)).unbind(1))
            which = 0 if self.gate == "logit" else 2
            parts[which] = parts[which] * gate
            qkv = torch.stack(parts, 1).flatten(1)
        return qkv, gate

    def _attend(self, qkv: torch.Tensor, flat: torch.Tensor, mask: torch.Tensor):
        """Attention within each graph: ``qkv`` ``[n, 3D]`` of the nodes that ``flat`` places in the
        block ``mask`` ``[B, L]`` -> (the heads' outputs ``[n, D]`` before the G1 gate and ``W_O``,
        weights ``[H, B, L, L]``, the heads' outputs in the block ``[H, B, L, d_k]``).

        The block is head-major, ``[3H, B * L, d_k]``: Q, K and V of head ``h`` are contiguous
        ``[B, L, d_k]`` slabs, so the batched matmuls read them without a copy, and their gradients
        are stacked back without a transposed cat. Padded slots are 0: a padded key's score is the
        mask alone, so its weight is exactly 0, and padded query rows are dropped.
        """
        batch, length = mask.shape
        heads, size = self.heads, self.head_dim
        block = qkv.new_zeros(3 * heads, batch * length, size).index_copy(
            1, flat, qkv.view(-1, 3 * heads, size).transpose(0, 1))
        q, k, v = block.view(3, heads * batch, length, size).unbind(0)
        # = masked_fill(q k^T / sqrt(d_k), padded keys, finfo.min) in one kernel: the scale is the
        # matmul's alpha and the mask an added bias (0 at real keys; finfo.min at padded keys,
        # where adding a finite score still rounds to about finfo.min, so their softmax weights stay
        # 0). The other normalisers take -inf, their masked key (exact 0, not in the max or threshold)
        fill = torch.finfo(qkv.dtype).min if self.normaliser == "softmax" else -math.inf
        scores = torch.baddbmm(_key_bias(mask, heads, qkv.dtype, fill), q, k.transpose(1, 2),
                               alpha=1.0 / math.sqrt(size)).view(heads, batch, length, length)
        weights = torch.softmax(scores, dim=-1) if self.normaliser == "softmax" else self._normalise(scores)
        out = torch.bmm(self.attn_dropout(weights).view(heads * batch, length, length), v)
        out = out.view(heads, batch * length, size)
        return out.index_select(1, flat).transpose(0, 1).reshape(-1, self.dim), weights, out

    def forward(self, g, h: torch.Tensor) -> torch.Tensor:
        if h.dim() != 2 or h.shape[1] != self.dim:
            raise ValueError(f"h must have shape [N, {self.dim}], got {tuple(h.shape)}")
        flat, mask = dense_batch_index(g, h.device)
        if flat.numel() != h.shape[0]:
            raise ValueError(f"the graph has {flat.numel()} nodes but h has {h.shape[0]} rows")
        qkv, gate = self._projections(h)
        groups = None if self.record else dense_batch_groups(g, h.device)
        if groups is None:
            out, weights, block = self._attend(qkv, flat, mask)
        else:  # the same attention, graph by graph, in blocks of similar width
            parts = [self._attend(qkv.index_select(0, nodes), group_flat, group_mask)[0]
                     for nodes, group_flat, group_mask in groups]
            order = torch.cat([nodes for nodes, _, _ in groups])
            out = qkv.new_zeros(h.shape).index_copy(0, order, torch.cat(parts))
        if self.record:
            self._record(g, flat, mask, weights, block, gate)
        if self.gate == "output":
            out = (out.view(-1, self.heads, self.head_dim) * gate).flatten(1)
        return self.out_proj(out)

    def _record(self, g, flat, mask, weights, block, gate) -> None:
        """Keep the last call's weights, per-head outputs and gate (detached) in the class
        docstring's layouts, cropped to the largest graph (the block is wider by up to
        ``ROW_ALIGN - 1``)."""
        batch, width = mask.shape
        length = int(g.batch_num_nodes().max()) if batch else 0
        self.last_attn, self.last_mask = weights.detach().transpose(0, 1)[:, :, :length, :length], mask[:, :length]
        heads = block.detach().view(self.heads, batch, width, self.head_dim).transpose(0, 1)[:, :, :length]
        self.last_heads = self.last_heads_ungated = heads
        self.last_gate = None if gate is None else gate.detach().expand(-1, self.heads, -1)
        if self.gate == "output":  # G1 in the block: each real row times its gate, padded rows 0
            dense = gate.new_zeros(batch * width, *gate.shape[1:]).index_copy(0, flat, gate.detach())
            self.last_heads = heads * dense.view(batch, width, *gate.shape[1:]).transpose(1, 2)[:, :, :length]

    def extra_repr(self) -> str:
        text = (
            f"dim={self.dim}, heads={self.heads}, gate={self.gate!r}, "
            f"gate_per_head={self.gate_per_head}, gate_activation={self.gate_activation!r}"
        )
        if self.normaliser == "qsoftmax":
            text += f", normaliser='qsoftmax', q_mode={self.q_mode!r}, " + \
                (f"q={self.q}" if self.q_mode == "fixed" else f"delta={self.delta}")
        elif self.normaliser == "entmax":
            text += f", normaliser='entmax', alpha={self.alpha}, alpha_mode={self.alpha_mode!r}"
        elif self.normaliser != "softmax":
            text += f", normaliser={self.normaliser!r}"
        return text
