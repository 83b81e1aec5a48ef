"""``load(cls, path)``: build a model from a folder's config and fill it with its safetensors weights."""

import numpy as np

from .bert import BertModel, bert_state_dict
from .files import read_config, read_weights, refuse, resolve
from .gpt2 import GPT2LMHeadModel, GPT2Model, gpt2_state_dict

_MODEL_TYPES = {BertModel: "bert", GPT2Model: "gpt2", GPT2LMHeadModel: "gpt2"}


def _file_dtype(weights):
    """float64 when the file holds float64 weights, float32 otherwise (float16 is widened)."""
    kinds = {value.dtype for value in weights.values() if value.dtype.kind == "f"}
    return np.float64 if np.dtype(np.float64) in kinds else np.float32


def load(cls, path, dtype=None):
    """A ``cls`` (``BertModel``, ``GPT2Model`` or ``GPT2LMHeadModel``) built from ``path``'s
    ``config.json``, holding ``model.safetensors``' weights, in ``dtype`` (default: the file's),
    in eval mode. Missing, unexpected or mis-shaped weights raise one error naming them all."""
    folder = resolve(path)
    config = read_config(folder)
    refuse(config, "model_type", [_MODEL_TYPES[cls]], cls.__name__)
    weights = read_weights(folder)
    if cls is BertModel:
        state = bert_state_dict(weights)
        model = BertModel(config, add_pooling_layer="pooler.dense.weight" in state)
    else:
        model = cls(config)
        full = model.transformer.config if cls is GPT2LMHeadModel else model.config
        bare = {name.removeprefix("transformer."): value for name, value in weights.items()}
        if cls is GPT2Model:
            bare.pop("lm_head.weight", None)
            state = gpt2_state_dict(bare, full)
        else:
            state = {(name if name == "lm_head.weight" else "transformer." + name): value
                     for name, value in gpt2_state_dict(bare, full).items()}
    model.to(dtype or _file_dtype(weights))
    model.load_state_dict(state)
    return model.eval()
