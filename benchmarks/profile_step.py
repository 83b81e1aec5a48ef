"""Where the time of one encoder-layer step goes: cProfile's top entries.

    python benchmarks/profile_step.py                  # small size, 2,000 steps, top 15 by own time
    python benchmarks/profile_step.py --size medium --steps 20 --top 25

The step is the benchmark's: forward and backward of a pre-norm ``TransformerEncoderLayer``
(``dim_feedforward = 4·d``, no dropout), compiled (``ta.compile``) as ``run.py`` runs it, with a random
upstream gradient, gradients zeroed first.
cProfile charges each Python function with its own time ("tottime"); NumPy's operators (``@``,
``+``) are charged to the function that calls them, so a fused operation's line shows its
arithmetic and an engine function's line shows the engine's own bookkeeping.
"""

import argparse
import cProfile
import os
import pstats
import sys

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")  # before NumPy loads: see run.py

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import SIZES  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--steps", type=int, default=None, help="profiled steps (default: by size)")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    import tinyattn as ta
    import tinyattn.nn as nn

    B, L, d, H = SIZES[args.size]
    steps = args.steps or {"small": 2000, "medium": 20, "large": 3}[args.size]
    ta.manual_seed(0)
    layer = ta.compile(nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, norm_first=True))  # the fused forms
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((B, L, d), dtype=np.float32), requires_grad=True)
    upstream = ta.tensor(rng.standard_normal((B, L, d), dtype=np.float32))

    def step():
        layer.zero_grad()
        x.grad = None
        layer(x).backward(upstream)

    for _ in range(max(3, steps // 10)):  # warm-up
        step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        step()
    profiler.disable()
    print(f"encoder layer, {args.size} {SIZES[args.size]}, forward + backward, {steps} steps "
          f"(times in seconds, summed over the steps; cProfile slows Python calls, not NumPy's)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
