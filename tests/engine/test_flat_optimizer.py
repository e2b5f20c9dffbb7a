"""FlatAdam / FlatAdamW against torch's own Adam / AdamW over the same parameters (the reference):
the same trajectory, the same per-parameter state dict both ways, and a resume across the change."""
import copy

import pytest
import torch

from zoo.engine.flat_optimizer import FlatAdam, FlatAdamW


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3),
                                       torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1, bias=False))
        self.unused = torch.nn.Linear(2, 2)  # never gets a gradient

    def forward(self, x):
        return self.net(x)


def _model(seed=0):
    torch.manual_seed(seed)
    return _Net().double()


def _train(model, optimizer, steps, start=0, clip=None):
    losses = []
    for step in range(start, start + steps):
        torch.manual_seed(100 + step)
        x, y = torch.randn(16, 5, dtype=torch.float64), torch.randn(16, 1, dtype=torch.float64)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(clip(), 0.1)
        optimizer.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("flat_kind, kind", [(FlatAdam, torch.optim.Adam), (FlatAdamW, torch.optim.AdamW)])
def test_same_trajectory_and_state_as_the_per_parameter_optimizer(flat_kind, kind):
    hyper = dict(lr=1e-2, weight_decay=1e-2)
    reference, flat = _model(), _model()
    used = lambda m: [p for name, p in m.named_parameters() if not name.startswith("unused")]  # noqa: E731
    torch_opt, flat_opt = kind(reference.parameters(), **hyper), flat_kind(flat.parameters(), **hyper)
    want = _train(reference, torch_opt, 6, clip=lambda: list(reference.parameters()))
    got = _train(flat, flat_opt, 6, clip=flat_opt.flat_parameters)
    # float64; only the gradient norm's summation order differs (one flat norm against per-tensor
    # norms, and the thread count splits it differently), ~1e-11 relative after 6 steps; a wrong
    # update would differ by ~lr = 1e-2
    assert got == pytest.approx(want, rel=1e-8)
    for a, b in zip(used(reference), used(flat)):
        torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-10)
    mine, theirs = flat_opt.state_dict(), torch_opt.state_dict()
    assert mine["param_groups"][0]["params"] == theirs["param_groups"][0]["params"]
    assert mine["param_groups"][0]["lr"] == theirs["param_groups"][0]["lr"]
    for index, state in theirs["state"].items():  # torch has no state for the never-used parameter
        for key, value in state.items():
            torch.testing.assert_close(mine["state"][index][key], value, rtol=1e-8, atol=1e-10)


def test_resumes_from_a_per_parameter_checkpoint_and_back():
    hyper = dict(lr=1e-2, weight_decay=1e-2)
    reference = _model()
    torch_opt = torch.optim.AdamW(reference.parameters(), **hyper)
    _train(reference, torch_opt, 3)
    # a last.pt of the old code (copies: state dicts hold the live tensors)
    saved_model, saved_opt = copy.deepcopy(reference.state_dict()), copy.deepcopy(torch_opt.state_dict())
    want = _train(reference, torch_opt, 3, start=3)
    resumed = _model(seed=5)
    flat_opt = FlatAdamW(resumed.parameters(), **hyper)
    resumed.load_state_dict(saved_model)  # in place: the parameters stay views of the flat buffer
    flat_opt.load_state_dict(saved_opt)
    assert _train(resumed, flat_opt, 3, start=3) == pytest.approx(want, rel=1e-8)
    again = torch.optim.AdamW(_model().parameters(), **hyper)
    again.load_state_dict(flat_opt.state_dict())  # and the flat state loads into torch's optimizer


def test_gradients_replaced_outside_are_gathered():
    model = _model()
    optimizer = FlatAdamW(model.parameters(), lr=1e-2)
    reference = _model()
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for m, opt in ((model, optimizer), (reference, torch_opt)):
        m.zero_grad()  # set_to_none: autograd then makes new gradient tensors, not views of the buffer
        # (distinct rows: with equal ones BatchNorm's output, and every gradient before it, is 0 up to rounding)
        torch.nn.functional.mse_loss(m(x), torch.zeros(4, 1, dtype=torch.float64)).backward()
        opt.step()
    torch.testing.assert_close(model.net[0].weight, reference.net[0].weight, rtol=1e-8, atol=1e-10)
    assert model.net[0].weight.grad.data_ptr() != 0 and optimizer.flat.grad.abs().sum() > 0


def test_a_parameter_moved_off_the_buffer_is_refused():
    model = _model()
    optimizer = FlatAdamW(model.parameters(), lr=1e-2)
    model.net[0].weight.data = model.net[0].weight.data.clone()
    with pytest.raises(RuntimeError, match=r"shape \(7, 5\) no longer lives in the optimizer's flat buffer.*after model.to"):
        optimizer.step()


def test_a_state_of_another_model_is_refused():
    optimizer = FlatAdamW(_model().parameters(), lr=1e-2)
    other = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-2)
    with pytest.raises(ValueError, match="holds 2 parameters, this model trains 9"):
        optimizer.load_state_dict(other.state_dict())
