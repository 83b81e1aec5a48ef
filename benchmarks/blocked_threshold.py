"""Where the blocked attention path starts to pay: multi-head self-attention, forward and backward,
through the whole score matrix and a block of keys at a time, by the number of keys.

    python benchmarks/blocked_threshold.py
    python benchmarks/blocked_threshold.py --repeat 10

Each row is ``ta.compile(nn.MultiHeadAttention(E, H))`` (no dropout, ``need_weights=False``) on ``(B, L, E)``
float32 with a random upstream gradient, run with ``blocked_attention_min_keys`` just above ``L``
(whole matrix) and at ``L`` (blocked), alternating, median of ``--repeat`` steps each: the two
routes a user's self-attention takes, each as a whole (the whole matrix goes with the packed
projections, ``InProjection`` + ``PackedSelfAttention``; the blocked path with the three projections
and ``BlockedAttention``). The ratio is whole ÷ blocked: below 1 the whole-matrix route is faster.
(Plain scaled dot-product attention at 512 keys is the ``sdpa`` large row of ``benchmarks/run.py``.) The
``fast.tuning`` value ``blocked_attention_min_keys`` is the first number of keys from which it is at or
above 1. The batch shrinks as ``L`` grows, so that every row holds about the same number of tokens.
"""

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")  # as benchmarks/run.py: NumPy's OpenBLAS threads busy-wait

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tinyattn as ta  # noqa: E402
import tinyattn.nn as nn  # noqa: E402
from tinyattn.fast import tuning

SHAPES = [(8, 256, 512, 8), (4, 512, 512, 8), (8, 512, 256, 8), (3, 576, 512, 8), (2, 640, 512, 8),
          (2, 768, 512, 8), (2, 1024, 512, 8), (1, 2048, 512, 8)]  # (B, L, E, H)


def step_of(B, L, E, H):
    module = ta.compile(nn.MultiHeadAttention(E, H, dropout=0.0))  # its fused form, whose routes are timed
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((B, L, E), dtype=np.float32), requires_grad=True)
    upstream = ta.tensor(rng.standard_normal((B, L, E), dtype=np.float32))

    def step():
        out, _ = module(x, x, x, need_weights=False)
        out.backward(upstream)

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=6)
    args = parser.parse_args()
    print(f"blocked_attention_min_keys = {tuning.values.blocked_attention_min_keys}")
    print(f"{'B':>3}{'L':>6}{'E':>5}{'H':>4}{'whole ms':>11}{'blocked ms':>12}{'whole/blocked':>15}")
    for B, L, E, H in SHAPES:
        step, times = step_of(B, L, E, H), {"whole": [], "blocked": []}
        for _ in range(args.repeat):
            for path, threshold in (("whole", L + 1), ("blocked", L)):
                with tuning.tuned(blocked_attention_min_keys=threshold):
                    step()  # the route's first call (and its memory) outside the timing
                    start = time.perf_counter()
                    step()
                    times[path].append(time.perf_counter() - start)
        whole, blocked = (statistics.median(times[path]) * 1e3 for path in ("whole", "blocked"))
        print(f"{B:>3}{L:>6}{E:>5}{H:>4}{whole:>11.1f}{blocked:>12.1f}{whole / blocked:>15.2f}", flush=True)


if __name__ == "__main__":
    main()
