"""The higher-order scripts: examples/higher_order.py runs end to end in --quick mode, its model compiled, and says
what it should; benchmarks/higher_order.py's check finds tinyattn's gradient-penalty step
equal to PyTorch's; benchmarks/checkpoint_memory.py finds the same gradients with and without checkpointing."""

import re
from pathlib import Path

import pytest
from test_examples import assert_pngs, final_metric, run_example

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_higher_order_example(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    stdout = run_example("higher_order.py", tmp_path)
    errors = [float(e) for e in re.findall(r"order \d: max \|autograd - closed form\| = (\S+)", stdout)]
    assert len(errors) == 5 and max(errors) < 1e-12  # float64 on the grid, orders 0 to 4
    assert re.search(r"converged in \d Newton steps", stdout)  # quadratic convergence: a handful of steps
    assert float(re.search(r"against the closed-form Hessian: max error (\S+)", stdout).group(1)) < 1e-12
    penalties = [float(p) for p in re.findall(r"penalty (\S+e[-+]\d+)", stdout)]
    assert penalties and all(p > 0 for p in penalties)
    assert final_metric(stdout, "accuracy") > 0.6  # chance is about 0.4 (the most frequent of 3 tokens)
    assert_pngs(tmp_path, ["tanh_derivatives.png", "penalty_loss.png"])


@pytest.fixture
def benchmarks_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))


def test_gradient_penalty_step_equals_pytorch(benchmarks_on_path):
    pytest.importorskip("torch")
    import higher_order

    worst, share = higher_order.check_against_torch()  # asserts every gradient equal, in float64
    assert worst < 1e-9 and share > 0.1  # and the penalty's part of a weight's gradient is not negligible


def test_checkpointed_stack_has_the_plain_gradients(benchmarks_on_path, capsys):
    import checkpoint_memory

    checkpoint_memory.main(["--layers", "2", "--d-model", "16", "--nhead", "2", "--batch", "2", "--length", "8"])
    assert "gradients equal both ways" in capsys.readouterr().out
