"""tinyattn: a from-scratch reverse-mode autograd engine on NumPy (and CuPy), with attention.

>>> import tinyattn as ta
>>> x = ta.tensor([0.5, -1.0], requires_grad=True)
>>> (x.tanh() * x).sum().backward()
>>> x.grad.round(4)
array([0.8553, 1.1815], dtype=float32)
"""

import numpy as np

from . import backend, ops
from .backend import manual_seed
from .creation import arange, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like
from .ops import (
    abs, amax, cat, chunk, exp, expand, flatten, log, masked_fill, matmul, mean, permute,
    relu, reshape, sigmoid, split, sqrt, squeeze, stack, sum, tanh, transpose, unsqueeze, var, where,
)
from .serialization import load, save
from .tensor import Function, Tensor, is_grad_enabled, no_grad

from . import interop, nn, optim, testing  # noqa: E402  (floors above the engine)

float32, float64, int64, bool = np.float32, np.float64, np.int64, np.bool_

__all__ = [
    "Tensor", "Function", "save", "load", "nn", "optim", "interop", "testing", "tensor", "no_grad", "is_grad_enabled", "manual_seed", "backend", "ops",
    "zeros", "ones", "full", "arange", "randn", "rand", "zeros_like", "ones_like",
    "abs", "amax", "cat", "chunk", "exp", "expand", "flatten", "log", "masked_fill", "matmul", "mean",
    "permute", "relu", "reshape", "sigmoid", "split", "sqrt", "squeeze", "stack", "sum", "tanh",
    "transpose", "unsqueeze", "var", "where", "float32", "float64", "int64", "bool",
]
