"""The module classes of the layer families (activations, losses, normalisation, padding, distances, dropout,
rearrangements, parameter containers), each against the PyTorch module of the same name.

A ``Case`` draws a module's constructor arguments and its inputs (hypothesis draws the shapes and the arguments, a
seeded generator the values, kept clear of the activations' kinks). PyTorch builds the reference module, its
parameters are set to random values, and they are copied into ours through ``load_state_dict``. Then, in float64:
the outputs, and under a random upstream gradient the gradients of every floating input and of every parameter,
agree with PyTorch. Then ``BatchNorm``'s running statistics over several training steps and in eval mode, the
dropout modules (eval identity, channel-wise masks, alpha dropout's moments), the containers and the ``repr``
strings.
"""

from typing import NamedTuple

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import backend
from tinyattn import testing as tt

TOLERANCE = dict(rtol=1e-9, atol=1e-11)


class Case(NamedTuple):
    name: str
    draw: object  # (draw, rng) -> (constructor kwargs, [input arrays])
    build: object = None  # (library's nn, kwargs) -> module; default: nn.<name>(**kwargs)
    fixed: tuple = ()  # the inputs that are not differentiated (a loss's target, its labels)
    rtol: float = TOLERANCE["rtol"]


def _values(rng, shape, kinks=(0.0,), scale=2.0):
    """Normal values ``· scale``, each moved at least 0.02 away from every kink."""
    x = rng.standard_normal(shape) * scale
    for kink in kinks:
        near = np.abs(x - kink) < 0.02
        x = np.where(near, kink + 0.05 * np.where(x >= kink, 1, -1), x)
    return x


def _activation(name, kinks=(0.0,), min_dims=0, max_dims=3, rtol=TOLERANCE["rtol"], **kwargs):
    def draw_case(draw, rng):
        shape = draw(tt.shapes(min_dims=min_dims, max_dims=max_dims, max_side=4))
        return kwargs, [_values(rng, shape, kinks)]

    return Case(name + "".join(f"_{k}={v}" for k, v in kwargs.items()), draw_case,
                lambda lib, kw: getattr(lib, name)(**kw), rtol=rtol)


def _glu(draw, rng):
    shape = list(draw(tt.shapes(min_dims=1, max_dims=3, max_side=3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    shape[dim] *= 2
    return dict(dim=dim), [_values(rng, tuple(shape))]


def _prelu(draw, rng):
    shape = draw(tt.shapes(min_dims=2, max_dims=4, max_side=3))
    return dict(num_parameters=draw(st.sampled_from([1, shape[1]])), init=0.3), [_values(rng, shape)]


def _channels(draw, rng, ndim, min_side=1):
    """An ``(N, C, …)`` input of ``ndim`` dimensions."""
    return _values(rng, draw(tt.shapes(min_dims=ndim, max_dims=ndim, min_side=min_side, max_side=4)))


def _softmax2d(draw, rng):
    return {}, [_channels(draw, rng, draw(st.sampled_from([3, 4])))]


# (the constants are exact in float32, as PyTorch's kernels hold them in float32 even for float64 inputs; its
# hardsigmoid's 1/6 is not, whence those two cases' tolerance)
ACTIVATIONS = [
    _activation("ELU", alpha=0.75), _activation("CELU", alpha=1.25), _activation("SELU"),
    _activation("Hardshrink", kinks=(-0.4, 0.4), lambd=0.4), _activation("Softshrink", kinks=(-0.3, 0.3), lambd=0.3),
    _activation("Hardsigmoid", kinks=(-3.0, 3.0), rtol=1e-7), _activation("Hardswish", kinks=(-3.0, 3.0), rtol=1e-7),
    _activation("Hardtanh", kinks=(-0.8, 1.2), min_val=-0.8, max_val=1.2), _activation("ReLU6", kinks=(0.0, 6.0)),
    _activation("LeakyReLU", negative_slope=0.0625), _activation("LogSigmoid"), _activation("Mish"),
    _activation("Softplus", beta=2.0, threshold=3.0), _activation("Softsign", kinks=()), _activation("Tanhshrink"),
    _activation("Threshold", kinks=(0.1,), threshold=0.1, value=-2.0), _activation("SiLU"), _activation("Sigmoid"),
    _activation("ReLU"), _activation("Softmin", min_dims=1, dim=-1), _activation("Softmin", min_dims=2, dim=1),
    Case("GLU", _glu), Case("PReLU", _prelu), Case("Softmax2d", _softmax2d),
]


# ----------------------------------------------------------------------------- losses

REDUCTIONS = st.sampled_from(["mean", "sum", "none"])


def _batch(draw):
    return draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))


def _signs(rng, shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def _pointwise_loss(**extra):
    def draw_case(draw, rng):
        shape = _batch(draw)
        kwargs = dict(reduction=draw(REDUCTIONS), **{k: draw(v) for k, v in extra.items()})
        return kwargs, [_values(rng, shape), _values(rng, shape)]

    return draw_case


def _bce(draw, rng):
    shape = _batch(draw)
    weight = rng.uniform(0.5, 2.0, shape[-1:]) if draw(st.booleans()) else None
    return (dict(weight=weight, reduction=draw(REDUCTIONS)),
            [rng.uniform(0.05, 0.95, shape), rng.uniform(0.0, 1.0, shape)])


def _bce_with_logits(draw, rng):
    shape = _batch(draw)
    weight = rng.uniform(0.5, 2.0, shape[-1:]) if draw(st.booleans()) else None
    pos_weight = rng.uniform(0.5, 2.0, shape[-1:]) if draw(st.booleans()) else None
    return (dict(weight=weight, pos_weight=pos_weight, reduction=draw(REDUCTIONS)),
            [_values(rng, shape), rng.uniform(0.0, 1.0, shape)])


def _soft_margin(draw, rng):
    shape = _batch(draw)
    return dict(reduction=draw(REDUCTIONS)), [_values(rng, shape), _signs(rng, shape)]


def _margin_ranking(draw, rng):
    n = draw(st.integers(1, 5))
    x1, x2 = _values(rng, (n,)), _values(rng, (n,))
    x2 = np.where(np.abs(x1 - x2 - 0.2) < 0.05, x2 + 0.3, x2)  # clear of the hinge at x1 - x2 = margin
    return dict(margin=0.2, reduction=draw(REDUCTIONS)), [x1, x2, _signs(rng, (n,))]


def _hinge_embedding(draw, rng):
    shape = _batch(draw)
    return (dict(margin=1.5, reduction=draw(REDUCTIONS)),
            [_values(rng, shape, kinks=(1.5,)), _signs(rng, shape)])


def _cosine_embedding(draw, rng):
    n, d = draw(st.integers(1, 4)), draw(st.integers(2, 4))
    return (dict(margin=draw(st.sampled_from([0.0, 0.3])), reduction=draw(REDUCTIONS)),
            [_values(rng, (n, d)), _values(rng, (n, d)), _signs(rng, (n,))])


def _multi_margin(draw, rng):
    n, c = draw(st.integers(1, 4)), draw(st.integers(2, 4))
    weight = rng.uniform(0.5, 2.0, (c,)) if draw(st.booleans()) else None
    kwargs = dict(p=draw(st.sampled_from([1, 2])), margin=0.8, weight=weight, reduction=draw(REDUCTIONS))
    return kwargs, [_values(rng, (n, c)), rng.integers(0, c, (n,))]


def _multilabel_margin(draw, rng):
    n, c = draw(st.integers(1, 4)), draw(st.integers(2, 4))
    target = np.full((n, c), -1)
    for row in range(n):
        labels = rng.permutation(c)[:rng.integers(1, c + 1)]
        target[row, :len(labels)] = labels
    return dict(reduction=draw(REDUCTIONS)), [_values(rng, (n, c)), target]


def _multilabel_soft_margin(draw, rng):
    n, c = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    weight = rng.uniform(0.5, 2.0, (c,)) if draw(st.booleans()) else None
    return (dict(weight=weight, reduction=draw(REDUCTIONS)),
            [_values(rng, (n, c)), (rng.random((n, c)) < 0.5).astype(np.float64)])


def _triplet(draw, rng):
    n, d = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kwargs = dict(margin=draw(st.sampled_from([0.5, 3.0])), p=draw(st.sampled_from([1.0, 2.0, 3.0])),
                  swap=draw(st.booleans()), reduction=draw(REDUCTIONS))
    return kwargs, [_values(rng, (n, d)) for _ in range(3)]


def _triplet_with_distance(draw, rng):
    n, d = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kwargs = dict(margin=draw(st.sampled_from([0.5, 3.0])), swap=draw(st.booleans()), reduction=draw(REDUCTIONS))
    return kwargs, [_values(rng, (n, d)) for _ in range(3)]


def _poisson_nll(draw, rng):
    shape = _batch(draw)
    log_input = draw(st.booleans())
    input = _values(rng, shape, scale=1.0) if log_input else rng.uniform(0.2, 3.0, shape)
    kwargs = dict(log_input=log_input, full=draw(st.booleans()), reduction=draw(REDUCTIONS))
    return kwargs, [input, rng.integers(0, 5, shape).astype(np.float64)]


def _gaussian_nll(draw, rng):
    shape = _batch(draw)
    var_shape = draw(st.sampled_from([shape, shape[:-1] + (1,)]))
    kwargs = dict(full=draw(st.booleans()), reduction=draw(REDUCTIONS))
    return kwargs, [_values(rng, shape), _values(rng, shape), rng.uniform(0.3, 2.0, var_shape)]


LOSSES = [
    Case("L1Loss", _pointwise_loss(), fixed=(1,)),
    Case("SmoothL1Loss", _pointwise_loss(beta=st.sampled_from([0.5, 1.0])), fixed=(1,)),
    Case("HuberLoss", _pointwise_loss(delta=st.sampled_from([0.7, 1.0])), fixed=(1,)),
    Case("BCELoss", _bce, fixed=(1,)),
    Case("BCEWithLogitsLoss", _bce_with_logits, fixed=(1,)),
    Case("SoftMarginLoss", _soft_margin, fixed=(1,)),
    Case("MarginRankingLoss", _margin_ranking, fixed=(2,)),
    Case("HingeEmbeddingLoss", _hinge_embedding, fixed=(1,)),
    Case("CosineEmbeddingLoss", _cosine_embedding, fixed=(2,)),
    Case("MultiMarginLoss", _multi_margin, fixed=(1,)),
    Case("MultiLabelMarginLoss", _multilabel_margin, fixed=(1,)),
    Case("MultiLabelSoftMarginLoss", _multilabel_soft_margin, fixed=(1,)),
    Case("TripletMarginLoss", _triplet),
    Case("TripletMarginWithDistanceLoss", _triplet_with_distance),
    Case("PoissonNLLLoss", _poisson_nll, fixed=(1,)),
    Case("GaussianNLLLoss", _gaussian_nll, fixed=(1,)),
]


# ----------------------------------------------------------------------------- normalisation and the rest


def _group_norm(draw, rng):
    groups = draw(st.integers(1, 3))
    shape = (draw(st.integers(1, 3)), groups * draw(st.integers(1, 2))) + draw(tt.shapes(max_dims=2, max_side=3))
    if np.prod(shape) // (shape[0] * groups) < 2:
        shape = shape + (2,)
    return dict(num_groups=groups, num_channels=shape[1], affine=draw(st.booleans())), [_values(rng, shape)]


def _rms_norm(draw, rng):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    normalized = shape[len(shape) - draw(st.integers(1, len(shape))):]
    kwargs = dict(normalized_shape=normalized, eps=draw(st.sampled_from([None, 1e-3])),
                  elementwise_affine=draw(st.booleans()))
    return kwargs, [_values(rng, shape)]


def _norm_kwargs(draw, channels):
    return dict(num_features=channels, eps=draw(st.sampled_from([1e-5, 1e-3])),
                momentum=draw(st.sampled_from([0.1, 0.5, None])), affine=draw(st.booleans()),
                track_running_stats=draw(st.booleans()))


def _batch_norm(ndim):
    def draw_case(draw, rng):
        shape = draw(tt.shapes(min_dims=ndim, max_dims=ndim, min_side=2, max_side=3))
        return _norm_kwargs(draw, shape[1]), [_values(rng, shape)]

    return draw_case


def _instance_norm(ndim):
    def draw_case(draw, rng):
        shape = draw(tt.shapes(min_dims=ndim, max_dims=ndim, min_side=2, max_side=3))
        shape = shape[1:] if draw(st.booleans()) else shape  # unbatched (C, …) too
        channels = shape[-(ndim - 1)]
        return _norm_kwargs(draw, channels), [_values(rng, shape)]

    return draw_case


def _local_response_norm(draw, rng):
    shape = draw(tt.shapes(min_dims=3, max_dims=5, max_side=4))
    kwargs = dict(size=draw(st.integers(1, 4)), alpha=draw(st.sampled_from([1e-4, 0.5])),
                  beta=draw(st.sampled_from([0.75, 1.5])), k=draw(st.sampled_from([1.0, 2.0])))
    return kwargs, [_values(rng, shape)]


def _padding(name, ndim):
    mode = name.split("Pad")[0]

    def draw_case(draw, rng):
        shape = draw(tt.shapes(min_dims=ndim + 1, max_dims=ndim + 2, min_side=2, max_side=4))
        low = -1 if mode in ("Constant", "Zero") else 0
        high = {"Reflection": 1, "Circular": 2}.get(mode, 3)
        if draw(st.booleans()):
            padding = draw(st.integers(0, min(high, min(shape[-ndim:]) - 1)))
        else:
            padding = tuple(draw(st.integers(low, min(high, shape[-1 - i // 2] - 1))) for i in range(2 * ndim))
        kwargs = dict(padding=padding)
        if mode == "Constant":
            kwargs["value"] = draw(st.sampled_from([0.0, -1.5]))
        return kwargs, [_values(rng, shape)]

    return Case(name, draw_case)


PADDINGS = [_padding(f"{mode}Pad{n}d", n) for mode in ("Constant", "Zero", "Reflection", "Replication", "Circular")
            for n in (1, 2, 3)]


def _cosine_similarity(draw, rng):
    shape = draw(tt.shapes(min_dims=1, max_dims=3, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return dict(dim=dim, eps=1e-8), [_values(rng, shape), _values(rng, shape)]


def _pairwise_distance(draw, rng):
    shape = draw(tt.shapes(min_dims=1, max_dims=2, max_side=4))
    kwargs = dict(p=draw(st.sampled_from([1.0, 2.0, 3.0])), eps=1e-6, keepdim=draw(st.booleans()))
    return kwargs, [_values(rng, shape), _values(rng, shape)]


def _bilinear(draw, rng):
    batch = draw(tt.shapes(min_dims=0, max_dims=2, max_side=3))
    in1, in2, out = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kwargs = dict(in1_features=in1, in2_features=in2, out_features=out, bias=draw(st.booleans()))
    return kwargs, [_values(rng, batch + (in1,)), _values(rng, batch + (in2,))]


def _pixel_shuffle(draw, rng):
    r = draw(st.integers(1, 3))
    batch = draw(tt.shapes(min_dims=0, max_dims=2, max_side=2))
    shape = batch + (draw(st.integers(1, 2)) * r * r, draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return dict(upscale_factor=r), [_values(rng, shape)]


def _pixel_unshuffle(draw, rng):
    r = draw(st.integers(1, 3))
    batch = draw(tt.shapes(min_dims=0, max_dims=2, max_side=2))
    shape = batch + (draw(st.integers(1, 2)), draw(st.integers(1, 2)) * r, draw(st.integers(1, 2)) * r)
    return dict(downscale_factor=r), [_values(rng, shape)]


def _channel_shuffle(draw, rng):
    groups = draw(st.integers(1, 3))
    shape = (draw(st.integers(1, 2)), groups * draw(st.integers(1, 3))) + draw(tt.shapes(min_dims=1, max_dims=2,
                                                                                             max_side=3))
    return dict(groups=groups), [_values(rng, shape)]


def _unflatten(draw, rng):
    shape = list(draw(tt.shapes(min_dims=1, max_dims=3, max_side=3)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    parts = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    shape[dim] = parts[0] * parts[1]
    return dict(dim=dim, unflattened_size=parts), [_values(rng, tuple(shape))]


INTERPOLATION_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
FACTORS = st.sampled_from([0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0])


def _torch_nearest_backward_differs(shape, sizes, factors):
    """PyTorch's nearest backward takes ``j // 2`` where the output is twice the input whatever the scale factor,
    while its forward reads ``⌊j / scale_factor⌋``: its gradient is not its forward's there (ours is)."""
    return factors is not None and any(m == 2 * n and f != 2.0 for n, m, f in zip(shape[2:], sizes, factors))


def _upsample(draw, rng):
    mode = draw(st.sampled_from(["nearest", "nearest-exact", *INTERPOLATION_DIMS]))
    spatial = INTERPOLATION_DIMS.get(mode) or draw(st.integers(1, 3))
    shape = draw(tt.shapes(min_dims=2, max_dims=2, max_side=2)) + draw(
        tt.shapes(min_dims=spatial, max_dims=spatial, max_side=4))
    kwargs = dict(mode=mode)
    if mode not in ("nearest", "nearest-exact"):
        kwargs["align_corners"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["size"] = tuple(draw(st.integers(1, 6)) for _ in range(spatial))
        sizes, factors = kwargs["size"], None
    else:
        factors = tuple(draw(FACTORS) for _ in range(spatial))
        factors = tuple(f if n * f >= 1 else 1.0 for n, f in zip(shape[2:], factors))
        kwargs["scale_factor"] = factors[0] if len(set(factors)) == 1 and draw(st.booleans()) else factors
        kwargs["recompute_scale_factor"] = draw(st.sampled_from([None, True]))
        sizes = tuple(int(np.floor(n * f)) for n, f in zip(shape[2:], factors))
        factors = None if kwargs["recompute_scale_factor"] else factors
    if mode == "nearest":
        assume(not _torch_nearest_backward_differs(shape, sizes, factors))
    return kwargs, [_values(rng, shape)]


OTHERS = [
    Case("GroupNorm", _group_norm), Case("RMSNorm", _rms_norm),
    Case("BatchNorm1d_2d_input", _batch_norm(2), lambda lib, kw: lib.BatchNorm1d(**kw)),
    Case("BatchNorm1d", _batch_norm(3)), Case("BatchNorm2d", _batch_norm(4)), Case("BatchNorm3d", _batch_norm(5)),
    Case("BatchNorm2d_eval", _batch_norm(4), lambda lib, kw: lib.BatchNorm2d(**kw).eval()),
    Case("InstanceNorm1d", _instance_norm(3)), Case("InstanceNorm2d", _instance_norm(4)),
    Case("InstanceNorm3d", _instance_norm(5)),
    Case("InstanceNorm2d_eval", _instance_norm(4), lambda lib, kw: lib.InstanceNorm2d(**kw).eval()),
    Case("LocalResponseNorm", _local_response_norm),
    *PADDINGS,
    Case("CosineSimilarity", _cosine_similarity), Case("PairwiseDistance", _pairwise_distance),
    Case("Bilinear", _bilinear), Case("PixelShuffle", _pixel_shuffle), Case("PixelUnshuffle", _pixel_unshuffle),
    Case("ChannelShuffle", _channel_shuffle), Case("Unflatten", _unflatten), Case("Upsample", _upsample),
    Case("RReLU_eval", lambda draw, rng: (dict(lower=0.1, upper=0.4), [_values(rng, _batch(draw))]),
         lambda lib, kw: lib.RReLU(**kw).eval()),
    Case("AlphaDropout_eval", lambda draw, rng: (dict(p=0.3), [_values(rng, _batch(draw))]),
         lambda lib, kw: lib.AlphaDropout(**kw).eval()),
    Case("Dropout2d_eval", lambda draw, rng: (dict(p=0.3), [_channels(draw, rng, 4)]),
         lambda lib, kw: lib.Dropout2d(**kw).eval()),
]

CASES = ACTIVATIONS + LOSSES + OTHERS


def _build(case, lib, kwargs):
    if case.build is not None:
        return case.build(lib, kwargs)
    return getattr(lib, case.name)(**kwargs)


def _arguments(kwargs, convert):
    return {k: convert(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def _twins(case, kwargs, rng):
    """PyTorch's module in float64 with random parameters, and ours holding copies of them (and of the buffers)."""
    theirs = _build(case, torch.nn, _arguments(kwargs, torch.tensor)).double()
    with torch.no_grad():
        for param in theirs.parameters():
            param.copy_(torch.from_numpy(rng.uniform(-1.5, 1.5, tuple(param.shape))))
        for name, buffer in theirs.named_buffers():
            if name.endswith("running_var"):  # (eval mode: statistics other than the initial ones)
                buffer.copy_(torch.from_numpy(rng.uniform(0.5, 2.0, tuple(buffer.shape))))
            elif name.endswith("running_mean"):
                buffer.copy_(torch.from_numpy(rng.uniform(-1.0, 1.0, tuple(buffer.shape))))
    ours = _build(case, nn, _arguments(kwargs, ta.tensor)).to(np.float64)
    ours.load_state_dict({name: value.numpy() for name, value in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_module_matches_torch(case, data, seed):
    rng = np.random.default_rng(seed)
    kwargs, arrays = case.draw(data.draw, rng)
    ours, theirs = _twins(case, kwargs, rng)
    differentiated = [a.dtype.kind == "f" and i not in case.fixed for i, a in enumerate(arrays)]
    inputs = [ta.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiated)]
    torch_inputs = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiated)]
    out, out_torch = ours(*inputs), theirs(*torch_inputs)
    assert out.shape == tuple(out_torch.shape) and out.dtype == np.float64
    np.testing.assert_allclose(out.numpy(), out_torch.detach().numpy(), rtol=case.rtol, atol=TOLERANCE["atol"],
                               err_msg="output")
    for name, buffer in theirs.named_buffers():  # running statistics updated alike
        np.testing.assert_allclose(getattr(ours, name).numpy(), buffer.numpy(), **TOLERANCE, err_msg=name)

    upstream = np.asarray(rng.standard_normal(out.shape))  # (an array even for a 0-d output: float64)
    out.backward(ta.tensor(upstream))
    out_torch.backward(torch.tensor(upstream))
    for i, (x, x_torch) in enumerate(zip(inputs, torch_inputs)):
        if x.requires_grad:
            np.testing.assert_allclose(backend.to_numpy(x.grad), x_torch.grad.numpy(), rtol=case.rtol,
                                       atol=TOLERANCE["atol"], err_msg=f"gradient of input {i}")
    reference = dict(theirs.named_parameters())
    assert sorted(name for name, _ in ours.named_parameters()) == sorted(reference)
    for name, param in ours.named_parameters():
        np.testing.assert_allclose(backend.to_numpy(param.grad), reference[name].grad.numpy(), **TOLERANCE,
                                   err_msg=f"gradient of {name}")


# ----------------------------------------------------------------------------- batch norm's running statistics


@pytest.mark.parametrize("momentum", [0.1, 0.7, None])
@given(shape=tt.shapes(min_dims=2, max_dims=4, min_side=2, max_side=3), seed=st.integers(0, 2**32 - 1))
def test_batch_norm_running_statistics_then_eval(momentum, shape, seed):
    rng = np.random.default_rng(seed)
    layer = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d"}[len(shape)]
    ours = getattr(nn, layer)(shape[1], momentum=momentum, dtype=np.float64)
    theirs = getattr(torch.nn, layer)(shape[1], momentum=momentum, dtype=torch.float64)
    for _ in range(3):  # three training steps, each a new batch
        batch = rng.standard_normal(shape) * 2 + 1
        ours(ta.tensor(batch)), theirs(torch.tensor(batch))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), **TOLERANCE)
    assert int(ours.num_batches_tracked.item()) == 3 and ours.num_batches_tracked.dtype == np.int64

    ours.eval(), theirs.eval()
    batch = rng.standard_normal(shape)
    x, x_torch = ta.tensor(batch, requires_grad=True), torch.tensor(batch, requires_grad=True)
    out, out_torch = ours(x), theirs(x_torch)
    np.testing.assert_allclose(out.numpy(), out_torch.detach().numpy(), **TOLERANCE)
    upstream = np.asarray(rng.standard_normal(shape))
    out.backward(ta.tensor(upstream)), out_torch.backward(torch.tensor(upstream))
    np.testing.assert_allclose(backend.to_numpy(x.grad), x_torch.grad.numpy(), **TOLERANCE)
    np.testing.assert_allclose(backend.to_numpy(ours.weight.grad), theirs.weight.grad.numpy(), **TOLERANCE)
    assert int(ours.num_batches_tracked.item()) == 3  # eval mode counts nothing and moves nothing
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), **TOLERANCE)


def test_batch_norm_state_dict_and_reset():
    norm = nn.BatchNorm2d(3)
    assert list(norm.state_dict()) == list(torch.nn.BatchNorm2d(3).state_dict())
    norm(ta.randn(2, 3, 2, 2) + 5)
    assert norm.running_mean.numpy().min() > 0.1
    norm.reset_running_stats()
    np.testing.assert_array_equal(norm.running_mean.numpy(), 0.0)
    np.testing.assert_array_equal(norm.running_var.numpy(), 1.0)
    assert norm.num_batches_tracked.item() == 0
    with pytest.raises(ValueError, match="expected 4D input"):
        norm(ta.zeros(2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(ta.zeros(1, 3))


# ----------------------------------------------------------------------------- random modules while training


@given(shape=tt.shapes(min_dims=3, max_dims=5, min_side=2, max_side=4), seed=st.integers(0, 2**32 - 1))
def test_channel_dropout_drops_whole_channels(shape, seed):
    ta.manual_seed(seed)
    layer = {3: nn.Dropout1d, 4: nn.Dropout2d, 5: nn.Dropout3d}[len(shape)](p=0.5)
    x = ta.tensor(np.random.default_rng(seed).uniform(1.0, 2.0, shape), requires_grad=True)
    out = layer(x)
    values = out.numpy().reshape(shape[0], shape[1], -1) / x.numpy().reshape(shape[0], shape[1], -1)
    for channel in values.reshape(-1, values.shape[-1]):
        assert np.allclose(channel, 0.0) or np.allclose(channel, 2.0), channel  # dropped or scaled by 1/(1-p)
    upstream = np.random.default_rng(seed + 1).standard_normal(shape)
    out.backward(ta.tensor(upstream))
    np.testing.assert_allclose(backend.to_numpy(x.grad), upstream * values.reshape(shape))  # the mask is the derivative


def test_alpha_dropout_keeps_mean_and_variance():
    ta.manual_seed(0)
    x = ta.tensor(np.random.default_rng(0).standard_normal(200_000))
    out = nn.AlphaDropout(0.3)(x).numpy()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    values, counts = np.unique(out, return_counts=True)
    dropped_value = values[np.argmax(counts)]  # every dropped element takes one value, a·(-α') + b
    reference = torch.nn.AlphaDropout(0.3)(torch.tensor(x.numpy())).numpy()
    values, counts = np.unique(reference, return_counts=True)
    np.testing.assert_allclose(dropped_value, values[np.argmax(counts)])  # the same value as PyTorch's
    assert abs((out == dropped_value).mean() - 0.3) < 0.01
    channels = nn.FeatureAlphaDropout(0.5)(ta.ones(50, 40, 3)).numpy()
    assert (channels == channels[..., :1]).all()  # one draw per channel


def test_rrelu_draws_its_slopes_while_training():
    ta.manual_seed(0)
    x = ta.tensor(-np.ones(10_000), requires_grad=True)
    out = nn.RReLU(0.1, 0.3)(x)
    slopes = -out.numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.05
    out.backward(ta.ones(10_000))
    np.testing.assert_allclose(backend.to_numpy(x.grad), slopes)  # each element's derivative is its slope


# ----------------------------------------------------------------------------- containers and repr


def test_parameter_list_and_dict_register_their_parameters():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([ta.ones(2), nn.Parameter(ta.zeros(3))])
            self.shifts = nn.ParameterDict({"a": ta.zeros(2)})

    model = Model()
    model.scales.append(ta.ones(1))
    model.shifts["b"] = ta.ones(2)
    assert [n for n, _ in model.named_parameters()] == ["scales.0", "scales.1", "scales.2", "shifts.a", "shifts.b"]
    assert all(p.requires_grad for p in model.parameters())
    assert len(model.scales) == 3 and model.scales[-1].shape == (1,) and list(model.shifts) == ["a", "b"]
    assert model.shifts.pop("a").shape == (2,) and "a" not in model.shifts
    with pytest.raises(IndexError):
        model.scales[3]
    with pytest.raises(TypeError, match="expected a Parameter or a Tensor"):
        model.scales.append(3.0)
    torch_list = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3)), torch.nn.Parameter(torch.ones(4))])
    ours = nn.ParameterList([ta.ones(2, 3), ta.ones(4)])
    assert repr(ours) == repr(torch_list).replace("torch.float32", "float32")


REPRS = [
    ("ELU", dict(alpha=0.5)), ("ELU", dict(inplace=True)), ("CELU", {}), ("SELU", {}), ("SELU", dict(inplace=True)),
    ("GLU", {}), ("Hardshrink", dict(lambd=0.3)), ("Softshrink", {}), ("Hardsigmoid", {}), ("Hardswish", {}),
    ("Hardtanh", dict(min_val=-2.0, max_val=2.0)), ("ReLU6", {}), ("ReLU6", dict(inplace=True)), ("LeakyReLU", {}),
    ("LogSigmoid", {}), ("Mish", {}), ("PReLU", dict(num_parameters=3)), ("RReLU", {}), ("SiLU", {}),
    ("Sigmoid", {}), ("Softmin", dict(dim=1)), ("Softmax2d", {}), ("Softplus", dict(beta=2.0)), ("Softsign", {}),
    ("Tanhshrink", {}), ("Threshold", dict(threshold=0.1, value=20.0)), ("ReLU", {}), ("ReLU", dict(inplace=True)),
    ("GroupNorm", dict(num_groups=2, num_channels=4)), ("RMSNorm", dict(normalized_shape=[3, 4])),
    ("BatchNorm1d", dict(num_features=3, momentum=None)), ("BatchNorm2d", dict(num_features=3, affine=False)),
    ("BatchNorm3d", dict(num_features=2, bias=False)), ("GroupNorm", dict(num_groups=1, num_channels=2, bias=False)),
    ("InstanceNorm3d", dict(num_features=3)), ("LocalResponseNorm", dict(size=3)),
    ("ConstantPad2d", dict(padding=1, value=2.0)), ("ZeroPad1d", dict(padding=(1, 2))),
    ("ReflectionPad3d", dict(padding=1)), ("ReplicationPad2d", dict(padding=(1, 0, 2, 0))),
    ("CircularPad1d", dict(padding=2)), ("Dropout", dict(p=0.2)), ("Dropout1d", {}),
    ("Dropout3d", dict(p=0.1, inplace=True)), ("AlphaDropout", {}), ("FeatureAlphaDropout", dict(p=0.2)),
    ("Bilinear", dict(in1_features=2, in2_features=3, out_features=4)), ("CosineSimilarity", {}),
    ("PairwiseDistance", {}), ("PixelShuffle", dict(upscale_factor=2)), ("PixelUnshuffle", dict(downscale_factor=3)),
    ("ChannelShuffle", dict(groups=2)), ("Upsample", dict(scale_factor=2, mode="bicubic")),
    ("Upsample", dict(size=(3, 4))), ("Upsample", dict(scale_factor=(2, 3))), ("UpsamplingNearest2d", dict(size=3)),
    ("UpsamplingBilinear2d", dict(scale_factor=2)), ("Unflatten", dict(dim=1, unflattened_size=(2, 3))), ("L1Loss", {}),
    ("BCEWithLogitsLoss", {}), ("TripletMarginLoss", {}),
]


@pytest.mark.parametrize("name, kwargs", REPRS, ids=[f"{n}{k}" for n, k in REPRS])
def test_repr_is_torchs(name, kwargs):
    assert repr(getattr(nn, name)(**kwargs)) == repr(getattr(torch.nn, name)(**kwargs))


def test_interpolate_refuses_what_it_does_not_do_as_torch_does():
    import torch.nn.functional as torch_F

    import tinyattn.nn.functional as F

    x = np.ones((1, 1, 4))
    for kwargs, error in [(dict(size=2, scale_factor=2.0), ValueError), (dict(mode="bilinear", size=2),
                                                                          NotImplementedError),
                          (dict(size=2, align_corners=True), ValueError)]:
        with pytest.raises(error):
            torch_F.interpolate(torch.tensor(x), **kwargs)
        with pytest.raises(error):
            F.interpolate(ta.tensor(x), **kwargs)
    with pytest.raises(NotImplementedError, match="'area'"):
        F.interpolate(ta.tensor(x), size=2, mode="area")
    assert F.upsample_bilinear(ta.ones(1, 1, 2, 2), scale_factor=2).shape == (1, 1, 4, 4)


def test_legacy_reduction_arguments_fold_into_reduction():
    assert nn.L1Loss(size_average=False).reduction == torch.nn.L1Loss(size_average=False).reduction == "sum"
    assert nn.BCELoss(reduce=False).reduction == "none"
    assert nn.MultiMarginLoss(size_average=True, reduce=True).reduction == "mean"


@pytest.mark.parametrize("name, shape, kwargs", [
    ("LazyBatchNorm1d", (4, 3), {}), ("LazyBatchNorm1d", (4, 3, 2), dict(momentum=None)),
    ("LazyBatchNorm2d", (2, 5, 3, 3), dict(affine=False)), ("LazyBatchNorm3d", (2, 2, 2, 2, 2), {}),
    ("LazyInstanceNorm1d", (2, 3, 5), dict(affine=True, track_running_stats=True)),
    ("LazyInstanceNorm2d", (2, 3, 4, 4), {}), ("LazyInstanceNorm3d", (1, 2, 3, 2, 2), dict(affine=True)),
])
def test_lazy_norms_take_their_channels_from_the_first_input(name, shape, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    held = list(ours.parameters())  # an optimizer built before the first call
    batch = np.random.default_rng(0).standard_normal(shape)
    out, out_torch = ours(ta.tensor(batch)), theirs(torch.tensor(batch, dtype=torch.float32))
    np.testing.assert_allclose(out.numpy(), out_torch.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert type(ours).__name__ == type(theirs).__name__ == name.replace("Lazy", "")
    assert repr(ours) == repr(theirs)
    assert all(a is b for a, b in zip(held, ours.parameters())) and len(held) == len(list(theirs.parameters()))
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(np.asarray(ours.state_dict()[key]), value.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=key)


def test_a_lazy_instance_norm_counts_an_unbatched_inputs_channels():
    norm = nn.LazyInstanceNorm1d(affine=True)
    assert norm(ta.randn(3, 5)).shape == (3, 5) and norm.weight.shape == (3,)  # (C, L): C = 3


@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_adaptive_log_softmax_matches_torch(data, seed):
    rng = np.random.default_rng(seed)
    in_features, n_classes = data.draw(st.integers(2, 8)), data.draw(st.integers(3, 12))
    cutoffs = sorted(data.draw(st.sets(st.integers(1, n_classes - 1), min_size=1, max_size=3)))
    kwargs = dict(div_value=data.draw(st.sampled_from([1.0, 2.0, 4.0])), head_bias=data.draw(st.booleans()))
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, **kwargs).double()
    ours = nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, **kwargs).to(np.float64)
    with torch.no_grad():
        for param in theirs.parameters():
            param.copy_(torch.from_numpy(rng.uniform(-1.5, 1.5, tuple(param.shape))))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    unbatched = data.draw(st.booleans())
    n = data.draw(st.integers(1, 6))
    batch = rng.standard_normal((in_features,) if unbatched else (n, in_features))
    target = rng.integers(0, n_classes, () if unbatched else (n,))
    x, x_torch = ta.tensor(batch, requires_grad=True), torch.tensor(batch, requires_grad=True)
    result, reference = ours(x, ta.tensor(target)), theirs(x_torch, torch.tensor(target))
    np.testing.assert_allclose(result.output.numpy(), reference.output.detach().numpy(), **TOLERANCE)
    np.testing.assert_allclose(result.loss.item(), reference.loss.item(), **TOLERANCE)
    upstream = np.asarray(rng.standard_normal(result.output.shape))
    ((result.output * ta.tensor(upstream)).sum() + result.loss).backward()
    ((reference.output * torch.tensor(upstream)).sum() + reference.loss).backward()
    np.testing.assert_allclose(backend.to_numpy(x.grad), x_torch.grad.numpy(), **TOLERANCE)
    for (name, param), (_, expected) in zip(ours.named_parameters(), theirs.named_parameters()):
        if expected.grad is None:  # a cluster no target falls in is not computed, in either library
            assert param.grad is None, name
        else:
            np.testing.assert_allclose(backend.to_numpy(param.grad), expected.grad.numpy(), **TOLERANCE, err_msg=name)
    rows = batch.reshape(-1, in_features)  # (torch's log_prob and predict take (N, in_features) alone)
    np.testing.assert_allclose(ours.log_prob(ta.tensor(rows)).numpy(),
                               theirs.log_prob(torch.tensor(rows)).detach().numpy(), **TOLERANCE)
    np.testing.assert_array_equal(ours.predict(ta.tensor(rows)).numpy(), theirs.predict(torch.tensor(rows)).numpy())
