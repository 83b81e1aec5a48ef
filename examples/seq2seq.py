"""Translate spelled-out numbers into digits with an encoder–decoder Transformer.

    "seven thousand forty two"   ->   "7042"
    "three hundred twelve"       ->   "312"

Inputs are 1 to 6 words long, outputs 1 to 4 digits, so every batch is padded. The model
is the original Transformer (Vaswani et al., 2017), small:

    memory = Encoder(Embed(src) + PE, src_mask)                           (B, S, d)
    h      = Decoder(Embed(tgt_in) + PE, memory, tgt_mask, memory_mask)   (B, T, d)
    logits = Linear(h)                                                    (B, T, 13)

with three masks, all boolean (``True`` = may attend):

    src_mask    = F.padding_mask(src_lengths, S)   (B, 1, 1, S)   encoder self-attention skips padding words
    memory_mask = the same mask                    (B, 1, 1, S)   cross-attention skips them too
    tgt_mask    = F.causal_mask(T)                 (T, T)         output i sees outputs ≤ i only

Training is teacher forcing: for 7042 the decoder reads ``<bos> 7 0 4 2`` and must
predict ``7 0 4 2 <eos>``, at each position the next token; the loss ignores padded
targets (``ignore_index``). Testing is greedy decoding, one digit at a time, on numbers
held out from training; the metric is exact match (every digit right and nothing more).
``cross_attention_*.png`` shows, for a few held-out numbers, which input word each output
digit looked at (the last decoder layer, one panel per head); ``head_view.html`` shows the
first of them for every decoder layer, interactively (open it in a browser, hover a digit).
The model runs compiled (``ta.compile``: the fused forms of its layers, each tested equal to
its definition in ``tinyattn/nn/``).

    python examples/seq2seq.py            # the full run
    python examples/seq2seq.py --quick    # a few seconds, for smoke tests

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

# ----------------------------------------------------------------------------- the data

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SOURCE_VOCAB = ["<pad>"] + ONES + TENS[2:] + ["hundred", "thousand"]
TARGET_VOCAB = ["<pad>", "<bos>", "<eos>"] + list("0123456789")
PAD, BOS, EOS = 0, 1, 2
SOURCE_INDEX = {word: i for i, word in enumerate(SOURCE_VOCAB)}
TARGET_INDEX = {token: i for i, token in enumerate(TARGET_VOCAB)}


def spell(n):
    """``7042`` -> ``["seven", "thousand", "forty", "two"]`` (0 ≤ n < 10000)."""
    if n == 0:
        return ["zero"]
    words = []
    if n >= 1000:
        words += [ONES[n // 1000], "thousand"]
    if n % 1000 >= 100:
        words += [ONES[n % 1000 // 100], "hundred"]
    rest = n % 100
    if 0 < rest < 20:
        words.append(ONES[rest])
    elif rest >= 20:
        words.append(TENS[rest // 10])
        if rest % 10:
            words.append(ONES[rest % 10])
    return words


def encode(numbers):
    """Padded index arrays for a list of numbers.

    Returns ``src (B, S)``, ``src_lengths (B,)``, ``tgt_in (B, T)`` = ``<bos> d d d`` and
    ``tgt_out (B, T)`` = ``d d d <eos>`` (both padded with ``<pad>``).
    """
    sources = [[SOURCE_INDEX[w] for w in spell(n)] for n in numbers]
    targets = [[TARGET_INDEX[c] for c in str(n)] for n in numbers]
    S, T = max(map(len, sources)), max(map(len, targets)) + 1
    src = np.full((len(numbers), S), PAD)
    tgt_in, tgt_out = np.full((len(numbers), T), PAD), np.full((len(numbers), T), PAD)
    for b, (source, target) in enumerate(zip(sources, targets)):
        src[b, :len(source)] = source
        tgt_in[b, :len(target) + 1] = [BOS] + target
        tgt_out[b, :len(target) + 1] = target + [EOS]
    return src, np.array([len(s) for s in sources]), tgt_in, tgt_out


# ----------------------------------------------------------------------------- the model


class Translator(nn.Module):
    """Source and target embeddings, sinusoidal positions, nn.Transformer's encoder and decoder, a read-out."""

    def __init__(self, d_model, nhead, num_layers, dim_feedforward, dropout):
        super().__init__()
        self.src_embed = nn.Embedding(len(SOURCE_VOCAB), d_model)
        self.tgt_embed = nn.Embedding(len(TARGET_VOCAB), d_model)
        self.pos = nn.PositionalEncoding(d_model, dropout=dropout)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout), num_layers
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout), num_layers
        )
        self.head = nn.Linear(d_model, len(TARGET_VOCAB))

    def encode(self, src, src_mask):
        """``src (B, S)`` word indices -> ``memory (B, S, d)``."""
        return self.encoder(self.pos(self.src_embed(src)), mask=src_mask)

    def decode(self, tgt_in, memory, memory_mask):
        """``tgt_in (B, T)`` -> ``logits (B, T, 13)``, each position seeing only earlier outputs."""
        T = tgt_in.shape[1]
        tgt_mask = F.causal_mask(T, device=tgt_in.device)  # (T, T)
        h = self.pos(self.tgt_embed(tgt_in))  # (B, T, d)
        h = self.decoder(h, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)  # (B, T, d)
        return self.head(h)  # (B, T, 13)

    def forward(self, src, src_lengths, tgt_in):
        src_mask = F.padding_mask(src_lengths, src.shape[1])  # (B, 1, 1, S)
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)

    def cross_attention(self, src, src_lengths, tgt_in):
        """Every decoder layer's cross-attention weights, a list of ``(B, H, T, S)``.

        The layers attend with ``need_weights=False``; with ``keep_attn_weights`` set, a
        decoder layer also stores its weights in ``cross_attn_weights``.
        """
        for layer in self.decoder.layers:
            layer.keep_attn_weights = True
        self(src, src_lengths, tgt_in)
        weights = [layer.cross_attn_weights for layer in self.decoder.layers]  # each (B, H, T, S)
        for layer in self.decoder.layers:
            layer.keep_attn_weights, layer.self_attn_weights, layer.cross_attn_weights = False, None, None
        return weights


def greedy_decode(model, src, src_lengths, max_len=5):
    """Feed the decoder its own best guess, one digit at a time; ``(B, ≤ max_len)`` indices."""
    src_mask = F.padding_mask(src_lengths, src.shape[1])  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)  # (B, S, d)
    tokens = np.full((src.shape[0], 1), BOS)  # (B, 1)
    for _ in range(max_len):
        logits = model.decode(ta.tensor(tokens, device=src.device), memory, src_mask)  # (B, t, 13)
        best = logits[:, -1].numpy().argmax(axis=-1)  # (B,)
        tokens = np.concatenate([tokens, best[:, None]], axis=1)  # (B, t + 1)
        if (tokens == EOS).any(axis=1).all():
            break
    return tokens[:, 1:]


def to_text(indices):
    """Target indices up to the first ``<eos>``, as a string of digits."""
    text = []
    for i in indices:
        if i == EOS:
            break
        text.append(TARGET_VOCAB[i] if i > EOS else "?")
    return "".join(text)


def exact_match(model, numbers, device, batch_size=500):
    model.eval()
    right, wrong = 0, []
    with ta.no_grad():
        for start in range(0, len(numbers), batch_size):
            chunk = numbers[start:start + batch_size]
            src, lengths, _, _ = encode(chunk)
            predicted = greedy_decode(model, ta.tensor(src, device=device), ta.tensor(lengths, device=device))
            for n, row in zip(chunk, predicted):
                if to_text(row) == str(n):
                    right += 1
                else:
                    wrong.append((n, to_text(row)))
    model.train()
    return right / len(numbers), wrong


# ----------------------------------------------------------------------------- the run


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-number", type=int, default=10000, help="numbers drawn from 0 … max-number - 1")
    parser.add_argument("--held-out", type=float, default=0.1, help="fraction of the numbers kept for testing")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--num-layers", type=int, default=2, help="layers in the encoder and in the decoder")
    parser.add_argument("--dim-feedforward", type=int, default=128)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (warm-up, then cosine decay)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/seq2seq", help="folder for the PNG pictures")
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke test in a few seconds: 150 steps on 0 … 999 (overrides --steps, --max-number)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.max_number = 150, 1000
    return args


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ta.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    numbers = rng.permutation(args.max_number)
    held_out = int(len(numbers) * args.held_out)
    test_numbers, train_numbers = numbers[:held_out].tolist(), numbers[held_out:]
    model = Translator(args.d_model, args.nhead, args.num_layers, args.dim_feedforward, args.dropout).to(args.device)
    model = ta.compile(model)  # fused forms of its layers, the same parameters: see ta.explain
    cross_entropy = ta.compile(F.cross_entropy)  # one fused node, its gradient p - onehot written out
    optimizer = optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))
    schedule = optim.lr_scheduler.LambdaLR(
        optimizer, optim.lr_scheduler.warmup_cosine(warmup_steps=args.steps // 10, total_steps=args.steps)
    )
    print(f"{sum(p.numel() for p in model.parameters())} parameters; "
          f"{len(train_numbers)} numbers to train on, {len(test_numbers)} held out")

    losses, start = [], time.perf_counter()
    progress = tqdm(range(args.steps), desc="seq2seq", unit="step")
    for _ in progress:
        batch = rng.choice(train_numbers, size=args.batch_size).tolist()
        src, lengths, tgt_in, tgt_out = (ta.tensor(a, device=args.device) for a in encode(batch))
        logits = model(src, lengths, tgt_in)  # (B, T, 13)
        loss = cross_entropy(logits.reshape(-1, len(TARGET_VOCAB)), tgt_out.reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        progress.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
    seconds = time.perf_counter() - start

    accuracy, wrong = exact_match(model, test_numbers, args.device)
    viz.plot_loss(losses, path=out / "loss.png", title="seq2seq: training loss")
    shown = test_numbers[:3]
    src, lengths, _, _ = encode(shown)
    model.eval()
    with ta.no_grad():
        src_t, lengths_t = ta.tensor(src, device=args.device), ta.tensor(lengths, device=args.device)
        predicted = greedy_decode(model, src_t, lengths_t)  # (3, ≤ 5)
        for b, n in enumerate(shown):
            answer = to_text(predicted[b])
            tgt_in = ta.tensor([[BOS] + [TARGET_INDEX[c] for c in answer]], device=args.device)  # (1, T)
            layers = model.cross_attention(src_t[b:b + 1], lengths_t[b:b + 1], tgt_in)  # each (1, H, T, S)
            words = spell(n)
            viz.plot_attention(
                layers[-1][0, :, :, :len(words)], list(answer) + ["<eos>"], words,
                path=out / f"cross_attention_{b}.png", title=f"{' '.join(words)} -> {answer}",
            )
            if b == 0:  # target-to-source, every decoder layer: hover an output digit to see the words it read
                outputs = list(answer) + ["<eos>"]  # what each decoder position predicts, as in the PNG
                viz.head_view([w[0, :, :, :len(words)] for w in layers], outputs, out / "head_view.html",
                              key_tokens=words, title=f"seq2seq cross-attention: {' '.join(words)} -> {answer}")
            print(f"  {' '.join(words):>45} -> {answer}")
    if wrong:
        print("some mistakes:", ", ".join(f"{n}->{guess!r}" for n, guess in wrong[:5]))
    print(f"trained {args.steps} steps in {seconds:.1f} s; pictures in {out}/")
    print(f"final exact match: {accuracy:.4f}")


if __name__ == "__main__":
    main()
