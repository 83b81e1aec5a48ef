"""The tensor methods and functions of torch's everyday API that the native tensor does not carry.

Each is written from the native differentiable operations (indexing, ``gather``, ``transpose``,
arithmetic), so gradients come for free. What torch gives no gradient (sorting indices,
the ``is*`` tests) comes cut from the graph. Argument names, defaults, result dtypes and errors are torch's.

>>> import tinyattn.compat as torch
>>> x = torch.tensor([[3.0, 1.0, 2.0], [0.5, 4.0, 1.5]], requires_grad=True)
>>> values, indices = x.sort(dim=1, descending=True)
>>> values.tolist(), indices.tolist()
([[3.0, 2.0, 1.0], [4.0, 1.5, 0.5]], [[0, 2, 1], [1, 2, 0]])
>>> x.argmax(axis=1)                         # NumPy's names are aliases, as in torch
tensor([0, 1])
>>> f"{x.sum():.2f}"
'12.00'
>>> ["a", "b", "c"][torch.tensor(2)]
'c'
"""

import builtins
import functools
import inspect

import numpy as np

from ... import ops as _ops
from ...engine import Tensor as _NativeTensor


def _cut(array, like):
    """``array`` as a tensor of ``like``'s class, with no graph (results torch gives no gradient)."""
    return _NativeTensor._wrap(array, like)


def _dim(dim, ndim, name):
    """``dim`` in ``[0, ndim)`` (a 0-d tensor has the one dimension ``0`` or ``-1``, as in torch)."""
    n = builtins.max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or not -n <= dim < n:
        raise IndexError(f"{name}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return int(dim) % n


# ----------------------------------------------------------------------------- Python protocols


def __index__(self):
    """``items[t]``, ``range(t)``, ``data[i:i + n]`` with ``t`` an integer tensor of one element."""
    if self._data.dtype.kind not in "biu" or self._data.size != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(self._data.reshape(()))


# ----------------------------------------------------------------------------- NumPy-style aliases


def numpy_names(fn):
    """``fn`` accepting torch's NumPy-style aliases: ``axis`` for ``dim``, ``keepdims`` for ``keepdim``."""

    @functools.wraps(fn)
    def with_aliases(*args, **kwargs):
        for alias, name in (("axis", "dim"), ("keepdims", "keepdim")):
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}() got values for both {name!r} and its alias {alias!r}")
                kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    try:  # the signature shows the aliases, after torch's names
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return with_aliases
    parameters = list(signature.parameters.values())
    aliases = [inspect.Parameter(alias, inspect.Parameter.KEYWORD_ONLY, default=None)
               for alias, name in (("axis", "dim"), ("keepdims", "keepdim"))
               if name in signature.parameters and alias not in signature.parameters]
    at = len(parameters) - (parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD)
    with_aliases.__signature__ = signature.replace(parameters=parameters[:at] + aliases + parameters[at:])
    return with_aliases


# the native operations' names for tensors that torch calls otherwise (``input``, ``other``)
NATIVE_ONLY_NAMES = frozenset({"x", "a", "b"})


def torch_keywords(fn, **names):
    """``fn`` also taking torch's keyword names for its parameters: ``names`` maps a torch keyword to ``fn``'s
    parameter (``input="x"``: ``torch.exp(input=t)``; ``shape="shape"`` for ``reshape(*shape)``: a keyword
    given for a ``*`` parameter is that parameter's sequence, ``t.reshape(shape=(2, 3))``). The signature
    shows torch's names: a native-only name (``x``) replaced, the other keywords after ``fn``'s own."""
    signature = inspect.signature(fn)
    kinds = {name: p.kind for name, p in signature.parameters.items()}
    for theirs, ours in names.items():
        if ours not in kinds:
            raise TypeError(f"torch_keywords: {fn.__name__} has no parameter {ours!r} for torch's {theirs!r}")

    @functools.wraps(fn)
    def with_torch_names(*args, **kwargs):
        for theirs, ours in names.items():
            if theirs not in kwargs or theirs == ours and kinds[ours] is not inspect.Parameter.VAR_POSITIONAL:
                continue
            value = kwargs.pop(theirs)
            if kinds[ours] is inspect.Parameter.VAR_POSITIONAL and value is None:  # (the signature's default)
                continue
            if kinds[ours] is inspect.Parameter.VAR_POSITIONAL:  # its sequence, after the ones before it
                args = (*args, *(value if isinstance(value, (tuple, list)) else (value,)))
            elif ours in kwargs:
                raise TypeError(f"{fn.__name__}() got values for both {ours!r} and its torch name {theirs!r}")
            elif kinds[ours] is inspect.Parameter.POSITIONAL_ONLY:
                args = (value, *args)
            else:
                kwargs[ours] = value
        return fn(*args, **kwargs)

    renamed = {ours: theirs for theirs, ours in names.items() if ours in NATIVE_ONLY_NAMES}
    keywords = [inspect.Parameter(theirs, inspect.Parameter.KEYWORD_ONLY, default=None)
                for theirs, ours in names.items() if ours not in renamed and theirs != ours
                or kinds[ours] is inspect.Parameter.VAR_POSITIONAL]
    parameters = []
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL and name in names.values():
            parameters.append(parameter.replace(name="sizes" if "sizes" not in names else "values"))
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            parameters.extend(keywords)
            keywords = []
            parameters.append(parameter)
        else:
            parameters.append(parameter.replace(name=renamed.get(name, name)))
    with_torch_names.__signature__ = signature.replace(parameters=parameters + keywords)
    return with_torch_names


def takes_dim(fn):
    """Whether ``fn`` has a ``dim`` or ``keepdim`` parameter (so that torch gives it the aliases)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "dim" in parameters or "keepdim" in parameters


# ----------------------------------------------------------------------------- masked_fill's value


def _checked_fill_value(value, name):
    if isinstance(value, _NativeTensor) and value.ndim != 0:
        raise RuntimeError(f"{name} only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return value


def masked_fill(self, mask, value):
    return _ops.masked_fill(self, mask, _checked_fill_value(value, "masked_fill_"))


def masked_fill_(self, mask, value):
    return _NativeTensor.masked_fill_(self, mask, _checked_fill_value(value, "masked_fill_"))


# ----------------------------------------------------------------------------- shape and selection




# ----------------------------------------------------------------------------- tests and logic




# ----------------------------------------------------------------------------- conversions and placement


def pin_memory(self, device=None):
    """Host memory is what NumPy holds already: the tensor itself."""
    return self


def bfloat16(self):
    raise TypeError("bfloat16 has no NumPy dtype, so tinyattn.compat cannot hold it; use float32 (t.float()) "
                    "or float16 (t.half())")


def detach_(self):
    """Cut this tensor from its graph, in place (torch's ``detach_``)."""
    if self._view is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self._ctx, self.requires_grad, self._tangents = None, False, None  # (its forward-mode tangents too)
    return self


def swapaxes(self, axis0, axis1):
    return self.transpose(axis0, axis1)


def swapdims(self, dim0, dim1):
    return self.transpose(dim0, dim1)


# ----------------------------------------------------------------------------- torch's keywords


def _keyword_forms(cls):
    """torch's keywords for the native methods that take them under other names or not at all."""
    native = {name: getattr(cls, name) for name in (
        "reshape", "view", "permute", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "sum_to_size",
        "split", "gather", "max", "min", "copy_", "matmul", "numpy", "uniform_", "normal_", "new_tensor", "type")}

    def gather(self, dim, index, *, sparse_grad=False):
        """``sparse_grad`` asks for a sparse gradient, which compat does not have: its gradient is dense."""
        return native["gather"](self, dim, index)

    def extremum(name, elementwise):
        def max_or_min(self, dim=None, keepdim=False, *, other=None):
            """The largest (smallest) element, or the values and indices along ``dim``, or with ``other`` (a tensor,
            given as ``dim`` or by name) the elementwise ``maximum`` (``minimum``), as torch's overloads."""
            if other is not None or isinstance(dim, _NativeTensor):
                return getattr(self, elementwise)(dim if other is None else other)
            return native[name](self, dim, keepdim)

        max_or_min.__name__ = max_or_min.__qualname__ = name
        return max_or_min

    def copy_(self, src=None, non_blocking=False, *, other=None):
        """``non_blocking`` changes nothing: compat's copies are synchronous; ``other`` is torch's other name
        for ``src``."""
        if (src is None) == (other is None):
            raise TypeError("copy_() takes one source tensor, as src (or other)")
        return native["copy_"](self, other if src is None else src)

    def uniform_(self, *args, generator=None, **kwargs):
        """``uniform_(from=0, to=1, *, generator=None)`` (``a``, ``b`` as the native method names them)."""
        low, high = _bounds(args, kwargs, ("from", "a"), ("to", "b"), (0.0, 1.0), "uniform_")
        if generator is None:
            return native["uniform_"](self, low, high)
        draws = generator.rng.uniform(low, high, self.shape)
        return self.copy_(_NativeTensor._wrap(draws.astype(self._data.dtype)))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        if generator is None:
            return native["normal_"](self, mean, std)
        draws = generator.rng.normal(mean, std, self.shape)
        return self.copy_(_NativeTensor._wrap(draws.astype(self._data.dtype)))

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        made = native["new_tensor"](self, data, dtype)
        made = made if device is None else made.to(device)
        return made.requires_grad_(requires_grad) if requires_grad else made

    def type(self, dtype=None, non_blocking=False):
        """``non_blocking`` changes nothing: compat's copies are synchronous."""
        return native["type"](self, dtype)

    view_of_shape = torch_keywords(native["view"], size="shape")

    def view(self, *shape, size=None, dtype=None):
        """``view(*shape)`` (or ``size=``), or ``view(dtype)``: the same bytes read as another dtype (the last
        dimension scaled by the ratio of the item sizes), sharing the array and its version counter, without
        a gradient."""
        if len(shape) == 1 and _is_dtype(shape[0]):
            dtype, shape = shape[0], ()
        if dtype is None:
            return view_of_shape(self, *shape) if size is None else view_of_shape(self, size=size)
        if shape or size is not None:
            raise TypeError("view() takes a shape or a dtype, not both")
        dtype = np.dtype(dtype)
        if self.requires_grad and dtype.kind in "fc" and dtype != self._data.dtype:
            raise RuntimeError(f"view({dtype}): tinyattn.compat gives no gradient through a reinterpretation of "
                               f"{self._data.dtype} bytes; detach() the tensor first")
        try:
            array = self._data.view(dtype)
        except ValueError as error:
            raise RuntimeError(f"view({dtype}) of a {self._data.dtype} tensor of shape {self.shape}: {error}") from None
        result = _cut(array, self)
        result._version = self._version
        return result

    def is_pinned(self, device=None):
        return False

    def numpy(self, *, force=False):
        """A NumPy copy of the values (``force`` changes nothing: it is always a host copy, without a graph)."""
        return native["numpy"](self)

    return dict(
        reshape=torch_keywords(native["reshape"], shape="shape"),
        view=view,
        permute=torch_keywords(native["permute"], dims="dims"),
        expand=torch_keywords(native["expand"], size="shape"),
        repeat=torch_keywords(native["repeat"], repeats="sizes"),
        new_zeros=torch_keywords(native["new_zeros"], size="size"),
        new_ones=torch_keywords(native["new_ones"], size="size"),
        new_empty=torch_keywords(native["new_empty"], size="size"),
        sum_to_size=torch_keywords(native["sum_to_size"], size="size"),
        split=torch_keywords(native["split"], split_size="split_size_or_sections"),
        matmul=torch_keywords(native["matmul"], other="b"),
        gather=gather, max=extremum("max", "maximum"), min=extremum("min", "minimum"), copy_=copy_,
        uniform_=uniform_, normal_=normal_, new_tensor=new_tensor, type=type, is_pinned=is_pinned, numpy=numpy,
    )


def _is_dtype(value):
    return isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, np.generic)


def _bounds(args, kwargs, low_names, high_names, defaults, name):
    """``(low, high)`` from positional ``args`` and keywords under either of each one's names."""
    values = list(args) + [None] * (2 - len(args))
    for position, names in enumerate((low_names, high_names)):
        for keyword in names:
            if keyword in kwargs:
                if values[position] is not None:
                    raise TypeError(f"{name}() got multiple values for argument {names[0]!r}")
                values[position] = kwargs.pop(keyword)
    if kwargs or len(args) > 2:
        raise TypeError(f"{name}() got unexpected arguments {sorted(kwargs) or args[2:]}")
    return tuple(defaults[i] if v is None else v for i, v in enumerate(values))


# ----------------------------------------------------------------------------- real tensors' complex views


def _real_only(name):
    """``name`` of a real tensor: the tensor itself (torch's ``conj``, ``resolve_conj``… of a real tensor)."""

    def identity(self):
        if self._data.dtype.kind == "c":
            raise TypeError(f"{name}(): tinyattn.compat computes with real tensors only (got {self._data.dtype})")
        return self

    identity.__name__ = identity.__qualname__ = name
    return identity


def adjoint(self):
    """The conjugate transpose of the last two dimensions: for a real tensor, ``mT``."""
    _real_only("adjoint")(self)
    return self.transpose(-2, -1)


def imag(self):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def narrow_copy(self, dim, start, length):
    return self.narrow(dim, start, length).clone()


# ----------------------------------------------------------------------------- Python protocols torch adds


def __contains__(self, element):
    """``element in t``: whether any element equals it (torch's rule)."""
    if not isinstance(element, (_NativeTensor, builtins.int, builtins.float, builtins.bool)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                           f"{type(element).__name__}.")
    return builtins.bool((self == element).any())


def __reversed__(self):
    return self if self.ndim == 0 else self.flip(0)


def stride(self, dim=None):
    """The steps, in elements, between neighbours along each dimension (NumPy's byte strides over the item
    size)."""
    strides = tuple(step // self._data.itemsize for step in self._data.strides)
    return strides if dim is None else strides[_dim(dim, self.ndim, "stride")]


def data_ptr(self):
    """The address of the first element (NumPy's or CuPy's array pointer)."""
    data = self._data
    return int(data.ctypes.data if isinstance(data, np.ndarray) else data.data.ptr)


# ----------------------------------------------------------------------------- what kind of tensor it is


def is_signed(self):
    """Whether the dtype holds negative numbers (every dtype but ``bool`` and the unsigned integers)."""
    return self._data.dtype.kind not in "bu"


def is_complex(self):
    return self._data.dtype.kind == "c"


def is_nonzero(self):
    """The truth of a one-element tensor (torch's ``is_nonzero``); an error for any other size."""
    if self._data.size == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if self._data.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(self._data.reshape(()))


def is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def get_device(self):
    """``-1`` for a tensor in host memory, the GPU's index (0) for one on a GPU, as torch's."""
    return -1 if self.device == "cpu" else 0


class Layout:
    """``torch.strided``: the one memory layout compat's (dense) tensors have."""

    def __repr__(self):
        return "torch.strided"


strided = Layout()

# the tests torch answers for every tensor, with the one answer a dense tensor in host or GPU memory gives here:
# methods (``t.is_conj()``) and attributes (``t.is_sparse``), as in torch
_CONSTANT_TESTS = dict(is_conj=False, is_neg=False, is_inference=False, is_shared=False, is_distributed=False)
_CONSTANT_ATTRIBUTES = dict(is_sparse=False, is_sparse_csr=False, is_quantized=False, is_meta=False,
                            is_mkldnn=False, is_nested=False)


def _calling(method_name):
    """A method that calls the tensor's ``method_name`` (looked up at the call: made after this one)."""
    return lambda self, other: getattr(self, method_name)(other)


def _answering(answer):
    """A method that gives ``answer`` whatever the tensor."""
    return lambda self: answer


# ----------------------------------------------------------------------------- attaching them


def attach(cls):
    """Put the methods above on ``cls`` (compat's ``Tensor``) and give every method with a ``dim``
    torch's NumPy-style aliases."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        method = getattr(cls, name, None)
        if callable(method) and not isinstance(method, type) and takes_dim(method):
            setattr(cls, name, numpy_names(method))
    methods = dict(
        __index__=__index__, masked_fill=masked_fill, masked_fill_=masked_fill_,
        pin_memory=pin_memory, bfloat16=bfloat16, detach_=detach_,
        nelement=lambda self: self.numel(), ndimension=lambda self: self.ndim,
        swapaxes=swapaxes, swapdims=swapdims,
    )
    methods.update(_keyword_forms(cls))
    methods.update({name: _real_only(name) for name in ("conj", "resolve_conj", "resolve_neg", "conj_physical")})
    methods.update(adjoint=adjoint, narrow_copy=narrow_copy, __contains__=__contains__,
                   __reversed__=__reversed__, stride=stride, data_ptr=data_ptr, __abs__=lambda self: self.abs())
    # the in-place operators torch has beyond += -= *= /=: the in-place methods (made by ``forms``)
    for operator_name, method_name in (("__ipow__", "pow_"), ("__imod__", "remainder_"),
                                       ("__ifloordiv__", "floor_divide_"), ("__iand__", "bitwise_and_"),
                                       ("__ior__", "bitwise_or_"), ("__ixor__", "bitwise_xor_"),
                                       ("__ilshift__", "bitwise_left_shift_"),
                                       ("__irshift__", "bitwise_right_shift_")):
        methods[operator_name] = _calling(method_name)
    methods.update(is_signed=is_signed, is_complex=is_complex, is_nonzero=is_nonzero, is_same_size=is_same_size,
                   get_device=get_device, cfloat=lambda self: self.to(np.complex64),
                   cdouble=lambda self: self.to(np.complex128))
    for test, answer in _CONSTANT_TESTS.items():
        methods[test] = _answering(answer)
    # torch's other names for the same methods (NumPy's names and older ones)
    for alias, name in (("absolute", "abs"), ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"),
                        ("less_equal", "le"), ("not_equal", "ne"), ("arccos", "acos"), ("arcsin", "asin"),
                        ("arctan", "atan"), ("arccosh", "acosh"), ("arcsinh", "asinh"), ("arctanh", "atanh"),
                        ("arctan2", "atan2"), ("negative", "neg"), ("multiply", "mul"), ("subtract", "sub"),
                        ("divide", "div"), ("true_divide", "div"), ("fix", "trunc"), ("clip", "clamp")):
        if not hasattr(cls, alias) and hasattr(cls, name):
            methods[alias] = getattr(cls, name)
    for name, method in methods.items():
        setattr(cls, name, numpy_names(method) if takes_dim(method) else method)
    # attributes torch's tensors carry
    cls.real = property(_real_only("real"), doc="The tensor itself: compat's tensors are real.")
    cls.imag = property(imag, doc="An error, as torch's for a real tensor.")
    cls.mH = cls.H = property(adjoint, doc="The conjugate transpose of the last two dimensions (``mT`` here).")
    for attribute, answer in _CONSTANT_ATTRIBUTES.items():
        setattr(cls, attribute, property(_answering(answer)))
    cls.is_cpu = property(lambda self: self.device == "cpu", doc="Whether the tensor is in host memory.")
    cls.layout = property(lambda self: strided, doc="``torch.strided``, the layout of every dense tensor.")
    cls.itemsize = property(lambda self: self._data.dtype.itemsize, doc="Bytes per element.")
    cls.nbytes = property(lambda self: self._data.nbytes, doc="Bytes of all the elements.")


# ----------------------------------------------------------------------------- functions


def pow(input, exponent):
    """``input ** exponent``, where ``input`` may be a Python number (``torch.pow(10000, t)``)."""
    if not isinstance(input, _NativeTensor) and not isinstance(exponent, _NativeTensor):
        raise TypeError(f"pow(): expected a tensor as input or exponent, got {type(input).__name__} and "
                        f"{type(exponent).__name__}")
    return input ** exponent


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.dtype.kind == "f"
