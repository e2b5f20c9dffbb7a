"""SigGate-GT mechanism diagnostics per layer of a trained GPS model, over every graph of a loader
(the trainer passes the test set, as the paper's Tables 13 and 15 average over it):

* gate (Table 15): mean, sd (population), share below 0.1 and above 0.9 over every (node, head,
  gate unit) value, per head as well, with the count so that layers pool exactly;
* attention entropy (Table 13): ``-sum_j a_ij log a_ij`` of each query node's row over its graph's
  nodes (nats), averaged over query nodes, overall and per head;
* MAD (Table 12; :mod:`zoo.analysis.oversmoothing`, Chen et al. 2020) of the layer's input
  (``mad_in``) and output (``mad``) node representations; the last layer's output is what the
  readout pools;
* exact zeros (issue 18's sparse global attention): the share of (real query, real key) weights
  that are exactly 0, overall and per head (padded keys, always 0, are not counted), and the
  layer's index per head, learned or fixed (``q`` of a q-softmax, ``alpha`` of an entmax; absent for
  softmax and sparsemax, which have none);
* stable rank (Section 5.1, Eq. 5; the definition of Tables 1-2) ``||Y||_F^2 / ||Y||_2^2`` of each
  head's output ``Y`` [n, d_k] on each graph, averaged over (graph, head) pairs, before
  (``stable_rank_ungated``) and after (``stable_rank``) the output gate. For the gates before the
  softmax or on the values (G2, G3) and for ungated models the two are the same matrix.
"""
from __future__ import annotations

import dgl
import torch

from zoo._progress import progress as show_progress
from zoo.analysis.oversmoothing import MeanAverageDistance

NEAR_ZERO, NEAR_ONE = 0.1, 0.9
"""The paper's Table 15 thresholds of a near-zero and a near-one gate."""


def stable_rank(x: torch.Tensor) -> float:
    """``||X||_F^2 / sigma_max(X)^2`` of a matrix (0 for a zero matrix).

    >>> stable_rank(torch.eye(3))
    3.0
    """
    top = torch.linalg.matrix_norm(x.double(), ord=2)
    return float(x.double().pow(2).sum() / top**2) if top > 0 else 0.0


def graph_stable_ranks(heads: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stable rank of every graph's and head's output: ``heads`` [B, H, L', d_k] (a padded block at
    least ``L`` rows long), ``mask`` [B, L] True at real nodes -> [B, H] in float64, NaN where the
    matrix is zero (a dead gate: no rank to speak of).

    >>> y = torch.zeros(1, 1, 3, 2); y[0, 0, 0, 0] = 2.0; y[0, 0, 1, 1] = 1.0
    >>> graph_stable_ranks(y, torch.tensor([[True, True, False]])).tolist()
    [[1.25]]
    """
    rows = mask.shape[1]
    x = heads[:, :, :rows].double() * mask[:, None, :, None]
    gram = x.transpose(-2, -1) @ x  # [B, H, d_k, d_k]: ||X||_F^2 its trace, ||X||_2^2 its largest eigenvalue
    top = torch.linalg.eigvalsh(gram)[..., -1]
    frobenius = gram.diagonal(dim1=-2, dim2=-1).sum(-1)
    return torch.where(frobenius > 0, frobenius / top.clamp_min(1e-300), torch.full_like(top, torch.nan))


class _LayerRecord:
    """Running sums of one layer's diagnostics over batches."""

    def __init__(self, heads: int):
        zeros = lambda: torch.zeros(heads, dtype=torch.float64)  # noqa: E731
        self.entropy, self.queries = zeros(), 0
        self.zeros, self.pairs = zeros(), 0
        self.gate_sum, self.gate_squares, self.below, self.above, self.gate_count = zeros(), zeros(), zeros(), zeros(), 0
        self.rank = {"stable_rank": [0.0, 0], "stable_rank_ungated": [0.0, 0]}
        self.mad_in, self.mad_out = MeanAverageDistance(), MeanAverageDistance()

    def add_attention(self, module) -> None:
        mask = module.last_mask  # [B, L]
        weights = module.last_attn  # [B, H, L, L]; 0 log 0 = 0, rows pooled in float64
        plogp = weights * weights.clamp_min(torch.finfo(weights.dtype).tiny).log()
        self.entropy += -plogp.sum(-1).transpose(1, 2)[mask].sum(0, dtype=torch.float64)  # real query rows, per head
        self.queries += int(mask.sum())
        real = mask[:, None, :, None] & mask[:, None, None, :]  # [B, 1, L, L] real (query, key) pairs
        self.zeros += ((weights == 0) & real).sum((0, 2, 3), dtype=torch.float64)
        self.pairs += int((mask.sum(1) ** 2).sum())
        for key, heads in (("stable_rank", module.last_heads), ("stable_rank_ungated", module.last_heads_ungated)):
            ranks = graph_stable_ranks(heads, mask)
            defined = ~torch.isnan(ranks)
            self.rank[key][0] += float(ranks[defined].sum())
            self.rank[key][1] += int(defined.sum())
        if module.last_gate is not None:
            gate = module.last_gate.double().transpose(0, 1).reshape(module.last_gate.shape[1], -1)  # [H, N * G]
            self.gate_sum += gate.sum(1)
            self.gate_squares += gate.pow(2).sum(1)
            self.below += (gate < NEAR_ZERO).sum(1)
            self.above += (gate > NEAR_ONE).sum(1)
            self.gate_count += gate.shape[1]

    def row(self, layer: int) -> dict:
        row = {"layer": layer, "attention_entropy": float(self.entropy.sum() / (self.queries * len(self.entropy))),
               "attention_entropy_per_head": (self.entropy / self.queries).tolist(),
               "attention_zeros": float(self.zeros.sum() / (self.pairs * len(self.zeros))),
               "attention_zeros_per_head": (self.zeros / self.pairs).tolist(),
               "mad_in": self.mad_in.value(), "mad": self.mad_out.value()}
        row.update({key: total / count if count else float("nan") for key, (total, count) in self.rank.items()})
        if self.gate_count:
            count = self.gate_count * len(self.gate_sum)
            mean = float(self.gate_sum.sum() / count)
            row.update({"gate_mean": mean, "gate_sd": max(float(self.gate_squares.sum() / count) - mean**2, 0.0) ** 0.5,
                        "gate_below_0.1": float(self.below.sum() / count), "gate_above_0.9": float(self.above.sum() / count),
                        "gate_count": count, "gate_mean_per_head": (self.gate_sum / self.gate_count).tolist(),
                        "gate_below_0.1_per_head": (self.below / self.gate_count).tolist(),
                        "gate_above_0.9_per_head": (self.above / self.gate_count).tolist()})
        return row


def _forget(attn) -> None:
    """Drop what a :class:`zoo.nn.GatedMultiheadAttention` recorded of its last call."""
    attn.last_attn = attn.last_mask = attn.last_gate = attn.last_heads = attn.last_heads_ungated = None


def gate_diagnostics(model, loader, max_batches: int | None = None, progress: str | None = None) -> list[dict]:
    """Per-layer diagnostics (see the module docstring) of a GPS model (a
    :class:`zoo.models.HasGPSLayers`) over the graphs of the batches ``(graphs, targets)`` of
    ``loader`` (the first ``max_batches`` only, if given; regrouped by size, :func:`_by_size`), in
    eval mode; each row also says how many ``graphs`` it covers. With a ``progress`` label, the
    graphs done are shown under it (:mod:`zoo._progress`: a bar, or a line a minute in a log).

    >>> from zoo.data import load_graph_dataset, make_dataloaders
    >>> from zoo.models.registry import create_model
    >>> data = load_graph_dataset("zinc_smiles", limit=64, pe={"rwse_k": 16}, progress=False)
    >>> model = create_model("siggate_gt", num_outputs=1, dim=64, heads=4, layers=2, pe="rwse", rwse_k=16)
    >>> rows = gate_diagnostics(model, make_dataloaders(data, batch_size=32)["train"])
    >>> [(row["layer"], round(row["gate_mean"], 3), round(row["gate_sd"], 3), row["graphs"]) for row in rows]
    [(0, 0.622, 0.0, 64), (1, 0.622, 0.0, 64)]

    Untrained, the gate's weights are zero, so every node and head gets sigmoid(0.5) = 0.6225.
    """
    layers = model.gps_layers()
    records = [_LayerRecord(layer.attn.heads) for layer in layers]

    def before(module, args):  # the first layer's input; each later layer's is the previous output
        records[0].mad_in.add(args[1], args[0].batch_num_nodes())

    def after(i):
        def hook(module, args, out):
            records[i].mad_out.add(out[0], args[0].batch_num_nodes())
            records[i].add_attention(module.attn)
            _forget(module.attn)  # one layer's [B, H, L, L] weights alive at a time (Peptides: ~0.2 GB each)
        return hook

    hooks = [layers[0].register_forward_pre_hook(before)]
    hooks += [layer.register_forward_hook(after(i)) for i, layer in enumerate(layers)]
    for layer in layers:
        layer.attn.record = True
    graphs_seen = 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            chunks = _by_size(loader, max_batches)
            for chunk in show_progress(chunks, progress or "", sum(map(len, chunks)), enabled=progress is not None,
                                       unit="graphs", size=len):
                model(dgl.batch(chunk))
                graphs_seen += len(chunk)
    finally:
        for hook in hooks:
            hook.remove()
        for layer in layers:
            layer.attn.record = False
            _forget(layer.attn)
        model.train(was_training)
    for previous, record in zip(records, records[1:]):
        record.mad_in = previous.mad_out
    return [{**record.row(i), **learned_index(layer.attn), "graphs": graphs_seen}
            for i, (record, layer) in enumerate(zip(records, layers))]


def _by_size(loader, max_batches: int | None) -> list[list[dgl.DGLGraph]]:
    """The graphs of ``loader``'s batches (the first ``max_batches``) in order of size, in chunks of
    as many as the loader's first batch, each chunk to be batched. In eval mode a GPS model treats
    each graph on its own, so this changes no graph's values; it only shrinks the padding of the
    recorded ``[B, H, L, L]`` blocks, which the largest graph of a batch sets (on Peptides-func's
    10-444 nodes most of a loader batch's block is padding)."""
    graphs, batch_size = [], None
    for index, (batch, _) in enumerate(loader):
        if index == max_batches:
            break
        batch_size = batch_size or batch.batch_size
        graphs.extend(dgl.unbatch(batch))
    graphs.sort(key=lambda graph: graph.num_nodes())
    return [graphs[start:start + batch_size] for start in range(0, len(graphs), batch_size or 1)]


def learned_index(attn) -> dict[str, list[float]]:
    """``{"q": [...]}`` (q-softmax) or ``{"alpha": [...]}`` (entmax), one value per head, of a
    :class:`zoo.nn.GatedMultiheadAttention`; ``{}`` for softmax and sparsemax.

    >>> from zoo.nn import GatedMultiheadAttention
    >>> learned_index(GatedMultiheadAttention(8, 2, normaliser="qsoftmax", q_mode="head"))
    {'q': [1.0, 1.0]}
    """
    name = {"qsoftmax": "q", "entmax": "alpha"}.get(attn.normaliser)
    if name is None:
        return {}
    with torch.no_grad():
        value = torch.as_tensor(attn.current_q() if name == "q" else attn.current_alpha(), dtype=torch.float64)
    return {name: value.expand(attn.heads).tolist()}
