"""Peak memory of one training step through a 6-layer Transformer encoder, plain and with each layer checkpointed.

    python benchmarks/checkpoint_memory.py                       # d_model 256, batch 16, length 256, dropout 0.1
    python benchmarks/checkpoint_memory.py --batch 4 --length 64 # a quick look

The stack is built by hand, a list of ``nn.TransformerEncoderLayer(d, H, 4·d, dropout)`` in training mode, each
compiled (``ta.compile``: the fused forms of its parts; ``--reference`` leaves them uncompiled), and run two ways on
the same input and the same weights:

    plain          x = layer(x) for each layer                           every layer's activations are kept
    checkpointed   x = ta.utils.checkpoint(layer, x) for each layer      only each layer's input is kept; its
                                                                         inside is recomputed during backward

then ``loss = Σ x · upstream`` (a fixed random ``upstream``) and ``loss.backward()``. Both start from the same
random state, and ``checkpoint`` replays the state for its recomputation, so the dropout masks agree; the script
asserts that every weight's gradient and the input's are the same both ways.

Memory is measured with ``tracemalloc``, to which NumPy reports every array it allocates: "held after forward"
is what the graph keeps once the forward pass is done (beyond the model, its input and the previous variant's
kept gradients), "peak" the highest point during forward and backward together, both above the memory in use
before the step. Each step starts with the fast layer's kept blocks let go (``tinyattn.fast.buffers.clear()``):
arrays made in blocks kept from an earlier step would be no new allocation, and ``tracemalloc`` would not see them.
The time column is one step's wall time with tracing on (tracing slows it; a ratio only).
"""

import argparse
import time
import tracemalloc

import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.fast import buffers

MIB = 2**20


def step(layers, x, upstream, checkpointed, seed):
    """One forward and backward through ``layers``; returns the bytes held after forward, the peak and the time."""
    for layer in layers:
        layer.zero_grad()
    x.grad = None
    ta.manual_seed(seed)  # the same dropout masks in both variants
    buffers.clear()  # (blocks still in use live on with their arrays, counted in `before`)
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    h = x  # (B, L, d) all the way
    for layer in layers:
        h = ta.utils.checkpoint(layer, h) if checkpointed else layer(h)
    loss = (h * upstream).sum()
    held = tracemalloc.get_traced_memory()[0] - before
    loss.backward()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] - before
    return held, peak, seconds


def gradients(layers, x):
    """Every weight's gradient and the input's, by name (``None`` where backward left none)."""
    grads = {f"layers.{i}.{name}": p.grad for i, layer in enumerate(layers) for name, p in layer.named_parameters()}
    grads["input"] = x.grad
    return {name: None if g is None else g.copy() for name, g in grads.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--nhead", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--reference", action="store_true",
                        help="the layers not compiled: their reference definitions")
    args = parser.parse_args(argv)
    B, L, d, H = args.batch, args.length, args.d_model, args.nhead
    ta.manual_seed(0)
    layers = [nn.TransformerEncoderLayer(d, H, 4 * d, dropout=args.dropout).train() for _ in range(args.layers)]
    if not args.reference:
        layers = [ta.compile(layer) for layer in layers]  # the fused forms of their parts: see ta.explain
    rng = np.random.default_rng(0)
    x = ta.tensor(rng.standard_normal((B, L, d), dtype=np.float32), requires_grad=True)  # (B, L, d)
    upstream = ta.tensor(rng.standard_normal((B, L, d), dtype=np.float32))
    parameters = sum(p.numel() for layer in layers for p in layer.parameters())
    print(f"{args.layers} post-norm encoder layers, d_model {d}, {H} heads, feed-forward {4 * d}, dropout "
          f"{args.dropout:g}, training mode; batch {B}, length {L}; float32"
          + (", not compiled (reference definitions)" if args.reference else ", compiled"))
    print(f"weights {parameters * 4 / MIB:.1f} MiB, one (B, L, d) activation {B * L * d * 4 / MIB:.1f} MiB, "
          f"one layer's attention weights (B, H, L, L) {B * H * L * L * 4 / MIB:.1f} MiB")
    step(layers, x, upstream, checkpointed=False, seed=1)  # warm-up: first-call allocations, caches

    tracemalloc.start()
    results = {}
    for name, checkpointed in (("plain", False), ("checkpointed", True)):
        results[name] = step(layers, x, upstream, checkpointed, seed=1)
        results[name] += (gradients(layers, x),)
    tracemalloc.stop()

    print(f"\n{'variant':<14}{'held after forward MiB':>24}{'peak fwd+bwd MiB':>19}{'time s':>9}")
    for name, (held, peak, seconds, _) in results.items():
        print(f"{name:<14}{held / MIB:>24.1f}{peak / MIB:>19.1f}{seconds:>9.2f}")
    print(f"\ncheckpointed peak ÷ plain peak: {results['checkpointed'][1] / results['plain'][1]:.2f}")

    plain, checked = results["plain"][3], results["checkpointed"][3]
    missing = [k for k in plain if (plain[k] is None) != (checked[k] is None)]
    if missing:
        raise AssertionError(f"{len(missing)} of {len(plain)} gradients are present in one variant only, "
                             f"e.g. {missing[:3]}")
    for k in plain:
        np.testing.assert_allclose(checked[k], plain[k], rtol=1e-5, atol=1e-6, err_msg=k)
    worst = max(float(np.abs(plain[k] - checked[k]).max() / max(np.abs(plain[k]).max(), 1e-30)) for k in plain)
    print(f"gradients equal both ways ({len(plain)} arrays, largest relative difference {worst:.1e})")


if __name__ == "__main__":
    main()
