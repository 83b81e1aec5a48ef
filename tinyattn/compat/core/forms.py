"""The forms torch gives one operation, made by rule from the one compat writes: a method's function form
(``torch.exp(x)`` from ``x.exp()``) and the reverse, and a method's in-place form (``x.exp_()`` from ``x.exp()``,
then ``torch.exp_(x)`` from that).

The rule knows which forms torch has from two lists of torch's names, below (compat never imports torch):
``FUNCTIONS_AND_METHODS``, the operations torch offers both as ``torch.NAME(input, …)`` and as
``input.NAME(…)``, and ``IN_PLACE``, torch's in-place tensor methods. A form is made only where torch has it
and compat has the other form, so a name compat does not implement stays missing, and says so.

An in-place form computes the out-of-place result and writes it into the tensor's own array through
``tinyattn.inplace.rewrite``: a leaf that requires grad is refused while the graph is recorded, the version
counter rises (a node that saved the old values refuses its backward), views of the tensor see the write, and
the result is cast to the tensor's dtype where torch casts (``x.eq_(y)`` keeps ``x``'s float dtype), or refused
where it cannot (``long_tensor.sqrt_()``). The in-place forms that change the shape (``unsqueeze_``,
``t_``…) rebind the tensor to the view the out-of-place form makes.

>>> import tinyattn.compat as torch
>>> x = torch.tensor([1.0, 4.0])
>>> x.sqrt_() is x, x
(True, tensor([1., 2.]))
>>> torch.relu_(torch.tensor([-1.0, 2.0]))
tensor([0., 2.])
>>> torch.tensor([1.0, 2.0]).unsqueeze_(0).shape
(1, 2)
"""

import functools
import inspect

from ... import inplace as _inplace
from ...engine import Tensor as _NativeTensor
from ...engine import is_grad_enabled
from . import methods

# torch's operations with both a function and a method form (torch 2.x; the tests check the list is whole
# for what compat has)
FUNCTIONS_AND_METHODS = frozenset("""
abs abs_ absolute acos acos_ acosh acosh_ add addbmm addcdiv addcmul addmm addmv addmv_ addr adjoint all
allclose amax amin aminmax angle any arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan
arctan2 arctan_ arctanh arctanh_ argmax argmin argsort argwhere as_strided as_strided_ as_strided_scatter asin
asin_ asinh asinh_ atan atan2 atan_ atanh atanh_ baddbmm bernoulli bincount bitwise_and bitwise_left_shift
bitwise_not bitwise_or bitwise_right_shift bitwise_xor bmm broadcast_to ceil ceil_ cholesky cholesky_inverse
cholesky_solve chunk clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ clip clip_ clone conj
conj_physical conj_physical_ copysign corrcoef cos cos_ cosh cosh_ count_nonzero cov cross cummax cummin
cumprod cumsum deg2rad deg2rad_ dequantize det detach detach_ diag diag_embed diagflat diagonal
diagonal_scatter diff digamma dist div divide dot dsplit eig eq equal erf erf_ erfc erfc_ erfinv exp exp2
exp2_ exp_ expm1 expm1_ fill_ fix fix_ flatten flip fliplr flipud float_power floor floor_ floor_divide fmax
fmin fmod frac frac_ frexp gather gcd gcd_ ge geqrf ger get_device greater greater_equal gt hardshrink
heaviside histc histogram hsplit hypot i0 i0_ igamma igammac index_add index_copy index_fill
index_put index_put_ index_reduce index_select inner int_repr inverse is_complex is_conj is_distributed
is_floating_point is_inference is_neg is_nonzero is_same_size is_signed isclose isfinite isinf isnan isneginf
isposinf isreal istft kron kthvalue lcm lcm_ ldexp ldexp_ le lerp less less_equal lgamma log log10 log10_
log1p log1p_ log2 log2_ log_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not
logical_or logical_xor logit logit_ logsumexp lstsq lt lu lu_solve masked_fill masked_scatter masked_select
matmul matrix_exp matrix_power max maximum mean median min minimum mm mode moveaxis movedim msort mul
multinomial multiply mv mvlgamma nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum narrow
narrow_copy ne neg neg_ negative negative_ nextafter nonzero nonzero_static norm not_equal numel orgqr ormqr
outer permute pinverse polygamma positive pow prelu prod put qr quantile rad2deg rad2deg_ ravel reciprocal
reciprocal_ relu relu_ remainder renorm repeat_interleave reshape resize_as_ resolve_conj resolve_neg roll
rot90 round round_ rsqrt rsqrt_ scatter scatter_add scatter_reduce select select_scatter sgn sigmoid sigmoid_
sign signbit sin sin_ sinc sinc_ sinh sinh_ slice_inverse slice_scatter slogdet smm softmax solve sort split
split_with_sizes sqrt sqrt_ square square_ squeeze sspaddmm std stft sub subtract sum svd swapaxes swapdims
symeig t take take_along_dim tan tan_ tanh tanh_ tensor_split tile topk trace transpose triangular_solve tril
triu true_divide trunc trunc_ unbind unflatten unique unique_consecutive unsafe_chunk unsafe_split
unsafe_split_with_sizes unsqueeze var vdot vsplit where xlogy xlogy_ zero_
""".split())

# torch's in-place tensor methods that write the result of their out-of-place form (torch 2.x; not those that
# draw random numbers, take a Python function, or resize or re-point the storage)
IN_PLACE = frozenset("""
abs_ absolute_ acos_ acosh_ add_ addbmm_ addcdiv_ addcmul_ addmm_ addmv_ addr_ arccos_ arccosh_ arcsin_
arcsinh_ arctan2_ arctan_ arctanh_ asin_ asinh_ atan2_ atan_ atanh_ baddbmm_ bitwise_and_ bitwise_left_shift_
bitwise_not_ bitwise_or_ bitwise_right_shift_ bitwise_xor_ ceil_ clamp_ clamp_max_ clamp_min_ clip_
conj_physical_ copysign_ cos_ cosh_ cumprod_ cumsum_ deg2rad_ digamma_ div_ divide_ eq_ erf_ erfc_ erfinv_
exp2_ exp_ expm1_ fix_ float_power_ floor_ floor_divide_ fmod_ frac_ gcd_ ge_ greater_ greater_equal_ gt_
heaviside_ hypot_ i0_ igamma_ igammac_ index_add_ index_copy_ index_fill_ index_put_ index_reduce_ lcm_ ldexp_
le_ lerp_ less_ less_equal_ lgamma_ log10_ log1p_ log2_ log_ logical_and_ logical_not_ logical_or_
logical_xor_ logit_ lt_ masked_fill_ masked_scatter_ mul_ multiply_ mvlgamma_ nan_to_num_ ne_ neg_ negative_
nextafter_ not_equal_ polygamma_ pow_ put_ rad2deg_ reciprocal_ relu_ remainder_ renorm_ round_ rsqrt_
scatter_ scatter_add_ scatter_reduce_ sgn_ sigmoid_ sign_ sin_ sinc_ sinh_ sqrt_ square_ sub_ subtract_ tan_
tanh_ tril_ triu_ true_divide_ trunc_ xlogy_
""".split())

# the in-place forms that change the tensor's shape, not its values: the tensor becomes the view
RESHAPING_IN_PLACE = frozenset("squeeze_ unsqueeze_ t_ transpose_ swapaxes_ swapdims_".split())


def _has(owner, name):
    try:
        getattr(owner, name)
    except AttributeError:
        return False
    return True


def in_place(cls, name):
    """``name_``, the in-place form of ``cls``'s method ``name``: its result written into the tensor."""
    out_of_place = getattr(cls, name)

    @functools.wraps(out_of_place)
    def method(self, *args, **kwargs):
        return _inplace.rewrite(self, lambda old: out_of_place(old, *args, **kwargs), f"{name}_")

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"``{name}``'s result written into this tensor, in place (torch's ``{name}_``)."
    return method


def reshaping_in_place(cls, name):
    """``name_`` for a ``name`` that makes a view of another shape (``unsqueeze``): the tensor becomes that view
    (same array, same version counter, and in the graph the view's node)."""
    out_of_place = getattr(cls, name)

    @functools.wraps(out_of_place)
    def method(self, *args, **kwargs):
        if is_grad_enabled() and self.requires_grad and self.is_leaf:
            raise RuntimeError(f"{method.__name__}: a leaf tensor that requires grad cannot be changed in place; do it "
                               "inside `with torch.no_grad():`, or work on a clone()")
        view = out_of_place(self, *args, **kwargs)
        own_base = self._view is None  # the view's base is this tensor itself: it stays its array's owner
        self._data, self._ctx, self.requires_grad = view._data, view._ctx, view.requires_grad
        self._view, self._tangents = (None if own_base else view._view), view._tangents
        self._version[0] += 1  # torch counts a change of shape as a write
        return self

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"This tensor made its own ``{name}`` view, in place (torch's ``{name}_``)."
    return method


def _keywords(fn):
    try:
        parameters = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return set()
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def resize_(self, *sizes, size=None):
    """torch's ``resize_`` where it keeps the number of elements (the tensor becomes its reshaped view, as
    ``reshape`` would make it); a change of that number, which in torch reallocates or exposes the storage's
    other elements, raises: make a new tensor (``torch.empty``/``zeros``) or use ``reshape``."""
    if size is not None:
        sizes = (size,)
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    count = 1
    for size in shape:
        count *= int(size)
    if count != self.numel():
        raise RuntimeError(f"resize_: tinyattn.compat resizes only to the same number of elements; {self.shape} "
                           f"has {self.numel()}, {shape} has {count}: make a new tensor (torch.zeros(...)) instead")
    return reshaping_in_place(type(self), "reshape")(self, *shape)


def resize_as_(self, the_template):
    return resize_(self, the_template.shape)


def attach_in_place(cls):
    """Give ``cls`` each in-place form torch has whose out-of-place form ``cls`` has and that it lacks, or that
    takes fewer of torch's keywords than the out-of-place form (``div_`` without ``rounding_mode``)."""
    for name, method in (("resize_", resize_), ("resize_as_", resize_as_)):
        if not _has(cls, name):
            setattr(cls, name, method)
    for name_ in sorted(IN_PLACE | RESHAPING_IN_PLACE):
        name = name_[:-1]
        if not _has(cls, name):
            continue
        if not _has(cls, name_) or _keywords(getattr(cls, name_)) < _keywords(getattr(cls, name)):
            make = reshaping_in_place if name_ in RESHAPING_IN_PLACE else in_place
            setattr(cls, name_, make(cls, name))


def function_form(cls, name):
    """``torch.NAME(input, *args, **kwargs)``: ``input.NAME(*args, **kwargs)`` with ``cls``'s method."""
    method = getattr(cls, name)

    @functools.wraps(method)
    def function(input, *args, **kwargs):
        if not isinstance(input, _NativeTensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
        return method(input, *args, **kwargs)

    function.__qualname__ = name
    try:  # the method's signature, its tensor named ``input``
        signature = inspect.signature(method)
        first, *rest = signature.parameters.values()
        function.__signature__ = signature.replace(parameters=[first.replace(name="input"), *rest])
    except (TypeError, ValueError):
        pass
    return function


def method_form(function):
    """``t.NAME(*args, **kwargs)``: ``torch.NAME(t, *args, **kwargs)``."""

    @functools.wraps(function)
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    return method


def _is_operation(value):
    return callable(value) and not isinstance(value, type) and not isinstance(value, property)


def torch_parameter_names(namespace):
    """Rename, in ``namespace``'s functions, the native operations' tensor parameters to torch's: a first ``x``
    is ``input``; ``a, b`` are ``input, other`` (``torch.exp(input=t)``, ``torch.matmul(input=a, other=b)``), but
    in ``tensordot``, where torch calls them ``a, b`` too."""
    for name, value in list(namespace.items()):
        if name.startswith("_") or name == "tensordot" or isinstance(value, type) or not callable(value):
            continue
        try:
            parameters = list(inspect.signature(value).parameters)
        except (TypeError, ValueError):
            continue
        if parameters[:2] == ["a", "b"]:
            namespace[name] = methods.torch_keywords(value, input="a", other="b")
        elif parameters[:1] == ["x"]:
            namespace[name] = methods.torch_keywords(value, input="x")


def refusing_out(function):
    """``function`` raising a ``TypeError`` that says what to do when given torch's ``out=`` (compat writes no
    result into a given tensor), where its signature has no ``out``."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return function
    if "out" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return function

    @functools.wraps(function)
    def without_out(*args, **kwargs):
        if "out" in kwargs:
            raise TypeError(f"{function.__name__}(): tinyattn.compat does not write results into a given tensor "
                            f"(out=); assign the result instead (y = torch.{function.__name__}(...)), or copy it "
                            "in with y.copy_(...)")
        return function(*args, **kwargs)

    return without_out


def complete(namespace, cls):
    """Give ``cls`` the method form of each function in ``namespace`` (compat's module dict) that torch has in
    both forms, then the in-place forms torch has (``attach_in_place``), then ``namespace`` the function form of
    each such method, every function form refusing ``out=`` in words (``refusing_out``); returns the names
    added to ``namespace``."""
    for name in sorted(FUNCTIONS_AND_METHODS):  # methods first, so that they get their in-place forms too
        if name in namespace and not _has(cls, name) and _is_operation(namespace[name]):
            setattr(cls, name, method_form(namespace[name]))
    attach_in_place(cls)
    added = []
    for name in sorted(FUNCTIONS_AND_METHODS):
        if name not in namespace and _has(cls, name) and _is_operation(getattr(cls, name)):
            namespace[name] = function_form(cls, name)
            added.append(name)
    for name in sorted(FUNCTIONS_AND_METHODS):  # the operations' function forms refuse out= in words
        if name in namespace and _is_operation(namespace[name]):
            namespace[name] = refusing_out(namespace[name])
    return added
