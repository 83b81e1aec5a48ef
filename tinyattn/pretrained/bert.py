"""BERT (Devlin et al. 2019) as a tinyattn module, in Hugging Face's ``BertModel`` layout.

    h      = LayerNorm(word[input_ids] + position[0 … L-1] + token_type[token_type_ids])   (B, L, E)
    h      = post-norm GELU encoder layer(h, attention_mask)                      × num_hidden_layers
    pooled = tanh(dense(h[:, 0]))                                                  (B, E), optional

Every part is a library layer: ``nn.Embedding``, ``nn.LayerNorm`` and ``nn.TransformerEncoder``
of ``nn.TransformerEncoderLayer(activation="gelu", norm_first=False)``, whose ``q_proj``,
``k_proj`` and ``v_proj`` are BERT's separate query, key and value ``Linear`` layers.
Dropout sits where BERT puts it: ``attention_probs_dropout_prob`` on the attention weights,
``hidden_dropout_prob`` after the embeddings and each block; none after the activation.

>>> import tinyattn as ta
>>> model = BertModel(dict(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
...                        intermediate_size=16, max_position_embeddings=16)).eval()
>>> out = model(ta.tensor([[1, 5, 7, 2], [1, 9, 2, 0]]), attention_mask=ta.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
...             output_attentions=True)
>>> out.last_hidden_state.shape, out.pooler_output.shape, out.attentions[1].shape
((2, 4, 8), (2, 8), (2, 2, 4, 4))
"""

from dataclasses import dataclass

from .. import nn
from ..creation import arange, zeros
from .files import activation_of, refuse
from .loading import load

BERT_DEFAULTS = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                     layer_norm_eps=1e-12, pad_token_id=0)


def bert_config(config):
    """``config`` (a dict, as in ``config.json``) with BERT's defaults filled in; refuses what
    tinyattn cannot represent, naming the field."""
    config = {**BERT_DEFAULTS, **config}
    refuse(config, "position_embedding_type", ["absolute"], "BertModel")
    refuse(config, "is_decoder", [False], "BertModel")
    refuse(config, "add_cross_attention", [False], "BertModel")
    activation_of(config["hidden_act"], "hidden_act", "BertModel")
    return config


@dataclass
class BertOutput:
    """``last_hidden_state (B, L, E)``; ``pooler_output (B, E)`` or ``None``; with the options,
    ``hidden_states`` (the embeddings' output and each layer's, ``num_hidden_layers + 1``) and
    ``attentions`` (each layer's weights ``(B, H, L, L)``, detached).

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import BertModel
    >>> model = BertModel(dict(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...                        intermediate_size=16, max_position_embeddings=8)).eval()
    >>> out = model(ta.tensor([[1, 4, 2]]), output_hidden_states=True, output_attentions=True)
    >>> len(out.hidden_states), out.attentions[0].shape
    (2, (1, 2, 3, 3))
    """

    last_hidden_state: object
    pooler_output: object = None
    hidden_states: tuple = None
    attentions: tuple = None


def key_mask(attention_mask):
    """A model's ``attention_mask`` in tinyattn's convention: a ``(B, L)`` tensor of 1s and 0s (or
    booleans; Hugging Face's form) becomes boolean ``(B, 1, 1, L)``, ``True`` = may attend; a 4-D
    mask (``F.padding_mask``'s) passes as it is."""
    if attention_mask is None or attention_mask.ndim != 2:
        return attention_mask
    B, L = attention_mask.shape
    return (attention_mask != 0).reshape(B, 1, 1, L)  # (B, 1, 1, L)


class BertEmbeddings(nn.Module):
    """``norm(word[ids] + position[positions] + token_type[types])``, then dropout."""

    def __init__(self, config):
        super().__init__()
        E = config["hidden_size"]
        self.word_embeddings = nn.Embedding(config["vocab_size"], E, padding_idx=config["pad_token_id"])
        self.position_embeddings = nn.Embedding(config["max_position_embeddings"], E)
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], E)
        self.norm = nn.LayerNorm(E, eps=config["layer_norm_eps"])
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, L) -> (B, L, E)
        B, L, _ = inputs_embeds.shape
        if L > self.position_embeddings.num_embeddings:
            raise ValueError(f"BertModel: {L} tokens, more than max_position_embeddings="
                             f"{self.position_embeddings.num_embeddings}")
        if position_ids is None:
            position_ids = arange(L, device=inputs_embeds.device)  # (L,)
        if token_type_ids is None:
            token_type_ids = zeros(B, L, dtype="int64", device=inputs_embeds.device)  # (B, L)
        h = inputs_embeds + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(h))  # (B, L, E)


class BertPooler(nn.Module):
    """``tanh(dense(h[:, 0]))``: the first token's ([CLS]) final state, through a dense layer."""

    def __init__(self, hidden_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states):
        return self.dense(hidden_states[:, 0]).tanh()  # (B, E)


class BertModel(nn.Module):
    """BERT's encoder: ``BertModel(config, add_pooling_layer=True)``, ``config`` a dict like
    ``config.json``'s. ``forward(input_ids=None, attention_mask=None, token_type_ids=None,
    position_ids=None, inputs_embeds=None, output_attentions=False, output_hidden_states=False)``
    -> ``BertOutput``. ``attention_mask``: ``(B, L)`` 1/0 (Hugging Face's form) or boolean
    ``(B, 1, 1, L)`` (``Tokenizer``'s and ``F.padding_mask``'s), ``True`` = may attend.
    ``inputs_embeds (B, L, E)`` replaces the word embeddings (for gradients with respect to them).

    A randomly initialised tiny BERT (``BertModel.from_pretrained(folder)`` loads real weights):

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import BertModel
    >>> _ = ta.manual_seed(0)
    >>> model = BertModel(dict(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...                        intermediate_size=16, max_position_embeddings=8)).eval()
    >>> out = model(ta.tensor([[1, 4, 2, 0]]), attention_mask=ta.tensor([[1, 1, 1, 0]]))
    >>> out.last_hidden_state.shape, out.pooler_output.shape
    ((1, 4, 8), (1, 8))
    """

    model_type = "bert"  # config.json's, checked by from_pretrained

    def __init__(self, config, add_pooling_layer=True):
        super().__init__()
        self.config = config = bert_config(config)
        layer = nn.TransformerEncoderLayer(
            config["hidden_size"], config["num_attention_heads"], config["intermediate_size"],
            dropout=config["hidden_dropout_prob"], activation=activation_of(config["hidden_act"], "hidden_act", ""),
            layer_norm_eps=config["layer_norm_eps"], norm_first=False,
        )
        layer.self_attn.dropout = config["attention_probs_dropout_prob"]  # on the weights
        layer.dropout = nn.Dropout(0.0)  # BERT has none after the activation
        self.embeddings = BertEmbeddings(config)
        self.encoder = nn.TransformerEncoder(layer, config["num_hidden_layers"])
        self.pooler = BertPooler(config["hidden_size"]) if add_pooling_layer else None

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        """Load a ``BertModel`` folder (``config.json``, ``model.safetensors``) or Hub id; in eval mode."""
        return load(cls, path, dtype)

    @classmethod
    def from_weights(cls, config, weights):
        """``(model, state_dict)`` from a config and a file's weights (``loading.load`` asks)."""
        state = bert_state_dict(weights)
        return cls(config, add_pooling_layer="pooler.dense.weight" in state), state

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, output_attentions=False, output_hidden_states=False):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("BertModel: give exactly one of input_ids and inputs_embeds")
        mask = key_mask(attention_mask)  # (B, 1, 1, L) or None
        h = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)  # (B, L, E)
        hidden_states, attentions = [h], []
        for layer in self.encoder.layers:
            kept = layer.keep_attn_weights  # a user's own setting comes back afterwards
            layer.keep_attn_weights = kept or output_attentions
            h = layer(h, src_mask=mask)  # (B, L, E)
            hidden_states.append(h)
            if output_attentions:
                attentions.append(layer.attn_weights)  # (B, H, L, L)
            layer.keep_attn_weights = kept
        return BertOutput(
            last_hidden_state=h,
            pooler_output=None if self.pooler is None else self.pooler(h),
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )


_LAYER_NAMES = {
    "attention.self.query": "self_attn.q_proj", "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj", "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1", "intermediate.dense": "linear1", "output.dense": "linear2",
    "output.LayerNorm": "norm2",
}


def bert_state_dict(weights):
    """Hugging Face ``BertModel`` names -> this module's (``bert.`` prefixes and the ``position_ids``
    buffer dropped; old ``gamma``/``beta`` LayerNorm names read as ``weight``/``bias``)."""
    state = {}
    for name, value in weights.items():
        name = name.removeprefix("bert.")
        if name == "embeddings.position_ids" or name.startswith(("cls.", "classifier.")):
            continue
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if name.startswith("embeddings."):
            name = name.replace("embeddings.LayerNorm.", "embeddings.norm.")
        elif name.startswith("encoder.layer."):
            _, _, index, rest = name.split(".", 3)
            part, leaf = rest.rsplit(".", 1)
            name = f"encoder.layers.{index}.{_LAYER_NAMES.get(part, part)}.{leaf}"
        state[name] = value
    return state
