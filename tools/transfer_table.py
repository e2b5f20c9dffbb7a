"""Fine-tuned vs from scratch vs Morgan random forest on ESOL and FreeSolv (test RMSE over seeds).

    python tools/transfer_table.py --pretrained zinc_siggate --datasets esol,freesolv --seeds 0-4 --epochs 30

Writes runs/transfer/<dataset>/{finetuned,scratch}/seed<k>/ and runs/transfer/transfer_table.json,
and prints a markdown table. Exit codes: 0 done, 1 data error, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.data import DatasetError  # noqa: E402
from zoo.engine.recipe import RecipeError, parse_seeds  # noqa: E402
from zoo.models import PretrainedError  # noqa: E402
from zoo.transfer import TransferError  # noqa: E402
from zoo.transfer.transfer_table import format_transfer_table, transfer_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained", default="zinc_siggate", help="checkpoint name or path (default zinc_siggate)")
    parser.add_argument("--datasets", default="esol,freesolv", help="CSV dataset cards, comma-separated")
    parser.add_argument("--seeds", default="0-4", help="seeds (default 0-4)")
    parser.add_argument("--epochs", type=int, default=30, help="epochs for both networks (default 30)")
    parser.add_argument("--out", default="runs/transfer", help="output folder (default runs/transfer)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    try:
        rows = transfer_table(args.pretrained, [d.strip() for d in args.datasets.split(",") if d.strip()],
                              seeds=parse_seeds(args.seeds), epochs=args.epochs, out=args.out,
                              progress=not args.quiet)
    except (RecipeError, PretrainedError, TransferError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(format_transfer_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
