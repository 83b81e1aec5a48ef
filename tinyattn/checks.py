"""The argument checks every public entry point shares: dims, sizes, dtypes, tensor arguments. A public module
of floor 3 (``ops`` and ``creation`` check with it) that the floors above share too: ``nn``'s functions and
layers and ``compat.nn`` make their checks through it, so an error reads the same wherever it is raised.

Each check either returns the argument in the form the caller needs (a dim in ``[0, ndim)``,
a tuple of sizes) or raises ``IndexError``, ``TypeError`` or ``ValueError`` with a message that
names the function, the argument, what was expected and what came. The common case costs a
type test and a couple of comparisons, so the checks sit on the hot path unnoticed.

>>> dim("softmax", "dim", -1, 2)
1
>>> dim("cat", "dim", 2, 2)
Traceback (most recent call last):
    ...
IndexError: cat: dim 2 is out of range [-2, 1] (the input has 2 dimensions)
"""

import math
import numbers

import numpy as np

from . import backend
from .engine import Tensor


def integer(name, arg, value):
    """``value`` as a Python int, refusing bools, floats and other non-integers (as PyTorch does)."""
    if type(value) is int:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"{name}: {arg} must be an integer, got {type(value).__name__} {value!r}")


_GROWS = ("stack", "unsqueeze")  # their dim counts the result's dimensions, one more than the input's


def dim(name, arg, value, ndim):
    """One dim of a tensor of ``ndim`` dimensions, negatives counted from the end, as an int in
    ``[0, ndim)``. A 0-d tensor accepts 0 and -1, as in PyTorch."""
    if type(value) is int and -ndim <= value < ndim:
        return value + ndim if value < 0 else value
    value = integer(name, arg, value)
    bound = max(ndim, 1)
    if not -bound <= value < bound:
        grows = name in _GROWS
        raise IndexError(f"{name}: {arg} {value} is out of range [{-bound}, {bound - 1}] (the input has "
                         f"{ndim - grows} dimensions{', the result one more' if grows else ''})")
    return value % bound if ndim else 0


def dims(name, arg, value, ndim):
    """``None`` (all dims), one dim or a sequence of dims, as a tuple of distinct axes in ``[0, ndim)``."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        axis = dim(name, arg, value, ndim)
        return (axis,) if ndim else ()
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{name}: {arg} must be an integer or a tuple of integers, got {type(value).__name__}")
    axes = tuple(dim(name, arg, d, ndim) for d in value)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: {arg} {tuple(value)} names the same dimension twice")
    return axes if ndim else ()


def size(name, arg, value):
    """A non-negative integer size (a length, a number of features)."""
    value = integer(name, arg, value)
    if value < 0:
        raise ValueError(f"{name}: {arg} must be a non-negative integer, got {value}")
    return value


def positive(name, arg, value):
    """A positive integer (a number of heads, of chunks)."""
    value = integer(name, arg, value)
    if value <= 0:
        raise ValueError(f"{name}: {arg} must be a positive integer, got {value}")
    return value


def shape(name, arg, value):
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``, as a tuple of non-negative ints."""
    if len(value) == 1 and isinstance(value[0], (tuple, list)):
        value = value[0]
    return tuple(size(name, arg, n) for n in value)


def tensor(name, arg, value):
    """``value`` itself when it is a tensor; a ``TypeError`` that names what came otherwise."""
    if isinstance(value, Tensor):
        return value
    hint = " (wrap it with ta.tensor(...))" if backend.is_array(value) or isinstance(value, (list, tuple)) else ""
    raise TypeError(f"{name}: {arg} must be a Tensor, got {type(value).__name__}{hint}")


def floating(name, arg, value):
    """A floating-point tensor (PyTorch refuses integer and boolean inputs to these operations)."""
    if type(value) is Tensor and value._data.dtype.kind == "f":
        return value
    tensor(name, arg, value)
    if value._data.dtype.kind != "f":
        raise TypeError(f"{name}: {arg} must be a floating-point tensor, got dtype {value.data.dtype} "
                        "(convert it with .float())")
    return value


def real(name, arg, value):
    """A real number, not NaN (infinities pass), as a Python float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: {arg} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name}: {arg} is NaN; expected a real number")
    return value


def number(name, arg, value):
    """A number to fill with (a bool, an integer, a float, or a one-element tensor's value), refusing ``None``,
    strings and the rest with PyTorch's ``TypeError``, where NumPy would read ``None`` as NaN and ``"2"`` as 2."""
    if isinstance(value, Tensor):
        if value._data.size != 1:
            raise RuntimeError(f"{name}: {arg} must be a number or a one-element tensor, got shape {value.shape}")
        return value.item()
    if isinstance(value, (numbers.Number, np.bool_)):
        return value
    raise TypeError(f"{name}: {arg} must be a number, got {type(value).__name__} {value!r}")


# ----------------------------------------------------------------------------- the functional forms' arguments


def linear_args(input, weight, bias):
    """``F.linear``'s arguments: tensors, and a bias that broadcasts to the output ``(…, out_features)`` (to
    ``(1, out_features)`` for a 1-D input, as in PyTorch). Returns ``None`` for the usual bias of shape
    ``(out_features,)`` (or none), else the bias to add to ``input @ weightᵀ``."""
    tensor("linear", "input", input)
    tensor("linear", "weight", weight)
    one_dtype("linear", ("input", input), ("weight", weight))
    if bias is not None:
        one_dtype("linear", ("input", input), ("bias", bias))
    if bias is None or bias.shape == weight.shape[:1]:
        return None
    tensor("linear", "bias", bias)
    if input.ndim == 0 or weight.ndim != 2 or input.shape[-1] != weight.shape[-1]:
        return None  # the shapes' own error comes next
    out_shape = (input.shape[:-1] or (1,)) + weight.shape[:1]
    try:
        broadcast = np.broadcast_shapes(bias.shape, out_shape)
    except ValueError:
        broadcast = None
    if broadcast != out_shape:
        raise ValueError(f"linear: bias of shape {bias.shape} cannot be broadcast to the output's shape "
                         f"{out_shape} (expected ({weight.shape[0]},))")
    return bias.reshape(bias.shape[-1:]) if input.ndim == 1 and bias.ndim > 1 else bias


def one_dtype(name, first, second):
    """Two arguments (``(argument name, tensor or array)`` pairs) of one dtype, where PyTorch refuses to
    mix them (a matrix product's operands, LayerNorm's input and parameters; elementwise operations promote)."""
    (name_a, a), (name_b, b) = first, second
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{name}: {name_a} is {a.dtype} and {name_b} is {b.dtype}; {name} needs one dtype "
            "(convert one with .to(dtype), or a module with .float() or .double())"
        )


def reduction_input(name, input, axis):
    """The floating-point ``input`` of softmax-like functions and its ``dim`` as an axis in ``[0, ndim)``."""
    floating(name, "input", input)
    return dim(name, "dim", axis, input.ndim)


def dropout_input(input, p, training):
    """``F.dropout``'s input: a tensor, floating-point when it is dropped (PyTorch passes any dtype through
    otherwise). True for a 0-d input that is dropped."""
    if not (training and p):
        tensor("dropout", "input", input)
        return False
    floating("dropout", "input", input)
    return input.ndim == 0


def embedding_args(weight, padding_idx):
    """``F.embedding``'s table (a 2-D tensor) and ``padding_idx`` (``None`` or a row, negatives from the end)."""
    tensor("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    if padding_idx is None:
        return None
    rows = weight.shape[0]
    padding_idx = integer("embedding", "padding_idx", padding_idx)
    if not -rows <= padding_idx < rows:
        raise ValueError(f"embedding: padding_idx {padding_idx} must be within the {rows} rows "
                         f"({-rows} to {rows - 1})")
    return padding_idx % rows


def attention_scale(query, scale):
    """The scores' scale: ``1/√E`` by default, 1 when ``E`` is 0 (the scores are then all zero)."""
    if scale is None and isinstance(query, Tensor) and query.ndim and query.shape[-1] == 0:
        return 1.0
    return scale


def attention_inputs(name, *named):
    """Query, key, value (``(argument name, value)`` pairs): floating-point tensors."""
    for arg, t in named:
        if t is not None and (type(t) is not Tensor or t._data.dtype.kind != "f"):  # (the common case: two tests)
            floating(name, arg, t)


def attention_sizes(name, embed_dim, num_heads, dropout):
    """Multi-head attention's sizes: ``embed_dim`` a positive multiple of ``num_heads``, ``dropout`` in [0, 1]."""
    sizes(name, embed_dim=embed_dim, num_heads=num_heads)
    if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
        raise ValueError(f"{name}: embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})")
    if not 0.0 <= dropout <= 1.0:
        raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")


def transformer_sizes(name, d_model, nhead, dim_feedforward):
    """A Transformer layer's sizes: ``d_model`` and ``nhead`` positive, ``dim_feedforward`` non-negative."""
    positive(name, "d_model", d_model)
    positive(name, "nhead", nhead)
    size(name, "dim_feedforward", dim_feedforward)


def sizes(name, **values):
    """Each keyword a non-negative integer size (a constructor's ``in_features``, ``dim_feedforward``...)."""
    for arg, value in values.items():
        size(name, arg, value)
