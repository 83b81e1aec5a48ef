"""The shape family (``tinyattn/shapes.py``) beyond PyTorch's samples: which results view their input and which
are tensors of their own, and the errors for bad input (torch refuses each call too; ours names the operation).

The values, gradients, JVPs and batching of every op are ``tests/ops/test_opinfo.py``'s.
"""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

X = np.arange(24.0).reshape(2, 3, 4)

# (name, call on a tensor or on the library, views its input): PyTorch views in the same places, but for
# ``diagonal`` and ``unfold`` (strided views there, copies here)
RESULTS = [
    ("narrow", lambda x, lib: x.narrow(1, 1, 2), True),
    ("select", lambda x, lib: x.select(2, 1), True),
    ("movedim", lambda x, lib: lib.movedim(x, 0, -1), True),
    ("unflatten", lambda x, lib: x.unflatten(2, (2, 2)), True),
    ("tensor_split", lambda x, lib: x.tensor_split(2, 2)[1], True),
    ("broadcast_to", lambda x, lib: lib.broadcast_to(x, (5, 2, 3, 4)), True),
    ("meshgrid", lambda x, lib: lib.meshgrid(x[0, 0], x[1, 1], indexing="ij")[0], True),
    ("unbind", lambda x, lib: x.unbind(1)[2], True),
    ("flip", lambda x, lib: x.flip(0), False),
    ("roll", lambda x, lib: x.roll(1, 2), False),
    ("roll by nothing", lambda x, lib: x.roll(0, 2), False),
    ("rot90", lambda x, lib: x.rot90(4, (0, 2)), False),
    ("tile of ones", lambda x, lib: x.tile((1, 1)), False),
    ("repeat of ones", lambda x, lib: x.repeat(1, 1, 1), False),
    ("hstack", lambda x, lib: lib.hstack([x]), False),
    ("diag_embed", lambda x, lib: lib.diag_embed(x), False),
]


@pytest.mark.parametrize(("name", "call", "views"), RESULTS, ids=[r[0] for r in RESULTS])
def test_a_view_shares_its_input_and_a_new_tensor_does_not(name, call, views):
    x = ta.tensor(X.copy())
    out = call(x, ta)
    assert np.shares_memory(out.data, x.data) == views
    theirs = call(torch.tensor(X), torch)
    np.testing.assert_array_equal(out.numpy(), theirs.numpy())


# (name, call on a tensor or on the library): bad input, refused by torch as well
BAD = [
    ("movedim", lambda x, lib: lib.movedim(x, (0, 0), (1, 2))),
    ("movedim", lambda x, lib: lib.movedim(x, (0, 1), (1,))),
    ("unflatten", lambda x, lib: x.unflatten(2, (3, 2))),
    ("narrow", lambda x, lib: x.narrow(2, 3, 2)),
    ("select", lambda x, lib: x.select(1, 3)),
    ("t", lambda x, lib: x.t()),
    ("fliplr", lambda x, lib: lib.fliplr(x[0, 0])),
    ("roll", lambda x, lib: lib.roll(x, (1, 2), 0)),
    ("rot90", lambda x, lib: lib.rot90(x, 1, (1, 1))),
    ("rot90", lambda x, lib: lib.rot90(x[0, 0], 1)),
    ("tensor_split", lambda x, lib: lib.tensor_split(x, 0)),
    ("hsplit", lambda x, lib: lib.hsplit(x, 2)),
    ("dsplit", lambda x, lib: lib.dsplit(x[0], 2)),
    ("diagonal", lambda x, lib: lib.diagonal(x, 0, 1, 1)),
    ("diag", lambda x, lib: lib.diag(x)),
    ("block_diag", lambda x, lib: lib.block_diag(x)),
    ("meshgrid", lambda x, lib: lib.meshgrid(x[0], indexing="ij")),
    ("cartesian_prod", lambda x, lib: lib.cartesian_prod(x[0])),
    ("combinations", lambda x, lib: lib.combinations(x)),
    ("unfold", lambda x, lib: x.unfold(1, 4, 1)),
    ("unfold", lambda x, lib: x.unfold(1, 2, 0)),
    ("broadcast_shapes", lambda x, lib: lib.broadcast_shapes((2, 3), (4,))),
]


@pytest.mark.parametrize(("name", "call"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_is_refused_with_the_operation_named(name, call):
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        call(torch.tensor(X), torch)
    with pytest.raises((RuntimeError, IndexError, ValueError), match=name):
        call(ta.tensor(X), ta)


def test_cat_skips_a_legacy_empty_tensor_and_gives_it_no_gradient():
    empty, x = ta.zeros(0, requires_grad=True), ta.ones(2, 3, requires_grad=True)
    out = ta.cat([empty, x, empty], dim=1)
    assert out.shape == (2, 3)
    upstream = ta.tensor(np.random.default_rng(0).standard_normal((2, 3)), dtype=ta.float32)
    grads = ta.autograd.grad(out, [empty, x], upstream, allow_unused=True)
    assert grads[0] is None
    np.testing.assert_array_equal(grads[1].numpy(), upstream.numpy())
    assert ta.cat([empty, empty]).shape == (0,)
