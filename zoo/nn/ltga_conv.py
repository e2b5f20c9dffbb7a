"""LTGAConv: GATv2 scoring with a learnable Tsallis (q-softmax) or sparse normaliser."""
from __future__ import annotations

import math

import dgl.function as fn
import torch
from dgl.nn.functional import edge_softmax
from torch import nn

from zoo.ops import edge_entmax, edge_gatv2_logits, edge_qsoftmax, edge_sparsemax, edge_weighted_sum

NORMALISERS = ("softmax", "qsoftmax", "entmax", "sparsemax")
Q_MODES = ("fixed", "global", "layer", "head", "edge")
CONTROLS = ("none", "edge_bias", "edge_scale", "head_temperature")
SCORINGS = ("gatv2", "dot")
EDGE_MLPS = ("paper", "wide")
OUTPUT_BIASES = ("none", "per_head", "shared")
MAX_DELTA = 2.0  # the paper's Table 17 sweeps delta up to 2
# Learned q is kept >= Q_MIN: zoo.ops.edge_qsoftmax takes q > 0 only, while q = 1 + delta*tanh(a)
# reaches 1 - delta <= 0 once delta >= 1 (with delta = 1 because float32 tanh(a) rounds to -1 for
# a < -9; with delta > 1 for any a < -atanh(1 / delta)). For delta < 0.95 the clamp never binds.
Q_MIN = 0.05


def _choice(value, options, name):
    if value not in options:
        raise ValueError(f"{name}={value!r} is not one of {options}")


class EdgeGate(nn.Module):
    """Per-edge MLP of the endpoint projections ``z_i = W_l h_i``, ``z_j = W_r h_j`` -> ``[E, H]``,
    zero-initialised output (so a gate starts at 0 on every edge).

    ``layout="paper"`` (LTGA paper, Section 3.3: a ``(2 F_h) -> 8 -> M`` MLP per layer): one MLP
    shared by the heads; head m feeds its own pair ``[z_i^m || z_j^m]`` and reads output m, so
    ``2 F_h * hidden + hidden + hidden * H + H`` parameters (1,104 for F_h = 64, H = 8).
    ``layout="wide"``: the concatenation of all heads ``[z_i || z_j]`` (``2 H F_h``) -> hidden -> H,
    ``2 H F_h * hidden + hidden + hidden * H + H`` parameters (8,272 for F_h = 64, H = 8).

    The first layer is split into a source and a destination half and applied per node, so the
    cost on the edges is one addition and the ``hidden -> H`` read-out.

    >>> gate = EdgeGate(64, 8)
    >>> sum(p.numel() for p in gate.parameters())
    1104
    """

    def __init__(self, out_feats: int, heads: int, hidden: int = 8, layout: str = "paper"):
        super().__init__()
        _choice(layout, EDGE_MLPS, "edge_mlp")
        self.layout = layout
        in_feats = out_feats if layout == "paper" else out_feats * heads
        self.src = nn.Linear(in_feats, hidden)
        self.dst = nn.Linear(in_feats, hidden, bias=False)
        self.out = nn.Linear(hidden, heads)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """A checkpoint of the other layout is refused with the fix (runs recorded before
        ``edge_mlp`` existed have the wide gate)."""
        width = state_dict.get(prefix + "src.weight", self.src.weight).shape[1]
        if width != self.src.in_features:
            other = "wide" if self.layout == "paper" else "paper"
            raise ValueError(f"the checkpoint's per-edge gate {prefix}src takes {width} inputs, "
                             f"edge_mlp={self.layout!r} takes {self.src.in_features}: build the model with "
                             f"edge_mlp={other!r} (LTGA-Edge runs recorded before edge_mlp existed used 'wide')")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, graph, proj_src: torch.Tensor, proj_dst: torch.Tensor) -> torch.Tensor:
        """Edge outputs ``[E, H]`` from node projections ``[N, H, F_h]``."""
        if self.layout == "paper":  # sum_k w[m, k] relu(.)[m, k]: GATv2's logits with slope 0, in edge chunks
            return edge_gatv2_logits(graph, self.src(proj_src), self.dst(proj_dst), self.out.weight, 0.0) \
                + self.out.bias
        with graph.local_scope():
            graph.srcdata["gs"] = self.src(proj_src.flatten(1))
            graph.dstdata["gd"] = self.dst(proj_dst.flatten(1))
            graph.apply_edges(fn.u_add_v("gs", "gd", "g"))
            return self.out(torch.relu(graph.edata["g"]))  # [E, hidden] -> [E, H]


class LTGAConv(nn.Module):
    r"""Learnable Tsallis graph attention (LTGA) layer.

    Scores (GATv2): ``e_ij = a^T LeakyReLU(W_l h_i + W_r h_j [+ W_e x_ij])`` per head, or
    ``<W_l h_i, W_r h_j> / sqrt(F)`` with ``scoring="dot"``; then a normaliser over the incoming
    edges of each node j: ``softmax``, ``qsoftmax`` (:func:`zoo.ops.edge_qsoftmax`), ``entmax``
    (alpha fixed) or ``sparsemax``; output ``h'_j = sum_i alpha_ij W_l h_i`` per head.

    q granularity (``qsoftmax`` only): ``fixed`` (the float ``q``), ``global`` (the scalar
    parameter ``shared_q_logit`` passed in by the model), ``layer`` (one scalar), ``head``
    (``[H]``) or ``edge`` (an :class:`EdgeGate` of the endpoint projections: ``edge_mlp="paper"``,
    each head's ``2F -> 8 -> H``, or ``"wide"``, all heads' ``2HF -> 8 -> H``). Learned indices are
    ``q = 1 + delta * tanh(a)``, ``0 < delta <= 2``, with ``a = 0`` at init, so every LTGA model
    starts at softmax (and kept >= ``Q_MIN`` = 0.05, see above).

    Capacity-matched controls (softmax normaliser): ``edge_bias`` adds an MLP output to the
    logits, ``edge_scale`` multiplies them by ``1 + delta * tanh(MLP)``, ``head_temperature``
    by ``1 + delta * tanh(t_h)``; each is zero-initialised like the q it matches.

    ``edge_feats`` (GATv2 scoring only): width of edge features ``x_ij``, projected by ``W_e``
    (``fc_edge``, no bias) into the score; ``forward`` then needs ``edge_feat`` ``[E, edge_feats]``.
    ``output_bias``: ``"per_head"`` adds a ``[H, out]`` bias (PyG ``GATv2Conv`` with
    ``concat=True``), ``"shared"`` one ``[out]`` bias to every head (PyG with ``concat=False``: the
    mean over heads then carries it once), before ``activation``; ``"none"``: DGL's layout.

    With ``normaliser="softmax"`` (no control) or q fixed at 1 the layer equals
    ``dgl.nn.GATv2Conv`` with the same weights (parameter names ``fc_src``, ``fc_dst``, ``attn``).

    Shapes: ``feat`` ``[N, in_feats]`` -> ``[N, num_heads, out_feats]``.

    >>> import dgl
    >>> conv = LTGAConv(16, 8, num_heads=4, q_mode="head")
    >>> g = dgl.rand_graph(10, 30)
    >>> conv(dgl.add_self_loop(g), torch.randn(g.num_nodes(), 16)).shape
    torch.Size([10, 4, 8])
    """

    def __init__(self, in_feats: int, out_feats: int, num_heads: int, *, normaliser: str = "qsoftmax",
                 q_mode: str = "head", q: float = 1.0, delta: float = 1.0, alpha: float = 1.5,
                 shared_q_logit: nn.Parameter | None = None, control: str = "none", scoring: str = "gatv2",
                 edge_feats: int | None = None, feat_drop: float = 0.0, attn_drop: float = 0.0,
                 negative_slope: float = 0.2, activation=None, gate_hidden: int = 8, edge_mlp: str = "paper",
                 output_bias: str = "none"):
        super().__init__()
        _choice(normaliser, NORMALISERS, "normaliser")
        _choice(q_mode, Q_MODES, "q_mode")
        _choice(control, CONTROLS, "control")
        _choice(scoring, SCORINGS, "scoring")
        _choice(edge_mlp, EDGE_MLPS, "edge_mlp")
        _choice(output_bias, OUTPUT_BIASES, "output_bias")
        if q_mode == "global" and shared_q_logit is None:
            raise ValueError("q_mode='global' needs the model's shared_q_logit parameter")
        if control != "none" and normaliser != "softmax":
            raise ValueError(f"control={control!r} is a softmax (q = 1) control; set normaliser='softmax'")
        if not 0 < delta <= MAX_DELTA:
            raise ValueError(f"delta={delta} must be in (0, {MAX_DELTA:g}]: q = 1 + delta*tanh(a) spans "
                             "(1 - delta, 1 + delta)")
        if edge_feats and scoring != "gatv2":
            raise ValueError(f"edge_feats={edge_feats} enter the GATv2 score; set scoring='gatv2' (got {scoring!r})")
        self.num_heads, self.out_feats = num_heads, out_feats
        self.normaliser, self.q_mode, self.control, self.scoring = normaliser, q_mode, control, scoring
        self.q, self.delta, self.alpha = q, delta, alpha
        width = out_feats * num_heads
        self.fc_src = nn.Linear(in_feats, width)
        self.fc_dst = nn.Linear(in_feats, width)
        self.attn = nn.Parameter(torch.empty(1, num_heads, out_feats)) if scoring == "gatv2" else None
        self.fc_edge = nn.Linear(edge_feats, width, bias=False) if edge_feats else None
        self.feat_drop, self.attn_drop = nn.Dropout(feat_drop), nn.Dropout(attn_drop)
        self.negative_slope = negative_slope
        self.activation = activation
        self.shared_q_logit = shared_q_logit if q_mode == "global" and normaliser == "qsoftmax" else None
        learned = normaliser == "qsoftmax" and q_mode != "fixed"
        self.q_logit = None
        if learned and q_mode in ("layer", "head"):
            self.q_logit = nn.Parameter(torch.zeros(num_heads if q_mode == "head" else ()))
        self.temperature_logit = nn.Parameter(torch.zeros(num_heads)) if control == "head_temperature" else None
        needs_gate = (learned and q_mode == "edge") or control in ("edge_bias", "edge_scale")
        self.edge_gate = EdgeGate(out_feats, num_heads, gate_hidden, edge_mlp) if needs_gate else None
        bias_shape = {"per_head": (num_heads, out_feats), "shared": (out_feats,)}.get(output_bias)
        self.bias = nn.Parameter(torch.zeros(bias_shape)) if bias_shape else None
        self.last_q = None
        # Inference-time hooks (zoo.analysis.counterfactuals, zoo.analysis.figures.trained): q -> q',
        # (graph, logits) -> logits' (before any control or normaliser) and (graph, attention) ->
        # attention'. None in normal use.
        self.q_override = None
        self.logits_override = None
        self.attention_override = None
        self.reset_parameters()

    def reset_parameters(self):
        """GATv2Conv's initialisation: Xavier-normal (ReLU gain) weights, zero biases."""
        gain = nn.init.calculate_gain("relu")
        for linear in (self.fc_src, self.fc_dst):
            nn.init.xavier_normal_(linear.weight, gain=gain)
            nn.init.zeros_(linear.bias)
        if self.attn is not None:
            nn.init.xavier_normal_(self.attn, gain=gain)
        if self.fc_edge is not None:
            nn.init.xavier_normal_(self.fc_edge.weight, gain=gain)

    def index_parameters(self) -> list[nn.Parameter]:
        """The parameters that set q or the control (trained by their own optimiser)."""
        params = [p for p in (self.q_logit, self.temperature_logit) if p is not None]
        return params + (list(self.edge_gate.parameters()) if self.edge_gate is not None else [])

    def forward(self, graph, feat: torch.Tensor, edge_feat: torch.Tensor | None = None,
                get_attention: bool = False):
        """``[N, in]`` -> ``[N, H, out]`` (and attention ``[E, H]`` with ``get_attention``).

        ``feat`` may be a sparse COO tensor (bag-of-words features): the input projections then
        run as one sparse matmul (see ``_sparse_projections``). ``edge_feat`` ``[E, edge_feats]``
        (default ``graph.edata["feat"]``, so a DGL block brings its own edges' rows): used when the
        layer was built with ``edge_feats``, refused otherwise."""
        if (graph.in_degrees() == 0).any():
            raise ValueError("LTGAConv needs every node to have an incoming edge: add self-loops "
                             "with dgl.add_self_loop(graph)")
        if edge_feat is not None and self.fc_edge is None:
            raise ValueError(f"edge_feat {tuple(edge_feat.shape)} given, but the layer has no W_e: build it with "
                             f"edge_feats={edge_feat.shape[-1]}")
        if edge_feat is None and self.fc_edge is not None:
            if "feat" not in graph.edata:
                raise ValueError(f"the layer was built with edge_feats={self.fc_edge.in_features}: pass edge_feat "
                                 f"[E, {self.fc_edge.in_features}] or set graph.edata['feat']")
            edge_feat = graph.edata["feat"]
        with graph.local_scope():
            num_dst = graph.num_dst_nodes()  # on a DGL block: its first num_dst source nodes
            if feat.is_sparse:
                src, dst = self._sparse_projections(feat)
                dst = dst[:num_dst]
            else:
                h = self.feat_drop(feat)
                src = self.fc_src(h).view(-1, self.num_heads, self.out_feats)
                dst = self.fc_dst(h[:num_dst]).view(-1, self.num_heads, self.out_feats)
            if self.scoring == "dot":
                graph.srcdata["el"], graph.dstdata["er"] = src, dst
                graph.apply_edges(fn.u_dot_v("el", "er", "e"))
                logits = graph.edata.pop("e").squeeze(-1) / math.sqrt(self.out_feats)
            else:
                edge_term = None if self.fc_edge is None else \
                    self.fc_edge(edge_feat).view(-1, self.num_heads, self.out_feats)
                logits = edge_gatv2_logits(graph, src, dst, self.attn, self.negative_slope, edge_term)
            if self.logits_override is not None:
                logits = self.logits_override(graph, logits)
            gate = self.edge_gate(graph, src, dst) if self.edge_gate is not None else None
            attention = self._normalise(graph, logits, gate)
            if self.attention_override is not None:
                attention = self.attention_override(graph, attention)
            out = edge_weighted_sum(graph, self.attn_drop(attention), src)
            if self.bias is not None:
                out = out + self.bias
            if self.activation is not None:
                out = self.activation(out)
            return (out, attention) if get_attention else out

    def _sparse_projections(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``W_l h`` and ``W_r h`` of sparse COO features in one sparse matmul.

        Feature dropout draws the same dense mask as ``nn.Dropout`` on the dense features (same
        generator calls), so only the matmul's summation order differs from the dense path.
        """
        feat = feat.coalesce()
        values = feat.values()
        p = self.feat_drop.p
        if self.training and p > 0:
            noise = torch.empty(feat.shape, dtype=values.dtype, device=values.device).bernoulli_(1 - p)
            index = feat.indices()
            values = values * (noise.div_(1 - p) if p < 1 else noise)[index[0], index[1]]
            feat = torch.sparse_coo_tensor(feat.indices(), values, feat.shape, is_coalesced=True)
        weight = torch.cat([self.fc_src.weight, self.fc_dst.weight])
        both = torch.sparse.mm(feat, weight.T.contiguous())  # a strided W^T is ~10x slower here
        width = self.num_heads * self.out_feats
        src = (both[:, :width] + self.fc_src.bias).view(-1, self.num_heads, self.out_feats)
        dst = (both[:, width:] + self.fc_dst.bias).view(-1, self.num_heads, self.out_feats)
        return src, dst

    def _normalise(self, graph, logits: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        if self.control == "edge_bias":
            logits = logits + gate
        elif self.control == "edge_scale":
            logits = logits * (1 + self.delta * torch.tanh(gate))
        elif self.control == "head_temperature":
            logits = logits * (1 + self.delta * torch.tanh(self.temperature_logit))
        if self.normaliser == "softmax":
            return edge_softmax(graph, logits)
        if self.normaliser == "sparsemax":
            return edge_sparsemax(graph, logits)
        if self.normaliser == "entmax":
            return edge_entmax(graph, logits, self.alpha)
        q = self._q(gate)
        self.last_q = q = self.q_override(q) if self.q_override is not None else q
        return edge_qsoftmax(graph, logits, q)

    def _q(self, gate: torch.Tensor | None):
        """The Tsallis index: a float, a scalar, ``[H]`` or ``[E, H]`` tensor."""
        if self.q_mode == "fixed":
            return self.q
        a = {"global": self.shared_q_logit, "edge": gate}.get(self.q_mode, self.q_logit)
        return (1 + self.delta * torch.tanh(a)).clamp_min(Q_MIN)
