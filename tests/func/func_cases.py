"""The functions ``ta.func``'s tests transform: the registry's ``vmap`` table, each row a hypothesis strategy that
draws the float inputs (float64 arrays, every one differentiated) and the options (dims, masks, index and target
arrays, shared by every example of a batch), our function and PyTorch's, built from the primitives and functionals.

Helpers shared by ``test_func_transforms`` and ``test_func_vmap``: converting a drawn case to tensors on
either side, and comparing trees of results (same nesting, same shapes, close values).
"""

import numpy as np
import torch
from registry import convert, table

import tinyattn as ta

RTOL, ATOL = 1e-9, 1e-11

SPECS = table("vmap")
IDS = [spec.name for spec in SPECS]


# ----------------------------------------------------------------------------- both sides of a case


def ours(a):
    return ta.tensor(np.array(a))


def theirs(a):
    return torch.from_numpy(np.array(a))


def functions(spec, options):
    """Our function and PyTorch's of the float inputs alone, the options bound."""
    ours_options, their_options = convert(options, ours), convert(options, theirs)
    return (lambda *xs: spec.ours(*xs, **ours_options)), (lambda *xs: spec.theirs(*xs, **their_options))


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def contract(outputs, directions):
    """``Σ_k ⟨outputs_k, directions_k⟩``: a number from any outputs, along random directions (never ``sum()``
    alone, whose gradient hides a softmax's)."""
    total = None
    for out, u in zip(as_tuple(outputs), directions):
        term = (out * u).sum()
        total = term if total is None else total + term
    return total


def numpy_of(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    assert isinstance(t, ta.Tensor), f"expected a tensor, got {type(t).__name__}"
    return t.numpy()


def assert_trees_close(got, expected, rtol=RTOL, atol=ATOL, where="result"):
    """``got`` (ours) has ``expected``'s nesting (tuples, lists, dicts), shapes, and close values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{where}: expected a {type(expected).__name__}, got {type(got)}"
        assert len(got) == len(expected), f"{where}: {len(got)} entries, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_trees_close(g, e, rtol, atol, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), f"{where}: keys {got!r}"
        for k in expected:
            assert_trees_close(got[k], expected[k], rtol, atol, f"{where}[{k!r}]")
    else:
        assert isinstance(got, ta.Tensor), f"{where}: expected a tensor, got {type(got).__name__}"
        e = numpy_of(expected)
        assert tuple(got.shape) == e.shape, f"{where}: shape {tuple(got.shape)}, expected {e.shape}"
        np.testing.assert_allclose(got.numpy(), e, rtol=rtol, atol=atol, err_msg=where)
