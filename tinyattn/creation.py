"""Creation functions: new leaf tensors filled with constants, ranges or random numbers.

Each takes ``dtype=`` (float32 by default, as in PyTorch), ``device=`` and
``requires_grad=``. Random draws come from the library's generator, seeded by
``ta.manual_seed``.

>>> import tinyattn as ta
>>> ta.zeros(2, 3).shape, ta.arange(4).dtype
((2, 3), dtype('int64'))
"""

import math
import numbers

import numpy as np

from . import backend, modes
from . import checks as check
from .engine import Tensor


def _shape(size, name):
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``: non-negative integers."""
    return check.shape(name, "size", size)


def _leaf(array, requires_grad):
    t = Tensor._wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.zeros(_shape(size, "zeros"), dtype=dtype or np.float32), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """Uninitialised in PyTorch; zeros here, so that nothing depends on leftover memory."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.ones(_shape(size, "ones"), dtype=dtype or np.float32), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    xp = backend.namespace_for(device or "cpu")
    if dtype is None:  # as PyTorch infers it: bool, int64, else float32
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = np.bool_
        else:
            dtype = np.int64 if isinstance(fill_value, numbers.Integral) else np.float32
    size = (size,) if isinstance(size, numbers.Integral) else size
    return _leaf(xp.full(_shape((size,), "full"), fill_value, dtype=dtype), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """``[start, end)`` by ``step``; int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    for arg, value in (("start", start), ("end", end), ("step", step)):
        check.real("arange", arg, value)
        if arg != "step" and not math.isfinite(value):
            raise ValueError(f"arange: {arg} must be finite, got {value}")
    if step == 0 or (end > start and step < 0) or (end < start and step > 0):
        raise ValueError(f"arange: step {step} must be non-zero and go from start {start} towards end {end}")
    if dtype is None:
        integral = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = np.int64 if integral else np.float32
    xp = backend.namespace_for(device or "cpu")
    if math.isinf(step):  # PyTorch gives no values for an infinite step
        end = start
    try:
        values = xp.arange(start, end, step, dtype=dtype)
    except (ValueError, MemoryError):  # NumPy: "Maximum allowed size exceeded"
        raise ValueError(f"arange: {start} to {end} by {step} gives too many values") from None
    return _leaf(values, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal samples from the library's seeded generator."""
    dtype, device = np.dtype(dtype or np.float32), device or "cpu"
    return _random(lambda shape: backend.random_normal(shape, dtype, device), _shape(size, "randn"), requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) from the library's seeded generator."""
    dtype, device = np.dtype(dtype or np.float32), device or "cpu"
    return _random(lambda shape: backend.random_uniform(shape, dtype, device), _shape(size, "rand"), requires_grad)


def _random(draw, shape, requires_grad):
    """``draw(shape)`` as a leaf; inside ``vmap(randomness="different")``, one draw per example (``tensor``'s
    ``per_example`` mode makes the batched tensor)."""
    per_example = modes.current().per_example
    if per_example is not None:
        return per_example(draw, shape)
    return _leaf(draw(shape), requires_grad)


def zeros_like(t, dtype=None, device=None, requires_grad=False):
    check.tensor("zeros_like", "input", t)
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    check.tensor("ones_like", "input", t)
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def tensor(data, requires_grad=False, dtype=None, device=None):
    """A new leaf tensor holding a copy of ``data``, as ``torch.tensor`` does; dtype rules in ``Tensor``.

    (``Tensor(array)`` and ``nn.Parameter(array)`` share a backend array instead.)

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> host = np.zeros(2)
    >>> t = ta.tensor(host)
    >>> host[0] = 1.0
    >>> t.numpy(), t.dtype
    (array([0., 0.]), dtype('float64'))
    """
    source = data._data if isinstance(data, Tensor) else data
    t = Tensor(source, requires_grad=requires_grad, dtype=dtype, device=device)
    if t._data is source:
        t._data = source.copy()
    return t
