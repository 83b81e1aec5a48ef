"""Helpers the fused-path tests share: leaves, gradients on the host, the graph's node types, and
an element-by-element comparison of two runs."""

import numpy as np
from torch_parity import host

import tinyattn as ta

EXACT = dict(rtol=1e-10, atol=1e-12)  # float64: a fused and a composed form differ only in rounding


def leaf(array, device, requires_grad=True):
    return ta.tensor(array, requires_grad=requires_grad, device=device)


def grad_of(t):
    return None if t is None or t.grad is None else host(t.grad)


def node_types(out):
    """The names of the graph's node types, walked from ``out`` without recursion."""
    names, seen, stack = set(), set(), [out._ctx]
    while stack:
        ctx = stack.pop()
        if ctx is None or id(ctx) in seen:
            continue
        seen.add(id(ctx))
        names.add(type(ctx).__name__)
        stack.extend(p._ctx for p in ctx.parents)
    return names


def assert_same(fused, composed, **tolerance):
    """Two lists of host arrays (or ``None``) agree element by element (``EXACT`` unless a tolerance
    is given), each finite, of the same shape and dtype; ``None`` only where both are."""
    assert len(fused) == len(composed)
    for i, (a, b) in enumerate(zip(fused, composed)):
        assert (a is None) == (b is None), f"item {i}: one side has no gradient"
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype, f"item {i}: {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
            assert np.isfinite(a).all(), f"item {i} is not finite"
            np.testing.assert_allclose(a, b, err_msg=f"item {i}", **(tolerance or EXACT))
