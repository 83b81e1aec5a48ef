"""A small GPT written in plain PyTorch style, run on ``tinyattn.compat``: trained, then sampled.

Everything below the imports is ordinary PyTorch code (a ``model.py`` in the style of the small
GPT repositories: causal self-attention, weight tying, ``configure_optimizers`` with
weight-decay groups, a cosine learning rate through ``LambdaLR``, gradient accumulation,
clipping, top-k sampling with ``multinomial``, ``torch.compile``). Only the imports differ:

    import tinyattn.compat as torch
    import tinyattn.compat.nn as nn
    import tinyattn.compat.nn.functional as F

``torch.compile(model)`` is ``ta.compile(model)`` there: the model's layers swapped for their
fused forms, the same parameters. The corpus is a few lines of fixed text, repeated; the metric
is the validation loss in nats per character (a uniform guess scores ln V).

    python examples/torch_code.py            # the full run
    python examples/torch_code.py --quick    # a few seconds, for smoke tests
"""

import argparse
import math
from pathlib import Path

import tinyattn.compat as torch
import tinyattn.compat.nn as nn
import tinyattn.compat.nn.functional as F
from tinyattn import viz

CORPUS = (
    "attention is all you need. the query asks, the keys answer, the values are mixed. "
    "a softmax turns scores into weights that sum to one. heads look at the text in parallel. "
    "the residual stream carries what every layer adds. layer norm keeps the scale in check. "
)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        mask = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("bias", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, n_head, n_layer):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {name: p for name, p in self.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.dim() >= 2]
        no_decay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def get_batch(data, block_size, batch_size, device):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
    return x.to(device), y.to(device)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--accumulation", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda"')
    parser.add_argument("--out", default="out/torch_code", help="folder for the loss curve")
    parser.add_argument("--quick", action="store_true", help="a short run, for smoke tests")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 120
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    chars = sorted(set(CORPUS))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in CORPUS * 8], dtype=torch.long)
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]

    model = GPT(len(chars), args.block_size, n_embd=32, n_head=4, n_layer=2).to(args.device)
    model = torch.compile(model)  # compat's torch.compile is ta.compile: fused forms of its layers, see ta.explain
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=args.lr, betas=(0.9, 0.95))
    warmup = max(args.steps // 10, 1)

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, args.steps - warmup) / (args.steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    losses = []
    model.train()
    for step in range(args.steps):
        for _ in range(args.accumulation):
            x, y = get_batch(train_data, args.block_size, args.batch_size, args.device)
            _, loss = model(x, y)
            (loss / args.accumulation).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  lr {scheduler.get_last_lr()[0]:.2e}")

    model.eval()
    with torch.no_grad():
        x, y = get_batch(val_data, args.block_size, 64, args.device)
        _, val_loss = model(x, y)
    prompt = torch.tensor([[stoi[c] for c in "the "]], dtype=torch.long, device=args.device)
    sample = model.generate(prompt, 60, temperature=0.8, top_k=5)[0].tolist()
    print("sample:", repr("".join(chars[i] for i in sample)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    viz.plot_loss(losses, path=out / "loss.png", title="torch_code: training loss (nats per character)")
    print(f"uniform guess: ln V = {math.log(len(chars)):.4f}")
    print(f"final validation loss: {val_loss.item():.4f}")


if __name__ == "__main__":
    main()
