"""Function transforms on a tiny Transformer: per-example gradients, a Jacobian beside attention, an HVP.

``ta.func`` turns functions into functions, as ``torch.func`` does. The model here is a small classifier —
token embeddings, sinusoidal positions, one post-norm ``nn.TransformerEncoderLayer`` (d_model 32, 4 heads,
dropout 0) and a linear head over the mean of the positions — trained briefly to name the most frequent
of the tokens 0, 1, 2 in a sequence padded out with distractor tokens 3 … 7. Then:

(a) **Per-example gradients.** ``functional_call(model, params, (tokens,))`` makes the model a function of
    its weights; ``vmap(grad(loss), in_dims=(None, 0, 0))(params, tokens, labels)`` gives every example's
    gradient of every weight in one call (each primitive's batching rule runs once on the whole batch).
    They are checked against a Python loop of single-example ``grad`` calls, and their norms drawn as a bar
    chart (``per_example_grad_norms.png``).

(b) **A Jacobian beside the attention.** ``jacrev`` (and ``jacfwd``, which must agree) of the encoder
    layer's output ``(L, d)`` with respect to its input ``(L, d)``: a ``(L, d, L, d)`` array, reduced to
    the ``(L_out, L_in)`` norms of its ``d × d`` blocks — how much output position i moves with input
    position j, residual path and feed-forward included — drawn beside the layer's attention weights
    (averaged over the heads) in ``jacobian_vs_attention.png``.

(c) **A Hessian-vector product** of the loss over the weights, ``H v = jvp(grad(loss), (params,), (v,))``
    (forward over reverse, never forming H), checked in float64 against central finite differences of the
    gradient, ``(g(θ + εv) - g(θ - εv)) / 2ε``.

The model runs compiled (``ta.compile``): its training steps take the fused forms of its layers, and inside
a transform (``vmap``, ``jvp``, ``jacfwd``…) each fused form runs its reference definition, which the
transforms' rules cover.

    python examples/transforms.py             # the full run (well under a minute on a laptop)
    python examples/transforms.py --quick     # a few seconds, for smoke tests
"""

import argparse
import copy
from pathlib import Path

import numpy as np
from tqdm import tqdm

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
import tinyattn.optim as optim
from tinyattn.func import functional_call, grad, jacfwd, jacrev, jvp, vmap

CLASSES = 3  # the tokens 0, 1, 2 are counted; 3 … vocab-1 are distractors

# F.cross_entropy's fused form (one node); inside a transform it runs the reference definition, as compiled layers do
cross_entropy = ta.compile(F.cross_entropy)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="training steps of the classifier")
    parser.add_argument("--length", type=int, default=10, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=8, help="tokens: 0, 1, 2 counted, the rest distractors")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--examples", type=int, default=32, help="examples whose gradients (a) takes one by one")
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/transforms", help="folder for the PNG pictures")
    parser.add_argument("--quick", action="store_true", help="smoke test in a few seconds: 60 training steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 60
    return args


# ----------------------------------------------------------------------------- the model and the task


class Classifier(nn.Module):
    """Embeddings and sinusoidal positions, one encoder layer, a linear head on the mean over the positions."""

    def __init__(self, vocab, classes, d_model, nhead):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.PositionalEncoding(d_model)
        self.encoder = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model, dropout=0.0)
        self.head = nn.Linear(d_model, classes)

    def embeddings(self, tokens):
        """The encoder's input ``(B, L, d)`` for ``tokens`` ``(B, L)``."""
        return self.position(self.embed(tokens))

    def forward(self, tokens):
        """Logits ``(B, classes)``."""
        return self.head(self.encoder(self.embeddings(tokens)).mean(dim=1))  # (B, L, d) -> (B, d) -> (B, C)


def make_batch(rng, batch_size, length, vocab, device="cpu"):
    """Sequences and the most frequent of the tokens 0, 1, 2 in each (ties to the smallest): ``(B, L)``, ``(B,)``."""
    tokens = rng.integers(0, vocab, size=(batch_size, length))  # (B, L)
    counts = (tokens[:, :, None] == np.arange(CLASSES)).sum(axis=1)  # (B, 3)
    return ta.tensor(tokens, device=device), ta.tensor(counts.argmax(axis=1), device=device)


def train(model, args, rng):
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    progress = tqdm(range(args.steps), desc="train", unit="step")
    for step in progress:
        tokens, labels = make_batch(rng, args.batch_size, args.length, args.vocab, args.device)
        loss = cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        if step % 30 == 0 or step == args.steps - 1:
            progress.write(f"  step {step:3d}  loss {loss.item():.4f}")


def accuracy(model, tokens, labels):
    with ta.no_grad():
        return float((model(tokens).numpy().argmax(axis=-1) == labels.numpy()).mean())


# ----------------------------------------------------------------------------- (a) per-example gradients


def example_loss(model):
    """``loss(params, tokens, label)`` for one example, ``tokens`` ``(L,)`` and ``label`` ``()``: the model
    as a function of its weights (``functional_call``), on a batch of one."""
    def loss(params, tokens, label):
        logits = functional_call(model, params, (tokens.unsqueeze(0),))  # (1, C)
        return cross_entropy(logits, label.unsqueeze(0))
    return loss


def per_example_gradients(model, params, tokens, labels):
    """Every example's gradient of every weight, ``{name: (B, *shape)}``, by vmap (one call) and by a loop."""
    loss = example_loss(model)
    batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, tokens, labels)
    looped = [grad(loss)(params, tokens[i], labels[i])
              for i in tqdm(range(len(tokens)), desc="(a) one by one", unit="example")]
    looped = {name: np.stack([g[name].numpy() for g in looped]) for name in params}
    return {name: g.numpy() for name, g in batched.items()}, looped


def gradient_norms(gradients):
    """The norm of each example's whole gradient (all weights together): ``(B,)``."""
    return np.sqrt(sum((g.reshape(len(g), -1).astype(np.float64) ** 2).sum(axis=1) for g in gradients.values()))


def margins(tokens):
    """How many more times the most frequent of 0, 1, 2 occurs than the runner-up: ``(B,)`` (0 for a tie)."""
    counts = np.sort((tokens.numpy()[:, :, None] == np.arange(CLASSES)).sum(axis=1), axis=1)  # (B, 3)
    return counts[:, -1] - counts[:, -2]


def plot_norms(norms, close, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    figure = Figure(figsize=(7.0, 3.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    colors = np.where(close, "tab:red", "tab:blue")
    axes.bar(np.arange(len(norms)), norms, color=colors)
    axes.set_yscale("log")
    axes.set_xlabel("example")
    axes.set_ylabel("‖∂loss/∂θ‖ (all weights)")
    axes.set_title("per-example gradient norms: vmap(grad(loss), in_dims=(None, 0, 0))")
    axes.legend(loc="upper left", handles=[Patch(color="tab:red", label="close call (a tie, or a margin of one)"),
                         Patch(color="tab:blue", label="clear majority")])
    figure.savefig(path, dpi=120)


# ----------------------------------------------------------------------------- (b) the Jacobian and the attention


def encoder_jacobian(model, x):
    """``∂ encoder(x) / ∂x`` for one sequence ``x`` ``(L, d)``, by reverse and forward mode: each ``(L, d, L, d)``."""
    def layer(embeddings):  # (L, d) -> (L, d)
        return model.encoder(embeddings.unsqueeze(0)).squeeze(0)
    return jacrev(layer)(x).numpy(), jacfwd(layer)(x).numpy()


def attention_weights(model, x):
    """The encoder layer's attention weights for ``x`` ``(L, d)``, averaged over the heads: ``(L, L)``."""
    model.encoder.keep_attn_weights = True
    with ta.no_grad():
        model.encoder(x.unsqueeze(0))
    model.encoder.keep_attn_weights = False
    return model.encoder.attn_weights.numpy()[0].mean(axis=0)  # (H, L, L) -> (L, L)


def plot_jacobian(norms, weights, tokens, agreement, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10.0, 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    labels = [str(t) for t in tokens]
    for axes, values, title, colorbar in (
            (left, norms, "‖∂ encoder(x)ᵢ / ∂xⱼ‖ (jacrev)", "Frobenius norm of the d×d block"),
            (right, weights, "attention weights (mean over heads)", "weight")):
        image = axes.imshow(values, cmap="viridis")
        axes.set_xticks(range(len(labels)), labels)
        axes.set_yticks(range(len(labels)), labels)
        axes.set_xlabel("input position j (its token)")
        axes.set_ylabel("output position i (its token)")
        axes.set_title(title)
        figure.colorbar(image, ax=axes, shrink=0.8, label=colorbar)
    figure.supxlabel("The Jacobian's bright diagonal is mostly the residual path (x + attention(x)), which the "
                     "weights do not show; compare the cells off the diagonal:\n"
                     f"their correlation with the weights is {agreement:.2f}. The Jacobian also carries the values, "
                     "the feed-forward block and the LayerNorms.", fontsize=8)
    figure.savefig(path, dpi=120)


# ----------------------------------------------------------------------------- (c) a Hessian-vector product


def hessian_vector_product(model, tokens, labels, seed):
    """``H v`` of the batch loss over the weights by ``jvp(grad(loss))``, and by central differences of the
    gradient, in float64; returns both, v (each flattened over all the weights) and the step ε."""
    model = copy.deepcopy(model).double()
    params = {name: p.detach() for name, p in model.named_parameters()}
    rng = np.random.default_rng(seed)
    v = {name: ta.tensor(rng.standard_normal(p.shape), device=p.device) for name, p in params.items()}  # float64

    def loss(p):
        return cross_entropy(functional_call(model, p, (tokens,)), labels)

    _, hv = jvp(grad(loss), (params,), (v,))  # forward mode through the reverse pass
    eps = 1e-5
    plus = grad(loss)({k: p + eps * v[k] for k, p in params.items()})
    minus = grad(loss)({k: p - eps * v[k] for k, p in params.items()})
    differences = {k: (plus[k].numpy() - minus[k].numpy()) / (2 * eps) for k in params}
    flat = np.concatenate  # one vector over all the weights
    return (flat([hv[k].numpy().ravel() for k in params]), flat([differences[k].ravel() for k in params]),
            flat([v[k].numpy().ravel() for k in params]), eps)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    model = Classifier(args.vocab, CLASSES, args.d_model, args.nhead).to(args.device)
    model = ta.compile(model)  # fused forms of its layers for training; under a transform they run their definitions
    print(f"training a Transformer classifier ({sum(p.numel() for p in model.parameters())} weights) to name the "
          f"most frequent of the tokens 0, 1, 2 in {args.length} tokens of {args.vocab}")
    train(model, args, rng)
    test_tokens, test_labels = make_batch(np.random.default_rng(args.seed + 1), 1000, args.length, args.vocab,
                                           args.device)
    print(f"  test accuracy {accuracy(model, test_tokens, test_labels):.3f} (chance about 0.4)")

    print(f"(a) per-example gradients of {args.examples} examples: vmap(grad(loss), in_dims=(None, 0, 0))")
    params = {name: p.detach() for name, p in model.named_parameters()}
    tokens, labels = make_batch(rng, args.examples, args.length, args.vocab, args.device)
    batched, looped = per_example_gradients(model, params, tokens, labels)
    difference = max(float(np.abs(batched[k] - looped[k]).max()) for k in params)
    scale = max(float(np.abs(looped[k]).max()) for k in params)
    print(f"  {len(batched)} weight tensors, each with a leading batch axis of {args.examples}: "
          f"e.g. encoder.linear1.weight {batched['encoder.linear1.weight'].shape}")
    print(f"  max |vmap - loop of single-example grads| = {difference:.1e} (largest gradient entry {scale:.2f})")
    norms = gradient_norms(batched)
    close = margins(tokens) <= 1
    print(f"  gradient norms: median {np.median(norms):.3f}, largest {norms.max():.3f} (example {norms.argmax()}); "
          f"median over the {int(close.sum())} close calls {np.median(norms[close]):.3f}, over the "
          f"{int((~close).sum())} clear majorities {np.median(norms[~close]):.3f}")
    plot_norms(norms, close, out / "per_example_grad_norms.png")

    print("(b) the Jacobian of the encoder layer's output with respect to its input embeddings, one sequence")
    sequence = tokens[0]
    with ta.no_grad():
        x = model.embeddings(sequence.unsqueeze(0)).squeeze(0)  # (L, d)
    by_reverse, by_forward = encoder_jacobian(model, x)
    norms = np.sqrt((by_reverse.astype(np.float64) ** 2).sum(axis=(1, 3)))  # (L, d, L, d) -> (L_out, L_in)
    weights = attention_weights(model, x)
    off_diagonal = ~np.eye(len(norms), dtype=bool)
    agreement = np.corrcoef(norms[off_diagonal], weights[off_diagonal])[0, 1]
    print(f"  jacrev {by_reverse.shape}; max |jacrev - jacfwd| = {np.abs(by_reverse - by_forward).max():.1e}")
    print(f"  block norms: diagonal mean {np.diag(norms).mean():.3f} (the residual path), off-diagonal mean "
          f"{norms[off_diagonal].mean():.3f}; correlation of the off-diagonal norms with the attention "
          f"weights {agreement:.2f}")
    plot_jacobian(norms, weights, sequence.numpy(), agreement, out / "jacobian_vs_attention.png")

    print(f"(c) a Hessian-vector product of the loss over the weights (float64, a batch of {args.examples}): "
          "jvp(grad(loss))")
    hv, differences, v, eps = hessian_vector_product(model, tokens, labels, args.seed)
    error = np.abs(hv - differences).max() / np.abs(differences).max()
    print(f"  ‖H v‖ = {np.linalg.norm(hv):.4f} for a random v; the curvature along it, vᵀ H v / ‖v‖² = "
          f"{hv @ v / (v @ v):.4f}")
    print(f"  max |jvp(grad) - central differences (ε = {eps:g})| / max |H v| = {error:.1e}")
    print(f"pictures in {out}/")
    print(f"final relative hvp error: {error:.1e}")


if __name__ == "__main__":
    main()
