"""``nn.LazyLinear`` (native, and re-exported by compat) against ``torch.nn.LazyLinear``: the input size
comes from the first call, the state dict then has torch's keys and shapes, and with torch's values
loaded the outputs and every gradient agree in float64 to 1e-9."""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.compat as compat

RTOL, ATOL = 1e-9, 1e-10


def _model(lib):
    return lib.nn.Sequential(lib.nn.LazyLinear(5), lib.nn.ReLU(), lib.nn.LazyLinear(2, bias=False))


@pytest.mark.parametrize("shape", [(4, 3), (2, 4, 7), (6,)])
def test_matches_torch_after_the_first_call(shape):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    torch.manual_seed(0)
    theirs, ours = _model(torch).double(), _model(compat).double()
    theirs(torch.tensor(x)), ours(compat.tensor(x))  # shapes the parameters
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["0.weight", "0.bias", "2.weight"]
    assert [v.shape for v in ours.state_dict().values()] == [tuple(v.shape) for v in theirs.state_dict().values()]
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    upstream = rng.standard_normal(shape[:-1] + (2,))
    results = []
    for model, lib in ((ours, compat), (theirs, torch)):
        inputs = lib.tensor(x, requires_grad=True)
        out = model(inputs)
        out.backward(lib.tensor(upstream))
        results.append((out.detach().numpy(), inputs.grad.numpy(),
                        {n: p.grad for n, p in model.named_parameters()}))
    (out1, gx1, g1), (out2, gx2, g2) = results
    np.testing.assert_allclose(out1, out2, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gx1, gx2, rtol=RTOL, atol=ATOL)
    assert list(g1) == list(g2)
    for name in g1:
        np.testing.assert_allclose(g1[name], g2[name].numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


def test_before_the_first_call_the_weight_is_empty_and_moves_with_the_module():
    layer = ta.nn.LazyLinear(3).double()
    assert layer.weight.shape == (3, 0) and layer.weight.dtype == np.float64
    assert layer.bias.shape == (3,)
    out = layer(ta.tensor(np.ones((2, 4))))
    assert type(layer) is ta.nn.Linear and layer.in_features == 4
    assert out.shape == (2, 3) and out.dtype == np.float64 and layer.weight.dtype == np.float64
    bound = 1 / np.sqrt(4)  # PyTorch's initial values: U(-1/sqrt(in_features), 1/sqrt(in_features))
    assert np.abs(layer.weight.numpy()).max() <= bound and np.abs(layer.bias.numpy()).max() <= bound
    assert np.abs(layer.weight.numpy()).max() > 0
    with pytest.raises(ValueError, match=r"last dimension has size 5 .* expected 4"):
        layer(ta.ones(2, 5).double())


def test_an_optimizer_built_before_the_first_call_trains_the_shaped_parameters():
    ta.manual_seed(0)
    layer = compat.nn.LazyLinear(1)
    params = list(layer.parameters())
    optimizer = compat.optim.SGD(layer.parameters(), lr=0.1)
    x = compat.randn(8, 3)
    loss = layer(x).pow(2).mean()
    loss.backward()
    before = layer.weight.numpy()
    optimizer.step()
    assert params[0] is layer.weight and params[1] is layer.bias
    assert not np.array_equal(before, layer.weight.numpy())


def test_a_0d_input_is_refused_by_name():
    with pytest.raises(ValueError, match="LazyLinear: the input must have at least one dimension"):
        ta.nn.LazyLinear(2)(ta.tensor(1.0))
