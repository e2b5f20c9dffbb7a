"""Transfer learning: fine-tune a pretrained checkpoint on a CSV, predict on new SMILES."""
from zoo.transfer.finetuning import finetune
from zoo.transfer.prediction import Predictions, TransferError, predict

__all__ = ["Predictions", "TransferError", "finetune", "predict"]
