"""A Vision Transformer (ViT) on scikit-learn's 8×8 handwritten digits.

An image becomes a sequence: cut it into ``P×P`` patches, flatten each, project it to
``d`` dimensions, put a learned *class token* in front, add learned position embeddings,
and run a pre-norm Transformer encoder (Dosovitskiy et al., 2021). The class token's
final vector is the image's representation:

    patches = unfold(image)                              (B, N, P·P)   N = (8/P)² patches
    x       = [cls ; patches W_patch] + E_pos            (B, N+1, d)
    x       = TransformerEncoder(x)  (norm_first=True)   (B, N+1, d)
    logits  = Linear(LayerNorm(x[:, 0]))                 (B, 10)

The data (1797 images of the digits 0–9, 16 grey levels) ships with scikit-learn; nothing is
downloaded. 20% of the images are held out for testing, stratified by digit; pixels are
standardised with the training images' mean and standard deviation (raw grey levels
left training near the chance loss for many more steps in our runs). The metric is
accuracy on the held-out images. ``attention.png`` shows the last layer's attention for
one test image (every token to every token, one panel per head, two to a row) and
``class_token.png`` the class token's row of it laid over the image: where each head looked to
classify it (each head on its own colour scale, its largest weight in its title).
The model runs compiled (``ta.compile``: the fused forms of its layers, each tested equal to
its definition in ``tinyattn/nn/``).

    python examples/vit_digits.py            # the full run
    python examples/vit_digits.py --quick    # a few seconds, for smoke tests

The matrices here are small, so one BLAS thread is enough; where the cores are shared,
``OPENBLAS_NUM_THREADS=1`` makes a run several times faster (BLAS threads wait on each other).
"""

import argparse
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
import tinyattn.optim as optim
from tinyattn import viz

SIDE = 8  # the images are 8×8


class ViT(nn.Module):
    """Patch embedding, a class token, learned positions, a pre-norm encoder, a linear head."""

    def __init__(self, patch_size, d_model, nhead, num_layers, dropout, num_classes=10):
        super().__init__()
        if SIDE % patch_size:
            raise ValueError(f"ViT: patch_size {patch_size} does not divide the image side {SIDE}")
        self.patch_size = patch_size
        num_patches = (SIDE // patch_size) ** 2
        self.patch_embed = nn.Linear(patch_size * patch_size, d_model)
        self.cls_token = nn.Parameter(ta.zeros(1, 1, d_model))
        self.pos_embed = nn.Parameter(ta.randn(1, num_patches + 1, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=2 * d_model, dropout=dropout, activation="gelu", norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, num_classes)

    def patches(self, images):
        """``(B, 8, 8)`` -> ``(B, N, P·P)``, the patches in reading order (row by row)."""
        B, P, n = images.shape[0], self.patch_size, SIDE // self.patch_size
        grid = images.reshape(B, n, P, n, P).permute(0, 1, 3, 2, 4)  # (B, n, n, P, P)
        return grid.reshape(B, n * n, P * P)  # (B, N, P·P)

    def embed(self, images):
        x = self.patch_embed(self.patches(images))  # (B, N, d)
        cls = self.cls_token.expand(x.shape[0], 1, x.shape[2])  # (B, 1, d)
        return ta.cat([cls, x], dim=1) + self.pos_embed  # (B, N+1, d)

    def forward(self, images):
        x = self.encoder(self.embed(images))  # (B, N+1, d), the final LayerNorm included
        return self.head(x[:, 0])  # (B, 10): read from the class token

    def last_attention(self, images):
        """The last layer's self-attention weights, ``(B, H, N+1, N+1)``.

        The layers attend with ``need_weights=False``; with ``keep_attn_weights`` set, an
        encoder layer also stores its weights in ``attn_weights``.
        """
        last = self.encoder.layers[-1]
        last.keep_attn_weights = True
        self(images)
        weights = last.attn_weights  # (B, H, N+1, N+1)
        last.keep_attn_weights, last.attn_weights = False, None
        return weights


def load_data(seed):
    """Images split 80/20 stratified by digit and standardised: ``(train_x, train_y, test_x, test_y)``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    train_x, test_x, train_y, test_y = train_test_split(
        digits.images, digits.target, test_size=0.2, random_state=seed, stratify=digits.target
    )  # (1437, 8, 8), (360, 8, 8): grey levels 0 … 16
    mean, std = train_x.mean(), train_x.std()
    return ((train_x - mean) / std).astype(np.float32), train_y, ((test_x - mean) / std).astype(np.float32), test_y


def accuracy(model, images, labels, device):
    model.eval()
    with ta.no_grad():
        predicted = model(ta.tensor(images, device=device)).numpy().argmax(axis=-1)
    model.train()
    return float((predicted == labels).mean())


def plot_attention(weights, tokens, patch_size, digit, path):
    """Every token's attention to every token, two heads to a row, one colour scale for all."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    num_heads, size = weights.shape[0], len(tokens)
    columns = min(num_heads, 2)
    rows = -(-num_heads // columns)
    cell = min(0.22, 6.0 / size)  # inches: a panel of 17 tokens (2x2 patches) about 5 inches wide
    panel, fontsize = 1.4 + cell * size, min(8.0, 60 * cell)
    figure = Figure(figsize=(columns * panel + 1.0, rows * panel + 1.2), layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.subplots(rows, columns, squeeze=False)
    for head, axes in enumerate(grid.ravel()):
        if head >= num_heads:
            axes.set_axis_off()
            continue
        image = axes.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=float(weights.max()))
        axes.set_xticks(range(size), tokens, rotation=90, fontsize=fontsize)
        axes.set_yticks(range(size), tokens, fontsize=fontsize)
        axes.set_xlabel("key", fontsize=9)
        axes.set_ylabel("query", fontsize=9)
        axes.set_title(f"head {head}", fontsize=10)
    figure.colorbar(image, ax=grid.ravel().tolist(), shrink=0.6, label="attention weight")
    figure.suptitle(f"last layer self-attention, a test image of the digit {digit}")
    n = SIDE // patch_size
    figure.supxlabel(f"tokens: cls, then the {n * n} patches ({patch_size}x{patch_size} pixels) by row,column\n"
                     f"each row sums to 1; a uniform row is 1/{size} = {1 / size:.2f}", fontsize=9)
    figure.savefig(path, dpi=110)


def plot_class_token(image, weights, patch_size, path):
    """The image beside each head's attention from the class token to the patches (the digit outlined)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    num_heads, n = weights.shape[0], SIDE // patch_size
    maps = weights[:, 0, 1:].reshape(num_heads, n, n)  # (H, n, n): the class token's row, patches only
    maps = np.kron(maps, np.ones((patch_size, patch_size)))  # (H, 8, 8): each patch's weight over its pixels
    figure = Figure(figsize=(2.2 * (num_heads + 1), 2.6), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(1, num_heads + 1)
    panels[0].imshow(image, cmap="gray_r")
    panels[0].set_title("image", fontsize=8)
    outline = (image.min() + image.max()) / 2  # the digit's edge, drawn over each map
    for head in range(num_heads):
        panels[head + 1].imshow(maps[head], cmap="viridis", vmin=0)
        panels[head + 1].contour(image, levels=[outline], colors="white", linewidths=1.5)
        panels[head + 1].set_title(f"head {head}: cls -> patches\n(yellow = {maps[head].max():.2f})", fontsize=8)
    for axes in panels:
        axes.set_axis_off()
    figure.supxlabel(f"Each head on its own colour scale, from 0 (dark) to its largest weight (yellow, in its title): "
                     f"a head near uniform (1/{n * n + 1} = {1 / (n * n + 1):.2f} per token) still spans the colours.\n"
                     "The class token's weight on itself is left out; the white line is the digit's edge.",
                     fontsize=8)
    figure.savefig(path, dpi=120)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patch-size", type=int, default=2, choices=(1, 2, 4, 8))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (warm-up, then cosine decay)")
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/vit_digits", help="folder for the PNG pictures")
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke test in a few seconds: 3 epochs, 1 layer, 4x4 patches (overrides those)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.num_layers, args.patch_size = 3, 1, 4
    return args


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train_x, train_y, test_x, test_y = load_data(args.seed)
    model = ViT(args.patch_size, args.d_model, args.nhead, args.num_layers, args.dropout).to(args.device)
    model = ta.compile(model)  # fused forms of its layers, the same parameters: see ta.explain
    cross_entropy = ta.compile(F.cross_entropy)  # one fused node, its gradient p - onehot written out
    steps_per_epoch = -(-len(train_x) // args.batch_size)
    total = args.epochs * steps_per_epoch
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    schedule = optim.lr_scheduler.LambdaLR(optimizer, optim.lr_scheduler.warmup_cosine(total // 20, total))
    print(f"{sum(p.numel() for p in model.parameters())} parameters; "
          f"{len(train_x)} training images, {len(test_x)} test images, "
          f"{(SIDE // args.patch_size) ** 2} patches of {args.patch_size}x{args.patch_size}")

    losses, start = [], time.perf_counter()
    progress = tqdm(total=total, desc="vit", unit="step")
    for _ in range(args.epochs):
        order = rng.permutation(len(train_x))
        for first in range(0, len(order), args.batch_size):
            batch = order[first:first + args.batch_size]
            images = ta.tensor(train_x[batch], device=args.device)  # (B, 8, 8)
            labels = ta.tensor(train_y[batch], device=args.device)  # (B,)
            loss = cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            progress.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
            progress.update()
    progress.close()
    seconds = time.perf_counter() - start

    test_accuracy = accuracy(model, test_x, test_y, args.device)
    viz.plot_loss(losses, path=out / "loss.png", title="ViT on 8x8 digits: training loss")
    model.eval()
    with ta.no_grad():
        weights = model.last_attention(ta.tensor(test_x[:1], device=args.device))[0]  # (H, N+1, N+1)
    n = SIDE // args.patch_size
    tokens = ["cls"] + [f"{r},{c}" for r in range(n) for c in range(n)]
    plot_attention(weights.numpy(), tokens, args.patch_size, test_y[0], out / "attention.png")
    plot_class_token(test_x[0], weights.numpy(), args.patch_size, out / "class_token.png")
    print(f"trained {args.epochs} epochs ({total} steps) in {seconds:.1f} s; pictures in {out}/")
    print(f"final test accuracy: {test_accuracy:.4f}")


if __name__ == "__main__":
    main()
