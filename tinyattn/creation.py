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
    """A new tensor of zeros.

    Args:
        size: sizes as ``zeros(2, 3)`` or ``zeros((2, 3))``.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.zeros(2, 3).shape, ta.zeros(2, dtype=ta.int64)
    ((2, 3), tensor([0, 0]))
    """
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.zeros(_shape(size, "zeros"), dtype=dtype or np.float32), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A new tensor of the given size: uninitialised in PyTorch, zeros here, so nothing depends on leftover memory.

    Args:
        size: sizes as ``empty(2, 3)`` or ``empty((2, 3))``.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.empty(2)
    tensor([0., 0.])
    """
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A new tensor of ones.

    Args:
        size: sizes as ``ones(2, 3)`` or ``ones((2, 3))``.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.ones(2, requires_grad=True)
    tensor([1., 1.], requires_grad=True)
    """
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.ones(_shape(size, "ones"), dtype=dtype or np.float32), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A new tensor of ``size`` filled with ``fill_value``.

    Args:
        size: an int or a tuple of sizes.
        fill_value: the number; without ``dtype``, a bool gives bool, an int int64, else float32 (as PyTorch infers).
        dtype: the result's dtype.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.full((2,), 7), ta.full(2, 0.5)
    (tensor([7, 7]), tensor([0.5, 0.5]))
    """
    xp = backend.namespace_for(device or "cpu")
    if dtype is None:  # as PyTorch infers it: bool, int64, else float32
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = np.bool_
        else:
            dtype = np.int64 if isinstance(fill_value, numbers.Integral) else np.float32
    size = (size,) if isinstance(size, numbers.Integral) else size
    return _leaf(xp.full(_shape((size,), "full"), fill_value, dtype=dtype), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values ``[start, end)`` by ``step``: int64 for integer arguments, else float32.

    Args:
        start: the first value (``arange(end)`` starts at 0).
        end: the bound, excluded.
        step: the spacing, non-zero, pointing from ``start`` towards ``end``.
        dtype: the result's dtype.
        device: ``"cpu"`` or ``"cuda"``.
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.arange(4), ta.arange(1, 2, 0.25)
    (tensor([0, 1, 2, 3]), tensor([1.  , 1.25, 1.5 , 1.75]))
    """
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
    """Standard normal samples from the library's generator (seeded by ``ta.manual_seed``).

    Args:
        size: sizes as ``randn(2, 3)`` or ``randn((2, 3))``.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.randn(2, 3)
    >>> _ = ta.manual_seed(0)
    >>> x.shape, x.dtype, (ta.randn(2, 3) == x).all().item()
    ((2, 3), dtype('float32'), True)
    """
    dtype, device = np.dtype(dtype or np.float32), device or "cpu"
    return _random(lambda shape: backend.random_normal(shape, dtype, device), _shape(size, "randn"), requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform samples in ``[0, 1)`` from the library's generator (seeded by ``ta.manual_seed``).

    Args:
        size: sizes as ``rand(2, 3)`` or ``rand((2, 3))``.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.rand(1000)
    >>> x.shape, ((x >= 0) & (x < 1)).all().item()
    ((1000,), True)
    """
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
    """A new tensor of zeros with ``t``'s shape, and its dtype and device unless given.

    Args:
        t: the tensor whose shape is taken.
        dtype: ``t``'s by default.
        device: ``t``'s by default.
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.zeros_like(ta.tensor([[1, 2]]))
    tensor([[0, 0]])
    """
    check.tensor("zeros_like", "input", t)
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    """A new tensor of ones with ``t``'s shape, and its dtype and device unless given.

    Args:
        t: the tensor whose shape is taken.
        dtype: ``t``'s by default.
        device: ``t``'s by default.
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.ones_like(ta.zeros(2), dtype=ta.float64)
    tensor([1., 1.], dtype=float64)
    """
    check.tensor("ones_like", "input", t)
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def tensor(data, requires_grad=False, dtype=None, device=None):
    """A new leaf tensor holding a copy of ``data``, as ``torch.tensor`` does.

    Float Python data becomes float32; a NumPy or CuPy array keeps its dtype; integer data stays integer.
    (``Tensor(array)`` and ``nn.Parameter(array)`` share a backend array instead.)

    Args:
        data: a Python number or (nested) list, a NumPy or CuPy array, or a tensor (its data is copied).
        requires_grad: make the result a leaf that records operations.
        dtype: convert to this dtype.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> host = np.zeros(2)
    >>> t = ta.tensor(host)
    >>> host[0] = 1.0
    >>> t.numpy(), t.dtype
    (array([0., 0.]), dtype('float64'))
    >>> ta.tensor([1, 2]).dtype, ta.tensor([1.0, 2.0], requires_grad=True)
    (dtype('int64'), tensor([1., 2.], requires_grad=True))
    """
    source = data._data if isinstance(data, Tensor) else data
    t = Tensor(source, requires_grad=requires_grad, dtype=dtype, device=device)
    if t._data is source:
        t._data = source.copy()
    return t
