"""Edges of ``nn.functional`` that torch's OpInfo samples do not reach: float16 where an intermediate overflows, the
errors torch gives, and the arguments a model passes by keyword (``weight``, class-probability targets)."""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F

TF = torch.nn.functional


def test_float16_layer_norm_survives_a_variance_beyond_float16():
    x = np.array([[0.0, 300.0, 600.0, -200.0]], dtype=np.float16)  # (x - μ)² passes float16's 65504
    ours = ta.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    upstream = np.array([[1.0, -2.0, 0.5, 3.0]], dtype=np.float16)
    out, expected = F.layer_norm(ours, (4,)), TF.layer_norm(theirs, (4,))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected.detach().numpy(), atol=1e-2, rtol=1e-2)
    out.backward(ta.tensor(upstream))
    expected.backward(torch.tensor(upstream))
    np.testing.assert_allclose(ours.grad.astype(np.float64), theirs.grad.numpy(), atol=1e-3, rtol=1e-2)
    assert np.abs(ours.grad).max() > 0
    layer = nn.LayerNorm(4).to(np.float16)
    assert np.abs(layer(ta.tensor(x)).numpy()).max() > 1


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float16_gelu_stays_float16(approximate):
    assert F.gelu(ta.tensor(np.array([1.0, -2.0], dtype=np.float16)), approximate).dtype == np.float16


def test_one_hot_rejects_what_torch_rejects():
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(ta.tensor([0, 3]), num_classes=3)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(ta.tensor([0, -1]), num_classes=3)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(ta.tensor(np.zeros(0, dtype=np.int64)))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(1, 2), (-1, 2), (2, -1, -1, 1), (0, 0, 1, -2)])
def test_pad_matches_torch_with_negative_amounts(mode, pad):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    x = x if len(pad) == 4 else x[0]  # (torch pads one dimension of a 3-d input in these modes, two of a 4-d one)
    if mode == "reflect" and max(pad) >= 4:
        pytest.skip("reflect pads less than the dimension")
    ours = F.pad(ta.tensor(x, requires_grad=True), pad, mode=mode)
    theirs = TF.pad(torch.tensor(x), pad, mode=mode)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_probabilities_and_weights_matches_torch(reduction, label_smoothing):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 4, 2))
    probabilities = rng.dirichlet(np.ones(4), size=(3, 2)).transpose(0, 2, 1)  # (N, C, d)
    indices = np.array([[0, 3], [2, -100], [1, 1]])
    weight = rng.uniform(0.5, 2.0, 4)
    for target in (probabilities, indices):
        ours = F.cross_entropy(ta.tensor(logits), ta.tensor(target), weight=ta.tensor(weight), reduction=reduction,
                               label_smoothing=label_smoothing)
        theirs = TF.cross_entropy(torch.tensor(logits), torch.tensor(target), weight=torch.tensor(weight),
                                  reduction=reduction, label_smoothing=label_smoothing)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_weight_and_spatial_dimensions_matches_torch(reduction):
    rng = np.random.default_rng(1)
    log_p = rng.standard_normal((2, 3, 2, 2))
    target = np.array([[[0, 2], [1, 1]], [[2, -100], [0, 1]]])
    weight = rng.uniform(0.5, 2.0, 3)
    ours = F.nll_loss(ta.tensor(log_p), ta.tensor(target), weight=ta.tensor(weight), reduction=reduction)
    theirs = TF.nll_loss(torch.tensor(log_p), torch.tensor(target), weight=torch.tensor(weight), reduction=reduction)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_stable_losses_stay_finite_at_large_logits():
    logits = ta.tensor([-1000.0, 1000.0], requires_grad=True)
    target = ta.tensor([1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(logits, target, pos_weight=ta.tensor([2.0, 2.0]))
    assert np.isfinite(loss.item()) and loss.item() == pytest.approx(1000.0 * 2 / 2 + 1000.0 / 2)
    loss.backward()
    assert np.all(np.isfinite(logits.grad))
    assert np.all(np.isfinite(F.logsigmoid(ta.tensor([-1000.0, 1000.0])).numpy()))
    assert F.softplus(ta.tensor([1000.0])).item() == 1000.0


def test_batch_norm_moves_the_running_statistics_as_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5))
    ours_mean, ours_var = ta.tensor(np.zeros(3)), ta.tensor(np.ones(3))
    theirs_mean, theirs_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ours = F.batch_norm(ta.tensor(x), ours_mean, ours_var, training=True, momentum=0.3)
    theirs = TF.batch_norm(torch.tensor(x), theirs_mean, theirs_var, training=True, momentum=0.3)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours_mean.numpy(), theirs_mean.numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours_var.numpy(), theirs_var.numpy(), rtol=1e-10)
