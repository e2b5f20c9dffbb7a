"""Node-classification baselines on DGL's own layers: GCN, GAT and GATv2.

The backbone of the LTGA paper: ``layers`` graph layers, ELU between them, heads concatenated
in hidden layers and averaged in the output layer. Self-loops are added by the data loader.
"""
from __future__ import annotations

import torch
from dgl.nn import GATConv, GATv2Conv, GraphConv
from torch import nn
from torch.nn import functional as F

from zoo.models.constraints import Count, DropoutRate, NonNegative
from zoo.models.registry import register_model


@register_model("gcn")
class GCN(nn.Module):
    """Kipf & Welling GCN: ``layers`` GraphConv layers (symmetric normalisation), ELU, dropout."""

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, layers: Count = 2,
                 dropout: DropoutRate = 0.4):
        super().__init__()
        sizes = [in_feats] + [hidden] * (layers - 1) + [num_classes]
        self.convs = nn.ModuleList(GraphConv(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.dropout = nn.Dropout(dropout)

    def forward(self, graph, features: torch.Tensor) -> torch.Tensor:
        h = features
        for i, conv in enumerate(self.convs):
            h = conv(graph, self.dropout(h))
            if i < len(self.convs) - 1:
                h = F.elu(h)
        return h


class _MultiHeadAttentionNet(nn.Module):
    """Stack of multi-head attention layers: concat heads inside, average them at the output."""

    conv_class: type

    def __init__(self, in_feats, num_classes, hidden, heads, layers, dropout, attn_dropout, negative_slope):
        super().__init__()
        in_sizes = [in_feats] + [hidden * heads] * (layers - 1)
        common = dict(feat_drop=dropout, attn_drop=attn_dropout, negative_slope=negative_slope)
        self.convs = nn.ModuleList(
            self.conv_class(size, hidden, heads, activation=F.elu, **common) for size in in_sizes[:-1]
        )
        self.out = self.conv_class(in_sizes[-1], num_classes, heads, **common)

    def forward(self, graph, features: torch.Tensor) -> torch.Tensor:
        h = features
        for conv in self.convs:
            h = conv(graph, h).flatten(1)
        return self.out(graph, h).mean(1)


@register_model("gat")
class GAT(_MultiHeadAttentionNet):
    """Velickovic et al. GAT on ``dgl.nn.GATConv``."""

    conv_class = GATConv

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, heads: Count = 8,
                 layers: Count = 2, dropout: DropoutRate = 0.4, attn_dropout: DropoutRate = 0.4,
                 negative_slope: NonNegative = 0.2):
        super().__init__(in_feats, num_classes, hidden, heads, layers, dropout, attn_dropout, negative_slope)


@register_model("gatv2")
class GATv2(_MultiHeadAttentionNet):
    """Brody et al. GATv2 on ``dgl.nn.GATv2Conv`` (separate source and destination weights)."""

    conv_class = GATv2Conv

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, heads: Count = 8,
                 layers: Count = 2, dropout: DropoutRate = 0.4, attn_dropout: DropoutRate = 0.4,
                 negative_slope: NonNegative = 0.2):
        super().__init__(in_feats, num_classes, hidden, heads, layers, dropout, attn_dropout, negative_slope)
