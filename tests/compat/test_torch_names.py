"""The names training scripts use, each against torch: same results (float64, gradients included), same
errors in kind. Hypothesis drives the ones where values or shapes matter."""

import math
import warnings

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings

import tinyattn.compat as compat

SETTINGS = settings(max_examples=40, deadline=None)
WITHOUT_A_GPU = pytest.mark.skipif(compat.cuda.is_available(), reason="checks what happens where CUDA is absent")
LIBS = [torch, compat]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _both(array, requires_grad=False):
    return compat.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad)


def _same_error(call):
    """``call(lib)`` raises on both libraries, with errors of one kind; returns compat's error."""
    errors = []
    for lib in (torch, compat):
        with pytest.raises(Exception) as info:
            call(lib)
        errors.append(info.value)
    assert isinstance(errors[1], type(errors[0])), (type(errors[1]), type(errors[0]), errors)
    return errors[1]


floats = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                    elements=st.floats(-10, 10, allow_nan=False))


# ----------------------------------------------------------------------------- Python protocols


@SETTINGS
@given(value=st.integers(-50, 50), dtype=st.sampled_from(["int64", "int32", "uint8", "bool"]),
       shape=st.sampled_from([(), (1,), (1, 1)]))
def test_index_takes_integer_tensors_of_one_element(value, dtype, shape):
    if dtype == "uint8":
        value = abs(value)
    array = np.full(shape, value).astype(dtype)
    items = list(range(100))
    for lib in LIBS:
        t = lib.tensor(array)
        assert items[t] == items[int(array.reshape(()))]
        assert range(t) == range(int(array.reshape(())))
        assert items[t:t + 3] == items[int(array.reshape(())):int(array.reshape(())) + 3]


@pytest.mark.parametrize("array", [np.array(1.0), np.array([1, 2]), np.zeros((0,), np.int64)])
def test_index_refuses_floats_and_several_elements_as_torch(array):
    error = _same_error(lambda lib: [1, 2, 3][lib.tensor(array)])
    assert "only integer tensors of a single element can be converted to an index" in str(error)


@SETTINGS
@given(value=st.floats(-1e6, 1e6, allow_nan=False), spec=st.sampled_from(["", ".4f", ".2e", "8.3f", "g", "+.1f"]))
def test_format_of_a_0d_tensor_is_its_numbers(value, spec):
    for dtype in ("float64", "float32"):
        ours, theirs = compat.tensor(np.array(value, dtype)), torch.tensor(np.array(value, dtype))
        if spec:
            assert format(ours, spec) == format(theirs, spec)
        assert f"{compat.tensor(7):>4}" == f"{torch.tensor(7):>4}"


def test_format_of_a_larger_tensor_takes_no_spec():
    error = _same_error(lambda lib: f"{lib.tensor([1.0, 2.0]):.2f}")
    assert "unsupported format string" in str(error)
    assert f"{compat.tensor([1.0, 2.0])}" == str(compat.tensor([1.0, 2.0]))


# ----------------------------------------------------------------------------- NumPy-style names


REDUCTIONS = ["sum", "mean", "amax", "argmax", "argmin", "max", "min", "std", "var", "softmax", "log_softmax",
              "cumsum", "all", "any"]


@SETTINGS
@given(array=floats, name=st.sampled_from(REDUCTIONS), keepdims=st.booleans(), data=st.data())
def test_axis_and_keepdims_are_aliases_of_dim_and_keepdim(array, name, keepdims, data):
    axis = data.draw(st.integers(-array.ndim, array.ndim - 1))
    kwargs = {"axis": axis}
    if name not in ("softmax", "log_softmax", "cumsum"):
        kwargs["keepdims"] = keepdims
    if name in ("std", "var") and array.shape[axis] < 2:
        return
    if name in ("all", "any"):
        array = array > 0
    results = []
    for lib in LIBS:
        method = getattr(lib.tensor(array), name)(**kwargs)
        function = getattr(lib, name)(lib.tensor(array), **kwargs)
        results.append([_np(r) for r in (method if isinstance(method, tuple) else (method,))])
        results[-1] += [_np(r) for r in (function if isinstance(function, tuple) else (function,))]
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_an_alias_and_its_name_together_are_refused():
    with pytest.raises(TypeError, match="both 'dim' and its alias 'axis'"):
        compat.ones(2, 3).sum(dim=0, axis=1)


@SETTINGS
@given(base=st.one_of(st.integers(1, 10000), st.floats(0.5, 100)), exponent=floats)
def test_pow_with_a_number_as_base_matches_torch(base, exponent):
    exponent = np.clip(exponent, -3, 3)
    for dtype in ("float64", "int64"):
        values = exponent.astype(dtype) if dtype == "float64" else np.abs(exponent).astype(dtype)
        if dtype == "int64" and isinstance(base, int) and base > 100:
            continue
        ours, theirs = compat.pow(base, compat.tensor(values)), torch.pow(base, torch.tensor(values))
        assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-12 if ours.dtype == np.float64 else 1e-6)


def test_pow_gradient_in_the_exponent_matches_torch():
    grads = []
    for lib in LIBS:
        t = lib.tensor([0.0, 0.5, 1.0], dtype=lib.float64, requires_grad=True)
        lib.pow(10000, t).sum().backward()
        grads.append(_np(t.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


# ----------------------------------------------------------------------------- two bad inputs


def test_masked_fill_refuses_a_value_of_more_than_zero_dimensions():
    for name in ("masked_fill", "masked_fill_"):
        error = _same_error(lambda lib, name=name: getattr(lib.zeros(3), name)(lib.tensor([True, False, True]),
                                                                               lib.tensor([1.0, 2.0, 3.0])))
        assert "0-dimensional value tensor" in str(error) and "1 dimension(s)" in str(error)
    _same_error(lambda lib: lib.masked_fill(lib.zeros(3), lib.tensor([True, False, True]), lib.tensor([5.0])))
    for lib in LIBS:
        assert lib.zeros(3).masked_fill(lib.tensor([True, False, True]), lib.tensor(5.0)).tolist() == [5, 0, 5]


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "AdamW"])
def test_a_step_over_integer_parameters_is_refused_as_torch_refuses_it(optimizer):
    def step(lib):
        p = lib.tensor([1, 2])
        p.grad = lib.tensor([1, 1])
        getattr(lib.optim, optimizer)([p], lr=0.1).step()

    error = _same_error(step)
    assert "int64" in str(error) and "floating-point" in str(error)


def test_optimizers_have_torchs_signatures_and_refuse_what_they_lack():
    import inspect

    for name in ("SGD", "Adam", "AdamW"):
        ours, theirs = (inspect.signature(getattr(lib.optim, name)).parameters for lib in (compat, torch))
        assert list(ours) == [p for p in theirs if p in ours] and "fused" in ours
        for p in ours:
            if ours[p].default is not inspect.Parameter.empty:
                assert ours[p].default == theirs[p].default, (name, p)
    w = compat.nn.Parameter(compat.ones(1))
    with pytest.raises(RuntimeError, match="fused optimizers are CUDA kernels"):
        compat.optim.Adam([w], fused=True)
    with pytest.raises(NotImplementedError, match="amsgrad=True"):
        compat.optim.AdamW([w], amsgrad=True)


# ----------------------------------------------------------------------------- tensor methods


def _run(lib, array, fn, upstream_seed=0):
    x = lib.tensor(array, requires_grad=True)
    out = fn(lib, x)
    outs = out if isinstance(out, tuple) else (out,)
    first = outs[0]
    grad = None
    if first.requires_grad:
        upstream = np.random.default_rng(upstream_seed).standard_normal(tuple(first.shape))
        first.backward(lib.tensor(upstream.astype(_np(first).dtype)))
        grad = _np(x.grad)
    return [_np(o) for o in outs], grad, first.requires_grad


def _agree(array, fn):
    (ours, our_grad, our_flag), (theirs, their_grad, their_flag) = (_run(lib, array, fn) for lib in (compat, torch))
    assert our_flag == their_flag, "requires_grad of the result differs"
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if their_grad is not None:
        np.testing.assert_allclose(our_grad, their_grad, rtol=1e-12, atol=1e-12)


METHODS = {
    "narrow": lambda lib, x: x.narrow(-1, 0, x.shape[-1] - 1 if x.shape[-1] > 1 else 1),
    "t": lambda lib, x: x.reshape(x.shape[0], -1).t(),
    "index_select": lambda lib, x: x.index_select(0, lib.tensor([0, x.shape[0] - 1, 0])),
    "flip": lambda lib, x: x.flip(0),
    "flip_dims": lambda lib, x: lib.flip(x, list(range(x.ndim))[::-1]),
    "sort": lambda lib, x: x.sort(dim=-1, descending=True),
    "sort_function": lambda lib, x: lib.sort(x, 0),
    "argsort": lambda lib, x: lib.argsort(x, dim=-1, descending=True),
    "cumsum": lambda lib, x: x.cumsum(-1),
    "cumsum_function": lambda lib, x: lib.cumsum(x, dim=0),
    "masked_select": lambda lib, x: x.masked_select(x > 0),
    "floor_div": lambda lib, x: (x.detach() * 3).floor_divide(2),  # torch has no derivative for it
    "div_floor": lambda lib, x: lib.div(x * 3, 2, rounding_mode="floor"),
    "div_trunc": lambda lib, x: x.div(2, rounding_mode="trunc"),
    "div_plain": lambda lib, x: x.div(2.0),
    "square": lambda lib, x: x.square(),
    "rsqrt": lambda lib, x: (x.abs() + 1).rsqrt(),
    "reciprocal": lambda lib, x: (x.abs() + 1).reciprocal(),
    "clamp_min": lambda lib, x: x.clamp_min(0.5),
    "clamp_max": lambda lib, x: x.clamp_max(-0.5),
    "round": lambda lib, x: lib.round(x * 3.3),
    "floor": lambda lib, x: x.floor(),
    "ceil": lambda lib, x: lib.ceil(x),
    "sign": lambda lib, x: x.sign(),
    "isfinite": lambda lib, x: lib.isfinite(x / (x > 0).double()),
    "isnan": lambda lib, x: (x * 0 / (x > 1).double()).isnan(),
    "logical_and": lambda lib, x: lib.logical_and(x > 0, x < 5),
    "logical_or": lambda lib, x: (x > 1).logical_or(x < -1),
    "swapaxes": lambda lib, x: x.reshape(x.shape[0], -1).swapaxes(0, 1),
    "neg": lambda lib, x: x.neg(),
    "new_empty": lambda lib, x: x.new_empty(2, 3).zero_(),
    "to_other": lambda lib, x: x.to(lib.ones(1, dtype=lib.float32)),
    "mm": lambda lib, x: lib.mm(x.reshape(x.shape[0], -1), x.reshape(x.shape[0], -1).t()),
    "unbind": lambda lib, x: lib.unbind(x, 0),
}


@SETTINGS
@given(array=floats, name=st.sampled_from(sorted(METHODS)))
def test_tensor_methods_and_functions_match_torch_values_dtypes_and_gradients(array, name):
    if name in ("sort", "sort_function", "argsort") and len(np.unique(array)) != array.size:
        array = array + np.arange(array.size).reshape(array.shape) * 1e-3  # no ties
    _agree(array, METHODS[name])


def test_stable_sort_keeps_ties_in_order_as_torch():
    values = np.array([[1.0, 2.0, 2.0, 1.0, 3.0, 1.0]])
    for descending in (False, True):
        ours = compat.argsort(compat.tensor(values), dim=1, descending=descending, stable=True)
        theirs = torch.argsort(torch.tensor(values), dim=1, descending=descending, stable=True)
        assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(2, 3, 4).t(),
    lambda lib: lib.ones(3).narrow(0, 2, 5),
    lambda lib: lib.ones(3).div(2, rounding_mode="round"),
    lambda lib: lib.ones(3, 2).index_select(2, lib.tensor([0])),
    lambda lib: lib.flip(lib.ones(3), [0, -1]),
])
def test_method_errors_match_torch_in_kind(call):
    _same_error(call)


def test_integer_floor_division_and_cumsum_dtypes_match_torch():
    for lib in LIBS:
        a = lib.tensor([7, -7, 5])
        assert lib.div(a, 2, rounding_mode="floor").tolist() == [3, -4, 2]
        assert lib.div(a, 2, rounding_mode="trunc").tolist() == [3, -3, 2]
        assert (a // 2).tolist() == [3, -4, 2]
        assert lib.tensor([True, True, False]).cumsum(0).tolist() == [1, 2, 2]
    assert compat.tensor([1, 2], dtype=compat.int32).cumsum(0).dtype == np.int64


def test_conversions_and_placement():
    x = compat.ones(2, 3)
    assert x.pin_memory() is x and x.to("cpu", non_blocking=True) is x
    assert x.to(x, copy=True) is not x and x.half().dtype == np.float16
    assert x.nelement() == 6 and x.ndimension() == 2
    with pytest.raises(TypeError, match="bfloat16 has no NumPy dtype"):
        x.bfloat16()
    with pytest.raises(TypeError, match="bfloat16 has no NumPy dtype"):
        compat.zeros(2, dtype=compat.bfloat16)
    y = (compat.ones(2, requires_grad=True) * 2)
    assert y.detach_() is y and not y.requires_grad and y.is_leaf


# ----------------------------------------------------------------------------- creation and random draws


def test_creation_functions_match_torch():
    for make in (lambda lib: lib.linspace(-1, 2, 7, dtype=lib.float64), lambda lib: lib.eye(3, 4),
                 lambda lib: lib.full_like(lib.ones(2, 2), 7.5), lambda lib: lib.as_tensor(np.arange(3)),
                 lambda lib: lib.as_tensor([1.5, 2.0], dtype=lib.float64), lambda lib: lib.empty_like(lib.ones(2)) * 0,
                 lambda lib: lib.BoolTensor([True, False]), lambda lib: lib.IntTensor([1, 2]),
                 lambda lib: lib.DoubleTensor([1.0])):
        ours, theirs = make(compat), make(torch)
        assert _np(ours).dtype == _np(theirs).dtype
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)
    host = np.arange(3.0)
    assert compat.as_tensor(host).numpy().base is host or np.shares_memory(compat.as_tensor(host).numpy(), host) \
        or compat.as_tensor(host)._data is host
    for like in ("rand_like", "randn_like"):
        t = getattr(compat, like)(compat.ones(2, 3, dtype=compat.float64))
        assert t.shape == (2, 3) and t.dtype == np.float64
    r = compat.randint_like(compat.ones(50), 3, 6)
    assert r.dtype == np.float32 and set(r.tolist()) <= {3.0, 4.0, 5.0}


@SETTINGS
@given(n=st.integers(0, 40), seed=st.integers(0, 2**32))
def test_randperm_and_generators(n, seed):
    a = compat.randperm(n, generator=compat.Generator().manual_seed(seed))
    b = compat.randperm(n, generator=compat.Generator().manual_seed(seed))
    assert a.dtype == np.int64 and sorted(a.tolist()) == list(range(n)) and a.tolist() == b.tolist()
    assert sorted(compat.randperm(n).tolist()) == list(range(n))
    g = compat.Generator().manual_seed(seed)
    assert g.initial_seed() == seed
    state = g.get_state()
    first = compat.randint(0, 100, (5,), generator=g)
    g.set_state(state)
    assert compat.randint(0, 100, (5,), generator=g).tolist() == first.tolist()
    probs = compat.tensor([0.1, 0.0, 0.9])
    drawn = compat.multinomial(probs, 2, generator=compat.Generator().manual_seed(seed))
    assert drawn.tolist() == compat.multinomial(probs, 2, generator=compat.Generator().manual_seed(seed)).tolist()
    assert 1 not in drawn.tolist()


def test_global_random_state_round_trips():
    compat.manual_seed(5)
    assert compat.initial_seed() == 5
    state = compat.get_rng_state()
    first = compat.randn(3)
    compat.set_rng_state(state)
    np.testing.assert_array_equal(compat.randn(3).numpy(), first.numpy())
    assert isinstance(compat.seed(), int)


# ----------------------------------------------------------------------------- grad modes, dtypes, settings


def test_grad_modes_as_torch():
    w = compat.ones(2, requires_grad=True)
    with compat.inference_mode():
        assert not (w * 2).requires_grad and compat.is_inference_mode_enabled()
    with compat.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert (w * 2).requires_grad
    compat.set_grad_enabled(False)
    assert not compat.is_grad_enabled()
    compat.set_grad_enabled(True)

    @compat.inference_mode()
    def f(x):
        return x * 2

    @compat.inference_mode
    def g(x):
        return x * 2

    @compat.set_grad_enabled(False)
    def h(x):
        return x * 2

    assert compat.is_grad_enabled()
    assert not f(w).requires_grad and not g(w).requires_grad and not h(w).requires_grad
    assert compat.is_grad_enabled() and (w * 2).requires_grad


def test_print_options_change_how_tensors_print():
    try:
        compat.set_printoptions(precision=2)
        assert repr(compat.tensor([1.23456])) == "tensor([1.23])"
        compat.set_printoptions(profile="short", threshold=5)
        assert "..." in repr(compat.arange(20))
        compat.set_printoptions(profile="full")
        assert "..." not in repr(compat.arange(2000))
    finally:
        compat.set_printoptions(profile="default")
    assert repr(compat.tensor([1.23456])) == "tensor([1.23456])"
    with pytest.raises(ValueError, match="profile"):
        compat.set_printoptions(profile="wide")


def test_dtypes_and_their_information_match_torch():
    for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "long", "short",
                 "int", "half", "double", "float"):
        assert np.dtype(getattr(compat, name)).itemsize == getattr(torch, name).itemsize
    for name in ("float16", "float32", "float64"):
        ours, theirs = compat.finfo(getattr(compat, name)), torch.finfo(getattr(torch, name))
        for field in ("eps", "max", "min", "tiny", "bits", "resolution"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
    for name in ("int8", "int32", "int64", "uint8"):
        ours, theirs = compat.iinfo(getattr(compat, name)), torch.iinfo(getattr(torch, name))
        assert (ours.max, ours.min, ours.bits) == (theirs.max, theirs.min, theirs.bits)
    assert compat.get_default_dtype() == np.float32 and isinstance(compat.ones(1).dtype, compat.dtype)
    assert {"bfloat16": compat.bfloat16}["bfloat16"] is compat.bfloat16
    with pytest.raises(NotImplementedError, match="float32"):
        compat.set_default_dtype(compat.float64)


def test_global_settings_are_recorded():
    compat.set_float32_matmul_precision("high")
    assert compat.get_float32_matmul_precision() == "high"
    compat.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        compat.set_float32_matmul_precision("fast")
    compat.use_deterministic_algorithms(True)
    assert compat.are_deterministic_algorithms_enabled()
    compat.use_deterministic_algorithms(False)


# ----------------------------------------------------------------------------- CUDA, backends, amp


def test_cuda_names_say_whether_cupy_sees_a_gpu():
    assert compat.cuda.is_available() == (compat.cuda.device_count() > 0)
    if compat.cuda.is_available():
        pytest.skip("a GPU is present: the answers without one are not checked here")
    assert compat.cuda.is_available() is False and compat.cuda.device_count() == 0
    assert compat.cuda.is_available() == torch.cuda.is_available()
    compat.cuda.manual_seed(0), compat.cuda.manual_seed_all(0), compat.cuda.empty_cache()
    assert compat.cuda.is_bf16_supported() is False
    for name in ("current_device", "synchronize", "get_device_name"):
        with pytest.raises(RuntimeError, match="no CUDA GPU is available here"):
            getattr(compat.cuda, name)()
    device = compat.device("cuda" if compat.cuda.is_available() else "cpu")
    assert compat.ones(2).to(device).device == "cpu"


@WITHOUT_A_GPU
def test_cuda_checkpoint_location_is_refused_as_torch_refuses_it(tmp_path):
    compat.save({"w": compat.ones(2)}, tmp_path / "ckpt.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    errors = []
    for lib, name in ((torch, "torch.pt"), (compat, "ckpt.pt")):
        with pytest.raises(RuntimeError) as info:
            lib.load(tmp_path / name, map_location="cuda")
        errors.append(str(info.value))
    assert errors[0].split(".")[0] == errors[1].split(".")[0]


def test_backends_flags_are_there_to_set():
    compat.backends.cudnn.benchmark = True
    compat.backends.cudnn.deterministic = True
    compat.backends.cuda.matmul.allow_tf32 = True
    compat.backends.cudnn.allow_tf32 = True
    assert compat.backends.mps.is_available() is False and compat.backends.cudnn.is_available() is False
    import tinyattn.compat.backends.cudnn as cudnn

    assert cudnn.benchmark is True


@WITHOUT_A_GPU
def test_autocast_passes_through_where_torch_disables_it_and_refuses_to_cast():
    with compat.autocast(device_type="cpu", enabled=False):
        assert (compat.ones(2) * 2).dtype == np.float32
    with pytest.warns(UserWarning, match="CUDA is not available"):
        context = compat.autocast(device_type="cuda", dtype=compat.float16)
    with context:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with compat.cuda.amp.autocast():
            pass
    with pytest.raises(NotImplementedError, match="enabled=False"):
        compat.autocast(device_type="cpu", dtype=compat.bfloat16)


@pytest.mark.parametrize("poison", [False, True])
def test_grad_scaler_scales_unscales_skips_and_updates_as_torch(poison):
    params, scales = {}, {}
    for lib in LIBS:
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0], dtype=lib.float64))
        optimizer = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        for step in range(3):
            loss = (w * w).sum() * (float("inf") if poison and step == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        params[lib], scales[lib] = _np(w), scaler.get_scale()
    np.testing.assert_allclose(params[compat], params[torch], rtol=1e-12)
    assert scales[compat] == scales[torch]


@WITHOUT_A_GPU
def test_a_disabled_grad_scaler_passes_everything_through():
    scaler = compat.cuda.amp.GradScaler(enabled=False)
    loss = compat.ones(1).sum()
    assert scaler.scale(loss) is loss and not scaler.is_enabled() and scaler.state_dict() == {}
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not compat.amp.GradScaler("cuda").is_enabled()


def test_what_compat_does_not_do_says_what_to_do_instead():
    model = compat.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="state_dict"):
        compat.jit.script(model)
    with pytest.raises(RuntimeError, match="interop.to_torch"):
        compat.onnx.export(model)
    assert compat.distributed.is_available() is False
    with pytest.raises(RuntimeError, match="one process"):
        compat.distributed.init_process_group("nccl")
    with pytest.raises(NotImplementedError, match="use nn.MaxPool2d"):
        compat.nn.FractionalMaxPool2d(2)


# ----------------------------------------------------------------------------- nn


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("options", [dict(), dict(num_layers=2, bidirectional=True), dict(batch_first=True),
                                     dict(bias=False, num_layers=2), dict(nonlinearity="relu")])
def test_recurrent_layers_match_torch(name, options):
    if "nonlinearity" in options and name != "RNN":
        return
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(3, 5, **options).double()
    ours = getattr(compat.nn, name)(3, 5, **options).double()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(1)
    directions = 2 if options.get("bidirectional") else 1
    layers = options.get("num_layers", 1)
    shape = (2, 4, 3) if options.get("batch_first") else (4, 2, 3)
    x, h = rng.standard_normal(shape), rng.standard_normal((layers * directions, 2, 5))
    upstream = rng.standard_normal(shape[:2] + (5 * directions,))
    results = []
    for model, lib in ((ours, compat), (theirs, torch)):
        inputs = [lib.tensor(x, requires_grad=True), lib.tensor(h, requires_grad=True)]
        state = (inputs[1], lib.tensor(h * 0.5)) if name == "LSTM" else inputs[1]
        output, h_n = model(inputs[0], state)
        h_n = h_n[0] if name == "LSTM" else h_n
        (output * lib.tensor(upstream)).sum().add(h_n.sum()).backward()
        results.append([_np(output), _np(h_n), _np(inputs[0].grad), _np(inputs[1].grad)]
                       + [_np(p.grad) for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_recurrent_layers_unbatched_and_their_errors_match_torch():
    torch.manual_seed(0)
    theirs = torch.nn.GRU(3, 4).double()
    ours = compat.nn.GRU(3, 4).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3))
    np.testing.assert_allclose(_np(ours(compat.tensor(x))[0]), _np(theirs(torch.tensor(x))[0]), rtol=1e-9)
    _same_error(lambda lib: lib.nn.LSTM(3, 4)(lib.randn(5, 2, 6)))
    _same_error(lambda lib: lib.nn.GRU(3, 4)(lib.randn(5, 2, 3), lib.zeros(2, 2, 4)))
    _same_error(lambda lib: lib.nn.RNN(3, 4, nonlinearity="sigmoid"))
    ours.flatten_parameters()


@SETTINGS
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4), batch_first=st.booleans(),
       side=st.sampled_from(["right", "left"]), value=st.floats(-3, 3))
def test_pad_sequence_matches_torch(lengths, batch_first, side, value):
    rng = np.random.default_rng(len(lengths))
    arrays = [rng.standard_normal((n, 2)) for n in lengths]
    results = []
    for lib in LIBS:
        sequences = [lib.tensor(a, requires_grad=True) for a in arrays]
        padded = lib.nn.utils.rnn.pad_sequence(sequences, batch_first=batch_first, padding_value=value,
                                               padding_side=side)
        padded.backward(lib.tensor(np.arange(padded.numel(), dtype=np.float64).reshape(tuple(padded.shape))))
        results.append([_np(padded)] + [_np(s.grad) for s in sequences])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    from tinyattn.compat.nn.utils.rnn import pad_sequence

    assert pad_sequence is compat.nn.utils.rnn.pad_sequence


def test_gradient_utilities_match_torch():
    grads = []
    for lib in LIBS:
        w = lib.nn.Parameter(lib.tensor([1.0, -5.0, 2.0, 0.5], dtype=lib.float64))
        (w * w * lib.tensor([1.0, 3.0, -2.0, 0.1], dtype=lib.float64)).sum().backward()
        lib.nn.utils.clip_grad_value_([w], clip_value=1.5)
        vector = lib.nn.utils.parameters_to_vector([w, w * 2])
        lib.nn.utils.vector_to_parameters(lib.arange(4, dtype=lib.float64), [w])
        grads.append((_np(w.grad), _np(vector), _np(w)))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    with pytest.warns(FutureWarning):
        compat.nn.utils.clip_grad_norm(compat.nn.Linear(2, 2).parameters(), 1.0)


def test_activations_and_init_match_torch():
    x = np.linspace(-3, 3, 7)
    for name in ("Sigmoid", "SiLU"):
        np.testing.assert_allclose(_np(getattr(compat.nn, name)()(compat.tensor(x))),
                                   _np(getattr(torch.nn, name)()(torch.tensor(x))), rtol=1e-12)
    np.testing.assert_allclose(_np(compat.nn.functional.silu(compat.tensor(x))),
                               _np(torch.nn.functional.silu(torch.tensor(x))), rtol=1e-12)
    for nonlinearity, param in (("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("leaky_relu", None),
                                ("linear", None), ("selu", None), ("sigmoid", None)):
        assert compat.nn.init.calculate_gain(nonlinearity, param) == \
            pytest.approx(torch.nn.init.calculate_gain(nonlinearity, param))
    w = compat.empty(400, 50)
    compat.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    bound = math.sqrt(3.0) * torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(50)
    assert w.abs().max().item() <= bound and w.abs().max().item() > 0.9 * bound
    compat.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.std().item() - math.sqrt(2.0 / 400)) < 0.01
    compat.nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert w.abs().max().item() <= 0.5
    _same_error(lambda lib: lib.nn.init.kaiming_uniform_(lib.empty(3)))
    _same_error(lambda lib: lib.nn.init.calculate_gain("swish"))


# ----------------------------------------------------------------------------- schedulers


@pytest.mark.parametrize("make", [
    lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    lambda lib, opt: lib.optim.lr_scheduler.MultiStepLR(opt, milestones=[4, 2, 7], gamma=0.3),
    lambda lib, opt: lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=0.01),
    lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=4),
    lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 / (step + 1)),
])
def test_schedulers_give_torchs_rates(make):
    rates = {}
    for lib in LIBS:
        w = lib.nn.Parameter(lib.ones(1))
        optimizer = lib.optim.SGD([{"params": [w]}, {"params": [lib.nn.Parameter(lib.ones(1))], "lr": 0.5}], lr=0.2)
        scheduler = make(lib, optimizer)
        rates[lib] = []
        for _ in range(10):
            rates[lib].append(scheduler.get_last_lr())
            optimizer.step()
            scheduler.step()
    np.testing.assert_allclose(rates[compat], rates[torch], rtol=1e-12)


def test_reduce_on_plateau_gives_torchs_rates():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6]
    rates = {}
    for lib in LIBS:
        optimizer = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        scheduler = lib.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1, cooldown=1,
                                                             min_lr=0.1)
        rates[lib] = []
        for metric in metrics:
            scheduler.step(metric)
            rates[lib].append(scheduler.get_last_lr()[0])
    assert rates[compat] == rates[torch]


# ----------------------------------------------------------------------------- idioms from public scripts


def test_idioms_of_older_and_newer_scripts_run_as_on_torch():
    results = []
    for lib in LIBS:
        ids = lib.tensor([3, 1, 2], dtype=lib.long)[None, ...]
        loss, count = lib.tensor(2.5), lib.tensor(7)
        dist = lib.zeros(3, 4).fill_(0.1)
        dist.scatter_(1, lib.tensor([[1], [0], [3]]), 0.6)
        dist.index_fill_(0, lib.nonzero(lib.tensor([0, 3, 0]) == 3).squeeze(), 0.0)
        ys = lib.ones(1, 1).type_as(ids).fill_(lib.tensor([5])[0])
        data = lib.randint(1, 11, size=(2, 10))
        variable = lib.autograd.Variable(lib.ones(2), requires_grad=True)
        line = "%6.2f | %d" % (loss, count)  # noqa: UP031  (the scripts' own formatting)
        results.append((tuple(ids.shape), line, _np(dist).tolist(), ys.tolist(), tuple(data.shape),
                        bool(((data >= 1) & (data < 11)).all()), variable.requires_grad))
    assert results[0] == results[1]


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_clip_grad_norm_returns_torchs_tensor_and_refuses_a_nonfinite_norm_when_asked(norm_type):
    results = []
    for lib in LIBS:
        w = lib.nn.Parameter(lib.tensor([3.0, -4.0, 1.0]))
        (w * w).sum().backward()
        norm = lib.nn.utils.clip_grad_norm_([w], max_norm=2.0, norm_type=norm_type, error_if_nonfinite=True)
        results.append((f"{norm:.4f}", str(norm.dtype).replace("torch.", ""), norm.ndim, _np(w.grad).tolist()))
    assert results[0][:3] == results[1][:3]
    np.testing.assert_allclose(results[0][3], results[1][3], rtol=1e-6)
    for lib in LIBS:
        w = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        (w * float("inf")).sum().backward()
        with pytest.raises(RuntimeError, match="non-finite"):
            lib.nn.utils.clip_grad_norm_([w], 1.0, norm_type=norm_type, error_if_nonfinite=True)


EINSUMS = ["bqd,bkd->bqk", "ij,jk->ik", "bi,bj->bij", "i,i->", "bij->bji", "ij->j", "ij,j", "bhqk,bhkd->bhqd",
           "ik,kj,jl->il", "abc,c->ab"]


@SETTINGS
@given(equation=st.sampled_from(EINSUMS), data=st.data())
def test_einsum_matches_torch_values_and_gradients(equation, data):
    inputs = equation.split("->")[0].split(",")
    sizes = {c: data.draw(st.integers(1, 3), label=c) for c in set("".join(inputs))}
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal([sizes[c] for c in subscripts]) for subscripts in inputs]
    results = []
    for lib in LIBS:
        operands = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = lib.einsum(equation, *operands)
        upstream = np.random.default_rng(1).standard_normal(tuple(out.shape))
        out.backward(lib.tensor(upstream))
        results.append([_np(out)] + [_np(t.grad) for t in operands])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    listed = compat.einsum(equation, [compat.tensor(a) for a in arrays])
    np.testing.assert_allclose(_np(listed), results[0][0], rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda lib: lib.einsum("ij,jk->ik", lib.ones(2, 3)),
    lambda lib: lib.einsum("ij->ijk", lib.ones(2, 3)),
    lambda lib: lib.einsum("ijk->i", lib.ones(2, 3)),
])
def test_einsum_errors_match_torch_in_kind(call):
    _same_error(call)


def test_module_lookups_and_casts_match_torch():
    results = []
    for lib in LIBS:
        torch.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ModuleList([lib.nn.LayerNorm(3)]))
        model.register_buffer("scale", lib.ones(1))
        model.register_module("head", lib.nn.Linear(3, 1))
        results.append((type(model.get_submodule("1.0")).__name__, tuple(model.get_parameter("0.weight").shape),
                        tuple(model.get_buffer("scale").shape), model.get_submodule("") is model,
                        str(model.half().head.weight.dtype).replace("torch.", ""), model.share_memory() is model))
        for method, target in (("get_submodule", "1.5"), ("get_parameter", "0.missing"), ("get_buffer", "0.weight")):
            with pytest.raises(AttributeError):
                getattr(model, method)(target)
    assert results[0] == results[1]
    with pytest.raises(TypeError, match="bfloat16"):
        compat.nn.Linear(2, 2).bfloat16()
    model = compat.nn.Linear(2, 2)
    assert model.compile() is None and type(model).__name__ == "Linear"  # compiled in place (tests/compat/test_compile)


@pytest.mark.parametrize("optimizer_name, options", [
    ("SGD", dict(momentum=0.9)), ("Adam", dict()), ("AdamW", dict()),
])
@pytest.mark.parametrize("schedule", [
    dict(anneal_strategy="cos"), dict(anneal_strategy="linear", three_phase=True), dict(cycle_momentum=False),
])
def test_one_cycle_gives_torchs_rates_and_momenta(optimizer_name, options, schedule):
    seen = {}
    for lib in LIBS:
        w = lib.nn.Parameter(lib.ones(2, dtype=lib.float64))
        optimizer = getattr(lib.optim, optimizer_name)([w], lr=0.1, **options)
        scheduler = lib.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, epochs=4, steps_per_epoch=5, **schedule)
        seen[lib] = []
        for _ in range(20):
            group = optimizer.param_groups[0]
            seen[lib].append((group["lr"], group.get("momentum", group.get("betas", (0,))[0])))
            (w * w).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
        seen[lib].append(_np(w).tolist())
    np.testing.assert_allclose(np.array(seen[compat][:-1]), np.array(seen[torch][:-1]), rtol=1e-12)
    np.testing.assert_allclose(seen[compat][-1], seen[torch][-1], rtol=1e-9)


def test_sequential_schedules_give_torchs_rates():
    rates = {}
    for lib in LIBS:
        optimizer = lib.optim.AdamW([lib.nn.Parameter(lib.ones(1))], lr=0.3)
        warmup = lib.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
        decay = lib.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=8, eta_min=0.01)
        scheduler = lib.optim.lr_scheduler.SequentialLR(optimizer, [warmup, decay], milestones=[3])
        rates[lib] = []
        for _ in range(12):
            rates[lib].append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
    np.testing.assert_allclose(rates[compat], rates[torch], rtol=1e-12)
    for lib in LIBS:
        optimizer = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=0.3)
        with pytest.raises(ValueError, match="one more than the number of milestone"):
            lib.optim.lr_scheduler.SequentialLR(optimizer, [lib.optim.lr_scheduler.StepLR(optimizer, 2)], [1])
        with pytest.raises(ValueError, match="momentum or beta1"):
            lib.optim.lr_scheduler.OneCycleLR(lib.optim.Adagrad([lib.nn.Parameter(lib.ones(1))]), max_lr=1.0,
                                              total_steps=5)
