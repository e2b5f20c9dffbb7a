"""Positional and structural encoders on precomputed node tensors (computed by ``zoo.data``).

Inputs per node: ``lap_eigvec`` ``[N, k]`` (entry ``j`` is the node's value in the graph's
``j``-th Laplacian eigenvector), ``lap_eigval`` ``[N, k]`` (the graph's ``j``-th eigenvalue,
repeated on every node of the graph), ``rwse`` ``[N, k]`` (random-walk landing probabilities
after 1..k steps).

Padding contract: a graph with ``n < k`` nodes has only ``n`` eigenpairs; the missing ones must
be NaN (in ``lap_eigvec`` and/or ``lap_eigval``, as in GraphGPS). The LapPE encoders treat an
eigenpair as missing where either tensor is NaN (SignNet reads ``lap_eigvec`` only): it is
zeroed on input, kept out of BatchNorm statistics and excluded from the sum over eigenpairs, so
it contributes nothing to the embedding.
"""
from __future__ import annotations

import dgl
import torch
from dgl import ops as dgl_ops
from dgl.nn import GINConv
from torch import nn
from torch.nn import functional as F


def _mlp(sizes: list[int], final_relu: bool) -> nn.Sequential:
    """Linear layers through ``sizes`` with ReLU between them (and after the last if asked)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if final_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _check_eig(eigvec: torch.Tensor, eigval: torch.Tensor | None = None) -> None:
    if eigvec.dim() != 2:
        raise ValueError(f"lap_eigvec must have shape [N, k], got {tuple(eigvec.shape)}")
    if eigval is not None and eigval.shape != eigvec.shape:
        raise ValueError(
            f"lap_eigval must have the shape of lap_eigvec {tuple(eigvec.shape)}, got {tuple(eigval.shape)}"
        )


def _fusable(conv: GINConv) -> bool:
    """Whether :func:`_gin` may call DGL's kernel directly: a sum-aggregating ``GINConv`` without
    activation whose ``eps`` is a fixed 0 (a buffer, not a Parameter). Decided when the module is
    built or loaded, not per call (reading ``eps`` on a GPU is a sync)."""
    return (getattr(conv, "_aggregator_type", None) == "sum" and conv.activation is None
            and not isinstance(conv.eps, nn.Parameter) and not bool(conv.eps.ne(0).any()))


def _with_self_loops(g):
    """``g`` plus one self-loop per node, so that ``copy_u_sum`` over it is ``x + sum_in x_src`` in
    one kernel (a self-loop ``g`` already has counts twice, as in ``x + sum_in x_src``)."""
    src, dst = g.edges()
    nodes = torch.arange(g.num_nodes(), dtype=src.dtype, device=src.device)
    return dgl.graph((torch.cat([src, nodes]), torch.cat([dst, nodes])), num_nodes=g.num_nodes())


def _gin(conv: GINConv, g, x: torch.Tensor, loops, drop_last: bool = False):
    """``conv(g, x)`` for a sum-aggregating ``GINConv``: ``apply_func(x + sum_in x_src)``.

    With ``loops`` (:func:`_with_self_loops` of ``g``; given only for a conv :func:`_fusable`
    decides on) the sum is one DGL kernel over ``loops``: with a fixed ``eps = 0`` (SignNet's) the
    ``(1 + eps) *`` product is skipped, multiplying by exactly 1 changes nothing. An
    ``apply_func`` of one input channel, ``Linear(1, H) -> ReLU -> Linear``, then runs as
    :func:`scalar_relu_mlp`, and ``drop_last`` stops before the last module of an
    ``nn.Sequential`` ``apply_func`` (the caller applies it). Without ``loops`` it goes through DGL.
    """
    if loops is None:
        return conv(g, x)
    out = dgl_ops.copy_u_sum(loops, x)
    mlp = conv.apply_func
    if mlp is None:
        return out
    if drop_last:
        return mlp[:-1](out)
    if x.shape[-1] == 1 and _is_scalar_relu_mlp(mlp):
        return scalar_relu_mlp(mlp, out)
    return mlp(out)


def _is_scalar_relu_mlp(mlp) -> bool:
    """Whether ``mlp`` is ``Linear(1, H) -> ReLU -> Linear(H, F)``, which :func:`scalar_relu_mlp` computes."""
    return (isinstance(mlp, nn.Sequential) and len(mlp) == 3 and isinstance(mlp[0], nn.Linear)
            and mlp[0].in_features == 1 and type(mlp[1]) is nn.ReLU and isinstance(mlp[2], nn.Linear))


def scalar_relu_mlp(mlp: nn.Sequential, s: torch.Tensor) -> torch.Tensor:
    """``mlp(s)`` for ``mlp = Linear(1, H) -> ReLU -> Linear(H, F)`` on scalars ``s`` ``[..., 1]``,
    computed as the piecewise-affine function of ``s`` it is.

    Hidden unit ``c`` is active where ``w_c s + b_c > 0``, so the ``H`` points ``-b_c / w_c`` cut the
    line into at most ``H + 1`` intervals with a fixed set of active units ``D`` each, on which
    ``mlp(s) = s (W_2 D w) + (W_2 D b + b_2)``. The slopes and offsets of all intervals come from
    two ``[H + 1, H] @ [H, F]`` matmuls; each row then looks up its interval. For SignNet's first
    layer (``s`` one scalar per node and eigenvector, ``[N * 2k]`` rows) this replaces an
    ``[N * 2k, H] @ [H, F]`` matmul, its ReLU and their backward by two row lookups. Values equal
    ``mlp(s)`` up to float rounding; gradients too, except exactly at a cut, where ReLU's
    derivative is undefined.

    >>> mlp = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> s = torch.randn(5, 1)
    >>> torch.allclose(scalar_relu_mlp(mlp, s), mlp(s), atol=1e-6)
    True
    """
    first, last = mlp[0], mlp[2]
    w, b = first.weight[:, 0], first.bias
    with torch.no_grad():
        moving = w != 0
        cuts = torch.sort(-b[moving] / w[moving]).values
        inside = (cuts[1:] + cuts[:-1]) / 2
        points = torch.cat([cuts[:1] - 1, inside, cuts[-1:] + 1]) if len(cuts) else b.new_zeros(1)
        active = (points[:, None] * w + b > 0).to(w.dtype)  # [intervals, H]
        interval = torch.searchsorted(cuts, s.detach().reshape(-1).contiguous())  # cuts[i-1] < s <= cuts[i]
    slope = F.linear(active * w, last.weight)  # [intervals, F]
    offset = F.linear(active * b, last.weight, last.bias)
    out = torch.addcmul(offset.index_select(0, interval), slope.index_select(0, interval), s.reshape(-1, 1))
    return out.view(*s.shape[:-1], last.out_features)


class LapPEDeepSet(nn.Module):
    """LapPE by a DeepSet over eigenpairs (GraphGPS's ``LapPENodeEncoder``, DeepSet model).

    Per node and eigenpair ``j``: ``phi([v_j, lambda_j])`` (an MLP with ``layers`` Linear layers,
    width ``2 dim_pe`` inside, ReLU after each), summed over the present eigenpairs, then ``rho``
    (``post_layers`` Linear+ReLU layers, identity for 0). In training mode with ``sign_flip``
    each eigenvector column gets a random sign per call (eigenvectors are defined up to sign).

    ``forward(eigvec [N, k], eigval [N, k]) -> [N, dim_pe]``; any ``k``.

    >>> LapPEDeepSet(8)(torch.randn(5, 3), torch.rand(5, 3)).shape
    torch.Size([5, 8])
    """

    def __init__(self, dim_pe: int, layers: int = 2, post_layers: int = 0, sign_flip: bool = True):
        super().__init__()
        if dim_pe < 1 or layers < 1 or post_layers < 0:
            raise ValueError(f"need dim_pe >= 1, layers >= 1, post_layers >= 0; got {dim_pe}, {layers}, {post_layers}")
        self.dim_pe, self.sign_flip = dim_pe, sign_flip
        self.phi = _mlp([2] + [2 * dim_pe] * (layers - 1) + [dim_pe], final_relu=True)
        self.rho = nn.Identity()
        if post_layers:
            self.rho = _mlp([dim_pe] + [2 * dim_pe] * (post_layers - 1) + [dim_pe], final_relu=True)

    def forward(self, eigvec: torch.Tensor, eigval: torch.Tensor) -> torch.Tensor:
        _check_eig(eigvec, eigval)
        missing = (eigvec.isnan() | eigval.isnan()).unsqueeze(-1)  # [N, k, 1]
        if self.training and self.sign_flip:
            sign = torch.randint(0, 2, (eigvec.shape[1],), device=eigvec.device).to(eigvec.dtype) * 2 - 1
            eigvec = eigvec * sign
        pairs = torch.stack([eigvec, eigval], dim=-1).masked_fill(missing, 0.0)  # [N, k, 2]
        return self.rho(self.phi(pairs).masked_fill(missing, 0.0).sum(1))


def _decide_fused_after_load(module, _incompatible_keys) -> None:
    module._decide_fused()


class SignNetLapPE(nn.Module):
    """Sign-invariant LapPE: SignNet with a DeepSet rho (GraphGPS's SignNet, DeepSet model).

    ``PE = rho(sum_j [phi(v_j) + phi(-v_j)])`` over present eigenvectors ``v_j`` (one scalar
    signal per node). ``phi`` is a GIN over the graph (``phi_layers`` ``GINConv`` layers with MLP
    Linear -> ReLU -> Linear, BatchNorm + ReLU between layers) mapping 1 -> ``phi_out``
    channels, applied to every eigenvector independently; ``rho`` is an MLP with ``rho_layers``
    Linear layers ``phi_out -> phi_hidden -> ... -> dim_pe`` (ReLU between). ``phi`` runs once on
    ``[v, -v]`` together, so its BatchNorm statistics (taken over present entries only) are
    also sign-invariant: flipping any eigenvector leaves the output unchanged in training and
    eval mode. Eigenvalues are not used, as in GraphGPS.

    ``forward(g, eigvec [N, k]) -> [N, dim_pe]``; any ``k``.

    >>> import dgl
    >>> SignNetLapPE(8)(dgl.rand_graph(5, 10), torch.randn(5, 3)).shape
    torch.Size([5, 8])
    """

    def __init__(self, dim_pe: int, phi_hidden: int = 64, phi_out: int = 4, phi_layers: int = 3, rho_layers: int = 2):
        super().__init__()
        if min(dim_pe, phi_hidden, phi_out, phi_layers, rho_layers) < 1:
            raise ValueError(
                f"dim_pe, phi_hidden, phi_out, phi_layers and rho_layers must be >= 1; got "
                f"{dim_pe}, {phi_hidden}, {phi_out}, {phi_layers}, {rho_layers}"
            )
        self.dim_pe = dim_pe
        sizes = [1] + [phi_hidden] * (phi_layers - 1) + [phi_out]
        self.convs = nn.ModuleList(
            GINConv(_mlp([a, phi_hidden, b], final_relu=False), aggregator_type="sum")
            for a, b in zip(sizes[:-1], sizes[1:])
        )
        self.norms = nn.ModuleList(nn.BatchNorm1d(phi_hidden) for _ in range(phi_layers - 1))
        self.rho = _mlp([phi_out] + [phi_hidden] * (rho_layers - 1) + [dim_pe], final_relu=False)
        self._decide_fused()
        self.register_load_state_dict_post_hook(_decide_fused_after_load)

    def _decide_fused(self):
        """Which convs :func:`_gin` runs fused: at construction, and again after a state dict
        loads (it could set a GINConv's ``eps`` buffer)."""
        self._fused = [_fusable(conv) for conv in self.convs]

    def _phi(self, g, x: torch.Tensor, present: torch.Tensor) -> tuple[torch.Tensor, nn.Linear | None]:
        """``[N, m, 1]`` signals, ``present`` ``[N, m]`` -> ``([N, m, C], last)``: ``phi``'s output
        (``C = phi_out``, ``last`` None), or, when the last GIN runs fused, its MLP's input to the
        final ``Linear`` (``last``), which is linear, so :meth:`forward` applies it after the sum
        over eigenvectors (on ``[N, C]`` rows instead of ``[N * m, C]``).

        Between layers, BatchNorm sees present entries only and missing ones are reset to 0.
        The present entries are found once (``rows``, in the row-major order of ``x[present]``),
        not at every layer; with none missing the BatchNorm runs on all rows without gathering.
        """
        rows = None if bool(present.all()) else present.reshape(-1).nonzero().squeeze(1)
        loops = None if g.is_block or not any(self._fused) else _with_self_loops(g)
        last = self.convs[-1].apply_func
        tail = last[-1] if loops is not None and self._fused[-1] and isinstance(last, nn.Sequential) \
            and isinstance(last[-1], nn.Linear) else None
        for i, conv in enumerate(self.convs):
            if i:
                flat = x.reshape(-1, x.shape[-1])
                if rows is None:  # = relu(norm(x[present])) scattered into zeros, with every entry present
                    x = torch.relu(self.norms[i - 1](flat)).view(x.shape)
                else:
                    normed = torch.relu(self.norms[i - 1](flat.index_select(0, rows)))
                    x = flat.new_zeros(flat.shape).index_copy(0, rows, normed).view(x.shape)
            fused = loops if self._fused[i] else None
            x = _gin(conv, g, x, fused, drop_last=tail is not None and i == len(self.convs) - 1)  # = conv(g, x)
        return x, tail

    def forward(self, g, eigvec: torch.Tensor) -> torch.Tensor:
        _check_eig(eigvec)
        missing = eigvec.isnan()
        v = eigvec.masked_fill(missing, 0.0).unsqueeze(-1)
        present = ~torch.cat([missing, missing], dim=1)  # [N, 2k]: v_j and -v_j
        out, last = self._phi(g, torch.cat([v, -v], dim=1), present)
        summed = out.masked_fill(~present.unsqueeze(-1), 0.0).sum(1)  # sum_j phi(v_j) + phi(-v_j)
        if last is not None:  # sum_j (W h_j + b) = W sum_j h_j + (number of terms) b
            summed = torch.addmm(present.sum(1, keepdim=True).to(summed.dtype) * last.bias, summed, last.weight.t())
        return self.rho(summed)


class RWSEEncoder(nn.Module):
    """Random-walk structural encoding: optional BatchNorm over the k steps, then Linear.

    ``forward(rwse [N, k]) -> [N, dim_pe]``.

    >>> RWSEEncoder(16, 8)(torch.rand(5, 16)).shape
    torch.Size([5, 8])
    """

    def __init__(self, k: int, dim_pe: int, batch_norm: bool = True):
        super().__init__()
        if k < 1 or dim_pe < 1:
            raise ValueError(f"k and dim_pe must be >= 1, got k={k}, dim_pe={dim_pe}")
        self.k, self.dim_pe = k, dim_pe
        self.norm = nn.BatchNorm1d(k) if batch_norm else nn.Identity()
        self.linear = nn.Linear(k, dim_pe)

    def forward(self, rwse: torch.Tensor) -> torch.Tensor:
        if rwse.dim() != 2 or rwse.shape[1] != self.k:
            raise ValueError(f"rwse must have shape [N, {self.k}], got {tuple(rwse.shape)}")
        return self.linear(self.norm(rwse))
