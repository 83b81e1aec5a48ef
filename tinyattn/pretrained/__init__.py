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
    """The model of a pretrained folder or Hub id, chosen by ``config.json``'s ``model_type``.

    Args:
        path: a folder holding ``config.json`` and ``model.safetensors``, or a Hugging Face Hub id (downloaded
            with ``huggingface_hub``).
        dtype: the parameters' dtype; default: the file's (float16 widened to float32).

    Returns ``BertModel`` for ``"bert"``, ``GPT2LMHeadModel`` for ``"gpt2"``, in eval mode. A tiny randomly
    initialised BERT saved to a folder and loaded back:

    >>> import json, pathlib, tempfile
    >>> import numpy as np
    >>> import safetensors.numpy
    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import BertModel, from_pretrained
    >>> config = dict(model_type="bert", vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...               num_attention_heads=2, intermediate_size=16, max_position_embeddings=8)
    >>> _ = ta.manual_seed(0)
    >>> saved = BertModel(config).eval()
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name)
    >>> _ = (folder / "config.json").write_text(json.dumps(config))
    >>> safetensors.numpy.save_file(dict(saved.state_dict()), str(folder / "model.safetensors"))
    >>> model = from_pretrained(folder)
    >>> type(model).__name__, model.training
    ('BertModel', False)
    >>> ids = ta.tensor([[1, 4, 2]])
    >>> bool(np.allclose(model(ids).last_hidden_state.numpy(), saved(ids).last_hidden_state.numpy()))
    True
    >>> tmp.cleanup()
    """
    model_type = read_config(resolve(path)).get("model_type")
    if model_type not in _BY_MODEL_TYPE:
        raise ValueError(f"from_pretrained: config.json has model_type={model_type!r}; tinyattn reads "
                         f"{' and '.join(repr(k) for k in _BY_MODEL_TYPE)} (BERT- and GPT-2-family models)")
    return load(_BY_MODEL_TYPE[model_type], path, dtype)


def mean_pooling(last_hidden_state, attention_mask):
    """The mean of each sentence's token states over its real tokens (sentence-transformers'
    pooling): ``Σ_t m_t h_t / Σ_t m_t``; ``attention_mask`` ``(B, L)`` or ``(B, 1, 1, L)``, with at
    least one real token per sentence.

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import mean_pooling
    >>> states = ta.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])    # (1, 3, 2); the last is padding
    >>> mean_pooling(states, ta.tensor([[1, 1, 0]]))
    tensor([[2., 3.]])
    """
    B, L, _ = last_hidden_state.shape
    weights = key_mask(attention_mask).reshape(B, L, 1).to(last_hidden_state.dtype)  # (B, L, 1), 1 at tokens
    return (last_hidden_state * weights).sum(1) / weights.sum(1)  # (B, E)


def normalize(x):
    """Each row divided by its L2 norm, as ``torch.nn.functional.normalize`` (for nonzero rows).

    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import normalize
    >>> normalize(ta.tensor([[3.0, 4.0], [0.0, 2.0]]))
    tensor([[0.6, 0.8],
            [0. , 1. ]])
    """
    return x / (x * x).sum(-1, keepdim=True).sqrt()  # (B, E)


def sentence_embeddings(model, tokenizer, sentences, normalized=True):
    """``(N, E)`` embeddings of ``sentences``: tokenize, run ``model``, mean-pool over the real
    tokens, then L2-normalise (sentence-transformers' all-MiniLM-L6-v2 recipe). Differentiable.

    Args:
        model: a ``BertModel``.
        tokenizer: a ``Tokenizer``.
        sentences: a list of strings (or one string).
        normalized: whether to L2-normalise each embedding.

    A tiny random BERT and a word-level ``tokenizer.json`` made on the spot:

    >>> import pathlib, tempfile
    >>> import tokenizers
    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import BertModel, Tokenizer, sentence_embeddings
    >>> tmp = tempfile.TemporaryDirectory()
    >>> vocab = {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3}
    >>> words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    >>> words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    >>> words.save(str(pathlib.Path(tmp.name) / "tokenizer.json"))
    >>> _ = ta.manual_seed(0)
    >>> model = BertModel(dict(vocab_size=4, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...                        intermediate_size=16, max_position_embeddings=8)).eval()
    >>> embeddings = sentence_embeddings(model, Tokenizer(tmp.name), ["hello world", "hello"])
    >>> embeddings.shape, embeddings.norm(dim=-1).numpy().round(4).tolist()
    ((2, 8), [1.0, 1.0])
    >>> tmp.cleanup()
    """
    device = next(iter(model.parameters())).device
    batch = tokenizer(sentences, device=device)
    states = model(batch.input_ids, attention_mask=batch.attention_mask,
                   token_type_ids=batch.token_type_ids).last_hidden_state  # (N, L, E)
    pooled = mean_pooling(states, batch.attention_mask)  # (N, E)
    return normalize(pooled) if normalized else pooled

