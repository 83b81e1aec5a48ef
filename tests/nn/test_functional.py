"""``nn.functional``, proven by a factory: one table of specs, three oracles.

Each ``Spec`` draws a *case* (the float inputs, which all get ``requires_grad=True``,
integer arrays such as indices and targets, and keyword options), and names our call
and PyTorch's. From the table:

1. ``test_matches_torch``: values and the gradients of every float input, under a random
   upstream gradient, agree with PyTorch in float64 (tight) and float32 (loose), on every
   device; float32 in gives float32 out and float32 gradients;
2. ``test_gradcheck``: float64 gradients agree with central finite differences;
3. ``test_fused_matches_composed``: softmax, log_softmax, layer_norm and cross_entropy (their
   ``Function``s: the reference's, and for layer_norm and cross_entropy the compiled form's) agree
   with the same formula composed from the engine's primitives.

The table's tests, and the others of linear, layer_norm and cross_entropy, run twice: on the
definition and on ``ta.compile(F.fn)`` (the ``route`` fixture; ``ta.compile`` gives back a function
without a fused form as it is).

Then the cases no table shows: numerical extremes (logits of 1e4, rows of ``-inf``,
constant LayerNorm rows), dropout's invariants, and the errors bad input must raise.
"""

from typing import NamedTuple

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn.functional as F
from tinyattn import testing as tt

TOLERANCES = {np.float64: dict(rtol=1e-9, atol=1e-11), np.float32: dict(rtol=2e-4, atol=2e-5)}


def _positional(fn, *tensors, **options):
    return fn(*tensors, **options)


def _weight_and_bias_by_name(fn, x, weight, bias, **options):
    return fn(x, weight=weight, bias=bias, **options)


def _indices_first(fn, weight, indices, **options):
    return fn(indices, weight, **options)


class Spec(NamedTuple):
    name: str
    case: object  # strategy of (float arrays, integer arrays, options)
    ours: object  # the library's function (``route`` gives its compiled form, where it has one)
    theirs: object  # the same in PyTorch (or, in ``FUSED``, composed from our primitives)
    calculus_case: object = None  # the case for gradcheck, where it must differ from ``case``
    call: object = _positional  # (function, *float tensors, *integer tensors, **options) -> tensor


# ----------------------------------------------------------------------------- case strategies


@st.composite
def _elementwise(draw, **options):
    shape = draw(tt.shapes(max_dims=3, max_side=3))
    return [draw(tt.arrays(shape, low=0.1, high=3.0))], [], options


@st.composite
def _linear(draw, bias=True):
    batch = draw(tt.shapes(min_dims=0, max_dims=2, max_side=3))
    in_features, out_features = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    floats = [draw(tt.arrays(batch + (in_features,))), draw(tt.arrays((out_features, in_features)))]
    if bias:
        floats.append(draw(tt.arrays((out_features,))))
    return floats, [], {}


@st.composite
def _along_dim(draw):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return [draw(tt.arrays(shape, low=0.0, high=4.0))], [], {"dim": dim}


@st.composite
def _layer_norm(draw, affine=True):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    normalized_shape = shape[len(shape) - draw(st.integers(1, min(2, len(shape)))):]
    # distinct elements keep every row's variance well above eps (constant rows are tested apart)
    floats = [draw(tt.distinct_arrays(shape, spacing=0.3))]
    if affine:
        floats += [draw(tt.arrays(normalized_shape)), draw(tt.arrays(normalized_shape))]
    return floats, [], {"normalized_shape": normalized_shape}


@st.composite
def _embedding(draw, padding=True):
    num_embeddings, embedding_dim = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    index_shape = draw(tt.shapes(min_dims=0, max_dims=2, max_side=4))
    size = int(np.prod(index_shape))
    index = draw(st.lists(st.integers(0, num_embeddings - 1), min_size=size, max_size=size))
    index = np.array(index, dtype=np.int64).reshape(index_shape)
    padding_idx = draw(st.one_of(st.none(), st.integers(0, num_embeddings - 1))) if padding else None
    return [draw(tt.arrays((num_embeddings, embedding_dim)))], [index], {"padding_idx": padding_idx}


@st.composite
def _cross_entropy(draw):
    num_classes = draw(st.integers(1, 4))
    extra = draw(st.sampled_from([None, (), (3,), (2, 2)]))  # None: unbatched (C,)
    batch = draw(st.integers(1, 3))
    logits_shape = (num_classes,) if extra is None else (batch, num_classes) + extra
    target_shape = () if extra is None else (batch,) + extra
    ignore_index = draw(st.sampled_from([-100, 0]))
    size = int(np.prod(target_shape))
    target = draw(st.lists(st.integers(0, num_classes - 1), min_size=size, max_size=size))
    ignored = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    target = np.where(ignored, ignore_index, target).astype(np.int64)
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    if reduction == "mean" and not (target != ignore_index).any():  # all ignored: tested apart
        target.flat[0] = (ignore_index + 1) % num_classes if num_classes > 1 else 0
        if target.flat[0] == ignore_index:
            ignore_index = -100
    options = dict(
        ignore_index=ignore_index, reduction=reduction, label_smoothing=draw(st.sampled_from([0.0, 0.1, 0.7]))
    )
    return [draw(tt.arrays(logits_shape, low=0.0, high=5.0))], [target.reshape(target_shape)], options


SPECS = [
    Spec("linear", _linear(), F.linear, TF.linear),
    Spec("linear_no_bias", _linear(bias=False), F.linear, TF.linear),
    Spec("relu", _elementwise(), F.relu, TF.relu),
    Spec("gelu", _elementwise(), F.gelu, TF.gelu),
    Spec("gelu_tanh", _elementwise(approximate="tanh"), F.gelu, TF.gelu),
    Spec("softmax", _along_dim(), F.softmax, TF.softmax),
    Spec("log_softmax", _along_dim(), F.log_softmax, TF.log_softmax),
    Spec("layer_norm", _layer_norm(), F.layer_norm, TF.layer_norm, call=_weight_and_bias_by_name),
    Spec("layer_norm_no_affine", _layer_norm(affine=False), F.layer_norm, TF.layer_norm),
    # the padding row's value reaches the output but, by design, passes no gradient back:
    # calculus would disagree there, so gradcheck draws cases without padding
    Spec("embedding", _embedding(), F.embedding, TF.embedding, calculus_case=_embedding(padding=False),
         call=_indices_first),
    Spec("cross_entropy", _cross_entropy(), F.cross_entropy, TF.cross_entropy),
]


# ----------------------------------------------------------------------------- the factory


def _run_ours(spec, fn, floats, integers, options, device, dtype):
    inputs = [ta.tensor(a.astype(dtype), device=device, requires_grad=True) for a in floats]
    out = spec.call(fn, *inputs, *[ta.tensor(i, device=device) for i in integers], **options)
    return inputs, out


def _run_theirs(spec, floats, integers, options, dtype):
    inputs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in floats]
    out = spec.call(spec.theirs, *inputs, *[torch.tensor(i) for i in integers], **options)
    return inputs, out


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_matches_torch(spec, dtype, device, route, data, seed):
    floats, integers, options = data.draw(spec.case)
    ours_in, ours = _run_ours(spec, route(spec.ours), floats, integers, options, device, dtype)
    theirs_in, theirs = _run_theirs(spec, floats, integers, options, dtype)
    tolerance = TOLERANCES[dtype]

    assert ours.shape == tuple(theirs.shape) and ours.dtype == dtype and ours.device == device
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **tolerance)

    upstream = np.random.default_rng(seed).standard_normal(ours.shape).astype(dtype)
    ours.backward(ta.tensor(upstream, device=device))
    theirs.backward(torch.tensor(upstream))
    if dtype == np.float32 and spec.name.startswith("layer_norm"):
        # LayerNorm's input gradient is a difference of terms of size |g·w|/σ that nearly cancel (for two
        # elements it is all cancellation): float32 rounding of those terms, not of the result, sets the error
        tolerance = dict(tolerance, atol=1e-4)
    for i, (mine, reference) in enumerate(zip(ours_in, theirs_in)):
        assert mine.grad.dtype == dtype, f"input {i}: gradient dtype {mine.grad.dtype}"
        np.testing.assert_allclose(ta.backend.to_numpy(mine.grad), reference.grad.numpy(), **tolerance,
                                   err_msg=f"{spec.name}: gradient of input {i}")


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@given(data=st.data())
def test_gradcheck(spec, device, route, data):
    floats, integers, options = data.draw(spec.case if spec.calculus_case is None else spec.calculus_case)
    inputs = [ta.tensor(a, device=device, requires_grad=True) for a in floats]
    indices = [ta.tensor(i, device=device) for i in integers]
    fn = route(spec.ours)
    assert tt.gradcheck(lambda *xs: spec.call(fn, *xs, *indices, **options), inputs)


# ----------------------------------------------------------------------------- fused against composed


def _softmax_composed(x, dim):
    exps = (x - x.amax(dim, keepdim=True)).exp()
    return exps / exps.sum(dim, keepdim=True)


def _log_softmax_composed(x, dim):
    shifted = x - x.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def _layer_norm_composed(x, normalized_shape, weight, bias):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    centered = x - x.mean(axes, keepdim=True)
    variance = (centered * centered).mean(axes, keepdim=True)  # biased
    return centered / (variance + 1e-5).sqrt() * weight + bias


def _cross_entropy_composed(logits, target, ignore_index, reduction, label_smoothing):
    unbatched = logits.ndim == 1
    if unbatched:
        logits, target = logits.reshape(1, -1), target.reshape(1)
    num_classes = logits.shape[1]
    host_target = target.numpy()
    valid = host_target != ignore_index
    onehot = np.eye(num_classes)[np.where(valid, host_target, 0)]  # (N, d…, C)
    onehot = np.moveaxis(onehot, -1, 1).astype(logits.dtype)  # (N, C, d…)
    log_p = _log_softmax_composed(logits, 1)
    nll = -(log_p * ta.tensor(onehot, device=logits.device)).sum(1)  # (N, d…)
    smooth = -log_p.sum(1) / num_classes
    mask = ta.tensor(valid.astype(logits.dtype), device=logits.device)
    losses = ((1 - label_smoothing) * nll + label_smoothing * smooth) * mask
    if reduction == "none":
        return losses.reshape(()) if unbatched else losses
    return losses.sum() if reduction == "sum" else losses.sum() / float(valid.sum())


FUSED = [
    Spec("softmax", _along_dim(), F.softmax, _softmax_composed),
    Spec("log_softmax", _along_dim(), F.log_softmax, _log_softmax_composed),
    Spec("layer_norm", _layer_norm(), F.layer_norm, _layer_norm_composed, call=_weight_and_bias_by_name),
    Spec("cross_entropy", _cross_entropy(), F.cross_entropy, _cross_entropy_composed),
]


@pytest.mark.parametrize("spec", FUSED, ids=[s.name for s in FUSED])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fused_matches_composed(spec, device, route, data, seed):
    floats, integers, options = data.draw(spec.case)
    results = []
    for fn in (route(spec.ours), spec.theirs):  # here "theirs" is the composed twin, run by our engine
        inputs = [ta.tensor(a, device=device, requires_grad=True) for a in floats]
        out = spec.call(fn, *inputs, *[ta.tensor(i, device=device) for i in integers], **options)
        upstream = np.random.default_rng(seed).standard_normal(out.shape)
        out.backward(ta.tensor(upstream, device=device))
        results.append([out.numpy()] + [x.grad for x in inputs])
    for fused, composed in zip(*results):
        np.testing.assert_allclose(ta.backend.to_numpy(fused), ta.backend.to_numpy(composed), rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- numerical extremes


def _both(fn_ours, fn_theirs, values, device, upstream=None, dtype=np.float64):
    """Values and input gradients from us and from PyTorch for the same input."""
    ours_in = ta.tensor(np.array(values, dtype=dtype), device=device, requires_grad=True)
    theirs_in = torch.tensor(np.array(values, dtype=dtype), requires_grad=True)
    ours, theirs = fn_ours(ours_in), fn_theirs(theirs_in)
    upstream = np.ones(ours.shape, dtype) if upstream is None else np.asarray(upstream, dtype)
    ours.backward(ta.tensor(upstream, device=device))
    theirs.backward(torch.tensor(upstream))
    return (ours.numpy(), ta.backend.to_numpy(ours_in.grad)), (theirs.detach().numpy(), theirs_in.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cross_entropy"])
def test_huge_logits_stay_finite(name, dtype, device, route):
    logits = [[1e4, 0.0, -1e4], [-1e4, -1e4 + 1, -1e4 - 2]]
    upstream = [[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]] if name != "cross_entropy" else 1.0
    if name == "cross_entropy":
        ours_fn = lambda x: route(F.cross_entropy)(x, ta.tensor([1, 0], device=device))
        theirs_fn = lambda x: TF.cross_entropy(x, torch.tensor([1, 0]))
    else:
        ours_fn, theirs_fn = (lambda x: getattr(F, name)(x, dim=-1)), (lambda x: getattr(TF, name)(x, dim=-1))
    ours, theirs = _both(ours_fn, theirs_fn, logits, device, upstream, dtype)
    for mine, reference in zip(ours, theirs):
        assert np.isfinite(mine).all()
        np.testing.assert_allclose(mine, reference, **TOLERANCES[dtype])


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_all_minus_inf_row_is_nan_like_torch(name, device):
    logits = [[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]]
    ours, theirs = _both(lambda x: getattr(F, name)(x, dim=1), lambda x: getattr(TF, name)(x, dim=1),
                         logits, device, [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    assert np.isnan(ours[0][0]).all() and not np.isnan(ours[0][1]).any()
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine, reference, rtol=1e-12, atol=1e-15, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_layer_norm_constant_rows(dtype, device, route):
    rows = [[3.0, 3.0, 3.0, 3.0], [-1e3, -1e3, -1e3, -1e3], [0.5, 0.5, 0.5, 0.5000001]]
    upstream = [[0.5, -1.0, 2.0, 0.25], [1.0, 1.0, -3.0, 0.0], [0.1, 0.2, 0.3, 0.4]]
    ours, theirs = _both(lambda x: route(F.layer_norm)(x, (4,)), lambda x: TF.layer_norm(x, (4,)),
                         rows, device, upstream, dtype)
    for mine, reference in zip(ours, theirs):
        assert np.isfinite(mine).all()
        np.testing.assert_allclose(mine, reference, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-3)
    np.testing.assert_array_equal(ours[0][:2], 0.0)  # constant rows normalise to exactly zero


@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:divide by zero encountered")
def test_cross_entropy_all_ignored_like_torch(device, route):
    logits = [[0.5, -1.0, 2.0], [1.0, 0.0, 0.0]]
    ours, theirs = _both(lambda x: route(F.cross_entropy)(x, ta.tensor([-100, -100], device=device)),
                         lambda x: TF.cross_entropy(x, torch.tensor([-100, -100])), logits, device, 1.0)
    assert np.isnan(ours[0]) and np.isnan(theirs[0])  # mean over no targets, as in PyTorch
    np.testing.assert_array_equal(ours[1], theirs[1])  # and zero gradients


# ----------------------------------------------------------------------------- dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_scales_the_kept_and_zeroes_the_rest(p, device):
    ta.manual_seed(0)
    x = ta.tensor(np.random.default_rng(1).uniform(0.5, 2.0, (100, 200)), device=device, requires_grad=True)
    out = F.dropout(x, p=p)
    kept = out.numpy() != 0
    np.testing.assert_allclose(out.numpy()[kept], x.numpy()[kept] / (1 - p), rtol=1e-15)
    n = kept.size  # kept ~ Binomial(n, 1 - p): within 5 standard deviations
    assert abs(kept.sum() - n * (1 - p)) < 5 * np.sqrt(n * p * (1 - p))
    upstream = np.random.default_rng(2).standard_normal(x.shape)
    out.backward(ta.tensor(upstream, device=device))
    np.testing.assert_allclose(ta.backend.to_numpy(x.grad), upstream * kept / (1 - p), rtol=1e-15)


def test_dropout_edges_and_modes(device):
    x = ta.tensor(np.arange(1.0, 7.0).reshape(2, 3), device=device, requires_grad=True)
    assert F.dropout(x, p=0.0) is x and F.dropout(x, p=0.7, training=False) is x
    out = F.dropout(x, p=1.0)
    out.backward(ta.ones(2, 3, dtype=np.float64, device=device))
    np.testing.assert_array_equal(out.numpy(), 0.0)
    np.testing.assert_array_equal(ta.backend.to_numpy(x.grad), 0.0)
    assert not np.isnan(out.numpy()).any()


def test_dropout_reproducible_under_manual_seed(device):
    x = ta.ones(8, 16, device=device)
    ta.manual_seed(123)
    first = F.dropout(x, 0.5).numpy()
    second = F.dropout(x, 0.5).numpy()
    ta.manual_seed(123)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)
    assert (first != second).any()  # the generator moves on between calls


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_dropout_rejects_bad_p(p):
    with pytest.raises(ValueError, match=r"between 0 and 1.*" + str(p)):
        F.dropout(ta.ones(3), p=p)


# ----------------------------------------------------------------------------- dtype and device


NAMED_CALLS = {  # name -> (the function, its call on x)
    "linear": (F.linear, lambda fn, x: fn(x, ta.ones(2, 3, device=x.device), ta.ones(2, device=x.device))),
    "relu": (F.relu, _positional),
    "gelu": (F.gelu, _positional),
    "gelu_tanh": (F.gelu, lambda fn, x: fn(x, approximate="tanh")),
    "softmax": (F.softmax, lambda fn, x: fn(x, -1)),
    "log_softmax": (F.log_softmax, lambda fn, x: fn(x, -1)),
    "layer_norm": (F.layer_norm, lambda fn, x: fn(x, (3,), ta.ones(3, device=x.device), ta.zeros(3, device=x.device))),
    "dropout": (F.dropout, lambda fn, x: fn(x, 0.5)),
    "cross_entropy": (F.cross_entropy, lambda fn, x: fn(x, ta.tensor([0, 2], device=x.device), label_smoothing=0.1)),
}


@pytest.mark.parametrize("name", list(NAMED_CALLS))
def test_float32_in_float32_out(name, device, route):
    x = ta.randn(2, 3, device=device, requires_grad=True)
    fn, call = NAMED_CALLS[name]
    out = call(route(fn), x)
    assert out.dtype == np.float32 and out.device == device
    out.backward(ta.randn(*out.shape, device=device))
    assert x.grad.dtype == np.float32 and ta.backend.device_of(x.grad) == device


def test_embedding_padding_row_gets_no_gradient_and_repeats_accumulate(device):
    weight = ta.tensor(np.arange(12.0).reshape(4, 3), device=device, requires_grad=True)
    index = ta.tensor([[2, 0, 2], [2, 3, 0]], device=device)
    out = F.embedding(index, weight, padding_idx=0)
    np.testing.assert_array_equal(out.numpy()[0, 1], [0.0, 1.0, 2.0])  # the padding row's value still comes out
    out.backward(ta.ones(2, 3, 3, dtype=np.float64, device=device))
    np.testing.assert_array_equal(ta.backend.to_numpy(weight.grad)[:, 0], [0.0, 0.0, 3.0, 1.0])


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [5, 17, -1, -6])
def test_embedding_rejects_out_of_range_indices(bad, device):
    weight = ta.randn(5, 2, device=device)
    with pytest.raises(IndexError, match=rf"index {bad} is out of range for a table of 5 rows"):
        F.embedding(ta.tensor([[0, bad], [1, 2]], device=device), weight)


def test_embedding_rejects_float_indices(device):
    with pytest.raises(TypeError, match="indices must be integers.*float32"):
        F.embedding(ta.tensor([0.0, 1.0], device=device), ta.randn(3, 2, device=device))


def test_cross_entropy_rejects_bad_targets(route):
    logits, cross_entropy = ta.randn(2, 3), route(F.cross_entropy)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        cross_entropy(logits, ta.tensor([0, 3]))
    with pytest.raises(IndexError, match="target -1 is out of bounds"):
        cross_entropy(logits, ta.tensor([-1, 0]))
    with pytest.raises(ValueError, match=r"shape \(2,\), got \(3,\)"):
        cross_entropy(logits, ta.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"logits of shape \(3,\) need class-index targets of shape \(\), got \(2,\)"):
        cross_entropy(ta.randn(3), ta.tensor([0, 1]))
    with pytest.raises(TypeError, match="integers"):
        cross_entropy(logits, ta.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(logits, ta.tensor([0, 1]), reduction="avg")


def test_linear_and_layer_norm_name_the_shapes(route):
    with pytest.raises(ValueError, match=r"size 5 .*\(2, 5\).*in_features=3"):
        route(F.linear)(ta.ones(2, 5), ta.ones(4, 3))
    with pytest.raises(ValueError, match=r"trailing dimensions are \(4,\), got shape \(2, 3\)"):
        route(F.layer_norm)(ta.ones(2, 3), (4,))
    with pytest.raises(IndexError, match=r"softmax: dim 2 is out of range \[-2, 1\]"):
        F.softmax(ta.ones(2, 3), dim=2)
