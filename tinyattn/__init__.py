"""tinyattn: a from-scratch reverse-mode autograd engine on NumPy (and CuPy), with attention.

>>> import tinyattn as ta
>>> x = ta.tensor([0.5, -1.0], requires_grad=True)
>>> (x.tanh() * x).sum().backward()        # d/dx x·tanh(x) = tanh(x) + x·(1 - tanh²(x))
>>> x.grad.round(4)
array([ 0.8553, -1.1816], dtype=float32)
"""

__version__ = "0.2.0"  # (setup.cfg reads it: one place)

import numpy as np

from . import backend, ops
from .backend import get_rng_state, manual_seed, set_rng_state
from .creation import arange, full, ones, ones_like, rand, randint, randn, tensor, zeros, zeros_like
from .engine import (
    Function,
    Tensor,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
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

# isort: split
# the everyday tensor API beyond the primitives, and the in-place operations
from . import inplace  # noqa: F401  (attaches x[i] = v, add_, masked_fill_… to Tensor)
from .creation import empty
from .ops_extra import (
    all,
    any,
    argmax,
    argmin,
    bmm,
    clamp,
    clone,
    cos,
    cumsum,
    from_numpy,
    gather,
    is_tensor,
    max,
    maximum,
    min,
    minimum,
    multinomial,
    nonzero,
    repeat_interleave,
    sin,
    std,
    topk,
    tril,
    triu,
)

# isort: split
# the op set by family, composed from the primitives above (each module's __all__ is what it adds)
from . import comparison, indexing, linalg, pointwise, products, reductions, shapes, sorting  # noqa: E402
from .comparison import *  # noqa: E402,F401,F403
from .indexing import *  # noqa: E402,F401,F403
from .pointwise import *  # noqa: E402,F401,F403
from .products import *  # noqa: E402,F401,F403
from .reductions import *  # noqa: E402,F401,F403
from .shapes import *  # noqa: E402,F401,F403
from .sorting import *  # noqa: E402,F401,F403

# isort: split
# the creators beyond the everyday ones above (linspace, eye, the *_like…), and the conversions (t.half()…)
from . import creation  # noqa: E402
from .creation import *  # noqa: E402,F401,F403

concat = cat
float32, float64, int64, bool = np.float32, np.float64, np.int64, np.bool_
long, int32, uint8 = np.int64, np.int32, np.uint8

# the floors above the engine, imported once the engine is complete: the reference layer, then the fast
# layer (ta.compile), then the tooling
# isort: split
from . import autograd, interop, nn, optim  # noqa: E402
from .nn.functional import log_softmax, softmax  # noqa: E402

# isort: split
from . import fast  # noqa: E402

# isort: split
from . import func, testing, utils, viz  # noqa: E402
from .autograd import functional as _functional  # noqa: E402,F401  (ta.autograd.functional builds on ta.func)
from .fast.compile import compile  # noqa: E402
from .fast.router import explain  # noqa: E402
from .serialization import CheckpointError, load, save  # noqa: E402

# tinyattn's own names: what ``from tinyattn import *`` binds and what ``help(tinyattn)`` documents. The dtype names
# (``ta.float32``…) are NumPy's classes, left out so that help() does not print NumPy's pages for them and a star
# import does not shadow the builtin ``bool``.
__all__ = [
    "Tensor", "Function", "tensor", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "inference_mode",
    "is_inference_mode_enabled", "manual_seed", "get_rng_state", "set_rng_state",
    "zeros", "ones", "full", "empty", "arange", "randn", "rand", "randint", "zeros_like", "ones_like", "from_numpy",
    "add", "sub", "mul", "div", "pow", "neg", "matmul", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs",
    "sum", "mean", "amax", "var", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "flatten",
    "masked_fill", "where", "cat", "concat", "stack", "split", "chunk",
    "sin", "cos", "clamp", "clone", "cumsum", "std", "max", "min", "maximum", "minimum", "argmax", "argmin",
    "topk",
    "gather", "softmax", "log_softmax", "bmm", "tril", "triu", "repeat_interleave", "all", "any", "nonzero",
    "multinomial", "is_tensor",
    "save", "load", "CheckpointError", "backend", "ops", "nn", "optim", "interop", "testing", "viz", "autograd",
    "compile", "explain", "fast", "utils", "func", "linalg",
]
__all__ += [name for family in (pointwise, comparison, reductions, sorting, shapes, indexing, products)
            for name in family.__all__ if name not in __all__]
__all__ += [name for name in creation.__all__ if name not in __all__]
