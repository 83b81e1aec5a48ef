"""Creation functions: new leaf tensors filled with constants, ranges or random numbers; and the conversions to
another dtype (``t.half()``, ``t.short()``…).

Each takes ``dtype=`` (float32 by default, as in PyTorch), ``device=`` and
``requires_grad=``. Random draws come from the library's generator, seeded by
``ta.manual_seed``; every one of them takes float16 too (``backend`` draws float32 and rounds).

>>> import tinyattn as ta
>>> ta.zeros(2, 3).shape, ta.arange(4).dtype
((2, 3), dtype('int64'))
"""

import math
import numbers

import numpy as np

from . import backend, modes
from . import checks as check
from .engine import Tensor, no_grad

__all__ = [
    "tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "scalar_tensor",
    "tril_indices", "triu_indices", "zeros_like", "ones_like", "full_like", "empty_like", "randn", "rand",
    "randint", "randn_like", "rand_like", "randint_like", "fill", "zero_",
]


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
        fill_value: the number (or a one-element tensor's); without ``dtype``, a bool gives bool, an int int64, else
            float32 (as PyTorch infers). ``None`` or a string raises ``TypeError``, as in PyTorch.
        dtype: the result's dtype.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.full((2,), 7), ta.full(2, 0.5)
    (tensor([7, 7]), tensor([0.5, 0.5]))
    """
    fill_value = check.number("full", "fill_value", fill_value)
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
    start, end, step = (int(v) if isinstance(v, (bool, np.bool_)) else v for v in (start, end, step))  # as torch
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


def _endpoint(name, arg, value, device):
    """``linspace``'s ``start`` or ``end`` as a float64 0-d tensor: a number, or a 0-d tensor (under ``vmap`` a
    batched one, whose examples then each get their own range)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"{name}: {arg} must be a number or a 0-dimensional tensor, got shape {value.shape}")
        return value.detach().to(np.float64)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    return Tensor._wrap(backend.namespace_for(device).asarray(check.real(name, arg, value), dtype=np.float64))


def _evenly_spaced(name, start, end, steps, device):
    """``steps`` values from ``start`` to ``end``, float64, computed as PyTorch computes them: with
    ``step = (end - start) / (steps - 1)``, value ``i`` is ``start + i·step`` in the first half and
    ``end - (steps - 1 - i)·step`` in the second, so that both ends come out exact (one step: ``start``)."""
    steps = check.integer(name, "steps", steps)
    if steps < 0:
        raise RuntimeError(f"{name}: number of steps must be non-negative, got {steps}")
    device = device or next((v.device for v in (start, end) if isinstance(v, Tensor)), "cpu")
    with no_grad():
        start, end = _endpoint(name, "start", start, device), _endpoint(name, "end", end, device)
        i = arange(steps, dtype=np.float64, device=device)  # (steps,)
        step = (end - start) / max(steps - 1, 1)
        first = (i < max(steps // 2, 1)).to(np.float64)  # (steps,): 1 in the first half, 0 in the second
        return first * (start + step * i) + (1 - first) * (end - step * (steps - 1 - i))  # (steps,)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included.

    With ``step = (end - start) / (steps - 1)``, value ``i`` is ``start + i·step`` in the first half and
    ``end - (steps - 1 - i)·step`` in the second (PyTorch's formula, exact at both ends); computed in float64,
    then converted to ``dtype`` (an integer dtype truncates towards zero, as PyTorch's does).

    Args:
        start, end: the first and last values: numbers, or 0-d tensors.
        steps: how many values, a non-negative integer.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy); by default a tensor argument's, else ``"cpu"``.
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.linspace(0, 1, 5), ta.linspace(-2, 3, 4, dtype=ta.int64)
    (tensor([0.  , 0.25, 0.5 , 0.75, 1.  ]), tensor([-2,  0,  1,  3]))
    """
    values = _evenly_spaced("linspace", start, end, steps, device)
    return _converted(values, dtype, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values ``base ** e`` for ``e`` evenly spaced from ``start`` to ``end`` (``linspace``'s values).

    Args:
        start, end: the first and last exponents: numbers, or 0-d tensors.
        steps: how many values, a non-negative integer.
        base: the base of the powers.
        dtype: float32 by default (an integer dtype truncates towards zero).
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy); by default a tensor argument's, else ``"cpu"``.
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.logspace(0, 3, 4), ta.logspace(-1, 1, 3, base=2.0)
    (tensor([   1.,   10.,  100., 1000.]), tensor([0.5, 1. , 2. ]))
    """
    base = check.real("logspace", "base", base)
    exponents = _evenly_spaced("logspace", start, end, steps, device)
    with no_grad():
        values = base ** exponents
    return _converted(values, dtype, requires_grad)


def _converted(values, dtype, requires_grad):
    """A computed float64 range as a leaf of ``dtype`` (float32 by default)."""
    with no_grad():
        values = values.to(np.float32 if dtype is None else dtype)
    return values.requires_grad_(True) if requires_grad else values


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The ``(n, m)`` matrix with ones on the diagonal and zeros elsewhere.

    Args:
        n: the number of rows.
        m: the number of columns, ``n`` by default.
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    n = check.integer("eye", "n", n)
    m = n if m is None else check.integer("eye", "m", m)
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be greater or equal to 0, got n={n}, m={m}")
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.eye(n, m, dtype=dtype or np.float32), requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number ``s``: float32 by default, whatever kind of number ``s`` is (as PyTorch's).

    Args:
        s: a number (a bool, an integer or a float).
        dtype: float32 by default.
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).
        requires_grad: make the result a leaf that records operations.

    >>> import tinyattn as ta
    >>> ta.scalar_tensor(3), ta.scalar_tensor(True, dtype=ta.int64)
    (tensor(3.), tensor(1))
    """
    s = check.number("scalar_tensor", "s", s)
    xp = backend.namespace_for(device or "cpu")
    return _leaf(xp.asarray(s, dtype=dtype or np.float32), requires_grad)


def _triangle_indices(name, row, col, offset, dtype, device, lower):
    row, col = check.size(name, "row", row), check.size(name, "col", col)
    offset = check.integer(name, "offset", offset)
    dtype = np.dtype(dtype or np.int64)
    if dtype.kind not in "iu":
        raise NotImplementedError(f"{name}: indices are integers: dtype must be an integer dtype, got {dtype}")
    rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)  # row-major order
    indices = np.stack([rows, cols]).astype(dtype)  # (2, N)
    return Tensor._wrap(backend.to_device(indices, device or "cpu"))


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The indices of the lower triangle of a ``(row, col)`` matrix, as a ``(2, N)`` tensor: its row indices, then
    its column indices, in row-major order. Element ``(i, j)`` is in the triangle when ``j - i <= offset``.

    Args:
        row, col: the matrix's sizes.
        offset: the diagonal that bounds the triangle: 0 the main one, positive above it, negative below.
        dtype: int64 by default (an integer dtype).
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).

    >>> import tinyattn as ta
    >>> ta.tril_indices(3, 3)
    tensor([[0, 1, 1, 2, 2, 2],
            [0, 0, 1, 0, 1, 2]])
    """
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, lower=True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The indices of the upper triangle of a ``(row, col)`` matrix, as a ``(2, N)`` tensor: its row indices, then
    its column indices, in row-major order. Element ``(i, j)`` is in the triangle when ``j - i >= offset``.

    Args:
        row, col: the matrix's sizes.
        offset: the diagonal that bounds the triangle: 0 the main one, positive above it, negative below.
        dtype: int64 by default (an integer dtype).
        device: ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy).

    >>> import tinyattn as ta
    >>> ta.triu_indices(2, 3, 1)
    tensor([[0, 0, 1],
            [1, 2, 2]])
    """
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, lower=False)


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


def _uniform(shape, device, generator):
    """Uniform float64 draws in ``[0, 1)``: from the library's generator, or from ``generator`` (a
    ``numpy.random.Generator`` the caller keeps, for draws of their own stream; host only)."""
    if generator is None:
        return backend.random_uniform(shape, np.dtype(np.float64), device)
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator, got {type(generator).__name__}")
    return backend.to_device(generator.random(shape), device) if device != "cpu" else generator.random(shape)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform integers in ``[low, high)`` from the library's seeded generator (``randint(high, size)`` starts at 0):
    ``floor(low + u·(high - low))`` for ``u`` uniform in ``[0, 1)``, drawn in float64.

    Args:
        low, high: the bounds (``high`` excluded).
        size: the result's shape, a tuple.
        generator: a ``numpy.random.Generator`` to draw from instead.
        dtype: int64 by default (a float dtype, float16 included, holds the same integers).
        device: ``"cpu"`` or ``"cuda"``.
        requires_grad: make the result a leaf that records operations (a floating-point dtype).

    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> x = ta.randint(3, 6, (2, 4))
    >>> x.shape, x.dtype, ((x >= 3) & (x < 6)).all().item()
    ((2, 4), dtype('int64'), True)
    """
    if size is None:
        low, high, size = 0, low, high
    draws = _uniform(check.shape("randint", "size", (size,)), device or "cpu", generator)
    xp = backend.namespace(draws)
    return _leaf(xp.floor(low + draws * (high - low)).astype(dtype or np.int64), requires_grad)


def _random(draw, shape, requires_grad):
    """``draw(shape)`` as a leaf; inside ``vmap(randomness="different")``, one draw per example (``tensor``'s
    ``per_example`` mode makes the batched tensor)."""
    per_example = modes.current().per_example
    if per_example is not None:
        return per_example(draw, shape)
    return _leaf(draw(shape), requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """A new tensor of zeros with ``input``'s shape, and its dtype and device unless given.

    Args:
        input: the tensor whose shape is taken.
        dtype: ``input``'s by default.
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.zeros_like(ta.tensor([[1, 2]]))
    tensor([[0, 0]])
    """
    check.tensor("zeros_like", "input", input)
    return zeros(input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """A new tensor of ones with ``input``'s shape, and its dtype and device unless given.

    Args:
        input: the tensor whose shape is taken.
        dtype: ``input``'s by default.
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.ones_like(ta.zeros(2), dtype=ta.float64)
    tensor([1., 1.], dtype=float64)
    """
    check.tensor("ones_like", "input", input)
    return ones(input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """A new tensor of ``input``'s shape filled with ``fill_value``, with its dtype and device unless given.

    Args:
        input: the tensor whose shape is taken.
        fill_value: the number (``None`` or a string raises ``TypeError``, as in PyTorch).
        dtype: ``input``'s by default.
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.full_like(ta.zeros(2, dtype=ta.float64), 7)
    tensor([7., 7.], dtype=float64)
    """
    check.tensor("full_like", "input", input)
    return full(input.shape, check.number("full_like", "fill_value", fill_value), dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """A new tensor of ``input``'s shape, with its dtype and device unless given: uninitialised in PyTorch, zeros
    here (as ``empty``).

    Args:
        input: the tensor whose shape is taken.
        dtype: ``input``'s by default.
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.empty_like(ta.ones(2))
    tensor([0., 0.])
    """
    check.tensor("empty_like", "input", input)
    return empty(input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Standard normal samples of ``input``'s shape, with its dtype and device unless given (``randn``).

    Args:
        input: the tensor whose shape is taken.
        dtype: ``input``'s by default (a floating-point dtype).
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.randn_like(ta.zeros(2, 3, dtype=ta.float64)).dtype
    dtype('float64')
    """
    check.tensor("randn_like", "input", input)
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uniform samples in ``[0, 1)`` of ``input``'s shape, with its dtype and device unless given (``rand``).

    Args:
        input: the tensor whose shape is taken.
        dtype: ``input``'s by default (a floating-point dtype).
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations.
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> ta.rand_like(ta.zeros(4)).shape
    (4,)
    """
    check.tensor("rand_like", "input", input)
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uniform integers in ``[low, high)`` of ``input``'s shape, with its dtype and device unless given
    (``randint``); ``randint_like(input, high)`` starts at 0.

    Args:
        input: the tensor whose shape is taken.
        low, high: the bounds (``high`` excluded).
        dtype: ``input``'s by default.
        device: ``input``'s by default.
        requires_grad: make the result a leaf that records operations (a floating-point dtype).
        memory_format: accepted as in PyTorch; NumPy lays the array out.

    >>> import tinyattn as ta
    >>> x = ta.randint_like(ta.zeros(3, dtype=ta.int64), 5)
    >>> x.dtype, ((x >= 0) & (x < 5)).all().item()
    (dtype('int64'), True)
    """
    check.tensor("randint_like", "input", input)
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype, device=device or input.device,
                   requires_grad=requires_grad)


def fill(input, value):
    """A new tensor of ``input``'s shape, dtype and device with every element ``value`` (``input.clone().fill_(value)``:
    in the graph, with a gradient of zeros for ``input``, as PyTorch's ``torch.fill``).

    Args:
        input: the tensor whose shape, dtype and device are taken.
        value: the number (or a one-element tensor's).

    >>> import tinyattn as ta
    >>> ta.fill(ta.zeros(3), 2)
    tensor([2., 2., 2.])
    """
    check.tensor("fill", "input", input)
    return input.clone().fill_(value)


def zero_(input):
    """``input.zero_()``: every element of ``input`` set to zero, in place; returns ``input``.

    Args:
        input: the tensor to write into.

    >>> import tinyattn as ta
    >>> ta.zero_(ta.ones(2))
    tensor([0., 0.])
    """
    check.tensor("zero_", "input", input)
    return input.zero_()


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


# ----------------------------------------------------------------------------- conversions (``to(dtype)``)


def _half(self, memory_format=None):
    """The tensor as float16 (``to(np.float16)``), differentiable; ``memory_format`` is accepted as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.5]).half()
    tensor([1. , 2.5], dtype=float16)
    """
    return self.to(np.float16)


def _short(self, memory_format=None):
    """The tensor as int16 (``to(np.int16)``), truncating towards zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, -1.7]).short()
    tensor([ 1, -1], dtype=int16)
    """
    return self.to(np.int16)


def _char(self, memory_format=None):
    """The tensor as int8 (``to(np.int8)``, PyTorch's ``char``), truncating towards zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, -1.7]).char()
    tensor([ 1, -1], dtype=int8)
    """
    return self.to(np.int8)


def _byte(self, memory_format=None):
    """The tensor as uint8 (``to(np.uint8)``, PyTorch's ``byte``), truncating towards zero; carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.7, 200.0]).byte()
    tensor([  1, 200], dtype=uint8)
    """
    return self.to(np.uint8)


Tensor.half, Tensor.short, Tensor.char, Tensor.byte = _half, _short, _char, _byte
