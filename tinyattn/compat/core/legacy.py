"""The older spellings of torch that public scripts still use: the ``torch.Tensor(...)`` constructor, ``x.new(...)``,
``add_(alpha, other)``, Python 2's operator names, iteration over the first dimension, ``copy.deepcopy``; and
torch's random draws with parameters (``torch.normal(mean, std)``, ``bernoulli``, ``poisson``, ``binomial``, the
in-place ``exponential_``…), from the library's generator or a ``torch.Generator``.

>>> import tinyattn.compat as torch
>>> torch.Tensor([1, 2]), torch.Tensor(2, 3).shape             # data, or sizes: float32 either way
(tensor([1., 2.]), (2, 3))
>>> x = torch.zeros(2, dtype=torch.float64)
>>> x.new(3).dtype, x.new([1, 2])
(dtype('float64'), tensor([1., 2.], dtype=torch.float64))
>>> _ = torch.manual_seed(0)
>>> torch.bernoulli(torch.tensor([0.0, 1.0]))
tensor([0., 1.])
"""

import numbers
import warnings

import numpy as np

from ... import backend
from ...engine import Tensor as _NativeTensor
from . import random as compat_random


def legacy_init(cls, native_init):
    """``cls.__init__`` (compat's ``Tensor``): torch's constructor ``torch.Tensor(data)`` or ``torch.Tensor(*sizes)``
    (float32, zeros where torch leaves the memory as it finds it); a subclass (``Parameter``) keeps the native
    signature."""

    def __init__(self, *args, requires_grad=False, device=None, **kwargs):
        if type(self) is not cls or kwargs:
            return native_init(self, *args, requires_grad=requires_grad, **kwargs)
        if len(args) == 1 and isinstance(args[0], tuple):
            args = tuple(args[0])  # torch.Tensor(torch.Size([2, 3]))
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            array = np.zeros(args or (0,), dtype=np.float32)  # torch.Tensor(2, 3); torch.Tensor() is empty
        elif len(args) == 1 and isinstance(args[0], _NativeTensor):
            array = args[0]._data
        elif len(args) == 1:
            array = np.asarray(args[0], dtype=np.float32)
        else:
            raise TypeError(f"Tensor(): expected sizes (ints) or one sequence of data, got {args!r}")
        if device is not None and str(device) != "cpu":
            array = backend.to_device(array, str(device))
        native_init(self, array, requires_grad=requires_grad)

    return __init__


def new(self, *args, **kwargs):
    """``x.new(*sizes)`` or ``x.new(data)``: a tensor of ``x``'s dtype and device (torch's legacy constructor)."""
    if len(args) == 1 and isinstance(args[0], tuple):
        args = tuple(args[0])
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return self.new_zeros(args, **kwargs)
    if len(args) == 1:
        return self.new_tensor(args[0], **kwargs)
    raise TypeError(f"new(): expected sizes (ints) or one sequence of data, got {args!r}")


def deprecated_alpha_first(name, original):
    """``original`` (``add``, ``sub``…) taking torch's deprecated ``(alpha, other)`` order as well as
    ``(other, alpha=)``."""

    def method(self, *args, **kwargs):
        if len(args) == 2 and isinstance(args[0], numbers.Number) and isinstance(args[1], _NativeTensor):
            warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number alpha, Tensor other)\nConsider "
                          "using one of the following signatures instead:\n\t"
                          f"{name}(Tensor other, *, Number alpha = 1)",
                          UserWarning, stacklevel=2)
            args, kwargs = (args[1],), {**kwargs, "alpha": args[0]}
        return original(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{name}(other, alpha=1)``; also torch's deprecated ``{name}(alpha, other)``."
    return method


def __iter__(self):
    """The tensor's slices along its first dimension, as torch iterates a tensor."""
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


def __deepcopy__(self, memo):
    """A copy with its own array (and gradient), ``requires_grad`` kept; only a leaf can be copied, as in torch."""
    if self._ctx is not None:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           "at the moment.  If you were attempting to deepcopy a module, this may be because of a "
                           "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
    if id(self) in memo:
        return memo[id(self)]
    copied = _NativeTensor._wrap(self._data.copy(), self)
    copied.__class__ = type(self)
    copied.requires_grad = self.requires_grad
    if self._grad is not None:
        copied._grad = self._grad.copy()
    memo[id(self)] = copied
    return copied


def __delitem__(self, index):
    raise TypeError("Tensor does not support item deletion")


def fill_diagonal_(self, fill_value, wrap=False):
    """Write ``fill_value`` on the main diagonal (every dimension the same size, or 2-D; ``wrap``: a tall matrix's
    diagonal starts again every ``columns + 1`` rows, as NumPy's ``fill_diagonal``), in place."""
    if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
        raise RuntimeError("all dimensions of input must be of equal length" if self.ndim > 2 else
                           "dimensions must larger than 1")
    mask = np.zeros(self.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return self.masked_fill_(_NativeTensor._wrap(backend.to_device(mask, self.device) if self.device != "cpu"
                                                 else mask), fill_value)


def _draws(shape, dtype, device, generator, draw):
    """``draw(rng, shape)`` from ``generator`` (a ``torch.Generator``) or the library's generator for ``device``."""
    rng = compat_random.numpy_generator(generator)
    if rng is None:
        rng = backend.generator(device if device in ("cpu", "cuda") else "cpu")
    out = np.asarray(backend.to_numpy(draw(rng, tuple(shape))), dtype=dtype)
    return backend.to_device(out, device) if device not in ("cpu", "strict") else out


def _filled(self, draw, generator=None):
    """``self`` filled in place with ``draw(rng, shape)``; returns ``self``."""
    values = _draws(self.shape, self.dtype, self.device, generator, draw)
    return self.copy_(_NativeTensor._wrap(values, self))


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with draws from the exponential distribution of rate ``lambd``, in place."""
    return _filled(self, lambda rng, shape: rng.exponential(1.0 / lambd, shape), generator)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with draws from the Cauchy distribution, in place."""
    return _filled(self, lambda rng, shape: median + sigma * rng.standard_cauchy(shape), generator)


def geometric_(self, p, *, generator=None):
    """Fill with draws from the geometric distribution (trials to the first success, from 1), in place."""
    return _filled(self, lambda rng, shape: rng.geometric(p, shape), generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with draws whose logarithm is ``N(mean, std²)``, in place."""
    return _filled(self, lambda rng, shape: rng.lognormal(mean, std, shape), generator)


def random_(self, *args, generator=None, **kwargs):
    """``random_(from=0, to=None)``: fill with integers drawn uniformly from ``[from, to)`` (``random_(to)``:
    ``[0, to)``; no bound: up to the dtype's mantissa for floats, its maximum for integers), in place."""
    bounds = dict(zip(("from", "to"), args), **kwargs)
    from_, to = bounds.get("from", 0), bounds.get("to")
    if len(args) == 1 and not kwargs:
        from_, to = 0, args[0]
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        to = 2 ** (np.finfo(self.dtype).nmant + 1) if self.dtype.kind == "f" else int(np.iinfo(self.dtype).max)
    return _filled(self, lambda rng, shape: rng.integers(from_, to, shape), generator)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0 or 1, each 1 with probability ``p`` (a number or a tensor), in place."""
    probability = backend.to_numpy(p._data) if isinstance(p, _NativeTensor) else p
    return _filled(self, lambda rng, shape: rng.random(shape) < probability, generator)


def bernoulli(input, p=None, *, generator=None, out=None):
    """Draws of 0 or 1, each 1 with the probability in ``input`` (or ``p``), in ``input``'s dtype."""
    if out is not None:
        raise TypeError("bernoulli(): tinyattn.compat does not write results into a given tensor (out=)")
    probability = backend.to_numpy(input._data) if p is None else p
    values = _draws(input.shape, input.dtype, input.device, generator,
                    lambda rng, shape: rng.random(shape) < probability)
    return _NativeTensor._wrap(values, input)


def poisson(input, generator=None):
    """Draws from the Poisson distributions whose rates are ``input``."""
    rate = backend.to_numpy(input._data)
    return _NativeTensor._wrap(_draws(input.shape, input.dtype, input.device, generator,
                                      lambda rng, shape: rng.poisson(rate, shape)), input)


def binomial(count, prob, generator=None):
    """Draws from the binomial distributions of ``count`` trials with success probability ``prob``."""
    n, p = backend.to_numpy(count._data), backend.to_numpy(prob._data)
    shape = np.broadcast_shapes(n.shape, p.shape)
    return _NativeTensor._wrap(_draws(shape, count.dtype, count.device, generator,
                                      lambda rng, shape: rng.binomial(n.astype(np.int64), p, shape)), count)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, device=None, requires_grad=False):
    """``torch.normal``: draws from ``N(mean, std²)``, ``mean`` and ``std`` tensors (broadcast) or numbers (then
    ``size`` gives the shape)."""
    if out is not None:
        raise TypeError("normal(): tinyattn.compat does not write results into a given tensor (out=)")
    like = mean if isinstance(mean, _NativeTensor) else std if isinstance(std, _NativeTensor) else None
    m = backend.to_numpy(mean._data) if isinstance(mean, _NativeTensor) else mean
    s = backend.to_numpy(std._data) if isinstance(std, _NativeTensor) else std
    if like is None:
        if size is None:
            raise TypeError("normal(): with a number mean and std, give size=")
        shape, dtype, device = tuple(size), dtype or np.float32, str(device or "cpu")
    else:
        shape, dtype, device = np.broadcast_shapes(np.shape(m), np.shape(s)), like.dtype, like.device
    values = _draws(shape, dtype, device, generator, lambda rng, shape: m + s * rng.standard_normal(shape))
    from .tensor import Tensor

    result = _NativeTensor._wrap(values, Tensor)
    if requires_grad:
        result.requires_grad_(True)
    return result


def attach(cls):
    """Put the legacy methods and the in-place draws on ``cls`` (compat's ``Tensor``)."""
    cls.__init__ = legacy_init(cls, _NativeTensor.__init__)
    methods = dict(new=new, __iter__=__iter__, __deepcopy__=__deepcopy__, __delitem__=__delitem__,
                   __div__=cls.__truediv__, __idiv__=cls.__itruediv__, __nonzero__=cls.__bool__,
                   __long__=cls.__int__, __rlshift__=lambda self, other: self.new_tensor(other) << self,
                   __rrshift__=lambda self, other: self.new_tensor(other) >> self,
                   exponential_=exponential_, cauchy_=cauchy_, geometric_=geometric_, log_normal_=log_normal_,
                   random_=random_, bernoulli_=bernoulli_, bernoulli=bernoulli, fill_diagonal_=fill_diagonal_)
    for name in ("add", "add_", "sub", "sub_"):
        methods[name] = deprecated_alpha_first(name, getattr(cls, name))
    for name, method in methods.items():
        setattr(cls, name, method)


__all__ = ["bernoulli", "poisson", "binomial", "normal"]

