"""Adam and AdamW over the weights held as one flat tensor: the same update in a few whole-buffer
kernels instead of a pass over every parameter tensor.

A GPS model has about 340 parameter tensors; torch's multi-tensor (``foreach``) AdamW and gradient
clipping still walk them in lists on the CPU (``tools/benchmark.py gps --recipe
recipes/zinc_siggate.yaml --profile`` shows the update's share of a step). Here every
parameter becomes a view of one flat tensor and its ``.grad`` a view of one flat gradient, so
autograd accumulates straight into the buffer and the optimizer steps it as a single parameter.

Checkpoints keep the per-parameter layout: :meth:`state_dict` returns what ``torch.optim.AdamW``
over the same parameters returns, and :meth:`load_state_dict` takes one from either, so runs
resume across the change. A parameter that gets no gradient in a step is updated with a zero
gradient (per-parameter Adam skips it); parameters that never get one (the last GatedGCN layer's
edge update) stay at exactly 0 momentum and only decay.

>>> model = torch.nn.Linear(3, 2)
>>> optimizer = FlatAdamW(model.parameters(), lr=1e-3)
>>> model(torch.ones(1, 3)).sum().backward()
>>> optimizer.step(); optimizer.zero_grad()
>>> sorted(optimizer.state_dict()["state"][0])
['exp_avg', 'exp_avg_sq', 'step']
"""
from __future__ import annotations

import torch


class _Flat:
    """The flat layout shared by :class:`FlatAdam` and :class:`FlatAdamW` (see the module docstring)."""

    def __init__(self, params, **hyper):
        self.members = [p for p in params]
        if not self.members:
            raise ValueError("the optimizer got no parameters to train")
        flat = torch.cat([p.detach().reshape(-1) for p in self.members])
        self.flat = torch.nn.Parameter(flat)
        self.flat.grad = torch.zeros_like(flat)
        self.grads, start = [], 0
        for p in self.members:
            size = p.numel()
            p.data = self.flat.data[start:start + size].view_as(p)
            p.grad = self.flat.grad[start:start + size].view_as(p)
            self.grads.append(p.grad)
            start += size
        super().__init__([self.flat], **hyper)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient in place (the parameters' gradients stay its views)."""
        self.flat.grad.zero_()

    @torch.no_grad()
    def _gather(self) -> None:
        """Bring back into the flat gradient any parameter gradient that code outside this
        optimizer replaced (``model.zero_grad()`` sets them to None, and autograd then makes new ones)."""
        for p, view in zip(self.members, self.grads):
            if p.grad is not view:
                view.copy_(p.grad) if p.grad is not None else view.zero_()
                p.grad = view
            if p.data_ptr() != view.data_ptr() - self.flat.grad.data_ptr() + self.flat.data_ptr():
                raise RuntimeError(f"a parameter of shape {tuple(p.shape)} no longer lives in the optimizer's flat "
                                   "buffer (its .data was replaced, e.g. by moving the model after building the "
                                   "optimizer); build the optimizer after model.to(device)")

    def step(self, closure=None):
        self._gather()
        return super().step(closure)

    def flat_parameters(self) -> list[torch.nn.Parameter]:
        """``[the flat parameter]``, its gradient holding every member's: what ``clip_grad_norm_`` takes."""
        self._gather()
        return [self.flat]

    def state_dict(self) -> dict:
        """The per-parameter state dict that ``torch.optim`` over :attr:`members` would give."""
        flat = super().state_dict()
        group = {**flat["param_groups"][0], "params": list(range(len(self.members)))}
        state, saved = {}, flat["state"].get(0)
        if saved is not None:
            start = 0
            for index, p in enumerate(self.members):
                size = p.numel()
                state[index] = {key: (value[start:start + size].view_as(p).clone() if key != "step" else value.clone())
                                for key, value in saved.items()}
                start += size
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a per-parameter state dict (:meth:`state_dict`'s, or ``torch.optim``'s over the same
        parameters in the same order). A parameter missing from its state (it never had a gradient)
        starts at zero moments."""
        (group,) = state_dict["param_groups"]
        if len(group["params"]) != len(self.members):
            raise ValueError(f"the optimizer state holds {len(group['params'])} parameters, this model trains "
                             f"{len(self.members)}: it was saved for another model or another set of trainable weights")
        saved = state_dict["state"]
        flat_state = {}
        present = [saved[i] for i in group["params"] if i in saved]
        if present:
            flat_state[0] = {"step": max(s["step"] for s in present).clone()}
            for key in present[0]:
                if key != "step":
                    flat_state[0][key] = torch.cat([
                        saved[i][key].reshape(-1) if i in saved else torch.zeros(p.numel(), dtype=p.dtype)
                        for i, p in zip(group["params"], self.members)])
        super().load_state_dict({"state": flat_state, "param_groups": [{**group, "params": [0]}]})


class FlatAdam(_Flat, torch.optim.Adam):
    """``torch.optim.Adam`` over one flat buffer of the parameters (module docstring)."""


class FlatAdamW(_Flat, torch.optim.AdamW):
    """``torch.optim.AdamW`` over one flat buffer of the parameters (module docstring)."""
