"""GPS and SigGate-GT: the GraphGPS graph-level model (``gps``), the same model whose global
attention carries a learned gate (``siggate_gt``), and the model whose global attention can also
prune (``sparsegate_gt``: a learned-q q-softmax or an entmax normaliser, issue 18), gated or not,
optionally with LTGA message passing as its local branch.

Pipeline (GraphGPS's ``GPSModel`` layout)::

    h = [atom embedding | LapPE | RWSE]        NodeFeatureEncoder, dim wide in all
    e = bond embedding                         BondEncoder or type dict (absent for local="none")
    h, e = GPSLayer(g, h, e)   x layers        local branch + global attention (gated or not) + FFN
    y = MLP(pool(g, h))                        mean or sum readout, head_layers Linear layers

Inputs on the (batched) graph: ``ndata["feat"]`` int64 ``[N, 9]`` (``ogb.utils.smiles2graph``)
or ``[N]`` types (``atom_types > 0``) or float ``[N, atom_features]``, ``edata["feat"]`` int64
``[E, 3]`` or ``[E]`` types (``bond_types > 0``) or float ``[E, bond_features]``, and the encodings
named by :meth:`GPS.pe_spec`:
``ndata["lap_eigvec"]``/``ndata["lap_eigval"]`` ``[N, lap_k]`` (NaN-padded for graphs with fewer
than ``lap_k`` nodes) and ``ndata["rwse"]`` ``[N, rwse_k]``, computed by
``zoo.data.positional.add_positional_encodings``.

With ``local="gatedgcn"`` the edge features returned by the last layer are not read, so the
BatchNorm on that layer's edge output (``blocks[-1].local.bn_edge``) never receives a gradient,
as in GraphGPS.
"""
from __future__ import annotations

from typing import Annotated

import dgl
import torch
from dgl.nn import AvgPooling, SumPooling
from torch import nn

from zoo.models.capabilities import HasGPSLayers, HasHead, HasIndexParameters, HasPositionalEncodings
from zoo.models.constraints import AtLeast, Count, DropoutRate, Interval
from zoo.models.registry import register_model
from zoo.nn.encoders import BondEncoder, LinearFeatureEncoder, NodeFeatureEncoder, TypeDictEncoder
from zoo.nn.gated_attention import GATES, NORMALISERS
from zoo.nn.ltga_conv import MAX_DELTA
from zoo.nn.gps_layer import GPSLayer
from zoo.nn.positional_encoders import LapPEDeepSet, RWSEEncoder, SignNetLapPE

PE_PARTS = ("lap", "rwse")
LAP_ENCODERS = ("signnet", "deepset")
POOLS = {"mean": AvgPooling, "sum": SumPooling}
GATED = tuple(gate for gate in GATES if gate != "none")
Types = Annotated[int, AtLeast(0)]  # size of a type dictionary; 0 = OGB features


def _parse_pe(pe: str) -> tuple[str, ...]:
    """``"lap+rwse"`` -> ``("lap", "rwse")``; ``"none"`` -> ``()``."""
    parts = () if pe == "none" else tuple(pe.split("+"))
    unknown = [p for p in parts if p not in PE_PARTS]
    if unknown or len(set(parts)) != len(parts):
        raise ValueError(f"pe must be 'none' or '+'-joined parts of {PE_PARTS} without repeats, got {pe!r}")
    return parts


@register_model("gps")
class GPS(HasPositionalEncodings, HasGPSLayers, HasHead, nn.Module):
    """GraphGPS for graph property prediction, without a gate (see module docstring).

    ``forward(g) -> [B, num_outputs]`` for a batch ``g`` of ``B`` graphs. ``pe`` is ``"lap+rwse"``,
    ``"lap"``, ``"rwse"`` or ``"none"``; each enabled encoding is ``dim_pe`` wide and the atom
    embedding takes the rest of ``dim``. ``lap_encoder`` is ``"signnet"`` (reads ``lap_eigvec``)
    or ``"deepset"`` (``lap_eigvec`` and ``lap_eigval``). ``atom_types``/``bond_types`` > 0
    switch from the OGB encoders to type dictionaries (canonical ZINC: 28 and 4);
    ``atom_features``/``bond_features`` > 0, which a trainer fills from the data's featurizer
    (dgllife's: 74 and 12), to a linear layer on float feature vectors. ``ffn_ratio``
    is an integer, as :class:`GPSLayer` takes it; ``ffn_dim`` > 0 sets the FFN width directly
    (e.g. to match a gated model's parameter count); ``ffn_activation`` is ``"relu"`` (default,
    GraphGPS's) or ``"gelu"`` (the SigGate-GT paper's, Section 6.2). The head has ``head_layers``
    Linear layers, ``dim`` wide with ReLU between them. ``dim`` must be a multiple of ``heads``.

    >>> from zoo.models import create_model
    >>> model = create_model("gps", num_outputs=1, atom_types=28, bond_types=4)
    >>> model.pe_spec(), sum(p.numel() for p in model.parameters())
    ({'lap_k': 8, 'rwse_k': 20}, 570957)
    """

    def __init__(self, num_outputs: Count = 1, dim: Count = 64, heads: Count = 8, layers: Count = 10,
                 local: str = "gatedgcn", dropout: DropoutRate = 0.0, attn_dropout: DropoutRate = 0.5,
                 norm: str = "batch", pool: str = "mean", pe: str = "lap+rwse", lap_k: Count = 8,
                 lap_encoder: str = "signnet", dim_pe: Count = 16, rwse_k: Count = 20, atom_types: Types = 0,
                 bond_types: Types = 0, ffn_ratio: Count = 2, head_layers: Count = 2,
                 ffn_dim: Annotated[int, AtLeast(0)] = 0, atom_features: Annotated[int, AtLeast(0)] = 0,
                 bond_features: Annotated[int, AtLeast(0)] = 0, ffn_activation: str = "relu"):
        super().__init__()
        if local == "ltga" and not isinstance(self, HasIndexParameters):
            raise ValueError("local='ltga' learns q, which needs its own optimiser and warm-up: build the model "
                             "'sparsegate_gt' (gate='none' for no gate)")
        parts = _parse_pe(pe)
        if lap_encoder not in LAP_ENCODERS:
            raise ValueError(f"lap_encoder must be one of {LAP_ENCODERS}, got {lap_encoder!r}")
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {tuple(POOLS)}, got {pool!r}")
        self.pe, self.lap_k, self.rwse_k, self.lap_encoder = pe, lap_k, rwse_k, lap_encoder

        lap_pe = None
        if "lap" in parts:
            lap_pe = SignNetLapPE(dim_pe) if lap_encoder == "signnet" else LapPEDeepSet(dim_pe)
        rwse = RWSEEncoder(rwse_k, dim_pe) if "rwse" in parts else None
        self.node_encoder = NodeFeatureEncoder(dim, atom_types=atom_types or None, lap_pe=lap_pe, rwse=rwse,
                                               atom_features=atom_features or None)
        if bond_types and bond_features:
            raise ValueError(f"bond_types={bond_types} and bond_features={bond_features} both given; "
                             "the bonds have one layout")
        self.edge_encoder = None
        if local != "none":
            self.edge_encoder = (LinearFeatureEncoder(bond_features, dim) if bond_features
                                 else TypeDictEncoder(bond_types, dim) if bond_types else BondEncoder(dim))
        self.blocks = nn.ModuleList(
            GPSLayer(dim, heads, local=local, dropout=dropout, attn_dropout=attn_dropout, norm=norm,
                     ffn_ratio=ffn_ratio, ffn_dim=ffn_dim, ffn_activation=ffn_activation, **self._gate_options())
            for _ in range(layers)
        )
        self.pool = POOLS[pool]()
        head: list[nn.Module] = []
        for _ in range(head_layers - 1):
            head += [nn.Linear(dim, dim), nn.ReLU()]
        self.head = nn.Sequential(*head, nn.Linear(dim, num_outputs))

    def _gate_options(self) -> dict:
        """The gate arguments of every :class:`GPSLayer`: none here."""
        return {"gate": "none"}

    def pe_spec(self) -> dict:
        """The encodings ``forward`` reads, as a PE spec for ``add_positional_encodings``.

        >>> GPS(pe="rwse", rwse_k=16).pe_spec()
        {'rwse_k': 16}
        """
        parts = _parse_pe(self.pe)
        return {**({"lap_k": self.lap_k} if "lap" in parts else {}),
                **({"rwse_k": self.rwse_k} if "rwse" in parts else {})}

    def reset_head(self, num_outputs: int) -> None:
        """Replace the last Linear of the head by a fresh one with ``num_outputs`` outputs (fine-tuning)."""
        if num_outputs < 1:
            raise ValueError(f"num_outputs must be >= 1, got {num_outputs}")
        last = self.head[-1]
        self.head[-1] = nn.Linear(last.in_features, num_outputs).to(last.weight.device, last.weight.dtype)

    def gps_layers(self) -> list[GPSLayer]:
        """Every GPS layer, input first (``layer.attn`` is its global attention)."""
        return list(self.blocks)

    def _node_tensor(self, g, key: str, width: int) -> torch.Tensor:
        """``g.ndata[key]`` ``[N, width]`` in the model's float type, or an error saying how to make it."""
        if key not in g.ndata:
            raise KeyError(
                f"g.ndata[{key!r}] is missing: pe={self.pe!r} needs it with {width} columns. Compute it with "
                f"zoo.data.positional.add_positional_encodings(graphs, model.pe_spec()) before batching."
            )
        x = g.ndata[key]
        if x.dim() != 2 or x.shape[1] != width:
            raise ValueError(
                f"g.ndata[{key!r}] has shape {tuple(x.shape)} but the model needs [N, {width}]; recompute the "
                f"encodings with add_positional_encodings(graphs, model.pe_spec()) = {self.pe_spec()}"
            )
        return x.to(self.head[-1].weight.dtype)

    def forward(self, g: dgl.DGLGraph) -> torch.Tensor:
        spec, pe = self.pe_spec(), {}
        if "lap_k" in spec:
            pe["lap_eigvec"] = self._node_tensor(g, "lap_eigvec", self.lap_k)
            if self.lap_encoder == "deepset":
                pe["lap_eigval"] = self._node_tensor(g, "lap_eigval", self.lap_k)
        if "rwse_k" in spec:
            pe["rwse"] = self._node_tensor(g, "rwse", self.rwse_k)
        h = self.node_encoder(g, g.ndata["feat"], **pe)
        e = self.edge_encoder(g.edata["feat"]) if self.edge_encoder is not None else None
        for block in self.blocks:
            h, e = block(g, h, e)
        return self.head(self.pool(g, h))


@register_model("siggate_gt")
class SigGateGT(GPS):
    """SigGate-GT: :class:`GPS` whose global attention is gated (``gate``: ``output`` (G1),
    ``value`` (G2) or ``logit`` (G3); see :class:`zoo.nn.GatedMultiheadAttention`). Every other
    keyword is a :class:`GPS` argument.

    >>> from zoo.models import create_model
    >>> model = create_model("siggate_gt", num_outputs=1, gate="output", heads=8)
    >>> sum(p.numel() for p in model.parameters())  # GPS's 570,957 and the gates' weights
    617805
    """

    def __init__(self, num_outputs: Count = 1, *, gate: str = "output", gate_per_head: bool = True,
                 gate_activation: str = "sigmoid", gate_bias_init: float = 0.5, gate_weight_init: str = "zeros",
                 **gps_arguments):
        if gate not in GATED:
            raise ValueError(f"gate must be one of {GATED}, got {gate!r}; the ungated model is registered as 'gps'")
        # read by GPS.__init__ through _gate_options while it builds the layers
        self._gate = dict(gate=gate, gate_per_head=gate_per_head, gate_activation=gate_activation,
                          gate_bias_init=gate_bias_init, gate_weight_init=gate_weight_init)
        super().__init__(num_outputs, **gps_arguments)

    def _gate_options(self) -> dict:
        return self._gate


@register_model("sparsegate_gt")
class SparseGateGT(HasIndexParameters, GPS):
    """A global attention that can prune and abstain (issue 18): :class:`GPS` whose global attention
    normalises with ``normaliser`` (``qsoftmax``, ``entmax``, ``sparsemax`` or ``softmax``; see
    :class:`zoo.nn.GatedMultiheadAttention`) and carries an optional SigGate-GT ``gate`` (``none``,
    ``output``, ``value``, ``logit``). ``local="ltga"`` makes the local branch LTGA message passing
    (:class:`zoo.nn.GPSLayer`), whose q follows ``local_q_mode``. Learned q (``q_mode`` ``layer`` or
    ``head``, ``q = 1 + delta tanh(a)``) and learned entmax alpha (``alpha_mode``) are
    :meth:`index_parameters`: the graph trainer gives them LTGA's own Adam, warm-up and Shannon
    prior (``optim.q_lr``, ``q_warmup``, ``q_prior``). Every other keyword is a :class:`GPS` argument.

    >>> from zoo.models import create_model
    >>> model = create_model("sparsegate_gt", num_outputs=1, normaliser="qsoftmax", gate="output")
    >>> len(list(model.index_parameters()))  # one learned q per head, in each of the 10 layers
    10
    """

    def __init__(self, num_outputs: Count = 1, *, normaliser: str = "qsoftmax", q_mode: str = "head",
                 q: Annotated[float, Interval(0, low_open=True)] = 1.0,
                 delta: Annotated[float, Interval(0, MAX_DELTA, low_open=True)] = 1.0,
                 alpha: Annotated[float, AtLeast(1)] = 1.5, alpha_mode: str = "fixed", local_q_mode: str = "head",
                 gate: str = "output", gate_per_head: bool = True, gate_activation: str = "sigmoid",
                 gate_bias_init: float = 0.5, gate_weight_init: str = "zeros", **gps_arguments):
        if normaliser not in NORMALISERS:
            raise ValueError(f"normaliser must be one of {NORMALISERS}, got {normaliser!r}")
        if gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {gate!r}")
        # read by GPS.__init__ through _gate_options while it builds the layers
        self._options = dict(gate=gate, gate_per_head=gate_per_head, gate_activation=gate_activation,
                             gate_bias_init=gate_bias_init, gate_weight_init=gate_weight_init, normaliser=normaliser,
                             q_mode=q_mode, q=q, delta=delta, alpha=alpha, alpha_mode=alpha_mode,
                             local_q_mode=local_q_mode)
        super().__init__(num_outputs, **gps_arguments)

    def _gate_options(self) -> dict:
        return self._options

    def index_parameters(self) -> list[nn.Parameter]:
        """The learned q (and alpha) of every layer, input first, for their own optimiser."""
        return [p for block in self.blocks for p in block.index_parameters()]

    def q_values(self) -> list[torch.Tensor]:
        """The learned q of the last forward, layer by layer (the global attention's, then the LTGA
        branch's), with their graph for the Shannon prior."""
        return [q for block in self.blocks for q in block.q_values()]
