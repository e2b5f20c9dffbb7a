"""The peer of ``benchmark.py gps --peer pyg``: the zoo's GPS model with its layers replaced by
PyTorch Geometric's ``GPSConv`` (Rampasek et al., 2022, as PyG 2.6.1 implements it).

Only the layer stack differs: the encoders, pooling and head are the zoo model's own modules, and
each ``GPSConv`` is built as the zoo's GINE ``GPSLayer`` (``GINEConv`` with MLP Linear -> ReLU ->
Linear, ``torch.nn.MultiheadAttention``, FFN ``dim -> 2 dim -> dim`` with ReLU, batch norm), so
the two models have the same parameter count (checked). PyG is an optional extra, not a
dependency of the zoo: ``pip install torch-geometric==2.6.1`` (or ``pip install -e ".[bench]"``);
on torch 2.2.1 it runs on its pure-torch fallbacks (no ``torch_scatter``/``torch_sparse``).
"""
from __future__ import annotations

import copy

import torch
from torch import nn


def _pyg():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError as exc:
        raise SystemExit(
            "error: --peer pyg needs PyTorch Geometric: pip install torch-geometric==2.6.1 "
            f'(or pip install -e ".[bench]"); importing it failed: {exc}'
        ) from None
    return pyg_nn


class _PygLayer(nn.Module):
    """A ``GPSConv`` called as a zoo ``GPSLayer``: ``(g, h, e) -> (h, e)``."""

    def __init__(self, conv: nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, g, h: torch.Tensor, e: torch.Tensor):
        cached = getattr(g, "_pyg_index", None)
        if cached is None:
            sizes = g.batch_num_nodes()
            cached = (torch.stack(g.edges()), torch.repeat_interleave(torch.arange(len(sizes)), sizes))
            g._pyg_index = cached
        edge_index, batch = cached
        return self.conv(h, edge_index, batch, edge_attr=e), e


def pyg_gps_like(zoo_model: nn.Module, heads: int, attn_dropout: float, dropout: float) -> nn.Module:
    """A copy of ``zoo_model`` (a zoo ``gps`` model with ``local="gine"``, ``norm="batch"``, ReLU FFN
    of ratio 2) whose GPS layers are PyG ``GPSConv`` layers; raises if the parameter counts differ.

    >>> peer = pyg_gps_like(create_model("gps", local="gine"), heads=8, attn_dropout=0.5, dropout=0.0)  # doctest: +SKIP
    """
    pyg_nn = _pyg()
    layers = zoo_model.gps_layers()
    if any(layer.local_type != "gine" or layer.ffn_activation != "relu" for layer in layers):
        raise SystemExit("error: --peer pyg compares GINE GPS layers with a ReLU FFN (PyG's GPSConv has no "
                         "GatedGCN branch or GELU FFN); drop --recipe or use a GINE recipe")
    dim = layers[0].dim
    peer = copy.deepcopy(zoo_model)
    peer.blocks = nn.ModuleList(
        _PygLayer(pyg_nn.GPSConv(
            dim, pyg_nn.GINEConv(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))),
            heads=heads, dropout=dropout, norm="batch_norm", attn_type="multihead",
            attn_kwargs={"dropout": attn_dropout},
        ))
        for _ in layers
    )
    counts = [sum(p.numel() for p in model.parameters()) for model in (zoo_model, peer)]
    if counts[0] != counts[1]:
        raise SystemExit(f"error: the PyG model has {counts[1]} parameters, the zoo's {counts[0]}; they must match")
    return peer
