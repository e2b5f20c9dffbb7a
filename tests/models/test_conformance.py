"""Every registered model, built from its defaults plus the data's arguments: forward and backward
on a tiny input of its task, a finite gradient for every trainable parameter (or a stated reason
why not), and a save/load round trip with identical outputs. A newly registered model is picked
up by ``list_models()`` with no edit here."""
import dgl
import pytest
import torch
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims

from zoo.data.positional import add_positional_encodings
from zoo.models import HasGPSLayers, HasPositionalEncodings, create_model, list_models, load_pretrained, save_pretrained
from zoo.models.registry import data_arguments

DATA = {"in_feats": 7, "num_classes": 3, "num_outputs": 2}  # a node classifier's, a graph model's


def _node_input(generator):
    """A random graph of 15 nodes with self-loops and features."""
    src, dst = torch.randint(0, 15, (2, 40), generator=generator)
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=15)))
    return graph, torch.randn(15, DATA["in_feats"], generator=generator)


def _molecules(model, generator, count=3):
    """``count`` random connected molecules (5 to 9 atoms) with OGB features and the model's encodings."""
    graphs = []
    for atoms in torch.randint(5, 10, (count,), generator=generator).tolist():
        chain = torch.arange(atoms - 1)
        ring = torch.randint(0, atoms, (2, 2), generator=generator)
        graph = dgl.to_simple(dgl.to_bidirected(dgl.graph((torch.cat([chain, ring[0]]), torch.cat([chain + 1, ring[1]])),
                                                          num_nodes=atoms)))
        graph.ndata["feat"] = torch.stack([torch.randint(0, d, (atoms,), generator=generator)
                                           for d in get_atom_feature_dims()], 1)
        graph.edata["feat"] = torch.stack([torch.randint(0, d, (graph.num_edges(),), generator=generator)
                                           for d in get_bond_feature_dims()], 1)
        graphs.append(graph)
    if isinstance(model, HasPositionalEncodings):
        add_positional_encodings(graphs, model.pe_spec(), progress=False)
    return dgl.batch(graphs)


def _no_gradient_by_design(model) -> dict[str, str]:
    """Trainable parameters that get no gradient, each with the reason."""
    if not isinstance(model, HasGPSLayers) or model.gps_layers()[-1].local_type != "gatedgcn":
        return {}
    unused = {id(p) for p in model.gps_layers()[-1].local.bn_edge.parameters()}
    return {name: "nothing reads the edge features of the last GPS layer (GatedGCN's edge BatchNorm)"
            for name, p in model.named_parameters() if id(p) in unused}


def _data_arguments(name) -> dict:
    """The sizes a trainer would pass; other data arguments (e.g. featurizer widths) keep their defaults."""
    arguments = {key: DATA[key] for key in data_arguments(name) if key in DATA}
    assert set(arguments) in ({"in_feats", "num_classes"}, {"num_outputs"}), \
        f"{name}: data arguments {data_arguments(name)} are neither a node classifier's nor a graph model's"
    return arguments


@pytest.mark.parametrize("name", list_models())
def test_forward_backward_and_round_trip(name, tmp_path):
    torch.manual_seed(0)
    arguments = _data_arguments(name)
    model, node = create_model(name, **arguments), "in_feats" in arguments
    generator = torch.Generator().manual_seed(1)
    inputs = _node_input(generator) if node else (_molecules(model, generator),)
    out = model(*inputs)
    rows = inputs[0].num_nodes() if node else inputs[0].batch_size
    assert out.shape == (rows, DATA["num_classes"] if node else DATA["num_outputs"]) and torch.isfinite(out).all()
    (out * torch.randn(out.shape, generator=generator)).sum().backward()
    skipped = _no_gradient_by_design(model)
    for key, param in model.named_parameters():
        if key in skipped:
            assert param.grad is None, f"{key} has a gradient although {skipped[key]}"
        elif param.requires_grad:
            assert param.grad is not None and torch.isfinite(param.grad).all(), key

    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    path = save_pretrained(model, {"name": name, "architecture": name, "model_args": arguments},
                           tmp_path / f"{name}.safetensors")
    loaded = load_pretrained(path)
    assert type(loaded) is type(model) and not loaded.training
    with torch.no_grad():
        assert torch.equal(loaded(*inputs), expected)
        fresh = create_model(name, **arguments).eval()
        assert not torch.equal(fresh(*inputs), expected)  # the weights came from the file
