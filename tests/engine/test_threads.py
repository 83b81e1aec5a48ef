"""Modes belong to the thread that set them (``tinyattn.modes``), as PyTorch's grad mode and its transforms' state do.

Each scenario runs in a fresh process (this file run as a script, with the scenario's name), bounded in time, so
that a mode left switched on, or a deadlock, cannot leak into the rest of the suite:

- two threads in overlapping ``no_grad`` blocks: each sees its own mode, and both end with gradients on;
- training beside a ``no_grad`` inference loop: every step succeeds, every parameter gets its gradient, and the
  final weights equal a run of the same steps with no other thread;
- ``vmap(grad(f))`` from two threads at once: no error, each call's answer that of one thread alone, and random
  draws work afterwards (no thread is left in ``vmap(randomness="error")``);
- gradient penalties (``create_graph=True``, second order) beside plain steps: no parameter ever lacks its gradient;
- forward-mode levels and anomaly mode opened in one thread are not seen by another.
"""

import subprocess
import sys
import threading

import numpy as np
import pytest

SCENARIO_SECONDS = 120


def run_scenario(name):
    done = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True, timeout=SCENARIO_SECONDS)
    assert done.returncode == 0, f"scenario {name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def in_threads(*targets):
    """Run the targets in threads, started together, switching between them every few microseconds (so that one
    thread's mode is open while the other's operations run); re-raise the first error any of them met."""
    sys.setswitchinterval(1e-5)
    errors = []

    def guarded(target):
        try:
            target()
        except BaseException as error:  # noqa: BLE001 (reported to the main thread)
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# ----------------------------------------------------------------------------- the scenarios (run as a script)


def overlapping_no_grad():
    import tinyattn as ta

    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with ta.no_grad():
            first_in.set()
            second_in.wait()
            seen["first inside"] = ta.is_grad_enabled()
        first_out.set()
        seen["first after"] = ta.is_grad_enabled()

    def second():
        first_in.wait()
        w = ta.ones(2, requires_grad=True)
        seen["second before"] = (w * 2).requires_grad  # the other thread's no_grad is not this thread's
        with ta.no_grad():
            second_in.set()
            first_out.wait()  # the first block closes while this one is open
            seen["second inside"] = ta.is_grad_enabled()
        seen["second after"] = ta.is_grad_enabled()

    in_threads(first, second)
    assert seen == {"first inside": False, "second before": True, "second inside": False, "first after": True,
                    "second after": True}, seen
    assert ta.is_grad_enabled()


def _model_and_batches(seed=0):
    import tinyattn as ta
    import tinyattn.nn as nn

    ta.manual_seed(seed)
    model = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)  # (batch-first, as every native layer)
    rng = np.random.default_rng(seed)
    batches = [(ta.tensor(rng.standard_normal((4, 5, 16), dtype=np.float32)),
                ta.tensor(rng.standard_normal((4, 5, 16), dtype=np.float32))) for _ in range(40)]
    return model, batches


def _train(model, batches, on_step=None):
    import tinyattn as ta

    optimizer = ta.optim.SGD(model.parameters(), lr=0.01)
    for x, target in batches:
        optimizer.zero_grad()
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()
        if on_step is not None:
            on_step(model)
        optimizer.step()


def training_beside_inference():
    import tinyattn as ta

    alone, batches = _model_and_batches()
    _train(alone, batches)

    model, batches = _model_and_batches()
    stop = threading.Event()
    missing = []

    def check(m):  # every parameter has its gradient at every step
        missing.extend(name for name, p in m.named_parameters() if p.grad is None)

    def train():
        try:
            _train(model, batches, check)
        finally:
            stop.set()

    def serve():
        x = ta.tensor(np.ones((2, 5, 16), dtype=np.float32))
        while not stop.is_set():
            with ta.no_grad():
                y = model(x)
            assert not y.requires_grad
            model(x)  # and outside the block, this thread records as usual

    in_threads(train, serve)
    assert not missing, f"parameters without a gradient: {sorted(set(missing))}"
    for (name, a), (_, b) in zip(alone.named_parameters(), model.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def vmap_grad_in_two_threads():
    import tinyattn as ta
    from tinyattn.func import grad, vmap

    def f(x, scale):
        return (ta.sin(x) * x * scale).sum()

    rng = np.random.default_rng(0)
    xs = [ta.tensor(rng.standard_normal((6, 3))) for _ in range(2)]
    scales = [2.0, -3.0]
    expected = [vmap(grad(lambda x, s=s: f(x, s)))(x).numpy() for x, s in zip(xs, scales)]

    def worker(k):
        def run():
            for _ in range(40):
                got = vmap(grad(lambda x: f(x, scales[k])))(xs[k]).numpy()
                np.testing.assert_allclose(got, expected[k], rtol=0, atol=1e-12)
        return run

    in_threads(worker(0), worker(1))
    ta.randn(3)  # random draws work afterwards: no vmap mode left behind
    ta.nn.functional.dropout(ta.ones(4), 0.5, training=True)


def penalties_beside_plain_steps():
    import tinyattn as ta
    import tinyattn.nn as nn

    ta.manual_seed(0)
    plain_model, penalty_model = nn.Linear(8, 8), nn.Linear(8, 8)
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((16, 8), dtype=np.float32))
    missing = []

    def plain():
        for _ in range(300):
            plain_model.zero_grad()
            (plain_model(x) ** 2).sum().backward()
            missing.extend(name for name, p in plain_model.named_parameters() if p.grad is None)

    def penalty():
        for _ in range(100):
            penalty_model.zero_grad()
            inputs = x.detach().requires_grad_(True)
            out = (penalty_model(inputs).tanh() ** 2).sum()
            (g,) = ta.autograd.grad(out, inputs, create_graph=True)
            (out + (g ** 2).sum()).backward()
            missing.extend(name for name, p in penalty_model.named_parameters() if p.grad is None)

    in_threads(plain, penalty)
    assert not missing, f"parameters without a gradient: {sorted(set(missing))}"


def forward_mode_and_anomaly_stay_in_their_thread():
    import tinyattn as ta
    import tinyattn.autograd.forward_ad as fwAD

    opened, checked = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with fwAD.dual_level(), ta.autograd.detect_anomaly():
            x = fwAD.make_dual(ta.tensor([3.0]), ta.tensor([1.0]))
            opened.set()
            checked.wait()
            seen["tangent here"] = fwAD.unpack_dual(x * x).tangent.tolist()

    def other():
        opened.wait()
        seen["anomaly there"] = ta.autograd.is_anomaly_enabled()
        try:
            fwAD.make_dual(ta.tensor([1.0]), ta.tensor([1.0]))
            seen["level there"] = True
        except RuntimeError:
            seen["level there"] = False
        checked.set()

    in_threads(holder, other)
    assert seen == {"tangent here": [6.0], "anomaly there": False, "level there": False}, seen


SCENARIOS = {f.__name__: f for f in (overlapping_no_grad, training_beside_inference, vmap_grad_in_two_threads,
                                     penalties_beside_plain_steps, forward_mode_and_anomaly_stay_in_their_thread)}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_thread_keeps_its_own_modes(name):
    run_scenario(name)


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
