"""Shared constants of the transfer tests: the tiny model, its recipe, molecules, a CSV writer."""

MODEL_ARGS = {"num_outputs": 1, "dim": 16, "heads": 2, "layers": 1, "pe": "rwse", "rwse_k": 4, "dim_pe": 4,
              "local": "gine"}
RECIPE = {"dataset": "zinc_smiles", "name": "tiny", "task": "graph_regression",
          "model": {"name": "siggate_gt", **{k: v for k, v in MODEL_ARGS.items() if k != "num_outputs"}},
          "optim": {"optimizer": "adamw", "lr": 3e-3, "epochs": 100, "batch_size": 8, "scheduler": "cosine",
                    "warmup_epochs": 10}}
SMILES = ["C", "CC", "CCC", "CCCC", "CCO", "CCN", "CCCl", "OCCO", "c1ccccc1", "Cc1ccccc1", "CC(=O)O", "CCOC",
          "CCCCC", "CCCCO", "NCCN", "C1CC1", "C1CCC1", "C1CCCC1", "C1CCCCC1", "CC(C)C", "CC(C)O", "OC(=O)CC",
          "c1ccncc1", "Oc1ccccc1", "CCCCCC", "CCS", "CSC", "CC#N", "C=CC", "C=CCC"]


def write_csv(path, header, rows):
    """A CSV with ``header`` and ``rows`` (lists of cells); returns the path."""
    path.write_text("\n".join(",".join(str(c) for c in row) for row in [header, *rows]) + "\n")
    return path
