"""The LTGA node classifier: the GATv2 backbone with :class:`zoo.nn.LTGAConv` layers."""
from __future__ import annotations

from typing import Annotated

import torch
from torch import nn
from torch.nn import functional as F

from zoo.models.capabilities import HasIndexParameters, HasLTGALayers
from zoo.models.constraints import AtLeast, Count, DropoutRate, Interval, NonNegative
from zoo.models.registry import register_model
from zoo.nn.ltga_conv import LTGAConv


@register_model("ltga")
class LTGA(HasIndexParameters, HasLTGALayers, nn.Module):
    """``layers`` LTGAConv layers, ELU between them, heads concatenated inside and averaged at the
    output (the seed paper's backbone). ``q_mode="global"`` shares one index logit by all layers.
    ``q`` is the fixed index (``q_mode="fixed"``), ``delta`` the reach of a learned one
    (``q = 1 + delta * tanh(a)``), ``alpha`` the entmax index. ``sparse_features=True`` feeds the
    first layer the features as a sparse tensor (the same function and dropout masks, a sparse
    matmul: much faster on bag-of-words features such as CiteSeer's 3703 columns at 0.85%
    density; float rounding differs from the dense path).

    >>> model = create_model("ltga", in_feats=1433, num_classes=7, q_mode="edge")  # doctest: +SKIP
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, heads: Count = 8, layers: Count = 2,
                 dropout: DropoutRate = 0.4, attn_dropout: DropoutRate = 0.4, negative_slope: NonNegative = 0.2,
                 normaliser: str = "qsoftmax", q_mode: str = "head",
                 q: Annotated[float, Interval(0, low_open=True)] = 1.0,
                 delta: Annotated[float, Interval(0, 1, low_open=True)] = 1.0,
                 alpha: Annotated[float, AtLeast(1)] = 1.5, control: str = "none", scoring: str = "gatv2",
                 sparse_features: bool = False):
        super().__init__()
        self.sparse_features = bool(sparse_features)
        shared = nn.Parameter(torch.zeros(())) if q_mode == "global" and normaliser == "qsoftmax" else None
        self.shared_q_logit = shared
        common = dict(normaliser=normaliser, q_mode=q_mode, q=q, delta=delta, alpha=alpha, shared_q_logit=shared,
                      control=control, scoring=scoring, feat_drop=dropout, attn_drop=attn_dropout,
                      negative_slope=negative_slope)
        in_sizes = [in_feats] + [hidden * heads] * (layers - 1)
        self.convs = nn.ModuleList(LTGAConv(size, hidden, heads, activation=F.elu, **common)
                                   for size in in_sizes[:-1])
        self.out = LTGAConv(in_sizes[-1], num_classes, heads, **common)

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

    def forward(self, graph, features: torch.Tensor) -> torch.Tensor:
        h = features.to_sparse() if self.sparse_features and not features.is_sparse else features
        for conv in self.convs:
            h = conv(graph, h).flatten(1)
        return self.out(graph, h).mean(1)
