"""Reverse a sequence of digits with a Transformer encoder.

The task: read ``L`` random digits and write them back in reverse order,

    x = (x_0, x_1, …, x_{L-1})        y_i = x_{L-1-i}

Each output position must find one input position, ``L-1-i``, so the model has to attend
by *position* rather than by content. The model is the encoder half of the Transformer,

    h      = Embedding(x) + PE                 (B, L, d)   sinusoidal positions (nn.PositionalEncoding)
    h      = TransformerEncoder(h)             (B, L, d)   self-attention over the whole input
    logits = Linear(h)                         (B, L, 10)

trained with cross-entropy on every position. The model runs compiled (``ta.compile``: the
fused forms of its layers, each tested equal to its definition in ``tinyattn/nn/``). The
metric is the fraction of digits right on sequences the model has never seen. The attention
heatmaps (``attention_layer*.png``) show, for each head of each layer, which input positions
every output position looked at: in the last layer of the trained model the anti-diagonal
lights up; the first layer's weights are spread out, as a first layer's usually are (each picture
says so in its caption, with the average of each row's largest weight).

    python examples/reverse_digits.py                 # the full run (under a minute on 2 cores)
    python examples/reverse_digits.py --quick         # a few seconds, for smoke tests

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

VOCAB = 10  # the digits 0 … 9


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=10, help="digits per sequence (L)")
    parser.add_argument("--steps", type=int, default=800, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (warm-up, then cosine decay)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/reverse_digits", help="folder for the PNG pictures")
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke test in a few seconds: 150 steps on 6 digits (overrides --steps, --length)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.length = 150, 6
    return args


def make_batch(rng, batch_size, length, device):
    """Random digits and their reversal: two integer tensors of shape (B, L)."""
    digits = rng.integers(0, VOCAB, size=(batch_size, length))  # (B, L)
    return ta.tensor(digits, device=device), ta.tensor(digits[:, ::-1].copy(), device=device)


class Reverser(nn.Module):
    """Embedding, sinusoidal positions, a stack of post-norm encoder layers, a linear read-out."""

    def __init__(self, d_model, nhead, num_layers):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, digits):
        h = self.pos(self.embed(digits))  # (B, L, d)
        h = self.encoder(h)  # (B, L, d)
        return self.head(h)  # (B, L, 10)

    def attention_maps(self, digits):
        """Each layer's self-attention weights, ``(num_layers, B, H, L, L)``.

        An encoder layer computes attention with ``need_weights=False``; with
        ``keep_attn_weights`` set, it also stores the weights in ``layer.attn_weights``.
        """
        for layer in self.encoder.layers:
            layer.keep_attn_weights = True
        self(digits)
        maps = np.stack([layer.attn_weights.numpy() for layer in self.encoder.layers])
        for layer in self.encoder.layers:
            layer.keep_attn_weights, layer.attn_weights = False, None
        return maps


def token_accuracy(model, rng, length, device, sequences=1000):
    model.eval()
    with ta.no_grad():
        digits, target = make_batch(rng, sequences, length, device)
        predicted = model(digits).numpy().argmax(axis=-1)  # (N, L)
    model.train()
    return float((predicted == target.numpy()).mean())


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)  # initial weights
    rng = np.random.default_rng(args.seed)  # the data
    model = Reverser(args.d_model, args.nhead, args.num_layers).to(args.device)
    model = ta.compile(model)  # fused forms of its layers, the same parameters: see ta.explain
    cross_entropy = ta.compile(F.cross_entropy)  # one fused node, its gradient p - onehot written out
    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    schedule = optim.lr_scheduler.LambdaLR(
        optimizer, optim.lr_scheduler.warmup_cosine(warmup_steps=args.steps // 10, total_steps=args.steps)
    )
    print(f"{sum(p.numel() for p in model.parameters())} parameters; reversing {args.length} digits")

    losses, start = [], time.perf_counter()
    progress = tqdm(range(args.steps), desc="reverse", unit="step")
    for _ in progress:
        digits, target = make_batch(rng, args.batch_size, args.length, args.device)  # (B, L), (B, L)
        logits = model(digits)  # (B, L, 10)
        loss = cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        progress.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
    seconds = time.perf_counter() - start

    accuracy = token_accuracy(model, np.random.default_rng(args.seed + 1), args.length, args.device)
    viz.plot_loss(losses, path=out / "loss.png", title="reverse digits: training loss")
    example, _ = make_batch(np.random.default_rng(args.seed + 2), 1, args.length, args.device)
    model.eval()
    with ta.no_grad():
        maps = model.attention_maps(example)  # (layers, 1, H, L, L)
    tokens = [str(d) for d in example.numpy()[0]]
    for index, layer_maps in enumerate(maps):
        figure = viz.plot_attention(layer_maps[0], [f"out {i}" for i in range(args.length)], tokens,
                                    title=f"reverse digits: encoder layer {index} self-attention")
        peak = layer_maps[0].max(axis=-1).mean()  # each row's largest weight, averaged over rows and heads
        if index < len(maps) - 1:
            caption = ("Diffuse, as expected in a first layer: its heads mix several positions into each one; "
                       f"no head yet reads only the mirrored position L-1-i. That lookup is layer {len(maps) - 1}'s.")
        else:
            caption = "The anti-diagonal: the query at position i reads the input digit at L-1-i, the reversal."
        figure.supxlabel(f"{caption}\nEach row's largest weight, on average: {peak:.2f} "
                         f"(1.00: one key per query; a uniform row: 1/{args.length} = {1 / args.length:.2f})",
                         fontsize=10)
        figure.savefig(out / f"attention_layer{index}.png", dpi=120)
    print(f"trained {args.steps} steps in {seconds:.1f} s; pictures in {out}/")
    print(f"final token accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
