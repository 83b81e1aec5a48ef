"""The function-transform scripts: examples/transforms.py runs end to end in --quick mode and says what it should;
benchmarks/transforms.py's checks find tinyattn's jvp and per-example gradients equal to torch.func's."""

import re
from pathlib import Path

import pytest
from test_examples import assert_pngs, final_metric, run_example

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_transforms_example(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    stdout = run_example("transforms.py", tmp_path)
    assert float(re.search(r"test accuracy (\S+)", stdout).group(1)) > 0.6  # chance is about 0.4
    per_example = float(re.search(r"max \|vmap - loop of single-example grads\| = (\S+)", stdout).group(1))
    assert per_example < 1e-5  # float32: the same sums, in another order
    jacobians = float(re.search(r"max \|jacrev - jacfwd\| = (\S+)", stdout).group(1))
    assert jacobians < 1e-5
    assert float(re.search(r"correlation of the off-diagonal norms with the attention weights (\S+)",
                           stdout).group(1)) > 0.3  # off the diagonal, the Jacobian follows the attention
    assert final_metric(stdout, "relative hvp error") < 1e-6  # float64, central differences with ε = 1e-5
    assert_pngs(tmp_path, ["per_example_grad_norms.png", "jacobian_vs_attention.png"])


@pytest.fixture
def benchmarks_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))


def test_transform_benchmark_checks_equal_torch_func(benchmarks_on_path):
    pytest.importorskip("torch")
    import transforms

    jvp_error, per_example_error = transforms.check_against_torch()  # asserts both equal, in float64
    assert jvp_error < 1e-9 and per_example_error < 1e-9
