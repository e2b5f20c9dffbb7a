"""Fine-tune a pretrained checkpoint on a CSV of SMILES and targets, over seeds.

    python tools/finetune.py --pretrained zinc_siggate --data my.csv --smiles-col smiles --target-cols y1,y2
    python tools/finetune.py --pretrained model.safetensors --data my.csv --target-cols active --task classification \\
        --split scaffold --epochs 30 --seeds 0-4 --freeze-encoder --out runs/finetune_active

Writes <out>/seed<k>/ (run files and model.safetensors with its card model.json) and <out>/metrics.json,
and prints val/test metrics per seed and their mean +- sd. Empty target cells are missing labels.
The CSV is featurized by the featurizer the checkpoint's card names.

Exit codes: 0 done, 1 the data cannot give a result (too few valid molecules, a split without a
metric; with --strict an invalid SMILES), 2 bad input, one line naming it (an unknown checkpoint; a
CSV that is missing, unreadable, empty, has a row longer than its header, lacks or repeats a column,
or holds a target that is not a finite number; bad labels), 3 training diverged (a non-finite loss;
the message names the seed, epoch and batch: lower --lr), 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo._malloc import preload_jemalloc  # noqa: E402

if __name__ == "__main__":
    preload_jemalloc()  # before torch loads: the command again with jemalloc, where the system has it

from zoo.analysis import format_summary  # noqa: E402
from zoo.data import CsvError, DatasetError  # noqa: E402
from zoo.engine import RecipeError  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.divergence import TrainingDiverged  # noqa: E402
from zoo.engine.recipe import parse_seeds  # noqa: E402
from zoo.models import PretrainedError  # noqa: E402
from zoo.transfer import TransferError, finetune  # noqa: E402


def format_seeds(summary: dict) -> str:
    """One row per seed and split with each reported metric."""
    names = summary["metrics"]
    lines = [f"{'seed':>4}  {'split':<5}  " + "  ".join(f"{name:>8}" for name in names)]
    for seed, run in summary["per_seed"].items():
        for part in ("val", "test"):
            lines.append(f"{seed:>4}  {part:<5}  " + "  ".join(f"{run[part][name]:>8.4f}" for name in names))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", required=True,
                        help="a pretrained checkpoint name, or the path of its .safetensors or .json file")
    parser.add_argument("--data", required=True, help="CSV with a SMILES column and target columns")
    parser.add_argument("--smiles-col", default="smiles", help="SMILES column (default: smiles)")
    parser.add_argument("--target-cols", required=True, help="comma-separated target columns, e.g. y1,y2")
    parser.add_argument("--task", default="regression", choices=("regression", "classification"))
    parser.add_argument("--split", default="random", choices=("random", "scaffold"))
    parser.add_argument("--epochs", type=int, default=50, help="training epochs; the best val epoch is kept")
    parser.add_argument("--seeds", default="0", help="seeds, e.g. 0-4 or 0,3,5 (default: 0)")
    parser.add_argument("--freeze-encoder", action="store_true", help="train only the head")
    parser.add_argument("--from-scratch", action="store_true",
                        help="same architecture, fresh weights (the baseline for the pretrained start)")
    parser.add_argument("--lr", type=float, help="learning rate (default: the checkpoint's recipe)")
    parser.add_argument("--batch-size", type=int, help="batch size (default: the checkpoint's recipe)")
    parser.add_argument("--strict", action="store_true", help="invalid SMILES are an error instead of skipped")
    parser.add_argument("--out", default="runs/finetune", help="output folder (default: runs/finetune)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    keep_freed_memory()
    targets = [column.strip() for column in args.target_cols.split(",") if column.strip()]
    try:
        summary = finetune(args.pretrained, args.data, args.smiles_col, targets, task=args.task, split=args.split,
                           epochs=args.epochs, seeds=parse_seeds(args.seeds), freeze_encoder=args.freeze_encoder,
                           from_scratch=args.from_scratch, lr=args.lr, batch_size=args.batch_size, out=args.out,
                           strict=args.strict, progress=not args.quiet)
    except (TransferError, PretrainedError, RecipeError, CsvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except TrainingDiverged as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("\ninterrupted: finished seeds are in --out; rerunning the command trains every seed again",
              file=sys.stderr)
        return 130
    origin = summary["pretrained"]
    start = origin["name"] if isinstance(origin, dict) else origin
    names = summary["metrics"]
    table = {part: {name: summary["summary"][part][name] for name in names} for part in ("val", "test")}
    print(f"\n{args.task} on {args.data} ({', '.join(targets)}), start: {start}, written to {args.out}")
    print(format_seeds(summary))
    print(f"\nmean +- sd over {len(summary['seeds'])} seed(s)")
    print(format_summary(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
