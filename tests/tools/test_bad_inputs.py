"""The bad-input corpus: every case exits 2 (or raises the library's error) with one line that
names the bad value, prints no traceback, and leaves no run folder behind.

Each case is (tool, argv, text the message must contain). ``{runs}`` is an output folder that
must not exist afterwards (the ``--out`` of every case whose argv names none); ``{tmp}`` a scratch
folder holding ``FILES``; ``{root}`` the checkout.
"""
import dgl
import pytest
import torch

from tests.tools.tool_loader import ROOT, load_tool
from zoo.ops import ZooOpError, edge_entmax, edge_qsoftmax, edge_sparsemax, edge_weighted_sum

GAT = "{root}/recipes/cora_gat.yaml"
ZINC = "{root}/recipes/zinc_siggate.yaml"
PREDICT = ["--model", "zinc_siggate", "--quiet", "--data"]  # then the CSV
FINETUNE = ["--pretrained", "zinc_siggate", "--quiet", "--epochs", "1", "--target-cols", "y", "--data"]

CLI_CASES = [
    # train: the recipe file
    ("train", ["{tmp}/missing.yaml"], "recipe file not found: {tmp}/missing.yaml"),
    ("train", ["{tmp}"], "is a folder; give a recipe file"),
    ("train", ["{tmp}/broken.yaml"], "broken.yaml is not valid YAML: expected ',' or ']', but got '<stream end>' at line 3"),
    ("train", ["{tmp}/typo.yaml"], "unknown key 'patiance' in optim; did you mean 'patience'"),
    ("train", ["{tmp}/cycle_a.yaml"], "recipe bases form a cycle"),
    # sh, not bash: the OS refuses the name (too long) and the message says why it came through unexpanded
    ("train", ["{tmp}/cora_{{" + ",".join(["gcn", "gat", "gatv2"] * 40) + "}}.yaml"],
     "cannot be read: File name too long; the shell did not expand its {{a,b}} braces: run it in bash"),
    ("train", ["{tmp}/named.yaml"], "a recipe's name is its file name"),
    # train: overrides
    ("train", [GAT, "--set", "model.heads=[1,"], "override 'model.heads=[1,': '[1,' is not a YAML value"),
    ("train", [GAT, "--set", "heads"], "must look like section.key=value"),
    ("train", [GAT, "--set", "model.head=4"], "unknown key 'head' in model (gat); did you mean 'heads'"),
    ("train", [GAT, "--set", "model.name=gta"], "unknown model 'gta'; did you mean 'gat'"),
    ("train", [GAT, "--set", "model.heads=many"], "model.heads must be int, got 'many'"),
    ("train", [GAT, "--set", "optim.lr=-0.01"], "optim.lr is -0.01; it must be > 0"),
    ("train", [GAT, "--set", "optim.lr=.nan"], "optim.lr is nan; it must be a finite number"),
    ("train", [GAT, "--set", "optim.weight_decay=-1"], "optim.weight_decay is -1.0; it must be >= 0"),
    ("train", [GAT, "--set", "optim.optimizer=sgd"], "optim.optimizer must be one of"),
    ("train", [GAT, "--set", "task=link_prediction"], "task 'link_prediction' is not supported"),
    ("train", [GAT, "--epochs", "0"], "optim.epochs is 0; it must be >= 1"),
    # train: seeds and device
    ("train", [GAT, "--seeds", "3-1,5"], "the range '3-1' is empty; write it low-high, e.g. 1-3"),
    ("train", [GAT, "--seeds", "5,5,5"], "names seed(s) [5] more than once"),
    ("train", [GAT, "--seeds", ""], "'' is not a seed or a range"),
    ("train", [GAT, "--seeds", "a-b"], "'a-b' is not a seed or a range"),
    ("train", [GAT, "--device", "tpu"], "device 'tpu' is not one of cpu, cuda"),
    # train: model arguments out of their declared range, and an unknown dataset card
    ("train", [GAT, "--set", "model.dropout=2.0"], "model.dropout is 2.0; it must be in [0, 1)"),
    ("train", [GAT, "--set", "model.heads=0"], "model.heads is 0; it must be >= 1"),
    ("train", [GAT, "--set", "dataset=coraa"], "No dataset card named 'coraa'"),
    # sweep
    ("sweep", [GAT, "{tmp}/missing.yaml"], "recipe file not found: {tmp}/missing.yaml"),
    ("sweep", [GAT, "--seeds", "2-0"], "the range '2-0' is empty"),
    ("sweep", [GAT, "--set", "optim.lr=inf"], "optim.lr is inf; it must be a finite number"),
    # tune
    ("tune", [GAT, "--tune-seeds", "1,1"], "names seed(s) [1] more than once"),
    ("tune", [GAT, "--seeds", ""], "'' is not a seed or a range"),
    ("tune", [GAT, "{tmp}"], "is a folder; give a recipe file"),
    # predict: the output, checked before inference
    ("predict", [*PREDICT, "{tmp}/mols.csv", "--out", "{tmp}"], "--out {tmp} is a folder; give the CSV file to write"),
    ("predict", [*PREDICT, "{tmp}/mols.csv", "--out", "{tmp}/broken.yaml/preds.csv"],
     "{tmp}/broken.yaml is a file, not a folder"),
    # predict: the CSV
    ("predict", [*PREDICT, "{tmp}/missing.csv"], "CSV file {tmp}/missing.csv does not exist"),
    ("predict", [*PREDICT, "{tmp}"], "{tmp} is a folder; give the path of a CSV file"),
    ("predict", [*PREDICT, "{tmp}/empty.csv"], "empty.csv is empty; expected a header row"),
    ("predict", [*PREDICT, "{tmp}/header_only.csv"], "header_only.csv has a header but no data rows"),
    ("predict", [*PREDICT, "{tmp}/mols.csv", "--smiles-col", "SMILES"], "column(s) ['SMILES'] not found"),
    ("predict", [*PREDICT, "{tmp}/two_smiles.csv"], "the header names column 'smiles' 2 times (columns [1, 3])"),
    ("predict", [*PREDICT, "{tmp}/extra_cell.csv"], "row 1 (line 3) has 3 cells but the header has 2 columns"),
    ("predict", [*PREDICT, "{tmp}/latin1.csv"], "cannot be read as a UTF-8 CSV"),
    ("predict", ["--model", "zinc_sigate", "--data", "{tmp}/mols.csv"], "Did you mean 'zinc_siggate'?"),
    # finetune: the CSV and its targets
    ("finetune", [*FINETUNE, "{tmp}/missing.csv"], "CSV file {tmp}/missing.csv does not exist"),
    ("finetune", [*FINETUNE, "{tmp}/empty.csv"], "empty.csv is empty; expected a header row"),
    ("finetune", [*FINETUNE, "{tmp}/header_only.csv"], "header_only.csv has a header but no data rows"),
    ("finetune", [*FINETUNE, "{tmp}/mols.csv", "--smiles-col", "SMILES"], "column(s) ['SMILES'] not found"),
    ("finetune", [*FINETUNE[:-3], "--target-cols", "logS", "--data", "{tmp}/mols.csv"], "column(s) ['logS'] not found"),
    ("finetune", [*FINETUNE[:-3], "--target-cols", "y,y", "--data", "{tmp}/mols.csv"], "names ['y'] more than once"),
    ("finetune", [*FINETUNE, "{tmp}/two_y.csv"], "the header names column 'y' 2 times (columns [2, 3])"),
    ("finetune", [*FINETUNE, "{tmp}/extra_cell.csv"], "row 1 (line 3) has 3 cells but the header has 2 columns"),
    ("finetune", [*FINETUNE, "{tmp}/inf.csv"], "line 4: target column 'y' holds 'inf', which is not a finite number"),
    ("finetune", [*FINETUNE, "{tmp}/no_labels.csv"], "target column 'y' of {tmp}/no_labels.csv holds no number"),
    ("finetune", [*FINETUNE, "{tmp}/words.csv"], "line 3: target column 'y' holds 'high', which is not a number"),
    ("finetune", [*FINETUNE, "{tmp}/mols.csv", "--task", "classification"], "column 'y' holds 0.5"),
    ("finetune", [*FINETUNE, "{tmp}/mols.csv", "--epochs", "0"], "epochs must be an int >= 1, got 0"),
    ("finetune", [*FINETUNE, "{tmp}/mols.csv", "--seeds", "2-1"], "the range '2-1' is empty"),
    ("finetune", [*FINETUNE, "{tmp}/mols.csv", "--lr", "-1"], "lr must be > 0, got -1.0"),
]

EXPORT = ["--name", "tiny"]
CLI_CASES += [
    # export_pretrained: the run folder and the name
    ("export_pretrained", ["{tmp}/nope", *EXPORT], "run folder {tmp}/nope does not exist"),
    ("export_pretrained", ["{tmp}", *EXPORT], "has no metrics.json, so its run is unfinished"),
    ("export_pretrained", ["{tmp}/run/seed0", *EXPORT], "checkpoint {tmp}/run/seed0/best.pt cannot be read"),
    ("export_pretrained", ["{tmp}/run/seed0", "--name", "../evil"], "name '../evil' must be a file stem"),
]

FILES = {
    "run/seed0/metrics.json": "{{}}",
    "run/seed0/best.pt": "not a checkpoint",
    "broken.yaml": "dataset: cora\nmodel: [unclosed\n",
    "typo.yaml": "base: {root}/recipes/_base/attention_node.yaml\ndataset: cora\nmodel: {{name: gat}}\n"
                 "optim: {{patiance: 3}}\n",
    "cycle_a.yaml": "base: cycle_b.yaml\ndataset: cora\nmodel: {{name: gat}}\n",
    "cycle_b.yaml": "base: cycle_a.yaml\n",
    "named.yaml": "dataset: cora\nmodel: {{name: gat}}\nname: other\n",
    "mols.csv": "smiles,y\n" + "".join(f"{s},{i / 2}\n" for i, s in enumerate(["CCO", "CC", "CCC", "CCN", "CCCl",
                                                                                "OCCO", "c1ccccc1", "CC(=O)O"])),
    "empty.csv": "",
    "header_only.csv": "smiles,y\n",
    "two_smiles.csv": "smiles,y,smiles\nCCO,1,CC\nCC,2,CCO\n",
    "two_y.csv": "smiles,y,y\nCCO,1,2\nCC,2,3\nCCC,3,4\n",
    "extra_cell.csv": "smiles,y\nCCO,1\nCC,2,9\nCCC,3\n",
    "inf.csv": "smiles,y\nCCO,1\nCC,2\nCCC,inf\nCCN,4\n",
    "no_labels.csv": "smiles,y\n" + "".join(f"{s},nan\n" for s in ["CCO", "CC", "CCC", "CCN", "CCCl", "OCCO"]),
    "words.csv": "smiles,y\nCCO,1\nCC,high\nCCC,3\n",
}
BYTES = {"latin1.csv": "smiles,name\nCCO,caf\xe9\n".encode("latin-1")}


def _fill(text, tmp, runs):
    return text.format(root=ROOT, tmp=tmp, runs=runs)


@pytest.mark.parametrize("tool, argv, message", CLI_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CLI_CASES)])
def test_cli_refuses_with_one_line(tool, argv, message, tmp_path, capsys, offline_env):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(_fill(text, tmp_path, None))
    for name, data in BYTES.items():
        (tmp_path / name).write_bytes(data)
    runs = tmp_path / "runs"
    args = [_fill(a, tmp_path, runs) for a in argv] + ([] if "--out" in argv else ["--out", str(runs)])
    try:
        code = load_tool(tool).main(args)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert _fill(message, tmp_path, runs) in lines[0]
    assert not runs.exists(), f"{tool} left {sorted(p.name for p in runs.rglob('*'))} behind"


GRAPH = dgl.graph(([0, 1, 2, 2], [1, 2, 0, 1]))
HETERO = dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])})
Z = torch.randn(4, 2)

OP_CASES = [
    (lambda: edge_qsoftmax(GRAPH, Z.half(), 1.5), "logits is float16 on the CPU"),
    (lambda: edge_entmax(GRAPH, Z.half(), 1.5), "logits is float16 on the CPU"),
    (lambda: edge_sparsemax(GRAPH, torch.arange(4)), "must be a floating-point tensor, got torch.int64"),
    (lambda: edge_qsoftmax(GRAPH, torch.randn(5), 1.5), "has shape [5] but the graph has 4 edges"),
    (lambda: edge_qsoftmax(GRAPH, Z, torch.ones(3)), "q has shape [3], which does not fit logits of shape [4, 2]"),
    (lambda: edge_qsoftmax(GRAPH, Z, "two"), "q must be a float or a tensor, got 'two'"),
    (lambda: edge_qsoftmax(GRAPH, Z, float("nan")), "q must be finite"),
    (lambda: edge_entmax(GRAPH, Z, 0.5), "alpha must be finite and >= 1"),
    (lambda: edge_sparsemax(HETERO, torch.randn(1)), "only graphs with one edge type are supported"),
    (lambda: edge_qsoftmax(GRAPH, torch.tensor([0.0, float("nan"), 1.0, 2.0]), 1.5), "contain NaN or +inf"),
    (lambda: edge_weighted_sum(GRAPH, torch.rand(5, 1), torch.rand(3, 1, 4)), "weights has shape [5, 1]; expected [4, H]"),
    (lambda: edge_weighted_sum(GRAPH, torch.rand(4, 1).half(), torch.rand(3, 1, 4).half()), "weights is float16 on the CPU"),
]


@pytest.mark.parametrize("call, message", OP_CASES, ids=[f"ops-{i}" for i in range(len(OP_CASES))])
def test_ops_refuse_with_one_line(call, message):
    with pytest.raises(ZooOpError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and message in text, text
