"""Floor 3, by family: comparisons, logical and bitwise ops, clamps, elementwise extremes and selections.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.

What carries no gradient (comparisons, logic, bits, ``gcd``) goes through one primitive,
``ops.NoGradElementwise``, so that its result is batched under ``ta.func.vmap`` as its inputs are; what does
(``fmax``, ``clamp_min``, ``nextafter``) is a ``where`` between its operands, whose gradient goes to the operand
chosen, with PyTorch's rule at ties.

>>> import tinyattn as ta
>>> x = ta.tensor([-2.0, 0.5, float("nan")], requires_grad=True)
>>> ta.isnan(x), ta.fmax(x, ta.tensor(0.0))
(tensor([False, False,  True]), tensor([0. , 0.5, 0. ], grad_fn=<Where>))
"""

import functools
import math
import numbers

import numpy as np

from . import checks as check
from .engine import Tensor
from .ops import _lift, _operands, compare, no_grad_elementwise, sum, where
from .ops_extra import clamp

__all__ = [
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "logical_xor", "isclose",
    "allclose", "equal", "isfinite", "isinf", "isposinf", "isneginf", "isnan", "isreal", "isin", "signbit",
    "clamp_min", "clamp_max", "fmax", "fmin", "heaviside", "nextafter", "bitwise_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm",
]


def _tensors(name, input, other):
    """``input`` (a tensor) and ``other`` (a tensor, or a number lifted beside ``input``)."""
    check.tensor(name, "input", input)
    if not isinstance(other, (Tensor, numbers.Number)):
        raise TypeError(f"{name}: other must be a Tensor or a number, got {type(other).__name__}")
    return input, _lift(other, input)


# ----------------------------------------------------------------------------- comparisons


def eq(input, other):
    """Elementwise ``input == other`` as a boolean tensor (``==`` on tensors), compared in the dtype PyTorch
    promotes the two to; carries no gradient.

    Args:
        input: the tensor.
        other: a tensor broadcasting with it, or a number.

    >>> import tinyattn as ta
    >>> ta.eq(ta.tensor([1.0, 2.0, 3.0]), 2)
    tensor([False,  True, False])
    """
    return compare(np.equal, *_tensors("eq", input, other))


def ne(input, other):
    """Elementwise ``input != other`` as a boolean tensor (``!=``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).ne(2)
    tensor([ True, False,  True])
    """
    return compare(np.not_equal, *_tensors("ne", input, other))


def lt(input, other):
    """Elementwise ``input < other`` as a boolean tensor (``<``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).lt(2)
    tensor([ True, False, False])
    """
    return compare(np.less, *_tensors("lt", input, other))


def le(input, other):
    """Elementwise ``input <= other`` as a boolean tensor (``<=``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).le(2)
    tensor([ True,  True, False])
    """
    return compare(np.less_equal, *_tensors("le", input, other))


def gt(input, other):
    """Elementwise ``input > other`` as a boolean tensor (``>``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).gt(ta.tensor([2.0, 2.0, 2.0]))
    tensor([False, False,  True])
    """
    return compare(np.greater, *_tensors("gt", input, other))


def ge(input, other):
    """Elementwise ``input >= other`` as a boolean tensor (``>=``); carries no gradient.

    >>> import tinyattn as ta
    >>> ta.tensor([1.0, 2.0, 3.0]).ge(2)
    tensor([False,  True,  True])
    """
    return compare(np.greater_equal, *_tensors("ge", input, other))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Where ``|input - other| <= atol + rtol·|other|``, elementwise (equal infinities are close; NaN is close to
    NaN only with ``equal_nan``); a boolean tensor. Both must have one dtype, as PyTorch requires.

    Args:
        input, other: tensors of one dtype, broadcasting together.
        rtol, atol: the relative and absolute tolerances.
        equal_nan: count two NaNs as close.

    >>> import tinyattn as ta
    >>> ta.isclose(ta.tensor([1.0, 1.1, float("nan")]), ta.tensor([1.0 + 1e-6, 1.0, float("nan")]))
    tensor([ True, False, False])
    """
    input, other = _tensors("isclose", input, other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"isclose: input and other must have one dtype, got {input.dtype} and {other.dtype}")
    if input.dtype.kind == "b":
        return eq(input, other)
    return no_grad_elementwise(functools.partial(np.isclose, rtol=rtol, atol=atol, equal_nan=equal_nan), input, other)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of ``input`` is close to ``other``'s (``isclose(...).all()``), a Python bool.

    >>> import tinyattn as ta
    >>> ta.allclose(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0 + 1e-7]))
    True
    """
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """Whether the two tensors have one shape and equal elements (NaN equals nothing), a Python bool.

    >>> import tinyattn as ta
    >>> ta.equal(ta.tensor([1, 2]), ta.tensor([1.0, 2.0])), ta.equal(ta.tensor([1, 2]), ta.tensor([[1, 2]]))
    (True, False)
    """
    check.tensor("equal", "input", input)
    check.tensor("equal", "other", other)
    return input.shape == other.shape and bool(eq(input, other).all())


# ----------------------------------------------------------------------------- tests of each element


def isfinite(input):
    """Where an element is neither infinite nor NaN; every element of an integer or boolean tensor is.

    >>> import tinyattn as ta
    >>> ta.isfinite(ta.tensor([1.0, float("inf"), float("nan")]))
    tensor([ True, False, False])
    """
    return no_grad_elementwise(np.isfinite, check.tensor("isfinite", "input", input))


def isinf(input):
    """Where an element is ``+inf`` or ``-inf``.

    >>> import tinyattn as ta
    >>> ta.isinf(ta.tensor([1.0, float("-inf"), float("nan")]))
    tensor([False,  True, False])
    """
    return no_grad_elementwise(np.isinf, check.tensor("isinf", "input", input))


def isposinf(input):
    """Where an element is ``+inf``.

    >>> import tinyattn as ta
    >>> ta.isposinf(ta.tensor([float("inf"), float("-inf"), 1.0]))
    tensor([ True, False, False])
    """
    return eq(input, math.inf)


def isneginf(input):
    """Where an element is ``-inf``.

    >>> import tinyattn as ta
    >>> ta.isneginf(ta.tensor([float("inf"), float("-inf"), 1.0]))
    tensor([False,  True, False])
    """
    return eq(input, -math.inf)


def isnan(input):
    """Where an element is NaN (the one value not equal to itself).

    >>> import tinyattn as ta
    >>> ta.isnan(ta.tensor([1.0, float("nan")]))
    tensor([False,  True])
    """
    return no_grad_elementwise(np.isnan, check.tensor("isnan", "input", input))


def isreal(input):
    """Where an element has no imaginary part: everywhere, tinyattn's tensors being real.

    >>> import tinyattn as ta
    >>> ta.isreal(ta.tensor([1.0, 2.0]))
    tensor([ True,  True])
    """
    return no_grad_elementwise(functools.partial(np.ones_like, dtype=bool), check.tensor("isreal", "input", input))


def signbit(input):
    """Where an element's sign bit is set: negative numbers, ``-0.0`` and ``-inf`` (and a NaN with its sign bit).

    >>> import tinyattn as ta
    >>> ta.signbit(ta.tensor([-1.0, -0.0, 0.0, 2.0]))
    tensor([ True,  True, False, False])
    """
    return no_grad_elementwise(np.signbit, check.tensor("signbit", "input", input))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Where each of ``elements`` equals one of ``test_elements`` (``invert``: equals none), a boolean tensor of
    ``elements``' shape: ``any(elements[..., None] == test_elements.flatten(), dim=-1)``, every pair compared.

    Args:
        elements: a tensor (or a number, beside a tensor ``test_elements``).
        test_elements: a tensor of any shape, or a number.
        assume_unique: accepted for PyTorch's signature (the result does not depend on it).
        invert: ``True`` where an element is in none of them.

    >>> import tinyattn as ta
    >>> ta.isin(ta.tensor([[1, 2], [3, 4]]), ta.tensor([2, 3]))
    tensor([[False,  True],
            [ True, False]])
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin: elements or test_elements must be a Tensor, got {type(elements).__name__} and "
                        f"{type(test_elements).__name__}")
    elements = _lift(elements, test_elements)
    test_elements = _lift(test_elements, elements)
    pairs = eq(elements.unsqueeze(-1), test_elements.reshape(-1))  # (*elements.shape, test_elements.numel())
    found = sum(pairs, dim=-1) > 0
    return logical_not(found) if invert else found


# ----------------------------------------------------------------------------- logic


def logical_not(input):
    """Elementwise logical not: ``True`` where an element is zero (or ``False``).

    >>> import tinyattn as ta
    >>> ta.tensor([0.0, 2.0]).logical_not()
    tensor([ True, False])
    """
    return no_grad_elementwise(np.logical_not, check.tensor("logical_not", "input", input))


def logical_and(input, other):
    """Elementwise logical and: ``True`` where both elements are non-zero.

    >>> import tinyattn as ta
    >>> ta.logical_and(ta.tensor([0.0, 1.0, 2.0]), ta.tensor([1, 1, 0]))
    tensor([False,  True, False])
    """
    return no_grad_elementwise(np.logical_and, *_tensors("logical_and", input, other))


def logical_or(input, other):
    """Elementwise logical or: ``True`` where either element is non-zero.

    >>> import tinyattn as ta
    >>> ta.logical_or(ta.tensor([0.0, 1.0, 0.0]), ta.tensor([1, 0, 0]))
    tensor([ True,  True, False])
    """
    return no_grad_elementwise(np.logical_or, *_tensors("logical_or", input, other))


def logical_xor(input, other):
    """Elementwise logical exclusive or: ``True`` where exactly one of the two elements is non-zero.

    >>> import tinyattn as ta
    >>> ta.logical_xor(ta.tensor([0.0, 1.0, 2.0]), ta.tensor([1, 1, 0]))
    tensor([ True, False,  True])
    """
    return no_grad_elementwise(np.logical_xor, *_tensors("logical_xor", input, other))


# ----------------------------------------------------------------------------- bits and integers


def _integer_operands(name, input, other, kinds="biu"):
    """``input`` and ``other`` promoted to one dtype, which must be integer (or boolean, in ``kinds``)."""
    input, other = _operands(*_tensors(name, input, other))
    if input.dtype.kind not in kinds:
        raise NotImplementedError(f"{name}: not implemented for dtype {input.dtype}: it takes integer"
                                  f"{' or boolean' if 'b' in kinds else ''} tensors")
    return input, other


def bitwise_not(input):
    """Elementwise bitwise not (``~``): ``-x - 1`` for integers, logical not for booleans.

    >>> import tinyattn as ta
    >>> ta.bitwise_not(ta.tensor([0, 5, -1])), ~ta.tensor([True, False])
    (tensor([-1, -6,  0]), tensor([False,  True]))
    """
    check.tensor("bitwise_not", "input", input)
    if input.dtype.kind not in "biu":
        raise NotImplementedError(f"bitwise_not: not implemented for dtype {input.dtype}: it takes integer or "
                                  "boolean tensors")
    return no_grad_elementwise(np.invert, input)


def bitwise_and(input, other):
    """Elementwise bitwise and (``&``) of integer or boolean tensors (or a number).

    >>> import tinyattn as ta
    >>> ta.bitwise_and(ta.tensor([12, 10]), ta.tensor([10, 6])), ta.tensor([True, False]) & True
    (tensor([8, 2]), tensor([ True, False]))
    """
    return no_grad_elementwise(np.bitwise_and, *_integer_operands("bitwise_and", input, other))


def bitwise_or(input, other):
    """Elementwise bitwise or (``|``) of integer or boolean tensors (or a number).

    >>> import tinyattn as ta
    >>> ta.bitwise_or(ta.tensor([12, 10]), ta.tensor([10, 6]))
    tensor([14, 14])
    """
    return no_grad_elementwise(np.bitwise_or, *_integer_operands("bitwise_or", input, other))


def bitwise_xor(input, other):
    """Elementwise bitwise exclusive or (``^``) of integer or boolean tensors (or a number).

    >>> import tinyattn as ta
    >>> ta.bitwise_xor(ta.tensor([12, 10]), ta.tensor([10, 6]))
    tensor([ 6, 12])
    """
    return no_grad_elementwise(np.bitwise_xor, *_integer_operands("bitwise_xor", input, other))


def bitwise_left_shift(input, other):
    """Elementwise ``input << other``, integers: ``input · 2**other`` in two's complement; a shift by a negative
    count or by the width or more gives 0, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.bitwise_left_shift(ta.tensor([1, 3]), ta.tensor([4, 1]))
    tensor([16,  6])
    """
    return no_grad_elementwise(np.left_shift, *_integer_operands("bitwise_left_shift", input, other, "iu"))


def bitwise_right_shift(input, other):
    """Elementwise ``input >> other``, integers (arithmetic: the sign bit fills in); a shift by a negative count or
    by the width or more gives 0, or -1 for a negative ``input``, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.bitwise_right_shift(ta.tensor([16, -16]), 2)
    tensor([ 4, -4])
    """
    return no_grad_elementwise(np.right_shift, *_integer_operands("bitwise_right_shift", input, other, "iu"))


def gcd(input, other):
    """Elementwise greatest common divisor of integers, never negative; ``gcd(0, 0) = 0``.

    >>> import tinyattn as ta
    >>> ta.gcd(ta.tensor([12, -9, 0]), ta.tensor([18, 6, 0]))
    tensor([6, 3, 0])
    """
    return no_grad_elementwise(np.gcd, *_integer_operands("gcd", input, other, "iu"))


def lcm(input, other):
    """Elementwise least common multiple of integers, never negative; 0 where either is 0.

    >>> import tinyattn as ta
    >>> ta.lcm(ta.tensor([4, -6, 0]), ta.tensor([6, 4, 5]))
    tensor([12, 12,  0])
    """
    return no_grad_elementwise(np.lcm, *_integer_operands("lcm", input, other, "iu"))


def _heaviside(input, values):
    step = np.where(input == 0, values, input > 0)  # (a NaN input is neither 0 nor positive: 0, as in PyTorch)
    return step.astype(input.dtype, copy=False)


def heaviside(input, values):
    """The step function: 0 where ``input < 0``, ``values`` where ``input == 0``, 1 where ``input > 0`` (and 0 at
    NaN, as PyTorch gives); no gradient. ``input`` and ``values`` must have one dtype, as PyTorch requires.

    >>> import tinyattn as ta
    >>> ta.heaviside(ta.tensor([-1.5, 0.0, 2.0]), ta.tensor(0.5))
    tensor([0. , 0.5, 1. ])
    """
    check.tensor("heaviside", "values", values)
    input, values = _tensors("heaviside", input, values)
    if input.dtype != values.dtype:
        raise RuntimeError(f"heaviside: input and values must have one dtype, got {input.dtype} and "
                           f"{values.dtype}")
    return no_grad_elementwise(_heaviside, input, values)


# ----------------------------------------------------------------------------- extremes and clamps


def fmax(input, other):
    """The elementwise maximum, ignoring NaN (NaN only where both are): ``where(input >= other or other is NaN,
    input, other)``. The gradient goes to the value chosen; ties give it to ``input``, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.fmax(ta.tensor([1.0, float("nan"), 3.0]), ta.tensor([2.0, 2.0, float("nan")]))
    tensor([2., 2., 3.])
    """
    input, other = _tensors("fmax", input, other)
    return where(logical_or(input >= other, isnan(other)), input, other)


def fmin(input, other):
    """The elementwise minimum, ignoring NaN (NaN only where both are): ``where(input <= other or other is NaN,
    input, other)``. The gradient goes to the value chosen; ties give it to ``input``, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.fmin(ta.tensor([1.0, float("nan"), 3.0]), ta.tensor([2.0, 2.0, float("nan")]))
    tensor([1., 2., 3.])
    """
    input, other = _tensors("fmin", input, other)
    return where(logical_or(input <= other, isnan(other)), input, other)


def clamp_min(input, min):
    """Every element at least ``min`` (``clamp(input, min=min)``); ``min`` may be a tensor, which then gets the
    gradient where it was chosen.

    >>> import tinyattn as ta
    >>> ta.clamp_min(ta.tensor([-1.0, 2.0]), ta.tensor([0.0, 3.0]))
    tensor([0., 3.])
    """
    return clamp(input, min=min)


def clamp_max(input, max):
    """Every element at most ``max`` (``clamp(input, max=max)``); ``max`` may be a tensor, which then gets the
    gradient where it was chosen.

    >>> import tinyattn as ta
    >>> ta.clamp_max(ta.tensor([-1.0, 2.0]), 1.0)
    tensor([-1.,  1.])
    """
    return clamp(input, max=max)


def nextafter(input, other):
    """The next floating-point value after ``input`` towards ``other`` (``other`` itself where they are equal).

    Its gradient is PyTorch's: 1 for ``input``, none for ``other``. That is ``input + step`` with the step
    ``nextafter(input, other) - input`` held constant; at an infinite ``input`` (where the step is not a
    number) the value is taken as it is, and the gradient there is 0.

    >>> import tinyattn as ta
    >>> x = ta.tensor([1.0, 1.0], dtype=ta.float64)
    >>> (ta.nextafter(x, ta.tensor([2.0, 0.0], dtype=ta.float64)) - x).tolist()
    [2.220446049250313e-16, -1.1102230246251565e-16]
    """
    input, other = _operands(*_tensors("nextafter", input, other))
    if input.dtype.kind != "f":
        raise NotImplementedError(f"nextafter: not implemented for dtype {input.dtype}: it takes floating-point "
                                  "tensors")
    after = no_grad_elementwise(np.nextafter, input, other)
    return where(isfinite(input), input + (after - input.detach()), after)


# ----------------------------------------------------------------------------- Tensor methods


def _where(self, condition, other):
    """``ta.where(condition, self, other)``: this tensor where ``condition`` holds, else ``other``.

    Args:
        condition: a boolean tensor.
        other: a tensor or a number.

    >>> import tinyattn as ta
    >>> x = ta.tensor([-1.0, 2.0])
    >>> x.where(x > 0, 0.0)
    tensor([0., 2.])
    """
    return where(condition, self, other)


def _reflected(operation):
    def reflected(self, other):
        return operation(_lift(other, self), self)

    reflected.__name__ = f"__r{operation.__name__.split('_')[1]}__"
    return reflected


for _name in __all__:
    if _name not in ("isin",):  # (torch has no Tensor.isin)
        setattr(Tensor, _name, globals()[_name])
Tensor.where = _where
Tensor.__invert__ = bitwise_not
Tensor.__and__, Tensor.__or__, Tensor.__xor__ = bitwise_and, bitwise_or, bitwise_xor
Tensor.__rand__, Tensor.__ror__, Tensor.__rxor__ = map(_reflected, (bitwise_and, bitwise_or, bitwise_xor))
Tensor.__lshift__, Tensor.__rshift__ = bitwise_left_shift, bitwise_right_shift
