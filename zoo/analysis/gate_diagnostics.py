"""SigGate-GT mechanism diagnostics per layer: gate statistics, attention entropy, mean average
distance (MAD) of node representations and stable rank of per-head outputs with and without
the gate.

* gate: mean, sd, share below 0.1 and above 0.9, overall and per head (over nodes and gate units);
* attention entropy: mean over (query node, head) of -sum_j a_ij log a_ij over its graph's nodes;
* MAD (Chen et al., AAAI 2020): mean cosine distance 1 - cos(h_i, h_j) over pairs i != j of
  nodes of the same graph, averaged over graphs, of the layer's output;
* stable rank ||X||_F^2 / ||X||_2^2 of each head's output matrix X [nodes, d_k], averaged over
  heads, before (``stable_rank_ungated``) and after (``stable_rank``) the output gate.
"""
from __future__ import annotations

import torch


def stable_rank(x: torch.Tensor) -> float:
    """``||X||_F^2 / sigma_max(X)^2`` of a matrix (0 for a zero matrix).

    >>> stable_rank(torch.eye(3))
    3.0
    """
    top = torch.linalg.matrix_norm(x.double(), ord=2)
    return float(x.double().pow(2).sum() / top**2) if top > 0 else 0.0


def mean_average_distance(h: torch.Tensor, sizes: torch.Tensor) -> float:
    """MAD of node representations ``h`` [N, D] of a batch with ``sizes`` nodes per graph."""
    values = []
    for part in torch.split(h.double(), sizes.tolist()):
        if len(part) < 2:
            continue
        unit = torch.nn.functional.normalize(part, dim=1)
        distance = 1 - unit @ unit.T
        values.append(float(distance.sum() / (len(part) * (len(part) - 1))))  # diagonal is 0
    return sum(values) / len(values) if values else 0.0


def _gate_stats(gate: torch.Tensor) -> dict:
    """``gate`` [N, H, G] -> overall and per-head summary."""
    flat = gate.double()
    stats = {"gate_mean": float(flat.mean()), "gate_sd": float(flat.std()) if flat.numel() > 1 else 0.0,
             "gate_below_0.1": float((flat < 0.1).double().mean()), "gate_above_0.9": float((flat > 0.9).double().mean())}
    per_head = flat.transpose(0, 1).reshape(flat.shape[1], -1)
    stats["gate_mean_per_head"] = per_head.mean(1).tolist()
    stats["gate_below_0.1_per_head"] = (per_head < 0.1).double().mean(1).tolist()
    stats["gate_above_0.9_per_head"] = (per_head > 0.9).double().mean(1).tolist()
    return stats


def gate_diagnostics(model, loader, max_batches: int = 8) -> list[dict]:
    """Per-layer diagnostics of a GPS model (a :class:`zoo.models.HasGPSLayers`) on up to
    ``max_batches`` batches ``(graphs, targets)`` of ``loader``, in eval mode."""
    layers = model.gps_layers()
    attention = [layer.attn for layer in layers]
    outputs: list[list[torch.Tensor]] = [[] for _ in attention]
    hooks = [layer.register_forward_hook(lambda mod, args, out, i=i: outputs[i].append(out[0].detach()))
             for i, layer in enumerate(layers)]
    collected = [{"gate": [], "entropy": [], "heads": [], "ungated": []} for _ in attention]
    sizes = []
    for module in attention:
        module.record = True
    model.eval()
    try:
        with torch.no_grad():
            for index, (graphs, _) in enumerate(loader):
                if index == max_batches:
                    break
                model(graphs)
                sizes.append(graphs.batch_num_nodes())
                for module, bucket in zip(attention, collected):
                    mask = module.last_mask
                    weights = module.last_attn.double()
                    plogp = torch.where(weights > 0, weights * weights.clamp_min(1e-300).log(), torch.zeros_like(weights))
                    bucket["entropy"].append(-plogp.sum(-1).transpose(1, 2)[mask])  # [nodes, H]
                    bucket["heads"].append(module.last_heads.transpose(1, 2)[mask])  # [nodes, H, d_k]
                    bucket["ungated"].append(module.last_heads_ungated.transpose(1, 2)[mask])
                    if module.last_gate is not None:
                        bucket["gate"].append(module.last_gate)
    finally:
        for hook in hooks:
            hook.remove()
        for module in attention:
            module.record = False
            module.last_attn = module.last_mask = module.last_gate = None
            module.last_heads = module.last_heads_ungated = None
    sizes = torch.cat(sizes)
    report = []
    for layer, bucket in enumerate(collected):
        heads, ungated = torch.cat(bucket["heads"]), torch.cat(bucket["ungated"])
        row = {"layer": layer, "attention_entropy": float(torch.cat(bucket["entropy"]).mean()),
               "mad": mean_average_distance(torch.cat(outputs[layer]), sizes),
               "stable_rank": sum(stable_rank(heads[:, h]) for h in range(heads.shape[1])) / heads.shape[1],
               "stable_rank_ungated": sum(stable_rank(ungated[:, h]) for h in range(ungated.shape[1])) / ungated.shape[1]}
        if bucket["gate"]:
            row.update(_gate_stats(torch.cat(bucket["gate"])))
        report.append(row)
    return report
