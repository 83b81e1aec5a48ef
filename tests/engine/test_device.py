"""Training on a device: every array stays there, in float32, and every device computes the same.

One small sequence-to-sequence Transformer (embedding, positional encoding, an encoder stack
with a padding mask, a decoder layer with a causal mask and cross-attention, a linear head)
is moved with ``model.to(device)`` and trained with cross entropy, gradient clipping, an
optimizer and a schedule, then checkpointed and restored. After every step each parameter,
gradient and optimizer state array must live on the device, in float32.

The ``strict`` device is NumPy behind a wrapper that refuses, as CuPy does, implicit
conversion to NumPy and mixing with NumPy arrays, so on a machine without a GPU it proves
that no step hands device data to NumPy behind the backend's back; it also computes with
the same NumPy functions as ``cpu``, so the two must agree bit for bit. The ``cuda``
parametrisation runs the same checks on CuPy where a GPU is present, against ``cpu`` within
float32 rounding (summation order differs on the GPU, and CuPy's scatter-add, which the
embedding's backward uses, accumulates with atomics in no fixed order).
"""

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
from tinyattn import backend, optim
from tinyattn.nn.utils import clip_grad_norm_
from tinyattn.testing import gradcheck

PAD, VOCAB, D_MODEL, NHEAD = 0, 11, 16, 2
SRC_LENGTHS = [7, 5, 3]
TGT_LENGTHS = [6, 4, 5]


class Seq2Seq(nn.Module):
    """Source tokens ``(B, S)`` and target tokens ``(B, T)`` -> next-token logits ``(B, T, VOCAB)``."""

    def __init__(self, dropout):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL, padding_idx=PAD)
        self.position = nn.PositionalEncoding(D_MODEL, max_len=16, dropout=dropout)
        layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, dim_feedforward=32, dropout=dropout)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(D_MODEL))
        self.decoder = nn.TransformerDecoderLayer(D_MODEL, NHEAD, dim_feedforward=32, dropout=dropout,
                                                  activation="gelu")
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, src, tgt, src_lengths):
        S, T = src.shape[1], tgt.shape[1]
        src_mask = F.padding_mask(src_lengths, S)  # (B, 1, 1, S), on the lengths' device
        memory = self.encoder(self.position(self.embed(src)), mask=src_mask)  # (B, S, E)
        tgt_mask = F.causal_mask(T, device=tgt.device)  # (T, T)
        x = self.decoder(self.position(self.embed(tgt)), memory, tgt_mask=tgt_mask, memory_mask=src_mask)
        return self.head(x)  # (B, T, VOCAB)


def _batch(device):
    """Padded source and target token batches, built on the host and copied to ``device``."""
    rng = np.random.default_rng(0)
    src = rng.integers(1, VOCAB, (len(SRC_LENGTHS), max(SRC_LENGTHS)))
    tgt = rng.integers(1, VOCAB, (len(TGT_LENGTHS), max(TGT_LENGTHS) + 1))
    for row, length in enumerate(SRC_LENGTHS):
        src[row, length:] = PAD
    for row, length in enumerate(TGT_LENGTHS):
        tgt[row, length + 1:] = PAD
    return (ta.tensor(src, device=device), ta.tensor(tgt[:, :-1], device=device),
            ta.tensor(tgt[:, 1:], device=device), ta.tensor(SRC_LENGTHS, device=device))


def _optimizer(name, params):
    if name == "sgd":
        return optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    if name == "adam":
        return optim.Adam(params, lr=3e-3, weight_decay=1e-4)
    return optim.AdamW(params, lr=3e-3, weight_decay=0.01)


def _schedule(optimizer):
    return optim.lr_scheduler.LambdaLR(optimizer, optim.lr_scheduler.warmup_cosine(2, 8))


def _on_device(array, device, dtype=np.float32):
    return backend.device_of(array) == device and array.dtype == dtype


def _assert_all_on_device(model, optimizer, device):
    """Every parameter, gradient, buffer and optimizer state array: on ``device``, float32."""
    for name, p in model.named_parameters():
        assert _on_device(p.data, device), f"{name}: {type(p.data).__name__} {p.data.dtype}"
        assert p.grad is None or _on_device(p.grad, device), f"{name}.grad: {type(p.grad).__name__} {p.grad.dtype}"
    for name, buffer in model.named_buffers():
        assert _on_device(buffer.data, device), f"buffer {name}: {type(buffer.data).__name__}"
    for state in optimizer.state.values():
        for key, value in state.items():
            if key == "step":
                assert type(value) is int, f"optimizer step is a {type(value).__name__}, expected a host int"
            else:
                assert _on_device(value, device), f"optimizer state {key}: {type(value).__name__} {value.dtype}"


def _train(device, optimizer_name, dropout, steps=3, check=False):
    """Train a freshly seeded model for ``steps`` steps on ``device``: (losses, norms, model, optimizer, schedule)."""
    ta.manual_seed(0)
    model = Seq2Seq(dropout).to(device)  # drawn on the host generator: the same start on every device
    ta.manual_seed(1)  # a fresh generator per device, so cpu and strict draw the same dropout masks
    optimizer = _optimizer(optimizer_name, model.parameters())
    schedule = _schedule(optimizer)
    src, tgt_in, tgt_out, src_lengths = _batch(device)
    losses, norms = [], []
    for _ in range(steps):
        logits = model(src, tgt_in, src_lengths)  # (B, T, VOCAB)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        norms.append(clip_grad_norm_(model.parameters(), max_norm=1.0))
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if check:
            assert _on_device(logits.data, device) and _on_device(loss.data, device)
            assert type(norms[-1]) is float
            _assert_all_on_device(model, optimizer, device)
    return losses, norms, model, optimizer, schedule


@functools.cache
def _cpu_reference(optimizer_name, dropout):
    losses, norms, model, _, _ = _train("cpu", optimizer_name, dropout)
    return losses, norms, model.state_dict()


def _assert_same(ours, reference, device):
    """Bit for bit on cpu and strict (the same NumPy calls); within float32 rounding on cuda."""
    if device == "cuda":
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)
    else:
        assert ours == reference


# ----------------------------------------------------------------------------- the training loop


@pytest.mark.parametrize("optimizer_name", ["sgd", "adam", "adamw"])
def test_training_loop_stays_on_device_in_float32(device, optimizer_name):
    losses, norms, model, optimizer, _ = _train(device, optimizer_name, dropout=0.1, check=True)
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert {id(p) for p in optimizer.state} == {id(p) for p in model.parameters()}  # each got a gradient, a state
    again, _, _, _, _ = _train(device, optimizer_name, dropout=0.1)
    _assert_same(again, losses, device)  # dropout and init reproducible under ta.manual_seed on the device


@pytest.mark.parametrize("optimizer_name", ["sgd", "adam", "adamw"])
def test_training_loop_agrees_with_cpu(device, optimizer_name):
    # dropout draws from each device's own generator: cpu and strict share NumPy's, CuPy has its own
    dropout = 0.0 if device == "cuda" else 0.1
    losses, norms, model, _, _ = _train(device, optimizer_name, dropout)
    reference_losses, reference_norms, reference_state = _cpu_reference(optimizer_name, dropout)
    _assert_same(losses, reference_losses, device)
    _assert_same(norms, reference_norms, device)
    for name, value in model.state_dict().items():
        if device != "cuda":
            np.testing.assert_array_equal(value, reference_state[name], err_msg=name)
        elif not name.endswith("k_proj.bias"):
            # a key bias shifts every score of a query alike, which softmax ignores: its gradient is
            # pure rounding noise, which Adam scales up to steps of about lr, device by device
            np.testing.assert_allclose(value, reference_state[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_checkpoint_round_trip_on_device(device, tmp_path):
    _, _, model, optimizer, schedule = _train(device, "adamw", dropout=0.1, steps=2)
    state = model.state_dict()
    assert all(type(v) is np.ndarray and v.dtype == np.float32 for v in state.values())  # host copies
    ta.save(state, tmp_path / "model.ckpt")
    loaded = ta.load(tmp_path / "model.ckpt")

    ta.manual_seed(7)  # another start, so that loading visibly changes the weights
    restored = Seq2Seq(dropout=0.1).to(device)
    restored.load_state_dict(loaded)
    restored_optimizer = _optimizer("adamw", restored.parameters())
    restored_schedule = _schedule(restored_optimizer)  # built before loading, as with PyTorch's schedulers
    restored_optimizer.load_state_dict(optimizer.state_dict())
    restored_schedule.load_state_dict(schedule.state_dict())
    _assert_all_on_device(restored, restored_optimizer, device)
    for (name, p), q in zip(model.named_parameters(), restored.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=name)

    src, tgt_in, tgt_out, src_lengths = _batch(device)
    steps = []
    for net, opt in ((model, optimizer), (restored, restored_optimizer)):
        net.eval()  # no dropout: both continue from the same state along the same path
        loss = F.cross_entropy(net(src, tgt_in, src_lengths).transpose(1, 2), tgt_out, ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        _assert_all_on_device(net, opt, device)
        steps.append((loss.item(), [p.numpy() for p in net.parameters()]))
    _assert_same(steps[1][0], steps[0][0], device)
    for ours, theirs in zip(steps[1][1], steps[0][1]):
        if device == "cuda":
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(ours, theirs)


# ----------------------------------------------------------------------------- randomness


def test_init_and_dropout_reproducible_under_manual_seed(device):
    draws = []
    for seed in (3, 3, 4):
        ta.manual_seed(seed)
        layer = nn.Linear(8, 8, device=device)
        mask = F.dropout(ta.ones(4000, device=device), p=0.25)
        noise = ta.randn(5, device=device)
        for array in (layer.weight.data, mask.data, noise.data):
            assert _on_device(array, device)
        draws.append([layer.weight.numpy(), mask.numpy(), noise.numpy()])
    for first, second, other in zip(*draws):
        np.testing.assert_array_equal(first, second)
        assert not np.array_equal(first, other)
    mask = draws[0][1]
    assert set(np.unique(mask)) == {0.0, np.float32(1 / 0.75)}  # inverted dropout: kept values scaled
    assert 0.7 < np.mean(mask != 0) < 0.8


def test_strict_draws_what_cpu_draws():
    """Both use NumPy's generator from the same seed, so a model starts and drops out alike."""
    results = []
    for device in ("cpu", "strict"):
        ta.manual_seed(5)
        layer = nn.Linear(4, 3, device=device)
        results.append((layer.weight.numpy(), F.dropout(ta.ones(50, device=device), 0.5).numpy()))
    for cpu, strict in zip(*results):
        np.testing.assert_array_equal(cpu, strict)


# ----------------------------------------------------------------------------- moving data


def test_tensor_creation_and_moves(device):
    t = ta.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    assert t.device == device and _on_device(t.data, device)
    assert ta.tensor(np.array([1.5]), device=device).dtype == np.float64  # an array keeps its dtype
    assert ta.tensor([[1, 2]], device=device).dtype == np.int64

    host = t.to("cpu")
    assert host.device == "cpu" and type(host.data) is np.ndarray and host.dtype == np.float32
    back = host.to(device)
    assert back.device == device and _on_device(back.data, device)
    assert t.to(device) is t

    copy = t.numpy()
    assert type(copy) is np.ndarray and copy.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    copy[0, 0] = 99.0  # a copy: the device data is untouched
    assert t.numpy()[0, 0] == 1.0


def test_moves_are_differentiable(device):
    x = ta.tensor([1.0, -2.0, 3.0], requires_grad=True, device=device)
    y = (x.to("cpu") * ta.tensor([2.0, 3.0, 4.0])).sum()  # computed on the host
    y.backward()
    assert _on_device(x.grad, device)  # the gradient came back to x's device
    np.testing.assert_array_equal(backend.to_numpy(x.grad), [2.0, 3.0, 4.0])


def test_module_to_moves_parameters_buffers_and_gradients(device):
    model = Seq2Seq(dropout=0.0)
    for p in model.parameters():
        p.grad = np.ones(p.shape, dtype=np.float32)
    params = list(model.parameters())
    assert model.to(device) is model
    assert all(p is q for p, q in zip(model.parameters(), params))  # the same Parameter objects, moved in place
    for name, p in model.named_parameters():
        assert _on_device(p.data, device) and _on_device(p.grad, device), name
    assert _on_device(model.position.pe.data, device)
    model.to("cpu")
    assert all(type(p.data) is np.ndarray and type(p.grad) is np.ndarray for p in model.parameters())


def test_mixing_devices_raises_an_error_naming_both(device):
    other = "strict" if device == "cpu" else "cpu"
    here, there = ta.ones(3, device=device), ta.ones(3, device=other)
    for combine in (lambda: here + there, lambda: there * here, lambda: ta.cat([here, there])):
        with pytest.raises(RuntimeError) as error:
            combine()
        assert repr(device) in str(error.value) and repr(other) in str(error.value)

    model = Seq2Seq(dropout=0.0).to(device)
    src, tgt_in, _, src_lengths = _batch(other)
    with pytest.raises((RuntimeError, ValueError)) as error:  # the indices, on the other device
        model(src, tgt_in, src_lengths)
    assert repr(device) in str(error.value) and repr(other) in str(error.value)

    src, tgt_in, _, _ = _batch(device)
    with pytest.raises(ValueError) as error:  # the lengths, hence the padding mask, on the other device
        model(src, tgt_in, ta.tensor(SRC_LENGTHS, device=other))
    assert repr(device) in str(error.value) and repr(other) in str(error.value)


def test_cuda_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # ``import cupy`` now raises ImportError, GPU or not
    for make in (lambda: ta.zeros(2, device="cuda"), lambda: ta.tensor([1.0], device="cuda"),
                 lambda: nn.Linear(2, 2).to("cuda"), lambda: ta.ones(2).to("cuda")):
        with pytest.raises(RuntimeError, match=r"CuPy.*pip install 'tinyattn\[cuda\]'.*cupy-cuda12x"):
            make()


@pytest.mark.cuda
def test_a_cupy_array_is_accepted_before_tinyattn_has_used_the_gpu():
    """``ta.tensor(cupy_array)`` as the first contact with CuPy, in a fresh process."""
    code = (
        "import cupy, tinyattn as ta\n"
        "t = ta.tensor(cupy.arange(3, dtype=cupy.float32))\n"
        "assert t.device == 'cuda' and type(t.data) is cupy.ndarray, (t.device, type(t.data))\n"
        "assert ta.backend.namespace(cupy.ones(2)) is cupy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_numpy_scalar_hyperparameters_keep_float32(device, route):
    """NumPy 2 keeps a NumPy scalar's dtype in arithmetic: a float64 hyperparameter must not promote."""
    ta.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8, eps=np.float64(1e-5)), nn.Dropout(np.float64(0.25)))
    model = route(model.to(device))
    optimizer = optim.AdamW(model.parameters(), lr=np.float64(1e-3), weight_decay=np.float64(0.01))
    output = model(ta.ones(4, 8, device=device))
    assert _on_device(output.data, device)
    (output * output).mean().backward()
    clip_grad_norm_(model.parameters(), max_norm=np.float64(1e-3))
    optimizer.step()
    _assert_all_on_device(model, optimizer, device)


# ----------------------------------------------------------------------------- gradients on the device


def test_gradcheck_of_a_decoder_layer_on_device(device):
    """Finite differences in float64 through masked self- and cross-attention, GELU (erf) and LayerNorm."""
    ta.manual_seed(0)
    layer = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0, activation="gelu")
    layer.double().to(device).eval()
    rng = np.random.default_rng(0)
    tgt = ta.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True, device=device)
    memory = ta.tensor(rng.standard_normal((2, 4, 4)), requires_grad=True, device=device)
    memory_mask = F.padding_mask(ta.tensor([4, 2], device=device), 4)
    weight = layer.cross_attn.k_proj.weight  # a parameter too: gradcheck perturbs it in place

    def fn(tgt, memory, weight):
        return layer(tgt, memory, memory_mask=memory_mask, tgt_is_causal=True)

    assert gradcheck(fn, [tgt, memory, weight])
    assert _on_device(weight.data, device, np.float64) and weight.grad is None


def test_gradcheck_of_cross_entropy_and_embedding_on_device(device):
    table = ta.tensor(np.random.default_rng(1).standard_normal((5, 3)), requires_grad=True, device=device)
    tokens = ta.tensor([[1, 0, 4], [2, 2, 3]], device=device)
    target = ta.tensor([[2, 0, 2], [1, 1, 0]], device=device)

    def fn(table):
        logits = F.embedding(tokens, table, padding_idx=0)  # (2, 3, C=3): each row's vector as logits
        return F.cross_entropy(logits.transpose(1, 2), target, ignore_index=0, label_smoothing=0.2)

    assert gradcheck(fn, [table])


# ----------------------------------------------------------------------------- helpers at the API edge


def test_clip_grad_norm_reduces_on_each_device(device):
    """One norm over gradients on two devices: each device reduces its own, the host combines them."""
    other = "strict" if device == "cpu" else "cpu"
    grads = {device: np.array([3.0, 0.0], dtype=np.float32), other: np.array([[4.0], [12.0]], dtype=np.float32)}
    params = []
    for where, grad in grads.items():
        p = ta.zeros(*grad.shape, requires_grad=True, device=where)
        p.grad = backend.to_device(grad.copy(), where)
        params.append(p)
    total = clip_grad_norm_(params, max_norm=6.5)
    assert type(total) is float and abs(total - 13.0) < 1e-5
    for p, where in zip(params, grads):
        assert _on_device(p.grad, where)
        np.testing.assert_allclose(backend.to_numpy(p.grad), grads[where] / 2, rtol=1e-5)


def test_interop_takes_device_tensors(device):
    """``to_torch`` / ``from_torch`` copy device data to the host explicitly, never implicitly."""
    layer = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6).to(device)
    on_device = dict(layer.named_parameters())  # tensors on the device
    expected = ta.interop.to_torch(layer.state_dict())  # NumPy arrays
    converted = ta.interop.to_torch(on_device)
    assert list(converted) == list(expected)
    for name, value in converted.items():
        assert type(value) is np.ndarray
        np.testing.assert_array_equal(value, expected[name], err_msg=name)
    raw = {name: p.data for name, p in on_device.items()}  # backend arrays
    back = ta.interop.from_torch(ta.interop.to_torch(raw))
    assert all(type(v) is np.ndarray for v in back.values()) and list(back) == list(layer.state_dict())


@pytest.mark.parametrize("script, arguments, status, message", [
    ("gpu_check.py", [], 3, "no GPU: nothing to check (CuPy is not installed"),
    ("run.py", ["--device", "cuda", "--cases", "encoder"], 1, "--device cuda: CuPy cannot reach a GPU"),
])
def test_gpu_scripts_stop_clearly_without_cupy(script, arguments, status, message):
    """The GPU check and the CUDA benchmark, run where CuPy is missing (simulated, so also on a GPU machine)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / script
    code = (
        "import runpy, sys\n"
        "sys.modules['cupy'] = None\n"  # ``import cupy`` raises ImportError
        f"sys.argv = [{str(path)!r}] + {arguments!r}\n"
        f"runpy.run_path({str(path)!r}, run_name='__main__')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == status, result.stdout + result.stderr
    assert message in result.stderr and "pip install 'tinyattn[cuda]'" in result.stderr
