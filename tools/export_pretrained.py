"""Export the best weights of a finished run, with their model card, as a pretrained checkpoint.

    python tools/export_pretrained.py runs/zinc_siggate/1a2b3c4d5e/seed0 --name zinc_siggate \
        --command "python tools/train.py recipes/zinc_siggate.yaml --seeds 0"
    python tools/export_pretrained.py RUN_DIR --name NAME --out /tmp/weights

The weights are written to zoo/pretrained/NAME.safetensors and the model card beside them as
NAME.json (or to --out DIR/); load them with zoo.load_pretrained("NAME"). best.pt is read with
torch.load(weights_only=True): a file holding more than tensors and plain data is refused.

--command is checked: its recipe file, --set, --epochs and --seeds must rebuild the run's recipe
and seed, so the card tells a reader how to retrain the model. The error names each difference.

Exit codes: 0 done, 2 bad arguments, a run that cannot be exported or a --command that does not rebuild it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.engine.export import export_run  # noqa: E402
from zoo.models import PretrainedError, load_pretrained  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a finished run folder, e.g. runs/zinc_siggate/<hash>/seed0")
    parser.add_argument("--name", required=True, help="checkpoint name (file stem), e.g. zinc_siggate")
    parser.add_argument("--command", default="",
                        help="the tools/train.py or tools/sweep.py command that trained the run, stored in the card; "
                             "refused unless it rebuilds the run's recipe and seed (zoo.engine.card_command)")
    parser.add_argument("--out", help="output folder (default: zoo/pretrained, shipped with the package)")
    args = parser.parse_args(argv)
    try:
        path = export_run(args.run_dir, args.name, args.command, directory=args.out)
        card = load_pretrained(path, check_featurizer=False).card
    except PretrainedError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    test = card["metrics"]["test"]
    test = ", ".join(f"{key} {test[key]:.4f}" for key in dict.fromkeys([card["metric"], *test]) if key in test)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB) and its card {path.with_suffix('.json')}")
    print(f"{card['architecture']} on {card['recipe']['dataset']}, best epoch {card['best_epoch']}: test {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
