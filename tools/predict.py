"""Predict with a checkpoint on a CSV of SMILES.

    python tools/predict.py --model runs/finetune/seed0/model.safetensors --data new.csv --out preds.csv
    python tools/predict.py --model zinc_siggate --data new.csv --smiles-col SMILES --out preds.csv --strict

Writes the input columns plus one pred_<target> column per target of the model card (pred_0, ...
when the card names none): values in target units for regression, probabilities for
classification. The SMILES are featurized by the featurizer the model card names. Rows with
invalid SMILES keep empty predictions and are listed on stderr.

Exit codes: 0 done, 1 no prediction possible (with --strict an invalid SMILES, or none valid),
2 bad input, one line naming it: an unknown checkpoint; a CSV that is missing, unreadable, empty,
has a row longer than its header, or lacks (or repeats) the SMILES column; an --out that is a
folder or cannot be written (checked before inference).
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.data import CsvError, DatasetError, InvalidSmilesError  # noqa: E402
from zoo.data.featurizers import smiles_problem  # noqa: E402
from zoo.data.molecules import BadSmiles, column_indices, format_report, read_csv_rows  # noqa: E402
from zoo.models import PretrainedError  # noqa: E402
from zoo.transfer import TransferError, predict  # noqa: E402


def read_table(path: Path, smiles_col: str) -> tuple[list[str], list[tuple[int, list[str]]], int]:
    """Header, ``(file line, cells padded to the header)`` of each non-blank row, and the SMILES column."""
    header, records = read_csv_rows(path, None)
    try:
        (column,) = column_indices(path, header, [smiles_col])
    except CsvError as err:
        raise TransferError(f"{err} Pass the SMILES column with --smiles-col.") from None
    if not records:
        raise CsvError(f"{path} has a header but no data rows.")
    return header, [(line, cells + [""] * (len(header) - len(cells))) for line, cells in records], column


def check_out(out: Path) -> None:
    """Refuse an output path that is a folder, or whose file or nearest existing folder cannot be written."""
    if out.is_dir():
        raise TransferError(f"--out {out} is a folder; give the CSV file to write, e.g. --out {out / 'preds.csv'}")
    folder = out.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise TransferError(f"--out {out} cannot be written: {folder} is a file, not a folder; choose another path")
    if not os.access(out if out.exists() else folder, os.W_OK):
        raise TransferError(f"--out {out} cannot be written (no write permission on {out if out.exists() else folder}); "
                            "choose a writable path")


def write_predictions(out: Path, header: list[str], records: list, preds) -> None:
    """The input rows with one pred_<target> column per target appended."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header + [f"pred_{name}" for name in preds.columns])
        for (_, cells), values in zip(records, preds.values):
            writer.writerow(cells + ["" if math.isnan(v) else repr(float(v)) for v in values])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True,
                        help="a pretrained checkpoint name, or the path of its .safetensors or .json file")
    parser.add_argument("--data", required=True, help="CSV with a SMILES column")
    parser.add_argument("--smiles-col", default="smiles", help="SMILES column (default: smiles)")
    parser.add_argument("--out", required=True, help="output CSV")
    parser.add_argument("--batch-size", type=int, default=128, help="molecules per forward pass (default: 128)")
    parser.add_argument("--strict", action="store_true", help="invalid SMILES are an error instead of skipped")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    data, out = Path(args.data), Path(args.out)
    try:
        check_out(out)
        header, records, column = read_table(data, args.smiles_col)
        smiles = [cells[column].strip() for _, cells in records]
        report = [BadSmiles(row, line, text, why) for row, ((line, _), text) in enumerate(zip(records, smiles))
                  if (why := smiles_problem(text))]
        if report and (args.strict or len(report) == len(records)):
            why = "strict mode" if args.strict else "none is valid"
            raise InvalidSmilesError(f"{data}: {len(report)} invalid SMILES in column {args.smiles_col!r} ({why}):\n"
                                     f"{format_report(report)}\nFix or remove these rows"
                                     + (", or drop --strict to skip them." if args.strict else "."))
        preds = predict(args.model, smiles, batch_size=args.batch_size, progress=not args.quiet)
        write_predictions(out, header, records, preds)
    except (TransferError, PretrainedError, CsvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # the write failed after all (e.g. the disk filled up)
        print(f"error: --out {out} could not be written: {err}", file=sys.stderr)
        return 2
    if report:
        print(f"skipped {len(report)} row(s) with invalid SMILES (predictions left empty):\n{format_report(report)}",
              file=sys.stderr)
    if preds.nonfinite:  # by file line, as the skipped rows
        lost = [BadSmiles(bad.row, records[bad.row][0], bad.smiles, bad.reason) for bad in preds.nonfinite]
        print(f"{len(lost)} row(s) got no finite prediction (left empty):\n{format_report(lost)}", file=sys.stderr)
    print(f"wrote {len(records)} row(s) with {', '.join(f'pred_{name}' for name in preds.columns)} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
