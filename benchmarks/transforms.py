"""Function transforms: ``ta.func`` beside ``torch.func``, in one process.

    python benchmarks/transforms.py                 # both cases, 5 runs
    python benchmarks/transforms.py --runs 5 --jvp-repeat 10 --grads-repeat 10 --json out/transforms.json

Two cases, float32, two threads each (``OPENBLAS_THREAD_TIMEOUT`` set before NumPy loads, as in ``run.py``):

(a) ``jvp``: ``ta.func.jvp(layer, (x,), (v,))`` of a post-norm ReLU ``nn.TransformerEncoderLayer``
    (``dim_feedforward = 4·d``, dropout 0, training mode), compiled as a user runs it for speed (``ta.compile``), at
    ``run.py``'s medium size, beside the layer's forward alone (under ``no_grad``, compiled, and not compiled:
    forward mode runs the reference definitions, so the second is the like-for-like floor), and beside
    ``torch.func.jvp`` of
    ``torch.nn.TransformerEncoderLayer(batch_first=True)`` with the same weights (``ta.interop.to_torch``). Forward
    AD has no rule for PyTorch's fused CPU attention kernels, so its jvp runs inside
    ``sdpa_kernel(SDPBackend.MATH)``; its forward alone runs as it would by default. Target: jvp ≤ 3× forward.

(b) per-example gradients of a small Transformer classifier's loss (embedding, one such layer at the small size's
    width, a linear head over the mean of the positions; cross-entropy; the classifier and ``F.cross_entropy``
    compiled, which under a transform run their reference definitions) at batch 64:
    ``vmap(grad(loss), in_dims=(None, 0, 0))(params, tokens, labels)`` through ``functional_call``, beside a
    Python loop of 64 single-example ``grad`` calls, and beside ``torch.func``'s
    ``vmap(grad(loss))`` of the PyTorch twin on its math attention (which has batching rules); beside that, the
    same on PyTorch's default CPU attention, whose flash kernel has no batching rule, so that vmap falls back to
    a loop over the examples (PyTorch warns). Target: vmap ≥ 5× faster than the loop.

Before timing, ``check_against_torch`` asserts in float64, at small sizes, that ``ta.func.jvp`` gives
``torch.func.jvp``'s output and tangent, and that tinyattn's per-example gradients (vmap) are torch.func's for every
weight and every example, so the timings measure the right computation.

Timing follows ``run.py`` (``time_interleaved``: interleaved blocks after warm-up). The whole is repeated
``--runs`` times; the tables give the median over the runs of each run's median time, and the spread (lowest to
highest) over the runs, of the times and of the ratios.
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

from higher_order import build as encoder_layers  # noqa: E402  (the post-norm layer in both libraries)
from run import SIZES, _machine, _torch, time_interleaved  # noqa: E402

PER_EXAMPLE = {"batch": 64, "length": 16, "vocab": 16, "classes": 4}  # (b)'s data; the width is SIZES["small"]'s


# ----------------------------------------------------------------------------- (a) jvp of an encoder layer


def tinyattn_jvp(layer, x, v):
    import tinyattn as ta

    return ta.func.jvp(layer, (x,), (v,))


def torch_jvp(layer, x, v):
    """``torch.func.jvp`` on PyTorch's math attention (its fused CPU kernels have no forward-AD rule)."""
    import torch.func
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return torch.func.jvp(layer, (x,), (v,))


def jvp_cases(size):
    import tinyattn as ta

    torch = _torch()
    reference, theirs, x_np, v_np = encoder_layers(size, np.float32)
    ours = ta.compile(reference)  # the fused forms of its parts; reference: the layer as written
    x_ta, v_ta, x_t, v_t = ta.tensor(x_np), ta.tensor(v_np), torch.tensor(x_np), torch.tensor(v_np)

    def forward():
        with ta.no_grad():
            ours(x_ta)

    def forward_reference():
        with ta.no_grad():
            reference(x_ta)

    def torch_forward():
        with torch.no_grad():
            theirs(x_t)

    return {"tinyattn forward": forward, "tinyattn forward (reference)": forward_reference,
            "tinyattn jvp": lambda: tinyattn_jvp(ours, x_ta, v_ta),
            "pytorch forward": torch_forward, "pytorch jvp": lambda: torch_jvp(theirs, x_t, v_t)}


# ----------------------------------------------------------------------------- (b) per-example gradients


def classifiers(dtype, seed=0):
    """The small classifier in both libraries, with the same weights (its parameters have the same names)."""
    import tinyattn as ta
    import tinyattn.nn as nn

    torch = _torch()
    _, _, d, H = SIZES["small"]
    vocab, classes = PER_EXAMPLE["vocab"], PER_EXAMPLE["classes"]

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.encoder = nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0)
            self.head = nn.Linear(d, classes)

        def forward(self, tokens):  # (B, L) -> (B, classes)
            return self.head(self.encoder(self.embed(tokens)).mean(dim=1))

    class TorchClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d)
            self.encoder = torch.nn.TransformerEncoderLayer(d, H, 4 * d, dropout=0.0, batch_first=True)
            self.head = torch.nn.Linear(d, classes)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)).mean(dim=1))

    ta.manual_seed(seed)
    ours = ta.compile(Classifier().to(dtype))  # the fused forms of its layers (the reference under a transform)
    theirs = TorchClassifier().to(torch.float64 if dtype == np.float64 else torch.float32)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ta.interop.to_torch(ours.state_dict()).items()})
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=(PER_EXAMPLE["batch"], PER_EXAMPLE["length"]))
    labels = rng.integers(0, classes, size=PER_EXAMPLE["batch"])
    return ours, theirs, tokens, labels


def tinyattn_per_example(model):
    """``(by_vmap, by_loop)``: functions of ``(params, tokens, labels)`` giving ``{name: (B, *shape)}`` and a list
    of ``B`` dicts of gradients."""
    import tinyattn as ta
    import tinyattn.nn.functional as F
    from tinyattn.func import functional_call, grad, vmap

    cross_entropy = ta.compile(F.cross_entropy)  # its fused form (the reference under a transform)

    def loss(params, tokens, label):  # one example: tokens (L,), label ()
        return cross_entropy(functional_call(model, params, (tokens.unsqueeze(0),)), label.unsqueeze(0))

    def by_loop(params, tokens, labels):
        return [grad(loss)(params, tokens[i], labels[i]) for i in range(len(tokens))]

    return vmap(grad(loss), in_dims=(None, 0, 0)), by_loop


def torch_per_example(model, math_kernel=True):
    """``torch.func``'s ``vmap(grad(loss), in_dims=(None, 0, 0))`` of the same loss; with ``math_kernel`` on
    PyTorch's math attention, which has batching rules (its flash kernel has none: vmap falls back to a loop
    over the examples there, and warns)."""
    import contextlib
    import warnings

    torch = _torch()
    from torch.func import functional_call, grad, vmap
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def loss(params, tokens, label):
        logits = functional_call(model, params, (tokens.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(logits, label.unsqueeze(0))

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))

    def run(params, tokens, labels):
        with sdpa_kernel(SDPBackend.MATH) if math_kernel else contextlib.nullcontext(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="There is a performance drop")
            return per_example(params, tokens, labels)
    return run


def per_example_cases():
    import tinyattn as ta

    torch = _torch()
    ours, theirs, tokens, labels = classifiers(np.float32)
    by_vmap, by_loop = tinyattn_per_example(ours)
    params = {k: p.detach() for k, p in ours.named_parameters()}
    tokens_ta, labels_ta = ta.tensor(tokens), ta.tensor(labels)
    theirs_vmap, theirs_default = torch_per_example(theirs), torch_per_example(theirs, math_kernel=False)
    theirs_params = {k: p.detach() for k, p in theirs.named_parameters()}
    tokens_t, labels_t = torch.tensor(tokens), torch.tensor(labels)
    return {"tinyattn vmap(grad)": lambda: by_vmap(params, tokens_ta, labels_ta),
            "tinyattn loop of grad": lambda: by_loop(params, tokens_ta, labels_ta),
            "pytorch vmap(grad)": lambda: theirs_vmap(theirs_params, tokens_t, labels_t),
            "pytorch vmap(grad), flash kernel": lambda: theirs_default(theirs_params, tokens_t, labels_t)}


# ----------------------------------------------------------------------------- the check


def check_against_torch():
    """Assert, in float64, that ``ta.func.jvp`` of the encoder layer (small size) gives ``torch.func.jvp``'s output
    and tangent, and that the per-example gradients by ``vmap(grad)`` are ``torch.func``'s (every weight, every
    example) and the loop's; returns the largest relative difference of each check."""
    import tinyattn as ta

    torch = _torch()

    def relative(a, b):
        return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))

    ours, theirs, x_np, v_np = encoder_layers("small", np.float64, seed=1)
    out, tangent = tinyattn_jvp(ta.compile(ours), ta.tensor(x_np), ta.tensor(v_np))  # compiled, as timed
    out_t, tangent_t = (t.detach() for t in torch_jvp(theirs, torch.tensor(x_np), torch.tensor(v_np)))
    np.testing.assert_allclose(out.numpy(), out_t.numpy(), rtol=1e-9, atol=1e-12, err_msg="jvp: the output")
    np.testing.assert_allclose(tangent.numpy(), tangent_t.numpy(), rtol=1e-9, atol=1e-12, err_msg="jvp: the tangent")
    jvp_error = max(relative(out.numpy(), out_t.numpy()), relative(tangent.numpy(), tangent_t.numpy()))

    ours, theirs, tokens, labels = classifiers(np.float64, seed=1)
    by_vmap, by_loop = tinyattn_per_example(ours)
    params = {k: p.detach() for k, p in ours.named_parameters()}
    batched = {k: g.numpy() for k, g in by_vmap(params, ta.tensor(tokens), ta.tensor(labels)).items()}
    looped = by_loop(params, ta.tensor(tokens), ta.tensor(labels))
    with torch.no_grad():
        theirs_grads = torch_per_example(theirs)({k: p.detach() for k, p in theirs.named_parameters()},
                                                 torch.tensor(tokens), torch.tensor(labels))
    per_example_error = 0.0
    for i in range(len(tokens)):  # PyTorch's layout to ours, one example at a time (in_proj_weight splits in three)
        expected = ta.interop.from_torch({k: g[i].numpy() for k, g in theirs_grads.items()})
        assert set(expected) == set(batched), "per-example gradients: the weights' names differ"
        for name, g in batched.items():
            np.testing.assert_allclose(g[i], expected[name], rtol=1e-9, atol=1e-12,
                                       err_msg=f"per-example gradients: {name}, example {i} (vmap vs torch.func)")
            np.testing.assert_allclose(looped[i][name].numpy(), g[i], rtol=1e-9, atol=1e-12,
                                       err_msg=f"per-example gradients: {name}, example {i} (loop vs vmap)")
            if np.abs(expected[name]).max() > 1e-8:  # (the key bias's gradient is zero in exact arithmetic)
                per_example_error = max(per_example_error, relative(g[i], expected[name]))
    return jvp_error, per_example_error


# ----------------------------------------------------------------------------- timing


def spread(values, scale=1.0, digits=1):
    return f"{min(values) * scale:.{digits}f}–{max(values) * scale:.{digits}f}"


def timed(cases, runs, repeat):
    """``{case: [median seconds of each run]}``."""
    results = [time_interleaved(cases, repeat) for _ in range(runs)]
    return {name: [r[name] for r in results] for name in cases}


def print_times(times):
    for name, values in times.items():
        print(f"  {name:<32}{statistics.median(values) * 1e3:>9.1f} ms  ({spread(values, 1e3):>13})")


def print_ratios(times, ratios):
    """``ratios``: ``(label, numerator case, denominator case)``; returns ``{label: [ratio of each run]}``."""
    out = {}
    for label, top, bottom in ratios:
        values = [a / b for a, b in zip(times[top], times[bottom])]
        out[label] = values
        print(f"  {label:<44}{statistics.median(values):>7.2f}  ({spread(values, digits=2)})")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="independent timings of each case")
    parser.add_argument("--jvp-repeat", type=int, default=10, help="timed calls per variant in each run of (a)")
    parser.add_argument("--grads-repeat", type=int, default=10, help="timed calls per variant in each run of (b)")
    parser.add_argument("--json", help="write the times and ratios as JSON here")
    args = parser.parse_args()

    jvp_error, per_example_error = check_against_torch()
    print(f"check (float64): ta.func.jvp of the encoder layer (small {SIZES['small']}) equals torch.func.jvp's "
          f"(largest relative difference {jvp_error:.1e}); per-example gradients by vmap(grad) equal torch.func's "
          f"and the loop's, every weight, every example ({per_example_error:.1e})")
    print(f"machine: {_machine()}; float32, two threads each; medians over {args.runs} runs (spread over the runs)")

    print(f"(a) jvp of a post-norm encoder layer, medium {SIZES['medium']} (B, L, d, H), "
          f"{args.jvp_repeat} timed calls a run")
    jvp_times = timed(jvp_cases("medium"), args.runs, args.jvp_repeat)
    print_times(jvp_times)
    jvp_ratios = print_ratios(jvp_times, [
        ("tinyattn jvp ÷ its forward (target ≤ 3)", "tinyattn jvp", "tinyattn forward"),
        ("tinyattn jvp ÷ its reference forward", "tinyattn jvp", "tinyattn forward (reference)"),
        ("tinyattn jvp ÷ pytorch jvp", "tinyattn jvp", "pytorch jvp"),
        ("pytorch jvp ÷ its forward", "pytorch jvp", "pytorch forward")])

    _, _, d, H = SIZES["small"]
    print(f"(b) per-example gradients of a small Transformer's loss: batch {PER_EXAMPLE['batch']}, length "
          f"{PER_EXAMPLE['length']}, d {d}, {H} heads, {args.grads_repeat} timed calls a run")
    grads_times = timed(per_example_cases(), args.runs, args.grads_repeat)
    print_times(grads_times)
    grads_ratios = print_ratios(grads_times, [
        ("loop ÷ vmap(grad) (target ≥ 5)", "tinyattn loop of grad", "tinyattn vmap(grad)"),
        ("tinyattn vmap(grad) ÷ pytorch vmap(grad)", "tinyattn vmap(grad)", "pytorch vmap(grad)")])

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"machine": _machine(), "check": {"jvp": jvp_error, "per_example": per_example_error},
                       "jvp_ms": {k: [t * 1e3 for t in v] for k, v in jvp_times.items()}, "jvp_ratios": jvp_ratios,
                       "per_example_ms": {k: [t * 1e3 for t in v] for k, v in grads_times.items()},
                       "per_example_ratios": grads_ratios}, f, indent=2)


if __name__ == "__main__":
    main()
