"""A gradient-penalty training step through a Transformer encoder layer: tinyattn beside PyTorch.

    python benchmarks/higher_order.py                     # the medium size of run.py, 5 runs
    python benchmarks/higher_order.py --sizes small,medium --runs 5 --repeat 10 --json out/higher_order.json
    python benchmarks/higher_order.py --reference         # tinyattn's layer not compiled: its reference definitions

The step, the same in both libraries, on a post-norm ReLU ``TransformerEncoderLayer`` (``dim_feedforward = 4·d``,
dropout 0, training mode; PyTorch's with ``batch_first=True`` and the same weights, through
``ta.interop.to_torch``); tinyattn's layer compiled (``ta.compile``: the fused forms of its parts, each of which,
under ``create_graph``, differentiates its reference definition), or, with ``--reference``, not:

    loss    = ½ Σ (layer(x) - target)² / B
    g       = ∂loss/∂x                              (B, L, d), with create_graph: a graph of its own
    total   = loss + ‖g‖²
    total.backward()                                the weights' gradients run through the backward that made g

PyTorch's CPU flash-attention kernel has no double backward, so its step runs inside
``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``: the math attention that a second derivative needs.

Before timing, a float64 check at the small size asserts that the two libraries give the same ``g``, the same
``total`` and the same gradients of every weight and of ``x`` (so the timing measures the right computation).

Timing follows ``run.py``: both libraries in one process, interleaved in blocks after warm-up, two threads each
(``OPENBLAS_THREAD_TIMEOUT`` set before NumPy loads, so that OpenBLAS's idle threads do not spin against
PyTorch's). The whole is repeated ``--runs`` times; the table gives the median over the runs of each run's median
time, the ratio tinyattn ÷ PyTorch (median of the runs' ratios), and the spread (lowest to highest) of each over
the runs.
"""

import os

# NumPy's OpenBLAS threads busy-wait after each call and would steal a core from PyTorch's threads.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "22")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from run import SIZES, _torch, time_interleaved  # noqa: E402


def build(size, dtype=np.float32, seed=0):
    """The layer in both libraries with the same weights (tinyattn's not compiled), and the same ``x`` and
    ``target``, as NumPy arrays."""
    import tinyattn as ta
    import tinyattn.nn as nn

    torch = _torch()
    B, L, d, H = SIZES[size]
    ta.manual_seed(seed)
    ours = nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0).to(dtype)
    theirs = torch.nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, batch_first=True).to(
        torch.float64 if dtype == np.float64 else torch.float32)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()})
    rng = np.random.default_rng(seed)
    return ours, theirs, rng.standard_normal((B, L, d)).astype(dtype), rng.standard_normal((B, L, d)).astype(dtype)


def tinyattn_step(layer, x, target):
    """One gradient-penalty step; returns ``(g, total)``, the weights' gradients left in ``.grad``."""
    import tinyattn as ta

    layer.zero_grad()
    x.grad = None
    loss = ((layer(x) - target) ** 2).sum() / (2 * x.shape[0])
    (g,) = ta.autograd.grad(loss, x, create_graph=True)  # (B, L, d)
    total = loss + (g * g).sum()
    total.backward()
    return g, total


def torch_step(layer, x, target):
    """The same step in PyTorch, on its math attention kernel (the one with a double backward)."""
    torch = _torch()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    layer.zero_grad()
    x.grad = None
    with sdpa_kernel(SDPBackend.MATH):
        loss = ((layer(x) - target) ** 2).sum() / (2 * x.shape[0])
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        total = loss + (g * g).sum()
        total.backward()
    return g, total


def compiled(layer, reference):
    """``ta.compile(layer)``, the fused forms of its parts; with ``reference``, ``layer`` as it is."""
    import tinyattn as ta

    return layer if reference else ta.compile(layer)


def check_against_torch(size="small", reference=False):
    """Assert, in float64, that both libraries' steps give the same ``g``, ``total`` and gradients (tinyattn's
    layer compiled, unless ``reference``); returns the largest relative difference, and the penalty's share of the
    weights' gradient (that it is not negligible)."""
    import tinyattn as ta

    torch = _torch()
    ours, theirs, x_np, target_np = build(size, np.float64, seed=1)
    ours = compiled(ours, reference)  # ta.compile: the fused forms of its parts
    x_ta, target_ta = ta.tensor(x_np, requires_grad=True), ta.tensor(target_np)
    x_t, target_t = torch.tensor(x_np, requires_grad=True), torch.tensor(target_np)
    g_ta, total_ta = tinyattn_step(ours, x_ta, target_ta)
    g_t, total_t = torch_step(theirs, x_t, target_t)
    pairs = {"g": (g_ta.numpy(), g_t.detach().numpy()), "total": (total_ta.numpy(), total_t.detach().numpy()),
             "x.grad": (x_ta.grad, x_t.grad.numpy())}
    theirs_grads = ta.interop.from_torch({k: p.grad.numpy() for k, p in theirs.named_parameters()})
    for name, p in ours.named_parameters():
        pairs[name] = (p.grad, theirs_grads[name])
    worst = 0.0
    for name, (a, b) in pairs.items():
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=f"gradient-penalty step: {name}")
        if np.abs(b).max() > 1e-8:  # the key bias's gradient is zero in exact arithmetic (softmax ignores it)
            worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()))
    # the penalty's part of the weights' gradient, alone: the check would be hollow if it were negligible
    loss = ((ours(x_ta) - target_ta) ** 2).sum() / (2 * x_np.shape[0])
    (g,) = ta.autograd.grad(loss, x_ta, create_graph=True)
    weight = ours.linear1.weight
    (penalty_part,) = ta.autograd.grad((g * g).sum(), weight)
    share = float(np.linalg.norm(penalty_part.numpy()) / np.linalg.norm(weight.grad))
    return worst, share


def cases(size, reference=False):
    import tinyattn as ta

    torch = _torch()
    ours, theirs, x_np, target_np = build(size)
    ours = compiled(ours, reference)  # ta.compile: the fused forms of its parts
    x_ta, target_ta = ta.tensor(x_np, requires_grad=True), ta.tensor(target_np)
    x_t, target_t = torch.tensor(x_np, requires_grad=True), torch.tensor(target_np)
    return {"tinyattn": lambda: tinyattn_step(ours, x_ta, target_ta),
            "pytorch": lambda: torch_step(theirs, x_t, target_t)}


def spread(values, scale=1.0, digits=1):
    return f"{min(values) * scale:.{digits}f}–{max(values) * scale:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="medium", help="comma-separated, from: " + ",".join(SIZES))
    parser.add_argument("--runs", type=int, default=5, help="independent timings of each size")
    parser.add_argument("--repeat", type=int, default=10, help="timed calls per variant in each run")
    parser.add_argument("--reference", action="store_true",
                        help="tinyattn's layer not compiled: its reference definitions")
    parser.add_argument("--json", help="write the rows as JSON here")
    args = parser.parse_args()
    worst, share = check_against_torch(reference=args.reference)
    print(f"check (float64, small {SIZES['small']}): g, loss + ‖g‖² and every gradient equal PyTorch's "
          f"(largest relative difference {worst:.1e}; the penalty's part of linear1.weight's gradient: "
          f"{share:.0%} of it)")
    print(f"gradient-penalty step, post-norm encoder layer, float32, {args.runs} runs of {args.repeat} timed calls"
          + (", tinyattn's layer not compiled" if args.reference else ", tinyattn's layer compiled"))
    header = f"{'size':<8}{'(B, L, d, H)':<20}{'tinyattn ms':>20}{'pytorch ms':>20}{'ratio':>16}"
    print(header)
    print("-" * len(header))
    rows = []
    for size in args.sizes.split(","):
        steps = cases(size, args.reference)
        runs = [time_interleaved(steps, args.repeat) for _ in range(args.runs)]
        ours = [r["tinyattn"] for r in runs]
        theirs = [r["pytorch"] for r in runs]
        ratios = [a / b for a, b in zip(ours, theirs)]
        row = {"size": size, "shape": SIZES[size], "tinyattn_ms": statistics.median(ours) * 1e3,
               "pytorch_ms": statistics.median(theirs) * 1e3, "ratio": statistics.median(ratios),
               "tinyattn_runs_ms": [t * 1e3 for t in ours], "pytorch_runs_ms": [t * 1e3 for t in theirs],
               "ratios": ratios, "compiled": not args.reference}
        rows.append(row)
        print(f"{size:<8}{str(SIZES[size]):<20}"
              f"{row['tinyattn_ms']:>8.1f} ({spread(ours, 1e3):>10})"
              f"{row['pytorch_ms']:>8.1f} ({spread(theirs, 1e3):>10})"
              f"{row['ratio']:>6.2f} ({spread(ratios, digits=2):>9})", flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"check_relative_difference": worst, "penalty_share": share, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
