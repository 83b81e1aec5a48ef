"""PyTorch's names *and* conventions, so that model code written for torch runs with its imports changed.

    import tinyattn.compat as torch
    import tinyattn.compat.nn as nn
    import tinyattn.compat.nn.functional as F

Where the native API already follows PyTorch, the names here are the native functions and
layers themselves, with one difference: tensors are compat's own ``Tensor`` (a subclass of the native
one), whose ``.data`` and ``.grad`` are tensors sharing the arrays, as in torch (``p.grad.zero_()``,
``p.data.mul_(0.5)``), where the native API gives the arrays. Compat's creation functions make such
tensors, every result computed from one is one, and compat's layers (``nn.Linear``… are subclasses of
the native ones, which the router treats as the native ones) hold compat parameters; a native layer
attached to a compat module takes its compat class, in place.

Where PyTorch's conventions differ (sequence-first attention, ``True`` = masked, packed
``in_proj_weight`` in the state dict), ``compat.nn`` holds thin adapters over the native layers.
Beyond the layers: ``utils.data`` (datasets, samplers, ``DataLoader``), ``cuda``, ``backends`` and
``amp`` (what scripts ask of a GPU), ``serialization`` (whole models saved without pickle), and
torch's everyday functions and tensor methods (``functions``, ``core.methods``). What compat does not
do (``compile``, CUDA kernels, pickle) raises an error that says what to do instead; the page
``docs/compat.md`` holds the coverage table, generated from torch's own inventory. A name that is missing says so,
in every submodule: ``tinyattn.compat has no `x` yet``, or, for a name out of scope on purpose
(``compat.scope``), why.

Known differences from PyTorch (each pinned by a test in ``tests/compat``):

* ``p.grad`` and ``p.data`` are a new tensor at each access (sharing the same array), so
  ``p.grad is p.grad`` is false, where torch gives the same object. After ``backward(create_graph=True)``
  ``p.grad`` is the gradient with its graph, one object, as in torch.
* A query whose keys are all masked gets an output of zeros (``out_proj``'s bias after the
  projection) and weights of zeros, never NaN. ``torch.nn.MultiheadAttention`` gives NaN there when
  it returns the weights (its math path), and zeros as here when it does not.
* The Transformer layers hold the native attention: their ``state_dict`` has PyTorch's keys, but
  their ``named_parameters()`` names its ``q_proj``/``k_proj``/``v_proj`` (``nn.MultiheadAttention``
  itself has PyTorch's parameters).
* ``nn.LazyLinear`` before its first call has a ``weight`` of shape ``(out_features, 0)``; a state
  dict loads into it after that call.

>>> import tinyattn.compat as torch
>>> torch.tensor([1, 2]).float().dtype == torch.float
True
>>> torch.fft
Traceback (most recent call last):
...
AttributeError: tinyattn.compat has no `fft`: out of scope (spectral ops (FFT, STFT, signal windows): ...)
"""

import types as _types

import numpy as _np

from .. import (
    abs,
    all,
    any,
    argmax,
    argmin,
    bmm,
    bool,
    cat,
    chunk,
    clamp,
    clone,
    concat,
    cos,
    enable_grad,
    exp,
    flatten,
    float32,
    float64,
    gather,
    int32,
    int64,
    is_grad_enabled,
    is_tensor,
    log,
    log_softmax,
    long,
    manual_seed,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    multinomial,
    no_grad,
    nonzero,
    norm,
    permute,
    relu,
    repeat_interleave,
    reshape,
    sigmoid,
    sin,
    softmax,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sum,
    tanh,
    topk,
    transpose,
    tril,
    triu,
    uint8,
    unsqueeze,
    var,
    where,
)
from .. import creation as _creation
from .. import ops_extra as _ops_extra
from . import (  # noqa: F401
    amp,
    autograd,
    backends,
    cuda,
    distributed,
    distributions,
    func,
    jit,
    nn,
    onnx,
    optim,
    serialization,
    utils,
)
from . import functions as _functions_module
from .amp import autocast  # noqa: E402
from .autograd import is_anomaly_enabled  # noqa: E402
from .core import methods as _methods
from .core.random import Generator
from .core.tensor import Tensor, as_compat
from .func import vmap  # noqa: E402  (torch.vmap is torch.func.vmap)
from .functions import *  # noqa: F401,F403  (torch's functions beyond the native ones)
from .functions import __all__ as _function_names
from .functions import masked_fill, pow, randint  # noqa: F401
from .nn import modules as _nn_modules  # noqa: F401  (torch.nn.modules: PyTorch's paths to compat.nn's classes)
from .scope import missing as _missing  # noqa: E402
from .serialization import load, save  # noqa: E402

float, double, half = float32, float64, _np.float16
int = int32  # torch.int (not in __all__: a star import would hide Python's int)
from .core.devices import device  # noqa: E402
from .core.tensor import Size  # noqa: E402


def _making_compat(make):
    """``make`` (a native creation function) returning compat tensors."""

    def compat_make(*args, **kwargs):
        return as_compat(make(*args, **kwargs))

    compat_make.__name__ = compat_make.__qualname__ = make.__name__
    compat_make.__doc__ = make.__doc__
    return compat_make


for _name in _creation.__all__:  # tensor, zeros, arange, linspace, the *_like… (randint: functions' own)
    if _name not in _function_names:
        globals()[_name] = _making_compat(getattr(_creation, _name))
from_numpy = _making_compat(_ops_extra.from_numpy)


for _name in ("abs", "all", "any", "argmax", "argmin", "cat", "chunk", "concat", "flatten", "gather", "log_softmax",
              "max", "mean", "min", "norm", "repeat_interleave", "softmax", "split", "squeeze", "stack", "std", "sum",
              "topk", "transpose", "unsqueeze", "var"):
    if _methods.takes_dim(globals()[_name]):
        globals()[_name] = _methods.numpy_names(globals()[_name])


# the op set by family: the native functions, with NumPy's argument names beside torch's where they take a dim
from .. import comparison as _comparison  # noqa: E402
from .. import indexing as _indexing  # noqa: E402
from .. import pointwise as _pointwise  # noqa: E402
from .. import products as _products  # noqa: E402
from .. import reductions as _reductions  # noqa: E402
from .. import shapes as _shapes  # noqa: E402
from .. import sorting as _sorting  # noqa: E402
from . import linalg  # noqa: E402

_FAMILIES = (_pointwise, _comparison, _reductions, _sorting, _shapes, _indexing, _products)
_FAMILY_NAMES = [name for family in _FAMILIES for name in family.__all__]
for _family in _FAMILIES:
    for _name in _family.__all__:
        _function = getattr(_family, _name)
        globals()[_name] = _methods.numpy_names(_function) if _methods.takes_dim(_function) else _function


# torch.matrix_power is torch.linalg.matrix_power, its matrix named input
matrix_power = _methods.torch_keywords(linalg.matrix_power, input="A")
real, imag = _functions_module.real, _functions_module.imag
hardshrink, prelu = nn.functional.hardshrink, nn.functional.prelu  # torch's top-level names for them
concatenate = cat  # torch's NumPy-style names for the same functions
row_stack = vstack  # noqa: F405

# every operation torch has as a function and as a method, in both forms; the in-place forms of the methods
from .core import forms as _forms  # noqa: E402

for _name in ("max", "min", "gather", "permute", "reshape"):  # the method's torch keywords (other=, dims=…)
    globals()[_name] = _forms.function_form(Tensor, _name)
for _name, _keywords in dict(dot=dict(tensor="other"),
                             dsplit=dict(indices="indices_or_sections", sections="indices_or_sections"),
                             hsplit=dict(indices="indices_or_sections", sections="indices_or_sections"),
                             vsplit=dict(indices="indices_or_sections", sections="indices_or_sections"),
                             tensor_split=dict(indices="indices_or_sections", sections="indices_or_sections",
                                               tensor_indices_or_sections="indices_or_sections")).items():
    globals()[_name] = _methods.torch_keywords(globals()[_name], **_keywords)
    setattr(Tensor, _name, _methods.torch_keywords(getattr(Tensor, _name), **_keywords))
split = _methods.torch_keywords(split, tensor="x")
_forms.torch_parameter_names(globals())  # torch.exp(input=t)
_FORMS = _forms.complete(globals(), Tensor)
for _name, _value in list(globals().items()):  # the native operations refuse out= in words too (torch.cat)
    if not _name.startswith("_") and callable(_value) and not isinstance(_value, type) and \
            getattr(_value, "__module__", "").startswith("tinyattn.") and \
            not getattr(_value, "__module__", "").startswith(("tinyattn.compat", "tinyattn.func")):  # (no transform)
        globals()[_name] = _forms.refusing_out(_value)


# the older spellings scripts still use, the random draws with parameters, the process-level settings
from ..distributions.distribution import lgamma as _distributions_lgamma  # noqa: E402
from ..nn.parametrizations import norm_except_dim as _norm_except_dim  # noqa: E402
from .core import legacy as _legacy  # noqa: E402
from .runtime import *  # noqa: F401,F403,E402
from .runtime import __all__ as _runtime_names  # noqa: E402

_legacy.attach(Tensor)
Tensor.lgamma = _distributions_lgamma
Tensor.lgamma_ = lambda self: self.copy_(_distributions_lgamma(self))
Tensor.unsafe_chunk, Tensor.unsafe_split = Tensor.chunk, Tensor.split
Tensor.unsafe_split_with_sizes = Tensor.split_with_sizes
bernoulli, poisson, binomial, normal = _legacy.bernoulli, _legacy.poisson, _legacy.binomial, _legacy.normal
GradScaler = amp.GradScaler  # torch.GradScaler is torch.amp.GradScaler

# torch's top-level names for nn.functional's functions, where torch's signature is the same
for _name in ("adaptive_avg_pool1d", "avg_pool1d", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "pixel_shuffle",
              "pixel_unshuffle", "channel_shuffle", "pdist", "pairwise_distance", "cosine_similarity", "celu", "celu_",
              "selu", "selu_", "threshold", "threshold_", "bilinear", "rms_norm"):
    globals()[_name] = getattr(nn.functional, _name)
adaptive_max_pool1d = nn.functional.adaptive_max_pool1d_with_indices  # torch's gives (values, indices)


def dropout(input, p, train):
    """``torch.dropout(input, p, train)``: ``F.dropout`` in torch's positional form."""
    return nn.functional.dropout(input, p, train)


def dropout_(input, p, train):
    """``torch.dropout_``: ``torch.dropout`` written into ``input``."""
    return input.copy_(nn.functional.dropout(input, p, train))


def alpha_dropout(input, p, train):
    """``torch.alpha_dropout(input, p, train)``: ``F.alpha_dropout``."""
    return nn.functional.alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    """``torch.feature_alpha_dropout(input, p, train)``: ``F.feature_alpha_dropout``."""
    return nn.functional.feature_alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    """``torch.alpha_dropout`` written into ``input``."""
    return input.copy_(nn.functional.alpha_dropout(input, p, train))


def feature_alpha_dropout_(input, p, train):
    """``torch.feature_alpha_dropout`` written into ``input``."""
    return input.copy_(nn.functional.feature_alpha_dropout(input, p, train))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """``torch.layer_norm``: ``F.layer_norm`` (``cudnn_enable`` has nothing to enable)."""
    return nn.functional.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """``torch.group_norm``: ``F.group_norm`` (``cudnn_enabled`` has nothing to enable)."""
    return nn.functional.group_norm(input, num_groups, weight, bias, eps)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """``torch.asarray``: ``obj`` as a tensor, sharing its memory where it can unless ``copy=True``."""
    out = as_tensor(obj, dtype=dtype, device=device)  # noqa: F405
    if copy:
        out = out.clone()
    elif copy is False and isinstance(obj, Tensor) and out is not obj and out._data is not obj._data:
        raise ValueError("asarray(copy=False): the tensor cannot be given in the dtype or device asked for without "
                         "a copy")
    return out.requires_grad_(True) if requires_grad else out


lgamma = _methods.torch_keywords(_distributions_lgamma, input="x")
norm_except_dim = _norm_except_dim


def unsafe_chunk(input, chunks, dim=0):
    """``chunk``: torch's form without its view checks gives the same tensors."""
    return chunk(input, chunks, dim)


def unsafe_split(input, split_size, dim=0):
    """``split``: torch's form without its view checks gives the same tensors."""
    return split(input, split_size, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """``split_with_sizes``: torch's form without its view checks gives the same tensors."""
    return split_with_sizes(input, split_sizes, dim)  # noqa: F405


set_anomaly_enabled = autograd.set_detect_anomaly


def is_anomaly_check_nan_enabled():
    """Whether anomaly mode checks for NaN: it does whenever it is on."""
    return is_anomaly_enabled()


functional = _types.ModuleType("torch.functional", "torch.functional: functions torch defines in Python.")
for _name in ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "cartesian_prod",
              "block_diag", "cdist", "chain_matmul", "einsum", "norm", "meshgrid", "split", "tensordot", "unique",
              "unique_consecutive", "unravel_index"):
    if _name in globals():
        setattr(functional, _name, globals()[_name])
cpu = _types.ModuleType("torch.cpu", "torch.cpu: the host as a device.")
cpu.is_available, cpu.device_count, cpu.current_device = (lambda: True), (lambda: 1), (lambda: "cpu")
cpu.synchronize, cpu.is_initialized, cpu.set_device = (lambda device=None: None), (lambda: True), (lambda device: None)
cpu.amp = amp

random = _types.ModuleType("torch.random", "torch.random: the library's seeding functions.")
random.manual_seed, random.seed, random.initial_seed = manual_seed, seed, initial_seed  # noqa: F405
random.get_rng_state, random.set_rng_state = get_rng_state, set_rng_state  # noqa: F405


def __getattr__(name):
    raise _missing(__name__, name)


__all__ = [
    "Tensor", "randint",
    "from_numpy", "float", "double", "half", "float32", "float64", "int32", "int64", "long", "uint8",
    "bool", "no_grad", "enable_grad", "is_grad_enabled", "manual_seed", "save", "load", "nn", "optim", "autograd",
    "abs", "all", "any", "argmax", "argmin", "bmm", "cat", "chunk", "clamp", "clone", "concat", "cos", "exp",
    "flatten", "gather", "is_tensor", "log", "log_softmax", "masked_fill", "matmul", "max", "maximum", "mean",
    "min", "minimum", "multinomial", "nonzero", "norm", "permute", "pow", "relu", "repeat_interleave", "reshape",
    "sigmoid", "sin", "softmax", "split", "sqrt", "squeeze", "stack", "std", "sum", "tanh", "topk", "transpose",
    "tril", "triu", "unsqueeze", "var", "where", "device", "Size", "Generator",
    "amp", "autocast", "backends", "cuda", "serialization", "utils", "is_anomaly_enabled", "func", "vmap",
    *_runtime_names, "bernoulli", "poisson", "binomial", "normal", "GradScaler", "random", "jit", "onnx",
    "dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "alpha_dropout_", "feature_alpha_dropout_",
    "layer_norm", "group_norm", "asarray", "lgamma",
    "norm_except_dim", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes", "set_anomaly_enabled",
    "is_anomaly_check_nan_enabled", "functional", "cpu",
    "distributed", "distributions",
    *_function_names, "linalg", *[name for name in _FAMILY_NAMES if name not in _function_names],
    *[name for name in _creation.__all__ if name not in _function_names and name not in _FAMILY_NAMES],
    "concatenate", "row_stack", "matrix_power", "real", "imag", "hardshrink", "prelu", *_FORMS,
]
