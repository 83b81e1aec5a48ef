"""``tinyattn.compat``: PyTorch code run twice from one source, once on torch and once on the compat
namespace, with torch's weights loaded through ``load_state_dict({k: v.numpy() …})``: outputs,
every gradient (float64, 1e-9) and a few training steps' losses agree."""

import math

import numpy as np
import pytest
import torch

import tinyattn.compat as compat
from tinyattn.interop import to_torch

RTOL, ATOL = 1e-9, 1e-10


def _grads_by_torch_name(model):
    """Our parameter gradients, renamed to torch's layout."""
    return to_torch({name: p.grad.numpy() for name, p in model.named_parameters() if p.grad is not None})


def _assert_same_grads(ours, theirs):
    mapped = _grads_by_torch_name(ours)
    expected = {name: p.grad.numpy() for name, p in theirs.named_parameters() if p.grad is not None}
    assert sorted(mapped) == sorted(expected)
    for name, grad in mapped.items():
        np.testing.assert_allclose(grad, expected[name], rtol=RTOL, atol=ATOL, err_msg=name)


def _twins(build, *args, **kwargs):
    """The same module built from torch and from compat, float64, torch's weights loaded into ours."""
    torch.manual_seed(0)
    theirs = build(torch, *args, **kwargs).double()
    ours = build(compat, *args, **kwargs).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _both(array, requires_grad=False):
    return (compat.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad))


# ----------------------------------------------------------------------------- attention and Transformer layers


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "bool+padding", "float+padding", "padding"])
def test_multihead_attention_matches_torch(batch_first, mask_kind):
    B, L, S, E, H = 2, 3, 4, 8, 2
    ours, theirs = _twins(lambda lib: lib.nn.MultiheadAttention(E, H, batch_first=batch_first))
    rng = np.random.default_rng(1)
    shape_q, shape_k = ((B, L, E), (B, S, E)) if batch_first else ((L, B, E), (S, B, E))
    q, k, v = rng.standard_normal(shape_q), rng.standard_normal(shape_k), rng.standard_normal(shape_k)
    attn = rng.random((L, S)) < 0.3
    attn[:, 0] = False  # every query keeps a key: no NaN row in torch
    padding = np.array([[False] * S, [False] * (S - 1) + [True]])
    options = [{}, {}]
    if "bool" in mask_kind:
        options = [{"attn_mask": m} for m in _both(attn)]
    if "float" in mask_kind:
        options = [{"attn_mask": m} for m in _both(rng.standard_normal((L, S)))]
    if "padding" in mask_kind:
        for o, m in zip(options, _both(padding)):
            o["key_padding_mask"] = m
    upstream = rng.standard_normal(shape_q)
    outs = []
    for model, lib, opts in ((ours, compat, options[0]), (theirs, torch, options[1])):
        inputs = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        out, weights = model(*inputs, **opts)
        out.backward(lib.tensor(upstream))
        outs.append((out, weights, inputs))
    (o1, w1, i1), (o2, w2, i2) = outs
    np.testing.assert_allclose(o1.numpy(), o2.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w1.numpy(), w2.detach().numpy(), rtol=RTOL, atol=ATOL)
    for a, b in zip(i1, i2):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=RTOL, atol=ATOL)
    _assert_same_grads(ours, theirs)


def _encoder_decoder(lib, batch_first, norm_first):
    nn = lib.nn
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first,
                                                               norm_first=norm_first), 2)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first,
                                                               norm_first=norm_first), 2)
    return nn.ModuleList([encoder, decoder])


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_decoder_match_torch_with_padding_and_causal_masks(batch_first, norm_first):
    B, S, T, E = 2, 5, 4, 8
    ours, theirs = _twins(_encoder_decoder, batch_first, norm_first)
    ours.eval(), theirs.eval()
    rng = np.random.default_rng(2)
    src_shape, tgt_shape = ((B, S, E), (B, T, E)) if batch_first else ((S, B, E), (T, B, E))
    src, tgt, upstream = rng.standard_normal(src_shape), rng.standard_normal(tgt_shape), rng.standard_normal(tgt_shape)
    src_padding = np.array([[False] * S, [False] * 3 + [True] * 2])
    causal = np.triu(np.ones((T, T), dtype=bool), 1)  # torch: True = masked
    results = []
    for model, lib in ((ours, compat), (theirs, torch)):
        x, y = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        pad, mask = lib.tensor(src_padding), lib.tensor(causal)
        memory = model[0](x, src_key_padding_mask=pad)
        out = model[1](y, memory, tgt_mask=mask, memory_key_padding_mask=pad)
        out.backward(lib.tensor(upstream))
        results.append((out, x, y))
    (o1, x1, y1), (o2, x2, y2) = results
    np.testing.assert_allclose(o1.numpy(), o2.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x1.grad, x2.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y1.grad, y2.grad.numpy(), rtol=RTOL, atol=ATOL)
    _assert_same_grads(ours, theirs)


# ----------------------------------------------------------------------------- torch-style models, one source


def d2l_attention(torch):
    """d2l's additive attention with ``masked_softmax`` (``X[~mask] = value``)."""
    nn = torch.nn

    def masked_softmax(X, valid_lens):
        def _sequence_mask(X, valid_len, value=0):
            maxlen = X.size(1)
            mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
            X[~mask] = value
            return X

        if valid_lens is None:
            return nn.functional.softmax(X, dim=-1)
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)

    class AdditiveAttention(nn.Module):
        def __init__(self, num_hiddens, dropout, **kwargs):
            super().__init__(**kwargs)
            self.W_k = nn.Linear(2, num_hiddens, bias=False)
            self.W_q = nn.Linear(20, num_hiddens, bias=False)
            self.w_v = nn.Linear(num_hiddens, 1, bias=False)
            self.dropout = nn.Dropout(dropout)

        def forward(self, queries, keys, values, valid_lens):
            queries, keys = self.W_q(queries), self.W_k(keys)
            features = queries.unsqueeze(2) + keys.unsqueeze(1)
            features = torch.tanh(features)
            scores = self.w_v(features).squeeze(-1)
            self.attention_weights = masked_softmax(scores, valid_lens)
            return torch.bmm(self.dropout(self.attention_weights), values)

    return AdditiveAttention(8, dropout=0.0)


def test_d2l_additive_attention_matches_torch():
    ours, theirs = _twins(d2l_attention)
    rng = np.random.default_rng(3)
    queries, keys, values = rng.standard_normal((2, 1, 20)), rng.standard_normal((2, 10, 2)), \
        rng.standard_normal((2, 10, 4))
    upstream = rng.standard_normal((2, 1, 4))
    outs = []
    for model, lib in ((ours, compat), (theirs, torch)):
        q = lib.tensor(queries, requires_grad=True)
        out = model(q, lib.tensor(keys), lib.tensor(values), lib.tensor([2, 6]))
        out.backward(lib.tensor(upstream))
        outs.append((out, q))
    np.testing.assert_allclose(outs[0][0].numpy(), outs[1][0].detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(outs[0][1].grad, outs[1][1].grad.numpy(), rtol=RTOL, atol=ATOL)
    _assert_same_grads(ours, theirs)


def annotated_mha(torch):
    """The Annotated Transformer's ``MultiHeadedAttention`` and ``subsequent_mask``."""
    nn, F = torch.nn, torch.nn.functional

    def attention(query, key, value, mask=None):
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        return torch.matmul(p_attn, value), p_attn

    class MultiHeadedAttention(nn.Module):
        def __init__(self, h, d_model):
            super().__init__()
            self.d_k, self.h = d_model // h, h
            self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])
            self.norm = nn.LayerNorm(d_model)

        def forward(self, query, key, value, mask=None):
            if mask is not None:
                mask = mask.unsqueeze(1)
            nbatches = query.size(0)
            query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                                 for lin, x in zip(self.linears, (query, key, value))]
            x, self.attn = attention(query, key, value, mask=mask)
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
            return self.norm(F.relu(self.linears[-1](x)) + query.transpose(1, 2).reshape(x.shape))

    return MultiHeadedAttention(2, 8)


def subsequent_mask(torch, size):
    attn_shape = (1, size, size)
    mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return mask == 0


def test_annotated_transformer_attention_matches_torch():
    ours, theirs = _twins(annotated_mha)
    rng = np.random.default_rng(4)
    x, upstream = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    outs = []
    for model, lib in ((ours, compat), (theirs, torch)):
        inp = lib.tensor(x, requires_grad=True)
        out = model(inp, inp, inp, subsequent_mask(lib, 5))
        out.backward(lib.tensor(upstream))
        outs.append((out, inp))
    np.testing.assert_allclose(outs[0][0].numpy(), outs[1][0].detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(outs[0][1].grad, outs[1][1].grad.numpy(), rtol=RTOL, atol=ATOL)
    _assert_same_grads(ours, theirs)


def gpt(torch, vocab_size=11, block_size=8, n_embd=16, n_head=2, n_layer=2):
    """A GPT in the style of a ``model.py``: causal self-attention, MLP, weight tying, init by ``apply``."""
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                 .view(1, 1, block_size, block_size), persistent=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT()


def train_gpt(torch, model, batches, steps=4, accumulation=2, warmup=2):
    """nanoGPT's loop: cosine schedule through LambdaLR, gradient accumulation, clipping; the losses."""
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-2, betas=(0.9, 0.95))

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    losses = []
    for step in range(steps):
        for micro in range(accumulation):
            x, y = batches[step * accumulation + micro]
            _, loss = model(torch.tensor(x), torch.tensor(y))
            loss = loss / accumulation
            loss.backward()
            losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return losses


def test_gpt_model_file_matches_torch_outputs_gradients_and_training():
    ours, theirs = _twins(gpt)
    assert ours.wte.weight is ours.lm_head.weight
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 11, (2, 8))
    targets = rng.integers(0, 11, (2, 8))
    targets[0, :2] = -1
    upstream = rng.standard_normal((2, 8, 11))
    outs = []
    for model, lib in ((ours, compat), (theirs, torch)):
        logits, loss = model(lib.tensor(idx), lib.tensor(targets))
        (logits * lib.tensor(upstream)).sum().backward(retain_graph=True)
        loss.backward()
        outs.append((logits, loss))
    np.testing.assert_allclose(outs[0][0].numpy(), outs[1][0].detach().numpy(), rtol=RTOL, atol=ATOL)
    assert abs(outs[0][1].item() - outs[1][1].item()) < 1e-12
    _assert_same_grads(ours, theirs)

    ours.zero_grad(), theirs.zero_grad()
    batches = [(rng.integers(0, 11, (2, 8)), rng.integers(0, 11, (2, 8))) for _ in range(8)]
    our_losses, their_losses = train_gpt(compat, ours, batches), train_gpt(torch, theirs, batches)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-9)
    compat.manual_seed(0)
    sample = ours.generate(compat.tensor([[1, 2]]), 5, top_k=3)
    assert sample.shape == (1, 7) and sample.dtype == compat.long


@pytest.mark.parametrize("batch_first", [False, True])
def test_full_transformer_matches_torch(batch_first):
    B, S, T, E = 2, 5, 4, 8
    build = lambda lib: lib.nn.Transformer(E, 2, 1, 2, 16, dropout=0.0, batch_first=batch_first)  # noqa: E731
    ours, theirs = _twins(build)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    rng = np.random.default_rng(6)
    src_shape, tgt_shape = ((B, S, E), (B, T, E)) if batch_first else ((S, B, E), (T, B, E))
    src, tgt, upstream = rng.standard_normal(src_shape), rng.standard_normal(tgt_shape), rng.standard_normal(tgt_shape)
    padding = np.array([[False] * S, [False] * 4 + [True]])
    results = []
    for model, lib in ((ours, compat), (theirs, torch)):
        x, y = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        mask = lib.nn.Transformer.generate_square_subsequent_mask(T, dtype=lib.float64)
        out = model(x, y, tgt_mask=mask, src_key_padding_mask=lib.tensor(padding),
                    memory_key_padding_mask=lib.tensor(padding))
        out.backward(lib.tensor(upstream))
        results.append((out, x, y))
    (o1, x1, y1), (o2, x2, y2) = results
    np.testing.assert_allclose(o1.numpy(), o2.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x1.grad, x2.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y1.grad, y2.grad.numpy(), rtol=RTOL, atol=ATOL)
    _assert_same_grads(ours, theirs)


@pytest.mark.parametrize("name, make_target", [
    ("KLDivLoss", lambda rng: np.where(rng.random((3, 5)) < 0.3, 0.0, rng.random((3, 5)))),
    ("MSELoss", lambda rng: rng.standard_normal((3, 5))),
    ("NLLLoss", lambda rng: np.array([0, 4, 2])),
    ("CrossEntropyLoss", lambda rng: np.array([1, 3, 0])),
])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_losses_match_torch(name, make_target, reduction):
    rng = np.random.default_rng(7)
    logits, target = rng.standard_normal((3, 5)), make_target(rng)
    results = []
    for lib in (compat, torch):
        x = lib.tensor(logits, requires_grad=True)
        input = lib.nn.functional.log_softmax(x, dim=-1) if name in ("KLDivLoss", "NLLLoss") else x
        loss = getattr(lib.nn, name)(reduction=reduction)(input, lib.tensor(target))
        loss.backward()
        results.append((loss.item(), np.asarray(x.grad)))
    assert abs(results[0][0] - results[1][0]) < 1e-12
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=RTOL, atol=ATOL)


def test_functional_pad_and_one_hot_match_torch():
    rng = np.random.default_rng(8)
    x, upstream = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 7))
    grads = []
    for lib in (compat, torch):
        t = lib.tensor(x, requires_grad=True)
        out = lib.nn.functional.pad(t, (1, 2, 0, 2), value=0.5)
        out.backward(lib.tensor(upstream))
        grads.append((np.asarray(out.detach().numpy()), np.asarray(t.grad)))
        hot = lib.nn.functional.one_hot(lib.tensor([2, 0, 1]), 4)
        grads.append((hot.numpy(),))
    np.testing.assert_array_equal(grads[0][0], grads[2][0])
    np.testing.assert_array_equal(grads[0][1], grads[2][1])
    np.testing.assert_array_equal(grads[1][0], grads[3][0])


def test_a_missing_name_says_so():
    for namespace, name in ((compat, "no_such_name"), (compat.nn, "Conv4d"), (compat.nn.functional, "conv4d")):
        with pytest.raises(AttributeError, match=f"has no `{name}` yet"):
            getattr(namespace, name)


def test_module_conveniences_and_checkpoints_round_trip(tmp_path):
    import copy

    nn = compat.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    attention = nn.ModuleDict({"mha": nn.MultiheadAttention(8, 2, batch_first=True), "head": model})
    attention.register_buffer("scale", compat.ones(1))
    keys = list(attention.state_dict())
    assert "mha.in_proj_weight" in keys and "mha.out_proj.weight" in keys and "scale" in keys
    twin = copy.deepcopy(attention)
    twin.train(False)
    assert not twin.training and attention.training
    path = tmp_path / "model.npz"
    compat.save(attention.state_dict(), path)
    fresh = nn.ModuleDict({"mha": nn.MultiheadAttention(8, 2, batch_first=True), "head": copy.deepcopy(model)})
    fresh.register_buffer("scale", compat.zeros(1))
    fresh.load_state_dict(compat.load(path))
    for (name, a), b in zip(attention.state_dict().items(), fresh.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=name)
    x = compat.randn(2, 3, 8)
    np.testing.assert_array_equal(attention["mha"](x, x, x)[0].numpy(), fresh["mha"](x, x, x)[0].numpy())
