"""torch's forms of one operation, walked over torch itself: every operation torch has as a function and as a
method that compat has in one form it has in the other; every in-place method whose out-of-place form compat
has exists, writes what torch writes (values, dtype, the tensor itself returned), raises the version counter,
refuses a leaf that requires grad and passes gradients as torch's does; torch's aliases, dtype helpers,
``Size``, ``device`` and predicates agree with torch."""

import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings

import tinyattn.compat as compat

SETTINGS = settings(max_examples=25, deadline=None)


def _has(owner, name):
    try:
        getattr(owner, name)
    except AttributeError:
        return False
    return True


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


# ----------------------------------------------------------------------------- both forms


def test_every_operation_torch_has_in_both_forms_compat_has_in_both_or_neither():
    both = [n for n in dir(torch) if not n.startswith("_") and n in dir(torch.Tensor)]
    assert len(both) > 300
    lonely = [n for n in both if _has(compat, n) != _has(compat.Tensor, n)]
    # torch.cpu is a module in torch (the CPU device's settings), Tensor.cpu a method: no function form to make
    assert lonely == ["cpu"] or lonely == [], lonely


def test_every_in_place_method_whose_out_of_place_form_compat_has_exists():
    in_place = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")]
    missing = [n for n in in_place if _has(compat.Tensor, n[:-1]) and not _has(compat.Tensor, n)]
    assert missing == []
    functions = [n for n in dir(torch) if n.endswith("_") and not n.startswith("_")]
    assert [n for n in functions if _has(compat, n[:-1]) and not _has(compat, n)] == []
    for name in ("abs_", "exp_", "clamp_min_", "tril_", "sigmoid_", "relu_", "eq_", "logical_not_", "unsqueeze_"):
        assert _has(compat.Tensor, name), name
    for name in ("relu_", "sigmoid_", "exp_", "abs_", "clamp_", "tanh_"):
        assert _has(compat, name), name


# ----------------------------------------------------------------------------- in-place forms, against torch

# the arguments an in-place method takes after the tensor, tried in this order until torch accepts one; ``Y``
# stands for a second tensor of the same shape and dtype, ``I`` for an index tensor
Y, I, M = object(), object(), object()
TRIALS = [(), (Y,), (0.5,), (0,), (1,), (Y, Y), (1, I, Y), (0, 1), (M, 0.5), (M, Y)]
SPECIAL = {  # methods none of the trials fits ("skip": other shapes, in test_products_written_in_place_match_torch)
    "addbmm_": "skip", "baddbmm_": "skip", "addmv_": "skip", "addr_": "skip", "addmm_": (Y, "P"),
    "index_add_": (0, I, Y), "index_fill_": (0, I, 0.5), "index_copy_": (0, I, Y), "masked_fill_": (M, 0.5),
    "masked_scatter_": (M, Y),
    "scatter_": (0, "J", Y), "scatter_add_": (0, "J", Y), "scatter_reduce_": (0, "J", Y, "amax"),
    "index_put_": ((I,), Y), "put_": (I, Y),
}
NOT_WRITES = {"requires_grad_", "detach_", "share_memory_", "copy_", "fill_", "zero_", "index_put_", "put_",
              "normal_", "uniform_", "bernoulli_"}  # (the draws: torch's and compat's random streams differ)


def _in_place_names():
    names = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")
             and _has(compat.Tensor, n[:-1]) and _has(compat.Tensor, n)]
    return sorted(n for n in names if n not in NOT_WRITES and SPECIAL.get(n) != "skip")


def _arguments(lib, trial, dtype, rng_values):
    y_values, index, mask = rng_values
    made = []
    for arg in trial:
        if arg is Y:
            made.append(lib.tensor(y_values, dtype=dtype))
        elif arg is I:
            made.append(lib.tensor(index))
        elif arg is M:
            made.append(lib.tensor(mask))
        elif arg == "P":
            made.append(lib.tensor(np.eye(3) * 0.5 + 0.25, dtype=dtype))
        elif arg == "J":
            made.append(lib.tensor(np.array([[0, 1, 0], [1, 0, 1]])))
        elif isinstance(arg, tuple):
            made.append(tuple(lib.tensor(index) if a is I else a for a in arg))
        else:
            made.append(arg)
    return tuple(made)


def _run(lib, name, base, trial, dtype_name, rng_values):
    dtype = getattr(lib, dtype_name)
    x = lib.tensor(base, dtype=dtype)
    version = x._version if lib is torch else x._version[0]
    result = getattr(x, name)(*_arguments(lib, trial, dtype, rng_values))
    new_version = x._version if lib is torch else x._version[0]
    return x, result, new_version - version


@pytest.mark.parametrize("name", _in_place_names())
def test_in_place_methods_write_what_torch_writes(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    base = rng.uniform(0.2, 0.8, (2, 3))
    rng_values = (rng.uniform(0.2, 0.8, (2, 3)), np.array([1, 0]), rng.uniform(size=(2, 3)) > 0.5)
    trials = [SPECIAL[name]] if name in SPECIAL else TRIALS
    for dtype_name, values in (("float64", base), ("int64", np.round(base * 10)), ("bool", base > 0.5)):
        for trial in trials:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    theirs, _, torch_bumps = _run(torch, name, values, trial, dtype_name, rng_values)
            except (RuntimeError, TypeError, ValueError, IndexError):
                continue
            ours, result, bumps = _run(compat, name, values, trial, dtype_name, rng_values)
            assert result is ours
            assert bumps >= 1 and torch_bumps >= 1
            assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype).split(".")[1]
            np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-12, atol=1e-12, equal_nan=True)
            return
    pytest.fail(f"no trial arguments fit torch's {name}: add it to SPECIAL")


@pytest.mark.parametrize("name, shapes", [("addbmm_", [(2, 3), (4, 2, 5), (4, 5, 3)]),
                                          ("baddbmm_", [(4, 2, 3), (4, 2, 5), (4, 5, 3)]),
                                          ("addmv_", [(2,), (2, 3), (3,)]), ("addr_", [(2, 3), (2,), (3,)])])
def test_products_written_in_place_match_torch(name, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    results = []
    for lib in (torch, compat):
        x, *others = (lib.tensor(a) for a in arrays)
        assert getattr(x, name)(*others, beta=0.5, alpha=2.0) is x
        results.append(_np(x))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)


@pytest.mark.parametrize("name", ["exp_", "sqrt_", "clamp_min_", "tril_", "abs_", "eq_", "unsqueeze_"])
def test_in_place_on_a_leaf_that_requires_grad_is_refused_as_in_torch(name):
    args = {"clamp_min_": (0.5,), "eq_": (0.5,), "unsqueeze_": (0,)}.get(name, ())
    for lib in (torch, compat):
        x = lib.tensor([[0.5, 2.0], [1.0, 3.0]], requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf"):
            getattr(x, name)(*args)
        with lib.no_grad():
            getattr(x, name)(*args)  # allowed without a graph, as in torch


UNARY = ["abs_", "acos_", "asin_", "atan_", "ceil_", "cos_", "cosh_", "erf_", "exp_", "exp2_", "expm1_",
         "floor_", "frac_", "log_", "log10_", "log1p_", "log2_", "neg_", "reciprocal_", "relu_", "round_",
         "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "logit_",
         "tril_", "triu_", "t_", "deg2rad_", "sign_"]  # (not atanh_: torch has no derivative for it)


@pytest.mark.parametrize("name", [n for n in UNARY if _has(compat.Tensor, n)])
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_gradients_through_an_in_place_method_match_torch(name, seed):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.1, 0.6, (3, 3))  # 1.5 times it in (0, 1): logit_, acos_… are defined there
    upstream = rng.standard_normal((3, 3))
    grads = []
    for lib in (torch, compat):
        x = lib.tensor(values, requires_grad=True)
        y = x * 1.5  # not a leaf: in place is allowed
        getattr(y, name)()
        (y * lib.tensor(upstream)).sum().backward()
        grads.append(_np(x.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)


def test_an_in_place_write_over_a_saved_value_makes_backward_refuse_as_in_torch():
    for lib in (torch, compat):
        x = lib.tensor([0.5, 1.0], requires_grad=True)
        y = x * 2
        z = y.sin()  # saves y
        y.exp_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place"):
            z.sum().backward()


def test_an_in_place_write_through_a_view_reaches_the_base_as_in_torch():
    grads = []
    for lib in (torch, compat):
        x = lib.tensor([[0.5, 1.0], [2.0, 3.0]], dtype=lib.float64, requires_grad=True)
        y = x * 1.0
        y[0].exp_()
        (y * lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)).sum().backward()
        grads.append((_np(y), _np(x.grad)))
    np.testing.assert_allclose(grads[1][0], grads[0][0])
    np.testing.assert_allclose(grads[1][1], grads[0][1])


@pytest.mark.parametrize("name, args", [("unsqueeze_", (1,)), ("squeeze_", (0,)), ("t_", ()),
                                        ("transpose_", (0, 1)), ("swapdims_", (1, 0)), ("swapaxes_", (0, 1))])
def test_reshaping_in_place_methods_match_torch(name, args):
    values = np.arange(6.0).reshape(1, 6) if name == "squeeze_" else np.arange(6.0).reshape(2, 3)
    upstream = None
    results = []
    for lib in (torch, compat):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        y = x * 2.0
        assert getattr(y, name)(*args) is y
        if upstream is None:
            upstream = np.random.default_rng(0).standard_normal(tuple(y.shape))
        (y * lib.tensor(upstream)).sum().backward()
        plain = lib.tensor(values)
        getattr(plain, name)(*args)
        results.append((_np(y), _np(x.grad), tuple(plain.shape)))
    np.testing.assert_allclose(results[1][0], results[0][0])
    np.testing.assert_allclose(results[1][1], results[0][1])
    assert results[1][2] == results[0][2]


def test_torch_level_in_place_functions_match_torch():
    values = np.array([[-1.5, 0.25], [0.5, 2.0]])
    for name, args in [("relu_", ()), ("sigmoid_", ()), ("exp_", ()), ("abs_", ()), ("tanh_", ()),
                       ("clamp_", (-1.0, 1.0)), ("clamp_min_", (0.0,)), ("neg_", ()), ("fill_", (3.0,)),
                       ("detach_", ())]:
        theirs = torch.tensor(values)
        ours = compat.tensor(values)
        assert getattr(compat, name)(ours, *args) is ours
        getattr(torch, name)(theirs, *args)
        np.testing.assert_allclose(_np(ours), _np(theirs), err_msg=name)
    with pytest.raises(TypeError, match="must be Tensor"):
        compat.relu_([1.0, 2.0])


# ----------------------------------------------------------------------------- aliases


ALIASES = [("absolute", ()), ("multiply", ("Y",)), ("divide", ("Y",)), ("true_divide", ("Y",)),
           ("subtract", ("Y",)), ("greater", ("Y",)), ("greater_equal", ("Y",)), ("less", ("Y",)),
           ("less_equal", ("Y",)), ("not_equal", ("Y",)), ("negative", ()), ("swapdims", (0, 1)),
           ("swapaxes", (0, 1)), ("clip", (-0.5, 0.5)), ("fix", ()), ("arccos", ()), ("arcsin", ()),
           ("arctan", ()), ("arctanh", ()), ("arctan2", ("Y",))]


@pytest.mark.parametrize("name, args", ALIASES)
def test_aliases_in_both_forms_match_torch(name, args):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-0.9, 0.9, (2, 3)), rng.uniform(0.1, 0.9, (2, 3))
    for form in ("function", "method"):
        results = []
        for lib in (torch, compat):
            t = lib.tensor(x)
            made = tuple(lib.tensor(y) if a == "Y" else a for a in args)
            results.append(getattr(lib, name)(t, *made) if form == "function" else getattr(t, name)(*made))
        np.testing.assert_allclose(_np(results[1]), _np(results[0]), err_msg=f"{form} {name}")


def test_concatenate_and_row_stack_match_torch():
    a, b = np.ones((2, 3)), np.zeros((1, 3))
    for name, kwargs in (("concatenate", {}), ("concatenate", {"axis": 0}), ("row_stack", {})):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = getattr(torch, name)([torch.tensor(a), torch.tensor(b)], **kwargs)
        ours = getattr(compat, name)([compat.tensor(a), compat.tensor(b)], **kwargs)
        np.testing.assert_array_equal(_np(ours), _np(theirs))


@pytest.mark.parametrize("args", [(1, 4), (0, 1, 0.25), (1.5, 3.5, 0.5), (3, 0, -1), (0, 0.9, 0.3)])
def test_range_is_torchs_deprecated_end_inclusive_range(args):
    with pytest.warns(UserWarning, match="deprecated"):
        theirs = torch.range(*args)
    with pytest.warns(UserWarning, match="deprecated"):
        ours = compat.range(*args)
    assert ours.dtype == compat.float32
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)


def test_range_needs_an_end_as_torchs():
    for lib in (torch, compat):
        with pytest.raises(TypeError):
            lib.range(5)


def test_constants_match_torch():
    for name in ("pi", "e", "inf"):
        assert getattr(compat, name) == getattr(torch, name)
    assert np.isnan(compat.nan) and compat.newaxis is torch.newaxis is None
    assert compat.ones(3)[compat.newaxis].shape == (1, 3)


# ----------------------------------------------------------------------------- dtypes

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex64",
          "complex128"]


def _torch_dtype(d):
    return getattr(torch, np.dtype(d).name if np.dtype(d) != np.bool_ else "bool")


@pytest.mark.parametrize("a", DTYPES)
def test_promote_types_and_can_cast_match_torch(a):
    for b in DTYPES:
        ours = compat.promote_types(getattr(compat, a), getattr(compat, b))
        assert _torch_dtype(ours) == torch.promote_types(getattr(torch, a), getattr(torch, b)), (a, b)
        assert compat.can_cast(getattr(compat, a), getattr(compat, b)) == \
            torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)


@pytest.mark.parametrize("a", ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"])
def test_result_type_matches_torch(a):
    operands = [lambda lib: lib.tensor([1, 0], dtype=getattr(lib, a)), lambda lib: lib.tensor(1, dtype=lib.float64),
                lambda lib: lib.tensor(1, dtype=lib.int64), lambda lib: lib.tensor([1, 2], dtype=lib.int16),
                lambda lib: 2, lambda lib: 2.5, lambda lib: True, lambda lib: 1j]
    for make_first in operands[:1]:
        for make_other in operands[:-1] if a == "float16" else operands:  # (float16 with 1j: torch's complex32)
            theirs = torch.result_type(make_first(torch), make_other(torch))
            ours = compat.result_type(make_first(compat), make_other(compat))
            assert _torch_dtype(ours) == theirs, (a, make_other(torch), ours, theirs)
            theirs = torch.result_type(make_other(torch), make_first(torch))
            ours = compat.result_type(make_other(compat), make_first(compat))
            assert _torch_dtype(ours) == theirs, (make_other(torch), a, ours, theirs)


def test_dtype_names_and_information_match_torch():
    for name in ("uint16", "uint32", "uint64", "complex64", "complex128", "cfloat", "cdouble", "half", "short",
                 "int8", "int16"):
        assert np.dtype(getattr(compat, name)).itemsize == getattr(torch, name).itemsize, name
    assert compat.get_default_dtype() == compat.float32
    for name in ("float16", "float32", "float64"):
        assert compat.finfo(getattr(compat, name)).eps == torch.finfo(getattr(torch, name)).eps
    assert compat.iinfo(compat.int16).max == torch.iinfo(torch.int16).max
    assert compat.ones(2).cdouble().dtype == np.complex128 and compat.ones(2).cfloat().dtype == np.complex64


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_predicates_match_torch(dtype):
    values = np.array([1, 0]).astype(dtype)
    ours, theirs = compat.tensor(values), torch.tensor(values)
    for name in ("is_signed", "is_complex", "is_floating_point", "is_conj", "is_neg", "is_inference"):
        assert getattr(ours, name)() == getattr(theirs, name)(), name
        assert getattr(compat, name)(ours) == getattr(torch, name)(theirs), name


def test_tensor_predicates_and_attributes_match_torch():
    ours, theirs = compat.ones(2, 3), torch.ones(2, 3)
    for name in ("is_cpu", "is_sparse", "is_quantized", "is_meta", "is_mkldnn", "is_nested", "is_cuda",
                 "itemsize", "nbytes"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.is_pinned() == theirs.is_pinned() and ours.is_shared() == theirs.is_shared()
    assert ours.get_device() == theirs.get_device() == -1
    assert ours.layout is compat.strided and repr(compat.strided) == repr(torch.strided) == "torch.strided"
    assert compat.is_same_size(ours, compat.zeros(2, 3)) and not ours.is_same_size(compat.zeros(3, 2))
    for values in ([2.5], [0.0], [[True]]):
        assert compat.tensor(values).is_nonzero() == torch.tensor(values).is_nonzero()
    for values in ([], [1.0, 2.0]):
        with pytest.raises(RuntimeError, match="ambiguous"):
            compat.is_nonzero(compat.tensor(values))
        with pytest.raises(RuntimeError, match="ambiguous"):
            torch.is_nonzero(torch.tensor(values))


# ----------------------------------------------------------------------------- Size and device


@pytest.mark.parametrize("sizes", [[], [2], [2, 3], [1, 0, 4]])
def test_size_prints_and_behaves_as_torchs(sizes):
    ours, theirs = compat.Size(sizes), torch.Size(sizes)
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert ours == theirs == tuple(sizes) and isinstance(ours, tuple)
    assert ours.numel() == theirs.numel()
    assert repr(ours[1:]) == repr(theirs[1:]) and repr(ours + (5,)) == repr(theirs + (5,))
    assert compat.Size(compat.ones(*sizes).shape) == theirs


@pytest.mark.parametrize("args", [("cpu",), ("cuda",), ("cuda:1",), ("cuda", 0), ("cpu", 0)])
def test_device_prints_and_behaves_as_torchs(args):
    ours, theirs = compat.device(*args), torch.device(*args)
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert ours.type == theirs.type and ours.index == theirs.index
    assert compat.device(ours) is ours


def test_device_errors_and_tensors_device():
    for bad in ("tpu", "cuda:x"):
        with pytest.raises(RuntimeError):
            torch.device(bad)
        with pytest.raises(RuntimeError):
            compat.device(bad)
    x = compat.ones(2)
    assert repr(x.device) == repr(torch.ones(2).device) and x.device.type == "cpu" and x.device == "cpu"
    assert compat.ones(2, device=compat.device("cpu")).device == "cpu"


# ----------------------------------------------------------------------------- repr


@pytest.mark.parametrize("values, dtype", [([1.0, 2.0], "float32"), ([[1.0, -2.0], [3.0, 4.0]], "float64"),
                                           ([1, 2, 3], "int64"), ([[1, 2]], "int32"), ([1.0, 2.0], "float16"),
                                           ([1, 200], "uint8"), ([True, False], "bool"), (3.0, "float64"),
                                           (7, "int16"), ([], "float32"), ([], "int64"), ([], "float64")])
def test_tensors_print_as_torchs(values, dtype):
    ours_dtype, their_dtype = getattr(compat, dtype), getattr(torch, dtype)
    assert repr(compat.tensor(values, dtype=ours_dtype)) == repr(torch.tensor(values, dtype=their_dtype))
    assert repr(compat.zeros(2, 0, dtype=ours_dtype)) == repr(torch.zeros(2, 0, dtype=their_dtype))


@pytest.mark.parametrize("make", [lambda lib, x: x, lambda lib, x: x * 2, lambda lib, x: x + 1,
                                  lambda lib, x: x.exp(), lambda lib, x: x.sum(), lambda lib, x: x.relu(),
                                  lambda lib, x: lib.cat([x, x]), lambda lib, x: x.tanh(),
                                  lambda lib, x: x.reshape(2, 1), lambda lib, x: x.detach(),
                                  lambda lib, x: x.double() * 1])
def test_autograd_suffixes_print_as_torchs(make):
    ours = make(compat, compat.tensor([0.0, 0.0], requires_grad=True))
    theirs = make(torch, torch.tensor([0.0, 0.0], requires_grad=True))
    assert repr(ours) == repr(theirs)


def test_resize_keeps_torchs_meaning_where_the_element_count_stays_and_refuses_elsewhere():
    for lib in (torch, compat):
        x = lib.arange(6.0)
        assert x.resize_(2, 3) is x and tuple(x.shape) == (2, 3)
        assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        x.resize_as_(lib.zeros(3, 2))
        assert tuple(x.shape) == (3, 2)
        with pytest.raises(RuntimeError):
            lib.ones(2, requires_grad=True).resize_(1, 2)
    with pytest.raises(RuntimeError, match="same number of elements"):
        compat.arange(6.0).resize_(4)


@pytest.mark.parametrize("source, target", [("float32", "int32"), ("float64", "int64"), ("int32", "float32"),
                                            ("float32", "uint8"), ("int64", "int32"), ("uint8", "bool")])
def test_view_as_another_dtype_reads_the_same_bytes_as_torch(source, target):
    values = np.array([[1.5, -2.0, 0.25, 8.0]]).astype(source) if source != "uint8" else np.array([[1, 0, 1, 1]])
    ours = compat.tensor(values.astype(source)).view(getattr(compat, target))
    theirs = torch.tensor(values.astype(source)).view(getattr(torch, target))
    assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(_np(ours), _np(theirs))
    base = compat.tensor(values.astype(source))
    viewed = base.view(dtype=getattr(compat, target))
    base.zero_()  # a write to the base shows through the view, as in torch
    assert not _np(viewed).any()


def test_real_tensors_complex_views_and_python_protocols_match_torch():
    values = np.arange(6.0).reshape(2, 3) - 2.5
    ours, theirs = compat.tensor(values), torch.tensor(values)
    for name in ("conj", "resolve_conj", "resolve_neg", "adjoint"):
        np.testing.assert_array_equal(_np(getattr(ours, name)()), _np(getattr(theirs, name)()), err_msg=name)
        np.testing.assert_array_equal(_np(getattr(compat, name)(ours)), _np(getattr(torch, name)(theirs)))
    for name in ("mH", "H", "real"):
        np.testing.assert_array_equal(_np(getattr(ours, name)), _np(getattr(theirs, name)), err_msg=name)
    assert compat.real(ours) is ours
    for t in (theirs, ours):
        with pytest.raises(RuntimeError, match="non-complex"):
            _ = t.imag
    assert (0.5 in ours) == (0.5 in theirs) and (-2.5 in ours) == (-2.5 in theirs)
    assert [_np(r).tolist() for r in reversed(ours)] == [_np(r).tolist() for r in reversed(theirs)]
    assert ours.stride() == theirs.stride() and ours.T.stride() == theirs.T.stride() and ours.stride(1) == 1
    np.testing.assert_array_equal(_np(abs(ours)), _np(abs(theirs)))
    np.testing.assert_array_equal(_np(ours.narrow_copy(1, 1, 2)), _np(theirs.narrow_copy(1, 1, 2)))
    square = np.array([[1.0, 2.0], [0.5, -1.0]])
    np.testing.assert_allclose(_np(compat.matrix_power(compat.tensor(square), 3)),
                               _np(torch.matrix_power(torch.tensor(square), 3)))
    np.testing.assert_allclose(_np(compat.tensor(square).matrix_power(2)), _np(torch.tensor(square).matrix_power(2)))


@pytest.mark.parametrize("operator", ["**=", "%=", "//=", "&=", "|=", "^=", "<<=", ">>="])
def test_in_place_operators_match_torch(operator):
    results = []
    for lib in (torch, compat):
        x = lib.tensor([5, 6, 13])
        before = x
        namespace = {"x": x}
        exec(f"x {operator} 2", namespace)
        assert namespace["x"] is before
        results.append(_np(namespace["x"]).tolist())
    assert results[1] == results[0]
