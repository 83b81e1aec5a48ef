"""A character-level language model: a causal decoder-only Transformer, sampled with a KV cache.

The model reads characters ``c_0 … c_{t}`` and predicts ``c_{t+1}``, for every ``t`` at once:

    h      = Embed(c) + P[position]                   (B, T, d)   learned positions
    h      = h + Attention(LayerNorm(h))              (B, T, d)   causal: position t sees ≤ t
    h      = h + MLP(LayerNorm(h))                    (B, T, d)   × num_layers (pre-norm blocks)
    logits = Linear(LayerNorm(h))                     (B, T, V)
    loss   = mean over t of −log softmax(logits_t)[c_{t+1}]

By default it trains on ``char_lm_corpus.txt`` beside this script: a snapshot of the project's
own Python sources and README, taken once and frozen, so the result does not move as the code
changes (any other text can be given with ``--text``). The metric is the validation loss in nats per character, next to
``ln V``, the loss of a uniform guess. ``loss.png`` draws it, measured every ``--eval-every`` steps, over the training
loss; ``sample.png`` shows a sampled text and a piece of the validation text with each character coloured by the
probability the model gave it, so one sees where the loss is paid.

**The KV cache.** Generation adds one character at a time. Without a cache, every step runs
the whole prefix through the model again. But in a causal model the keys and values of past
positions never change, so each attention layer can keep them and, per step, compute
query, key and value for the *new* position only, append its key and value to the cache,
and attend over all of them:

    q, k, v      = x_new W_q, x_new W_k, x_new W_v          (B, H, 1, head_dim)
    K, V         = cat(K_past, k), cat(V_past, v)           (B, H, t + 1, head_dim)
    output       = softmax(q Kᵀ / √head_dim) V               (B, H, 1, head_dim)

``CausalSelfAttention`` below is that layer, built from public pieces (``nn.Linear``, and
``F.scaled_dot_product_attention`` in its fused form, ``ta.compile(F.scaled_dot_product_attention)``);
the model runs compiled (``ta.compile(model)``: its Linear and LayerNorm layers as fused nodes).
Both ways give the same logits (the test suite checks it to 1e-5); the example samples with and
without the cache and reports characters per second. The saving grows with the prefix: within
this example's 64-character context the engine's fixed cost per operation outweighs the
arithmetic, and the cache (two more concatenations per layer and step) gains nothing; on a
context of hundreds of characters, recomputing the prefix every step is several times slower.

    python examples/char_lm.py                   # the full run
    python examples/char_lm.py --text FILE       # train on another text
    python examples/char_lm.py --quick           # a few seconds, for smoke tests

The matrices here are small, so one BLAS thread is enough; where the cores are shared,
``OPENBLAS_NUM_THREADS=1`` makes a run several times faster (BLAS threads wait on each other).
"""

import argparse
import math
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.nn.functional as F
import tinyattn.optim as optim
from tinyattn import viz

CORPUS = Path(__file__).resolve().parent / "char_lm_corpus.txt"  # frozen: never regenerated from the code

# the library's functions this script calls directly, in their fused forms (ta.compile of a function): one
# node each, tested equal to F.scaled_dot_product_attention and F.cross_entropy
scaled_dot_product_attention = ta.compile(F.scaled_dot_product_attention)
cross_entropy = ta.compile(F.cross_entropy)

# ----------------------------------------------------------------------------- the model


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention that can keep the keys and values of past positions.

    ``forward(x, cache=None)``: ``x (B, L, d)`` are ``L`` new positions. ``cache`` is ``None``
    (attend among ``x`` only) or a dict, empty at the start, in which the layer keeps the keys
    and values of every position it has seen and to which it appends those of ``x``.
    """

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x):
        B, L, _ = x.shape
        return x.reshape(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, head_dim)

    def forward(self, x, cache=None):
        B, L, d = x.shape
        query = self.split_heads(self.q_proj(x))  # (B, H, L, head_dim)
        key = self.split_heads(self.k_proj(x))  # (B, H, L, head_dim)
        value = self.split_heads(self.v_proj(x))  # (B, H, L, head_dim)
        past = 0
        if cache is not None:
            if cache:
                past = cache["key"].shape[2]
                key = ta.cat([cache["key"], key], dim=2)  # (B, H, past + L, head_dim)
                value = ta.cat([cache["value"], value], dim=2)  # (B, H, past + L, head_dim)
            cache["key"], cache["value"] = key, value
        # new position i sits at absolute position past + i and may attend keys j ≤ past + i
        keys_at = ta.arange(past + L, device=x.device)  # (past + L,)
        queries_at = ta.arange(past, past + L, device=x.device)  # (L,)
        allowed = keys_at.reshape(1, -1) <= queries_at.reshape(-1, 1)  # (L, past + L), bool
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=allowed, need_weights=False)
        out = out.transpose(1, 2).reshape(B, L, d)  # (B, L, d): heads merged back
        return self.out_proj(out)


class Block(nn.Module):
    """Pre-norm Transformer block: ``h + attn(norm1(h))``, then ``h + mlp(norm2(h))``."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))

    def forward(self, h, cache=None):
        h = h + self.attn(self.norm1(h), cache)  # (B, L, d)
        return h + self.mlp(self.norm2(h))  # (B, L, d)


class CharLM(nn.Module):
    """Token and position embeddings, ``num_layers`` blocks, a final LayerNorm and a read-out."""

    def __init__(self, vocab_size, block_size, d_model, num_heads, num_layers):
        super().__init__()
        self.block_size = block_size
        self.token_embed = nn.Embedding(vocab_size, d_model)
        self.pos_embed = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, num_heads) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx, caches=None):
        """``idx (B, L)`` -> ``logits (B, L, V)``; ``caches``: ``None`` or one dict per block.

        With caches, ``idx`` continues the sequence the caches have seen, so its positions
        start where they stopped.
        """
        B, L = idx.shape
        past = caches[0]["key"].shape[2] if caches and caches[0] else 0
        if past + L > self.block_size:
            raise ValueError(f"CharLM: {past} cached + {L} new positions exceed block_size {self.block_size}")
        positions = ta.arange(past, past + L, device=idx.device)  # (L,)
        h = self.token_embed(idx) + self.pos_embed(positions)  # (B, L, d)
        for i, block in enumerate(self.blocks):
            h = block(h, None if caches is None else caches[i])  # (B, L, d)
        return self.head(self.norm(h))  # (B, L, V)


@ta.no_grad()
def generate(model, prompt, steps, rng, use_cache=True, temperature=0.8):
    """Sample ``steps`` more indices after ``prompt`` (a list of indices); returns the whole list.

    With ``use_cache`` the prompt goes through once and then each step feeds one index;
    without, each step feeds the whole sequence so far. ``rng`` (a NumPy generator) draws
    the samples, so the same ``rng`` state gives the same text both ways.
    """
    was_training = model.training
    model.eval()
    device = next(iter(model.parameters())).device
    sequence = list(prompt)
    caches = [{} for _ in model.blocks] if use_cache else None
    feed = sequence
    for _ in range(steps):
        logits = model(ta.tensor([feed], device=device), caches)[0, -1].numpy()  # (V,)
        logits = logits.astype(np.float64) / temperature
        probabilities = np.exp(logits - logits.max())
        probabilities /= probabilities.sum()
        sequence.append(int(rng.choice(len(probabilities), p=probabilities)))
        feed = sequence[-1:] if use_cache else sequence
    model.train(was_training)
    return sequence


# ----------------------------------------------------------------------------- the data


def split(data, chunks=50, every=10):
    """Cut ``data`` into ``chunks`` equal pieces; every ``every``-th is for validation, the rest for training.

    Interleaving keeps both parts alike (the tail of the text alone would be mostly README).
    """
    pieces = np.array_split(data, chunks)
    valid = [p for i, p in enumerate(pieces) if i % every == every - 1]
    train = [p for i, p in enumerate(pieces) if i % every != every - 1]
    return np.concatenate(train), np.concatenate(valid)


def batches(data, block_size, batch_size, rng):
    """Random windows: inputs ``(B, block_size)`` and the same windows shifted by one."""
    starts = rng.integers(0, len(data) - block_size - 1, size=batch_size)
    windows = np.stack([data[s:s + block_size + 1] for s in starts])  # (B, block_size + 1)
    return windows[:, :-1], windows[:, 1:]


def validation_loss(model, data, block_size, device, windows=64):
    """Mean loss over ``windows`` fixed, evenly spaced windows of the validation text."""
    starts = np.linspace(0, len(data) - block_size - 1, windows).astype(int)
    chunks = np.stack([data[s:s + block_size + 1] for s in starts])  # (windows, block_size + 1)
    model.eval()
    with ta.no_grad():
        logits = model(ta.tensor(chunks[:, :-1], device=device))  # (windows, block_size, V)
        targets = ta.tensor(chunks[:, 1:].reshape(-1), device=device)  # (windows · block_size,)
        loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), targets)
    model.train()
    return loss.item()


# ----------------------------------------------------------------------------- the pictures


def plot_losses(losses, eval_steps, eval_losses, uniform, path):
    """The training loss per step with the validation loss at the steps where it was measured."""
    figure = viz.plot_loss(losses, title="char_lm: loss in nats per character")
    axes = figure.axes[0]
    axes.get_lines()[0].set_label("training (one batch)")
    axes.plot(eval_steps, eval_losses, "o-", color="tab:orange", lw=1.5, ms=4, label="validation (the metric)")
    axes.axhline(uniform, color="gray", ls="--", lw=1, label=f"uniform guess, ln V = {uniform:.2f}")
    axes.legend()
    figure.savefig(path, dpi=120)


@ta.no_grad()
def next_char_probabilities(model, sequence, device):
    """``p[t]``: the probability the model gives ``sequence[t]`` after ``sequence[:t]`` (``p[0]`` is NaN)."""
    was_training = model.training
    model.eval()
    logits = model(ta.tensor([sequence[:-1]], device=device))[0].numpy().astype(np.float64)  # (T - 1, V)
    model.train(was_training)
    logits -= logits.max(axis=-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))  # (T - 1, V): log softmax
    picked = np.exp(log_p[np.arange(len(sequence) - 1), sequence[1:]])  # (T - 1,)
    return np.concatenate([[np.nan], picked])  # (T,)


def cells(text, width):
    """The ``(row, column)`` of each character of ``text`` laid out ``width`` to a line (a newline ends one)."""
    places, row, column = [], 0, 0
    for char in text:
        if column == width:
            row, column = row + 1, 0
        places.append((row, column))
        row, column = (row + 1, 0) if char == "\n" else (row, column + 1)
    return places


def plot_sample(pieces, path, width=32):
    """One panel per ``(title, text, probabilities)``: the text in monospace cells, each coloured by the
    probability the model gave its character (grey where there is none: the prompt's first character)."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    cmap = colormaps["viridis"]
    layouts = [cells(text, width) for _, text, _ in pieces]
    rows = [places[-1][0] + 1 for places in layouts]
    figure = Figure(figsize=(0.3 * width + 1.8, sum(0.3 * r + 0.5 for r in rows) + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(len(pieces), 1, height_ratios=rows, squeeze=False)[:, 0]
    for axes, (title, text, probabilities), places in zip(panels, pieces, layouts):
        for char, p, (row, column) in zip(text, probabilities, places):
            colour = (0.85, 0.85, 0.85, 1.0) if np.isnan(p) else cmap(p)
            axes.add_patch(Rectangle((column, row), 1, 1, facecolor=colour, edgecolor="white", lw=0.5))
            axes.text(column + 0.5, row + 0.5, {"\n": "↵", " ": "·"}.get(char, char), ha="center", va="center",
                      family="monospace", fontsize=10, color="white" if p < 0.5 else "black")  # NaN: black
        axes.set_xlim(0, width)
        axes.set_ylim(places[-1][0] + 1, 0)
        axes.set_aspect("equal")
        axes.set_axis_off()
        axes.set_title(title, fontsize=9, loc="left")
    figure.colorbar(ScalarMappable(cmap=cmap), ax=list(panels), shrink=0.9, label="p(character | those before it)")
    figure.supxlabel("dark: the model did not expect the character (−ln p large); light: it did. "
                     "Grey: the first character, with nothing before it. ↵ newline, · space", fontsize=8)
    figure.savefig(path, dpi=120)


# ----------------------------------------------------------------------------- the run


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", help="a UTF-8 text file to train on (default: examples/char_lm_corpus.txt)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=64, help="context length in characters")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (warm-up, then cosine decay)")
    parser.add_argument("--eval-every", type=int, help="steps between validation losses (default: steps / 20)")
    parser.add_argument("--sample-length", type=int, default=48, help="characters sampled after the prompt")
    parser.add_argument("--prompt", default="def ")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/char_lm", help="folder for the PNG pictures")
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke test in a few seconds: 60 steps of a smaller model (overrides the sizes)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.d_model, args.num_layers, args.block_size = 60, 48, 2, 32
    args.eval_every = args.eval_every or max(args.steps // 20, 1)
    return args


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text = Path(args.text or CORPUS).read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = np.array([index[c] for c in text])
    if len(data) < 50 * (args.block_size + 2):
        raise SystemExit(f"char_lm: the text has {len(data)} characters; it needs at least "
                         f"{50 * (args.block_size + 2)} (50 pieces, each longer than --block-size + 1)")
    train, valid = split(data)
    print(f"{len(text)} characters, {len(chars)} distinct; uniform guess: ln V = {math.log(len(chars)):.3f} nats")

    model = CharLM(len(chars), args.block_size, args.d_model, args.nhead, args.num_layers).to(args.device)
    model = ta.compile(model)  # fused forms of its Linear and LayerNorm layers, the same parameters: see ta.explain
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = optim.lr_scheduler.LambdaLR(
        optimizer, optim.lr_scheduler.warmup_cosine(warmup_steps=args.steps // 10, total_steps=args.steps)
    )
    print(f"{sum(p.numel() for p in model.parameters())} parameters")

    losses, eval_steps, eval_losses = [], [0], [validation_loss(model, valid, args.block_size, args.device)]
    start = time.perf_counter()
    progress = tqdm(range(1, args.steps + 1), desc="char_lm", unit="step")
    for step in progress:
        inputs, targets = batches(train, args.block_size, args.batch_size, rng)  # (B, T), (B, T)
        logits = model(ta.tensor(inputs, device=args.device))  # (B, T, V)
        loss = cross_entropy(logits.reshape(-1, len(chars)), ta.tensor(targets.reshape(-1), device=args.device))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:  # the last one is the metric
            eval_steps.append(step)
            eval_losses.append(validation_loss(model, valid, args.block_size, args.device))
        progress.set_postfix(loss=f"{losses[-1]:.3f}", valid=f"{eval_losses[-1]:.3f}", refresh=False)
    seconds = time.perf_counter() - start
    loss = eval_losses[-1]
    # losses[s] and the validation loss at step s are both measured on the weights after s updates: one x axis
    plot_losses(losses, eval_steps, eval_losses, math.log(len(chars)), out / "loss.png")

    prompt = [index[c] for c in args.prompt if c in index] or [0]
    steps = min(args.sample_length, args.block_size - len(prompt))
    rates, samples = {}, {}
    for use_cache in (True, False):
        began = time.perf_counter()
        samples[use_cache] = generate(model, prompt, steps, np.random.default_rng(args.seed), use_cache)
        rates[use_cache] = steps / (time.perf_counter() - began)
    print("sample:", repr("".join(chars[i] for i in samples[True])))
    newline = index.get("\n", -1)
    starts = np.flatnonzero((valid[:-1] == newline) & (valid[1:] != newline)) + 1  # where a line begins
    line = int(starts[0]) if starts.size else 0
    excerpt = valid[line:line + args.block_size].tolist()
    plot_sample([
        (f"sampled after the prompt {args.prompt!r} (temperature 0.8)", "".join(chars[i] for i in samples[True]),
         next_char_probabilities(model, samples[True], args.device)),
        ("validation text (its mean −ln p, over many windows, is the metric)", "".join(chars[i] for i in excerpt),
         next_char_probabilities(model, excerpt, args.device)),
    ], out / "sample.png")
    print(f"sampling: {rates[True]:.0f} characters/s with the KV cache, {rates[False]:.0f} without "
          f"({rates[True] / rates[False]:.1f}x); same text both ways: {samples[True] == samples[False]}")
    print(f"trained {args.steps} steps in {seconds:.1f} s; pictures in {out}/")
    print(f"final validation loss: {loss:.4f}")


if __name__ == "__main__":
    main()
