"""Higher-order autograd: derivatives of derivatives, Newton's method on Hessian-vector products, a gradient penalty.

``ta.autograd.grad(outputs, inputs, create_graph=True)`` returns gradients that carry their own graph,
so they can be differentiated again. Three uses:

(a) **tanh and its first four derivatives** on a grid, each the gradient of the one before,

        y = tanh x,   y' = 1 - y²,   y'' = -2y(1 - y²),   y''' = (1 - y²)(6y² - 2),   y'''' = 8y(1 - y²)(2 - 3y²)

    checked against these closed forms and drawn in one picture (``tanh_derivatives.png``).

(b) **Newton's method** for a ridge-regularised logistic regression, without ever forming the Hessian:
    each step solves ``H p = -g`` by conjugate gradient, whose only use of ``H`` is the product ``H v``,
    one more backward pass through the gradient (``Hv = ∂(g · v)/∂w``, "double backward"); a
    backtracking line search keeps each step downhill. Near the minimum the gradient's norm falls
    quadratically, as Newton's method promises.

(c) **A gradient penalty** ("double backpropagation", Drucker and LeCun) on a small Transformer
    classifier: the training loss is

        loss + λ · ‖∂loss/∂x‖²           x = the input embeddings, (B, L, d)

    and its gradient with respect to the weights runs back through the backward pass of
    ``∂loss/∂x``. The classifier runs compiled (``ta.compile``): under ``create_graph=True`` each
    fused node differentiates its reference definition, so the penalty's gradient is the one of the
    definitions in ``tinyattn/nn/``. The loss curves go to ``penalty_loss.png``; the last line gives
    the accuracy.

    python examples/higher_order.py             # the full run (well under a minute on a laptop)
    python examples/higher_order.py --quick     # a few seconds, for smoke tests
"""

import argparse
import functools
from pathlib import Path

import numpy as np
from tqdm import tqdm

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
import tinyattn.optim as optim
from tinyattn import viz


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, default=20, help="weights of the logistic regression in (b)")
    parser.add_argument("--ridge", type=float, default=1e-2, help="the L2 penalty of the logistic regression in (b)")
    parser.add_argument("--steps", type=int, default=60, help="training steps of the classifier in (c)")
    parser.add_argument("--penalty", type=float, default=10.0, help="λ, the weight of ‖∂loss/∂x‖² in (c)")
    parser.add_argument("--length", type=int, default=8, help="tokens per sequence in (c)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/higher_order", help="folder for the PNG pictures")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test in a few seconds: 30 training steps in (c)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 30
    return args


# ----------------------------------------------------------------------------- (a) tanh, four times over


def tanh_derivatives(x, order):
    """``[tanh x, d/dx tanh x, …]`` up to ``order``: each the gradient of the one before, with its graph kept.

    tanh acts elementwise, so the gradient of ``sum(y⁽ᵏ⁾)`` at each grid point is ``y⁽ᵏ⁺¹⁾`` there."""
    curves = [ta.tanh(x)]
    for _ in tqdm(range(order), desc="(a) derivatives", unit="order"):
        (next_curve,) = ta.autograd.grad(curves[-1].sum(), x, create_graph=True)
        curves.append(next_curve)
    return curves


def tanh_closed_forms(x):
    """The same curves from calculus, in y = tanh x."""
    y = np.tanh(x)
    s = 1 - y**2  # sech² x
    return [y, s, -2 * y * s, s * (6 * y**2 - 2), 8 * y * s * (2 - 3 * y**2)]


def plot_curves(grid, curves, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.0, 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for order, curve in enumerate(curves):
        axes.plot(grid, curve, label="y" + "'" * order)
    axes.set_xlabel("x")
    axes.set_title("y = tanh(x) and its derivatives, by repeated autograd.grad")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=120)


# ----------------------------------------------------------------------------- (b) Newton-CG


def logistic_loss(w, features, labels, ridge):
    """f(w) = mean_i log(1 + exp(-y_i x_iᵀw)) + (ridge/2)‖w‖², labels y_i = ±1: convex, with one minimum.

    Written as the formula reads (the margins stay far below exp's overflow here): a form with kinks,
    such as relu(z) + log(1 + e^-|z|), would give the subgradients' zero at z = 0, where w starts."""
    z = -labels * (features @ w)  # (N,)
    return ta.log(1 + ta.exp(z)).mean() + ridge / 2 * (w * w).sum()


def make_classification(rng, samples, dimension, device):
    """Gaussian features and ±1 labels from a random linear rule, with one label in ten flipped."""
    features = rng.standard_normal((samples, dimension))  # (N, D)
    labels = np.sign(features @ rng.standard_normal(dimension) + 0.1)  # (N,)
    labels[rng.random(samples) < 0.1] *= -1
    return ta.tensor(features, device=device), ta.tensor(labels, device=device)


def conjugate_gradient(hvp, b, max_iterations, tolerance):
    """An approximate solution of ``H p = b`` from products ``H v`` alone, and the number of products used.

    Stops at a direction of non-positive curvature (H not positive definite there), returning the
    solution so far, or ``b`` itself if that happens at once (truncated Newton)."""
    p, r = np.zeros_like(b), b.copy()
    d, rr = r.copy(), r @ r
    for k in range(max_iterations):
        hd = hvp(d)
        curvature = d @ hd
        if curvature <= 0:
            return (p if k else b), k + 1
        alpha = rr / curvature
        p, r = p + alpha * d, r - alpha * hd
        rr, rr_old = r @ r, rr
        if np.sqrt(rr) < tolerance:
            return p, k + 1
        d = r + (rr / rr_old) * d
    return p, max_iterations


def hessian_vector_product(g, w, v):
    """H v = ∂(g · v)/∂w for a gradient ``g = ∂f/∂w`` taken with ``create_graph=True``; its graph is kept."""
    (hv,) = ta.autograd.grad(g, w, grad_outputs=ta.tensor(v, device=w.device), retain_graph=True)
    return hv.numpy()


def newton_cg(f, w0, device, max_steps=100, tolerance=1e-10):
    """Minimise ``f`` from ``w0`` by Newton steps solved with conjugate gradient on Hessian-vector products.

    ``g = ∂f/∂w`` is taken with ``create_graph=True``, so that ``H v = ∂(g · v)/∂w`` is one more backward
    pass through ``g``'s graph (kept with ``retain_graph=True`` for the next product)."""
    w_np = np.array(w0, dtype=np.float64)
    for step in range(max_steps):
        w = ta.tensor(w_np, requires_grad=True, device=device)
        value = f(w)
        (g,) = ta.autograd.grad(value, w, create_graph=True)
        g_np = g.numpy()
        grad_norm = np.linalg.norm(g_np)
        print(f"  step {step:2d}  f = {value.item():.3e}  ‖g‖ = {grad_norm:.3e}", end="")
        if grad_norm < tolerance:
            print()
            return w_np, step
        hvp = functools.partial(hessian_vector_product, g, w)
        direction, products = conjugate_gradient(hvp, -g_np, max_iterations=len(w_np),
                                                 tolerance=min(0.5, np.sqrt(grad_norm)) * grad_norm)
        t, slope = 1.0, g_np @ direction  # backtracking (Armijo): f(w + t p) ≤ f(x) + 10⁻⁴ t gᵀp
        with ta.no_grad():
            while f(ta.tensor(w_np + t * direction, device=device)).item() > value.item() + 1e-4 * t * slope:
                t /= 2
        print(f"  CG products {products:2d}  step length {t:g}")
        w_np = w_np + t * direction
    return w_np, max_steps


def hvp_error(features, labels, ridge, weights, device):
    """max |H v - H_exact v| at ``weights`` for a random v, where for the logistic loss
    H_exact = Xᵀ diag(p (1 - p)) X / N + ridge · I, with p = σ(X w)."""
    v = np.random.default_rng(1).standard_normal(weights.shape)
    w = ta.tensor(weights, requires_grad=True, device=device)
    (g,) = ta.autograd.grad(logistic_loss(w, features, labels, ridge), w, create_graph=True)
    (hv,) = ta.autograd.grad(g, w, grad_outputs=ta.tensor(v, device=device))
    x = features.numpy()  # (N, D)
    p = 1 / (1 + np.exp(-x @ weights))  # (N,)
    exact = x.T @ (p * (1 - p) * (x @ v)) / len(x) + ridge * v  # (D,)
    return float(np.abs(hv.numpy() - exact).max())


# ----------------------------------------------------------------------------- (c) a gradient penalty


class Classifier(nn.Module):
    """Token embeddings with learned positions, one post-norm encoder layer, a linear head on position 0."""

    def __init__(self, vocab, classes, length, d_model, nhead):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(length, d_model)
        self.encoder = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model, dropout=0.0)
        self.head = nn.Linear(d_model, classes)

    def embeddings(self, tokens):
        positions = ta.arange(tokens.shape[1], device=tokens.device)  # (L,)
        return self.embed(tokens) + self.position(positions)  # (B, L, d)

    def forward(self, x):
        """Logits ``(B, classes)`` from the input embeddings ``x`` ``(B, L, d)``."""
        return self.head(self.encoder(x)[:, 0])  # position 0 reads the sequence through attention


def make_batch(rng, batch_size, length, classes, device):
    """Sequences of tokens 0 … classes-1 and their most frequent token (ties to the smallest): ``(B, L)``, ``(B,)``."""
    tokens = rng.integers(0, classes, size=(batch_size, length))  # (B, L)
    counts = (tokens[:, :, None] == np.arange(classes)).sum(axis=1)  # (B, classes)
    return ta.tensor(tokens, device=device), ta.tensor(counts.argmax(axis=1), device=device)


def train_with_penalty(args, classes=3):
    rng = np.random.default_rng(args.seed)
    model = Classifier(classes, classes, args.length, args.d_model, args.nhead).to(args.device)
    model = ta.compile(model)  # fused forms of its layers, the same parameters: see ta.explain
    cross_entropy = ta.compile(F.cross_entropy)  # one fused node, its gradient p - onehot written out
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    losses, penalties, totals = [], [], []
    progress = tqdm(range(args.steps), desc="(c) train", unit="step")
    for step in progress:
        tokens, target = make_batch(rng, args.batch_size, args.length, classes, args.device)
        x = model.embeddings(tokens)  # (B, L, d)
        loss = cross_entropy(model(x), target)
        (grad_x,) = ta.autograd.grad(loss, x, create_graph=True)  # (B, L, d), with its own graph
        penalty = (grad_x**2).sum()
        total = loss + args.penalty * penalty
        optimizer.zero_grad()
        total.backward()  # through the forward and through the backward that made grad_x
        optimizer.step()
        losses.append(loss.item())
        penalties.append(penalty.item())
        totals.append(total.item())
        progress.set_postfix(loss=f"{losses[-1]:.3f}", penalty=f"{penalties[-1]:.2e}", refresh=False)
        if step % 10 == 0 or step == args.steps - 1:
            progress.write(f"  step {step:3d}  loss {losses[-1]:.4f}  penalty {penalties[-1]:.3e}")
    tokens, target = make_batch(np.random.default_rng(args.seed + 1), 1000, args.length, classes, args.device)
    model.eval()
    with ta.no_grad():
        predicted = model(model.embeddings(tokens)).numpy().argmax(axis=-1)
    return losses, penalties, totals, float((predicted == target.numpy()).mean())


def plot_training(losses, penalties, totals, penalty_weight, path):
    figure = viz.plot_loss(totals, title=f"gradient penalty: loss + {penalty_weight:g}·‖∂loss/∂x‖²")
    axes = figure.axes[0]
    axes.lines[0].set_label("loss + λ·penalty")
    axes.plot(losses, color="tab:orange", label="cross-entropy")
    axes.plot(penalty_weight * np.asarray(penalties), color="tab:green", label="λ·‖∂loss/∂x‖²")
    axes.legend()
    figure.savefig(path, dpi=120)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)

    print("(a) tanh and its first four derivatives, by repeated ta.autograd.grad(create_graph=True)")
    grid = np.linspace(-4, 4, 201)
    x = ta.tensor(grid, requires_grad=True, device=args.device)  # float64
    curves = [c.numpy() for c in tanh_derivatives(x, order=4)]
    for order, (ours, exact) in enumerate(zip(curves, tanh_closed_forms(grid))):
        print(f"  order {order}: max |autograd - closed form| = {np.abs(ours - exact).max():.1e}")
    plot_curves(grid, curves, out / "tanh_derivatives.png")

    print(f"(b) Newton-CG on Hessian-vector products: logistic regression, {args.features} weights, "
          f"ridge {args.ridge:g}")
    features, labels = make_classification(np.random.default_rng(args.seed), 500, args.features, args.device)
    weights, steps = newton_cg(lambda w: logistic_loss(w, features, labels, args.ridge),
                               np.zeros(args.features), args.device)
    accuracy = float((np.sign(features.numpy() @ weights) == labels.numpy()).mean())
    print(f"  converged in {steps} Newton steps; training accuracy {accuracy:.3f}")
    print(f"  H v by double backward against the closed-form Hessian: max error "
          f"{hvp_error(features, labels, args.ridge, weights, args.device):.1e}")

    print(f"(c) gradient penalty λ = {args.penalty:g} on a Transformer classifier (the most frequent of 3 tokens)")
    losses, penalties, totals, accuracy = train_with_penalty(args)
    plot_training(losses, penalties, totals, args.penalty, out / "penalty_loss.png")
    print(f"pictures in {out}/")
    print(f"final accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
