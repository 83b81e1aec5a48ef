"""``load(cls, path)``: build a model from a folder's config and fill it with its safetensors weights."""

import numpy as np

from .files import read_config, read_weights, refuse, resolve


def _file_dtype(weights):
    """float64 when the file holds float64 weights, float32 otherwise (float16 is widened)."""
    kinds = {value.dtype for value in weights.values() if value.dtype.kind == "f"}
    return np.float64 if np.dtype(np.float64) in kinds else np.float32


def load(cls, path, dtype=None):
    """A ``cls`` (``BertModel``, ``GPT2Model`` or ``GPT2LMHeadModel``) built from ``path``'s
    ``config.json``, holding ``model.safetensors``' weights, in ``dtype`` (default: the file's),
    in eval mode. Missing, unexpected or mis-shaped weights raise one error naming them all.
    The class names its ``model_type`` and builds itself and its state dict from the file's weights
    (``cls.from_weights(config, weights) -> (model, state)``)."""
    folder = resolve(path)
    config = read_config(folder)
    refuse(config, "model_type", [cls.model_type], cls.__name__)
    weights = read_weights(folder)
    model, state = cls.from_weights(config, weights)
    model.to(dtype or _file_dtype(weights))
    model.load_state_dict(state)
    return model.eval()
