"""Edges of the public API where tinyattn follows PyTorch: dtype promotion, ``to`` keywords, ``no_grad`` used bare."""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F


@pytest.mark.parametrize(
    "expression",
    ["a / 2", "a * 0.5", "a + 1.5", "a - 0.5", "a ** 0.5", "a / b", "2 / b", "a * 2", "a + 1"],
)
def test_integer_promotion_matches_torch(expression):
    ours = eval(expression, {"a": ta.arange(4), "b": ta.arange(1, 5)})
    theirs = eval(expression, {"a": torch.arange(4), "b": torch.arange(1, 5)})
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_to_takes_device_and_dtype_as_keywords_or_positions(device):
    x = ta.randn(3, requires_grad=True)
    y = x.to(device=device, dtype=ta.float64)
    assert (y.device, y.dtype) == (device, np.float64)
    y.backward(ta.ones(3, dtype=ta.float64, device=device))
    assert x.grad.dtype == np.float32 and ta.backend.device_of(x.grad) == "cpu"
    assert x.to(device, ta.float64).dtype == np.float64
    layer = nn.Linear(2, 2).to(device=device, dtype=ta.float64)
    assert layer.weight.dtype == np.float64 and layer.weight.device == device


def test_no_grad_works_bare_and_called():
    w = ta.ones(2, requires_grad=True)

    @ta.no_grad
    def bare(t):
        return t * 2

    @ta.no_grad()
    def called(t):
        return t * 2

    assert not bare(w).requires_grad and not called(w).requires_grad
    assert (w * 2).requires_grad


def test_where_with_two_python_numbers():
    out = ta.where(ta.tensor([True, False]), 1.0, 0.0)
    expected = torch.where(torch.tensor([True, False]), 1.0, 0.0)
    assert out.dtype == np.float32 and out.tolist() == expected.tolist()


def test_unsqueeze_out_of_range_raises_naming_the_range():
    with pytest.raises(IndexError, match=r"dim 5 is out of range \[-3, 2\]"):
        ta.ones(2, 3).unsqueeze(5)
    assert ta.ones(2, 3).unsqueeze(-3).shape == torch.ones(2, 3).unsqueeze(-3).shape


@pytest.mark.parametrize("make", [ta.zeros, ta.ones, ta.randn, ta.rand])
def test_creation_accepts_device_none(make):
    assert make(2, device=None).device == "cpu"
    assert ta.arange(3, device=None).device == ta.full((2,), 1.0, device=None).device == "cpu"


def test_a_float64_mask_does_not_turn_float32_attention_float64(device):
    x = ta.randn(2, 3, 4, device=device, requires_grad=True)
    mask = ta.tensor(np.triu(np.full((3, 3), -np.inf), 1), device=device)  # float64, as NumPy makes it
    out, weights = F.scaled_dot_product_attention(x, x, x, attn_mask=mask)
    assert out.dtype == weights.dtype == np.float32
    out.backward(ta.randn(2, 3, 4, device=device))
    assert x.grad.dtype == np.float32
