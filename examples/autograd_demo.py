"""A short autograd demo: fit y = 3x - 1 with a hand-written linear model and plain gradient descent.

No layers and no optimizer: two tensors that require gradients, a model written by hand (which
``ta.compile`` returns as it is: it has fused forms for the library's layers and functions only),
a mean squared error, and ``loss.backward()`` filling ``w.grad`` and ``b.grad``, which a loop
under ``ta.no_grad()`` uses to step downhill:

    loss   = mean((x w + b - y)²)
    w     ← w - lr · ∂loss/∂w,      b ← b - lr · ∂loss/∂b

The loss curve is saved as ``loss.png`` in ``--out``; the last line gives the final loss.

    python examples/autograd_demo.py
"""

import argparse
from pathlib import Path

import tinyattn as ta
from tinyattn import viz


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/autograd_demo", help="folder for the PNG picture")
    parser.add_argument("--quick", action="store_true", help="accepted for symmetry with the other examples; "
                        "the demo is already quick")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    x = ta.randn(64, 1, device=args.device)  # (N, 1)
    y = 3 * x - 1  # (N, 1)
    w = ta.zeros(1, 1, requires_grad=True, device=args.device)
    b = ta.zeros(1, requires_grad=True, device=args.device)

    def model(x):  # (N, 1) -> (N, 1)
        return x @ w + b

    model = ta.compile(model)  # your own function comes back as it is (fused forms are the library's, see ta.explain)
    losses = []
    for step in range(args.steps):
        loss = ((model(x) - y) ** 2).mean()
        w.grad = b.grad = None
        loss.backward()
        with ta.no_grad():
            w.data -= args.lr * w.grad
            b.data -= args.lr * b.grad
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step:3d}  loss {losses[-1]:.6f}")
    viz.plot_loss(losses, path=out / "loss.png", title="autograd_demo: mean squared error")
    print(f"learned w = {w.item():.4f}, b = {b.item():.4f} (target 3, -1); loss curve in {out}/")
    print(f"final loss: {losses[-1]:.3e}")


if __name__ == "__main__":
    main()
