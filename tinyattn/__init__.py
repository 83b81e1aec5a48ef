"""tinyattn: a from-scratch reverse-mode autograd engine on NumPy (and CuPy), with attention.

>>> import tinyattn as ta
>>> x = ta.tensor([0.5, -1.0], requires_grad=True)
>>> (x.tanh() * x).sum().backward()        # d/dx x·tanh(x) = tanh(x) + x·(1 - tanh²(x))
>>> x.grad.round(4)
array([ 0.8553, -1.1816], dtype=float32)
"""

import os

import numpy as np

from . import backend, ops
from .backend import get_rng_state, manual_seed, set_rng_state
from .creation import arange, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like
from .ops import (
    abs,
    add,
    amax,
    cat,
    chunk,
    div,
    exp,
    expand,
    flatten,
    log,
    masked_fill,
    matmul,
    mean,
    mul,
    neg,
    permute,
    pow,
    relu,
    reshape,
    sigmoid,
    split,
    sqrt,
    squeeze,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    unsqueeze,
    var,
    where,
)
from .tensor import Function, Tensor, is_grad_enabled, no_grad

float32, float64, int64, bool = np.float32, np.float64, np.int64, np.bool_

if os.environ.get("TINYATTN_KEEP_FREED_MEMORY", "1") != "0":
    backend.keep_freed_memory()  # the next step reuses this step's memory instead of faulting it in again

# the floors above the engine, imported once the engine is complete
from . import interop, nn, optim, routes, testing, viz  # noqa: E402
from .routes import explain, use_fast_paths  # noqa: E402
from .serialization import CheckpointError, load, save  # noqa: E402

__all__ = [
    "Tensor", "Function", "tensor", "no_grad", "is_grad_enabled", "manual_seed", "get_rng_state", "set_rng_state",
    "float32", "float64", "int64", "bool",
    "zeros", "ones", "full", "arange", "randn", "rand", "zeros_like", "ones_like",
    "add", "sub", "mul", "div", "pow", "neg", "matmul", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs",
    "sum", "mean", "amax", "var", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "flatten",
    "masked_fill", "where", "cat", "stack", "split", "chunk",
    "save", "load", "CheckpointError", "backend", "ops", "nn", "optim", "interop", "testing", "viz",
    "use_fast_paths", "explain", "routes",
]
