"""Where a run trains: ``cpu`` (the default, what every published number here used) or a CUDA
device. The GPU path moves the model, the graphs and the targets; metrics, checkpoints and
diagnostics stay on the CPU, so a checkpoint trained on a GPU loads on a CPU-only machine."""
from __future__ import annotations

import torch

DEVICES = ("cpu", "cuda", "cuda:<index>", "auto")


def resolve_device(spec: str | torch.device | None = "cpu") -> torch.device:
    """``"cpu"``, ``"cuda"``, ``"cuda:1"`` or ``"auto"`` (CUDA when available) -> a torch.device.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    text = str(spec if spec is not None else "cpu").strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(f"device {spec!r} is not one of {', '.join(DEVICES)}") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {spec!r} is not one of {', '.join(DEVICES)}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {spec!r} asked for CUDA, but torch.cuda.is_available() is False on this "
                             "machine (no GPU, or a CPU-only torch build); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {spec!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device
