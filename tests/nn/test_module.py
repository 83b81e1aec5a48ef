"""``nn.Module``'s bookkeeping, against PyTorch's for the same module tree.

One network is written twice, once over ``tinyattn.nn`` and once over ``torch.nn``, with
every kind of layer, a ModuleList (repeated and distinct members), nested Sequentials and
two buffers (one persistent, one not). Against that twin: parameter names and order,
``state_dict`` keys, ``repr``, and outputs after weights travel either way. Then the rest of
the API (modes, ``zero_grad``, ``to``, buffers, ``deepcopy``), ``load_state_dict``'s errors
(one error naming every problem, and nothing changed), and ``clip_grad_norm_``.
"""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import backend
from tinyattn.nn.utils import clip_grad_norm_


def make_net(lib, make_tensor):
    """The same module tree over ``lib`` (``tinyattn.nn`` or ``torch.nn``)."""

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.Embedding(10, 4, padding_idx=0)
            block = lambda: lib.Sequential(lib.Linear(4, 8), lib.GELU(), lib.Dropout(0.1), lib.Linear(8, 4))
            self.blocks = lib.ModuleList([block(), block(), lib.LayerNorm(4, eps=1e-6)])
            self.head = lib.Sequential(lib.ReLU(), lib.Linear(4, 3, bias=False), lib.GELU(approximate="tanh"))
            self.norm = lib.LayerNorm((3,), elementwise_affine=False)
            self.register_buffer("scale", make_tensor([2.0, 0.5, 1.0]))
            self.register_buffer("table", make_tensor([1.0, 1.0, 1.0]), persistent=False)

        def forward(self, index):
            x = self.embed(index)  # (B, L, 4)
            for block in self.blocks:
                x = block(x) + x
            return self.norm(self.head(x)) * self.scale * self.table  # (B, L, 3)

    return Net()


def twin_nets():
    return make_net(nn, ta.tensor), make_net(torch.nn, lambda v: torch.tensor(v))


# ----------------------------------------------------------------------------- against torch's bookkeeping


def test_names_and_order_match_torch():
    ours, theirs = twin_nets()
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())  # parameters then the persistent buffer
    assert "table" not in ours.state_dict() and "scale" in ours.state_dict()
    assert [name for name, _ in ours.named_modules()] == [name for name, _ in theirs.named_modules()]
    assert [name for name, _ in ours.named_children()] == [name for name, _ in theirs.named_children()]
    assert [name for name, _ in ours.named_buffers()] == [name for name, _ in theirs.named_buffers()]
    for (name, mine), reference in zip(ours.named_parameters(), theirs.parameters()):
        assert mine.shape == tuple(reference.shape), name


def test_repr_matches_torch():
    ours, theirs = twin_nets()
    assert repr(ours) == repr(theirs)
    assert repr(nn.ModuleList()) == repr(torch.nn.ModuleList())
    assert repr(nn.Sequential()) == repr(torch.nn.Sequential())
    distinct = lambda lib: lib.ModuleList([lib.Linear(2, 2), lib.Linear(2, 2), lib.ReLU(), lib.Linear(2, 2)])
    assert repr(distinct(nn)) == repr(distinct(torch.nn))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("direction", ["torch_to_ours", "ours_to_torch"])
def test_weights_travel_both_ways(direction, dtype, device):
    torch.manual_seed(0)
    ta.manual_seed(0)
    ours, theirs = twin_nets()
    ours.to(dtype).to(device).eval()
    theirs.to(torch.float64 if dtype == np.float64 else torch.float32).eval()
    if direction == "torch_to_ours":
        ours.load_state_dict({name: value.numpy() for name, value in theirs.state_dict().items()})
    else:
        theirs.load_state_dict({name: torch.from_numpy(value) for name, value in ours.state_dict().items()})
    index = np.array([[1, 0, 9, 3], [4, 4, 2, 0]])
    out, out_torch = ours(ta.tensor(index, device=device)), theirs(torch.tensor(index))
    tolerance = dict(rtol=1e-9, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.numpy(), out_torch.detach().numpy(), **tolerance)
    upstream = np.random.default_rng(0).standard_normal(out.shape).astype(dtype)
    out.backward(ta.tensor(upstream, device=device))
    out_torch.backward(torch.tensor(upstream))
    reference = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        np.testing.assert_allclose(backend.to_numpy(param.grad), reference[name].grad.numpy(), **tolerance,
                                   err_msg=name)


# ----------------------------------------------------------------------------- state_dict


def test_state_dict_is_a_host_copy(device):
    model = nn.Linear(3, 2).to(device)
    state = model.state_dict()
    assert all(type(value) is np.ndarray for value in state.values())
    before = model.weight.numpy()
    state["weight"][...] = 42.0
    np.testing.assert_array_equal(model.weight.numpy(), before)


def test_load_state_dict_writes_into_existing_arrays(device):
    model = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2)).to(device)
    params = {name: (param, param.data) for name, param in model.named_parameters()}
    state = {name: np.full(value.shape, 0.25, dtype=np.float64) for name, value in model.state_dict().items()}
    assert model.load_state_dict(state) == ([], [])
    for name, param in model.named_parameters():
        assert param is params[name][0] and param.data is params[name][1], name  # same objects, same arrays
        assert param.dtype == np.float32 and param.device == device, name  # cast to the model's dtype
        np.testing.assert_array_equal(param.numpy(), 0.25)


def _snapshot(model):
    return {name: (param.numpy(), param.dtype, param.device) for name, param in model.named_parameters()}


def test_load_state_dict_names_every_problem_and_changes_nothing(device):
    torch.manual_seed(0)
    model = make_net(nn, ta.tensor).to(device)
    before = _snapshot(model)
    state = {name: np.zeros_like(value) for name, value in model.state_dict().items()}
    del state["head.1.weight"], state["blocks.2.bias"]
    state["blocks.0.0.weight"] = np.zeros((8, 5), np.float32)  # (8, 4) expected
    state["embed.weight"] = np.zeros((11, 4), np.float32)  # (10, 4) expected
    state["head.2.weight"] = np.zeros(3, np.float32)
    state["decoder.bias"] = np.zeros(3, np.float32)
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict(state)
    message = str(error.value)
    for expected in ['Missing key(s) in state_dict: "blocks.2.bias", "head.1.weight".',
                     'Unexpected key(s) in state_dict: "head.2.weight", "decoder.bias".',
                     "size mismatch for blocks.0.0.weight: copying a value of shape (8, 5), "
                     "the parameter in the current model has shape (8, 4)",
                     "size mismatch for embed.weight: copying a value of shape (11, 4)"]:
        assert expected in message
    after = _snapshot(model)  # the zeros of the well-formed keys were not written either
    for name, (values, dtype, where) in before.items():
        assert after[name][1] == dtype and after[name][2] == where
        np.testing.assert_array_equal(after[name][0], values, err_msg=name)
        assert after[name][0].tobytes() == values.tobytes(), name  # bit for bit


def test_load_state_dict_non_strict(device):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1)).to(device)
    before = model[1].weight.numpy()
    result = model.load_state_dict({"0.weight": np.ones((2, 2)), "extra": np.ones(1)}, strict=False)
    assert result.missing_keys == ["0.bias", "1.weight", "1.bias"] and result.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(model[0].weight.numpy(), 1.0)
    np.testing.assert_array_equal(model[1].weight.numpy(), before)
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.bias.*\(3,\).*\(2,\)"):  # shapes: always checked
        model.load_state_dict({"0.bias": np.ones(3)}, strict=False)


def test_buffers_persistent_and_not(device):
    model = make_net(nn, ta.tensor).to(device).to(np.float64)
    assert model.scale.device == device and model.table.device == device
    assert model.scale.dtype == np.float64 and not model.scale.requires_grad
    assert [name for name, _ in model.named_buffers()] == ["scale", "table"]
    state = model.state_dict()
    state["scale"] = np.array([3.0, 3.0, 3.0])
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.scale.numpy(), 3.0)
    model.scale = ta.tensor([1.0, 2.0, 3.0])  # assigning a tensor to a buffer's name replaces the buffer
    assert "scale" in model.state_dict() and model.state_dict()["scale"].tolist() == [1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------- the rest of the API


def test_modes_and_zero_grad():
    model = make_net(nn, ta.tensor)
    assert all(m.training for m in model.modules())
    assert model.eval() is model and not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())
    out = model(ta.tensor([[1, 2, 3]]))
    out.backward(ta.ones(*out.shape))
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_to_keeps_parameter_objects_and_casts_grads(device):
    model = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3))
    params = list(model.parameters())
    out = model(ta.ones(1, 2))
    out.backward(ta.ones(1, 3))
    assert model.double() is model and model.to(device) is model
    for before, param in zip(params, model.parameters()):
        assert param is before and param.dtype == np.float64 and param.device == device
        assert param.grad.dtype == np.float64 and backend.device_of(param.grad) == device
    assert model.float()[0].weight.dtype == np.float32
    assert model(ta.ones(1, 2, device=device)).dtype == np.float32


def test_shared_parameters_are_listed_once():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    model[1].weight = model[0].weight
    names = [name for name, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.bias"] and len(list(model.parameters())) == 3


def test_parameter_is_a_tensor_that_learns():
    data = ta.tensor([1.0, 2.0])
    param = nn.Parameter(data)
    assert isinstance(param, ta.Tensor) and param.requires_grad and param.data is data.data
    assert repr(param) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert not nn.Parameter(data, requires_grad=False).requires_grad


def test_deepcopy_gives_independent_parameters(device):
    model = nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2)).to(device)
    clone = copy.deepcopy(model)
    assert repr(clone) == repr(model)
    for (name, mine), (_, theirs) in zip(model.named_parameters(), clone.named_parameters()):
        assert mine is not theirs and isinstance(theirs, nn.Parameter) and theirs.device == device, name
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    clone[0].weight.data[...] = 0
    assert (model[0].weight.numpy() != 0).any()


def test_registration_errors_teach():
    class Forgetful(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first"):
        Forgetful()
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'weights'"):
        _ = nn.Linear(1, 1).weights
    with pytest.raises(NotImplementedError, match="Module has no forward"):
        nn.Module()(ta.ones(1))
    with pytest.raises(TypeError, match="expected a Tensor or None, got list"):
        nn.Module().register_buffer("mask", [1, 2])


def test_reassigning_and_deleting_attributes():
    model = nn.Module()
    model.proj = nn.Linear(2, 2)
    model.proj = nn.Parameter(ta.zeros(2))  # a module's name, now a parameter's
    assert list(model.state_dict()) == ["proj"] and list(model.children()) == []
    with pytest.raises(TypeError, match=r"cannot assign a Tensor as parameter 'proj' of Module \(an nn.Parameter"):
        model.proj = ta.zeros(2)  # would silently drop it from the state dict
    model.proj = None
    assert model.proj is None and list(model.state_dict()) == []
    del model.proj
    assert not hasattr(model, "proj")


# ----------------------------------------------------------------------------- clip_grad_norm_


@given(seed=st.integers(0, 2**32 - 1), max_norm=st.sampled_from([0.1, 1.0, 100.0]),
       norm_type=st.sampled_from([2.0, float("inf")]))
def test_clip_grad_norm_matches_torch(device, seed, max_norm, norm_type):
    rng = np.random.default_rng(seed)
    shapes = [(3, 2), (2,), (4,)]
    grads = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    ours = [ta.zeros(*shape, device=device, requires_grad=True) for shape in shapes]
    theirs = [torch.zeros(shape, requires_grad=True) for shape in shapes]
    for mine, reference, grad in zip(ours, theirs, grads):
        mine.grad = backend.to_device(grad.copy(), device)
        reference.grad = torch.from_numpy(grad.copy())
    ours.append(ta.zeros(2, device=device, requires_grad=True))  # no gradient: skipped
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert type(total) is float
    np.testing.assert_allclose(total, expected.item(), rtol=1e-6)
    for mine, reference in zip(ours, theirs):
        assert mine.grad.dtype == np.float32
        np.testing.assert_allclose(backend.to_numpy(mine.grad), reference.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert ours[-1].grad is None


def test_clip_grad_norm_single_tensor_and_no_grads():
    weight = ta.tensor([0.0, 0.0], requires_grad=True)
    assert clip_grad_norm_([weight], 1.0) == 0.0
    weight.grad = np.array([6.0, 8.0], dtype=np.float32)
    assert clip_grad_norm_(weight, 5.0) == 10.0
    np.testing.assert_allclose(weight.grad, [3.0, 4.0], rtol=1e-6)
