"""Reading a pretrained folder: ``config.json``, ``model.safetensors`` and ``tokenizer.json``.

Weights are read with the ``safetensors`` package's NumPy API (no torch, no pickle); the
tokenizer is the ``tokenizers`` package's. Both are imported only when asked for, and their
absence says what to install (``pip install "tinyattn[pretrained]"``). A name that is not a
local folder is taken as a Hugging Face Hub id, fetched with ``huggingface_hub`` when it is
installed and the machine is online.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..creation import tensor
from ..nn import functional as F

_INSTALL = 'pip install "tinyattn[pretrained]" (safetensors, tokenizers, huggingface_hub)'
_FILES = ["config.json", "model.safetensors", "tokenizer.json"]


def _require(module, purpose):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as error:
        raise ImportError(f"tinyattn.pretrained needs {module.split('.')[0]} {purpose}: {_INSTALL}") from error


def resolve(path):
    """A local folder for ``path``: the folder itself, or a Hub id downloaded with ``huggingface_hub``."""
    folder = Path(path)
    if folder.is_dir():
        return folder
    if folder.exists():
        raise ValueError(f"from_pretrained: {path!r} is a file; give the folder holding config.json and "
                         "model.safetensors")
    hub = _require("huggingface_hub", f"to fetch {path!r}, which is not a local folder,")
    return Path(hub.snapshot_download(str(path), allow_patterns=_FILES + ["vocab.txt"]))


def read_config(folder):
    """``config.json`` of ``folder`` as a dict."""
    path = Path(folder) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"from_pretrained: no config.json in {folder}")
    return json.loads(path.read_text(encoding="utf-8"))


def read_weights(folder):
    """``model.safetensors`` of ``folder`` as a dict of name -> NumPy array."""
    path = Path(folder) / "model.safetensors"
    if not path.exists():
        raise FileNotFoundError(f"from_pretrained: no model.safetensors in {folder} (pytorch_model.bin, a "
                                "pickle, is not read; convert it to safetensors)")
    return _require("safetensors.numpy", "to read model.safetensors").load_file(str(path))


def refuse(config, field, allowed, model):
    """Raise ``ValueError`` naming ``field`` when ``config[field]`` is not one of ``allowed``."""
    if field in config and config[field] not in allowed:
        raise ValueError(f"{model}: config.json has {field}={config[field]!r}; tinyattn can represent only "
                         f"{' or '.join(repr(a) for a in allowed)}")


def activation_of(name, field, model):
    """The GELU or ReLU a config's activation name means, as ``TransformerEncoderLayer`` takes it."""
    from ..nn import GELU

    table = {"gelu": "gelu", "relu": "relu", "gelu_new": GELU(approximate="tanh"),
             "gelu_pytorch_tanh": GELU(approximate="tanh")}
    if name not in table:
        raise ValueError(f"{model}: config.json has {field}={name!r}; tinyattn can represent "
                         f"{', '.join(repr(k) for k in table)}")
    return table[name]


@dataclass
class Batch:
    """Tokenized sentences: ``input_ids (B, L)`` int64, ``attention_mask (B, 1, 1, L)`` bool (``True`` =
    a real token that may be attended, ``F.padding_mask``'s convention), ``token_type_ids (B, L)``,
    ``tokens`` (the word pieces of each sentence, without padding) and ``lengths (B,)``.

    ``Tokenizer`` makes them; by hand:

    >>> import numpy as np
    >>> import tinyattn as ta
    >>> from tinyattn.pretrained import Batch
    >>> lengths = np.array([2, 1])
    >>> batch = Batch(input_ids=ta.tensor([[2, 3], [2, 0]]),
    ...               attention_mask=ta.nn.functional.padding_mask(ta.tensor(lengths), 2),
    ...               token_type_ids=ta.zeros(2, 2, dtype=ta.int64), tokens=[["hi", "you"], ["hi"]], lengths=lengths)
    >>> batch.attention_mask.shape, batch.attention_mask[1].numpy().ravel().tolist()
    ((2, 1, 1, 2), [True, False])
    """

    input_ids: object
    attention_mask: object
    token_type_ids: object
    tokens: list
    lengths: np.ndarray


class Tokenizer:
    """The folder's ``tokenizer.json`` through the ``tokenizers`` package.

    ``tokenizer(sentences, device="cpu")`` -> ``Batch``, padded to the longest sentence and cut
    to ``max_length`` tokens (the tokenizer file's truncation, else the model's positions).

    Args:
        path: a folder holding ``tokenizer.json`` (and, for the default ``max_length``, ``config.json``), or a
            Hub id.
        max_length: the most tokens a sentence keeps.

    A tiny word-level ``tokenizer.json``, made with the ``tokenizers`` package, read back:

    >>> import pathlib, tempfile
    >>> import tokenizers
    >>> from tinyattn.pretrained import Tokenizer
    >>> tmp = tempfile.TemporaryDirectory()
    >>> vocab = {"[PAD]": 0, "[UNK]": 1, "hello": 2, "world": 3}
    >>> words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    >>> words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    >>> words.save(str(pathlib.Path(tmp.name) / "tokenizer.json"))
    >>> batch = Tokenizer(tmp.name)(["hello world", "hello there"])
    >>> batch.input_ids, batch.tokens, batch.lengths.tolist()
    (tensor([[2, 3],
            [2, 1]]), [['hello', 'world'], ['hello', '[UNK]']], [2, 2])
    >>> tmp.cleanup()
    """

    def __init__(self, path, max_length=None):
        tokenizers = _require("tokenizers", "for tokenizer.json")
        folder = resolve(path)
        file = folder / "tokenizer.json"
        if not file.exists():
            raise FileNotFoundError(f"Tokenizer: no tokenizer.json in {folder}")
        self.backend = tokenizers.Tokenizer.from_file(str(file))
        if max_length is None:
            truncation = self.backend.truncation
            config = folder / "config.json"
            positions = read_config(folder).get("max_position_embeddings") if config.exists() else None
            max_length = truncation["max_length"] if truncation else positions
        if max_length is not None:
            self.backend.enable_truncation(max_length)
        self.max_length = max_length
        self.backend.no_padding()

    @classmethod
    def from_pretrained(cls, path, max_length=None):
        return cls(path, max_length)

    def __call__(self, sentences, device="cpu"):
        if isinstance(sentences, str):
            sentences = [sentences]
        encodings = self.backend.encode_batch(list(sentences))
        lengths = np.array([len(e.ids) for e in encodings])
        B, L = len(encodings), int(lengths.max())
        ids, types = np.zeros((B, L), dtype=np.int64), np.zeros((B, L), dtype=np.int64)
        for b, encoding in enumerate(encodings):
            ids[b, :lengths[b]] = encoding.ids
            types[b, :lengths[b]] = encoding.type_ids
        return Batch(
            input_ids=tensor(ids, device=device),  # (B, L)
            attention_mask=F.padding_mask(tensor(lengths, device=device), L),  # (B, 1, 1, L)
            token_type_ids=tensor(types, device=device),  # (B, L)
            tokens=[list(e.tokens) for e in encodings],
            lengths=lengths,
        )

    def decode(self, ids):
        return self.backend.decode([int(i) for i in ids])
