"""The LTGA node classifier: the GATv2 backbone with :class:`zoo.nn.LTGAConv` layers."""
from __future__ import annotations

from typing import Annotated

import torch
from torch import nn
from torch.nn import functional as F

from zoo.models.capabilities import HasIndexParameters, HasLTGALayers
from zoo.models.constraints import AtLeast, Count, DropoutRate, Interval, NonNegative
from zoo.models.registry import register_model
from zoo.nn.ltga_conv import MAX_DELTA, LTGAConv


@register_model("ltga")
class LTGA(HasIndexParameters, HasLTGALayers, nn.Module):
    """``layers`` LTGAConv layers, ELU between them, heads concatenated inside and averaged at the
    output (the seed paper's backbone). ``q_mode="global"`` shares one index logit by all layers.
    ``q`` is the fixed index (``q_mode="fixed"``), ``delta`` the reach of a learned one
    (``q = 1 + delta * tanh(a)``, ``delta`` up to 2 as in the paper's Table 17), ``alpha`` the
    entmax index. ``sparse_features=True`` feeds the first layer the features as a sparse tensor
    (the same function and dropout masks, a sparse matmul: much faster on bag-of-words features
    such as CiteSeer's 3703 columns at 0.85% density; float rounding differs from the dense path).

    ``edge_mlp`` is the per-edge gate of ``q_mode="edge"`` and of the edge controls (see
    :class:`zoo.nn.EdgeGate`): ``"paper"``, each head's ``2F -> 8 -> H`` (the paper's ~10^2
    parameters per layer), or ``"wide"``, all heads' ``2HF -> 8 -> H``. ``output_bias=True`` adds
    PyG ``GATv2Conv``'s output bias (``[H * hidden]`` in the concatenating layers, ``[num_classes]``
    in the averaging one); the default is DGL's bias-free layout. ``edge_feats > 0``: every layer
    adds ``W_e x_ij`` to its GATv2 score, with ``x_ij`` the ``edge_features`` given to ``forward``
    (default: each layer's graph's ``edata["feat"]``, self-loops included; a DGL block carries its
    edges' rows).

    On Cora (1433 features, 7 classes) with the defaults and ``output_bias=True``, the parameter
    counts are the paper's Table 11: GATv2 (``normaliser="softmax"``) 1,526,959, LTGA-Head
    1,526,975, LTGA-Edge 1,528,255.

    >>> from zoo.models import create_model
    >>> model = create_model("ltga", in_feats=1433, num_classes=7, q_mode="edge")
    >>> sum(p.numel() for p in model.parameters())  # no output bias (the paper's recipes add it)
    1527736
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, heads: Count = 8, layers: Count = 2,
                 dropout: DropoutRate = 0.4, attn_dropout: DropoutRate = 0.4, negative_slope: NonNegative = 0.2,
                 normaliser: str = "qsoftmax", q_mode: str = "head",
                 q: Annotated[float, Interval(0, low_open=True)] = 1.0,
                 delta: Annotated[float, Interval(0, MAX_DELTA, low_open=True)] = 1.0,
                 alpha: Annotated[float, AtLeast(1)] = 1.5, control: str = "none", scoring: str = "gatv2",
                 sparse_features: bool = False, edge_mlp: str = "paper", output_bias: bool = False,
                 edge_feats: Annotated[int, AtLeast(0)] = 0):
        super().__init__()
        self.sparse_features = bool(sparse_features)
        shared = nn.Parameter(torch.zeros(())) if q_mode == "global" and normaliser == "qsoftmax" else None
        self.shared_q_logit = shared
        common = dict(normaliser=normaliser, q_mode=q_mode, q=q, delta=delta, alpha=alpha, shared_q_logit=shared,
                      control=control, scoring=scoring, feat_drop=dropout, attn_drop=attn_dropout,
                      negative_slope=negative_slope, edge_mlp=edge_mlp, edge_feats=edge_feats or None)
        in_sizes = [in_feats] + [hidden * heads] * (layers - 1)
        bias = "per_head" if output_bias else "none"
        self.convs = nn.ModuleList(LTGAConv(size, hidden, heads, activation=F.elu, output_bias=bias, **common)
                                   for size in in_sizes[:-1])
        self.out = LTGAConv(in_sizes[-1], num_classes, heads, output_bias="shared" if output_bias else "none",
                            **common)

    def ltga_layers(self) -> list[LTGAConv]:
        """All LTGA layers, input first."""
        return [*self.convs, self.out]

    def index_parameters(self) -> list[nn.Parameter]:
        """Parameters of q (or of a capacity-matched control), for their own optimiser."""
        params = [self.shared_q_logit] if self.shared_q_logit is not None else []
        return params + [p for conv in self.ltga_layers() for p in conv.index_parameters()]

    def q_values(self) -> list[torch.Tensor]:
        """The q each layer used in the last forward (tensors keep their graph, for the prior)."""
        return [conv.last_q for conv in self.ltga_layers() if torch.is_tensor(conv.last_q)]

    def forward(self, graph, features: torch.Tensor, edge_features: torch.Tensor | None = None) -> torch.Tensor:
        h = features.to_sparse() if self.sparse_features and not features.is_sparse else features
        for conv in self.convs:
            h = conv(graph, h, edge_features).flatten(1)
        return self.out(graph, h, edge_features).mean(1)
