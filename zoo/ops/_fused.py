"""The fused CPU kernels of ``edge_qsoftmax``, ``edge_entmax``, ``edge_gatv2_logits``, ``edge_weighted_sum``
and ``gated_gcn.gated_gcn_messages`` (``csrc/edge_ops.cpp``).

Compiled on first use with ``torch.utils.cpp_extension.load`` (g++ and ninja; 15-60 s, once per
machine and source: the build lives in torch's extensions folder, ``$TORCH_EXTENSIONS_DIR`` or
``~/.cache/torch_extensions``, named by a hash of the source and flags, so that checkouts with
different sources never share one and processes with different ``$ZOO_CACHE`` (tests, workers)
reuse it; torch's lock file makes concurrent first builds wait for one another). Where no
compiler is found or the build fails, the ops keep their pure-torch path and one warning says how
to get the fused one. ``ZOO_FUSED_OPS=0`` or :func:`disabled` selects the pure-torch path on purpose.

``ZOO_FUSED_ISA`` picks the instruction set of the build (:func:`isa`): ``auto`` (the default) builds
for AVX2 (``-mavx2 -mfma``, ATen's AVX2 ``Vectorized`` with SLEEF's exp and log1p) where torch finds
AVX2 or AVX-512, else the portable build; ``default`` always builds the portable one (ATen's scalar
``Vectorized``, libm's exp and log1p), which is what CPUs without AVX2 run, so that it can be built
and tested anywhere (tests/ops/test_fused_portable.py). Any other value raises a ``ValueError``.
The flags are part of the build's hashed name (:func:`build_name`), so the AVX2 and the portable
build never share a folder. Both register the same torch ops: one process loads only one of them.

Example::

    >>> import torch
    >>> from zoo.ops import _fused
    >>> with _fused.disabled():
    ...     _fused.usable(torch.zeros(2, 1))
    False
"""
import contextlib
import hashlib
import io
import os
import shutil
import threading
import warnings
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("csrc") / "edge_ops.cpp"
# Kernel modes, as in the C++ enum Mode.
SOFTMAX, RELU, SQUARE, GENERAL, TAYLOR, MIXED = range(6)
_state = {"ops": None, "tried": False, "enabled": os.environ.get("ZOO_FUSED_OPS", "1") != "0"}
_lock = threading.Lock()
ISAS = ("auto", "default")  # the values of $ZOO_FUSED_ISA
# ATen's Vectorized uses AVX2 (and its SLEEF exp / log1p) only when compiled for it.
FLAGS = {"avx2": ["-O3", "-mavx2", "-mfma", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2"], "default": ["-O3"]}
_OPS = "edge_qsoftmax, edge_entmax, edge_gatv2_logits, edge_weighted_sum and GatedGCN's message passing"
_HOW = ("install a C++ compiler and ninja (e.g. `apt-get install g++ ninja-build` or `pip install ninja`) "
        "for the fused CPU kernels")


@contextlib.contextmanager
def disabled():
    """Within the block, every op with a fused kernel takes its pure-torch path."""
    before, _state["enabled"] = _state["enabled"], False
    try:
        yield
    finally:
        _state["enabled"] = before


def usable(x):
    """Whether the fused kernels run for scores ``x``: CPU float32/float64, enabled, built."""
    return (_state["enabled"] and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and kernels() is not None)


def kernels():
    """The registered ops (``torch.ops.zoo_edge_ops``), built on first call; None if impossible."""
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["ops"] = _build()
                _state["tried"] = True
    return _state["ops"]


def _build():
    with contextlib.redirect_stderr(io.StringIO()):  # its import prints a CUDA_HOME guess on CPU machines
        from torch.utils import cpp_extension

    variant = isa()  # an invalid $ZOO_FUSED_ISA raises, compiler or not
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None or not cpp_extension.is_ninja_available():
        missing = "ninja" if shutil.which(compiler) else f"the C++ compiler {compiler!r}"
        warnings.warn(f"zoo.ops: {missing} not found, so {_OPS} run their slower pure-torch path; {_HOW}",
                      RuntimeWarning, stacklevel=4)
        return None
    try:
        cpp_extension.load(build_name(variant), [str(SOURCE)], extra_cflags=FLAGS[variant],
                           is_python_module=False, verbose=False)
    except Exception as error:  # noqa: BLE001 - any build failure leaves the pure-torch path
        last = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        warnings.warn(f"zoo.ops: building {SOURCE.name} failed ({last}), so {_OPS} run their slower pure-torch "
                      f"path; {_HOW}", RuntimeWarning, stacklevel=4)
        return None
    return torch.ops.zoo_edge_ops


def isa():
    """The build's instruction set, ``"avx2"`` or ``"default"``, as ``$ZOO_FUSED_ISA`` asks (see above).

    >>> isa() in FLAGS
    True
    """
    asked = os.environ.get("ZOO_FUSED_ISA") or "auto"  # unset or empty: auto
    if asked not in ISAS:
        raise ValueError(f"ZOO_FUSED_ISA={asked!r} is not one of {', '.join(map(repr, ISAS))}; "
                         f"unset it (auto) or set one of those")
    if asked == "auto" and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        return "avx2"
    return "default"


def build_name(variant):
    """The extension's name, and build folder, for ``variant`` of :data:`FLAGS`: a hash of source and flags."""
    return "zoo_edge_ops_" + hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS[variant]).encode()
                                                    ).hexdigest()[:12]


def adjacency(graph, edges):
    """``(indptr, other ends, eids)``, int64, of each destination's in-edges (``edges="in"``, DGL's
    cached CSC) or of each source's out-edges (``"out"``, its CSR)."""
    return tuple(t.long() for t in graph.adj_tensors({"in": "csc", "out": "csr"}[edges]))


def param(value, x):
    """``q - 1`` / ``alpha - 1`` as a contiguous ``[Qe, Qh]`` tensor of ``x``'s dtype."""
    if torch.is_tensor(value):
        return value.detach().to(x.dtype).contiguous()
    return torch.tensor([[value]], dtype=x.dtype)


def float_mode(eps):
    """The exact shortcuts of a float ``eps``, as the pure-torch path takes them."""
    return {0.0: SOFTMAX, 1.0: RELU, 0.5: SQUARE}.get(eps, GENERAL)


def needs_series(eps):
    """Whether ``expq_log_grads_`` switches to its series (some ``|eps| < 0.05``)."""
    return bool((torch.as_tensor(eps).abs() < 0.05).any())
