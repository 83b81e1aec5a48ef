"""torch's top-level functions beyond the native ones: creation, random draws, grad modes, dtypes,
global settings, and the function forms of compat's tensor methods.

``torch.compile`` is ``ta.compile``: the model with its fused forms swapped in. What compat deliberately
does not do raises an error that says what to do instead: ``bfloat16`` (no NumPy dtype); ``torch.jit`` and
``torch.onnx`` (no tracing or export) are modules of their own.

>>> import tinyattn.compat as torch
>>> torch.pow(2, torch.arange(4)), torch.pow(2.5, torch.arange(3))
(tensor([1, 2, 4, 8]), tensor([1.  , 2.5 , 6.25]))
>>> torch.compile(torch.nn.Linear(2, 2))
Linear(in_features=2, out_features=2, bias=True)  # compiled: fast.Linear
"""

import builtins
import numbers
import sys
import warnings

import numpy as np

from .. import backend
from .. import creation as _creation
from .. import ops_extra as _ops_extra
from ..engine import Tensor as _NativeTensor
from ..engine import inference_mode, is_inference_mode_enabled, set_grad_enabled  # torch's grad modes, as they are
from ..fast.compile import compile as _fast_compile
from .core import methods, random
from .core.tensor import as_compat

__all__ = [
    "pow", "masked_fill",
    "numel", "is_floating_point", "clip",
    "amax", "swapaxes", "randperm", "randint",
    "multinomial",
    "as_tensor", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "inference_mode",
    "set_grad_enabled", "is_inference_mode_enabled", "compile", "dtype", "float16", "bfloat16", "int8", "int16",
    "short", "finfo", "iinfo", "get_default_dtype", "set_default_dtype", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "set_printoptions", "FloatTensor", "LongTensor", "BoolTensor", "IntTensor", "DoubleTensor", "ByteTensor",
    "CharTensor", "ShortTensor",
    "uint16", "uint32", "uint64", "complex64", "complex128", "cfloat", "cdouble", "strided", "layout",
    "promote_types", "result_type", "can_cast", "is_signed", "is_complex", "is_nonzero", "is_same_size", "range",
    "pi", "e", "inf", "nan", "newaxis",
]

pow = methods.pow


def masked_fill(input, mask, value):
    return methods.masked_fill(input, mask, value)


def _function(name):
    """``torch.NAME(input, *args, **kwargs)``: the compat method of that name."""

    def function(input, *args, **kwargs):
        if not isinstance(input, _NativeTensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        return getattr(as_compat(input), name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.{name}(input, …)``: ``input.{name}(…)``."
    return methods.numpy_names(function)


clip = _function("clip")
amax = _function("amax")
swapaxes = _function("swapaxes")

numel, is_floating_point = methods.numel, methods.is_floating_point


# ----------------------------------------------------------------------------- random draws


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 … n - 1`` (int64), from ``generator`` or the library's stream."""
    if not isinstance(n, numbers.Integral) or n < 0:
        raise RuntimeError(f"randperm: n must be a non-negative integer, got {n!r}")
    order = random.permutation(int(n), generator)
    return as_compat(_creation.tensor(order, dtype=dtype or np.int64, device=device, requires_grad=requires_grad))


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform integers in ``[low, high)``; ``randint(high, size)`` starts at 0."""
    if size is None:
        low, high, size = 0, low, high
    if size is None or isinstance(size, numbers.Integral):
        raise TypeError(f"randint(): size must be a tuple of ints, got {size!r}")
    return as_compat(_creation.randint(low, high, tuple(size), generator=random.numpy_generator(generator),
                                        dtype=dtype, device=device))


def multinomial(input, num_samples, replacement=False, *, generator=None):
    return as_compat(_ops_extra.multinomial(input, num_samples, replacement,
                                            generator=random.numpy_generator(generator)))


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing it when it already is one (or a NumPy array) of that dtype and device."""
    if isinstance(data, _NativeTensor):
        return as_compat(data.to(dtype=dtype) if dtype is not None and data.dtype != dtype else data)
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == dtype) and device in (None, "cpu"):
        return as_compat(_NativeTensor(data))
    return as_compat(_creation.tensor(data, dtype=dtype, device=device))


def manual_seed(seed):
    """Seed every random draw of the library (torch's ``manual_seed``)."""
    backend.manual_seed(seed)


def seed():
    """Seed the library's draws from fresh entropy; returns the seed."""
    value = int(np.random.SeedSequence().entropy % (1 << 63))
    backend.manual_seed(value)
    return value


def initial_seed():
    return backend.get_rng_state()["seed"]


def get_rng_state():
    """The library's generators' state (a dict ``set_rng_state`` takes; torch gives a byte tensor)."""
    return backend.get_rng_state()


def set_rng_state(new_state):
    backend.set_rng_state(new_state)


# ----------------------------------------------------------------------------- dtypes


dtype = np.dtype  # isinstance(x.dtype, torch.dtype) holds
float16 = np.float16
int8, int16 = np.int8, np.int16
short = np.int16


class _NoNumpyDtype:
    """A dtype name torch has and NumPy lacks: naming it works (``{"bfloat16": torch.bfloat16}``), using it
    raises an error that says what to use instead."""

    def __init__(self, name, instead):
        self.name, self.instead = name, instead

    def __repr__(self):
        return f"torch.{self.name}"

    @property
    def dtype(self):  # NumPy asks for this when the name is given as a dtype
        raise TypeError(f"{self.name} has no NumPy dtype, so tinyattn.compat cannot hold it; use {self.instead}")

    @property
    def itemsize(self):
        return 2


bfloat16 = _NoNumpyDtype("bfloat16", "float32 (or float16)")


class finfo:
    """``finfo(dtype)``: ``eps``, ``max``, ``min``, ``tiny``, ``bits``, ``resolution`` of a float dtype."""

    def __init__(self, type=None):
        info = np.finfo(np.float32 if type is None else type)
        self.dtype, self.bits = str(info.dtype), info.bits
        self.eps, self.max, self.min = (builtins.float(v) for v in (info.eps, info.max, info.min))
        self.resolution = 10.0 ** -info.precision
        self.tiny = self.smallest_normal = builtins.float(info.tiny)


class iinfo:
    """``iinfo(dtype)``: ``max``, ``min``, ``bits`` of an integer dtype."""

    def __init__(self, type):
        info = np.iinfo(type)
        self.dtype, self.bits, self.max, self.min = str(info.dtype), info.bits, int(info.max), int(info.min)


def get_default_dtype():
    return np.dtype(np.float32)


def set_default_dtype(d):
    """Only float32, the library's default, is accepted: Python floats always make float32 tensors here."""
    if np.dtype(d) != np.float32:
        raise NotImplementedError(f"set_default_dtype({np.dtype(d)}): tinyattn.compat makes float32 from Python "
                                  "floats; pass dtype= to the creation functions, or call .double() on the model")


def FloatTensor(*data):
    """``torch.FloatTensor([1, 2])`` (from data) or ``torch.FloatTensor(2, 3)`` (of that shape, zeros)."""
    return _legacy(data, np.float32)


def LongTensor(*data):
    return _legacy(data, np.int64)


def BoolTensor(*data):
    return _legacy(data, np.bool_)


def IntTensor(*data):
    return _legacy(data, np.int32)


def DoubleTensor(*data):
    return _legacy(data, np.float64)


def ByteTensor(*data):
    return _legacy(data, np.uint8)


def CharTensor(*data):
    return _legacy(data, np.int8)


def ShortTensor(*data):
    return _legacy(data, np.int16)


def _legacy(data, dtype):
    if len(data) == 1 and not isinstance(data[0], int):
        return as_compat(_creation.tensor(data[0], dtype=dtype))
    return as_compat(_creation.zeros(*data, dtype=dtype))


uint16, uint32, uint64 = np.uint16, np.uint32, np.uint64
complex64, complex128 = np.complex64, np.complex128
cfloat, cdouble = complex64, complex128
strided = methods.strided
layout = methods.Layout

_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}  # bool < integers < floats < complex, as torch ranks them
_DEFAULT_OF_CATEGORY = {0: np.dtype(np.bool_), 1: np.dtype(np.int64), 2: np.dtype(np.float32),
                        3: np.dtype(np.complex64)}


def _category(d):
    return _CATEGORY[np.dtype(d).kind]


def promote_types(type1, type2):
    """The smallest dtype both ``type1`` and ``type2`` cast to, by torch's rule: of two categories (bool,
    integer, float, complex) the higher one's dtype wins as it is (``int64`` and ``float16`` give ``float16``,
    where NumPy gives ``float64``); within one category, NumPy's promotion."""
    type1, type2 = np.dtype(type1), np.dtype(type2)
    if _category(type1) == _category(type2):
        return np.promote_types(type1, type2)
    higher, lower = sorted((type1, type2), key=_category, reverse=True)
    if higher.kind == "c" and lower == np.float64:  # a complex of float64's precision
        return np.dtype(np.complex128)
    return higher


def result_type(tensor1, tensor2):
    """The dtype an operation of ``tensor1`` and ``tensor2`` (tensors or Python numbers) gives, by torch's rule:
    tensors with dimensions decide; a 0-d tensor or a Python number counts only where its category is higher,
    and then a 0-d tensor by its dtype, a number by its category's default (``float32`` for a float)."""
    ranked = []  # (priority: 2 dimensioned tensor, 1 zero-dim tensor, 0 Python number; dtype)
    for operand in (tensor1, tensor2):
        if isinstance(operand, _NativeTensor):
            ranked.append((2 if operand.ndim else 1, np.dtype(operand.dtype)))
        elif isinstance(operand, (builtins.bool, numbers.Number)):
            kind = "b" if isinstance(operand, builtins.bool) else "i" if isinstance(operand, numbers.Integral) \
                else "f" if isinstance(operand, numbers.Real) else "c"
            ranked.append((0, _DEFAULT_OF_CATEGORY[_CATEGORY[kind]]))
        else:
            raise TypeError(f"result_type(): expected a Tensor or a number, got {type(operand).__name__}")
    result = None
    for priority in (2, 1, 0):
        for rank, d in ranked:
            if rank != priority:
                continue
            if result is None:
                result = d
            elif _category(d) > _category(result) and priority == 0 and result == np.float64:
                result = np.dtype(np.complex128)  # a complex number with a float64 tensor
            elif _category(d) > _category(result):
                result = d
            elif _category(d) == _category(result) and priority == 2:
                result = np.promote_types(result, d)
    return result


def can_cast(from_, to):
    """Whether torch casts ``from_`` to ``to`` implicitly (an in-place operation's result into its tensor): never
    down a category (a float into an integer, anything but bool into bool), always within or up one."""
    return _category(from_) <= _category(to)


def is_signed(input):
    return methods.is_signed(input)


def is_complex(input):
    return methods.is_complex(input)


def is_nonzero(input):
    return methods.is_nonzero(input)


def is_same_size(input, other):
    return methods.is_same_size(input, other)


def real(input):
    """The tensor itself: compat's tensors are real (``torch.real`` of a real tensor)."""
    return input.real


def imag(input):
    return input.imag


def range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    """Deprecated in torch: ``start, start + step, …`` up to ``end`` *inclusive* (``arange`` excludes it), float32
    by default; warns as torch does."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    count = builtins.int(np.floor((end - start) / step)) + 1
    if count < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    values = start + step * np.arange(count, dtype=np.float64)
    return as_compat(_creation.tensor(values, dtype=dtype or np.float32, device=device, requires_grad=requires_grad))


# constants torch names
pi, e, inf, nan, newaxis = np.pi, np.e, np.inf, np.nan, None


# ----------------------------------------------------------------------------- global settings


_SETTINGS = {"matmul_precision": "highest", "deterministic": False}


def set_float32_matmul_precision(precision):
    """Recorded only: NumPy's float32 products are always full float32 ("highest")."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or 'medium'")
    _SETTINGS["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _SETTINGS["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded only: every compat operation is deterministic already."""
    _SETTINGS["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled():
    return _SETTINGS["deterministic"]


_PROFILES = {"default": dict(precision=8, threshold=1000, edgeitems=3, linewidth=75, suppress=False),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=8, threshold=sys.maxsize, edgeitems=3, linewidth=75)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """NumPy's print options, which the tensors' ``repr`` uses; a ``profile`` (``"default"``, ``"short"``,
    ``"full"``) first, then the options given (``"default"`` is NumPy's, as compat's tensors print)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        np.set_printoptions(**_PROFILES[profile])
    options = {k: v for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                                     linewidth=linewidth).items() if v is not None}
    if sci_mode is not None:
        options["suppress"] = not sci_mode
    np.set_printoptions(**options)


# ----------------------------------------------------------------------------- compile


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, disable=False,
            name=None, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """``torch.compile``: ``ta.compile(model)``, the model with each submodule that has a fused form replaced by
    it (parameters shared), or a library function's fused form; used bare or with keyword arguments, a decorator.
    Its keyword arguments are accepted and change nothing, but ``disable=True``, which returns the model itself,
    as torch does."""
    if model is None:
        return lambda model: compile(model, disable=disable)
    return model if disable else _fast_compile(model)


# torch's top-level names for functions of the nn.functional family
from ..nn.distances import cdist  # noqa: E402
from ..nn.padding import constant_pad_nd  # noqa: E402

__all__ += ["cdist", "constant_pad_nd"]
