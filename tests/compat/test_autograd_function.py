"""``ta.autograd.Function`` with several outputs, against finite differences (``ta.testing.gradcheck``)
and against the same ``torch.autograd.Function`` written once for both libraries: every gradient agrees
in float64 to 1e-9 under random upstream gradients, with outputs used, unused, used twice, marked non
differentiable, or not floating point."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tinyattn as ta
import tinyattn.compat as compat
from tinyattn.testing import gradcheck

RTOL, ATOL = 1e-9, 1e-10


def _functions(lib):
    """The same custom operations, written against ``lib`` (torch or tinyattn.compat)."""

    class SinCos(lib.autograd.Function):
        """``(sin(x)·y, cos(x)·y)``: two outputs, two inputs, broadcasting ``y``."""

        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x.sin() * y, x.cos() * y

        @staticmethod
        def backward(ctx, grad_sin, grad_cos):
            x, y = ctx.saved_tensors
            grad_x = grad_sin * x.cos() * y - grad_cos * x.sin() * y
            grad_y = grad_sin * x.sin() + grad_cos * x.cos()
            return grad_x if ctx.needs_input_grad[0] else None, grad_y if ctx.needs_input_grad[1] else None

    class SortWithIndices(lib.autograd.Function):
        """Sorted values (differentiable) and their indices (integer: no gradient)."""

        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort(dim=-1) if lib is torch else _sort(x)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad_values, grad_indices):
            (indices,) = ctx.saved_tensors
            grad = lib.zeros_like(grad_values)
            grad.scatter_(-1, indices, grad_values) if lib is torch else _scatter(grad, indices, grad_values)
            return grad

    class ScaleAndMark(lib.autograd.Function):
        """``(2x, x + k)`` with the second marked non-differentiable, and a non-tensor argument."""

        @staticmethod
        def forward(ctx, x, k):
            doubled, shifted = x * 2, x + k
            ctx.mark_non_differentiable(shifted)
            return doubled, shifted

        @staticmethod
        def backward(ctx, grad_doubled, grad_shifted):
            assert float(grad_shifted.abs().sum()) == 0.0  # zeros for the marked output
            return grad_doubled * 2, None

    return SinCos, SortWithIndices, ScaleAndMark


def _sort(x):
    order = np.argsort(x.numpy(), axis=-1, kind="stable")
    return compat.tensor(np.take_along_axis(x.numpy(), order, -1)), compat.tensor(order)


def _scatter(grad, indices, values):
    np.put_along_axis(grad.data, indices.data, values.data, -1)


OURS, THEIRS = _functions(compat), _functions(torch)


def _compare(use, arrays, upstream_seed=0):
    """Run ``use(lib, fn_classes, *inputs)`` on both, backward with random upstreams, compare gradients."""
    results = []
    for lib, classes in ((compat, OURS), (torch, THEIRS)):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        outputs = use(lib, classes, *inputs)
        rng = np.random.default_rng(upstream_seed)
        total = sum((o * lib.tensor(rng.standard_normal(tuple(o.shape)))).sum() for o in outputs)
        total.backward()
        results.append(([o.detach().numpy() for o in outputs],
                        [None if t.grad is None else t.grad.numpy()
                         for t in inputs]))
    (outs1, grads1), (outs2, grads2) = results
    for a, b in zip(outs1, outs2):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    for i, (a, b) in enumerate(zip(grads1, grads2)):
        assert (a is None) == (b is None), f"input {i}"
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"input {i}")


@settings(max_examples=25, deadline=None)
@given(x=arrays(np.float64, (3, 4), elements=st.floats(-3, 3)), y=arrays(np.float64, (4,), elements=st.floats(-3, 3)))
def test_two_outputs_both_used_match_torch(x, y):
    _compare(lambda lib, c, x, y: c[0].apply(x, y), [x, y])


def test_one_output_unused_gets_zeros_as_in_torch():
    rng = np.random.default_rng(1)
    _compare(lambda lib, c, x, y: [c[0].apply(x, y)[1]], [rng.standard_normal((2, 3)), rng.standard_normal(3)])
    _compare(lambda lib, c, x, y: [c[0].apply(x, y)[0]], [rng.standard_normal((2, 3)), rng.standard_normal(3)])


def test_outputs_used_twice_and_combined_match_torch():
    rng = np.random.default_rng(2)

    def use(lib, c, x, y):
        s, co = c[0].apply(x, y)
        return [s * co, s.exp(), (co * 3).tanh()]

    _compare(use, [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))], upstream_seed=3)


def test_an_integer_output_and_a_marked_output_carry_no_gradient():
    rng = np.random.default_rng(4)

    def use(lib, c, x):
        values, indices = c[1].apply(x)
        assert not indices.requires_grad and indices.dtype == (torch.int64 if lib is torch else np.int64)
        doubled, shifted = c[2].apply(x, 1.5)
        assert doubled.requires_grad and not shifted.requires_grad
        return [values, doubled]

    _compare(use, [rng.standard_normal((3, 5))], upstream_seed=5)


def test_gradcheck_of_every_output():
    rng = np.random.default_rng(6)
    x = ta.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    y = ta.tensor(rng.standard_normal(3), requires_grad=True)
    SinCos, SortWithIndices, _ = OURS
    assert gradcheck(SinCos.apply, [x, y])
    assert gradcheck(lambda x: SortWithIndices.apply(x)[0], [x])


def test_materialize_grads_false_passes_none_for_an_unused_output():
    seen = []

    class Split(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1.0, x * 2.0

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            seen.append(grad_b)
            return grad_a

    x = ta.tensor(np.ones(3), requires_grad=True)
    a, _ = Split.apply(x)
    a.backward(ta.tensor(np.array([1.0, 2.0, 3.0])))
    assert seen == [None]
    np.testing.assert_array_equal(x.grad, [1.0, 2.0, 3.0])


def test_a_forward_that_returns_no_tensor_is_refused_by_name():
    class Bad(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x, 3

    with pytest.raises(TypeError, match=r"Bad.forward must return a tensor or a tuple of tensors, got Tensor, int"):
        Bad.apply(ta.ones(2, requires_grad=True))
