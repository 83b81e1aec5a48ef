"""Public PyTorch projects' styles, written here as test code and run from one source on torch and on
``tinyattn.compat``: a nanoGPT-style GPT with its trainer, checkpoint and sampling; a word-level
language model in the style of the PyTorch examples' ``main.py``/``model.py``/``generate.py`` (LSTM
and Transformer variants, the whole model saved and loaded); a translation Transformer in the style
of the PyTorch tutorial, with padding, a DataLoader, greedy decoding and beam search; and the seq2seq
tutorial's GRU encoder and attention decoder.

Weights are torch's, loaded into compat's models through ``load_state_dict``; everything runs in
float64. Outputs and every gradient agree to 1e-9, training losses step by step, and generated
tokens exactly (sampled tokens are replayed on torch, whose random stream differs, and the
distributions they were drawn from compared).
"""

import argparse
import contextlib
import dataclasses
import inspect
import math

import numpy as np
import pytest
import torch

import tinyattn.compat as compat
from tinyattn.interop import to_torch

RTOL, ATOL = 1e-9, 1e-10


def _close(ours, theirs, what=""):
    ours = ours.numpy() if hasattr(ours, "numpy") and not isinstance(ours, np.ndarray) else np.asarray(ours)
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=what)
    return float(np.abs(ours - theirs).max()) if ours.size else 0.0


def _same_grads(ours, theirs):
    """Every parameter gradient (by torch's names) agrees; returns the largest difference."""
    mine = to_torch({name: p.grad.numpy() for name, p in ours.named_parameters() if p.grad is not None})
    expected = {name: p.grad.numpy() for name, p in theirs.named_parameters() if p.grad is not None}
    assert sorted(mine) == sorted(expected)
    return max(_close(mine[name], expected[name], name) for name in expected)


def _same_state(ours, theirs):
    mine, expected = ours.state_dict(), theirs.state_dict()
    assert sorted(mine) == sorted(expected)
    return max(_close(mine[name], expected[name], name) for name in expected)


def _load_torch_weights(ours, theirs):
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


# ============================================================================= 1. a nanoGPT-style GPT


def gpt_project(torch):
    """model.py and train.py in nanoGPT's style: config dataclass, flash-or-manual attention, weight tying,
    scaled init, decay groups with the fused check, cosine schedule, GradScaler, checkpoint, sampling."""
    nn, F = torch.nn, torch.nn.functional

    @dataclasses.dataclass
    class GPTConfig:
        block_size: int = 8
        vocab_size: int = 13
        n_layer: int = 2
        n_head: int = 2
        n_embd: int = 16
        dropout: float = 0.0
        bias: bool = True

    class LayerNorm(nn.Module):
        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config, flash):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout, self.resid_dropout = nn.Dropout(config.dropout), nn.Dropout(config.dropout)
            self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout
            self.flash = flash and hasattr(torch.nn.functional, "scaled_dot_product_attention")
            if not self.flash:
                self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = self.attn_dropout(F.softmax(att, dim=-1))
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config, flash):
            super().__init__()
            self.ln_1, self.ln_2 = LayerNorm(config.n_embd, config.bias), LayerNorm(config.n_embd, config.bias)
            self.attn, self.mlp = CausalSelfAttention(config, flash), MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config, flash=True):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config, flash) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            return n_params - self.transformer.wpe.weight.numel() if non_embedding else n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def crop_block_size(self, block_size):
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, "bias"):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                            {"params": nodecay_params, "weight_decay": 0.0}]
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            extra_args = dict(fused=True) if use_fused else dict()
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPTConfig, GPT


def gpt_trainer(torch, model, data, ix_stream, args, out_path, log):
    """train.py's loop (from scratch, then resumed from its checkpoint): returns the losses."""
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    device_type = "cuda" if "cuda" in device else "cpu"
    dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = contextlib.nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type,
                                                                                  dtype=ptdtype)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))  # warns and disables itself without CUDA
    optimizer = model.configure_optimizers(0.1, args.learning_rate, (0.9, 0.95), device_type)
    block_size = model.config.block_size

    def get_batch():
        ix = torch.tensor(next(ix_stream))  # torch.randint(len(data) - block_size, (batch_size,)) in the original
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
        return x.to(device), y.to(device)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch()
            with ctx:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        model.train()
        return losses.mean()

    def get_lr(it):
        if it < args.warmup_iters:
            return args.learning_rate * (it + 1) / (args.warmup_iters + 1)
        decay_ratio = (it - args.warmup_iters) / (args.lr_decay_iters - args.warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * min(decay_ratio, 1.0)))
        return args.min_lr + coeff * (args.learning_rate - args.min_lr)

    losses, iter_num, best_val_loss = [], 0, 1e9
    X, Y = get_batch()
    while iter_num < args.max_iters:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num == args.max_iters // 2:
            val = estimate_loss()
            log.append(f"step {iter_num}: val loss {val:.4f}")
            best_val_loss = val
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "model_args": dataclasses.asdict(model.config), "iter_num": iter_num,
                        "best_val_loss": best_val_loss, "config": args}, out_path)
        for _ in range(args.gradient_accumulation_steps):
            with ctx:
                _, loss = model(X, Y)
                loss = loss / args.gradient_accumulation_steps
            X, Y = get_batch()
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        lossf = loss.item() * args.gradient_accumulation_steps
        log.append(f"iter {iter_num}: loss {lossf:.4f}")
        losses.append(lossf)
        iter_num += 1
    return losses, optimizer


def _gpt_twins(flash):
    models = {}
    for lib in (torch, compat):
        GPTConfig, GPT = gpt_project(lib)
        torch.manual_seed(0)
        models[lib] = GPT(GPTConfig(), flash=flash).double()
    _load_torch_weights(models[compat], models[torch])
    return models[compat], models[torch]


@pytest.mark.skipif(compat.cuda.is_available(), reason="with a GPU the trainer asks for autocast, which compat refuses")
@pytest.mark.filterwarnings("ignore:.*GradScaler:FutureWarning", "ignore:.*CUDA is not available:UserWarning")
@pytest.mark.parametrize("flash", [True, False])
def test_nanogpt_style_outputs_gradients_training_checkpoint_and_sampling_match_torch(tmp_path, flash):
    ours, theirs = _gpt_twins(flash)
    assert ours.get_num_params() == theirs.get_num_params()
    rng = np.random.default_rng(0)
    data = rng.integers(0, 13, 400).astype(np.uint16)  # train.bin's np.memmap(..., dtype=np.uint16)
    idx, targets = rng.integers(0, 13, (2, 8)), rng.integers(0, 13, (2, 8))
    targets[1, :3] = -1
    upstream = rng.standard_normal((2, 8, 13))
    outputs = []
    for model, lib in ((ours, compat), (theirs, torch)):
        logits, loss = model(lib.tensor(idx), lib.tensor(targets))
        (logits * lib.tensor(upstream)).sum().backward(retain_graph=True)
        loss.backward()
        outputs.append((logits, loss))
    _close(outputs[0][0], outputs[1][0], "logits")
    assert abs(outputs[0][1].item() - outputs[1][1].item()) < 1e-12
    _same_grads(ours, theirs)
    ours.zero_grad(), theirs.zero_grad()

    # the trainer, from one shared sequence of batch offsets
    offsets = [rng.integers(0, len(data) - 9, 4).tolist() for _ in range(64)]
    args = argparse.Namespace(learning_rate=1e-2, min_lr=1e-3, warmup_iters=2, lr_decay_iters=8, max_iters=6,
                              batch_size=4, gradient_accumulation_steps=2, eval_iters=3)
    logs, results = {}, {}
    for model, lib in ((ours, compat), (theirs, torch)):
        logs[lib] = []
        results[lib] = gpt_trainer(lib, model, data, iter(offsets), args, str(tmp_path / f"{lib.__name__}.pt"),
                                   logs[lib])
    np.testing.assert_allclose(results[compat][0], results[torch][0], rtol=1e-9)
    assert logs[compat] == logs[torch]  # the same log lines, f"{loss:.4f}" on 0-d tensors included
    _same_state(ours, theirs)

    # resume from the checkpoint as train.py does
    checkpoint = compat.load(str(tmp_path / "tinyattn.compat.pt"), map_location="cpu")
    assert isinstance(checkpoint["config"], argparse.Namespace) and checkpoint["config"].max_iters == 6
    assert checkpoint["iter_num"] == 3 and checkpoint["model_args"]["n_embd"] == 16
    GPTConfig, GPT = gpt_project(compat)
    resumed = GPT(GPTConfig(**checkpoint["model_args"]), flash=flash).double()
    resumed.load_state_dict(checkpoint["model"])
    optimizer = resumed.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu")
    optimizer.load_state_dict(checkpoint["optimizer"])
    theirs_checkpoint = torch.load(str(tmp_path / "torch.pt"), weights_only=False)
    for name, value in theirs_checkpoint["model"].items():
        _close(checkpoint["model"][name], value, name)

    # sampling: top_k=1 leaves one token to draw, on both; then cropping the block size
    start = [[1, 2, 3]]
    sample_ours = ours.generate(compat.tensor(start), 7, top_k=1)
    sample_theirs = theirs.generate(torch.tensor(start), 7, top_k=1)
    assert sample_ours.tolist() == sample_theirs.tolist()
    compat.manual_seed(0)
    drawn = ours.generate(compat.tensor(start), 4, temperature=0.8, top_k=5)
    assert drawn.shape == (1, 7) and drawn.dtype == compat.long
    ours.crop_block_size(4), theirs.crop_block_size(4)
    _close(ours(compat.tensor([[1, 2, 3, 4]]))[0], theirs(torch.tensor([[1, 2, 3, 4]]))[0], "cropped")


# ============================================================================= 2. a word-level language model


TEXT = """the cat sat on the mat . the dog sat on the log . a cat and a dog met on the mat .
the log was by the mat and the cat ran . a dog ran to the log .""".split("\n")


def word_lm_project(torch):
    """data.py, model.py, main.py's helpers and generate.py in the style of the PyTorch examples'
    word-level language model."""
    nn, F = torch.nn, torch.nn.functional

    class Dictionary:
        def __init__(self):
            self.word2idx, self.idx2word = {}, []

        def add_word(self, word):
            if word not in self.word2idx:
                self.idx2word.append(word)
                self.word2idx[word] = len(self.idx2word) - 1
            return self.word2idx[word]

        def __len__(self):
            return len(self.idx2word)

    class Corpus:
        def __init__(self, lines):
            self.dictionary = Dictionary()
            idss = []
            for line in lines:
                words = line.split() + ["<eos>"]
                ids = [self.dictionary.add_word(word) for word in words]
                idss.append(torch.tensor(ids).type(torch.int64))
            self.train = torch.cat(idss)

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ["LSTM", "GRU"]:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                             num_decoder_layers=1, dropout=dropout)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout, max_len=64)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src)).to(src.device)
            else:
                self.src_mask = None
            src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
            output = self.decoder(self.encoder(src, mask=self.src_mask))
            return F.log_softmax(output, dim=-1)

    def batchify(data, bsz):
        nbatch = data.size(0) // bsz
        data = data.narrow(0, 0, nbatch * bsz)
        return data.view(bsz, -1).t().contiguous()

    def repackage_hidden(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i, bptt):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)

    def train_epoch(model, train_data, lr, bptt, clip, log):
        model.train()
        criterion = nn.NLLLoss()
        ntokens = model.ntoken if hasattr(model, "ntoken") else model.decoder.out_features
        if model.__class__.__name__ == "RNNModel":
            hidden = model.init_hidden(train_data.size(1))
        losses = []
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            if model.__class__.__name__ == "RNNModel":
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            else:
                output = model(data).view(-1, ntokens)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                if p.grad is not None:
                    p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
            log.append("| {:5d} batches | lr {:02.2f} | loss {:5.2f} | ppl {:8.2f}".format(  # noqa: UP032
                batch, lr, loss.item(), math.exp(loss.item())))
        return losses

    def generate(model, corpus, words, temperature, replay=None):
        """generate.py's loop; ``replay`` forces the drawn words (to follow another library's draws)."""
        model.eval()
        hidden = model.init_hidden(1)
        input = torch.tensor([[replay[0] if replay else 0]], dtype=torch.long)
        out_words, weights = [], []
        with torch.no_grad():
            for i in range(words):
                output, hidden = model(input, hidden)
                word_weights = output.squeeze().div(temperature).exp().cpu()
                word_idx = torch.tensor(replay[i + 1]) if replay else torch.multinomial(word_weights, 1)[0]
                input.fill_(word_idx)
                out_words.append(corpus.dictionary.idx2word[word_idx])
                weights.append(word_weights.numpy())
        return out_words, weights

    return Corpus, RNNModel, TransformerModel, batchify, train_epoch, generate


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN_TANH"])
def test_word_language_model_trains_saves_whole_and_generates_as_torch(tmp_path, rnn_type):
    projects = {lib: word_lm_project(lib) for lib in (torch, compat)}
    corpora = {lib: projects[lib][0](TEXT) for lib in projects}
    ntokens = len(corpora[compat].dictionary)
    assert corpora[compat].dictionary.idx2word == corpora[torch].dictionary.idx2word
    models = {}
    for lib in (torch, compat):
        torch.manual_seed(0)
        models[lib] = projects[lib][1](rnn_type, ntokens, 8, 8, 2, dropout=0.0, tie_weights=True).double()
    _load_torch_weights(models[compat], models[torch])
    assert models[compat].decoder.weight is models[compat].encoder.weight

    logs, losses, train = {}, {}, {}
    for lib in (torch, compat):
        batchify, train_epoch = projects[lib][3], projects[lib][4]
        train[lib] = batchify(corpora[lib].train, 4)
        logs[lib] = []
        losses[lib] = train_epoch(models[lib], train[lib], 5.0, 5, 0.25, logs[lib])
    assert train[compat].tolist() == train[torch].tolist()
    np.testing.assert_allclose(losses[compat], losses[torch], rtol=1e-9)
    assert logs[compat] == logs[torch]
    _same_state(models[compat], models[torch])

    # main.py's whole-model checkpoint: with open(args.save, "wb") as f: torch.save(model, f)
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        compat.save(models[compat], f)
    RNNModel = projects[compat][1]
    with open(path, "rb") as f, pytest.raises(Exception, match=r"state_dict\(\)"):
        compat.load(f)
    with open(path, "rb") as f, compat.serialization.safe_globals([RNNModel]):
        model = compat.load(f)
    assert type(model) is RNNModel and model.training and model.rnn_type == rnn_type
    assert model.decoder.weight is model.encoder.weight
    expected = models[compat].state_dict()
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)

    # generate.py: our draws, replayed on torch; each step's word weights compared
    generate = projects[compat][5]
    compat.manual_seed(3)
    words, ours = generate(model, corpora[compat], 12, temperature=0.9)
    ids = [0] + [corpora[compat].dictionary.word2idx[w] for w in words]
    words_theirs, theirs = projects[torch][5](models[torch], corpora[torch], 12, temperature=0.9, replay=ids)
    assert words_theirs == words
    for step, (a, b) in enumerate(zip(ours, theirs)):
        _close(a, b, f"word weights at step {step}")


def test_word_language_model_transformer_variant_matches_torch():
    projects = {lib: word_lm_project(lib) for lib in (torch, compat)}
    corpora = {lib: projects[lib][0](TEXT) for lib in projects}
    ntokens = len(corpora[compat].dictionary)
    models = {}
    for lib in (torch, compat):
        torch.manual_seed(0)
        models[lib] = projects[lib][2](ntokens, 8, 2, 16, 2, dropout=0.0).double()
    _load_torch_weights(models[compat], models[torch])
    assert sorted(models[compat].state_dict()) == sorted(models[torch].state_dict())
    rng = np.random.default_rng(1)
    src = rng.integers(0, ntokens, (6, 3))
    upstream = rng.standard_normal((6, 3, ntokens))
    outputs = {}
    for lib in (torch, compat):
        outputs[lib] = models[lib](lib.tensor(src))
        outputs[lib].backward(lib.tensor(upstream))
    _close(outputs[compat], outputs[torch], "log-probabilities")
    _same_grads(models[compat], models[torch])
    for model in models.values():
        model.zero_grad()
    losses = {}
    for lib in (torch, compat):
        train = projects[lib][3](corpora[lib].train, 3)
        losses[lib] = projects[lib][4](models[lib], train, 1.0, 6, 0.5, [])
    np.testing.assert_allclose(losses[compat], losses[torch], rtol=1e-9)


# ============================================================================= 3. a translation Transformer


PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
PAIRS = [([5, 6, 7, 8], [9, 10, 11]), ([6, 7], [10, 12, 13, 9]), ([8, 5, 6, 9, 7], [11, 12]),
         ([7, 7, 5], [13, 9, 10, 10, 12]), ([9, 8], [12, 11, 13]), ([5, 9, 6, 8], [10, 9])]


def translation_project(torch):
    """The tutorial's Seq2SeqTransformer, masks, collation and training epoch, with greedy decoding and a
    beam search of our own."""
    nn = torch.nn
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    DataLoader = torch.utils.data.DataLoader

    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size, dropout, maxlen=64):
            super().__init__()
            den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pos_embedding", pos_embedding.unsqueeze(-2))

        def forward(self, token_embedding):
            return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])

    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size, emb_size):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, emb_size)
            self.emb_size = emb_size

        def forward(self, tokens):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, src_vocab_size, tgt_vocab_size,
                     dim_feedforward=32, dropout=0.0):
            super().__init__()
            self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                              num_decoder_layers=num_decoder_layers,
                                              dim_feedforward=dim_feedforward, dropout=dropout)
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

        def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask,
                                    memory_key_padding_mask)
            return self.generator(outs)

        def encode(self, src, src_mask):
            return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

        def decode(self, tgt, memory, tgt_mask):
            return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)

    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
        return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))  # noqa: UP018

    def create_mask(src, tgt):
        src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
        return src_mask, tgt_mask, (src == PAD_IDX).transpose(0, 1), (tgt == PAD_IDX).transpose(0, 1)

    def tensor_transform(token_ids):
        return torch.cat((torch.tensor([BOS_IDX]), torch.tensor(token_ids), torch.tensor([EOS_IDX])))

    def collate_fn(batch):
        src_batch, tgt_batch = [], []
        for src_sample, tgt_sample in batch:
            src_batch.append(tensor_transform(src_sample))
            tgt_batch.append(tensor_transform(tgt_sample))
        return pad_sequence(src_batch, padding_value=PAD_IDX), pad_sequence(tgt_batch, padding_value=PAD_IDX)

    def train_epoch(model, optimizer, pairs, log):
        model.train()
        loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
        losses = []
        for src, tgt in DataLoader(pairs, batch_size=2, collate_fn=collate_fn):
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
            optimizer.zero_grad()
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            log.append(f"Train loss: {loss.item():.3f}")
        return losses

    def greedy_decode(model, src, src_mask, max_len, start_symbol):
        memory = model.encode(src, src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for _ in range(max_len - 1):
            tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool))
            out = model.decode(ys, memory, tgt_mask).transpose(0, 1)
            prob = model.generator(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == EOS_IDX:
                break
        return ys

    def beam_search(model, src, beam_size, max_len):
        """Length-normalised beam search: ``(tokens, score)`` of the best finished hypothesis."""
        memory = model.encode(src, torch.zeros((src.size(0), src.size(0))).type(torch.bool))
        beams = torch.full((1, 1), BOS_IDX, dtype=torch.long)  # (T, K)
        scores = torch.zeros(1, dtype=memory.dtype)
        finished = []
        for step in range(max_len):
            k = beams.size(1)
            tgt_mask = generate_square_subsequent_mask(beams.size(0)).type(torch.bool)
            out = model.decode(beams, memory.expand(-1, k, -1), tgt_mask)  # (T, K, E)
            log_probs = torch.log_softmax(model.generator(out[-1]), dim=-1)  # (K, V)
            vocab = log_probs.size(-1)
            candidates = (scores.unsqueeze(1) + log_probs).view(-1)
            top_scores, top_ids = candidates.topk(min(beam_size, candidates.numel()))
            origin = torch.div(top_ids, vocab, rounding_mode="floor")
            token = top_ids % vocab
            beams = torch.cat([beams.index_select(1, origin), token.unsqueeze(0)], dim=0)
            keep = []
            for j in range(token.size(0)):
                if token[j].item() == EOS_IDX:
                    finished.append((beams[:, j].tolist(), top_scores[j].item() / (step + 1)))
                else:
                    keep.append(j)
            if not keep:
                break
            keep = torch.tensor(keep)
            beams, scores = beams[:, keep], top_scores[keep]
        if not finished:
            order = torch.argsort(scores, descending=True)
            finished = [(beams[:, order[0]].tolist(), scores[order[0]].item() / max_len)]
        return max(finished, key=lambda hypothesis: hypothesis[1])

    return Seq2SeqTransformer, train_epoch, greedy_decode, beam_search, collate_fn


def test_translation_transformer_trains_and_decodes_greedily_and_by_beam_search_as_torch():
    projects = {lib: translation_project(lib) for lib in (torch, compat)}
    models = {}
    for lib in (torch, compat):
        torch.manual_seed(0)
        models[lib] = projects[lib][0](2, 2, 16, 2, 14, 14).double()
        for p in models[lib].parameters():
            if p.dim() > 1:
                lib.nn.init.xavier_uniform_(p)
    _load_torch_weights(models[compat], models[torch])

    # one batch through the model: outputs and every gradient
    batches = {lib: projects[lib][4](PAIRS[:3]) for lib in (torch, compat)}
    assert batches[compat][0].tolist() == batches[torch][0].tolist()  # pad_sequence, sequence-first
    outputs = {}
    upstream = np.random.default_rng(2).standard_normal((batches[torch][1].shape[0] - 1, 3, 14))
    for lib in (torch, compat):
        src, tgt = batches[lib]
        tgt_input = tgt[:-1, :]
        mask = (lib.triu(lib.ones((tgt_input.size(0),) * 2)) == 1).transpose(0, 1)
        tgt_mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0).double()
        src_padding, tgt_padding = (src == PAD_IDX).transpose(0, 1), (tgt_input == PAD_IDX).transpose(0, 1)
        outputs[lib] = models[lib](src, tgt_input, lib.zeros((src.size(0),) * 2).type(lib.bool), tgt_mask,
                                   src_padding, tgt_padding, src_padding)
        outputs[lib].backward(lib.tensor(upstream))
    _close(outputs[compat], outputs[torch], "logits")
    _same_grads(models[compat], models[torch])

    # training epochs through DataLoader(collate_fn=...) and Adam
    logs, losses = {}, {}
    for lib in (torch, compat):
        models[lib].zero_grad()
        optimizer = lib.optim.Adam(models[lib].parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
        logs[lib] = []
        losses[lib] = projects[lib][1](models[lib], optimizer, PAIRS, logs[lib])
        losses[lib] += projects[lib][1](models[lib], optimizer, PAIRS, logs[lib])
    np.testing.assert_allclose(losses[compat], losses[torch], rtol=1e-9)
    assert logs[compat] == logs[torch]

    # decoding
    for src_ids, _ in PAIRS[:3]:
        decoded = {}
        for lib in (torch, compat):
            models[lib].eval()
            src = lib.cat((lib.tensor([BOS_IDX]), lib.tensor(src_ids), lib.tensor([EOS_IDX]))).view(-1, 1)
            src_mask = (lib.zeros(src.shape[0], src.shape[0])).type(lib.bool)
            greedy = projects[lib][2](models[lib], src, src_mask, max_len=src.shape[0] + 5, start_symbol=BOS_IDX)
            beam = projects[lib][3](models[lib], src, beam_size=3, max_len=6)
            decoded[lib] = (list(greedy.flatten().cpu().numpy()), beam)
        assert decoded[compat][0] == decoded[torch][0]
        assert decoded[compat][1][0] == decoded[torch][1][0]
        assert abs(decoded[compat][1][1] - decoded[torch][1][1]) < 1e-9


# ============================================================================= and a GRU encoder-decoder


def gru_seq2seq_project(torch):
    """The PyTorch tutorial's GRU encoder and Bahdanau-attention decoder, batch-first, trained from a
    TensorDataset through a DataLoader with a sampler, and decoded greedily with ``topk``."""
    nn, F = torch.nn, torch.nn.functional
    SOS_token, EOS_token, MAX_LENGTH = 0, 1, 6

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.0):
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            return self.gru(embedded)

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.Wa, self.Ua, self.Va = (nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size),
                                         nn.Linear(hidden_size, 1))

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            return torch.bmm(weights, keys), weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.0):
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
            decoder_hidden, decoder_outputs, attentions = encoder_hidden, [], []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(decoder_input, decoder_hidden,
                                                                                 encoder_outputs)
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
            return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            return self.out(output), hidden, attn_weights

    def get_dataloader(pairs, batch_size):
        input_ids = np.zeros((len(pairs), MAX_LENGTH), dtype=np.int32)
        target_ids = np.zeros((len(pairs), MAX_LENGTH), dtype=np.int32)
        for idx, (inp, tgt) in enumerate(pairs):
            inp, tgt = inp + [EOS_token], tgt + [EOS_token]
            input_ids[idx, :len(inp)], target_ids[idx, :len(tgt)] = inp, tgt
        train_data = torch.utils.data.TensorDataset(torch.LongTensor(input_ids), torch.LongTensor(target_ids))
        sampler = torch.utils.data.SequentialSampler(train_data)  # the tutorial's RandomSampler draws differently
        return torch.utils.data.DataLoader(train_data, sampler=sampler, batch_size=batch_size)

    def train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
        total_loss = 0
        for input_tensor, target_tensor in dataloader:
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
            loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
            total_loss += loss.item()
        return total_loss / len(dataloader)

    def evaluate(encoder, decoder, input_ids, index2word):
        with torch.no_grad():
            input_tensor = torch.tensor(input_ids + [EOS_token], dtype=torch.long).view(1, -1)
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _, attentions = decoder(encoder_outputs, encoder_hidden)
            _, topi = decoder_outputs.topk(1)
            decoded_ids = topi.squeeze()
            words = []
            for idx in decoded_ids:
                if idx.item() == EOS_token:
                    words.append("<EOS>")
                    break
                words.append(index2word[idx])
        return words, attentions

    return EncoderRNN, AttnDecoderRNN, get_dataloader, train_epoch, evaluate


def test_gru_seq2seq_with_attention_trains_and_decodes_as_torch():
    projects = {lib: gru_seq2seq_project(lib) for lib in (torch, compat)}
    models = {}
    for lib in (torch, compat):
        torch.manual_seed(0)
        models[lib] = (projects[lib][0](12, 8).double(), projects[lib][1](8, 12).double())
    for ours, theirs in zip(models[compat], models[torch]):
        _load_torch_weights(ours, theirs)
    pairs = [([2, 3, 4], [5, 6]), ([4, 3], [6, 7, 8]), ([5, 2, 2, 3], [9, 5]), ([6, 7], [10, 11, 5]),
             ([8, 9, 10], [2, 3])]
    losses, decoded = {}, {}
    for lib in (torch, compat):
        encoder, decoder = models[lib]
        dataloader = projects[lib][2](pairs, batch_size=2)
        optimizers = [lib.optim.Adam(m.parameters(), lr=0.01) for m in (encoder, decoder)]
        losses[lib] = [projects[lib][3](dataloader, encoder, decoder, *optimizers, lib.nn.NLLLoss())
                       for _ in range(3)]
        index2word = [f"w{i}" for i in range(12)]
        decoded[lib] = [projects[lib][4](encoder, decoder, src, index2word) for src, _ in pairs]
    np.testing.assert_allclose(losses[compat], losses[torch], rtol=1e-9)
    for (words, attention), (their_words, their_attention) in zip(decoded[compat], decoded[torch]):
        assert words == their_words
        _close(attention, their_attention, "attention weights")
    for ours, theirs in zip(models[compat], models[torch]):
        _same_state(ours, theirs)
