"""``python -m tinyattn.compat script.py``: an unmodified PyTorch script, its torch imports mapped to compat.

The same script runs under the real torch (``python script.py``) and under the runner; with its weights and data
set by the script itself, both print the same losses.
"""

import subprocess
import sys
import textwrap

import pytest

from tinyattn.compat.runner import run

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch import optim
    from torch.utils.data import DataLoader, TensorDataset

    def main(steps):
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))
        x = torch.linspace(-1, 1, 48).reshape(16, 3)
        y = (x ** 2).sum(dim=1, keepdim=True)
        optimizer = optim.Adam(model.parameters(), lr=0.05)
        for step in range(steps):
            for xb, yb in DataLoader(TensorDataset(x, y), batch_size=8):
                loss = F.mse_loss(model(xb), yb)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            print(f"step {step} loss {loss.item():.6f}")
        print("torch is", torch.__name__)

    if __name__ == "__main__":
        main(int(sys.argv[1]))
""")


def test_an_unmodified_script_runs_on_compat_and_prints_torchs_numbers(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    ours = subprocess.run([sys.executable, "-m", "tinyattn.compat", str(script), "5"], capture_output=True,
                          text=True, check=True, timeout=120).stdout.splitlines()
    theirs = subprocess.run([sys.executable, str(script), "5"], capture_output=True, text=True, check=True,
                            timeout=120).stdout.splitlines()
    assert ours[-1] == "torch is tinyattn.compat" and theirs[-1] == "torch is torch"
    assert len(ours) == len(theirs) == 6
    for mine, real in zip(ours[:-1], theirs[:-1]):
        assert abs(float(mine.split()[-1]) - float(real.split()[-1])) < 1e-5, (mine, real)


def test_a_torch_module_compat_lacks_is_named(tmp_path):
    script = tmp_path / "fft.py"
    script.write_text("import torch.fft\n")
    result = subprocess.run([sys.executable, "-m", "tinyattn.compat", str(script)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "`torch.fft` is not provided by tinyattn.compat" in result.stderr


def test_the_runner_refuses_a_process_that_already_holds_the_real_torch(tmp_path):
    import torch  # noqa: F401  (the test suite's own torch)

    script = tmp_path / "noop.py"
    script.write_text("")
    with pytest.raises(RuntimeError, match="the real torch is already imported"):
        run(str(script))


def test_usage_without_a_script():
    result = subprocess.run([sys.executable, "-m", "tinyattn.compat"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "usage: python -m tinyattn.compat script.py" in result.stdout
