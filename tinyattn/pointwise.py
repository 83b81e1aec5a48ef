"""Floor 3, by family: elementwise math: the trigonometric, hyperbolic, exponential and logarithmic families, erf and
its kin, rounding, remainders, and the arithmetic with PyTorch's extra arguments.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's. A function of floats takes an
integer or boolean tensor as float32 (PyTorch's default dtype); float16 stays float16.

>>> import tinyattn as ta
>>> x = ta.tensor([0.5, 2.0], requires_grad=True)
>>> ta.log1p(x).backward(ta.ones(2))         # d/dx log(1 + x) = 1 / (1 + x)
>>> x.grad
array([0.6666667 , 0.33333334], dtype=float32)
"""

import collections
import functools
import math

import numpy as np

from . import backend
from .engine import OUTPUT, Function, Tensor
from .ops import (
    _Binary,
    _lift,
    _operands,
    abs,
    add,
    aligned,
    div,
    exp,
    float_input,
    log,
    mul,
    namespace,
    neg,
    piecewise,
    sqrt,
    sub,
    sum_to,
    where,
)
from .ops_extra import clamp, cos, sin

__all__ = [
    "add", "sub", "mul", "div", "divide", "true_divide", "rsub", "neg", "negative", "positive",
    "asin", "arcsin", "acos", "arccos", "atan", "arctan", "atan2", "arctan2", "tan",
    "sinh", "cosh", "asinh", "arcsinh", "acosh", "arccosh", "atanh", "arctanh",
    "exp2", "expm1", "log1p", "log2", "log10", "logaddexp", "logaddexp2", "logit",
    "erf", "erfc", "erfinv",
    "ceil", "floor", "round", "trunc", "fix", "frac", "sign", "sgn",
    "reciprocal", "rsqrt", "square", "sinc", "deg2rad", "rad2deg", "xlogy", "hypot", "copysign",
    "fmod", "remainder", "floor_divide", "float_power", "lerp", "addcmul", "addcdiv", "nan_to_num", "frexp", "ldexp",
]

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _special(name, x):
    """SciPy's special function ``name`` (a ufunc) on ``x``, on ``x``'s device (CuPy's on a GPU), in its dtype."""
    if backend.device_of(x) == "cuda":
        from cupyx.scipy import special
    else:
        from scipy import special  # the strict test array dispatches a ufunc through __array_ufunc__
    return getattr(special, name)(x).astype(x.dtype, copy=False)


def _pair(input, other):
    """Two operands (tensors or Python numbers, at least one a tensor) as tensors of PyTorch's result dtype."""
    if isinstance(input, Tensor):
        return _operands(input, other)
    other, input = _operands(other, input)
    return input, other


def _float32_for_half(composite):
    """``composite`` (a chain of operations) computed in float32 when its tensors are float16, and rounded to float16
    once at the end, as PyTorch's CPU kernels compute float16 (in float32, their "opmath" type): a float16 rounding
    after every step would drift past float16's own precision."""

    @functools.wraps(composite)
    def computed(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)]
        if not all(t._data.dtype == np.float16 for t in tensors):
            return composite(*args, **kwargs)
        args = [a._to_dtype(np.float32) if isinstance(a, Tensor) else a for a in args]
        return composite(*args, **kwargs)._to_dtype(np.float16)

    return computed


# ----------------------------------------------------------------------------- primitives


class Erf(Function):
    """The error function ``erf(x) = 2/√π ∫₀ˣ e^(-t²) dt``; d/dx = 2/√π · e^(-x²). A primitive: it is no
    composition of elementary functions, so none of the other primitives gives it."""

    differentiable, saved_as = True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.erf(x).astype(x.dtype, copy=False)

    def backward(self, grad):
        xp = namespace(grad)
        return (grad * _TWO_OVER_SQRT_PI * xp.exp(-self.x * self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d erf x = 2/√π · e^(-x²)·dx
        (dx,), (x,) = tangents, inputs
        return dx * _TWO_OVER_SQRT_PI * (-x * x).exp()


class Erfc(Function):
    """The complementary error function ``erfc(x) = 1 - erf(x)``; d/dx = -2/√π · e^(-x²). A primitive: ``1 - erf(x)``
    cancels for large ``x`` (it gives 0 from ``x ≈ 6`` in float64, where erfc is still 2e-17)."""

    differentiable, saved_as = True, {"x": 0}

    def forward(self, x):
        self.x = x
        return _special("erfc", x)

    def backward(self, grad):
        xp = namespace(grad)
        return (-grad * _TWO_OVER_SQRT_PI * xp.exp(-self.x * self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d erfc x = -2/√π · e^(-x²)·dx
        (dx,), (x,) = tangents, inputs
        return -dx * _TWO_OVER_SQRT_PI * (-x * x).exp()


class Erfinv(Function):
    """The inverse error function, ``erf(erfinv(x)) = x`` on ``(-1, 1)``; d/dx = √π/2 · e^(erfinv(x)²). A primitive:
    no composition of the other primitives inverts erf."""

    saved_inputs, saves_output, differentiable, saved_as = (), True, True, {"out": OUTPUT}

    def forward(self, x):
        self.out = _special("erfinv", x)
        return self.out

    def backward(self, grad):
        xp = namespace(grad)
        return (grad / _TWO_OVER_SQRT_PI * xp.exp(self.out * self.out),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d erfinv x = √π/2 · e^(erfinv(x)²)·dx
        return tangents[0] / _TWO_OVER_SQRT_PI * (out * out).exp()


class Asin(Function):
    """``arcsin x``; d/dx = 1 / √(1 - x²). A primitive: no composition of the other primitives inverts sin."""

    saves_output, differentiable, saved_as = False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).arcsin(x)

    def backward(self, grad):
        return (grad / namespace(grad).sqrt(1 - self.x * self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d arcsin x = dx / √(1 - x²)
        (dx,), (x,) = tangents, inputs
        return dx / sqrt(1 - x * x)


class Acos(Function):
    """``arccos x``; d/dx = -1 / √(1 - x²). A primitive: ``π/2 - arcsin x`` loses the relative precision of the
    small angles near ``x = 1``."""

    saves_output, differentiable, saved_as = False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).arccos(x)

    def backward(self, grad):
        return (-grad / namespace(grad).sqrt(1 - self.x * self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d arccos x = -dx / √(1 - x²)
        (dx,), (x,) = tangents, inputs
        return -dx / sqrt(1 - x * x)


class Atan(Function):
    """``arctan x``; d/dx = 1 / (1 + x²). A primitive: no composition of the other primitives inverts tan."""

    saves_output, differentiable, saved_as = False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).arctan(x)

    def backward(self, grad):
        return (grad / (1 + self.x * self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d arctan x = dx / (1 + x²)
        (dx,), (x,) = tangents, inputs
        return dx / (1 + x * x)


class Atan2(_Binary):
    """``atan2(a, b)``, the angle of the point ``(b, a)``; d/da = b / (a² + b²), d/db = -a / (a² + b²). A primitive:
    ``arctan(a / b)`` plus a quadrant's ``±π`` divides by zero on the axis ``b = 0``, in its value or gradient."""

    saves_output = False

    def compute(self, a, b):
        self.a, self.b = a, b
        return backend.namespace(a).arctan2(a, b)

    def backward(self, grad):
        a, b = self.a, self.b
        scaled = grad / (a * a + b * b)
        return (sum_to(scaled * b, self.a_shape) if self.needs_grad(0) else None,
                sum_to(-scaled * a, self.b_shape) if self.needs_grad(1) else None)

    @staticmethod
    def jvp(tangents, inputs, out):  # d atan2(a, b) = (b·da - a·db) / (a² + b²)
        (da, db), (a, b) = tangents, inputs
        numerator = da * b if db is None else -db * a if da is None else da * b - db * a
        return numerator / (a * a + b * b)


class Log1p(Function):
    """``log(1 + x)``; d/dx = 1 / (1 + x). A primitive: ``log(1 + x)`` rounds ``1 + x`` first, and loses every digit
    of ``x`` below float precision (``log(1 + 1e-17)`` is 0)."""

    saves_output, differentiable, saved_as = False, True, {"x": 0}

    def forward(self, x):
        self.x = x
        return backend.namespace(x).log1p(x)

    def backward(self, grad):
        return (grad / (1 + self.x),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d log(1 + x) = dx / (1 + x)
        return tangents[0] / (1 + inputs[0])


class Expm1(Function):
    """``eˣ - 1``; d/dx = eˣ = out + 1. A primitive: ``exp(x) - 1`` cancels for small ``x`` (it gives 0 for 1e-17)."""

    saved_inputs, saves_output, differentiable, saved_as = (), True, True, {"out": OUTPUT}

    def forward(self, x):
        self.out = backend.namespace(x).expm1(x)
        return self.out

    def backward(self, grad):
        return (grad * (self.out + 1),)

    @staticmethod
    def jvp(tangents, inputs, out):  # d(eˣ - 1) = eˣ·dx
        return tangents[0] * (out + 1)


# ----------------------------------------------------------------------------- arithmetic


def true_divide(input, other):
    """``input / other`` (``div`` without a rounding mode); integers give float32.

    >>> import tinyattn as ta
    >>> ta.true_divide(ta.tensor([1, 3]), 2)
    tensor([0.5, 1.5])
    """
    return div(input, other)


divide = div


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``: ``sub`` with its operands swapped.

    >>> import tinyattn as ta
    >>> ta.rsub(ta.tensor([1.0, 2.0]), 10)
    tensor([9., 8.])
    """
    input, other = _pair(input, other)
    return sub(other, input, alpha=alpha)


negative = neg


def positive(input):
    """``input`` itself (``+input``); a boolean tensor raises, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.positive(ta.tensor([-1.0, 2.0]))
    tensor([-1.,  2.])
    """
    if input._data.dtype.kind == "b":
        raise TypeError("positive: the + operator on a boolean tensor is not supported")
    return input


def reciprocal(input):
    """``1 / input``; integers give float32.

    >>> import tinyattn as ta
    >>> ta.reciprocal(ta.tensor([2, 4]))
    tensor([0.5 , 0.25])
    """
    return 1 / float_input(input)


def rsqrt(input):
    """``1 / √input``.

    >>> import tinyattn as ta
    >>> ta.rsqrt(ta.tensor([4.0, 16.0]))
    tensor([0.5 , 0.25])
    """
    return reciprocal(sqrt(input))


def square(input):
    """``input * input``; integers stay integers.

    >>> import tinyattn as ta
    >>> ta.square(ta.tensor([-3, 2]))
    tensor([9, 4])
    """
    return input * input


def float_power(input, exponent):
    """``input ** exponent`` computed in float64 (both operands cast first), as PyTorch's ``float_power``.

    >>> import tinyattn as ta
    >>> ta.float_power(ta.tensor([2, 3]), 2)
    tensor([4., 9.], dtype=float64)
    """
    input, exponent = (x.double() if isinstance(x, Tensor) else float(x) for x in (input, exponent))
    return input ** exponent if isinstance(input, Tensor) else _lift(input, exponent) ** exponent


def lerp(input, end, weight):
    """Linear interpolation ``input + weight · (end - input)``; ``weight`` a tensor or a number.

    >>> import tinyattn as ta
    >>> ta.lerp(ta.tensor([0.0, 10.0]), ta.tensor([1.0, 20.0]), 0.5)
    tensor([ 0.5, 15. ])
    """
    return input + weight * (end - input)


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value · tensor1 · tensor2``.

    >>> import tinyattn as ta
    >>> ta.addcmul(ta.ones(2), ta.tensor([1.0, 2.0]), ta.tensor([3.0, 4.0]), value=0.5)
    tensor([2.5, 5. ])
    """
    product = tensor1 * tensor2
    return input + (product if value == 1 else product * value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value · tensor1 / tensor2``; integer ``tensor1`` and ``tensor2`` raise, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.addcdiv(ta.ones(2), ta.tensor([1.0, 2.0]), ta.tensor([4.0, 4.0]), value=2)
    tensor([1.5, 2. ])
    """
    if tensor1._data.dtype.kind in "biu" and tensor2._data.dtype.kind in "biu":
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                           "will perform a true division of tensor1 and tensor2.")
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else quotient * value)


# ----------------------------------------------------------------------------- trigonometric and hyperbolic


def asin(input):
    """``arcsin``, elementwise (``arcsin`` too); d/dx = 1 / √(1 - x²).

    >>> import tinyattn as ta
    >>> ta.asin(ta.tensor([0.0, 1.0]))
    tensor([0.       , 1.5707964])
    """
    return Asin.apply(float_input(input))


def acos(input):
    """``arccos``, elementwise (``arccos`` too); d/dx = -1 / √(1 - x²).

    >>> import tinyattn as ta
    >>> ta.acos(ta.tensor([1.0, 0.0]))
    tensor([0.       , 1.5707964])
    """
    return Acos.apply(float_input(input))


def atan(input):
    """``arctan``, elementwise (``arctan`` too); d/dx = 1 / (1 + x²).

    >>> import tinyattn as ta
    >>> ta.atan(ta.tensor([0.0, 1.0]))
    tensor([0.       , 0.7853982])
    """
    return Atan.apply(float_input(input))


def atan2(input, other):
    """The angle of the point ``(other, input)`` in ``(-π, π]`` (``arctan2`` too), broadcasting.

    >>> import tinyattn as ta
    >>> ta.atan2(ta.tensor([1.0, 1.0]), ta.tensor([1.0, -1.0]))
    tensor([0.7853981, 2.3561945])
    """
    input, other = _pair(input, other)
    return Atan2.apply(float_input(input), float_input(other))


@_float32_for_half
def tan(input):
    """``sin(x) / cos(x)``, elementwise.

    >>> import tinyattn as ta
    >>> ta.tan(ta.tensor([0.0, 1.0]))
    tensor([0.       , 1.5574079])
    """
    input = float_input(input)
    return sin(input) / cos(input)


@_float32_for_half
def sinh(input):
    """``(eˣ - e⁻ˣ) / 2``, written ``(expm1(x) - expm1(-x)) / 2`` so that small ``x`` keeps its digits.

    >>> import tinyattn as ta
    >>> ta.sinh(ta.tensor([0.0, 1.0]))
    tensor([0.       , 1.1752012])
    """
    input = float_input(input)
    return (expm1(input) - expm1(-input)) * 0.5


@_float32_for_half
def cosh(input):
    """``(eˣ + e⁻ˣ) / 2``.

    >>> import tinyattn as ta
    >>> ta.cosh(ta.tensor([0.0, 1.0]))
    tensor([1.       , 1.5430807])
    """
    input = float_input(input)
    return (exp(input) + exp(-input)) * 0.5


def _odd(f, input):
    """``f`` extended to negative inputs as an odd function, ``sign(x) · f(|x|)``, from ``f`` on ``x >= 0``; the
    magnitude is taken by ``where``, whose gradient at 0 is 1 (``abs``'s would be 0)."""
    negative_input = input < 0
    out = f(where(negative_input, -input, input))
    return where(negative_input, -out, out)


def _large(input):
    """Where ``x > 2²⁸``: there ``√(x² ± 1)`` is ``x`` to the last digit, and ``x²`` may overflow (beyond 1e154 in
    float64), so ``asinh`` and ``acosh`` take ``log(2x)``. Returns the mask, and ``x`` with 1 where the mask does not
    hold and where it does (each branch of ``where`` computed on values it is defined for: no NaN in its gradient)."""
    large = input > 2.0**28
    return large, where(large, 1.0, input), where(large, input, 1.0)


@_float32_for_half
def asinh(input):
    """``log(x + √(x² + 1))``, written ``log1p(x + x² / (1 + √(x² + 1)))`` for ``x >= 0`` and odd: so that small
    ``x`` keeps its digits and negative ``x`` does not cancel; ``log(2x)`` beyond 2²⁸ (``arcsinh`` too).

    >>> import tinyattn as ta
    >>> ta.asinh(ta.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.8813736,  0.       ,  0.8813736])
    """

    def nonnegative(x):
        large, moderate, huge = _large(x)
        return where(large, log(huge) + math.log(2),
                     log1p(moderate + moderate * moderate / (1 + sqrt(moderate * moderate + 1))))

    return _odd(nonnegative, float_input(input))


@_float32_for_half
def acosh(input):
    """``log(x + √(x² - 1))``, written ``log1p((x - 1) + √((x - 1)(x + 1)))`` so that ``x`` near 1 keeps its digits;
    ``log(2x)`` beyond 2²⁸ (``arccosh`` too); NaN below 1.

    >>> import tinyattn as ta
    >>> ta.acosh(ta.tensor([1.0, 2.0]))
    tensor([0.      , 1.316958])
    """
    large, moderate, huge = _large(float_input(input))
    above_one = moderate - 1
    return where(large, log(huge) + math.log(2), log1p(above_one + sqrt(above_one * (moderate + 1))))


@_float32_for_half
def atanh(input):
    """``log((1 + x) / (1 - x)) / 2``, written ``log1p(2x / (1 - x)) / 2`` so that small ``x`` keeps its digits
    (``arctanh`` too).

    >>> import tinyattn as ta
    >>> ta.atanh(ta.tensor([0.0, 0.5]))
    tensor([0.        , 0.54930615])
    """
    input = float_input(input)
    return log1p(2 * input / (1 - input)) * 0.5


def deg2rad(input):
    """Degrees to radians: ``x · π / 180``.

    >>> import tinyattn as ta
    >>> ta.deg2rad(ta.tensor([180.0, 90.0]))
    tensor([3.1415927, 1.5707964])
    """
    return float_input(input) * (math.pi / 180)


def rad2deg(input):
    """Radians to degrees: ``x · 180 / π``.

    >>> import tinyattn as ta
    >>> ta.rad2deg(ta.tensor([3.1415927]))
    tensor([180.])
    """
    return float_input(input) * (180 / math.pi)


@_float32_for_half
def sinc(input):
    """The normalised sinc, ``sin(πx) / (πx)``, and 1 at 0 (its limit; there the gradient is 0).

    >>> import tinyattn as ta
    >>> ta.sinc(ta.tensor([0.0, 0.5]))
    tensor([1.        , 0.63661975])
    """
    input = float_input(input)
    at_zero = input == 0
    angle = where(at_zero, 1.0, input) * math.pi  # 1 at 0: a value whose branch where drops, so no 0 / 0
    return where(at_zero, 1.0, sin(angle) / angle)


# ----------------------------------------------------------------------------- exponentials and logarithms


def exp2(input):
    """``2 ** x``.

    >>> import tinyattn as ta
    >>> ta.exp2(ta.tensor([0.0, 3.0]))
    tensor([1., 8.])
    """
    input = float_input(input)
    return _lift(2.0, input) ** input


def expm1(input):
    """``eˣ - 1``, exact for small ``x`` (see ``Expm1``).

    >>> import tinyattn as ta
    >>> ta.expm1(ta.tensor([1e-10], dtype=ta.float64)).item()
    1.00000000005e-10
    """
    return Expm1.apply(float_input(input))


def log1p(input):
    """``log(1 + x)``, exact for small ``x`` (see ``Log1p``).

    >>> import tinyattn as ta
    >>> ta.log1p(ta.tensor([1e-10], dtype=ta.float64)).item()
    9.999999999500001e-11
    """
    return Log1p.apply(float_input(input))


def log2(input):
    """``log(x) / log(2)``.

    >>> import tinyattn as ta
    >>> ta.log2(ta.tensor([1.0, 8.0]))
    tensor([0., 3.])
    """
    return log(input) * (1 / math.log(2))


def log10(input):
    """``log(x) / log(10)``.

    >>> import tinyattn as ta
    >>> ta.log10(ta.tensor([1.0, 100.0]))
    tensor([0., 2.])
    """
    return log(input) * (1 / math.log(10))


@_float32_for_half
def logaddexp(input, other):
    """``log(eᵃ + eᵇ)`` without overflow: ``max(a, b) + log1p(exp(-|a - b|))``; equal infinities give themselves,
    and a tie sends half the gradient to each side, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.logaddexp(ta.tensor([1000.0, 0.0]), ta.tensor([1000.0, 0.0]))
    tensor([1.0006932e+03, 6.9314718e-01])
    """
    a, b = _pair(input, other)
    a, b = float_input(a), float_input(b)
    same_infinity = (a == b) & ((a == math.inf) | (a == -math.inf))
    gap = where(same_infinity, 0.0, a - b)  # (∞ - ∞ would be NaN)
    larger = where(gap > 0, a, where(gap < 0, b, (a + b) * 0.5))  # a tie: the mean, half the gradient to each
    return larger + log1p(exp(-abs(gap)))


@_float32_for_half
def logaddexp2(input, other):
    """``log₂(2ᵃ + 2ᵇ)``: ``logaddexp`` in base 2.

    >>> import tinyattn as ta
    >>> ta.logaddexp2(ta.tensor([3.0]), ta.tensor([3.0]))
    tensor([4.])
    """
    a, b = _pair(input, other)
    return logaddexp(float_input(a) * math.log(2), float_input(b) * math.log(2)) * (1 / math.log(2))


@_float32_for_half
def logit(input, eps=None):
    """``log(x / (1 - x))``, the inverse of ``sigmoid``; with ``eps``, ``x`` is clamped to ``[eps, 1 - eps]`` first
    (no gradient outside).

    >>> import tinyattn as ta
    >>> ta.logit(ta.tensor([0.5, 0.75]))
    tensor([0.       , 1.0986123])
    """
    input = float_input(input)
    if eps is not None:
        input = clamp(input, eps, 1 - eps)
    return log(input / (1 - input))


@_float32_for_half
def xlogy(input, other):
    """``x · log(y)``, and 0 where ``x == 0`` (unless ``y`` is NaN), as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.xlogy(ta.tensor([0.0, 2.0]), ta.tensor([0.0, 1.0]))
    tensor([0., 0.])
    """
    x, y = _pair(input, other)
    x, y = float_input(x), float_input(y)
    at_zero = x == 0
    out = x * log(where(at_zero, 1.0, y))  # log(1) at x == 0: no 0 · log(0) in the value or the gradient
    return where(y != y, y, out)


def erf(input):
    """The error function, ``2/√π ∫₀ˣ e^(-t²) dt`` (see ``Erf``).

    >>> import tinyattn as ta
    >>> ta.erf(ta.tensor([0.0, 1.0]))
    tensor([0.       , 0.8427008])
    """
    return Erf.apply(float_input(input))


def erfc(input):
    """``1 - erf(x)``, exact in the tail (see ``Erfc``).

    >>> import tinyattn as ta
    >>> ta.erfc(ta.tensor([0.0, 10.0], dtype=ta.float64)).tolist()
    [1.0, 2.0884875837625446e-45]
    """
    return Erfc.apply(float_input(input))


def erfinv(input):
    """The inverse of ``erf`` on ``(-1, 1)`` (see ``Erfinv``).

    >>> import tinyattn as ta
    >>> ta.erfinv(ta.tensor([0.0, 0.8427008]))
    tensor([0., 1.])
    """
    return Erfinv.apply(float_input(input))


# ----------------------------------------------------------------------------- rounding and remainders


def _rounded(input, rounding):
    """``rounding`` (an array function: NumPy's floor, ceil, trunc) of a floating tensor, with PyTorch's zero gradient
    (``ops.piecewise``); an integer or boolean tensor is its own rounding (a copy)."""
    if input._data.dtype.kind in "biu":
        return input.clone()
    return piecewise(rounding(input._data), input, input)


def floor(input):
    """The largest integer ``<= x``, elementwise; its gradient is zeros, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.floor(ta.tensor([-1.5, 1.5]))
    tensor([-2.,  1.])
    """
    return _rounded(input, lambda x: backend.namespace(x).floor(x))


def ceil(input):
    """The smallest integer ``>= x``, elementwise; its gradient is zeros, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.ceil(ta.tensor([-1.5, 1.5]))
    tensor([-1.,  2.])
    """
    return _rounded(input, lambda x: backend.namespace(x).ceil(x))


def trunc(input):
    """``x`` rounded towards zero, elementwise (``fix`` too); its gradient is zeros, as in PyTorch.

    >>> import tinyattn as ta
    >>> ta.trunc(ta.tensor([-1.5, 1.5]))
    tensor([-1.,  1.])
    """
    return _rounded(input, lambda x: backend.namespace(x).trunc(x))


fix = trunc


def round(input, *, decimals=0):
    """``x`` rounded to ``decimals`` decimal places, halves to even (``round(x · 10ᵈ) / 10ᵈ``, as PyTorch computes
    it; a negative ``decimals`` rounds to tens, hundreds…); its gradient is zeros.

    >>> import tinyattn as ta
    >>> ta.round(ta.tensor([0.5, 1.5, 2.567])), ta.round(ta.tensor([2.567, 1234.0]), decimals=-2)
    (tensor([0., 2., 3.]), tensor([   0., 1200.]))
    """

    def rounding(x):
        xp = backend.namespace(x)
        if decimals == 0:
            return xp.round(x)
        if decimals > 0:
            scale = x.dtype.type(10.0**decimals)
            return xp.round(x * scale) / scale
        scale = x.dtype.type(10.0**-decimals)
        return xp.round(x / scale) * scale

    return _rounded(input, rounding)


def sign(input):
    """-1, 0 or 1 as ``x`` is negative, zero or positive (NaN stays NaN; ``sgn`` too); its gradient is zeros.

    >>> import tinyattn as ta
    >>> ta.sign(ta.tensor([-2.0, 0.0, 3.0]))
    tensor([-1.,  0.,  1.])
    """
    if input._data.dtype.kind == "b":
        return input.clone()
    values = backend.namespace(input._data).sign(input._data)
    if input._data.dtype.kind in "iu":
        return Tensor._wrap(values, input)
    return piecewise(values, input, input)


sgn = sign


def frac(input):
    """The fractional part ``x - trunc(x)`` (the sign of ``x``); its gradient is 1.

    >>> import tinyattn as ta
    >>> ta.frac(ta.tensor([-1.25, 2.5]))
    tensor([-0.25,  0.5 ])
    """
    return input - trunc(input)


def _remainder(input, other, exact):
    """``a - q·b``, with ``q`` the integer quotient that ``exact`` (NumPy's ``fmod`` or ``remainder``) implies:
    d/da = 1, d/db = -q, as in PyTorch. ``q`` is read off the exact remainder ``r`` as ``round((a - r) / b)``, so a
    quotient ``a / b`` that rounds up to an integer does not lose a whole ``b`` (``fmod(1, 0.1)`` is 0.1, not 0).
    The value is ``r`` itself (``a - q·b`` would round ``q·b``), minus ``composed.detach() - composed``: a zero that
    carries the composition's gradient. Integers give ``r`` with no gradient; an integer division by zero raises,
    as in PyTorch."""
    a, b = _pair(input, other)
    (a_data, b_data), like = aligned(a, b)
    xp = backend.namespace(a_data)
    if a_data.dtype.kind in "biu":
        if (b_data == 0).any():
            raise RuntimeError("ZeroDivisionError")
        return Tensor._wrap(exact(xp)(a_data, b_data), like)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = exact(xp)(a_data, b_data)
        quotient = xp.round((a_data - r) / b_data)
    composed = a - piecewise(quotient.astype(a_data.dtype, copy=False), like) * b
    return Tensor._wrap(r, like) - (composed.detach() - composed)


def fmod(input, other):
    """The remainder of ``a / b`` with the sign of ``a`` (C's ``fmod``): ``a - trunc(a / b) · b``.

    Args: ``input``, ``other``: tensors or numbers, broadcasting; the gradient is 1 for ``a``, ``-trunc(a / b)`` for
    ``b``.

    >>> import tinyattn as ta
    >>> ta.fmod(ta.tensor([-7.0, 7.0]), 3)
    tensor([-1.,  1.])
    """
    return _remainder(input, other, lambda xp: xp.fmod)


def remainder(input, other):
    """The remainder of ``a / b`` with the sign of ``b`` (Python's ``%``): ``a - floor(a / b) · b``.

    Args: ``input``, ``other``: tensors or numbers, broadcasting; the gradient is 1 for ``a``, ``-floor(a / b)`` for
    ``b``.

    >>> import tinyattn as ta
    >>> ta.remainder(ta.tensor([-7.0, 7.0]), 3), ta.tensor([-7, 7]) % 3
    (tensor([2., 1.]), tensor([2, 1]))
    """
    return _remainder(input, other, lambda xp: xp.remainder)


def floor_divide(input, other):
    """``input // other``, rounded down (``div(..., rounding_mode="floor")``); an integer division by zero raises.

    >>> import tinyattn as ta
    >>> ta.floor_divide(ta.tensor([-7, 7]), 2)
    tensor([-4,  3])
    """
    input, other = _pair(input, other)
    return div(input, other, rounding_mode="floor")


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (its sign bit: ``-0.0`` counts as negative); the gradient is
    ``sign(input)`` times that sign for ``input`` (0 at 0, as in PyTorch), none for ``other``.

    >>> import tinyattn as ta
    >>> ta.copysign(ta.tensor([1.0, -2.0]), ta.tensor([-0.0, 3.0]))
    tensor([-1.,  2.])
    """
    a, b = _pair(input, other)
    a, b = float_input(a), float_input(b)
    negative_sign = Tensor._wrap(backend.namespace(b._data).signbit(b._data), b)
    magnitude = abs(a)
    return where(negative_sign, -magnitude, magnitude)


@_float32_for_half
def hypot(input, other):
    """``√(a² + b²)``, elementwise, broadcasting (as written: it overflows where ``a²`` does, beyond 1e154 in float64
    and 1.8e19 in float32).

    >>> import tinyattn as ta
    >>> ta.hypot(ta.tensor([3.0]), ta.tensor([4.0]))
    tensor([5.])
    """
    a, b = _pair(input, other)
    return sqrt(a * a + b * b)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """``input`` with NaN replaced by ``nan``, +∞ by ``posinf`` and -∞ by ``neginf`` (by default the dtype's largest
    and smallest finite numbers); the gradient passes where ``input`` is finite.

    >>> import tinyattn as ta
    >>> ta.nan_to_num(ta.tensor([float("nan"), float("inf"), -1.0]), posinf=9.0)
    tensor([ 0.,  9., -1.])
    """
    if input._data.dtype.kind in "biu":
        return input.clone()
    x = input._data
    xp = backend.namespace(x)
    largest = np.finfo(x.dtype).max
    filled = xp.where(x != x, x.dtype.type(nan), xp.where(x > 0, x.dtype.type(largest if posinf is None else posinf),
                                                         x.dtype.type(-largest if neginf is None else neginf)))
    return where(Tensor._wrap(xp.isfinite(x), input), input, Tensor._wrap(filled, input))


FrexpResult = collections.namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input):
    """``(mantissa, exponent)`` with ``input = mantissa · 2^exponent``, ``0.5 <= |mantissa| < 1`` (a named tuple, as
    PyTorch's; the exponent int32); the mantissa's gradient is ``2^-exponent``.

    >>> import tinyattn as ta
    >>> ta.frexp(ta.tensor([8.0, -0.75]))
    frexp(mantissa=tensor([ 0.5 , -0.75]), exponent=tensor([4, 0], dtype=int32))
    """
    x = input._data
    xp = backend.namespace(x)
    _, exponent = xp.frexp(x)
    exponent = exponent.astype(np.int32)
    scale = xp.ldexp(xp.ones_like(x), -exponent)  # 2^-exponent, in input's dtype
    return FrexpResult(input * Tensor._wrap(scale, input), Tensor._wrap(exponent, input))


def ldexp(input, other):
    """``input · 2^other``; integers give float32.

    >>> import tinyattn as ta
    >>> ta.ldexp(ta.tensor([1.0, 3.0]), ta.tensor([3, -1]))
    tensor([8. , 1.5])
    """
    input = float_input(input)
    return input * (_lift(2.0, input) ** other)


# ----------------------------------------------------------------------------- Tensor methods

for _name in ("asin", "acos", "atan", "atan2", "tan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "expm1",
              "log1p", "log2", "log10", "logaddexp", "logaddexp2", "logit", "erf", "erfc", "erfinv", "ceil",
              "floor", "round", "trunc", "fix", "frac", "sign", "sgn", "reciprocal", "rsqrt", "square", "sinc",
              "deg2rad", "rad2deg", "xlogy", "hypot", "copysign", "fmod", "remainder", "floor_divide",
              "true_divide", "float_power", "lerp", "addcmul", "addcdiv", "nan_to_num", "frexp", "ldexp", "add",
              "sub", "mul", "div", "divide", "neg", "negative", "positive"):
    setattr(Tensor, _name, globals()[_name])
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2
arcsinh, arccosh, arctanh = asinh, acosh, atanh
Tensor.arcsin, Tensor.arccos, Tensor.arctan, Tensor.arctan2 = asin, acos, atan, atan2
Tensor.arcsinh, Tensor.arccosh, Tensor.arctanh = asinh, acosh, atanh
Tensor.subtract, Tensor.multiply = sub, mul
Tensor.__pos__ = positive
Tensor.__mod__ = remainder
Tensor.__rmod__ = lambda self, other: remainder(other, self)
Tensor.__floordiv__ = floor_divide
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__rdiv__ = Tensor.__rtruediv__
