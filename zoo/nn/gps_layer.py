"""GraphGPS layer (Rampasek et al., 2022) with the SigGate-GT gated global attention.

Parallel form, as GraphGPS's ``GPSLayer``::

    h_local  = norm(h + dropout(Local(g, h, e)))     # absent for local="none"
    h_global = norm(h + dropout(Global(g, h)))
    h'       = h_local + h_global
    out      = norm(h' + FFN(h')),  FFN = Linear(D, W) -> act -> dropout -> Linear(W, D) -> dropout, W = ffn_dim or r D

``act`` is ``ffn_activation``: ``relu`` (GraphGPS's default, and this layer's) or ``gelu`` (the
SigGate-GT paper's FFN, Section 6.2; ``torch.nn.GELU``, exact erf form). Neither has parameters,
so the choice does not change the state dict.

Local branches:

* ``gatedgcn``: ``dgl.nn.GatedGCNConv`` built with ``residual=False, dropout=0`` (its own
  BatchNorm and ReLU kept). DGL applies dropout *after* its residual sum; GraphGPS applies it to
  the branch before the sum, so this layer does the dropout and both residuals itself, which
  gives GraphGPS's ``h + dropout(relu(bn(.)))`` for nodes and ``e + dropout(relu(bn(.)))`` for
  edges. The updated edge features are returned. It runs through :func:`gated_gcn`, DGL's math in
  fewer kernels.
* ``gine``: ``dgl.nn.GINEConv`` with MLP ``Linear -> ReLU -> Linear`` and fixed ``eps = 0``;
  edge features pass through unchanged.
* ``ltga``: learned-q message passing, :class:`zoo.nn.LTGAConv` (GATv2 scores with the edge
  features, ``W_e e_ij``, and a q-softmax normaliser over each node's in-edges), ``heads`` heads of
  ``dim / heads`` concatenated with a per-head output bias, no activation, as GraphGPS's ``GAT``
  local branch (PyG ``GATConv(dim, dim // heads, heads, edge_dim=dim)``). q follows
  ``local_q_mode`` (``fixed``: the float ``q``; ``layer``, ``head`` or ``edge``: learned as
  ``1 + delta tanh(a)``, ``a = 0`` at init). Every node gets a self-loop, as LTGA and PyG's
  ``GATConv`` add them; a self-loop's edge features are zeros (PyG fills the mean of the node's
  in-edges'). Edge features pass through unchanged.
* ``none``: global attention only; ``e`` passes through (it may be ``None``).

The global attention's normaliser (``normaliser``, ``q_mode``, ``q``, ``delta``, ``alpha``,
``alpha_mode``) is :class:`zoo.nn.GatedMultiheadAttention`'s. :meth:`GPSLayer.index_parameters`
lists the learned indices of both branches, :meth:`GPSLayer.q_values` their last q.

``norm="batch"`` is ``BatchNorm1d`` over nodes (GraphGPS default); ``norm="layer"`` is
``LayerNorm`` per node (GraphGPS's ``layer_norm`` flag uses PyG's GraphNorm instead). The
BatchNorm inside GatedGCN is kept for both, as in GraphGPS.
"""
from __future__ import annotations

import dgl
import torch
from dgl.nn import GatedGCNConv, GINEConv
from torch import nn
from torch.nn import functional as F

from zoo.nn.gated_attention import GatedMultiheadAttention
from zoo.nn.ltga_conv import LTGAConv
from zoo.ops.gated_gcn import gated_gcn_messages

LOCALS = ("gatedgcn", "gine", "ltga", "none")
LTGA_Q_MODES = ("fixed", "layer", "head", "edge")
NORMS = ("batch", "layer")
FFN_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


def gated_gcn(conv: GatedGCNConv, g, h: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``conv(g, h, e)`` for a ``GatedGCNConv`` built as :class:`GPSLayer` builds it (no residual,
    no dropout), with the same math in fewer kernels.

    DGL's forward runs the node projections ``A, B, D, E`` as four matmuls and the message passing
    through graph frames (``apply_edges``, two ``update_all``). Here the four projections are one
    matmul on the concatenated weights, and the message passing is
    :func:`zoo.ops.gated_gcn.gated_gcn_messages` (fused CPU kernels; on molecule batches the pure
    torch path alone is about twice as fast as DGL's), which matches DGL up to the order of
    summation::

        e'    = D h_src + E h_dst + C e
        sigma = sigmoid(e')
        h'    = A h + (sum_in sigma * B h_src) / (sum_in sigma + 1e-6)
        out   = act(bn_node(h')), act(bn_edge(e'))

    The parameters are the module's own, so state dicts are unchanged.
    """
    weight = torch.cat([conv.A.weight, conv.B.weight, conv.D.weight, conv.E.weight])
    bias = torch.cat([conv.A.bias, conv.B.bias, conv.D.bias, conv.E.bias])
    h_new, e_new = gated_gcn_messages(g, F.linear(h, weight, bias), conv.C(e))
    if conv.batch_norm:
        h_new, e_new = conv.bn_node(h_new), conv.bn_edge(e_new)
    if conv.activation:
        h_new, e_new = conv.activation(h_new), conv.activation(e_new)
    return h_new, e_new


class GPSLayer(nn.Module):
    """One GraphGPS layer with optional SigGate-GT gate on the global attention.

    ``forward(g, h, e)``: ``h`` ``[N, dim]``, ``e`` ``[E, dim]`` (``None`` allowed for
    ``local="none"``) -> ``(h [N, dim], e)``. ``g`` is a batched ``DGLGraph``. The attention
    module is ``self.attn`` (a :class:`GatedMultiheadAttention`; set ``self.attn.record = True``
    to keep its last weights and gates).

    >>> import dgl
    >>> g = dgl.batch([dgl.rand_graph(4, 8), dgl.rand_graph(6, 12)])
    >>> layer = GPSLayer(32, heads=4, local="gatedgcn", gate="output")
    >>> h, e = layer(g, torch.randn(10, 32), torch.randn(20, 32))
    >>> h.shape, e.shape
    (torch.Size([10, 32]), torch.Size([20, 32]))
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        local: str = "gatedgcn",
        gate: str = "none",
        gate_per_head: bool = True,
        gate_activation: str = "sigmoid",
        gate_bias_init: float = 0.5,
        gate_weight_init: str = "zeros",
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        norm: str = "batch",
        ffn_ratio: int = 2,
        ffn_dim: int = 0,
        ffn_activation: str = "relu",
        *,
        normaliser: str = "softmax",
        q_mode: str = "head",
        q: float = 1.0,
        delta: float = 1.0,
        alpha: float = 1.5,
        alpha_mode: str = "fixed",
        local_q_mode: str = "head",
    ):
        super().__init__()
        if local not in LOCALS:
            raise ValueError(f"local must be one of {LOCALS}, got {local!r}")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
        if not isinstance(ffn_ratio, int) or ffn_ratio < 1:
            raise ValueError(f"ffn_ratio must be a positive integer, got {ffn_ratio!r}")
        if ffn_activation not in FFN_ACTIVATIONS:
            raise ValueError(f"ffn_activation must be one of {tuple(FFN_ACTIVATIONS)}, got {ffn_activation!r}")
        if not isinstance(ffn_dim, int) or ffn_dim < 0:
            raise ValueError(f"ffn_dim must be 0 (use ffn_ratio * dim) or a positive width, got {ffn_dim!r}")
        hidden = ffn_dim or ffn_ratio * dim
        self.dim, self.local_type, self.ffn_activation = dim, local, ffn_activation
        if local_q_mode not in LTGA_Q_MODES:
            raise ValueError(f"local_q_mode must be one of {LTGA_Q_MODES}, got {local_q_mode!r}")
        self.attn = GatedMultiheadAttention(
            dim, heads, gate=gate, gate_per_head=gate_per_head, gate_activation=gate_activation,
            gate_bias_init=gate_bias_init, gate_weight_init=gate_weight_init, attn_dropout=attn_dropout,
            normaliser=normaliser, q_mode=q_mode, q=q, delta=delta, alpha=alpha, alpha_mode=alpha_mode,
        )

        def make_norm() -> nn.Module:
            return nn.BatchNorm1d(dim) if norm == "batch" else nn.LayerNorm(dim)

        self.local = None
        if local == "gatedgcn":
            self.local = GatedGCNConv(dim, dim, dim, dropout=0.0, batch_norm=True, residual=False, activation=F.relu)
        elif local == "gine":
            self.local = GINEConv(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim)))
        elif local == "ltga":
            self.local = LTGAConv(dim, dim // heads, heads, normaliser="qsoftmax", q_mode=local_q_mode, q=q,
                                  delta=delta, edge_feats=dim, output_bias="per_head")
        self.norm_local = make_norm() if self.local is not None else None
        self.norm_attn = make_norm()
        self.ffn = nn.Sequential(
            nn.Linear(dim, hidden), FFN_ACTIVATIONS[ffn_activation](), nn.Dropout(dropout),
            nn.Linear(hidden, dim), nn.Dropout(dropout),
        )
        self.norm_ffn = make_norm()
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, h: torch.Tensor, e: torch.Tensor | None = None):
        if h.dim() != 2 or h.shape[1] != self.dim:
            raise ValueError(f"h must have shape [N, {self.dim}], got {tuple(h.shape)}")
        out = self.norm_attn(h + self.dropout(self.attn(g, h)))
        if self.local is not None:
            if e is None or e.dim() != 2 or e.shape[1] != self.dim:
                shape = None if e is None else tuple(e.shape)
                raise ValueError(f"local={self.local_type!r} needs edge features of shape [E, {self.dim}], got {shape}")
            if self.local_type == "gatedgcn":
                h_local, e_local = gated_gcn(self.local, g, h, e)  # = self.local(g, h, e), fewer kernels
                e = e + self.dropout(e_local)
            elif self.local_type == "ltga":
                looped = with_self_loops(g)
                h_local = self.local(looped, h, torch.cat([e, e.new_zeros(g.num_nodes(), self.dim)])).flatten(1)
            else:
                h_local = self.local(g, h, e)
            out = out + self.norm_local(h + self.dropout(h_local))
        return self.norm_ffn(out + self.ffn(out)), e

    def index_parameters(self) -> list[nn.Parameter]:
        """The learned attention indices (global attention's q or alpha, then the LTGA branch's q)."""
        local = self.local.index_parameters() if self.local_type == "ltga" else []
        return self.attn.index_parameters() + local

    def q_values(self) -> list[torch.Tensor]:
        """The learned q of the last forward, with their graph: the global attention's, then the LTGA branch's."""
        local = self.local.last_q if self.local_type == "ltga" else None
        return [q for q in (self.attn.last_q, local) if torch.is_tensor(q)]

    def extra_repr(self) -> str:
        return f"local={self.local_type!r}, ffn_activation={self.ffn_activation!r}"


def with_self_loops(g):
    """``g``'s structure with one self-loop per node appended (edge ids ``E .. E + N - 1``), without
    its features; kept on ``g`` so that every layer of a model reuses it."""
    key = (g.num_nodes(), g.num_edges())
    cached = getattr(g, "_zoo_self_loops", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    src, dst = g.edges()
    loop = torch.arange(g.num_nodes(), device=src.device, dtype=src.dtype)
    looped = dgl.graph((torch.cat([src, loop]), torch.cat([dst, loop])), num_nodes=g.num_nodes())
    g._zoo_self_loops = (key, looped)
    return looped
