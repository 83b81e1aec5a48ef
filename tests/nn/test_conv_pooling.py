"""Convolution, pooling, unfold/fold and their layers against torch: values and gradients in float64 under a random
upstream gradient, for shapes, strides, paddings, dilations and groups drawn by hypothesis; the layers' parameters,
initialisation and ``repr``; Embedding's ``from_pretrained`` and ``padding_idx``."""

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F

TF = torch.nn.functional


def _agree(ours_fn, theirs_fn, arrays, seed, indices=False, some_gradient=True):
    """Both functions on the same float64 arrays: equal outputs and equal gradients of every input under one
    random upstream gradient (and equal indices, when the functions return a pair). ``some_gradient``: some input
    gets a non-zero gradient (a case whose windows all lie in the padding has none)."""
    ours_in = [ta.tensor(a, requires_grad=True) for a in arrays]
    theirs_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    ours, theirs = ours_fn(*ours_in), theirs_fn(*theirs_in)
    if indices:
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
        ours, theirs = ours[0], theirs[0]
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-10)
    upstream = np.random.default_rng(seed).standard_normal(theirs.shape)
    ours.backward(ta.tensor(upstream))
    theirs.backward(torch.tensor(upstream))
    for o, t in zip(ours_in, theirs_in):
        np.testing.assert_allclose(o.grad, t.grad.numpy(), rtol=1e-10, atol=1e-10)
    assert not some_gradient or max(np.abs(o.grad).max() for o in ours_in) > 0  # the check is not vacuous


@st.composite
def conv_cases(draw, d, transposed=False):
    groups = draw(st.integers(1, 3))
    c_in, c_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 3)) for _ in range(d)]
    dilation = [draw(st.integers(1, 2)) for _ in range(d)]
    if transposed:
        padding = [draw(st.integers(0, dil * (k - 1))) for k, dil in zip(kernel, dilation)]
        output_padding = [draw(st.integers(0, max(s, dil) - 1)) for s, dil in zip(stride, dilation)]
        size = [draw(st.integers(1, 5)) for _ in range(d)]
        assume(all((n - 1) * s - 2 * p + dil * (k - 1) + op + 1 > 0
                   for n, s, p, dil, k, op in zip(size, stride, padding, dilation, kernel, output_padding)))
        weight = (c_in, c_out // groups, *kernel)
        return dict(size=size, c=c_in, weight=weight, c_out=c_out, groups=groups, stride=stride, padding=padding,
                    dilation=dilation, output_padding=output_padding)
    padding = draw(st.one_of(st.just("valid"), st.just("same"), st.lists(st.integers(0, 2), min_size=d, max_size=d)))
    if padding == "same":
        stride = [1] * d
    pads = [0] * d if isinstance(padding, str) else padding
    size = [dil * (k - 1) + 1 - 2 * p + draw(st.integers(0, 5))
            for k, dil, p in zip(kernel, dilation, pads)]  # at least one window
    size = [max(s, 1) for s in size]
    weight = (c_out, c_in // groups, *kernel)
    return dict(size=size, c=c_in, weight=weight, c_out=c_out, groups=groups, stride=stride, padding=padding,
                dilation=dilation)


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data())
def test_conv_matches_torch(d, data):
    case = data.draw(conv_cases(d))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    batch = data.draw(st.sampled_from([None, 2]))  # None: an unbatched input
    x = rng.standard_normal(((batch,) if batch else ()) + (case["c"], *case["size"]))
    w, b = rng.standard_normal(case["weight"]), rng.standard_normal(case["c_out"])
    ours_conv, theirs_conv = (F.conv1d, F.conv2d)[d - 1], (TF.conv1d, TF.conv2d)[d - 1]
    kw = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"], groups=case["groups"])
    _agree(lambda x, w, b: ours_conv(x, w, b, **kw), lambda x, w, b: theirs_conv(x, w, b, **kw), [x, w, b],
           rng.integers(2**16))


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data())
def test_conv_transpose_matches_torch(d, data):
    case = data.draw(conv_cases(d, transposed=True))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((2, case["c"], *case["size"]))
    w, b = rng.standard_normal(case["weight"]), rng.standard_normal(case["c_out"])
    ours_conv = (F.conv_transpose1d, F.conv_transpose2d)[d - 1]
    theirs_conv = (TF.conv_transpose1d, TF.conv_transpose2d)[d - 1]
    kw = dict(stride=case["stride"], padding=case["padding"], output_padding=case["output_padding"],
              groups=case["groups"], dilation=case["dilation"])
    _agree(lambda x, w, b: ours_conv(x, w, b, **kw), lambda x, w, b: theirs_conv(x, w, b, **kw), [x, w, b],
           rng.integers(2**16))


def test_conv3d_and_conv_transpose3d_match_torch():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 2, 4, 3, 5)), rng.standard_normal((4, 1, 2, 2, 3))
    kw = dict(stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2)
    _agree(lambda x, w: F.conv3d(x, w, **kw), lambda x, w: TF.conv3d(x, w, **kw), [x, w], 0)
    wt = rng.standard_normal((2, 3, 2, 2, 2))
    kw = dict(stride=2, padding=1, output_padding=1)
    _agree(lambda x, w: F.conv_transpose3d(x, w, **kw), lambda x, w: TF.conv_transpose3d(x, w, **kw), [x, wt], 1)


@st.composite
def pool_cases(draw, d, dilated=True):
    kernel = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 3)) for _ in range(d)]
    dilation = [draw(st.integers(1, 2)) if dilated else 1 for _ in range(d)]
    padding = [draw(st.integers(0, k // 2)) for k in kernel]
    size = [dil * (k - 1) + 1 + draw(st.integers(0, 5)) for k, dil in zip(kernel, dilation)]
    return dict(size=size, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
                ceil_mode=draw(st.booleans()))


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data())
def test_max_pool_matches_torch(d, data):
    case = data.draw(pool_cases(d))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((2, 3, *case.pop("size")))  # distinct values: no ties
    ours_pool, theirs_pool = (F.max_pool1d, F.max_pool2d)[d - 1], (TF.max_pool1d, TF.max_pool2d)[d - 1]
    _agree(lambda x: ours_pool(x, **case, return_indices=True), lambda x: theirs_pool(x, **case, return_indices=True),
           [x], rng.integers(2**16), indices=True)


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data(), count_include_pad=st.booleans(), divisor=st.sampled_from([None, 3]))
def test_avg_pool_matches_torch(d, data, count_include_pad, divisor):
    case = data.draw(pool_cases(d, dilated=False))
    del case["dilation"]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((2, 3, *case.pop("size")))
    case["count_include_pad"] = count_include_pad
    if d == 2:
        case["divisor_override"] = divisor
    ours_pool, theirs_pool = (F.avg_pool1d, F.avg_pool2d)[d - 1], (TF.avg_pool1d, TF.avg_pool2d)[d - 1]
    _agree(lambda x: ours_pool(x, **case), lambda x: theirs_pool(x, **case), [x], rng.integers(2**16))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kind", ["avg", "max"])
@given(data=st.data())
def test_adaptive_pool_matches_torch(d, kind, data):
    size = [data.draw(st.integers(1, 9)) for _ in range(d)]
    out = tuple(data.draw(st.one_of(st.none(), st.integers(1, 6)) if d > 1 else st.integers(1, 6)) for _ in range(d))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((2, 3, *size))
    name = f"adaptive_{kind}_pool{d}d"
    extra = dict(return_indices=True) if kind == "max" else {}
    _agree(lambda x: getattr(F, name)(x, out if d > 1 else out[0], **extra),
           lambda x: getattr(TF, name)(x, out if d > 1 else out[0], **extra), [x], rng.integers(2**16),
           indices=kind == "max")


@given(data=st.data())
def test_unfold_and_fold_match_torch(data):
    kernel = [data.draw(st.integers(1, 3)) for _ in range(2)]
    stride = [data.draw(st.integers(1, 2)) for _ in range(2)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(2)]
    padding = [data.draw(st.integers(0, 1)) for _ in range(2)]
    size = [dil * (k - 1) + 1 + data.draw(st.integers(0, 4)) for k, dil in zip(kernel, dilation)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    kw = dict(kernel_size=kernel, dilation=dilation, padding=padding, stride=stride)
    x = rng.standard_normal((2, 3, *size))
    _agree(lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw), [x], rng.integers(2**16), some_gradient=False)
    blocks = TF.unfold(torch.tensor(x), **kw).shape
    cols = rng.standard_normal(tuple(blocks))
    _agree(lambda c: F.fold(c, size, **kw), lambda c: TF.fold(c, size, **kw), [cols], rng.integers(2**16),
           some_gradient=False)


def test_conv_and_pool_gradients_agree_with_finite_differences():
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((1, 2, 5, 4)), requires_grad=True)
    w = ta.tensor(rng.standard_normal((2, 1, 2, 3)), requires_grad=True)
    up = ta.tensor(rng.standard_normal((1, 2, 2, 1)))
    assert ta.testing.gradcheck(
        lambda x, w: (F.max_pool2d(F.conv2d(x, w, stride=(2, 1), padding=1, groups=2), 2, padding=1) * up).sum(),
        (x, w))


def test_conv_works_under_vmap_and_forward_mode():
    rng = np.random.default_rng(1)
    xs, w = rng.standard_normal((3, 2, 6)), rng.standard_normal((4, 2, 3))
    batched = ta.func.vmap(lambda x: F.conv1d(x, ta.tensor(w), padding=1))(ta.tensor(xs))
    expected = TF.conv1d(torch.tensor(xs), torch.tensor(w), padding=1)
    np.testing.assert_allclose(batched.numpy(), expected.numpy(), atol=1e-12)
    tangent = rng.standard_normal(xs.shape)
    _, jvp = ta.func.jvp(lambda x: F.avg_pool1d(F.conv1d(x, ta.tensor(w)), 2), (ta.tensor(xs),), (ta.tensor(tangent),))
    _, expected_jvp = torch.func.jvp(lambda x: TF.avg_pool1d(TF.conv1d(x, torch.tensor(w)), 2), (torch.tensor(xs),),
                                     (torch.tensor(tangent),))
    np.testing.assert_allclose(jvp.numpy(), expected_jvp.numpy(), atol=1e-12)


# ----------------------------------------------------------------------------- the layers


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, "same", (2, 0)])
def test_conv2d_layer_matches_torch_with_its_weights(padding_mode, padding):
    theirs = torch.nn.Conv2d(4, 6, (3, 2), padding=padding, padding_mode=padding_mode, groups=2).double()
    ours = nn.Conv2d(4, 6, (3, 2), padding=padding, padding_mode=padding_mode, groups=2, dtype=np.float64)
    assert repr(ours) == repr(theirs)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == [(n, tuple(p.shape))
                                                                  for n, p in theirs.named_parameters()]
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((2, 4, 5, 6))
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-12)


def test_conv_transpose_layer_matches_torch_with_output_size():
    theirs = torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1).double()
    ours = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, dtype=np.float64)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((1, 3, 4, 5))
    expected = theirs(torch.tensor(x), output_size=(8, 10)).detach().numpy()
    np.testing.assert_allclose(ours(ta.tensor(x), output_size=(8, 10)).numpy(), expected, atol=1e-12)
    with pytest.raises(ValueError, match="output size"):
        ours(ta.tensor(x), output_size=(12, 12))
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose1d(1, 1, 2, padding_mode="reflect")


@pytest.mark.parametrize("layer, args", [(nn.Conv1d, (4, 6, 3)), (nn.Conv2d, (4, 6, (3, 2))),
                                         (nn.ConvTranspose1d, (4, 6, 3)), (nn.ConvTranspose2d, (2, 6, 2))])
def test_conv_layers_initialise_as_torch(layer, args):
    ta.manual_seed(0)
    module = layer(*args, groups=2)
    fan_in = module.weight.shape[1] * math.prod(module.kernel_size)
    bound = 1 / math.sqrt(fan_in)
    for p in (module.weight, module.bias):
        values = p.numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.5 * bound
    torch_module = getattr(torch.nn, layer.__name__)(*args, groups=2)
    assert module.weight.shape == tuple(torch_module.weight.shape)


def test_pool_layers_repr_and_run_as_torch():
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 6))
    for name, args, kwargs in [("MaxPool2d", (3,), dict(stride=2, padding=1)), ("AvgPool2d", (2,), {}),
                               ("AdaptiveAvgPool2d", ((2, 3),), {}), ("AdaptiveMaxPool2d", (2,), {}),
                               ("MaxPool1d", (2,), {}), ("AvgPool1d", (3,), dict(stride=1)),
                               ("AdaptiveAvgPool1d", (4,), {}), ("AdaptiveMaxPool1d", (4,), {})]:
        ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        data = x if name.endswith("2d") else x[0]
        np.testing.assert_allclose(ours(ta.tensor(data)).numpy(), theirs(torch.tensor(data)).numpy(), atol=1e-12)


def test_conv_and_pool_errors_say_what_came():
    with pytest.raises(RuntimeError, match="expected input .* to have 4 channels"):
        F.conv1d(ta.randn(1, 3, 5), ta.randn(2, 2, 2), groups=2)
    with pytest.raises(ValueError, match="strided"):
        F.conv1d(ta.randn(1, 2, 5), ta.randn(2, 2, 2), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="smaller than the kernel"):
        F.conv2d(ta.randn(1, 1, 2, 2), ta.randn(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match="at most half"):
        F.max_pool1d(ta.randn(1, 1, 5), 2, padding=2)
    with pytest.raises(RuntimeError, match="3D"):
        F.conv2d(ta.randn(5), ta.randn(1, 1, 3, 3))


# ----------------------------------------------------------------------------- Embedding


def test_embedding_from_pretrained_shares_freezes_and_matches_torch():
    table = np.random.default_rng(5).standard_normal((6, 3))
    weights = ta.tensor(table)
    ours = nn.Embedding.from_pretrained(weights, padding_idx=2)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), padding_idx=2)
    assert repr(ours) == repr(theirs)
    assert ours.weight.requires_grad is False and ours.weight._data is weights._data  # shared, not copied
    np.testing.assert_array_equal(ours.weight.numpy()[2], table[2])  # the padding row is not zeroed
    trainable = nn.Embedding.from_pretrained(ta.tensor(table), freeze=False, max_norm=1.0)
    assert trainable.weight.requires_grad
    with pytest.raises(ValueError, match="2-dimensional"):
        nn.Embedding.from_pretrained(ta.tensor(table[0]))


@pytest.mark.parametrize("padding_idx", [0, 3, -1])
def test_embedding_padding_idx_gets_no_gradient_as_torch(padding_idx):
    rng = np.random.default_rng(6)
    theirs = torch.nn.Embedding(5, 4, padding_idx=padding_idx).double()
    ours = nn.Embedding(5, 4, padding_idx=padding_idx, dtype=np.float64)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    np.testing.assert_array_equal(ours.weight.numpy()[padding_idx], 0)
    index = np.array([[0, 3, 4, 3], [1, 4, 0, 2]])
    upstream = rng.standard_normal((2, 4, 4))
    ours(ta.tensor(index)).backward(ta.tensor(upstream))
    theirs(torch.tensor(index)).backward(torch.tensor(upstream))
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), atol=1e-12)
    np.testing.assert_array_equal(ours.weight.grad[padding_idx], 0)
    assert np.abs(ours.weight.grad).max() > 0


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data(), norm_type=st.sampled_from([1.0, 2.0, 3.0, 1.5]))
def test_lp_pool_matches_torch(d, data, norm_type):
    case = data.draw(pool_cases(d, dilated=False))
    for unused in ("dilation", "padding"):
        del case[unused]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = np.abs(rng.standard_normal((2, 3, *case.pop("size")))) + 0.1  # positive: no kink of xᵖ at 0
    if d == 1:  # torch's lp_pool1d takes ints only
        case["kernel_size"], case["stride"] = case["kernel_size"][0], case["stride"][0]
    ours_pool, theirs_pool = (F.lp_pool1d, F.lp_pool2d)[d - 1], (TF.lp_pool1d, TF.lp_pool2d)[d - 1]
    _agree(lambda x: ours_pool(x, norm_type, **case), lambda x: theirs_pool(x, norm_type, **case), [x],
           rng.integers(2**16))


@pytest.mark.parametrize("d", [1, 2])
@given(data=st.data())
def test_max_unpool_matches_torch_overlapping_windows_included(d, data):
    case = data.draw(pool_cases(d, dilated=False))
    del case["dilation"], case["ceil_mode"]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    size = case.pop("size")
    x = torch.tensor(rng.standard_normal((2, 3, *size)))
    pool, unpool = (TF.max_pool1d, TF.max_pool2d)[d - 1], (TF.max_unpool1d, TF.max_unpool2d)[d - 1]
    values, indices = pool(x, **case, return_indices=True)
    ours_unpool = (F.max_unpool1d, F.max_unpool2d)[d - 1]
    _agree(lambda v: ours_unpool(v, ta.tensor(indices.numpy()), **case, output_size=size),
           lambda v: unpool(v, indices, **case, output_size=size), [values.numpy()], rng.integers(2**16))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("layout", ["2d", "offsets", "include_last_offset"])
def test_embedding_bag_matches_torch(mode, padding_idx, layout):
    rng = np.random.default_rng(11)
    table = rng.standard_normal((7, 3))
    if layout == "2d":
        index, offsets = rng.integers(0, 7, (3, 4)), None
    else:  # an empty bag in the middle
        index = rng.integers(0, 7, 9)
        offsets = np.array([0, 2, 2, 7]) if layout == "offsets" else np.array([0, 3, 3, 9])
    weights = rng.standard_normal(index.shape) if mode == "sum" else None
    kw = dict(mode=mode, padding_idx=padding_idx, include_last_offset=layout == "include_last_offset")

    def run(lib, fn, table, *weights):
        offs = None if offsets is None else lib.tensor(offsets)
        return fn(lib.tensor(index), table, offs, per_sample_weights=weights[0] if weights else None, **kw)

    arrays = [table] + ([weights] if weights is not None else [])
    _agree(lambda *a: run(ta, F.embedding_bag, *a), lambda *a: run(torch, TF.embedding_bag, *a), arrays, 12)


def test_embedding_bag_layer_matches_torch():
    theirs = torch.nn.EmbeddingBag(6, 4, mode="max", padding_idx=0).double()
    ours = nn.EmbeddingBag(6, 4, mode="max", padding_idx=0, dtype=np.float64)
    assert repr(ours) == repr(theirs)
    np.testing.assert_array_equal(ours.weight.numpy()[0], 0)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    index = np.array([[1, 0, 3], [5, 5, 2]])
    np.testing.assert_allclose(ours(ta.tensor(index)).numpy(), theirs(torch.tensor(index)).detach().numpy())
    frozen = nn.EmbeddingBag.from_pretrained(ta.tensor(np.eye(3)), mode="sum")
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(ta.tensor([[0, 2]])).numpy(), [[1.0, 0.0, 1.0]])


@pytest.mark.parametrize("lazy, plain, shape", [(nn.LazyConv1d, nn.Conv1d, (2, 6, 9)),
                                                (nn.LazyConv2d, nn.Conv2d, (2, 4, 6, 6)),
                                                (nn.LazyConvTranspose1d, nn.ConvTranspose1d, (2, 4, 5)),
                                                (nn.LazyConvTranspose2d, nn.ConvTranspose2d, (4, 5, 5))])
def test_lazy_convolutions_take_their_channels_from_the_first_input(lazy, plain, shape):
    layer = lazy(6, 3, groups=2)
    weight = layer.weight
    out = layer(ta.randn(*shape))
    assert type(layer) is plain and layer.weight is weight  # the same Parameter, reshaped
    in_channels = shape[1] if len(shape) == plain.dims + 2 else shape[0]  # batched, or unbatched
    expected = torch.nn.__dict__[plain.__name__](in_channels, 6, 3, groups=2)
    assert layer.weight.shape == tuple(expected.weight.shape) and repr(layer) == repr(expected)
    assert out.shape == tuple(expected(torch.randn(*shape)).shape)
    with pytest.raises(ValueError, match="divisible"):
        lazy(6, 3, groups=4)(ta.randn(1, 3, 8))
