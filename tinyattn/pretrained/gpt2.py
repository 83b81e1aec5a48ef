"""GPT-2 (Radford et al. 2019) as a tinyattn module, in Hugging Face's ``GPT2Model`` and
``GPT2LMHeadModel`` layout.

    h      = wte[input_ids] + wpe[0 … L-1]                          (B, L, E)
    h      = h + attn(ln_1(h)),  h = h + mlp(ln_2(h))               causal, × n_layer (pre-norm)
    logits = ln_f(h) wteᵀ                                           (B, L, V), the LM head tied to wte

Each block is an ``nn.TransformerEncoderLayer(norm_first=True, activation=nn.GELU("tanh"))``
run with ``is_causal=True``; GPT-2's ``Conv1D`` weights are stored transposed and its ``c_attn``
stacks the query, key and value projections, which ``gpt2_state_dict`` splits into the layer's
``q_proj``, ``k_proj`` and ``v_proj``.

**The KV cache.** Generating one token at a time, the keys and values of past positions never
change, so each layer keeps them (``past_key_values``: one dict per layer with ``"key"`` and
``"value"``, ``(B, H, T, head_dim)``) and a step computes the new position's query, key and value
only, with the layer's own attention (``MultiHeadAttention``'s ``kv_cache``):

    K, V = cat(K_past, k_new), cat(V_past, v_new)           (B, H, T + L, head_dim)
    out  = softmax(q_new Kᵀ / √head_dim + mask) V           new position i sees keys ≤ T + i

>>> import tinyattn as ta
>>> model = GPT2LMHeadModel(dict(vocab_size=40, n_positions=16, n_embd=8, n_layer=2, n_head=2)).eval()
>>> ids = ta.tensor([[3, 1, 4]])
>>> model(ids).logits.shape
(1, 3, 40)
>>> (model.generate(ids, 5, use_cache=True) == model.generate(ids, 5, use_cache=False)).all()
np.True_
"""

from dataclasses import dataclass

import numpy as np

from .. import nn
from ..creation import arange, tensor
from ..engine import no_grad
from ..nn import functional as F
from .bert import key_mask
from .files import activation_of, refuse
from .loading import load

GPT2_DEFAULTS = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                     activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                     layer_norm_epsilon=1e-5, tie_word_embeddings=True)


def gpt2_config(config):
    """``config`` with GPT-2's defaults filled in; refuses what tinyattn cannot represent, naming the field."""
    config = {**GPT2_DEFAULTS, **config}
    refuse(config, "scale_attn_weights", [True], "GPT2Model")
    refuse(config, "scale_attn_by_inverse_layer_idx", [False], "GPT2Model")
    refuse(config, "add_cross_attention", [False], "GPT2Model")
    activation_of(config["activation_function"], "activation_function", "GPT2Model")
    return config


@dataclass
class GPT2Output:
    """``last_hidden_state (B, L, E)`` (after ``ln_f``), or ``logits (B, L, V)`` from the LM head;
    ``past_key_values`` (with a cache), ``hidden_states`` and ``attentions`` (with the options).

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import GPT2LMHeadModel
    >>> model = GPT2LMHeadModel(dict(vocab_size=20, n_embd=8, n_layer=1, n_head=2, n_positions=8)).eval()
    >>> out = model(ta.tensor([[1, 4, 2]]), use_cache=True)
    >>> out.logits.shape, out.last_hidden_state.shape, len(out.past_key_values)
    ((1, 3, 20), (1, 3, 8), 1)
    """

    last_hidden_state: object = None
    logits: object = None
    past_key_values: list = None
    hidden_states: tuple = None
    attentions: tuple = None


def _cached_block(layer, x, cache, attn_mask, need_weights):
    """One pre-norm block, ``x + SA(ln_1(x))`` then ``x + FF(ln_2(x))``, with the layer's own parts, its
    attention appending the new keys and values to ``cache`` and attending over all of them."""
    out, weights = layer.self_attn(layer.norm1(x), attn_mask=attn_mask, need_weights=need_weights,
                                   kv_cache=cache)  # (B, L, E), (B, H, L, T + L) or None
    x = x + layer.dropout1(out)  # (B, L, E)
    return x + layer._ff_block(layer.norm2(x)), weights


class GPT2Model(nn.Module):
    """GPT-2's body: ``GPT2Model(config)``, ``config`` a dict like ``config.json``'s.

    ``forward(input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
    use_cache=False, inputs_embeds=None, output_attentions=False, output_hidden_states=False)``
    -> ``GPT2Output``. ``attention_mask`` (padding, ``(B, T + L)`` 1/0 or boolean ``(B, 1, 1, T + L)``)
    combines with the causal mask. ``use_cache=True`` or a ``past_key_values`` list (one dict per
    layer, empty to start) runs the cached route and returns the cache, extended.

    A randomly initialised tiny GPT-2 body (``GPT2Model.from_pretrained(folder)`` loads real weights):

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import GPT2Model
    >>> _ = ta.manual_seed(0)
    >>> model = GPT2Model(dict(vocab_size=20, n_embd=8, n_layer=1, n_head=2, n_positions=8)).eval()
    >>> model(ta.tensor([[1, 4, 2]])).last_hidden_state.shape
    (1, 3, 8)
    """

    model_type = "gpt2"  # config.json's, checked by from_pretrained

    def __init__(self, config):
        super().__init__()
        self.config = config = gpt2_config(config)
        E = config["n_embd"]
        self.wte = nn.Embedding(config["vocab_size"], E)
        self.wpe = nn.Embedding(config["n_positions"], E)
        self.drop = nn.Dropout(config["embd_pdrop"])
        self.h = nn.ModuleList([self._block(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(E, eps=config["layer_norm_epsilon"])

    @staticmethod
    def _block(config):
        E = config["n_embd"]
        layer = nn.TransformerEncoderLayer(
            E, config["n_head"], config["n_inner"] or 4 * E, dropout=config["resid_pdrop"],
            activation=activation_of(config["activation_function"], "activation_function", "GPT2Model"),
            layer_norm_eps=config["layer_norm_epsilon"], norm_first=True,
        )
        layer.self_attn.dropout = config["attn_pdrop"]
        layer.dropout = nn.Dropout(0.0)  # GPT-2 has none after the activation
        return layer

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        return load(cls, path, dtype)

    @classmethod
    def from_weights(cls, config, weights):
        """``(model, state_dict)`` from a config and a file's weights (``loading.load`` asks)."""
        model = cls(config)
        bare = {name.removeprefix("transformer."): value for name, value in weights.items()}
        bare.pop("lm_head.weight", None)
        return model, gpt2_state_dict(bare, model.config)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=False, inputs_embeds=None, output_attentions=False, output_hidden_states=False):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("GPT2Model: give exactly one of input_ids and inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.wte(input_ids)  # (B, L) -> (B, L, E)
        B, L, _ = inputs_embeds.shape
        cached = use_cache or past_key_values is not None
        if cached and past_key_values is None:
            past_key_values = [{} for _ in self.h]
        past = past_key_values[0]["key"].shape[2] if cached and past_key_values[0] else 0
        if past + L > self.wpe.num_embeddings:
            raise ValueError(f"GPT2Model: {past} cached + {L} new positions exceed "
                             f"n_positions={self.wpe.num_embeddings}")
        if position_ids is None:
            position_ids = arange(past, past + L, device=inputs_embeds.device)  # (L,)
        h = self.drop(inputs_embeds + self.wpe(position_ids))  # (B, L, E)
        mask = key_mask(attention_mask)  # (B, 1, 1, T + L) or None
        if cached:  # new query i sits at position past + i and sees keys j <= past + i
            keys_at = arange(past + L, device=h.device).reshape(1, -1)  # (1, T + L)
            allowed = keys_at <= arange(past, past + L, device=h.device).reshape(-1, 1)  # (L, T + L)
            mask = allowed if mask is None else mask & allowed  # (B, 1, L, T + L)
        hidden_states, attentions = [], []
        for i, layer in enumerate(self.h):
            hidden_states.append(h)
            if cached:
                h, weights = _cached_block(layer, h, past_key_values[i], mask, output_attentions)
            else:
                kept = layer.keep_attn_weights  # a user's own setting comes back afterwards
                layer.keep_attn_weights = kept or output_attentions
                h = layer(h, src_mask=mask, is_causal=True)  # (B, L, E)
                weights, layer.keep_attn_weights = layer.attn_weights, kept
            if output_attentions:
                attentions.append(weights.detach())  # (B, H, L, T + L)
        h = self.ln_f(h)
        hidden_states.append(h)
        return GPT2Output(
            last_hidden_state=h,
            past_key_values=past_key_values if cached else None,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with its language-model head: ``logits = last_hidden_state @ wte.weightᵀ`` (tied, as
    GPT-2 is; a config with ``tie_word_embeddings: false`` gets its own ``lm_head``). ``forward``
    takes ``GPT2Model``'s arguments and returns a ``GPT2Output`` with ``logits``.

    A randomly initialised tiny GPT-2 (``from_pretrained(folder)`` loads real weights):

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import GPT2LMHeadModel
    >>> _ = ta.manual_seed(0)
    >>> model = GPT2LMHeadModel(dict(vocab_size=20, n_embd=8, n_layer=1, n_head=2, n_positions=8)).eval()
    >>> model(ta.tensor([[1, 4, 2]])).logits.shape
    (1, 3, 20)
    >>> model.generate(ta.tensor([[1, 4]]), max_new_tokens=3).shape
    (1, 5)
    """

    model_type = "gpt2"  # config.json's, checked by from_pretrained

    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.config = config = self.transformer.config
        tied = config["tie_word_embeddings"]
        self.lm_head = None if tied else nn.Linear(config["n_embd"], config["vocab_size"], bias=False)

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        return load(cls, path, dtype)

    @classmethod
    def from_weights(cls, config, weights):
        """``(model, state_dict)`` from a config and a file's weights (``loading.load`` asks)."""
        model = cls(config)
        bare = {name.removeprefix("transformer."): value for name, value in weights.items()}
        state = {(name if name == "lm_head.weight" else "transformer." + name): value
                 for name, value in gpt2_state_dict(bare, model.transformer.config).items()}
        return model, state

    def forward(self, input_ids=None, **kwargs):
        out = self.transformer(input_ids, **kwargs)
        h = out.last_hidden_state  # (B, L, E)
        weight = self.transformer.wte.weight if self.lm_head is None else self.lm_head.weight  # (V, E)
        out.logits = F.linear(h, weight)  # (B, L, V)
        return out

    @no_grad()
    def generate(self, input_ids, max_new_tokens, use_cache=True):
        """Greedy decoding: ``max_new_tokens`` times append the most likely next token. With
        ``use_cache`` the prompt runs once and each step feeds one token through the KV cache;
        without, each step runs the whole sequence again. Returns ``(B, L + max_new_tokens)`` ids
        (a NumPy array)."""
        device = self.transformer.wte.weight.device
        ids = np.asarray(input_ids.numpy() if hasattr(input_ids, "numpy") else input_ids)  # (B, L)
        cache, feed = ([{} for _ in self.transformer.h] if use_cache else None), ids
        for _ in range(max_new_tokens):
            out = self(tensor(feed, device=device), past_key_values=cache)
            best = out.logits[:, -1].numpy().argmax(axis=-1)  # (B,)
            ids = np.concatenate([ids, best[:, None]], axis=1)  # (B, L + 1)
            feed = ids[:, -1:] if use_cache else ids
        return ids


def gpt2_state_dict(weights, config):
    """Hugging Face GPT-2 names and layout -> this module's: ``Conv1D`` weights ``(in, out)``
    transposed to ``Linear``'s ``(out, in)``; ``c_attn`` (``E × 3E``, q|k|v) split into three;
    the causal-mask buffers (``attn.bias``, ``attn.masked_bias``) and a tied ``lm_head`` dropped."""
    E, state = config["n_embd"], {}
    for name, value in weights.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        if name == "lm_head.weight" and config["tie_word_embeddings"]:
            continue
        if name.startswith("h.") or name.startswith("transformer.h."):
            prefix, rest = name.split("h.", 1)
            index, part = rest.split(".", 1)
            base = f"{prefix}h.{index}."
            if part in ("attn.c_attn.weight", "attn.c_attn.bias"):
                leaf = part.rsplit(".", 1)[1]
                pieces = np.split(value.T if leaf == "weight" else value, [E, 2 * E], axis=0)
                for projection, piece in zip(("q_proj", "k_proj", "v_proj"), pieces):
                    state[f"{base}self_attn.{projection}.{leaf}"] = np.ascontiguousarray(piece)
                continue
            renamed = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "self_attn.out_proj",
                       "mlp.c_fc": "linear1", "mlp.c_proj": "linear2"}
            module, leaf = part.rsplit(".", 1)
            if leaf == "weight" and module in ("attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
                value = np.ascontiguousarray(value.T)  # Conv1D (in, out) -> Linear (out, in)
            name = base + renamed.get(module, module) + "." + leaf
        state[name] = value
    return state
